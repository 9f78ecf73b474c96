"""Shape inference: ONNX's own (strict, data propagation), then two fallbacks where it stops early.

1. Small constant-only subgraphs — seeded by small initializers and by ``Shape``/``Size`` of statically
   shaped tensors — are folded with the ONNX reference evaluator, and inference is re-run.
2. Shape-preserving and broadcasting ops propagate shapes directly.

Only small integer tensors (≤ ``SMALL_CONSTANT_LIMIT`` elements) are ever materialised; external ones are
read only from inside the model's folder (checked before by the loader).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxroof.core.errors import one_line
from onnxroof.core.ir import NONDETERMINISTIC_OPS, graph_value_types, normalize_domain, topological_order

SMALL_CONSTANT_LIMIT = 4096
"""Largest constant (in elements) the loader will materialise to help shape inference."""


def infer(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """ONNX shape inference, strict with data propagation; on failure, warn and retry leniently."""
    warnings: list[str] = []
    try:
        return onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True), warnings
    except Exception as exc:  # InferenceError, or a checker error raised from inside inference
        warnings.append(f"strict shape inference failed ({one_line(str(exc))}); continuing without strict mode")
    try:
        return onnx.shape_inference.infer_shapes(model, data_prop=True), warnings
    except Exception as exc:
        warnings.append(f"shape inference failed ({one_line(str(exc))}); shapes come from fallbacks only")
        return model, warnings


def value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    return graph_value_types(model.graph)


def is_static(type_proto: onnx.TypeProto | None) -> bool:
    if type_proto is None or not type_proto.HasField("tensor_type"):
        return False
    tensor_type = type_proto.tensor_type
    return (
        tensor_type.elem_type != 0
        and tensor_type.HasField("shape")
        and all(d.HasField("dim_value") for d in tensor_type.shape.dim)
    )


def missing_outputs(model: onnx.ModelProto, types: Mapping[str, onnx.TypeProto]) -> list[str]:
    return [o for n in model.graph.node for o in n.output if o and not is_static(types.get(o))]


# -- fallback 1: fold small constant-only subgraphs, then re-infer


def _small_constant_values(model: onnx.ModelProto, base: Path | None) -> dict[str, np.ndarray]:
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
        if node.op_type not in ("Shape", "Size") or normalize_domain(node.domain) or not node.input:
            continue
        source = types.get(node.input[0])
        if not is_static(source):
            continue
        dims = [d.dim_value for d in source.tensor_type.shape.dim]
        if node.op_type == "Size":
            values[node.output[0]] = np.array(math.prod(dims), dtype=np.int64)
            continue
        attrs = {a.name: a.i for a in node.attribute}
        values[node.output[0]] = np.array(
            dims[attrs.get("start", 0) : attrs.get("end", len(dims))]
            if "end" in attrs
            else dims[attrs.get("start", 0) :],
            dtype=np.int64,
        )
    return values


def _constant_value(node: onnx.NodeProto) -> np.ndarray | None:
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
    """Evaluate constant-only nodes whose outputs are small; return a copy with them as initializers.

    Seeds: small initializers, and ``Shape``/``Size`` of statically shaped tensors. ``order``: the graph's
    :func:`~onnxroof.core.ir.topological_order` if already computed.
    """
    from onnx.reference import ReferenceEvaluator

    values = _small_constant_values(model, base)
    shape_values = _shape_values(model, types)
    values.update(shape_values)
    opsets = list(model.opset_import)
    nodes = list(model.graph.node)
    folded: dict[str, np.ndarray] = {}
    for index in topological_order(nodes) if order is None else order:
        node = nodes[index]
        if (
            node.op_type in NONDETERMINISTIC_OPS
            or node.op_type in _MAY_GROW
            or any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)
        ):
            continue
        if node.op_type == "Constant" and not normalize_domain(node.domain):
            try:
                array = _constant_value(node)
            except Exception:  # a value the evaluator cannot read: left to shape inference
                array = None
            if array is not None:
                values[node.output[0]] = folded[node.output[0]] = array
            continue
        inputs = [n for n in node.input if n]
        if node.output[0] in shape_values or not all(n in values for n in inputs) or normalize_domain(node.domain):
            continue
        if node.op_type == "ConstantOfShape" and not _small_shape(values[inputs[0]]):
            continue
        try:
            graph = helper.make_graph(
                [node],
                "fold",
                [
                    helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(values[n].dtype), None)
                    for n in dict.fromkeys(inputs)
                ],
                [helper.make_tensor_value_info(o, 0, None) for o in node.output if o],
            )
            single = helper.make_model(graph, opset_imports=opsets, ir_version=model.ir_version)
            results = ReferenceEvaluator(single).run(None, {n: values[n] for n in dict.fromkeys(inputs)})
        except Exception:
            continue
        for name, result in zip([o for o in node.output if o], results, strict=False):
            array = np.asarray(result)
            if array.size <= SMALL_CONSTANT_LIMIT:
                values[name] = array
                folded[name] = array
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

_SAME_SHAPE = frozenset(
    {
        "Abs",
        "Acos",
        "Acosh",
        "Asin",
        "Asinh",
        "Atan",
        "Atanh",
        "BatchNormalization",
        "Cast",
        "Ceil",
        "Celu",
        "Clip",
        "Cos",
        "Cosh",
        "Dropout",
        "Elu",
        "Erf",
        "Exp",
        "Floor",
        "Gelu",
        "HardSigmoid",
        "HardSwish",
        "Hardmax",
        "Identity",
        "InstanceNormalization",
        "IsInf",
        "IsNaN",
        "LRN",
        "LayerNormalization",
        "LeakyRelu",
        "Log",
        "LogSoftmax",
        "Mish",
        "Neg",
        "Not",
        "Reciprocal",
        "Relu",
        "Round",
        "Selu",
        "Shrink",
        "Sigmoid",
        "Sign",
        "Sin",
        "Sinh",
        "Softmax",
        "Softplus",
        "Softsign",
        "Sqrt",
        "Tan",
        "Tanh",
        "ThresholdedRelu",
        "Trilu",
        "CumSum",
        "GroupNormalization",
    }
)
_BROADCAST = frozenset(
    {
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Pow",
        "Mod",
        "PRelu",
        "Max",
        "Min",
        "Sum",
        "Mean",
        "Where",
        "Equal",
        "Less",
        "LessOrEqual",
        "Greater",
        "GreaterOrEqual",
        "And",
        "Or",
        "Xor",
        "BitShift",
    }
)
_BOOL_OUT = frozenset(
    {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Not", "IsNaN", "IsInf"}
)


def propagate_fallback(
    model: onnx.ModelProto, types: dict[str, onnx.TypeProto], order: Sequence[int] | None = None
) -> int:
    """Fill missing output types from input shapes for simple ops; returns how many were filled.

    ``order``: the graph's :func:`~onnxroof.core.ir.topological_order` if already computed."""
    filled = 0
    nodes = list(model.graph.node)
    for index in topological_order(nodes) if order is None else order:
        node = nodes[index]
        if normalize_domain(node.domain) or all(is_static(types.get(o)) for o in node.output if o):
            continue
        ins = [types.get(n) if n else None for n in node.input]
        shape, elem = _fallback_shape(node, ins)
        if shape is None:
            continue
        for k, out in enumerate(node.output):
            if not out or is_static(types.get(out)):
                continue
            out_elem = elem
            if node.op_type in _BOOL_OUT or (node.op_type == "Dropout" and k == 1):
                out_elem = TensorProto.BOOL
            elif node.op_type == "Cast":
                out_elem = next((a.i for a in node.attribute if a.name == "to"), elem)
            if k > 0 and node.op_type not in ("Dropout",):
                continue
            types[out] = helper.make_tensor_type_proto(out_elem, list(shape))
            filled += 1
    return filled


def _fallback_shape(node: onnx.NodeProto, ins: list) -> tuple[tuple[int, ...] | None, int]:
    present = [t for t in ins if t is not None]
    if not present or not all(is_static(t) for t in present):
        return None, 0
    shapes = [tuple(d.dim_value for d in t.tensor_type.shape.dim) for t in present]
    elem = present[0].tensor_type.elem_type if node.op_type != "Where" else present[-1].tensor_type.elem_type
    if node.op_type in _SAME_SHAPE:
        return shapes[0], elem
    if node.op_type in _BROADCAST:
        try:
            return tuple(np.broadcast_shapes(*shapes)), elem
        except ValueError:
            return None, 0
    return None, 0
