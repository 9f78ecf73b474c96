"""The checks of edge patterns (phase 2 of the fusion pass): each returns None when it holds, else a reason.

An :class:`Edge` is one candidate application: an anchor unit absorbing a neighbour through one value. Every
check kind named in :mod:`onnxroof.fusion.patterns` is implemented here (:data:`CHECKS`); its reason, written
for a reader, becomes the :class:`onnxroof.core.kernel.Miss` that explains why the pattern did not apply.
:data:`NOT_A_CANDIDATE` means the neighbour was no candidate at all, and records no miss.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from types import MappingProxyType
from typing import NamedTuple, cast

import onnx

from onnxroof.core.errors import ShapeUnknown
from onnxroof.core.ir import OpView, TensorInfo
from onnxroof.core.states import Role
from onnxroof.fusion.graph import FusionGraph, PassState, Unit
from onnxroof.fusion.patterns import CONSUMER, Check, EdgePattern


class Edge(NamedTuple):
    """One candidate application of an edge pattern: ``anchor`` absorbing ``joined`` through ``value``."""

    pattern: EdgePattern
    anchor: Unit
    joined: Unit
    value: str  # the tensor passed from the producer side to the consumer side
    state: PassState

    @property
    def g(self) -> FusionGraph:
        return self.state.g

    @property
    def anchor_op(self) -> OpView:
        return self.g.ops[self.anchor.anchor]

    @property
    def joined_op(self) -> OpView:
        return self.g.ops[self.joined.anchor]

    @property
    def other_operand(self) -> TensorInfo | None:
        """The joined op's input besides ``value``, if it combines ``value`` with exactly one other tensor."""
        present = [t for t in self.joined_op.inputs if t is not None]
        others = [t for t in present if t.name != self.value]
        return others[0] if len(present) == 2 and len(others) == 1 else None

    def consumer_side(self) -> Unit:
        return self.joined if self.pattern.direction == CONSUMER else self.anchor


@functools.lru_cache(maxsize=1024)
def _input_name(op_type: str, opset: int, index: int) -> str:
    try:
        schema = onnx.defs.get_schema(op_type, max_inclusive_version=opset)
    except onnx.defs.SchemaError:
        return f"#{index}"
    formal = schema.inputs
    if not formal:
        return f"#{index}"
    return formal[min(index, len(formal) - 1)].name


def _describe(t: TensorInfo) -> str:
    return "a graph input" if t.role == Role.INPUT else "computed at run time"


def _shape(t: TensorInfo | None) -> tuple[int | None, ...] | None:
    return None if t is None else t.shape


def _fmt(shape: tuple[int | None, ...] | None) -> str:
    if shape is None:
        return "unknown"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


NOT_A_CANDIDATE = ""
"""What a check returns when the neighbour is no candidate at all (no :class:`Miss` is recorded)."""


def _check_sole_consumer(edge: Edge, args: tuple[object, ...]) -> str | None:
    reason = _sole_consumer_reason(edge)
    return f"{reason} ({args[0]})" if reason is not None and args else reason


def _sole_consumer_reason(edge: Edge) -> str | None:
    g = edge.g
    users = g.consumers.get(edge.value, ())
    exported = edge.value in g.outputs
    side = edge.consumer_side()
    producer = g.producer[edge.value]
    outside = [u for u in users if edge.state.unit_of.get(u) is not side]
    if outside or exported:
        count = len(users) + (1 if exported else 0)
        if exported and len(users) <= 1:
            return f"{g.ops[producer].op_type} output {producer} is a graph output"
        names = ", ".join(g.label(u) for u in users[:3]) + (", ..." if len(users) > 3 else "")
        extra = " and is a graph output" if exported else ""
        return f"{g.ops[producer].op_type} output {producer} feeds {count} nodes ({names}){extra}"
    producer_side = edge.anchor if edge.pattern.direction == CONSUMER else edge.joined
    members = set(producer_side.nodes)
    for node in producer_side.nodes:
        for t in g.ops[node].outputs:
            if t is not None and t.name != edge.value and g.escapes(t.name, members):
                return f"{g.label(node)} also outputs '{t.name}', used elsewhere"
    return None


def _check_constant_inputs(edge: Edge, args: tuple[object, ...]) -> str | None:
    side, indices = cast("tuple[str, tuple[int, ...]]", args)
    op = edge.anchor_op if side == "anchor" else edge.joined_op
    for i in indices:
        t = op.input(i)
        if t is not None and not t.is_constant:
            name = _input_name(op.op_type, op.opset, i)
            return f"{edge.g.label(op.id)} input '{name}' ('{t.name}') is {_describe(t)}, not a constant"
    return None


def _check_inference_mode(edge: Edge, args: tuple[object, ...]) -> str | None:
    op = edge.joined_op
    if op.attrs.get("training_mode", 0) or any(t is not None for t in op.outputs[1:]):
        return f"{edge.g.label(op.id)} computes batch statistics (training mode)"
    return None


def _channels(op: OpView) -> int | None:
    out = op.output(0)
    if out is None or out.shape is None or len(out.shape) < 2:
        return None
    return out.shape[1]


def _check_channel_params(edge: Edge, args: tuple[object, ...]) -> str | None:
    (indices,) = cast("tuple[tuple[int, ...]]", args)
    channels = _channels(edge.anchor_op)
    op = edge.joined_op
    for i in indices:
        t = op.input(i)
        if t is None or channels is None or t.shape != (channels,):
            name = _input_name(op.op_type, op.opset, i)
            return (
                f"{edge.g.label(op.id)} input '{name}' has shape {_fmt(_shape(t))}, not one value per channel "
                f"([{channels if channels is not None else '?'}])"
            )
    return None


def _check_channel_operand(edge: Edge, args: tuple[object, ...]) -> str | None:
    (allow_scalar,) = args
    g, op = edge.g, edge.joined_op
    verb = "multiplies by" if op.op_type == "Mul" else "adds"
    other = edge.other_operand
    if other is None:
        return f"{g.label(op.id)} does not combine the conv output with exactly one other tensor"
    if not other.is_constant:
        if op.op_type != "Add":
            return NOT_A_CANDIDATE  # a product of two run-time tensors folds into nothing
        return f"{g.label(op.id)} {verb} '{other.name}', {_describe(other)} (a residual), not a constant"
    if op.input(0) is None or op.inputs[0].name != edge.value:  # type: ignore[union-attr]  # input(0) checked
        return f"{g.label(op.id)} takes the conv output as its second operand (only Conv → {op.op_type}(y, c) folds)"
    weight = edge.anchor_op.input(1)
    shape = other.shape
    if weight is None or weight.shape is None or shape is None:
        return f"{g.label(op.id)}: shapes unknown"
    channels, rank = weight.shape[0], len(weight.shape)
    if not shape:
        return None if allow_scalar else f"{g.label(op.id)} {verb} a scalar, not one value per output channel"
    axis = 0 if len(shape) == rank - 1 else 1 if len(shape) == rank else None
    if axis is not None and shape[axis] == channels and all(d == 1 for i, d in enumerate(shape) if i != axis):
        return None
    return (
        f"{g.label(op.id)}'s constant '{other.name}' has shape {_fmt(shape)}, not one value per output "
        f"channel ([{channels},1,..] or [1,{channels},1,..])"
    )


def _bias_add(edge: Edge) -> OpView:
    joined = edge.joined_op
    return joined if joined.op_type == "Add" and len(edge.joined.nodes) == 1 else edge.anchor_op


def _check_bias_operand(edge: Edge, args: tuple[object, ...]) -> str | None:
    g, add = edge.g, _bias_add(edge)
    present = [t for t in add.inputs if t is not None]
    constants = [t for t in present if t.is_constant]
    if len(present) != 2 or len(constants) != 1:
        if not constants:
            return f"{g.label(add.id)} adds two run-time tensors, not a bias"
        return f"{g.label(add.id)} does not add a bias to a run-time tensor"
    bias, out = constants[0], add.output(0)
    last = out.shape[-1] if out is not None and out.shape else None
    shape = bias.shape
    if last is None or shape is None or not shape or shape[-1] != last or any(d != 1 for d in shape[:-1]):
        return (
            f"{g.label(add.id)}'s constant '{bias.name}' has shape {_fmt(shape)}, not a bias along the last axis "
            f"([{last if last is not None else '?'}])"
        )
    return None


def _check_residual_operand(edge: Edge, args: tuple[object, ...]) -> str | None:
    g, op, other = edge.g, edge.joined_op, edge.other_operand
    if other is None:
        return f"{g.label(op.id)} does not add exactly one other tensor"
    if other.is_constant:
        return f"{g.label(op.id)} adds the constant '{other.name}', not a residual"
    value = g.ir.tensors.get(edge.value)
    if value is None or other.shape != value.shape or not other.is_static_shape:
        shape = None if value is None else value.shape
        return f"{g.label(op.id)} broadcasts '{other.name}' {_fmt(other.shape)} onto {_fmt(shape)}"
    return None


def _check_skip_operands(edge: Edge, args: tuple[object, ...]) -> str | None:
    g, add = edge.g, edge.anchor_op
    present = [t for t in add.inputs if t is not None]
    out = add.output(0)
    if len(present) != 2 or any(t.is_constant for t in present):
        return f"{g.label(add.id)} does not add two run-time tensors (not a residual)"
    a, b = present
    if out is None or a.shape != b.shape or a.shape != out.shape or not a.is_static_shape:
        shapes = f"{_fmt(a.shape)} with {_fmt(b.shape)}"
        return f"{g.label(add.id)} broadcasts {shapes} (SkipLayerNormalization needs one shape)"
    if len(a.shape) != 3:  # type: ignore[arg-type]  # static shape: checked above
        return f"{g.label(add.id)} is {len(a.shape)}-D; SkipLayerNormalization takes 3-D inputs"  # type: ignore[arg-type]  # static shape
    return None


def _check_scalar_operand(edge: Edge, args: tuple[object, ...]) -> str | None:
    g, op, other = edge.g, edge.joined_op, edge.other_operand
    if other is None:
        return f"{g.label(op.id)} does not scale by one other operand"
    if op.op_type == "Div" and (op.input(0) is None or op.inputs[0].name != edge.value):  # type: ignore[union-attr]  # checked
        return f"{g.label(op.id)} divides by the product, not the product by a constant"
    if not other.is_constant:
        return NOT_A_CANDIDATE  # a product of two run-time tensors is no scale
    if not other.is_static_shape or other.numel != 1:
        return f"{g.label(op.id)} scales by '{other.name}' of shape {_fmt(other.shape)}, not a scalar"
    return None


def _check_ops_in(edge: Edge, args: tuple[object, ...]) -> str | None:
    ops, kernel = cast("tuple[Collection[str], str]", args)
    if edge.joined.op_type not in ops:
        return (
            f"{kernel} takes only {', '.join(sorted(ops))}: {edge.joined.op_type} {edge.joined.anchor} "
            f"stays a separate kernel"
        )
    return None


def _check_clip_constant(edge: Edge, args: tuple[object, ...]) -> str | None:
    op = edge.joined_op
    if edge.joined.op_type != "Clip" or len(edge.joined.nodes) != 1:
        return None
    for i in (1, 2):
        t = op.input(i)
        if t is not None and not t.is_constant:
            return f"{edge.g.label(op.id)} bound '{t.name}' is {_describe(t)}, not a constant"
    return None


def _check_dtype_in(edge: Edge, args: tuple[object, ...]) -> str | None:
    (dtypes,) = cast("tuple[Collection[str]]", args)
    op = edge.anchor_op
    if op.dtype not in dtypes:
        return f"{edge.g.label(op.id)} computes in {op.dtype}; this fusion handles {', '.join(dtypes)} only"
    return None


_QUANTIZED = ("int8", "uint8")  # the 8-bit types of ONNX Runtime's QLinearConv / QLinearMatMul / QGemm


def _quantized_at_load(edge: Edge, i: int, t: TensorInfo, bias: object) -> str | None:
    """The type ONNX Runtime (WeightBiasQuantization, 1.20+) quantizes a float constant weight (int8, per tensor)
    or 1-D bias (int32) of a Conv/Gemm to when input 0 is dequantized with one scale; None when it does not."""
    first = edge.anchor_op.input(0)
    source = edge.g.producer.get(first.name) if first is not None else None
    dq = edge.g.ops[source] if source is not None else None
    scale = dq.input(1) if dq is not None and dq.op_type == "DequantizeLinear" else None
    if i == 0 or not t.is_constant or t.dtype != "float32" or scale is None or scale.shape not in ((), (1,)):
        return None
    if i == bias:
        return "int32" if t.shape is not None and len(t.shape) == 1 else None
    return "int8"


def _check_dequantized_operands(edge: Edge, args: tuple[object, ...]) -> str | None:
    kernel, bias, same_type, quantizes_constants = args
    g, op = edge.g, edge.anchor_op
    stored: dict[int, str] = {}
    for i, t in enumerate(op.inputs):
        if t is None:
            continue
        name = _input_name(op.op_type, op.opset, i)
        source = g.producer.get(t.name)
        if source is None or g.ops[source].op_type != "DequantizeLinear":
            runtime = _quantized_at_load(edge, i, t, bias) if quantizes_constants else None
            if runtime is not None:
                stored[i] = runtime
                continue
            what = "a float weight" if t.is_constant else _describe(t)
            return (
                f"{g.label(op.id)} input '{name}' ('{t.name}') is {what}, not dequantized: {kernel} needs every "
                "operand from a DequantizeLinear"
            )
        quantized = g.ops[source].input(0)
        stored[i] = quantized.dtype if quantized is not None else "unknown"
        allowed = ("int32",) if i == bias else _QUANTIZED
        if stored[i] not in allowed:
            takes = "/".join(allowed)
            return f"{g.label(op.id)} input '{name}' is dequantized from {stored[i]}; {kernel} takes {takes}"
    operands = {dtype for i, dtype in stored.items() if i != bias}
    if same_type and len(operands) > 1:
        return f"{g.label(op.id)} mixes {' and '.join(sorted(operands))} operands; {kernel} takes one type"
    if stored.get(0) == "int8" and stored.get(1) == "uint8":
        return f"{g.label(op.id)} has int8 activations with uint8 weights; {kernel} takes int8 weights with them"
    if op.op_type == "Gemm" and op.input(2) is not None and op.attrs.get("beta", 1.0) != 1.0:
        return f"{g.label(op.id)} scales its bias by beta={op.attrs.get('beta')}; {kernel} takes beta = 1 only"
    out = edge.joined_op.output(0)
    if out is None or out.dtype != stored.get(0):
        written = out.dtype if out is not None else "unknown"
        return (
            f"{g.label(edge.joined_op.id)} quantizes to {written} but {g.label(op.id)}'s input is {stored.get(0)}: "
            f"{kernel} takes one type for both"
        )
    return None


def _check_matmul_add_shapes(edge: Edge, args: tuple[object, ...]) -> str | None:
    g, mm, add = edge.g, edge.anchor_op, edge.joined_op
    a, b = mm.input(0), mm.input(1)
    bias = edge.other_operand
    if a is None or b is None or bias is None:
        return f"{g.label(add.id)} is not a MatMul output plus one other tensor"
    if a.dtype not in ("float32", "float16", "bfloat16") or add.inputs[0] is None or add.inputs[0].dtype != a.dtype:
        return f"{g.label(mm.id)} computes in {a.dtype}; Gemm takes float32/float16/bfloat16 only"
    if b.shape is None or len(b.shape) != 2:
        return f"{g.label(mm.id)}'s B operand '{b.name}' is {_fmt(b.shape)}, not 2-D"
    if not a.is_static_shape or not b.is_static_shape:
        return f"{g.label(mm.id)}'s operand shapes are not static"
    n = b.shape[1]
    allowed: list[tuple[int | None, ...]] = [(n,)]
    if len(a.shape) == 2:  # type: ignore[arg-type]  # static shape: checked above
        m = a.shape[0]  # type: ignore[index]  # static shape: checked above
        allowed += [(1, n), (m, 1), (m, n)]
    if bias.shape not in allowed:
        shapes = " or ".join(_fmt(s) for s in allowed)
        return f"{g.label(add.id)} adds '{bias.name}' of shape {_fmt(bias.shape)}; Gemm's C must be {shapes}"
    return None


def _check_gemm_2d(edge: Edge, args: tuple[object, ...]) -> str | None:
    op = edge.anchor_op
    a = op.input(0)
    if op.op_type == "MatMul" and (a is None or a.shape is None or len(a.shape) != 2):
        return (
            f"{edge.g.label(op.id)} + Add is {len(a.shape) if a is not None and a.shape else '?'}-D: ORT runs it as "
            f"Reshape → Gemm → Reshape, and the Reshape keeps the activation out of FusedGemm"
        )
    return None


def _check_swaps_last_two_axes(edge: Edge, args: tuple[object, ...]) -> str | None:
    op = edge.joined_op
    t = op.input(0)
    rank = len(t.shape) if t is not None and t.shape is not None else None
    if rank is None:
        return f"{edge.g.label(op.id)}: rank unknown"
    perm = list(op.attrs.get("perm") or reversed(range(rank)))
    wanted = [*range(rank - 2), rank - 1, rank - 2]
    if rank < 2 or perm != wanted:
        return f"{edge.g.label(op.id)} has perm {perm}, not a swap of the last two axes: it stays a layout copy"
    return None


def _check_sole_reader(edge: Edge, args: tuple[object, ...]) -> str | None:
    g = edge.g
    users, exported = g.users(edge.value)
    members = set(edge.anchor.nodes)
    outside = [u for u in users if u not in members]
    label = g.label(edge.joined.anchor)
    if exported:
        return f"{label}'s output '{edge.value}' is a graph output: it is written whole"
    if outside:
        return f"{label}'s output '{edge.value}' also feeds {g.label(outside[0])}: it is written whole"
    return None


def _check_strided_operand(edge: Edge, args: tuple[object, ...]) -> str | None:
    op, g = edge.joined_op, edge.g
    source, out = op.input(0), op.output(0)
    if source is None or source.shape is None or out is None or out.shape is None:
        return f"{g.label(op.id)}: shape unknown"
    rank = len(source.shape)
    if op.op_type == "Expand":
        repeated = [a for a, (i, o) in enumerate(zip(source.shape, out.shape, strict=False)) if i != o]
        if len(out.shape) != rank or len(repeated) != 1 or source.shape[repeated[0]] != 1:
            return (
                f"{g.label(op.id)} expands {_fmt(source.shape)} to {_fmt(out.shape)}, not one size-1 axis "
                f"(GQA's repeat_kv): it stays a copy"
            )
        return None
    perm = list(op.attrs.get("perm") or reversed(range(rank)))
    inner = perm[-1:] if edge.pattern.direction == CONSUMER else perm[-2:]
    if rank - 1 not in inner:
        return (
            f"{g.label(op.id)} has perm {perm}: the head dimension (last axis) leaves the innermost axes, "
            f"so the attention kernel cannot read it in place; it stays a layout copy"
        )
    return None


CHECKS = MappingProxyType(
    {
        "sole_consumer": _check_sole_consumer,
        "constant_inputs": _check_constant_inputs,
        "inference_mode": _check_inference_mode,
        "channel_params": _check_channel_params,
        "channel_operand": _check_channel_operand,
        "bias_operand": _check_bias_operand,
        "residual_operand": _check_residual_operand,
        "skip_operands": _check_skip_operands,
        "scalar_operand": _check_scalar_operand,
        "ops_in": _check_ops_in,
        "clip_constant": _check_clip_constant,
        "dtype_in": _check_dtype_in,
        "matmul_add_shapes": _check_matmul_add_shapes,
        "gemm_2d": _check_gemm_2d,
        "swaps_last_two_axes": _check_swaps_last_two_axes,
        "dequantized_operands": _check_dequantized_operands,
        "sole_reader": _check_sole_reader,
        "strided_operand": _check_strided_operand,
    }
)
"""Check kind → implementation ``(edge, args) -> reason | None``."""


def run_checks(edge: Edge, checks: tuple[Check, ...]) -> str | None:
    for item in checks:
        try:
            reason = CHECKS[item.kind](edge, item.args)
        except ShapeUnknown as missing:
            reason = f"no static shape for '{missing.tensor}'"
        if reason is not None:
            return reason
    return None
