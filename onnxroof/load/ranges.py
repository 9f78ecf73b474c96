"""``Range`` lengths found before shape inference, so that one inference shapes a bound decoder.

ONNX's ``Range`` inference sizes its output only when ``start``, ``limit`` and ``delta`` are initializers: in an
exported decoder they come from ``Shape`` of the cache and the ids (``Shape → Gather → Add``), so the positions
(``Range``) and everything after them (rotary tables, the attention mask: 461 outputs of the 7B-shaped decoder
at a decode step) stay unshaped, and the loader had to fold the small constants and infer again (~35 ms of the
~70 ms a binding spends loading). With every dim bound, those scalars are known before inference: each
``Range`` whose inputs are computable from constants gets a ``value_info`` of its length, and ONNX's inference
carries it on (a static dim in an existing ``value_info`` is kept where inference finds the dim unknown).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxroof.core.protos import has_bodies, normalize_domain
from onnxroof.load.evaluate import NUMPY_OPS
from onnxroof.load.node_shapes import SMALL_CONSTANT_LIMIT, is_static
from onnxroof.load.shapes import constant_value, shape_value


def seed_range_lengths(model: onnx.ModelProto, positions: Sequence[int] | None = None) -> int:
    """Give each main-graph ``Range`` whose ``start``, ``limit`` and ``delta`` are known (:func:`known_values`) a
    ``value_info`` of shape ``[n]``, ``n = max(⌈(limit − start) / delta⌉, 0)`` (ONNX's definition of ``Range``),
    in the dtype of ``start``; ``model`` is changed in place. A ``Range`` whose output already has a
    ``value_info`` or is a graph output, whose inputs are not all known integer scalars, or whose ``delta`` is 0
    is left to inference and the fallbacks. Returns how many were seeded. ``positions``: those of the main
    graph's default-domain ``Range`` nodes when known (the read stage's scan,
    :attr:`~onnxroof.load.checks.MainGraphFacts.ranges`); None: found here, by a walk over every node."""
    graph = model.graph
    positions, ranges = _ranges(graph, positions)
    if not ranges:
        return 0
    opset = next((o.version for o in model.opset_import if not normalize_domain(o.domain)), 1)
    values = known_values(graph, [name for node in ranges for name in node.input], opset, positions[-1])
    seeded = 0
    for node in ranges:
        length = _length(node, values)
        if length is not None:
            elem_type = helper.np_dtype_to_tensor_dtype(values[node.input[0]].dtype)
            graph.value_info.append(helper.make_tensor_value_info(node.output[0], elem_type, [length]))
            seeded += 1
    return seeded


def _ranges(graph: onnx.GraphProto, known: Sequence[int] | None) -> tuple[Sequence[int], list[onnx.NodeProto]]:
    """The positions of the default-domain ``Range`` nodes (``known``, or found here), and those of them to seed:
    three inputs, an output without a ``value_info`` of its own that is not a graph output."""
    nodes = graph.node
    positions = known
    if positions is None:
        positions = [i for i, n in enumerate(nodes) if n.op_type == "Range" and not normalize_domain(n.domain)]
    if not positions:
        return positions, []
    described = {v.name for v in graph.value_info} | {v.name for v in graph.output}
    ranges = [n for n in (nodes[i] for i in positions) if len(n.input) == 3 and n.output and n.output[0]]
    return positions, [n for n in ranges if n.output[0] not in described]


def _length(node: onnx.NodeProto, values: Mapping[str, np.ndarray]) -> int | None:
    """A ``Range``'s length when its three inputs are known integer scalars (:func:`range_length`); None otherwise
    (a float ``Range`` is left to ONNX: its versions compute the length of one in different precisions)."""
    known = [values.get(name) for name in node.input]
    if any(v is None or v.ndim != 0 or v.dtype.kind not in "iu" for v in known):
        return None  # ONNX's Range takes scalars of shape (): another shape fails its inference, as it did before
    start, limit, delta = (int(v) for v in known)  # type: ignore[arg-type]  # None ruled out above
    return range_length(start, limit, delta)


def range_length(start: int, limit: int, delta: int) -> int | None:
    """``max(⌈(limit − start) / delta⌉, 0)`` (ONNX ``Range``) in exact integer arithmetic (``⌈a / b⌉ = −((−a) //
    b)``); None for ``delta = 0`` or ``|limit − start| ≥ 2^53``, where ONNX versions that divide in double
    precision may differ from the exact value (no decoder's positions come near)."""
    if delta == 0 or abs(limit - start) >= 2**53:
        return None
    return max(-((start - limit) // delta), 0)


def known_values(graph: onnx.GraphProto, names: Sequence[str], opset: int, before: int) -> dict[str, np.ndarray]:
    """The values of ``names`` computable before inference, each at most ``SMALL_CONSTANT_LIMIT`` elements:
    small initializers, ``Constant`` nodes, ``Shape``/``Size`` of statically shaped graph inputs and
    initializers, and default-domain ops that :data:`~onnxroof.load.evaluate.NUMPY_OPS` evaluates (never the
    reference evaluator) over known values, at default-domain ``opset``. Only the ancestors of ``names`` are
    visited, each once (an explicit stack: no recursion limit on long chains).

    Their producers are looked for among the nodes before position ``before`` (the graph's order is topological
    once checked), scanning back from it: the ``Range`` nodes of an exported decoder sit near its top, so the
    ~1,700 nodes after them are never read (a map of every node's outputs cost 3 ms a binding of the 7B-shaped
    decoder). A name produced elsewhere is not known (its ``Range`` is left to inference)."""
    producer = _producers(graph.node, before, set(names))
    initializers = {t.name: t for t in graph.initializer}
    inputs = {v.name: v for v in graph.input}

    def static(name: str) -> list[int] | None:  # an initializer's dims, else a graph input's when static
        tensor = initializers.get(name)
        if tensor is not None:
            return list(tensor.dims)
        value = inputs.get(name)
        return None if value is None else _static_dims(value.type)

    found: dict[str, np.ndarray | None] = {}
    stack = list(names)
    while stack:
        name = stack[-1]
        if name in found or not name:
            stack.pop()
            continue
        node = producer.get(name)
        if node is None:
            found[name] = _initializer_value(initializers.get(name))
            stack.pop()
            continue
        if node.op_type in ("Shape", "Size", "Constant") or not _evaluable(node):
            found.update(_outputs_without_inputs(node, static))
            stack.pop()
            continue
        pending = [i for i in node.input if i and i not in found]
        if pending:
            stack.extend(pending)
            continue
        found.update(_evaluate(node, found, opset))
        stack.pop()
    return {name: value for name, value in found.items() if value is not None}


def _producers(nodes: Sequence[onnx.NodeProto], before: int, wanted: set[str]) -> dict[str, onnx.NodeProto]:
    """The producers of ``wanted`` and of their inputs, transitively, among ``nodes[:before]`` (scanned back)."""
    producer: dict[str, onnx.NodeProto] = {}
    for index in range(before - 1, -1, -1):
        if not wanted:
            break
        node = nodes[index]
        made = [name for name in node.output if name in wanted]
        if made:
            for name in made:
                producer[name] = node
                wanted.discard(name)
            wanted.update(name for name in node.input if name)
    return producer


def _evaluable(node: onnx.NodeProto) -> bool:
    return not normalize_domain(node.domain) and node.op_type in NUMPY_OPS and not has_bodies(node)


def _outputs_without_inputs(
    node: onnx.NodeProto, static: Callable[[str], list[int] | None]
) -> dict[str, np.ndarray | None]:
    """A ``Constant``'s value, ``Shape``/``Size`` of a statically shaped graph input or initializer; None for
    every output of any other node that cannot be evaluated here."""
    value: np.ndarray | None = None
    if not normalize_domain(node.domain):
        if node.op_type == "Constant":
            try:
                value = constant_value(node)
            except Exception:  # dims that contradict the data, an unknown dtype: not known here, never raised
                value = None
        elif node.op_type in ("Shape", "Size") and node.input:
            dims = static(node.input[0])
            value = shape_value(node, dims) if dims is not None else None
    return {name: value if i == 0 else None for i, name in enumerate(node.output) if name}


def _evaluate(node: onnx.NodeProto, found: Mapping[str, np.ndarray | None], opset: int) -> dict[str, np.ndarray | None]:
    """``node``'s outputs by :data:`NUMPY_OPS` when every input is known, each kept when small; None otherwise."""
    inputs = [found[i] if i else None for i in node.input]
    results: list[np.ndarray] | None = None
    if all(v is not None for v, name in zip(inputs, node.input, strict=True) if name):
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        try:
            results = NUMPY_OPS[node.op_type](inputs, attrs, opset)  # type: ignore[arg-type]  # omitted: None
        except Exception:  # what numpy refuses is left to inference
            results = None
    out: dict[str, np.ndarray | None] = {}
    for i, name in enumerate(node.output):
        if name:
            value = np.asarray(results[i]) if results is not None and i < len(results) else None
            out[name] = value if value is not None and value.size <= SMALL_CONSTANT_LIMIT else None
    return out


def _static_dims(type_proto: onnx.TypeProto) -> list[int] | None:
    """A tensor type's dims when it is static (:func:`~onnxroof.load.node_shapes.is_static`), None otherwise."""
    return [d.dim_value for d in type_proto.tensor_type.shape.dim] if is_static(type_proto) else None


def _small_array(tensor: onnx.TensorProto) -> np.ndarray | None:
    """A tensor's value when it is stored in the file and small (never external data); None otherwise."""
    if tensor.data_location == onnx.TensorProto.EXTERNAL or math.prod(tensor.dims) > SMALL_CONSTANT_LIMIT:
        return None
    try:  # dims that contradict the data, an unknown dtype: not known here, never raised
        return numpy_helper.to_array(tensor)
    except Exception:
        return None


def _initializer_value(tensor: onnx.TensorProto | None) -> np.ndarray | None:
    return None if tensor is None else _small_array(tensor)
