"""Output types of ONE node from its inputs' types and the small values known so far: the per-node step of
:func:`onnxroof.load.shapes.propagate_fallback`.

Tried in order: a default-domain op ONNX defines is re-inferred alone (``onnx.shape_inference.infer_node_outputs``
with the small constant inputs as data); an op with a contrib shape function (:mod:`onnxroof.load.contrib_shapes`)
gets its outputs from it; shape-preserving ops copy their first input's shape and broadcasting ops broadcast.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, TypeGuard

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxroof.core.contracts import DATA_TYPES

if TYPE_CHECKING:
    from onnxroof.load.contrib_shapes import Arg

SMALL_CONSTANT_LIMIT = 4096
"""Largest constant (in elements) the loader will materialise to help shape inference."""

TypeMap = Mapping[str, onnx.TypeProto]


def is_static(type_proto: onnx.TypeProto | None) -> TypeGuard[onnx.TypeProto]:
    if type_proto is None or not type_proto.HasField("tensor_type"):
        return False
    tensor_type = type_proto.tensor_type
    return (
        tensor_type.elem_type != 0
        and tensor_type.HasField("shape")
        and all(d.HasField("dim_value") for d in tensor_type.shape.dim)
    )


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


def node_outputs(
    node: onnx.NodeProto,
    domain: str,
    types: TypeMap,
    known: Mapping[str, np.ndarray],
    opsets: Sequence[onnx.OperatorSetIdProto],
    versions: Mapping[str, int],
) -> dict[str, onnx.TypeProto | None]:
    """Output types of one node from its inputs (see the module docstring for the order tried). The contrib shape
    functions are imported here: only models whose inference leaves outputs unshaped need them."""
    from onnxroof.load.contrib_shapes import CONTRIB_SHAPES

    version = versions.get(domain)
    if not domain and version is not None and onnx.defs.has(node.op_type, version, ""):
        found = _onnx_outputs(node, version, types, known, opsets)
    elif (domain, node.op_type) in CONTRIB_SHAPES:
        found = _contrib_outputs(node, domain, types, known)
    else:
        found = {}
    outputs = [o for o in node.output if o]
    if all(o in found for o in outputs) or domain:
        return found
    return {**_direct_outputs(node, types, found, version), **found}


def _onnx_outputs(
    node: onnx.NodeProto,
    version: int,
    types: TypeMap,
    known: Mapping[str, np.ndarray],
    opsets: Sequence[onnx.OperatorSetIdProto],
) -> dict[str, onnx.TypeProto | None]:
    schema = onnx.defs.get_schema(node.op_type, version, "")
    input_types = {n: types[n] for n in node.input if n and n in types}
    data = {
        n: numpy_helper.from_array(known[n], n)
        for n in node.input
        if n in known and known[n].size <= SMALL_CONSTANT_LIMIT
    }
    try:
        inferred = onnx.shape_inference.infer_node_outputs(schema, node, input_types, data, None, list(opsets))
    except Exception:  # ONNX's inference refuses the node alone: the other ways are tried
        inferred = {}
    return {name: t for name, t in inferred.items() if is_static(t)}


def _contrib_outputs(
    node: onnx.NodeProto, domain: str, types: TypeMap, known: Mapping[str, np.ndarray]
) -> dict[str, onnx.TypeProto | None]:
    from onnxroof.load.contrib_shapes import contrib_output_shapes

    args = [_arg(n, types, known) for n in node.input]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    found: dict[str, onnx.TypeProto | None] = {}
    for name, out in zip(node.output, contrib_output_shapes(domain, node.op_type, args, attrs) or [], strict=False):
        if name and out is not None and out[0] is not None and all(d >= 0 for d in out[0]):
            found[name] = helper.make_tensor_type_proto(out[1], list(out[0]))
    return found


def _direct_outputs(
    node: onnx.NodeProto, types: TypeMap, found: Mapping[str, object], version: int | None = None
) -> dict[str, onnx.TypeProto]:
    """Shape-preserving and broadcasting ops: the first output (and Dropout's mask) from the inputs' shapes.
    Dropout's mask is bool from opset 10; before, it has the input's type (ONNX's Dropout-7 schema: ``mask: T``)."""
    shape, elem = _fallback_shape(node, [types.get(n) if n else None for n in node.input])
    if shape is None:
        return {}
    direct: dict[str, onnx.TypeProto] = {}
    for k, out in enumerate(node.output):
        if not out or out in found or (k > 0 and node.op_type != "Dropout"):
            continue
        out_elem = elem
        if node.op_type in _BOOL_OUT or (node.op_type == "Dropout" and k == 1 and (version or 10) >= 10):
            out_elem = TensorProto.BOOL
        elif node.op_type == "Cast":
            out_elem = next((a.i for a in node.attribute if a.name == "to"), elem)
            if out_elem not in DATA_TYPES:  # no type for a damaged `to`: the cost stage refuses the node, naming it
                continue
        direct[out] = helper.make_tensor_type_proto(out_elem, list(shape))
    return direct


def _arg(name: str, types: Mapping[str, onnx.TypeProto], known: Mapping[str, np.ndarray]) -> Arg:
    from onnxroof.load.contrib_shapes import Arg

    type_proto = types.get(name) if name else None
    if type_proto is None or not type_proto.HasField("tensor_type"):
        return Arg(None)
    elem = type_proto.tensor_type.elem_type
    shape = tuple(d.dim_value for d in type_proto.tensor_type.shape.dim) if is_static(type_proto) else None
    return Arg(shape, elem, known.get(name))


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
