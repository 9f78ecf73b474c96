"""MatMul, Gemm, Einsum, Conv, ConvTranspose and recurrent rules against closed-form formulas."""

from __future__ import annotations

import math

import onnx
from helpers import W, cost_of, make_op
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import onnxroof

F32 = "float32"


def test_matmul_batched_broadcast() -> None:
    b, m, k, n = 3, 5, 7, 11
    c = cost_of(make_op("MatMul", [([b, m, k], F32), ([k, n], F32, W)], [([b, m, n], F32)]))
    assert c.macs == b * m * k * n
    assert c.flops == 2 * b * m * k * n
    assert c.bytes_read == 4 * (b * m * k + k * n)  # the broadcast weight is read once
    assert c.bytes_written == 4 * b * m * n
    assert c.params == k * n


def test_matmul_vector_operands() -> None:
    k, n = 8, 4
    c = cost_of(make_op("MatMul", [([k], F32), ([k, n], F32)], [([n], F32)]))
    assert c.macs == k * n


def test_gemm_with_bias_alpha_beta() -> None:
    m, k, n = 4, 6, 5
    plain = cost_of(make_op("Gemm", [([m, k], F32), ([k, n], F32, W)], [([m, n], F32)]))
    assert plain.flops == 2 * m * n * k
    biased = cost_of(make_op("Gemm", [([m, k], F32), ([n, k], F32, W), ([n], F32, W)], [([m, n], F32)], transB=1))
    assert biased.macs == m * n * k
    assert biased.flops == 2 * m * n * k + m * n
    assert biased.params == n * k + n
    scaled = cost_of(
        make_op("Gemm", [([k, m], F32), ([k, n], F32), ([m, n], F32)], [([m, n], F32)], transA=1, alpha=0.5, beta=2.0)
    )
    assert scaled.macs == m * n * k
    assert scaled.flops == 2 * m * n * k + 3 * m * n


def test_einsum_two_operands_and_ellipsis() -> None:
    b, h, s, d = 2, 4, 8, 16
    c = cost_of(
        make_op("Einsum", [([b, h, s, d], F32), ([b, h, s, d], F32)], [([b, h, s, s], F32)], equation="bhid,bhjd->bhij")
    )
    assert c.macs == b * h * s * s * d
    e = cost_of(
        make_op(
            "Einsum", [([b, h, s, d], F32), ([b, h, s, d], F32)], [([b, h, s, s], F32)], equation="...id,...jd->...ij"
        )
    )
    assert e.macs == c.macs


def test_einsum_three_operands_pairwise() -> None:
    i, j, k, m = 3, 4, 5, 6
    c = cost_of(
        make_op("Einsum", [([i, j], F32), ([j, k], F32), ([k, m], F32)], [([i, m], F32)], equation="ij,jk,km->im")
    )
    assert c.macs == i * j * k + i * k * m  # (ij·jk → ik) then (ik·km → im)


def test_einsum_single_operand() -> None:
    assert cost_of(make_op("Einsum", [([3, 4], F32)], [([4, 3], F32)], equation="ij->ji")).flops == 0
    assert cost_of(make_op("Einsum", [([3, 4], F32)], [([3], F32)], equation="ij->i")).flops == 12


def _conv_model(n, c, h, m, k, stride, pad, dilation, group, bias, transpose=False) -> onnx.ModelProto:
    w_shape = [c, m // group, k, k] if transpose else [m, c // group, k, k]
    inits = [helper.make_tensor("w", TensorProto.FLOAT, w_shape, [0.0] * math.prod(w_shape))]
    inputs = ["x", "w"]
    if bias:
        inits.append(helper.make_tensor("b", TensorProto.FLOAT, [m], [0.0] * m))
        inputs.append("b")
    node = helper.make_node(
        "ConvTranspose" if transpose else "Conv",
        inputs,
        ["y"],
        strides=[stride, stride],
        pads=[pad] * 4,
        dilations=[dilation, dilation],
        group=group,
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, c, h, h])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * 4)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


conv_params = st.tuples(
    st.integers(1, 2),
    st.sampled_from([1, 2, 4]),
    st.integers(5, 12),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([1, 3]),
    st.integers(1, 2),
    st.integers(0, 1),
    st.integers(1, 2),
    st.booleans(),
)


@settings(max_examples=15, deadline=None)
@given(conv_params, st.sampled_from([1, 2]))
def test_conv_macs_through_onnx_inference(p, group_choice) -> None:
    """Stride, padding, dilation and groups: the output size formula, through ONNX's own shape inference."""
    n, c, h, m, k, stride, pad, dilation, bias = p
    group = group_choice if c % group_choice == 0 and m % group_choice == 0 else 1
    out = (h + 2 * pad - dilation * (k - 1) - 1) // stride + 1
    analysis = onnxroof.analyze(_conv_model(n, c, h, m, k, stride, pad, dilation, group, bias))
    node = next(x for x in analysis.nodes if x.op_type == "Conv")
    macs = n * m * out * out * (c // group) * k * k
    assert node.macs == macs
    assert node.flops == 2 * macs + (n * m * out * out if bias else 0)
    assert node.bytes_read == 4 * (n * c * h * h + m * (c // group) * k * k + (m if bias else 0))
    assert node.bytes_written == 4 * n * m * out * out
    assert analysis.totals.params == m * (c // group) * k * k + (m if bias else 0)


@settings(max_examples=10, deadline=None)
@given(conv_params)
def test_conv_transpose_macs(p) -> None:
    n, c, h, m, k, stride, _pad, dilation, bias = p
    analysis = onnxroof.analyze(_conv_model(n, c, h, m, k, stride, 0, dilation, 1, bias, transpose=True))
    node = next(x for x in analysis.nodes if x.op_type == "ConvTranspose")
    out = (h - 1) * stride + dilation * (k - 1) + 1
    assert node.output_shapes[0] == [n, m, out, out]
    macs = n * c * h * h * m * k * k
    assert node.macs == macs
    assert node.flops == 2 * macs + (n * m * out * out if bias else 0)


def _rnn_op(op_type: str, gates: int, seq: int, batch: int, inp: int, hid: int, dirs: int, bias: bool, **attrs):
    inputs = [([seq, batch, inp], F32), ([dirs, gates * hid, inp], F32, W), ([dirs, gates * hid, hid], F32, W)]
    inputs.append(([dirs, 2 * gates * hid], F32, W) if bias else None)
    outputs = [([seq, dirs, batch, hid], F32), ([dirs, batch, hid], F32)]
    if op_type == "LSTM":
        outputs.append(([dirs, batch, hid], F32))
    return make_op(
        op_type, inputs, outputs, hidden_size=hid, direction="bidirectional" if dirs == 2 else "forward", **attrs
    )


@settings(max_examples=20, deadline=None)
@given(
    st.integers(1, 50),
    st.integers(1, 4),
    st.integers(1, 16),
    st.integers(1, 16),
    st.sampled_from([1, 2]),
    st.booleans(),
)
def test_recurrent_costs_scale_with_sequence(seq, batch, inp, hid, dirs, bias) -> None:
    steps = seq * batch * dirs
    lstm = cost_of(_rnn_op("LSTM", 4, seq, batch, inp, hid, dirs, bias))
    assert lstm.macs == steps * 4 * hid * (inp + hid)
    assert lstm.flops == 2 * lstm.macs + steps * hid * (4 + 3 * 4 + 2 * 1 + 3 + 1 + (8 if bias else 0))
    gru = cost_of(_rnn_op("GRU", 3, seq, batch, inp, hid, dirs, bias))
    assert gru.macs == steps * 3 * hid * (inp + hid)
    assert gru.flops == 2 * gru.macs + steps * hid * (3 + 2 * 4 + 1 + 1 + 4 + (6 if bias else 0))
    rnn = cost_of(_rnn_op("RNN", 1, seq, batch, inp, hid, dirs, bias))
    assert rnn.macs == steps * hid * (inp + hid)
    assert rnn.flops == 2 * rnn.macs + steps * hid * (2 + (2 if bias else 0))
    assert lstm.params == dirs * 4 * hid * (inp + hid) + (dirs * 8 * hid if bias else 0)


def test_lstm_sample_costed_with_symbolic_sequence() -> None:
    for seq in (5, 50):
        analysis = onnxroof.analyze("samples/tiny_lstm.onnx", dims={"seq": seq, "batch": 2})
        node = next(x for x in analysis.nodes if x.op_type == "LSTM")
        assert node.state == "costed"
        assert node.macs == seq * 2 * 4 * 32 * (16 + 32)
