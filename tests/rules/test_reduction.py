"""Reduction rules: per-input-element work + per-output-element finish; config inputs are not charged."""

from __future__ import annotations

import math

import pytest
from helpers import W, cost_of, make_op
from hypothesis import given, settings
from hypothesis import strategies as st

from onnxroof.core.errors import ShapeUnknown
from onnxroof.core.states import RuleStatus
from onnxroof.rules import REGISTRY

F32 = "float32"
I64 = "int64"
X = (4, 6, 10)
N = math.prod(X)

# op_type: (FLOPs per input element, FLOPs per output element, opset where ``axes`` became an input)
REDUCE = {
    "ReduceSum": (1, 0, 13),  # Σx
    "ReduceMean": (1, 1, 18),  # Σx, / n
    "ReduceMax": (1, 0, 18),  # compare
    "ReduceMin": (1, 0, 18),  # compare
    "ReduceProd": (1, 0, 18),  # multiply
    "ReduceL1": (1 + 1, 0, 18),  # |x|, add
    "ReduceL2": (1 + 1, 1, 18),  # x², add; sqrt
    "ReduceSumSquare": (1 + 1, 0, 18),  # x², add
    "ReduceLogSum": (1, 1, 18),  # add; log
    "ReduceLogSumExp": (1 + 1, 1, 18),  # exp, add; log
}


@pytest.mark.parametrize(("op_type", "keepdims"), [(op, k) for op in sorted(REDUCE) for k in (0, 1)])
def test_reduce_axes_attribute(op_type, keepdims):
    per_in, per_out, since = REDUCE[op_type]
    out = (4, 1, 1) if keepdims else (4,)
    n_out = 4
    op = make_op(op_type, [(X, F32)], [(out, F32)], opset=since - 1, axes=[1, 2], keepdims=keepdims)
    c = cost_of(op)
    assert c.flops == per_in * N + per_out * n_out
    assert c.macs == 0
    assert c.bytes_read == N * 4
    assert c.bytes_written == n_out * 4


@pytest.mark.parametrize("op_type", sorted(REDUCE))
def test_reduce_axes_input_not_charged(op_type):
    per_in, per_out, since = REDUCE[op_type]
    out, n_out = (4, 1, 1), 4
    attr_form = cost_of(make_op(op_type, [(X, F32)], [(out, F32)], opset=since - 1, axes=[1, 2]))
    input_form = cost_of(make_op(op_type, [(X, F32), ((2,), I64, W)], [(out, F32)], opset=since))
    assert input_form.flops == attr_form.flops == per_in * N + per_out * n_out
    assert input_form.bytes_read == attr_form.bytes_read == N * 4
    assert input_form.params == 0  # the axes constant is configuration, not a parameter
    assert REGISTRY.lookup("", op_type).config_inputs == {1}


def test_reduce_all_axes_by_default():
    c = cost_of(make_op("ReduceMean", [(X, F32)], [((1, 1, 1), F32)], opset=18))
    assert c.flops == N + 1


def test_reduce_noop_with_empty_axes_counts_groups_of_one():
    c = cost_of(make_op("ReduceL2", [(X, F32)], [(X, F32)], opset=18, noop_with_empty_axes=1))
    assert c.flops == 2 * N + N  # N_out = N


def test_argmax_argmin():
    for op_type in ("ArgMax", "ArgMin"):
        c = cost_of(make_op(op_type, [(X, F32)], [((4, 1, 10), I64)], axis=1))
        assert c.flops == N
        assert c.bytes_read == N * 4
        assert c.bytes_written == 4 * 10 * 8


@pytest.mark.parametrize(("k", "log2_k"), [(1, 1), (2, 1), (5, 3), (8, 3), (9, 4), (10, 4)])
def test_topk(k, log2_k):
    # log2_k = max(1, ⌈log2 K⌉), written out by hand
    out = (4, 6, k)
    op = make_op("TopK", [(X, F32), ((1,), I64, W)], [(out, F32), (out, I64)], opset=11)
    c = cost_of(op)
    assert c.flops == N * log2_k
    assert c.bytes_read == N * 4  # K is a config input
    assert c.bytes_written == math.prod(out) * (4 + 8)  # Values + Indices
    assert c.params == 0
    assert REGISTRY.lookup("", "TopK").status == RuleStatus.APPROXIMATE


def test_topk_axis_attribute():
    out = (4, 4, 10)  # K = 4 along axis 1
    c = cost_of(make_op("TopK", [(X, F32), ((1,), I64)], [(out, F32), (out, I64)], opset=11, axis=1))
    assert c.flops == N * 2


def test_cumsum():
    c = cost_of(make_op("CumSum", [(X, F32), ((), I64, W)], [(X, F32)], opset=14, exclusive=1))
    assert c.flops == N
    assert c.bytes_read == N * 4  # axis input not charged
    assert c.bytes_written == N * 4
    assert c.params == 0


def test_unknown_shape_propagates():
    with pytest.raises(ShapeUnknown):
        cost_of(make_op("ReduceSum", [((None, 6), F32)], [((1, 6), F32)], opset=11))
    with pytest.raises(ShapeUnknown):
        cost_of(make_op("ReduceMean", [(X, F32)], [(None, F32)], opset=11))
    with pytest.raises(ShapeUnknown):
        cost_of(make_op("TopK", [(X, F32), ((1,), I64)], [((4, 6, None), F32), ((4, 6, None), I64)]))


# -------------------------------------------------------------------------------------- properties
@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(1, 7), min_size=1, max_size=4),
    st.sampled_from(sorted(REDUCE)),
    st.booleans(),
    st.data(),
)
def test_property_reductions(shape, op_type, keepdims, data):
    axes = data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))
    out = (
        [1 if i in axes else d for i, d in enumerate(shape)]
        if keepdims
        else [d for i, d in enumerate(shape) if i not in axes]
    )
    per_in, per_out, since = REDUCE[op_type]
    op = make_op(op_type, [(shape, F32), ((len(axes),), I64)], [(out, F32)], opset=since, keepdims=int(keepdims))
    c = cost_of(op)
    n, n_out = math.prod(shape), math.prod(out)
    assert c.bytes_written <= c.bytes_read  # a reduction never writes more than it reads
    assert c.flops == per_in * n + per_out * n_out
    assert c.flops >= n


# ------------------------------------------------------------------------------------------ registry
MODULE = "onnxroof.rules.reduction"


def test_every_rule_documented():
    entries = [e for e in REGISTRY.all_rules() if e.fn.__module__ == MODULE]
    assert {e.op_type for e in entries} == {*REDUCE, "ArgMax", "ArgMin", "TopK", "CumSum", "CumProd"}
    for e in entries:
        assert "Formula:" in e.doc, e.op_type
        assert "Bytes:" in e.doc, e.op_type


def test_cum_prod_is_one_multiply_per_element() -> None:
    op = make_op("CumProd", [((3, 5), "float32"), ((), "int64")], [((3, 5), "float32")], opset=26)
    cost = cost_of(op)
    assert cost.flops == 15 and cost.bytes_read == 15 * 4 and cost.bytes_written == 15 * 4
