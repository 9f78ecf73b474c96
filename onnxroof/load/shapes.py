"""Shape inference: ONNX's own (strict, data propagation), then two fallbacks where it stops early.

1. Small constant-only subgraphs — seeded by small initializers and by ``Shape``/``Size`` of statically
   shaped tensors — are folded (:func:`onnxroof.load.evaluate.evaluate_node`: numpy for shape arithmetic, the
   ONNX reference evaluator for the rest), and inference is re-run.
2. Node by node in topological order (:func:`propagate_fallback`): ONNX ops re-inferred alone with the values
   known so far, contrib ops through :mod:`onnxroof.load.contrib_shapes`, shape-preserving and broadcasting ops
   directly.

Only small integer tensors (≤ ``SMALL_CONSTANT_LIMIT`` elements) are ever materialised; external ones are
read only from inside the model's folder (checked before by the loader).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxroof.core.errors import one_line
from onnxroof.core.ir import NONDETERMINISTIC_OPS
from onnxroof.core.protos import graph_value_types, has_bodies, normalize_domain, subgraphs_of, topological_order
from onnxroof.load.evaluate import evaluate_node
from onnxroof.load.node_shapes import SMALL_CONSTANT_LIMIT, is_static, node_outputs

DATA_PROP_ELEMENTS = 2**18
"""Most elements of an integer graph input for which ONNX's inference propagates data. ONNX keeps the values it
propagates as shape dims (about 200 B each, per tensor they flow through): an int64 ``attention_mask`` bound to
[2^40, 16] grew inference to gigabytes. 2^18 covers one sequence of 256 K tokens or 8 of 32 K."""

_INTEGER_TYPES = frozenset(
    {TensorProto.INT8, TensorProto.INT16, TensorProto.INT32, TensorProto.INT64}
    | {TensorProto.UINT8, TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64}
)


def large_integer_input(model: onnx.ModelProto) -> tuple[str, int] | None:
    """The first graph input of an integer type whose bound shape holds more than :data:`DATA_PROP_ELEMENTS`
    elements, with its element count (Π of its dims); None when there is none."""
    for value in model.graph.input:
        tensor = value.type.tensor_type
        if not value.type.HasField("tensor_type") or tensor.elem_type not in _INTEGER_TYPES:
            continue
        dims = [d.dim_value for d in tensor.shape.dim]
        if dims and all(d.HasField("dim_value") for d in tensor.shape.dim) and math.prod(dims) > DATA_PROP_ELEMENTS:
            return value.name, math.prod(dims)
    return None


def infer(model: onnx.ModelProto | bytes, data_prop: bool = True) -> tuple[onnx.ModelProto, list[str]]:
    """ONNX shape inference, strict with data propagation (unless ``data_prop`` is False: see
    :func:`large_integer_input`); on failure, warn and retry leniently.

    ``model`` may be serialized already (one serialization serves both tries; the caller's ModelProto can be
    gone). When both tries fail, the model comes back as it was given (parsed, if it was bytes)."""
    warnings: list[str] = []
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=data_prop)
        return inferred, warnings
    except Exception as exc:  # InferenceError, or a checker error raised from inside inference
        warnings.append(f"strict shape inference failed ({_short(str(exc))}); continuing without strict mode")
    try:
        return onnx.shape_inference.infer_shapes(model, data_prop=data_prop), warnings
    except Exception as exc:
        warnings.append(f"shape inference failed ({_short(str(exc))}); shapes come from fallbacks only")
        return (model if isinstance(model, onnx.ModelProto) else onnx.load_model_from_string(model)), warnings


def _short(message: str, limit: int = 300) -> str:
    """One line, at most ``limit`` characters (inference lists every failing node: hundreds in a decoder)."""
    text = one_line(message)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    """The main graph's :func:`~onnxroof.core.protos.graph_value_types` (equal types shared)."""
    return graph_value_types(model.graph)


def missing_outputs(model: onnx.ModelProto, types: Mapping[str, onnx.TypeProto]) -> tuple[list[str], bool]:
    """Main-graph outputs without a static type, and the outputs of nodes with bodies (always re-shaped); and
    whether there is any node with bodies.

    :func:`is_static` is asked once per distinct TypeProto object (:func:`value_types` shares equal ones)."""
    static: dict[int, bool] = {}  # id(type) -> is_static; the types are alive in ``types`` throughout
    missing: list[str] = []
    any_bodies = False
    for node in model.graph.node:
        bodies = len(node.attribute) > 0 and has_bodies(node)  # the length inline: most nodes have no attribute
        any_bodies = any_bodies or bodies
        for name in node.output:
            if not name:
                continue
            if bodies:
                missing.append(name)
                continue
            type_proto = types.get(name)
            known = static.get(id(type_proto))
            if known is None:
                known = static[id(type_proto)] = is_static(type_proto)
            if not known:
                missing.append(name)
    return missing, any_bodies


def every_output_static(graph: onnx.GraphProto, types: Mapping[str, onnx.TypeProto], output_slots: int) -> bool:
    """Whether shape inference gave every output of ``graph``'s nodes a static type, told by counting instead of
    walking the nodes (:func:`missing_outputs` then has nothing to find). ``types``: ``graph``'s
    :func:`value_types`; ``output_slots``: Σ ``len(node.output)`` over its nodes, for a graph without bodies whose
    file held no ``value_info`` (:attr:`~onnxroof.load.checks.MainGraphFacts.countable`).

    True when every type in ``types`` is static and ``len(types)`` less the graph inputs and initializers among
    them equals ``output_slots``. Every other name in ``types`` is a node output: the checker refuses a graph
    output no node produces, the file's graph had no ``value_info`` and inference (and the loader's Range seeds,
    :mod:`onnxroof.load.ranges`) add entries only for node outputs. The checker also refuses a name produced
    twice, so the counts meet only when ``output_slots`` distinct names (an empty one is never typed) are all
    typed. Any doubt (a symbolic input, an untyped or non-tensor output, an empty output name) gives False: the
    caller then walks the nodes."""
    outside = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    produced = len(types) - sum(1 for name in outside if name in types)
    if produced != output_slots:
        return False
    distinct = {id(type_proto): type_proto for type_proto in types.values()}  # value_types shares equal types
    return all(is_static(type_proto) for type_proto in distinct.values())


def static_types(graph: onnx.GraphProto, names: Collection[str]) -> dict[str, onnx.TypeProto]:
    """The static types a (re-)inferred ``graph`` holds for ``names``: value_info and outputs, and initializers
    (the folded values); what a re-inference found for the outputs that lacked a type, without building
    :func:`value_types` over every tensor."""
    wanted = set(names)
    found = {v.name: v.type for part in (graph.value_info, graph.output) for v in part if v.name in wanted}
    for tensor in graph.initializer:
        if tensor.name in wanted:
            found[tensor.name] = helper.make_tensor_type_proto(tensor.data_type, list(tensor.dims))
    return {name: type_proto for name, type_proto in found.items() if is_static(type_proto)}


# -- fallback 1: fold small constant-only subgraphs, then re-infer


def small_constant_values(model: onnx.ModelProto, base: Path | None) -> dict[str, np.ndarray]:
    values: dict[str, np.ndarray] = {}
    for tensor in model.graph.initializer:
        numel = math.prod(tensor.dims)
        if numel > SMALL_CONSTANT_LIMIT:
            continue
        if tensor.data_location == TensorProto.EXTERNAL:
            if base is None or tensor.data_type not in (TensorProto.INT64, TensorProto.INT32):
                continue
            array = _read_small_external(tensor, base)
            if array is not None:
                values[tensor.name] = array
            continue
        try:  # dims that contradict the data, an unknown or complex dtype: not folded, never raised
            values[tensor.name] = numpy_helper.to_array(tensor)
        except Exception:
            continue
    return values


def _read_small_external(tensor: TensorProto, base: Path) -> np.ndarray | None:
    """Read one small integer external tensor (within the model's folder; checked before)."""
    info = {e.key: e.value for e in tensor.external_data}
    target = (base / info.get("location", "")).resolve()
    dtype = np.int64 if tensor.data_type == TensorProto.INT64 else np.int32
    count = math.prod(tensor.dims)
    try:
        with open(target, "rb") as handle:
            handle.seek(int(info.get("offset", 0)))
            raw = handle.read(count * np.dtype(dtype).itemsize)
    except OSError:
        return None
    if len(raw) != count * np.dtype(dtype).itemsize:
        return None
    return np.frombuffer(raw, dtype=dtype).reshape(tuple(tensor.dims))


_MAY_GROW = frozenset({"Expand", "Tile", "Range", "Resize", "Upsample", "Pad", "OneHot", "EyeLike"})


def _shape_values(model: onnx.ModelProto, types: Mapping[str, onnx.TypeProto]) -> dict[str, np.ndarray]:
    """Values of ``Shape``/``Size`` nodes whose input has a static shape (known at load time)."""
    values: dict[str, np.ndarray] = {}
    for node in model.graph.node:
        if node.op_type in ("Shape", "Size"):
            values.update(_shape_values_of(node, types))
    return values


def shape_value(node: onnx.NodeProto, dims: Sequence[int]) -> np.ndarray:
    """The value of a default-domain ``Shape`` or ``Size`` node whose input has the static ``dims``: ``Size`` their
    product, ``Shape`` ``dims[start:end]`` (its attributes; a negative one counts from the rank, as Python's slice
    does)."""
    if node.op_type == "Size":
        return np.array(math.prod(dims), dtype=np.int64)
    attrs = {a.name: a.i for a in node.attribute}
    start = attrs.get("start", 0)
    return np.array(dims[start : attrs["end"]] if "end" in attrs else dims[start:], dtype=np.int64)


def constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    """The value of a small ``Constant`` node, read from its attribute (no evaluator needed)."""
    for attr in node.attribute:
        if attr.name == "value":
            if attr.t.data_location == TensorProto.EXTERNAL or math.prod(attr.t.dims) > SMALL_CONSTANT_LIMIT:
                return None
            return numpy_helper.to_array(attr.t)
        if attr.name in ("value_int", "value_ints"):
            return np.array(attr.i if attr.name == "value_int" else list(attr.ints), dtype=np.int64)
        if attr.name in ("value_float", "value_floats"):
            return np.array(attr.f if attr.name == "value_float" else list(attr.floats), dtype=np.float32)
    return None


def _small_outputs(
    node: onnx.NodeProto, values: Mapping[str, np.ndarray], opsets: Sequence, ir_version: int
) -> dict[str, np.ndarray]:
    """The outputs of ``node`` evaluated on known input ``values`` (:func:`evaluate_node`) that are small
    (≤ ``SMALL_CONSTANT_LIMIT`` elements)."""
    arrays = evaluate_node(node, values, opsets, ir_version)
    return {name: a for name, a in arrays.items() if a.size <= SMALL_CONSTANT_LIMIT}


def _small_shape(value: np.ndarray) -> bool:
    """Whether ``value`` is a shape vector of at most ``SMALL_CONSTANT_LIMIT`` elements (non-negative ints)."""
    if value.ndim != 1 or value.dtype.kind not in "iu" or (value < 0).any():
        return False
    return math.prod(int(v) for v in value) <= SMALL_CONSTANT_LIMIT


def fold_small_constants(
    model: onnx.ModelProto,
    base: Path | None,
    types: Mapping[str, onnx.TypeProto],
    order: Sequence[int] | None = None,
) -> tuple[onnx.ModelProto, int]:
    """Evaluate constant-only nodes whose outputs are small; return a copy with them as initializers, and how many.

    Seeds: small initializers, small ``Constant`` nodes (kept as nodes: ONNX's inference reads their values; made
    initializers, 733 of them cost 30 ms a binding of the 7B-shaped decoder, for the same types), and
    ``Shape``/``Size`` of statically shaped tensors. ``order``: the graph's
    :func:`~onnxroof.core.protos.topological_order` if already computed.
    """
    values = small_constant_values(model, base)
    shape_values = _shape_values(model, types)
    values.update(shape_values)
    opsets = list(model.opset_import)
    nodes = list(model.graph.node)
    folded: dict[str, np.ndarray] = {}
    for index in topological_order(nodes) if order is None else order:
        node = nodes[index]
        if node.op_type == "Constant" and not normalize_domain(node.domain):
            try:
                array = constant_value(node)
            except Exception:  # a value the evaluator cannot read: left to shape inference
                array = None
            if array is not None:  # folded with, left a node: inference reads a Constant's value itself
                values[node.output[0]] = array
            continue
        inputs = [n for n in node.input if n]
        if not all(n in values for n in inputs) or node.output[0] in shape_values:  # most nodes: the cheap test
            continue
        if node.op_type in NONDETERMINISTIC_OPS or node.op_type in _MAY_GROW or normalize_domain(node.domain):
            continue
        if has_bodies(node) or (node.op_type == "ConstantOfShape" and not _small_shape(values[inputs[0]])):
            continue
        for name, array in _small_outputs(node, values, opsets, model.ir_version).items():
            values[name] = folded[name] = array
    folded.update(shape_values)
    if not folded:
        return model, 0
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    folded_names = folded.keys()  # a set view, built once (not once per node)
    kept = [n for n in copy.graph.node if folded_names.isdisjoint(n.output)]
    del copy.graph.node[:]
    copy.graph.node.extend(kept)
    copy.graph.initializer.extend(numpy_helper.from_array(a, name) for name, a in folded.items())
    return copy, len(folded)


# -- fallback 2: propagate shapes through shape-preserving and broadcasting ops


def propagate_fallback(
    model: onnx.ModelProto,
    types: dict[str, onnx.TypeProto],
    order: Sequence[int] | None = None,
    values: Mapping[str, np.ndarray] | None = None,
) -> int:
    """Fill missing output types node by node in topological order; returns how many were filled.

    Per node whose outputs lack a static shape: a default-domain op ONNX defines is re-inferred alone
    (``onnx.shape_inference.infer_node_outputs``, with the small constant values known so far as input data);
    an op with a contrib shape function (:mod:`onnxroof.load.contrib_shapes`: ONNX Runtime's com.microsoft ops
    and its default-domain extras) gets its outputs from it; shape-preserving and broadcasting ops propagate
    directly. Small integer values flow along (``Shape`` of a now static tensor, constant-only nodes evaluated
    by :func:`~onnxroof.load.evaluate.evaluate_node`), so a ``Reshape`` fed by shape arithmetic after a contrib
    op is shaped too. ``If``/``Loop``/``Scan`` bodies are left to :func:`infer_bodies`. One pass, microseconds per node.

    ``order``: the graph's :func:`~onnxroof.core.protos.topological_order` if already computed; ``values``: small
    constants known at load time (name -> array), seeded from the graph's small initializers when None.
    """
    known = dict(values) if values is not None else small_constant_values(model, None)
    return _propagate_graph(model.graph, types, order, known, list(model.opset_import), model.ir_version)


def _propagate_graph(
    graph: onnx.GraphProto,
    types: dict[str, onnx.TypeProto],
    order: Sequence[int] | None,
    known: dict[str, np.ndarray],
    opsets: Sequence,
    ir_version: int,
) -> int:
    """Propagate shapes through ``graph``'s nodes in topological order (see :func:`propagate_fallback`): a node
    with bodies has them inferred, any other has its unshaped outputs filled, then the small values it yields are
    tracked. Returns how many types were filled."""
    filled = 0
    nodes = list(graph.node)
    versions = {normalize_domain(o.domain): o.version for o in opsets}
    for index in topological_order(nodes) if order is None else order:
        node = nodes[index]
        if has_bodies(node):
            filled += _infer_bodies(node, types, known, opsets, ir_version)
            continue
        domain = normalize_domain(node.domain)
        outputs = [o for o in node.output if o]
        if not all(is_static(types.get(o)) for o in outputs):
            filled += _fill_outputs(node, domain, types, known, opsets, versions)
        if not domain:
            _track_values(node, outputs, types, known, opsets, ir_version)
    return filled


def _fill_outputs(
    node: onnx.NodeProto,
    domain: str,
    types: dict[str, onnx.TypeProto],
    known: Mapping[str, np.ndarray],
    opsets: Sequence,
    versions: Mapping[str, int],
) -> int:
    """Write the output types :func:`node_outputs` finds for ``node`` where its outputs lack a static shape;
    returns how many were written."""
    filled = 0
    for name, type_proto in node_outputs(node, domain, types, known, opsets, versions).items():
        if name and not is_static(types.get(name)) and type_proto is not None:
            types[name] = type_proto
            filled += 1
    return filled


def _track_values(
    node: onnx.NodeProto,
    outputs: Sequence[str],
    types: Mapping[str, onnx.TypeProto],
    known: dict[str, np.ndarray],
    opsets: Sequence,
    ir_version: int,
) -> None:
    """Add the small values a default-domain ``node`` yields to ``known``: ``Shape``/``Size`` of a static tensor,
    a ``Constant``'s value, or the outputs of a deterministic node whose inputs are all known and whose outputs
    are small (evaluated by :func:`~onnxroof.load.evaluate.evaluate_node`)."""
    if node.op_type in NONDETERMINISTIC_OPS or any(o in known for o in outputs):
        return
    if node.op_type in ("Shape", "Size"):
        known.update(_shape_values_of(node, types))
    elif node.op_type == "Constant":
        array = constant_value(node)
        if array is not None:
            known[outputs[0]] = array
    elif (
        node.op_type not in _MAY_GROW
        and all(n in known for n in node.input if n)
        and any(n for n in node.input)
        and all(_small_int_or_static(types.get(o)) for o in outputs)
    ):
        known.update(_small_outputs(node, known, opsets, ir_version))


def _infer_bodies(
    node: onnx.NodeProto,
    types: dict[str, onnx.TypeProto],
    known: dict[str, np.ndarray],
    opsets: Sequence,
    ir_version: int,
) -> int:
    """Shape the bodies of an ``If``/``Loop``/``Scan`` node with the outer scope's shapes and values.

    Each body is propagated node by node like the main graph from the outer types, its inputs and initializers
    (ONNX's own inference often fails inside bodies: data propagation in subgraphs stops with "Data for input 0
    already exists" and leaves wrong static shapes behind, so the body's value_info is re-derived), the types found are
    written into the body's ``value_info`` (where costing reads them), and an ``If`` whose outputs are still
    unshaped takes them from a branch whose outputs are static.
    """
    bodies = list(subgraphs_of(node).values())
    filled = sum(_infer_body(body, types, known, opsets, ir_version) for body in bodies)
    if node.op_type == "If":
        filled += _if_outputs_from_a_branch(node, bodies, types, known)
    return filled


def _infer_body(
    body: onnx.GraphProto,
    types: Mapping[str, onnx.TypeProto],
    known: Mapping[str, np.ndarray],
    opsets: Sequence,
    ir_version: int,
) -> int:
    """Propagate shapes through one body from the outer scope, and write what it found into the body."""
    produced = {name for inner in body.node for name in inner.output if name}
    # The body's value_info is not trusted (see _infer_bodies), and a name the body produces shadows the outer
    # one: Optimum's merged decoder names its branch outputs as the If's outputs (`logits`, `present.0.key`).
    scope = {name: t for name, t in types.items() if name not in produced}
    scope.update({v.name: v.type for v in body.input if v.type.HasField("tensor_type")})
    scope.update({t.name: helper.make_tensor_type_proto(t.data_type, list(t.dims)) for t in body.initializer})
    inner_known = dict(known)
    for tensor in body.initializer:
        if tensor.data_location != TensorProto.EXTERNAL and math.prod(tensor.dims) <= SMALL_CONSTANT_LIMIT:
            inner_known[tensor.name] = numpy_helper.to_array(tensor)
    filled = _propagate_graph(body, scope, None, inner_known, opsets, ir_version)
    _record_body_types(body, {name: scope[name] for name in produced if is_static(scope.get(name))})
    return filled


def _record_body_types(body: onnx.GraphProto, found: Mapping[str, onnx.TypeProto]) -> None:
    """Write the static types found for the body's own tensors into its outputs and value_info (costing reads
    them there)."""
    declared = {v.name: v for v in [*body.value_info, *body.output]}
    for name, type_proto in found.items():
        if name in declared:
            declared[name].type.CopyFrom(type_proto)
        else:
            body.value_info.append(helper.make_value_info(name, type_proto))


def _if_outputs_from_a_branch(
    node: onnx.NodeProto, bodies: Sequence[onnx.GraphProto], types: dict, known: Mapping[str, np.ndarray]
) -> int:
    """An ``If``'s outputs from the branch that runs: the one its condition selects when the condition's value is
    known (``then_branch`` when true), its static output types replacing what was there; else, for outputs still
    unshaped, the first branch whose outputs are static.

    Branches may disagree (Silero VAD: ``then_branch`` squeezes a dim of 1 that ``else_branch`` keeps, so their
    ranks differ); taking the other branch's shape makes every node downstream wrong."""
    branches = subgraphs_of(node)
    taken = _taken_branch(node, known)
    if taken is not None:
        body = branches.get(taken)
        branch = [v.type for v in body.output] if body is not None else []
        if len(branch) != len(node.output) or not all(is_static(t) for t in branch):
            return 0
        chosen = [(n, t) for n, t in zip(node.output, branch, strict=True) if n]
        types.update(chosen)
        return len(chosen)
    for body in bodies:
        branch = [v.type for v in body.output]
        if len(branch) == len(node.output) and all(is_static(t) for t in branch):
            missing = [(n, t) for n, t in zip(node.output, branch, strict=True) if n and not is_static(types.get(n))]
            types.update(missing)
            return len(missing)
    return 0


def _taken_branch(node: onnx.NodeProto, known: Mapping[str, np.ndarray]) -> str | None:
    """``then_branch`` or ``else_branch`` when the ``If``'s condition is a known one-element value, else None."""
    value = known.get(node.input[0]) if node.input else None
    if value is None or value.size != 1 or value.dtype.kind not in "biuf":
        return None
    return "then_branch" if bool(value.reshape(-1)[0]) else "else_branch"


def _small_int_or_static(type_proto: onnx.TypeProto | None) -> bool:
    """Worth evaluating: an integer/bool output, or one already known to be small."""
    if type_proto is None or not type_proto.HasField("tensor_type"):
        return True
    if type_proto.tensor_type.elem_type in _INT_TYPES:
        return True
    return is_static(type_proto) and math.prod(d.dim_value for d in type_proto.tensor_type.shape.dim) <= 64


_INT_TYPES = frozenset({TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL, 0})


def _shape_values_of(node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto]) -> dict[str, np.ndarray]:
    """A ``Shape``/``Size`` node's value when its input's type is static (:func:`shape_value`); none otherwise."""
    source = types.get(node.input[0]) if node.input and not normalize_domain(node.domain) else None
    if not is_static(source):
        return {}
    return {node.output[0]: shape_value(node, [d.dim_value for d in source.tensor_type.shape.dim])}
