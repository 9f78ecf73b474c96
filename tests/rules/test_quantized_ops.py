"""Quantized ops against closed-form formulas: Quantize/DequantizeLinear, the integer convolutions and matrix
products (the float formulas' MACs at 1 byte per element), the com.microsoft QLinear* ops; the stored size of
a dequantized weight and the integer compute dtype."""

from __future__ import annotations

import math

import onnx
import pytest
from helpers import W, cost_of, make_op, parse_model

import onnxroof
from onnxroof.core.ir import build_ir
from onnxroof.load.reader import load_model
from onnxroof.roofline.precision import precision_of
from onnxroof.rules import REGISTRY

F32, I8, U8, I32 = "float32", "int8", "uint8", "int32"
MS = "com.microsoft"
SCALAR_F = ((), F32, W)
SCALAR_I8 = ((), I8, W)
SCALAR_U8 = ((), U8, W)
QPARAMS = 4 + 1  # a float32 scale and an 8-bit zero point


# ------------------------------------------------------------------------------------ quantize / dequantize


@pytest.mark.parametrize(("zero_point", "k"), [(True, 5), (False, 4)])
def test_quantize_linear(zero_point: bool, k: int) -> None:
    shape, n = (2, 3, 4), 24
    inputs = [(shape, F32), SCALAR_F, SCALAR_I8 if zero_point else None]
    c = cost_of(make_op("QuantizeLinear", inputs, [(shape, I8)], opset=19))
    assert c.flops == k * n  # divide, round, [add zero point], max, min
    assert c.bytes_read == 4 * n + 4 + (1 if zero_point else 0)
    assert c.bytes_written == n  # int8: 1 byte per element
    assert c.params == 1 + (1 if zero_point else 0)


def test_quantize_linear_float8_without_saturation_drops_the_clamp() -> None:
    shape, n = (4, 8), 32
    c = cost_of(make_op("QuantizeLinear", [(shape, F32), SCALAR_F], [(shape, "float8e4m3fn")], opset=19, saturate=0))
    assert c.flops == 2 * n


def test_dequantize_linear_per_axis() -> None:
    shape, n, channels = (2, 16, 5, 5), 800, 16
    inputs = [(shape, U8), ((channels,), F32, W), ((channels,), U8, W)]
    c = cost_of(make_op("DequantizeLinear", inputs, [(shape, F32)], axis=1))
    assert c.flops == 2 * n  # subtract zero point, multiply
    assert c.bytes_read == n + channels * 4 + channels
    assert c.bytes_written == 4 * n
    no_zero_point = cost_of(make_op("DequantizeLinear", [(shape, I8), SCALAR_F], [(shape, F32)]))
    assert no_zero_point.flops == n


def test_com_microsoft_quantize_dequantize_share_the_rules() -> None:
    shape, n = (8, 8), 64
    q = cost_of(make_op("QuantizeLinear", [(shape, F32), SCALAR_F, SCALAR_I8], [(shape, I8)], domain=MS, opset=1))
    dq = cost_of(make_op("DequantizeLinear", [(shape, I8), SCALAR_F, SCALAR_I8], [(shape, F32)], domain=MS, opset=1))
    assert (q.flops, dq.flops) == (5 * n, 2 * n)


def test_dynamic_quantize_linear() -> None:
    shape, n = (4, 32), 128
    c = cost_of(make_op("DynamicQuantizeLinear", [(shape, F32)], [(shape, U8), ((), F32), ((), U8)]))
    assert c.flops == 7 * n + 9
    assert c.bytes_read == 4 * n
    assert c.bytes_written == n + 4 + 1


# ---------------------------------------------------------------------------------- integer convolutions


def _qlinear_conv(n, c, h, m, k, group, bias, act=U8, stride=1):
    ho = (h - k) // stride + 1
    inputs = [
        ([n, c, h, h], act),
        SCALAR_F,
        ((), act, W),
        ([m, c // group, k, k], I8, W),
        ((m,), F32, W),  # per-channel weight scales
        ((m,), I8, W),
        SCALAR_F,
        ((), act, W),
        ((m,), I32, W) if bias else None,
    ]
    op = make_op("QLinearConv", inputs, [([n, m, ho, ho], act)], group=group, strides=[stride, stride])
    return op, ho


@pytest.mark.parametrize(
    ("n", "c", "h", "m", "k", "group", "bias"), [(1, 8, 10, 16, 3, 1, True), (2, 8, 9, 8, 3, 8, False)]
)
def test_qlinear_conv(n, c, h, m, k, group, bias) -> None:
    op, ho = _qlinear_conv(n, c, h, m, k, group, bias)
    cost = cost_of(op)
    macs = n * m * ho * ho * (c // group) * k * k
    out = n * m * ho * ho
    assert cost.macs == macs
    assert cost.flops == 2 * macs + 6 * out  # + (B − x_zp·Σw), · ratio, round, + y_zp, max, min
    weights = m * (c // group) * k * k
    qparams = 4 + 1 + (4 * m + m) + 4 + 1  # x, w (per channel), y scales and zero points
    assert cost.bytes_read == n * c * h * h + weights + qparams + (4 * m if bias else 0)
    assert cost.bytes_written == out
    assert cost.params == weights + 1 + 1 + 2 * m + 1 + 1 + (m if bias else 0)


def test_qlinear_conv_flops_match_conv_macs() -> None:
    op, _ = _qlinear_conv(1, 4, 8, 6, 3, 1, True, stride=2)
    conv = cost_of(
        make_op("Conv", [([1, 4, 8, 8], F32), ([6, 4, 3, 3], F32, W)], [([1, 6, 3, 3], F32)], strides=[2, 2])
    )
    assert cost_of(op).macs == conv.macs


def test_conv_integer() -> None:
    n, c, h, m, k = 1, 4, 6, 8, 3
    ho = h - k + 1
    inputs = [([n, c, h, h], U8), ([m, c, k, k], I8, W), SCALAR_U8, SCALAR_I8]
    cost = cost_of(make_op("ConvInteger", inputs, [([n, m, ho, ho], I32)]))
    macs = n * m * ho * ho * c * k * k
    assert cost.macs == macs
    assert cost.flops == 2 * macs + n * m * ho * ho  # the x_zp correction per output element
    assert cost.bytes_read == n * c * h * h + m * c * k * k + 2
    assert cost.bytes_written == 4 * n * m * ho * ho  # int32
    no_zero_point = cost_of(make_op("ConvInteger", inputs[:2], [([n, m, ho, ho], I32)]))
    assert no_zero_point.flops == 2 * macs


# -------------------------------------------------------------------------------------- integer products


def test_matmul_integer() -> None:
    m, k, n = 16, 32, 8
    inputs = [([m, k], U8), ([k, n], I8, W), SCALAR_U8, SCALAR_I8]
    c = cost_of(make_op("MatMulInteger", inputs, [([m, n], I32)]))
    assert c.macs == m * k * n
    assert c.flops == 2 * m * k * n + m * n
    assert c.bytes_read == m * k + k * n + 1 + 1  # int8 operands and zero points
    assert c.bytes_written == 4 * m * n  # int32 output
    assert c.params == k * n + 1 + 1  # B and the two zero points (constants); A is not


def test_qlinear_matmul_batched() -> None:
    b, m, k, n = 2, 4, 16, 8
    inputs = [([b, m, k], I8), SCALAR_F, SCALAR_I8, ([k, n], I8, W), SCALAR_F, SCALAR_I8, SCALAR_F, SCALAR_I8]
    c = cost_of(make_op("QLinearMatMul", inputs, [([b, m, n], I8)]))
    assert c.macs == b * m * k * n
    assert c.flops == 2 * b * m * k * n + 6 * b * m * n
    assert c.bytes_read == b * m * k + k * n + 3 * QPARAMS
    assert c.bytes_written == b * m * n


@pytest.mark.parametrize("bias", [True, False])
def test_matmul_integer_to_float(bias: bool) -> None:
    m, k, n = 8, 16, 4
    inputs = [([m, k], U8), ([k, n], I8, W), SCALAR_F, SCALAR_F, SCALAR_U8, SCALAR_I8, ((n,), F32, W) if bias else None]
    c = cost_of(make_op("MatMulIntegerToFloat", inputs, [([m, n], F32)], domain=MS, opset=1))
    assert c.flops == 2 * m * k * n + (1 + 1 + (1 if bias else 0)) * m * n
    assert c.bytes_read == m * k + k * n + 4 + 4 + 1 + 1 + (4 * n if bias else 0)
    assert c.bytes_written == 4 * m * n


def test_dynamic_quantize_matmul() -> None:
    m, k, n = 8, 16, 4
    inputs = [([m, k], F32), ([k, n], I8, W), SCALAR_F, SCALAR_I8, ((n,), F32, W)]
    c = cost_of(make_op("DynamicQuantizeMatMul", inputs, [([m, n], F32)], domain=MS, opset=1))
    assert c.macs == m * k * n
    assert c.flops == (7 * m * k + 9) + 2 * m * k * n + 3 * m * n
    assert c.bytes_read == 4 * m * k + k * n + 4 + 1 + 4 * n
    assert c.bytes_written == 4 * m * n


@pytest.mark.parametrize("quantized_output", [True, False])
def test_qgemm(quantized_output: bool) -> None:
    m, k, n = 4, 6, 5
    inputs = [([k, m], U8), SCALAR_F, SCALAR_U8, ([n, k], I8, W), SCALAR_F, SCALAR_I8, ((n,), I32, W)]
    if quantized_output:
        inputs += [SCALAR_F, SCALAR_U8]
    out = [([m, n], U8 if quantized_output else F32)]
    c = cost_of(make_op("QGemm", inputs, out, domain=MS, opset=1, transA=1, transB=1))
    assert c.macs == m * n * k
    assert c.flops == 2 * m * n * k + (6 if quantized_output else 2) * m * n
    assert c.bytes_read == m * k + n * k + 4 * n + 2 * QPARAMS + (QPARAMS if quantized_output else 0)
    assert c.bytes_written == m * n * (1 if quantized_output else 4)


# ------------------------------------------------------------------------------- com.microsoft elementwise


@pytest.mark.parametrize(("op_type", "k"), [("QLinearAdd", 9), ("QLinearMul", 8)])
def test_qlinear_binary_broadcast(op_type: str, k: int) -> None:
    a, b, out = (2, 8, 5), (8, 1), (2, 8, 5)
    inputs = [(a, U8), SCALAR_F, SCALAR_U8, (b, U8), SCALAR_F, SCALAR_U8, SCALAR_F, SCALAR_U8]
    c = cost_of(make_op(op_type, inputs, [(out, U8)], domain=MS, opset=1))
    assert c.flops == k * math.prod(out)
    assert c.bytes_read == math.prod(a) + math.prod(b) + 3 * QPARAMS
    assert c.bytes_written == math.prod(out)
    without_zero_points = [(a, U8), SCALAR_F, None, (b, U8), SCALAR_F, None, SCALAR_F]
    bare = cost_of(make_op(op_type, without_zero_points, [(out, U8)], domain=MS, opset=1))
    assert bare.flops == (k - 3) * math.prod(out)


@pytest.mark.parametrize(("op_type", "k"), [("QLinearSigmoid", 11), ("QLinearLeakyRelu", 8)])
def test_qlinear_activations(op_type: str, k: int) -> None:
    shape, n = (3, 7), 21
    inputs = [(shape, I8), SCALAR_F, SCALAR_I8, SCALAR_F, SCALAR_I8]
    c = cost_of(make_op(op_type, inputs, [(shape, I8)], domain=MS, opset=1))
    assert c.flops == k * n
    assert c.bytes_read == n + 2 * QPARAMS
    assert c.bytes_written == n


def test_qlinear_global_average_pool() -> None:
    n, ch, h = 2, 16, 7
    inputs = [([n, ch, h, h], U8), SCALAR_F, SCALAR_U8, SCALAR_F, SCALAR_U8]
    c = cost_of(make_op("QLinearGlobalAveragePool", inputs, [([n, ch, 1, 1], U8)], domain=MS, opset=1))
    assert c.flops == n * ch * h * h + 6 * n * ch  # integer sum; per output − count·zp, ·ratio, round, + zp, clamp
    assert c.bytes_read == n * ch * h * h + 2 * QPARAMS
    assert c.bytes_written == n * ch


def test_qlinear_concat_is_unsupported_not_zero() -> None:
    assert REGISTRY.lookup(MS, "QLinearConcat") is None


# ------------------------------------------------------------------------ the IR: stored size, compute dtype

QDQ_CONV = (
    """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1,4,8,8] x) => (float[1,6,8,8] y)
<int8[6,4,3,3] wq = {"""
    + ",".join(["1"] * 216)
    + """}, float ws = {0.02}, int8 wz = {0}, int32[6] bq = {1,2,3,4,5,6},
 float bs = {0.0002}, float s = {0.1}, int8 z = {0}>
{
  xq = QuantizeLinear(x, s, z)
  xd = DequantizeLinear(xq, s, z)
  w = DequantizeLinear(wq, ws, wz)
  b = DequantizeLinear(bq, bs)
  c = Conv<pads=[1,1,1,1]>(xd, w, b)
  cq = QuantizeLinear(c, s, z)
  y = DequantizeLinear(cq, s, z)
}
"""
)


def test_dequantized_weight_keeps_its_stored_size(tmp_path) -> None:
    path = tmp_path / "qdq_conv.onnx"
    onnx.save(parse_model(QDQ_CONV), path)
    loaded = load_model(path)
    ir = build_ir(loaded.model, loaded.value_types, view_ops=REGISTRY.view_ops)
    w, b, xd = ir.tensors["w"], ir.tensors["b"], ir.tensors["xd"]
    assert (w.dtype, w.itemsize, w.role) == ("float32", 1, "weight")  # int8 as stored
    assert (b.dtype, b.itemsize) == ("float32", 4)  # int32 bias: 4 bytes either way
    assert (xd.dtype, xd.itemsize) == ("float32", 4)  # a run-time dequantization writes floats
    analysis = onnxroof.analyze(path, platform="xavier", fusion="none")
    conv = next(node for node in analysis.nodes if node.op_type == "Conv")
    assert conv.bytes_read == 4 * 4 * 8 * 8 + 6 * 4 * 3 * 3 * 1 + 6 * 4
    assert analysis.totals.weight_bytes == 216 * 1 + 6 * 4 + 4 + 1  # weights, bias, the activations' s and z
    folded = [node for node in analysis.nodes if node.state == "folded"]
    assert {node.op_type for node in folded} == {"DequantizeLinear"} and len(folded) == 2


@pytest.mark.parametrize(
    ("op_type", "inputs", "dtype"),
    [
        ("QLinearConv", [([1, 4, 8, 8], U8), SCALAR_F, SCALAR_U8, ([4, 4, 1, 1], I8, W)], U8),
        ("QLinearMatMul", [([4, 8], I8), SCALAR_F, SCALAR_I8], I8),
        ("MatMulInteger", [([4, 8], U8), ([8, 2], I8, W)], U8),
        ("ConvInteger", [([1, 4, 8, 8], I8), ([4, 4, 1, 1], I8, W)], I8),
        ("DynamicQuantizeMatMul", [([4, 8], F32), ([8, 2], I8, W), SCALAR_F], I8),
    ],
)
def test_integer_ops_compute_at_their_integer_dtype(op_type, inputs, dtype) -> None:
    op = make_op(op_type, inputs, [([1], F32)], domain=MS if op_type == "DynamicQuantizeMatMul" else "")
    assert op.dtype == dtype
    assert precision_of(op.dtype) == "int8"


def test_other_ops_keep_their_first_floating_input() -> None:
    dq = make_op("DequantizeLinear", [((4,), I8), SCALAR_F], [((4,), F32)])
    add = make_op("QLinearAdd", [((4,), U8), SCALAR_F, SCALAR_U8, ((4,), U8), SCALAR_F], [((4,), U8)], domain=MS)
    assert dq.dtype == "float32" and add.dtype == "float32"
