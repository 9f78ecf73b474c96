"""Normalization rules: per-element work + per-row/per-channel statistics, in closed form."""

from __future__ import annotations

import math

import pytest
from helpers import W, cost_of, make_op
from hypothesis import given, settings
from hypothesis import strategies as st

from onnxroof.core.errors import ShapeUnknown
from onnxroof.rules import REGISTRY
from onnxroof.rules.normalization import lrn_window_total

F32 = "float32"
MS = "com.microsoft"


# ------------------------------------------------------------------------------- BatchNormalization
def test_batchnorm_inference():
    b, c_, h, w = 2, 3, 4, 5
    x = (b, c_, h, w)
    n = b * c_ * h * w
    vec = ((c_,), F32, W)
    c = cost_of(make_op("BatchNormalization", [(x, F32), vec, vec, vec, vec], [(x, F32)], opset=15))
    assert c.flops == 4 * n + 2 * c_  # sub, div, mul, add per element; +ε, sqrt per channel
    assert c.macs == 0
    assert c.bytes_read == (n + 4 * c_) * 4
    assert c.bytes_written == n * 4
    assert c.params == 4 * c_


def test_batchnorm_training_mode_opset15():
    b, c_, h, w = 2, 3, 4, 5
    x = (b, c_, h, w)
    n = b * c_ * h * w
    vec = ((c_,), F32)
    op = make_op("BatchNormalization", [(x, F32), vec, vec, vec, vec], [(x, F32), vec, vec], opset=15, training_mode=1)
    c = cost_of(op)
    assert c.flops == (4 + 3) * n + (2 + 8) * c_
    assert c.bytes_written == (n + 2 * c_) * 4


def test_batchnorm_pre14_training_inferred_from_outputs():
    x = (2, 3, 4, 5)
    n, c_ = math.prod(x), 3
    vec = ((c_,), F32)
    inference = cost_of(make_op("BatchNormalization", [(x, F32), vec, vec, vec, vec], [(x, F32)], opset=9))
    training = cost_of(
        make_op("BatchNormalization", [(x, F32), vec, vec, vec, vec], [(x, F32), vec, vec, vec, vec], opset=9)
    )
    assert inference.flops == 4 * n + 2 * c_
    assert training.flops == 7 * n + 10 * c_
    assert training.bytes_written == (n + 4 * c_) * 4


# ------------------------------------------------------------------------------- LayerNormalization
@pytest.mark.parametrize(("axis", "with_bias"), [(-1, True), (-1, False), (1, True), (2, False)])
def test_layernorm(axis, with_bias):
    shape = (2, 8, 16)
    n = 2 * 8 * 16
    norm = shape[axis:]
    rows = n // math.prod(norm)
    params = [(norm, F32, W), (norm, F32, W) if with_bias else None]
    c = cost_of(make_op("LayerNormalization", [(shape, F32), *params], [(shape, F32)], axis=axis))
    assert c.flops == 5 * n + n + (n if with_bias else 0) + 5 * rows
    assert c.bytes_read == (n + math.prod(norm) * (2 if with_bias else 1)) * 4
    assert c.bytes_written == n * 4


def test_layernorm_extra_outputs_written():
    shape, rows, hidden = (4, 10, 32), 40, 32
    n = rows * hidden
    outputs = [(shape, F32), ((4, 10, 1), F32), ((4, 10, 1), F32)]
    c = cost_of(make_op("LayerNormalization", [(shape, F32), ((hidden,), F32, W)], outputs))
    assert c.flops == 5 * n + n + 5 * rows
    assert c.bytes_written == (n + 2 * rows) * 4


def test_rmsnorm_opset23():
    shape = (3, 7, 64)
    n, rows = math.prod(shape), 3 * 7
    c = cost_of(make_op("RMSNormalization", [(shape, F32), ((64,), F32, W)], [(shape, F32)], opset=23))
    assert c.flops == 4 * n + 4 * rows
    assert c.bytes_read == (n + 64) * 4


@pytest.mark.parametrize("domain", ["", MS])
def test_simplified_layernorm_both_domains(domain):
    shape = (2, 5, 16)
    n, rows = math.prod(shape), 10
    c = cost_of(
        make_op("SimplifiedLayerNormalization", [(shape, F32), ((16,), F32, W)], [(shape, F32)], opset=1, domain=domain)
    )
    assert c.flops == 4 * n + 4 * rows


@pytest.mark.parametrize(("beta", "bias"), [(False, False), (True, False), (True, True)])
def test_skip_layernorm(beta, bias):
    shape, hidden = (2, 9, 32), 32
    n, rows = math.prod(shape), 2 * 9
    vec = ((hidden,), F32, W)
    inputs = [(shape, F32), (shape, F32), vec, vec if beta else None, vec if bias else None]
    outputs = [(shape, F32), None, None, (shape, F32)]  # input_skip_bias_sum written too
    c = cost_of(make_op("SkipLayerNormalization", inputs, outputs, domain=MS))
    layer_norm = 5 * n + n + (n if beta else 0) + 5 * rows
    assert c.flops == n + (n if bias else 0) + layer_norm
    assert c.bytes_read == (2 * n + hidden * (1 + beta + bias)) * 4
    assert c.bytes_written == 2 * n * 4


@pytest.mark.parametrize("bias", [False, True])
def test_skip_simplified_layernorm(bias):
    shape, hidden = (2, 9, 32), 32
    n, rows = math.prod(shape), 2 * 9
    vec = ((hidden,), F32, W)
    inputs = [(shape, F32), (shape, F32), vec, vec if bias else None]
    c = cost_of(make_op("SkipSimplifiedLayerNormalization", inputs, [(shape, F32)], domain=MS))
    assert c.flops == n + (n if bias else 0) + 4 * n + 4 * rows


# --------------------------------------------------------------------------- Group / Instance norm
@pytest.mark.parametrize(("opset", "param_len"), [(18, 4), (21, 12)])
def test_groupnorm(opset, param_len):
    b, c_, h, w, g = 2, 12, 5, 5, 4
    x = (b, c_, h, w)
    n = math.prod(x)
    vec = ((param_len,), F32, W)  # per group in opset 18, per channel in 21
    c = cost_of(make_op("GroupNormalization", [(x, F32), vec, vec], [(x, F32)], opset=opset, num_groups=g))
    assert c.flops == 5 * n + 2 * n + 5 * b * g
    assert c.bytes_read == (n + 2 * param_len) * 4
    assert c.params == 2 * param_len


def test_instancenorm():
    b, c_, h, w = 3, 8, 6, 6
    x = (b, c_, h, w)
    n = math.prod(x)
    vec = ((c_,), F32, W)
    c = cost_of(make_op("InstanceNormalization", [(x, F32), vec, vec], [(x, F32)]))
    assert c.flops == 5 * n + 2 * n + 5 * b * c_
    assert c.bytes_read == (n + 2 * c_) * 4


# ---------------------------------------------------------------------------------------------- LRN
@pytest.mark.parametrize(("channels", "size"), [(5, 3), (10, 5), (64, 5), (16, 1)])
def test_lrn_odd_size(channels, size):
    b, h, w = 2, 3, 3
    x = (b, channels, h, w)
    n, positions = math.prod(x), b * h * w
    half = (size - 1) // 2
    window = size * channels - half * (half + 1)  # each edge loses 1 + 2 + ... + half window slots
    c = cost_of(make_op("LRN", [(x, F32)], [(x, F32)], size=size))
    assert c.flops == 2 * window * positions + 4 * n
    assert c.bytes_read == c.bytes_written == n * 4


def test_lrn_even_size():
    channels, size = 8, 4  # window [c − 1, c + 2]: left edge loses 1, right edge loses 2 + 1
    x = (1, channels, 2, 2)
    window = size * channels - 1 - (2 + 1)
    c = cost_of(make_op("LRN", [(x, F32)], [(x, F32)], size=size))
    assert c.flops == 2 * window * 4 + 4 * math.prod(x)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 40), st.integers(1, 12))
def test_property_lrn_window_bounds(channels, size):
    total = lrn_window_total(channels, size)
    assert channels <= total <= size * channels
    assert total <= channels * channels
    lo, hi = (size - 1) // 2, size // 2  # window [c − lo, c + hi]
    if channels >= size:  # each edge clipped on one side only: loses 1 + 2 + ... + lo (resp. hi) slots
        assert total == size * channels - lo * (lo + 1) // 2 - hi * (hi + 1) // 2


def _lrn_window_loop(channels: int, size: int) -> int:
    """The window total summed channel by channel (the rule's former loop): the closed form's reference."""
    lo, hi = (size - 1) // 2, size // 2
    return sum(min(channels - 1, c + hi) - max(0, c - lo) + 1 for c in range(channels))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 80), st.integers(-20, 100))
def test_property_lrn_window_closed_form_equals_the_loop(channels, size):
    assert lrn_window_total(channels, size) == _lrn_window_loop(channels, size)


@pytest.mark.parametrize(("channels", "size"), [(2**40, 5), (64, 2**62), (2**62, 2**62 + 1)])
def test_lrn_huge_channels_or_size_in_constant_time(channels, size):
    # The former loop ran once per channel: 2^40 channels never ended. A window never exceeds the channels.
    total = lrn_window_total(channels, size)
    assert channels <= total <= min(size, channels) * channels
    if size >= 2 * channels:  # every window covers all channels
        assert total == channels * channels


# ---------------------------------------------------------------------------------- Softmax family
@pytest.mark.parametrize(("opset", "axis"), [(11, 1), (13, -1), (13, 0)])
def test_softmax(opset, axis):
    x = (4, 6, 10)
    n = math.prod(x)
    c = cost_of(make_op("Softmax", [(x, F32)], [(x, F32)], opset=opset, axis=axis))
    assert c.flops == 5 * n
    assert c.bytes_read == c.bytes_written == n * 4


@pytest.mark.parametrize(
    ("opset", "axis", "rows"),
    [
        (13, -1, 4 * 6),  # one row per (d0, d1)
        (13, 1, 4 * 10),  # normalized along d1: one row per (d0, d2)
        (11, 1, 4),  # coerced to 2-D [4, 60]
        (11, 2, 4 * 6),  # coerced to 2-D [24, 10]
    ],
)
def test_log_softmax_rows(opset, axis, rows):
    x = (4, 6, 10)
    n = math.prod(x)
    c = cost_of(make_op("LogSoftmax", [(x, F32)], [(x, F32)], opset=opset, axis=axis))
    assert c.flops == 5 * n + rows


def test_hardmax():
    x = (4, 6, 10)
    c = cost_of(make_op("Hardmax", [(x, F32)], [(x, F32)], opset=13))
    assert c.flops == math.prod(x)


def test_unknown_shape_propagates():
    with pytest.raises(ShapeUnknown):
        cost_of(make_op("LayerNormalization", [((2, None, 8), F32), ((8,), F32, W)], [((2, None, 8), F32)]))
    with pytest.raises(ShapeUnknown):
        cost_of(make_op("Softmax", [(None, F32)], [(None, F32)]))


# -------------------------------------------------------------------------------------- properties
@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 8), min_size=1, max_size=4), st.data())
def test_property_layernorm_bias_costs_one_add_per_element(shape, data):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    norm = tuple(shape[axis:])
    n = math.prod(shape)
    rows = n // math.prod(norm)
    without = cost_of(make_op("LayerNormalization", [(shape, F32), (norm, F32, W)], [(shape, F32)], axis=axis))
    with_b = cost_of(
        make_op("LayerNormalization", [(shape, F32), (norm, F32, W), (norm, F32, W)], [(shape, F32)], axis=axis)
    )
    assert with_b.flops - without.flops == n
    assert without.flops == 6 * n + 5 * rows
    assert without.bytes_written == n * 4


# ------------------------------------------------------------------------------------------ registry
MODULE = "onnxroof.rules.normalization"


def test_every_rule_documented():
    entries = [e for e in REGISTRY.all_rules() if e.fn.__module__ == MODULE]
    assert {(e.domain, e.op_type) for e in entries} >= {("", "BatchNormalization"), (MS, "SkipLayerNormalization")}
    for e in entries:
        assert "Formula:" in e.doc, e.op_type
        assert "Bytes:" in e.doc, e.op_type


@pytest.mark.parametrize(("p", "per_row"), [(2, 2), (1, 1)])
def test_lp_normalization(p: int, per_row: int) -> None:
    """FLOPs = 3·N + k·R (k = 2 for p = 2, 1 for p = 1), R = N / len(axis); bytes = read X, write Y."""
    op = make_op("LpNormalization", [((4, 6, 8), "float32")], [((4, 6, 8), "float32")], opset=22, axis=1, p=p)
    n, rows = 4 * 6 * 8, 4 * 8
    cost = cost_of(op)
    assert cost.flops == 3 * n + per_row * rows
    assert cost.bytes_read == n * 4 and cost.bytes_written == n * 4
