"""Cost rules: data movement. Views (Reshape...) and metadata (Shape, Size) are free by declaration;
layout copies (Transpose, Concat, Slice, Pad...) move bytes and do no arithmetic; Resize/Upsample
interpolate.
"""

from __future__ import annotations

import math

from onnxroof.core.cost import Cost
from onnxroof.core.errors import ModelError
from onnxroof.core.ir import OpView
from onnxroof.core.registry import Family
from onnxroof.core.states import OpClass, RuleKind
from onnxroof.rules._common import outputs_bytes, required_input, required_output, shape_of, streaming

FAMILY = Family("movement", OpClass.MOVEMENT)
rule = FAMILY.rule


@rule("Reshape", "Squeeze", "Unsqueeze", kind=RuleKind.VIEW, config_inputs=(1,))
@rule("Flatten", "Identity", "BitCast", kind=RuleKind.VIEW)
@rule("Dropout", kind=RuleKind.VIEW, config_inputs=(1, 2))
def view(op: OpView) -> Cost:
    """An alias of its input: same elements, same order, a new shape.

    Formula: 0 FLOPs.
    Bytes: none read, none written: the output shares the input's buffer.
    Assumptions: inference. BitCast (opset 26) reinterprets the same bytes as another type. Dropout is an
    identity at inference (ratio and training_mode are ignored)
    and its optional mask output is not materialised. Reshape.shape, Squeeze/Unsqueeze.axes and
    Dropout's ratio/training_mode are config inputs, never traffic or parameters.
    """
    return Cost.zero()


@rule("Shape", "Size", kind=RuleKind.METADATA, config_inputs=(0,))
def metadata(op: OpView) -> Cost:
    """A value computed from the input's shape alone.

    Formula: 0 FLOPs.
    Bytes: none: the input's data is never read (so it is a config input), and the output is a few
    integers held by the runtime.
    Assumptions: the shape is known to the runtime without touching the tensor.
    """
    return Cost.zero()


@rule("Transpose", "Concat", "DepthToSpace", "SpaceToDepth", "ReverseSequence", kind=RuleKind.LAYOUT)
def copy(op: OpView) -> Cost:
    """A copy that reorders or joins elements without arithmetic.

    Formula: 0 FLOPs.
    Bytes: read = Σ bytes of every input (Concat: all its inputs; ReverseSequence: the input and
    sequence_lens); written = bytes of the output.
    Assumptions: each input element is read once and each output element written once.
    """
    return streaming(op, 0)


@rule("Split", "Expand", "Tile", "Trilu", kind=RuleKind.LAYOUT, config_inputs=(1,))
def copy_configured(op: OpView) -> Cost:
    """A copy configured by its second input (Split.split, Expand.shape, Tile.repeats, Trilu.k).

    Formula: 0 FLOPs (Trilu is a masked copy: the zeroed triangle is written, not computed).
    Bytes: read = bytes of the input, once (Expand/Tile read it once however often it is repeated);
    written = Σ bytes of the outputs (Split: all its outputs). The config input is not charged.
    Assumptions: repeated elements are re-read from cache, not from memory.
    """
    return streaming(op, 0, skip=(1,))


@rule("Slice", kind=RuleKind.LAYOUT, config_inputs=(1, 2, 3, 4))
def slice_(op: OpView) -> Cost:
    """A copy of a (possibly strided) region of the input.

    Formula: 0 FLOPs.
    Bytes: read = bytes of the output (only the sliced region is read, not the whole input);
    written = bytes of the output. starts/ends/axes/steps are config inputs.
    Assumptions: element-granular reads; a strided slice's wasted cache-line bytes are not counted.
    """
    out = outputs_bytes(op)
    return Cost(bytes_read=out, bytes_written=out)


@rule("Pad", kind=RuleKind.LAYOUT, config_inputs=(1, 2, 3))
@rule("CenterCropPad", kind=RuleKind.LAYOUT, config_inputs=(1,))
def pad(op: OpView) -> Cost:
    """A copy of the input into a larger (or, with negative pads / a crop, smaller) output.

    Formula: 0 FLOPs.
    Bytes: read = itemsize · Π_i min(in_i, out_i): the part of the input that lands in the output,
    read once; written = bytes of the output (padding included). Pad's pads, constant_value and axes
    and CenterCropPad's shape are config inputs.
    Assumptions: reflect/edge/wrap padding re-reads border elements from cache. On an axis padded on
    one side and cropped on the other, min(in_i, out_i) over-counts the kept region by the crop.
    """
    x = required_input(op, 0)
    kept = math.prod(min(i, o) for i, o in zip(shape_of(x), shape_of(required_output(op)), strict=True))
    return Cost(bytes_read=kept * x.itemsize, bytes_written=outputs_bytes(op))


# Interpolation taps per resized axis without antialiasing: linear 2, cubic 4.
_BASE_TAPS = {"linear": 2, "bilinear": 2, "trilinear": 2, "cubic": 4}


def _taps(mode: str, n_in: int, n_out: int, antialias: bool) -> int:
    """Input taps blended per output element along one resized axis (see ``resize``)."""
    if not antialias or n_out >= n_in:
        return _BASE_TAPS[mode]
    # ONNX reference, antialiased downscale by s = n_out / n_in: the filter widens by 1/s.
    support = 1 if _BASE_TAPS[mode] == 2 else 2
    return 2 * -(-support * n_in // n_out)  # 2·⌈support/s⌉


@rule("Resize", config_inputs=(1, 2, 3))
@rule("Upsample", config_inputs=(1,))
def resize(op: OpView) -> Cost:
    """Nearest, n-linear or n-cubic interpolation of the input onto the output grid.

    Formula: per output element, with T = Π over resized axes (axes whose output size ≠ input size)
    of the taps t_i: T multiplies + (T − 1) adds = 2·T − 1 FLOPs; total = out_numel · (2·T − 1).
    mode nearest: 0 FLOPs (a gather). linear: t_i = 2, so T = 2^d for d resized axes (bilinear on
    NCHW: d = 2, 7 FLOPs per output element). cubic: t_i = 4, T = 4^d. With antialias = 1 (opset 18+)
    on a downscaled axis (s = out_i / in_i < 1) the filter widens: t_i = 2·⌈1/s⌉ (linear),
    2·⌈2/s⌉ (cubic), as in the ONNX reference. No resized axis: 0 FLOPs (a copy).
    Bytes: read = bytes of X once; written = bytes of the output. roi/scales/sizes (Upsample: scales)
    are config inputs.
    Assumptions: tap weights are computed per output coordinate along each axis (Σ_i out_i · t_i
    work, negligible) and not counted; the scale is taken as out_i / in_i. Separable implementations
    do fewer FLOPs; ONNX Runtime's bilinear kernel does the 4 multiplies + 3 adds counted here.
    Reference: ONNX Resize operator; onnx/reference/ops/op_resize.py.
    """
    x = required_input(op, 0)
    mode = str(op.attrs.get("mode", "nearest"))
    if mode == "nearest":
        return streaming(op, 0, skip=(1, 2, 3))
    if mode not in _BASE_TAPS:
        raise ModelError(f"node {op.id}: {op.op_type} mode {mode!r} is not an ONNX interpolation mode")
    antialias = bool(op.attrs.get("antialias", 0))
    resized = [(i, o) for i, o in zip(shape_of(x), shape_of(required_output(op)), strict=True) if i != o]
    taps = math.prod(_taps(mode, i, o, antialias) for i, o in resized)
    per_output = 2 * taps - 1 if resized else 0
    return streaming(op, required_output(op).numel * per_output, skip=(1, 2, 3))
