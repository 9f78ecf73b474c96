"""Cost rules: quantized ops (Quantize/DequantizeLinear, the integer convolutions and matrix products, and the
com.microsoft QLinear* contrib ops ONNX Runtime writes when it runs a QDQ model).

Counting rules are those of :mod:`onnxroof.rules.elementwise` (each +, −, ·, /, round, min, max = 1 operation;
a type conversion is free, as in Cast), plus three for scales and zero points:

* a constant computed from scales and zero points alone (``x_scale·w_scale / y_scale``, the bias minus
  ``x_zp·Σw``) is folded at load time, like an attribute constant: it costs nothing per inference;
* requantizing one value to an integer output is ``round + add y_zp + clamp (max, min)`` = 3 + z operations
  after its one multiply by the folded scale ratio (z = 1 when the output zero point is given);
* an integer product accumulates raw integers; the input zero point enters as ONE per-output correction
  ``− x_zp·Σw`` (folded into the bias constant), as gemmlowp/MLAS kernels do. The weight zero point's term
  ``− w_zp·Σx`` is not counted: weights are symmetric (``w_zp = 0``) in every mainstream quantizer.

A multiply-accumulate is 2 FLOPs; MACs of the integer products are those of their float counterparts
(:func:`onnxroof.rules.conv.conv_macs`, :func:`onnxroof.rules.matmul.matmul_macs`,
:func:`onnxroof.rules.matmul.gemm_mnk`). Traffic: every input read once at its own element size (int8/uint8
= 1 byte, float32 scales = 4, int32 bias = 4), every output written once.

Not costed (no rule, so reported as unsupported): com.microsoft::QLinearConcat, which requantizes an input
only when its scale and zero point differ from the output's — values onnxroof never reads.
"""

from __future__ import annotations

from onnxroof.core.cost import FLOPS_PER_MAC, Cost
from onnxroof.core.ir import OpView
from onnxroof.core.registry import Family
from onnxroof.core.states import OpClass
from onnxroof.rules._common import inputs_bytes, out_numel, outputs_bytes, required_input, streaming
from onnxroof.rules.conv import conv_macs
from onnxroof.rules.matmul import gemm_mnk, matmul_macs

FAMILY = Family("quantized", OpClass.OTHER)
rule = FAMILY.rule

MS = "com.microsoft"

_CLAMP = 2  # saturate to the integer type's range: 1 max + 1 min
_ROUND_CLAMP = 1 + _CLAMP  # round, then saturate (the zero-point add is counted where it is given)
_QUANTIZE = 1 + _ROUND_CLAMP  # x / y_scale (or a multiply by a folded ratio), round, saturate
_INTEGER_EPILOGUE = 1 + _QUANTIZE + 1  # folded-constant add, multiply by the ratio, round, saturate, + y_zp
_SIGMOID = 4  # 1 / (1 + exp(−x)), as in rules/elementwise.py
_LEAKY_RELU = 2  # x < 0 ? α·x : x, as in rules/elementwise.py
_DYNAMIC_SCALARS = 9  # DynamicQuantizeLinear's scale and zero point, see its docstring


def _given(op: OpView, *indices: int) -> int:
    """How many of the inputs at ``indices`` are present."""
    return sum(1 for i in indices if op.input(i) is not None)


def _product(op: OpView, macs: int, per_output: int, extra: float = 0.0) -> Cost:
    """An integer product: FLOPs = 2·MACs + per_output · numel(Y) + extra; every input read, Y written."""
    flops = FLOPS_PER_MAC * macs + per_output * out_numel(op) + extra
    return Cost(flops=float(flops), macs=macs, bytes_read=inputs_bytes(op), bytes_written=outputs_bytes(op))


# ------------------------------------------------------------------------------------ quantize / dequantize


@rule("QuantizeLinear", op_class=OpClass.ELEMENTWISE)
@rule("QuantizeLinear", domain=MS, op_class=OpClass.ELEMENTWISE)
def quantize_linear(op: OpView) -> Cost:
    """ai.onnx (and com.microsoft)::QuantizeLinear: y = saturate(round(x / y_scale) + y_zero_point).

    Formula: FLOPs = (4 + z) · N, N = elements of y, z = 1 if y_zero_point is given: per element 1 divide,
      1 round (half to even), 1 add of the zero point [z], 1 max + 1 min to saturate (the clamp is dropped,
      −2, for a float8 output with saturate=0); the conversion to the output type is free.
    Bytes: read x, y_scale and y_zero_point at their sizes; write y at its (1-byte for int8/uint8) size.
    Assumptions: per-axis and blocked scales cost the same per element (the scale is broadcast, read once).
    Reference: ONNX QuantizeLinear-21 spec.
    """
    out = op.output(0)
    unsaturated = out is not None and out.dtype.startswith("float8") and not op.attrs.get("saturate", 1)
    clamp = 0 if unsaturated else _CLAMP
    return streaming(op, (1 + 1 + clamp + _given(op, 2)) * out_numel(op))  # divide, round, saturate, [+ zp]


@rule("DequantizeLinear", op_class=OpClass.ELEMENTWISE)
@rule("DequantizeLinear", domain=MS, op_class=OpClass.ELEMENTWISE)
def dequantize_linear(op: OpView) -> Cost:
    """ai.onnx (and com.microsoft)::DequantizeLinear: y = (x − x_zero_point) · x_scale.

    Formula: FLOPs = (1 + z) · N, N = elements of y, z = 1 if x_zero_point is given: per element 1 subtract
      of the zero point [z] and 1 multiply by the scale; the conversion to float is free.
    Bytes: read x (1 byte per int8/uint8 element), x_scale and x_zero_point; write y at its float size.
    Assumptions: a DequantizeLinear of a weight is folded at load time (its output is a weight, which
      keeps the stored item size: see :mod:`onnxroof.core.ir`), so this rule charges only run-time dequantization.
    Reference: ONNX DequantizeLinear-21 spec.
    """
    return streaming(op, (1 + _given(op, 2)) * out_numel(op))


@rule("DynamicQuantizeLinear", op_class=OpClass.ELEMENTWISE)
def dynamic_quantize_linear(op: OpView) -> Cost:
    """ai.onnx::DynamicQuantizeLinear: uint8 quantization of x with a scale and zero point computed from x.

    Formula: FLOPs = 7 · N + 9, N = elements of x: per element 1 compare for min(x) and 1 for max(x), then
      QuantizeLinear's 5 (divide, round, add zero point, max, min); once per tensor 9 scalar operations:
      min(0, x_min), max(0, x_max), y_scale = (x_max − x_min) / 255 (subtract, divide),
      y_zero_point = saturate(round(0 − x_min / y_scale)) (divide, subtract, round, max, min).
    Bytes: read x once; write y (uint8), y_scale (float32) and y_zero_point (uint8).
    Assumptions: the min/max pass and the quantizing pass share one read of x (it is served from cache).
    Reference: ONNX DynamicQuantizeLinear-11 spec.
    """
    n = required_input(op, 0).numel
    return streaming(op, (2 + _QUANTIZE + 1) * n + _DYNAMIC_SCALARS)


# ------------------------------------------------------------------------------- integer convolutions, GEMMs


@rule("QLinearConv", op_class=OpClass.CONV)
def qlinear_conv(op: OpView) -> Cost:
    """ai.onnx::QLinearConv: y = requantize(Σ x·w + B) with x, w int8/uint8, B int32, y int8/uint8.

    Formula: MACs = numel(y) · (C / group) · Π k (the Conv formula, on the integer filter w = input 3);
      FLOPs = 2 · MACs + 6 · numel(y): per output element 1 add of the folded constant (B − x_zp·Σw),
      1 multiply by x_scale·w_scale / y_scale, then round, add y_zero_point, max, min.
    Bytes: read x, w (1 byte per element), B (4 bytes per element), the scales (float32) and zero points;
      write y (1 byte per element).
    Assumptions: integer accumulation (int32); w_zero_point = 0 (symmetric weights); per-channel w_scale
      folds into a per-channel ratio like a scalar one.
    Reference: ONNX QLinearConv-10 spec; gemmlowp's zero-point handling.
    """
    return _product(op, conv_macs(op, weight=3), _INTEGER_EPILOGUE)


@rule("ConvInteger", op_class=OpClass.CONV)
def conv_integer(op: OpView) -> Cost:
    """ai.onnx::ConvInteger: y = Σ (x − x_zero_point)·(w − w_zero_point), an int32 output.

    Formula: MACs = numel(y) · (C / group) · Π k (the Conv formula); FLOPs = 2 · MACs + z · numel(y),
      z = 1 if x_zero_point is given (the correction − x_zp·Σw, a per-channel constant folded at load time,
      added once per output element).
    Bytes: read x and w (1 byte per element) and the zero points; write y (int32, 4 bytes per element).
    Assumptions: w_zero_point = 0 (symmetric weights): its term − w_zp·Σx is not counted.
    Reference: ONNX ConvInteger-10 spec.
    """
    return _product(op, conv_macs(op), _given(op, 2))


@rule("MatMulInteger", op_class=OpClass.MATMUL)
def matmul_integer(op: OpView) -> Cost:
    """ai.onnx::MatMulInteger: Y = (A − a_zero_point) · (B − b_zero_point), an int32 output (numpy semantics).

    Formula: MACs = numel(Y) · K (the MatMul formula); FLOPs = 2 · MACs + z · numel(Y), z = 1 if
      a_zero_point is given (the correction − a_zp·Σ_k B[k, n], once per output element).
    Bytes: read A and B (1 byte per element) and the zero points; write Y (int32, 4 bytes per element).
    Assumptions: b_zero_point = 0 (symmetric weights); B's column sums are constants (or, for a run-time
      B, cost K·N adds, not counted: at most MACs / M).
    Reference: ONNX MatMulInteger-10 spec.
    """
    return _product(op, matmul_macs(op), _given(op, 2))


@rule("QLinearMatMul", op_class=OpClass.MATMUL)
def qlinear_matmul(op: OpView) -> Cost:
    """ai.onnx::QLinearMatMul: Y = requantize(A · B) with A, B, Y int8/uint8 (numpy semantics).

    Formula: MACs = numel(Y) · K (the MatMul formula); FLOPs = 2 · MACs + 6 · numel(Y): per output element
      1 add of the correction − a_zp·Σ_k B[k, n], 1 multiply by a_scale·b_scale / y_scale, then round, add
      y_zero_point, max, min.
    Bytes: read A and B (1 byte per element), the scales (float32) and zero points; write Y (1 byte per
      element).
    Assumptions: int32 accumulation; b_zero_point = 0 (symmetric weights); a run-time B's column sums
      (K·N adds) not counted.
    Reference: ONNX QLinearMatMul-10 spec.
    """
    return _product(op, matmul_macs(op), _INTEGER_EPILOGUE)


@rule("MatMulIntegerToFloat", domain=MS, op_class=OpClass.MATMUL)
def matmul_integer_to_float(op: OpView) -> Cost:
    """com.microsoft::MatMulIntegerToFloat: Y = (A − a_zp)·(B − b_zp) · a_scale·b_scale (+ bias), float output.

    Formula: MACs = numel(Y) · K; FLOPs = 2 · MACs + (1 + z + b) · numel(Y): per output element 1 multiply
      by the folded a_scale·b_scale, z = 1 if a_zero_point (input 4) is given (its correction), b = 1 if
      bias (input 6) is given (1 add).
    Bytes: read A, B (1 byte per element), the scales, zero points and bias; write Y (float32).
    Assumptions: as MatMulInteger (b_zero_point = 0).
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.MatMulIntegerToFloat.
    """
    return _product(op, matmul_macs(op), 1 + _given(op, 4, 6))


@rule("DynamicQuantizeMatMul", domain=MS, op_class=OpClass.MATMUL)
def dynamic_quantize_matmul(op: OpView) -> Cost:
    """com.microsoft::DynamicQuantizeMatMul: A (float) quantized on the fly to uint8, then an integer product
    with B (int8/uint8), scaled back to float (+ bias).

    Formula: MACs = numel(Y) · K; FLOPs = (7 · numel(A) + 9) + 2 · MACs + (2 + b) · numel(Y): the first term is
      DynamicQuantizeLinear's count on A; per output element 1 a_zp correction (the dynamic zero point is
      always present), 1 multiply by a_scale·b_scale, b = 1 if bias (input 4) is given (1 add).
    Bytes: read A (float32), B (1 byte per element), b_scale, b_zero_point and bias; write Y (float32). The
      quantized A stays inside the kernel.
    Assumptions: as MatMulInteger (b_zero_point = 0); A is read once for both passes.
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.DynamicQuantizeMatMul.
    """
    quantize_a = (2 + _QUANTIZE + 1) * required_input(op, 0).numel + _DYNAMIC_SCALARS
    return _product(op, matmul_macs(op), 2 + _given(op, 4), extra=quantize_a)


@rule("QGemm", domain=MS, op_class=OpClass.MATMUL)
def qgemm(op: OpView) -> Cost:
    """com.microsoft::QGemm: Y = α · A'·B' + C with A, B int8/uint8, C int32; Y quantized when y_scale is given,
    else float32. ``A'``/``B'``: A and B (inputs 0 and 3), transposed per transA/transB.

    Formula: MACs = M·N·K (the Gemm formula); FLOPs = 2 · MACs + r · M·N, per output element 1 add of the
      folded constant (C − a_zp·Σ_k B'), 1 multiply by α·a_scale·b_scale (/ y_scale), and for a quantized
      output (y_scale, input 7, given) round, max, min and the y_zero_point add if given (input 8):
      r = 2 (float output) or 5 + z (quantized output).
    Bytes: read A, B (1 byte per element), C (4 bytes per element), the scales and zero points; write Y.
    Assumptions: as QLinearMatMul (int32 accumulation, b_zero_point = 0).
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.QGemm.
    """
    m, n, k = gemm_mnk(op)
    per_output = 2 + (_ROUND_CLAMP + _given(op, 8) if op.input(7) is not None else 0)
    macs = m * n * k
    flops = FLOPS_PER_MAC * macs + per_output * m * n
    return Cost(flops=float(flops), macs=macs, bytes_read=inputs_bytes(op), bytes_written=outputs_bytes(op))


# --------------------------------------------------------------------------- com.microsoft elementwise, pooling


@rule("QLinearAdd", "QLinearMul", domain=MS)
def qlinear_binary(op: OpView) -> Cost:
    """com.microsoft::QLinearAdd / QLinearMul: C = quantize(dequantize(A) ∘ dequantize(B)), broadcast.

    Formula: FLOPs = k · N, N = elements of C, with z_a, z_b, z_c = 1 for each zero point given (inputs 2,
      5, 7) and the output scale folded into the operands' ratios:
      QLinearAdd: k = 6 + z_a + z_b + z_c — per operand (subtract zp [z], multiply by scale / C_scale),
      1 add, then round, add C_zero_point [z_c], max, min;
      QLinearMul: k = 5 + z_a + z_b + z_c — (a − z_a)·(b − z_b): 1 multiply, 1 multiply by
      A_scale·B_scale / C_scale, then round, add C_zero_point [z_c], max, min.
    Bytes: read A and B (1 byte per element) and the scales and zero points; write C (1 byte per element).
    Assumptions: broadcasting costs per output element, as in the float elementwise rules.
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.QLinearAdd / QLinearMul.
    """
    core = 3 if op.op_type == "QLinearAdd" else 2  # 2 scale multiplies + add, or multiply + scale multiply
    return streaming(op, (core + _ROUND_CLAMP + _given(op, 2, 5, 7)) * out_numel(op))


@rule("QLinearSigmoid", "QLinearLeakyRelu", domain=MS)
def qlinear_activation(op: OpView) -> Cost:
    """com.microsoft::QLinearSigmoid / QLinearLeakyRelu: Y = quantize(f(dequantize(X))).

    Formula: FLOPs = k · N, N = elements of Y, z_x, z_y = 1 for each zero point given (inputs 2 and 4):
      QLinearSigmoid: k = 9 + z_x + z_y — subtract X_zero_point [z_x], multiply by X_scale, Sigmoid's 4
      (negate, exp, add, divide), divide by Y_scale, then round, add Y_zero_point [z_y], max, min;
      QLinearLeakyRelu: k = 6 + z_x + z_y — subtract X_zero_point [z_x], multiply by X_scale / Y_scale
      (LeakyRelu commutes with a positive scale), LeakyRelu's 2 (compare, multiply), then round, add
      Y_zero_point [z_y], max, min.
    Bytes: read X (1 byte per element) and the scales and zero points; write Y (1 byte per element).
    Assumptions: the arithmetic of the definition; ONNX Runtime evaluates both as a 256-entry table lookup
      built at load time when the scales are constant (memory-bound either way).
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.QLinearSigmoid / QLinearLeakyRelu.
    """
    f = _SIGMOID + 1 if op.op_type == "QLinearSigmoid" else _LEAKY_RELU  # Sigmoid's output divided by Y_scale
    return streaming(op, (1 + f + _ROUND_CLAMP + _given(op, 2, 4)) * out_numel(op))


@rule("QLinearGlobalAveragePool", domain=MS)
def qlinear_global_average_pool(op: OpView) -> Cost:
    """com.microsoft::QLinearGlobalAveragePool: Y = quantize(mean over the spatial dims of dequantize(X)).

    Formula: FLOPs = N_in + (4 + z_x + z_y) · N_out, N_in = elements of X, N_out = elements of Y: 1 integer
      add per input element; per output element, the scale and zero point applied once to the sum (a
      linear map commutes with it): subtract count·x_zero_point [z_x, input 2], multiply by
      x_scale / (count · y_scale), round, add y_zero_point [z_y, input 4], max, min.
    Bytes: read X (1 byte per element) and the scales and zero points; write Y (1 byte per element).
    Assumptions: int32 accumulation; channels_last only changes the layout.
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.QLinearGlobalAveragePool.
    """
    n_in = required_input(op, 0).numel
    return streaming(op, n_in + (1 + _ROUND_CLAMP + _given(op, 2, 4)) * out_numel(op))
