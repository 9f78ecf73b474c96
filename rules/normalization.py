"""Cost rules: normalization ops (BatchNorm, LayerNorm, GroupNorm, InstanceNorm, RMSNorm, LpNorm, LRN, Softmax family)
and the ONNX Runtime contrib fusions of LayerNorm/RMSNorm with a residual add.

Counting rules are those of :mod:`onnxroof.rules.elementwise` (each transcendental = 1 operation, each
reduction step = 1 add or compare, accumulating from the identity). Costs split into a per-element part
(``N`` = elements of X) and a per-row / per-channel part for the statistics. ``macs`` is always 0.

Traffic: X and each parameter vector are read once; every present output (including optional statistics
outputs such as Mean / InvStdDev) is written once.
"""

from __future__ import annotations

import math

from onnxroof.core.cost import Cost
from onnxroof.core.ir import OpView
from onnxroof.core.registry import Family
from onnxroof.core.states import OpClass
from onnxroof.rules._common import normalize_axis, required_input, shape_of, streaming

FAMILY = Family("normalization", OpClass.NORMALIZATION)
rule = FAMILY.rule
FAMILY.classes("MeanVarianceNormalization")  # costed through its ONNX function body

MS = "com.microsoft"


def _rows(shape: tuple[int, ...], axis: int) -> int:
    """Number of normalized rows: the product of the dims before ``axis``."""
    return math.prod(shape[: normalize_axis(axis, len(shape))])


def _present(op: OpView, i: int) -> int:
    return 1 if op.input(i) is not None else 0


# --------------------------------------------------------------------------------------- BatchNormalization
_BN_APPLY_PER_ELEMENT = 4  # (x − mean) / sqrt(var + ε) · scale + bias: sub, div, mul, add
_BN_APPLY_PER_CHANNEL = 2  # var + ε, sqrt
_BN_STATS_PER_ELEMENT = 3  # training: Σx for the mean, (x − mean)², Σ(x − mean)²  (x − mean is shared)
_BN_STATS_PER_CHANNEL = 8  # training: 2 divides (mean, var) + 2 running updates of 3 (2 mul + 1 add)


def _bn_training(op: OpView) -> bool:
    if op.opset >= 14:
        return bool(op.attrs.get("training_mode", 0))
    # Before opset 14 the extra outputs (running mean/var, saved mean/var) exist only in training mode.
    return any(t is not None for t in op.outputs[1:])


@rule("BatchNormalization", op_class=OpClass.ELEMENTWISE)  # at inference a per-channel scale and shift
def batch_normalization(op: OpView) -> Cost:
    """ai.onnx::BatchNormalization. y = (x − mean) / sqrt(var + ε) · scale + bias, per channel.

    Formula: FLOPs = 4·N + 2·C in inference mode, N = elements of X, C = elements of ``var`` (the
      channels; C·spatial elements for the old spatial=0 form): per element 1 subtract, 1 divide,
      1 multiply, 1 add; per channel 1 add ε + 1 sqrt.
      Training mode (training_mode=1 in opset ≥ 14, or optional outputs present before 14) adds 3·N + 8·C:
      per element Σx for the batch mean, (x − mean)² and its Σ for the batch variance (the x − mean is the
      one already counted); per channel 2 divides (mean, variance) and 2 running-statistic updates
      r·m + s·(1 − m) of 2 multiplies + 1 add each.
    Bytes: read X, scale, B, mean, var; write Y and, when present, the training-mode outputs.
    Assumptions: statistics accumulate from 0 (one add per element); 1 − m is a folded constant.
    Reference: ONNX BatchNormalization-15 spec.
    """
    n = required_input(op, 0).numel
    c = required_input(op, 4).numel
    flops = _BN_APPLY_PER_ELEMENT * n + _BN_APPLY_PER_CHANNEL * c
    if _bn_training(op):
        flops += _BN_STATS_PER_ELEMENT * n + _BN_STATS_PER_CHANNEL * c
    return streaming(op, flops)


# ------------------------------------------------------------------------------- LayerNorm and its family
_LN_STATS_PER_ELEMENT = 5  # Σx, x − mean, (x − mean)², Σ(x − mean)², · rstd
_LN_STATS_PER_ROW = 5  # Σx / n, Σ(x − mean)² / n, + ε, sqrt, 1 / std
_RMS_STATS_PER_ELEMENT = 3  # x², Σx², x · rstd
_RMS_STATS_PER_ROW = 4  # Σx² / n, + ε, sqrt, 1 / rms


def _layer_norm_flops(n: int, rows: int, bias: int) -> int:
    # statistics and normalization + scale multiply (1·N) + optional bias add (1·N)
    return _LN_STATS_PER_ELEMENT * n + _LN_STATS_PER_ROW * rows + n + bias * n


def _rms_norm_flops(n: int, rows: int) -> int:
    # statistics and normalization + scale multiply (1·N)
    return _RMS_STATS_PER_ELEMENT * n + _RMS_STATS_PER_ROW * rows + n


@rule("LayerNormalization")
def layer_normalization(op: OpView) -> Cost:
    """ai.onnx::LayerNormalization (opset 17; also ORT's pre-17 contrib op of the same name).

    Formula: FLOPs = 5·N + N + b·N + 5·R, N = elements of X, R = rows = product of X's dims before
      ``axis``, b = 1 if the bias B is given else 0. Per element: Σx (mean) 1, x − mean 1, (x − mean)² 1,
      Σ(x − mean)² (variance) 1, multiply by 1/std 1 = 5; multiply by Scale 1; add B 1 (if given).
      Per row: mean divide, variance divide, + ε, sqrt, reciprocal = 5.
    Bytes: read X, Scale, B (if given); write Y and the optional Mean / InvStdDev outputs if present.
    Assumptions: sums accumulate from 0 (one add per element); Scale/B broadcast over the rows.
    Reference: ONNX LayerNormalization-17 function body.
    """
    shape = shape_of(required_input(op, 0))
    rows = _rows(shape, op.attrs.get("axis", -1))
    return streaming(op, _layer_norm_flops(math.prod(shape), rows, _present(op, 2)))


@rule("RMSNormalization")
def rms_normalization(op: OpView) -> Cost:
    """ai.onnx::RMSNormalization (opset 23). y = x / sqrt(mean(x²) + ε) · scale.

    Formula: FLOPs = 4·N + 4·R, N = elements of X, R = rows = product of X's dims before ``axis``.
      Per element: x² 1, Σx² 1, multiply by 1/rms 1, multiply by scale 1 = 4.
      Per row: mean divide, + ε, sqrt, reciprocal = 4.
    Bytes: read X and scale; write Y.
    Assumptions: sums accumulate from 0.
    Reference: ONNX RMSNormalization-23 function body.
    """
    shape = shape_of(required_input(op, 0))
    rows = _rows(shape, op.attrs.get("axis", -1))
    return streaming(op, _rms_norm_flops(math.prod(shape), rows))


@rule("LpNormalization")
def lp_normalization(op: OpView) -> Cost:
    """ai.onnx::LpNormalization. y = x / ‖x‖_p along ``axis`` (p = 1 or 2).

    Formula: FLOPs = 3·N + k·R, N = elements of X, R = rows = N / (length of ``axis``).
      Per element: |x| or x² 1, Σ 1, multiply by 1/norm 1 = 3. Per row: k = 2 for p = 2 (sqrt, reciprocal),
      1 for p = 1 (reciprocal).
    Bytes: read X; write Y.
    Reference: ONNX LpNormalization-22.
    """
    shape = shape_of(required_input(op, 0))
    n = math.prod(shape)
    length = shape[normalize_axis(op.attrs.get("axis", -1), len(shape))] if shape else 1
    rows = n // length if length else 0
    return streaming(op, 3 * n + (2 if op.attrs.get("p", 2) == 2 else 1) * rows)


@rule("SimplifiedLayerNormalization")
@rule("SimplifiedLayerNormalization", domain=MS)
def simplified_layer_normalization(op: OpView) -> Cost:
    """ONNX Runtime SimplifiedLayerNormalization (RMSNorm; ORT registers it in the ai.onnx domain, some
    exporters write com.microsoft, so both are registered).

    Formula: FLOPs = 4·N + 4·R as ai.onnx::RMSNormalization, N = elements of X, R = product of X's dims
      before ``axis`` (default −1).
      Per element: x², Σx², multiply by 1/rms, multiply by scale; per row: divide, + ε, sqrt, reciprocal.
    Bytes: read X and scale; write Y and the optional inv_std_var output if present.
    Assumptions: as RMSNormalization.
    Reference: onnxruntime/core/graph/contrib_ops/contrib_defs.cc (SimplifiedLayerNormalization).
    """
    shape = shape_of(required_input(op, 0))
    rows = _rows(shape, op.attrs.get("axis", -1))
    return streaming(op, _rms_norm_flops(math.prod(shape), rows))


@rule("SkipLayerNormalization", domain=MS, op_class=OpClass.SKIP_NORMALIZATION)
def skip_layer_normalization(op: OpView) -> Cost:
    """com.microsoft::SkipLayerNormalization: LayerNorm(input + skip [+ bias]) · gamma [+ beta].

    Formula: FLOPs = N + d·N + (5·N + N + b·N + 5·R), N = elements of ``input``, R = N / hidden
      (normalized over the last dim), d = 1 if ``bias`` (input 4) is given, b = 1 if ``beta`` (input 3)
      is given: 1 residual add per element, 1 bias add per element, then ai.onnx::LayerNormalization's
      count (see there).
    Bytes: read input, skip, gamma, beta, bias (those given); write output and the optional mean,
      inv_std_var and input_skip_bias_sum outputs if present.
    Assumptions: skip is broadcast over the batch when smaller; costs are per element of ``input``.
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.SkipLayerNormalization.
    """
    shape = shape_of(required_input(op, 0))
    n = math.prod(shape)
    rows = _rows(shape, -1)
    return streaming(op, n + _present(op, 4) * n + _layer_norm_flops(n, rows, _present(op, 3)))


@rule("SkipSimplifiedLayerNormalization", domain=MS, op_class=OpClass.SKIP_NORMALIZATION)
def skip_simplified_layer_normalization(op: OpView) -> Cost:
    """com.microsoft::SkipSimplifiedLayerNormalization: RMSNorm(input + skip [+ bias]) · gamma.

    Formula: FLOPs = N + d·N + (4·N + 4·R), N = elements of ``input``, R = N / hidden (last dim),
      d = 1 if ``bias`` (input 3) is given: 1 residual add, 1 bias add per element, then
      ai.onnx::RMSNormalization's count (see there).
    Bytes: read input, skip, gamma, bias (those given); write output and the optional mean, inv_std_var
      and input_skip_bias_sum outputs if present.
    Assumptions: skip is broadcast over the batch when smaller; costs are per element of ``input``.
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.SkipSimplifiedLayerNormalization.
    """
    shape = shape_of(required_input(op, 0))
    n = math.prod(shape)
    return streaming(op, n + _present(op, 3) * n + _rms_norm_flops(n, _rows(shape, -1)))


# ------------------------------------------------------------------------- GroupNorm and InstanceNorm
_AFFINE_PER_ELEMENT = 2  # · scale, + bias


@rule("GroupNormalization")
def group_normalization(op: OpView) -> Cost:
    """ai.onnx::GroupNormalization (opsets 18, 21). Statistics per (batch, group), affine per channel.

    Formula: FLOPs = 5·N + 2·N + 5·B·G, N = elements of X, B = X's batch dim, G = ``num_groups``.
      Per element: Σx, x − mean, (x − mean)², Σ(x − mean)², multiply by 1/std = 5; scale multiply and
      bias add = 2. Per (batch, group): mean divide, variance divide, + ε, sqrt, reciprocal = 5.
    Bytes: read X, scale, bias; write Y.
    Assumptions: sums accumulate from 0; the opset-18 per-group scale/bias cost the same per element as
      the opset-21 per-channel ones.
    Reference: ONNX GroupNormalization-21 function body.
    """
    shape = shape_of(required_input(op, 0))
    n = math.prod(shape)
    groups = op.attrs["num_groups"]
    flops = _LN_STATS_PER_ELEMENT * n + _AFFINE_PER_ELEMENT * n + _LN_STATS_PER_ROW * shape[0] * groups
    return streaming(op, flops)


@rule("InstanceNormalization")
def instance_normalization(op: OpView) -> Cost:
    """ai.onnx::InstanceNormalization: GroupNormalization with one group per channel.

    Formula: FLOPs = 5·N + 2·N + 5·B·C, N = elements of X, B = batch dim, C = channel dim (X is
      B × C × D1 × ...). Per element: Σx, x − mean, (x − mean)², Σ(x − mean)², multiply by 1/std = 5;
      scale multiply and bias add = 2. Per (batch, channel): 2 divides, + ε, sqrt, reciprocal = 5.
    Bytes: read X, scale, B; write Y.
    Assumptions: sums accumulate from 0.
    """
    shape = shape_of(required_input(op, 0))
    n = math.prod(shape)
    flops = _LN_STATS_PER_ELEMENT * n + _AFFINE_PER_ELEMENT * n + _LN_STATS_PER_ROW * shape[0] * shape[1]
    return streaming(op, flops)


# ------------------------------------------------------------------------------------------------ LRN
_LRN_PER_WINDOW_ELEMENT = 2  # x², + into the window sum
_LRN_PER_ELEMENT = 4  # (α/size)·sum, + bias, ^β, x / ...


def _sum_between(first: int, stop: int) -> int:
    """Σ c for c = first … stop − 1 (0 when the range is empty): (stop − first)·(first + stop − 1) / 2."""
    return (stop - first) * (first + stop - 1) // 2 if stop > first else 0


def lrn_window_total(channels: int, size: int) -> int:
    """Σ over channels c of the clipped window size |[c − lo, c + hi] ∩ [0, C−1]|, lo = ⌊(size−1)/2⌋,
    hi = ⌈(size−1)/2⌉ = ⌊size/2⌋, in closed form (constant time for any C and size).

    Formula: W = Σ_c (min(C−1, c + hi) − max(0, c − lo) + 1)
      = [Σ_{c<k} (c + hi) + (C − k)·(C − 1)] − Σ_{c=s}^{C−1} (c − lo) + C,
      k = clamp(C − hi, 0, C) channels whose window's top is not clipped, s = clamp(lo + 1, 0, C) the first
      channel whose window's bottom is not clipped; each sum is an arithmetic series.
    """
    lo, hi = (size - 1) // 2, size // 2
    k = min(max(channels - hi, 0), channels)
    s = min(max(lo + 1, 0), channels)
    tops = _sum_between(0, k) + k * hi + (channels - k) * (channels - 1)
    bottoms = _sum_between(s, channels) - (channels - s) * lo
    return tops - bottoms + channels


@rule("LRN", op_class=OpClass.LRN)
def lrn(op: OpView) -> Cost:
    """ai.onnx::LRN. y = x / (bias + α/size · Σ_{window} x²)^β, windows of ``size`` channels.

    Formula: FLOPs = 2·W·S + 4·N, N = elements of X (B × C × D1 × ...), S = N / C positions,
      W = Σ_c |window(c)|, the channel window [c − ⌊(size−1)/2⌋, c + ⌈(size−1)/2⌉] clipped to [0, C−1]
      (W = size·C away from the channel edges): per window element 1 square + 1 add; per element
      1 multiply by α/size + 1 add bias + 1 pow β + 1 divide.
    Bytes: read X; write Y.
    Assumptions: each window's squares are recomputed (no sliding-window reuse); α/size is a constant.
    Reference: ONNX LRN-13 spec.
    """
    shape = shape_of(required_input(op, 0))
    n = math.prod(shape)
    channels = shape[1]
    positions = n // channels if channels else 0
    window = lrn_window_total(channels, op.attrs["size"])
    return streaming(op, _LRN_PER_WINDOW_ELEMENT * window * positions + _LRN_PER_ELEMENT * n)


# -------------------------------------------------------------------------------------- Softmax family
_SOFTMAX_PER_ELEMENT = 5  # max, x − max, exp, Σ, divide (Softmax) or final subtract (LogSoftmax)


def _softmax_rows(op: OpView, shape: tuple[int, ...]) -> int:
    """Rows the op normalizes: opset ≥ 13 along one ``axis``; before, X coerced to 2-D at ``axis``."""
    axis = normalize_axis(op.attrs.get("axis", -1 if op.opset >= 13 else 1), len(shape))
    if op.opset >= 13:
        length = shape[axis] if shape else 1
        return math.prod(shape) // length if length else 0
    return math.prod(shape[:axis])


@rule("Softmax", op_class=OpClass.SOFTMAX)
def softmax(op: OpView) -> Cost:
    """ai.onnx::Softmax. y = exp(x − max) / Σ exp(x − max) along ``axis``.

    Formula: FLOPs = 5·N, N = elements of X: per element 1 compare (running max), 1 subtract, 1 exp,
      1 add (sum), 1 divide.
    Bytes: read X; write Y.
    Assumptions: the max subtraction for stability is counted (every runtime does it); sums accumulate
      from 0, so the count does not depend on the axis.
    """
    return streaming(op, _SOFTMAX_PER_ELEMENT * required_input(op, 0).numel)


@rule("LogSoftmax", op_class=OpClass.SOFTMAX)
def log_softmax(op: OpView) -> Cost:
    """ai.onnx::LogSoftmax. y = (x − max) − log Σ exp(x − max) along ``axis``.

    Formula: FLOPs = 5·N + R, N = elements of X, R = rows normalized (N / X.shape[axis] from opset 13;
      product of the dims before ``axis`` before, when X is coerced to 2-D): per element 1 compare (max),
      1 subtract, 1 exp, 1 add (sum), 1 final subtract; per row 1 log.
    Bytes: read X; write Y.
    Assumptions: sums accumulate from 0.
    """
    shape = shape_of(required_input(op, 0))
    return streaming(op, _SOFTMAX_PER_ELEMENT * math.prod(shape) + _softmax_rows(op, shape))


@rule("Hardmax", op_class=OpClass.SOFTMAX)
def hardmax(op: OpView) -> Cost:
    """ai.onnx::Hardmax. y = one-hot of the first maximum along ``axis``.

    Formula: FLOPs = N, N = elements of X: 1 compare per element (running argmax).
    Bytes: read X; write Y.
    Assumptions: writing the one-hot result is traffic, not arithmetic.
    """
    return streaming(op, required_input(op, 0).numel)
