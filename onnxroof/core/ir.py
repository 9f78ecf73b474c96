"""The model as an immutable, shape-annotated DAG of operators.

``build_ir`` turns a shape-inferred ``ModelProto`` (weights not loaded) into:

* one :class:`TensorInfo` per value, with a *role*: ``input`` (fed by the user), ``weight`` (an
  initializer, a ``Constant``, or computable from those alone, e.g. ``ConstantOfShape(initializer)``),
  ``static`` (computable at load time from weights and statically known shapes, e.g. ``Shape(x)`` of a
  fully shaped ``x``) or ``activation`` (everything computed at run time);
* one :class:`OpView` per node, attributes completed with the ONNX schema's defaults;
* its graph index (:class:`~onnxroof.core.index.GraphIndex`: producers, consumers, view aliases), built with it;
* a ``networkx.DiGraph`` keyed by stable node ids ``"{index}:{name or op_type}"`` (ONNX names are
  optional and may repeat), edges labelled with the tensors they carry.

Quantized weights: a ``DequantizeLinear`` of a weight (an int8 initializer, its scale and zero point) is folded
at load time, and its output is a weight with the float dtype but the STORED item size of the quantized input
(1 byte for int8/uint8, 4 for an int32 bias): a QDQ-aware runtime keeps the quantized weight in memory and reads
that many bytes per element, so the Conv/MatMul consuming it is charged those bytes.
"""

from __future__ import annotations

import functools
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

import onnx

from onnxroof.core.dtypes import dtype_info
from onnxroof.core.errors import ShapeUnknown
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.index import GraphIndex, IndexBuilder, build_dag
from onnxroof.core.protos import (
    TypesSeen,
    attributes_and_bodies,
    default_attributes,
    known_type_facts,
    normalize_domain,
    subgraph_outer_inputs,
    topological_order,
    type_facts,
)
from onnxroof.core.states import Role

if TYPE_CHECKING:
    import networkx as nx

#: Ops whose outputs are metadata of their input, computable at load time when the input's shape is known.
SHAPE_OPS = frozenset({"Shape", "Size"})
#: Ops never folded even when their inputs are constant: their values change from run to run.
NONDETERMINISTIC_OPS = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli"}
)
CONTROL_FLOW_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})
#: Quantized ops that compute in an integer type, and the input that has it (their first floating input is a
#: scale, which says nothing about the arithmetic): see :attr:`OpView.dtype`.
INTEGER_COMPUTE_INPUT: Mapping[str, int] = MappingProxyType(
    {
        "QLinearConv": 0,
        "QLinearMatMul": 0,
        "ConvInteger": 0,
        "MatMulInteger": 0,
        "MatMulIntegerToFloat": 0,
        "QGemm": 0,
        "DynamicQuantizeMatMul": 1,  # A is float, quantized on the fly; B is the int8 operand
    }
)


@frozen_dataclass(slots=True)
class TensorInfo:
    """A value's static description. ``shape`` is None when the rank is unknown; a dim is None when
    unknown or symbolic. Never holds tensor data.

    ``itemsize`` is the bytes per element as stored: the dtype's size, except for the weight output of a
    ``DequantizeLinear`` of a weight, which keeps the quantized input's size (see the module docstring)."""

    name: str
    shape: tuple[int | None, ...] | None
    dtype: str
    itemsize: float
    role: Role

    @property
    def is_static_shape(self) -> bool:
        shape = self.shape
        return shape is not None and None not in shape  # `in` runs in C: no generator per call

    @property
    def numel(self) -> int:
        """Element count; raises :class:`ShapeUnknown` when the shape is not fully static."""
        shape = self.shape
        if shape is None or None in shape:
            raise ShapeUnknown(self.name)
        return math.prod(shape)  # type: ignore[arg-type]  # no None in shape: the `in` test above excludes it

    @property
    def nbytes(self) -> float:
        shape = self.shape
        if shape is None or None in shape:
            raise ShapeUnknown(self.name)
        return math.prod(shape) * self.itemsize  # type: ignore[arg-type]  # no None in shape: tested above

    @property
    def is_constant(self) -> bool:
        """Known before the run (weight or load-time static value)."""
        return self.role in (Role.WEIGHT, Role.STATIC)


class OpView(NamedTuple):
    """One node as the rules see it. Missing optional inputs are None.

    A named tuple, not a frozen dataclass: as immutable, and one is built per node, where a frozen dataclass's
    ``__init__`` (``object.__setattr__`` per field) costs several times a tuple's."""

    id: str
    index: int  # type: ignore[assignment]  # the node's position in the file; shadows tuple.index, never called
    name: str
    op_type: str
    domain: str
    opset: int
    inputs: tuple[TensorInfo | None, ...]
    outputs: tuple[TensorInfo | None, ...]
    attrs: Mapping[str, Any] = MappingProxyType({})
    subgraphs: Mapping[str, onnx.GraphProto] = MappingProxyType({})

    def input(self, i: int) -> TensorInfo | None:
        return self.inputs[i] if i < len(self.inputs) else None

    def output(self, i: int) -> TensorInfo | None:
        return self.outputs[i] if i < len(self.outputs) else None

    @property
    def dtype(self) -> str:
        """The dtype the node computes in: its first floating input, else its first output's dtype; for the
        integer-compute quantized ops (:data:`INTEGER_COMPUTE_INPUT`), their integer operand's dtype."""
        index = INTEGER_COMPUTE_INPUT.get(self.op_type)
        operand = self.input(index) if index is not None else None
        if operand is not None and operand.dtype != "unknown":
            return operand.dtype
        for t in self.inputs:
            if t is not None and t.dtype.startswith(("float", "bfloat")) and t.role != Role.STATIC:
                return t.dtype
        for t in (*self.outputs, *self.inputs):
            if t is not None and t.dtype != "unknown":
                return t.dtype
        return "unknown"


@frozen_dataclass
class ModelIR:
    """The whole graph: ops in topological order, every tensor, the graph index built with them; the DAG
    (:attr:`graph`) on first use."""

    ops: tuple[OpView, ...]
    tensors: Mapping[str, TensorInfo]
    graph_inputs: tuple[str, ...]
    graph_outputs: tuple[str, ...]
    index: GraphIndex = field(compare=False, repr=False)
    """Producers, consumers and view aliases (:mod:`onnxroof.core.index`), built with the IR."""
    view_ops: frozenset[tuple[str, str]] = field(compare=False, repr=False)
    """The (domain, op_type) pairs of the views the index (and those of the subgraph bodies) was built with."""
    op_kinds: frozenset[tuple[str, str]] = field(compare=False, repr=False)
    """The distinct (normalized domain, op_type) pairs of :attr:`ops`."""
    bodies: tuple[str, ...] = field(compare=False, repr=False)
    """The ids of the ops holding If/Loop/Scan bodies, in order."""
    opsets: Mapping[str, int] = field(default_factory=dict)
    restate: Restate | None = field(default=None, compare=False, repr=False)
    """The tensor restatement the IR was built with (subgraph bodies are built with the same one)."""
    tied: Mapping[str, str] = field(default_factory=dict)
    """Weights stored twice by the exporter (a tied lm_head's transposed copy): copy -> original
    (:func:`onnxroof.load.tied.tied_copies`); the copy holds no parameters of its own."""

    @functools.cached_property
    def graph(self) -> nx.DiGraph[str]:
        """The ``networkx.DiGraph`` of the ops, keyed by op id, each node's ``op`` attribute its :class:`OpView`;
        an edge ``(producer, reader)`` is labelled ``tensors`` with the names it carries, in the order the
        reader reads them (inputs, then what its If/Loop/Scan bodies read from this scope). Built on first use
        and kept (~1 KB a node in networkx; the analysis itself needs only :meth:`op` and the graph index)."""
        return build_dag(self.ops)

    @functools.cached_property
    def _ops_by_id(self) -> Mapping[str, OpView]:
        return MappingProxyType({op.id: op for op in self.ops})

    def op(self, op_id: str) -> OpView | None:
        """The op with id ``op_id`` (None when there is none); the lookup is built on first use."""
        return self._ops_by_id.get(op_id)


def implicit_reads(op: OpView) -> list[str]:
    """Names ``op``'s If/Loop/Scan bodies read from the enclosing scope, body after body (a name two bodies
    read appears twice, as a name two inputs read does)."""
    return [name for sub in op.subgraphs.values() for name in subgraph_outer_inputs(sub)]


def tensor_info_from_type(
    name: str,
    type_proto: onnx.TypeProto | None,
    role: Role,
    seen: TypesSeen | None = None,
) -> TensorInfo:
    """The :class:`TensorInfo` of a value of type ``type_proto``. ``seen`` (id of a type -> the type and its
    facts), when given, decodes each type object once: the loader's value types share one object per distinct
    type (:func:`~onnxroof.core.protos.graph_value_types`), so tensors of one type then share one shape tuple.
    The type is kept beside its facts, so its id is never reused while ``seen`` lives."""
    if seen is None or type_proto is None:
        return TensorInfo(name, *type_facts(type_proto), role)
    return TensorInfo(name, *known_type_facts(type_proto, seen), role)


Restate = Callable[[TensorInfo], TensorInfo]
"""A what-if restatement of one tensor (element size for another precision or a compressed format; see
:mod:`onnxroof.analysis.whatif`), applied to every tensor as the IR is built."""


def build_ir(
    model: onnx.ModelProto,
    value_types: Mapping[str, onnx.TypeProto],
    restate: Restate | None = None,
    order: Sequence[int] | None = None,
    tied: Mapping[str, str] | None = None,
    *,
    view_ops: frozenset[tuple[str, str]],
    attributes: bool = True,
) -> ModelIR:
    """Build the IR of ``model``'s main graph using inferred ``value_types`` (name -> TypeProto), with its graph
    index. ``view_ops``: the (normalized domain, op_type) pairs whose rule is a view
    (:attr:`onnxroof.core.registry.Registry.view_ops`: core sits below the rules, so the caller passes them).

    ``restate``, when given, maps every tensor's :class:`TensorInfo` as it is created (initializers, graph
    inputs, node outputs, in subgraph bodies too): rules and fusion then see the restated element sizes.
    ``order``, when given, is the graph's :func:`topological_order` already computed (the loader's
    ``LoadedModel.order``); otherwise it is computed here. ``tied``: the loader's tied copies
    (``LoadedModel.tied``). ``attributes=False`` says that no node of the main graph holds an attribute
    (``LoadedModel.attributes``, from the read stage's scan): none is read, every op gets its schema's defaults.
    """
    opsets = {normalize_domain(o.domain): o.version for o in model.opset_import}
    ir = build_graph_ir(
        model.graph, opsets, value_types, restate=restate, order=order, view_ops=view_ops, attributes=attributes
    )
    return replace(ir, tied=MappingProxyType(dict(tied or {})))


def build_graph_ir(
    graph: onnx.GraphProto,
    opsets: Mapping[str, int],
    value_types: Mapping[str, onnx.TypeProto],
    outer: Mapping[str, TensorInfo] | None = None,
    restate: Restate | None = None,
    order: Sequence[int] | None = None,
    *,
    view_ops: frozenset[tuple[str, str]],
    attributes: bool = True,
) -> ModelIR:
    """Build the IR of one graph with its index. ``outer`` holds the enclosing scopes' tensors a subgraph may read;
    ``restate`` maps each new tensor, ``order`` is the graph's topological order if known, ``view_ops`` the view
    op types, ``attributes`` whether a node may hold one (see :func:`build_ir`)."""
    tensors, graph_inputs = _graph_tensors(graph, value_types, outer, restate)
    nodes = graph.node  # indexed in place: a list would hold a wrapper object per node
    if order is None:
        order = topological_order(nodes)
    ops: list[OpView] = []
    index_builder = IndexBuilder()
    kinds: dict[tuple[str, str], _OpKind] = {}  # (op_type, domain) as the file spells them -> their facts
    seen: TypesSeen = {}
    before: tuple[TensorInfo | None, ...] = ()  # the outputs of the node before
    activation = Role.ACTIVATION  # a local: reading an enum member off its class is a slow lookup on Python 3.11
    for index in order:
        node = nodes[index]
        key = (node.op_type, node.domain)
        kind = kinds.get(key) or kinds.setdefault(key, _op_kind(*key, opsets, view_ops, restate))
        op_type = kind.op_type
        if attributes and len(node.attribute):
            attributes_read, bodies_read = attributes_and_bodies(node, kind.defaults)
            subgraphs, attrs = _frozen(bodies_read), _frozen(attributes_read)
        else:  # most nodes: the schema's defaults, one shared read-only view per op type
            subgraphs, attrs = _EMPTY, kind.defaults
        names = node.input
        inputs: tuple[TensorInfo | None, ...]
        if len(names) == 1 and len(before) == 1 and before[0] is not None and before[0].name == names[0]:
            inputs = before  # the one output of the node before: one tuple for both (a chain's usual case)
        else:
            inputs = _inputs(names, tensors)
        first = inputs[0] if inputs else None
        if first is not None and first.role is activation and op_type not in _OWN_ROLE_OPS:
            role = activation  # what _output_role gives any op reading an activation (most ops)
        else:
            role = _output_role(op_type, kind.domain, inputs, subgraphs)
        outputs = node.output
        output = outputs[0] if len(outputs) == 1 else ""
        simple = kind.as_inferred and output
        if simple:  # most nodes: one output (named), kept as inferred
            shape, dtype, itemsize = known_type_facts(value_types.get(output), seen)
            info = tensors[output] = TensorInfo(output, shape, dtype, itemsize, role)
            before = (info,)
        else:
            before = _outputs(outputs, kind, inputs, role, value_types, seen, restate, tensors)
        name = node.name
        op_id = f"{index}:{name or op_type}"
        op = OpView(op_id, index, name, op_type, kind.domain, kind.opset, inputs, before, attrs, subgraphs)
        ops.append(op)
        if simple and len(inputs) <= 1 and not subgraphs:
            index_builder.add_simple(op_id, first.name if first is not None else None, output, kind.view)
        else:
            index_builder.add(op, kind.view)

    bodies = tuple(op.id for op in index_builder.with_bodies)  # the builder keeps them for their implicit reads
    return ModelIR(
        tuple(ops),
        MappingProxyType(tensors),
        tuple(graph_inputs),
        tuple(v.name for v in graph.output),
        index_builder.finish(),
        view_ops,
        frozenset((kind.domain, kind.op_type) for kind in kinds.values()),
        bodies,
        MappingProxyType(dict(opsets)),
        restate,
    )


def _graph_tensors(
    graph: onnx.GraphProto,
    value_types: Mapping[str, onnx.TypeProto],
    outer: Mapping[str, TensorInfo] | None,
    restate: Restate | None,
) -> tuple[dict[str, TensorInfo], list[str]]:
    """The tensors a graph's nodes may read before any node runs (the enclosing scopes' ``outer``, its
    initializers as weights, its inputs), and the names of its inputs that are not initializers."""
    initializer_names = {t.name for t in graph.initializer}
    tensors: dict[str, TensorInfo] = dict(outer or {})
    keep = restate or _same
    for init in graph.initializer:
        dtype, itemsize = dtype_info(init.data_type)
        tensors[init.name] = keep(TensorInfo(init.name, tuple(init.dims), dtype, itemsize, Role.WEIGHT))
    graph_inputs = []
    for value in graph.input:
        if value.name in initializer_names:
            continue
        graph_inputs.append(value.name)
        tensors[value.name] = keep(
            tensor_info_from_type(value.name, value_types.get(value.name, value.type), Role.INPUT)
        )
    return tensors, graph_inputs


def _outputs(
    names: Sequence[str],
    kind: _OpKind,
    inputs: tuple[TensorInfo | None, ...],
    role: Role,
    value_types: Mapping[str, onnx.TypeProto],
    seen: TypesSeen,
    restate: Restate | None,
    tensors: dict[str, TensorInfo],
) -> tuple[TensorInfo | None, ...]:
    """The :class:`TensorInfo` of each output ``names`` of a node of ``kind`` reading ``inputs`` (None for an
    omitted one), of ``role``, restated, each recorded in ``tensors``; ``seen`` as in
    :func:`tensor_info_from_type` (each type decoded once)."""
    outputs: list[TensorInfo | None] = []
    for name in names:
        if not name:
            outputs.append(None)
            continue
        shape, dtype, itemsize = known_type_facts(value_types.get(name), seen)
        info = TensorInfo(name, shape, dtype, itemsize, role)
        if restate is not None:
            info = restate(info)
        if kind.dequantizes:
            info = _stored_size(kind.op_type, kind.domain, inputs, info)
        outputs.append(info)
        tensors[name] = info
    return tuple(outputs)


def _inputs(names: Sequence[str], tensors: Mapping[str, TensorInfo]) -> tuple[TensorInfo | None, ...]:
    """The tensors a node reads, by ``names``: None for an omitted input, an unknown activation for a name that
    no tensor has."""
    return tuple([tensors.get(name) or _unknown(name) if name else None for name in names])


@frozen_dataclass(slots=True)
class _OpKind:
    """What every node of one op type shares (:func:`_op_kind`): op type and normalized domain (interned), opset,
    the schema's default attributes, whether it is a view, whether it is DequantizeLinear (:func:`_stored_size`),
    and whether its outputs are kept as inferred (neither restated nor DequantizeLinear's). A slotted dataclass, not
    a named tuple: the IR builder reads its fields for every node, and a slot is read faster than a tuple field."""

    op_type: str
    domain: str
    opset: int
    defaults: Mapping[str, Any]
    view: bool
    dequantizes: bool
    as_inferred: bool


def _op_kind(
    op_type: str, domain: str, opsets: Mapping[str, int], view_ops: frozenset[tuple[str, str]], restate: Restate | None
) -> _OpKind:
    """The :class:`_OpKind` of nodes of ``op_type`` in ``domain`` (as the file spells it); the opset is the
    domain's, else the default domain's, else 1; ``restate``: the build's (see :func:`build_ir`)."""
    op_type, domain = sys.intern(op_type), sys.intern(normalize_domain(domain))
    opset = opsets.get(domain, opsets.get("", 1))
    defaults, dequantizes = default_attributes(op_type, opset, domain), op_type == "DequantizeLinear"
    view = (domain, op_type) in view_ops
    return _OpKind(op_type, domain, opset, defaults, view, dequantizes, restate is None and not dequantizes)


_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _frozen(mapping: dict[str, Any]) -> Mapping[str, Any]:
    """A read-only view of ``mapping``; one shared empty view for every op without attributes or subgraphs."""
    return MappingProxyType(mapping) if mapping else _EMPTY


def _same(tensor: TensorInfo) -> TensorInfo:
    return tensor


def _stored_size(op_type: str, domain: str, inputs: tuple[TensorInfo | None, ...], info: TensorInfo) -> TensorInfo:
    """``info`` with the stored item size of the quantized weight when it is the weight output of a
    ``DequantizeLinear`` of a weight (dtype unchanged; see the module docstring); ``domain`` normalized."""
    if op_type != "DequantizeLinear":
        return info
    source = inputs[0] if inputs else None
    dequantizes = domain in ("", "com.microsoft")
    if not dequantizes or source is None or source.role != Role.WEIGHT or info.role != Role.WEIGHT:
        return info
    return replace(info, itemsize=source.itemsize)


def _unknown(name: str) -> TensorInfo:
    return TensorInfo(name, None, "unknown", 0.0, Role.ACTIVATION)


#: Integer constants of at most this many elements are shape arithmetic (starts, steps, axes), not weight values.
SHAPE_LIKE_ELEMENTS = 64


def _carries_weight_values(tensor: TensorInfo) -> bool:
    if tensor.role != Role.WEIGHT:
        return False
    return (
        tensor.dtype.startswith(("float", "bfloat")) or not tensor.is_static_shape or tensor.numel > SHAPE_LIKE_ELEMENTS
    )


def _output_role(
    op_type: str, domain: str, inputs: tuple[TensorInfo | None, ...], subgraphs: Mapping[str, onnx.GraphProto]
) -> Role:
    """Role of a node's outputs: constant-only nodes produce weights (or static values), others activations.

    A constant-only node with an input that carries weight values (a float weight, or any weight of more than
    :data:`SHAPE_LIKE_ELEMENTS` elements) produces a weight (derived: ``Gather(position_table, Range(...))``
    carries the table's values); otherwise, as for shape arithmetic on integer constants, a static value.
    ``domain`` is normalized (:func:`normalize_domain`)."""
    if op_type == "Constant" and not domain:
        return Role.WEIGHT
    if subgraphs or op_type in NONDETERMINISTIC_OPS:
        return Role.ACTIVATION
    if op_type not in SHAPE_OPS:
        for t in inputs:  # the common case first: an input known only at run time (no set built per node)
            if t is not None and t.role != Role.WEIGHT and t.role != Role.STATIC:
                return Role.ACTIVATION
    present = [t for t in inputs if t is not None]
    if op_type in SHAPE_OPS and not domain:
        return Role.STATIC if present and present[0].is_static_shape else Role.ACTIVATION
    roles = {t.role for t in present}
    if not roles or not roles <= _CONSTANT_ROLES:  # no input, or one known only at run time
        return Role.ACTIVATION
    if roles == _WEIGHT_ONLY:
        return Role.WEIGHT
    return Role.WEIGHT if any(_carries_weight_values(t) for t in present) else Role.STATIC


_CONSTANT_ROLES = frozenset({Role.WEIGHT, Role.STATIC})
#: Ops whose outputs' role :func:`_output_role` does not decide from an activation input alone.
_OWN_ROLE_OPS = SHAPE_OPS | {"Constant"}
_WEIGHT_ONLY = frozenset({Role.WEIGHT})
