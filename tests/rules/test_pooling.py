"""Pooling rules: output elements × kernel volume × per-visit work (+ a per-output finish)."""

from __future__ import annotations

import math

import pytest
from helpers import cost_of, make_op
from hypothesis import given, settings
from hypothesis import strategies as st

from onnxroof.core.errors import ShapeUnknown
from onnxroof.rules import REGISTRY

F32 = "float32"
I64 = "int64"


def pooled(size: int, kernel: int, stride: int = 1, pad: int = 0) -> int:
    """Output extent of one spatial axis (floor mode)."""
    return (size + 2 * pad - kernel) // stride + 1


def test_maxpool_2d():
    b, c_, h, w, k, s = 2, 8, 32, 32, 3, 2
    oh, ow = pooled(h, k, s, 1), pooled(w, k, s, 1)
    out = (b, c_, oh, ow)
    c = cost_of(
        make_op("MaxPool", [((b, c_, h, w), F32)], [(out, F32)], kernel_shape=[k, k], strides=[s, s], pads=[1, 1, 1, 1])
    )
    n_out = b * c_ * oh * ow
    assert c.flops == n_out * k * k
    assert c.macs == 0
    assert c.bytes_read == b * c_ * h * w * 4
    assert c.bytes_written == n_out * 4


def test_maxpool_indices_output_written():
    x, out = (1, 4, 8, 8), (1, 4, 4, 4)
    n_out = math.prod(out)
    c = cost_of(make_op("MaxPool", [(x, F32)], [(out, F32), (out, I64)], kernel_shape=[2, 2], strides=[2, 2]))
    assert c.flops == n_out * 2 * 2
    assert c.bytes_written == n_out * (4 + 8)


@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_averagepool_count_include_pad_does_not_change_count(count_include_pad):
    x = (1, 16, 14, 14)
    out = (1, 16, pooled(14, 3, 1, 1), pooled(14, 3, 1, 1))
    n_out = math.prod(out)
    c = cost_of(
        make_op(
            "AveragePool",
            [(x, F32)],
            [(out, F32)],
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
            count_include_pad=count_include_pad,
        )
    )
    assert c.flops == n_out * 3 * 3 + n_out  # adds per window position, one divide per output
    assert c.bytes_read == math.prod(x) * 4


def test_pool_1d_and_3d():
    c1 = cost_of(make_op("MaxPool", [((2, 3, 20), F32)], [((2, 3, 16), F32)], kernel_shape=[5]))
    assert c1.flops == 2 * 3 * 16 * 5
    out3 = (1, 2, 3, 3, 3)
    c3 = cost_of(
        make_op("AveragePool", [((1, 2, 6, 6, 6), F32)], [(out3, F32)], kernel_shape=[2, 2, 2], strides=[2, 2, 2])
    )
    assert c3.flops == math.prod(out3) * 2 * 2 * 2 + math.prod(out3)


@pytest.mark.parametrize(("opset", "p", "per_visit"), [(18, 2, 2), (18, 3, 3), (18, 1, 3), (1, 2.0, 2)])
def test_lppool(opset, p, per_visit):
    # p = 2: x·x + add; otherwise |x|, pow, add. One root per output.
    x, out = (1, 4, 9, 9), (1, 4, 3, 3)
    n_out = math.prod(out)
    c = cost_of(make_op("LpPool", [(x, F32)], [(out, F32)], opset=opset, kernel_shape=[3, 3], strides=[3, 3], p=p))
    assert c.flops == n_out * 3 * 3 * per_visit + n_out


def test_global_pools():
    x, out = (2, 64, 7, 7), (2, 64, 1, 1)
    n, n_out = math.prod(x), math.prod(out)
    assert cost_of(make_op("GlobalMaxPool", [(x, F32)], [(out, F32)])).flops == n
    avg = cost_of(make_op("GlobalAveragePool", [(x, F32)], [(out, F32)]))
    assert avg.flops == n + n_out
    assert avg.bytes_read == n * 4
    assert avg.bytes_written == n_out * 4
    assert cost_of(make_op("GlobalLpPool", [(x, F32)], [(out, F32)])).flops == 2 * n + n_out
    assert cost_of(make_op("GlobalLpPool", [(x, F32)], [(out, F32)], p=3)).flops == 3 * n + n_out


def test_unknown_shape_propagates():
    with pytest.raises(ShapeUnknown):
        cost_of(make_op("MaxPool", [((1, 3, 8, 8), F32)], [((1, 3, None, None), F32)], kernel_shape=[2, 2]))
    with pytest.raises(ShapeUnknown):
        cost_of(make_op("GlobalAveragePool", [((None, 3, 8, 8), F32)], [((None, 3, 1, 1), F32)]))


# -------------------------------------------------------------------------------------- properties
@settings(max_examples=50, deadline=None)
@given(
    st.sampled_from(["MaxPool", "AveragePool", "LpPool"]),
    st.integers(1, 3),  # spatial rank
    st.data(),
)
def test_property_flops_linear_in_kernel_volume(op_type, rank, data):
    spatial = data.draw(st.lists(st.integers(4, 12), min_size=rank, max_size=rank))
    kernel = data.draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank))
    x = (1, 2, *spatial)
    out = (1, 2, *(pooled(s, k) for s, k in zip(spatial, kernel, strict=True)))
    n_out, volume = math.prod(out), math.prod(kernel)
    c = cost_of(make_op(op_type, [(x, F32)], [(out, F32)], kernel_shape=kernel))
    per_visit = {"MaxPool": 1, "AveragePool": 1, "LpPool": 2}[op_type]
    finish = 0 if op_type == "MaxPool" else n_out
    assert c.flops - finish == n_out * volume * per_visit
    assert c.bytes_read == math.prod(x) * 4
    assert c.bytes_written == n_out * 4


# ------------------------------------------------------------------------------------------ registry
MODULE = "onnxroof.rules.pooling"


def test_every_rule_documented():
    entries = [e for e in REGISTRY.all_rules() if e.fn.__module__ == MODULE]
    assert {e.op_type for e in entries} == {
        "MaxPool",
        "AveragePool",
        "LpPool",
        "GlobalMaxPool",
        "GlobalAveragePool",
        "GlobalLpPool",
    }
    for e in entries:
        assert "Formula:" in e.doc, e.op_type
        assert "Bytes:" in e.doc, e.op_type
