"""Elementwise rules: FLOPs per output element from each op's formula; traffic = inputs at their own size."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import W, cost_of, make_op
from hypothesis import given, settings
from hypothesis import strategies as st

from onnxroof.core.errors import ShapeUnknown
from onnxroof.core.states import RuleStatus
from onnxroof.rules import REGISTRY

F32 = "float32"
SHAPE = (2, 3, 4)
N = math.prod(SHAPE)

# op_type: (expected FLOPs per element, counted from the formula, number of inputs, input dtype, output dtype)
UNARY_FLOAT = {
    "Neg": 1, "Abs": 1, "Reciprocal": 1, "Floor": 1, "Ceil": 1, "Round": 1, "Sign": 1,
    "Sqrt": 1, "Exp": 1, "Log": 1, "Erf": 1, "Tanh": 1, "Sin": 1, "Cos": 1, "Tan": 1,
    "Asin": 1, "Acos": 1, "Atan": 1, "Sinh": 1, "Cosh": 1, "Asinh": 1, "Acosh": 1, "Atanh": 1,
    "Relu": 1,                      # max(0, x)
    "LeakyRelu": 1 + 1,             # compare, α·x
    "ThresholdedRelu": 1,           # compare only
    "Elu": 1 + 1 + 1 + 1,           # compare, exp, −1, ·α
    "Selu": 1 + 1 + 1 + 1 + 1,      # compare, exp, −1, ·α, ·γ
    "Celu": 1 + 1 + 1 + 1 + 1,      # compare, x/α, exp, −1, ·α
    "Sigmoid": 1 + 1 + 1 + 1,       # −x, exp, 1+, 1/
    "HardSigmoid": 1 + 1 + 1 + 1,   # ·α, +β, min, max
    "HardSwish": 4 + 1,             # HardSigmoid, ·x
    "Softplus": 1 + 1 + 1,          # exp, +1, log
    "Softsign": 1 + 1 + 1,          # |x|, 1+, /
    "Mish": 3 + 1 + 1,              # softplus, tanh, ·x
    "Shrink": 2 + 1,                # 2 compares, ± bias
}  # fmt: skip
BINARY_FLOAT = {"Add": 1, "Sub": 1, "Mul": 1, "Div": 1, "Mod": 1, "Pow": 1}
COMPARE = ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"]
LOGIC_BINARY = ["And", "Or", "Xor"]
BITWISE_BINARY = ["BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitShift"]


@pytest.mark.parametrize(("op_type", "k"), sorted(UNARY_FLOAT.items()))
def test_unary_float(op_type, k):
    c = cost_of(make_op(op_type, [(SHAPE, F32)], [(SHAPE, F32)]))
    assert c.flops == k * N
    assert c.macs == 0
    assert c.bytes_read == N * 4
    assert c.bytes_written == N * 4
    assert c.params == 0


@pytest.mark.parametrize(("op_type", "k"), sorted(BINARY_FLOAT.items()))
def test_binary_float_same_shape(op_type, k):
    c = cost_of(make_op(op_type, [(SHAPE, F32), (SHAPE, F32)], [(SHAPE, F32)]))
    assert c.flops == k * N
    assert c.bytes_read == 2 * N * 4
    assert c.bytes_written == N * 4


@pytest.mark.parametrize("op_type", COMPARE)
def test_comparisons_write_bool(op_type):
    c = cost_of(make_op(op_type, [(SHAPE, F32), (SHAPE, F32)], [(SHAPE, "bool")]))
    assert c.flops == 1 * N
    assert c.bytes_read == 2 * N * 4
    assert c.bytes_written == N * 1


@pytest.mark.parametrize("op_type", LOGIC_BINARY)
def test_logic(op_type):
    c = cost_of(make_op(op_type, [(SHAPE, "bool"), (SHAPE, "bool")], [(SHAPE, "bool")]))
    assert c.flops == N
    assert c.bytes_read == 2 * N
    assert c.bytes_written == N


@pytest.mark.parametrize("op_type", BITWISE_BINARY)
def test_bitwise(op_type):
    attrs = {"direction": "LEFT"} if op_type == "BitShift" else {}
    c = cost_of(make_op(op_type, [(SHAPE, "uint32"), (SHAPE, "uint32")], [(SHAPE, "uint32")], opset=18, **attrs))
    assert c.flops == N
    assert c.bytes_read == 2 * N * 4


@pytest.mark.parametrize(
    ("op_type", "in_dtype"), [("Not", "bool"), ("BitwiseNot", "int32"), ("IsNaN", F32), ("IsInf", F32)]
)
def test_unary_tests_and_logic(op_type, in_dtype):
    out_dtype = "bool" if op_type in ("Not", "IsNaN", "IsInf") else in_dtype
    c = cost_of(make_op(op_type, [(SHAPE, in_dtype)], [(SHAPE, out_dtype)], opset=18))
    assert c.flops == N


def test_broadcast_add_flops_per_output_and_inputs_read_at_own_size():
    a, b, out = (8, 1, 5), (1, 6, 5), (8, 6, 5)
    c = cost_of(make_op("Add", [(a, F32), (b, F32)], [(out, F32)]))
    assert c.flops == 8 * 6 * 5
    assert c.bytes_read == (8 * 1 * 5 + 1 * 6 * 5) * 4
    assert c.bytes_written == 8 * 6 * 5 * 4


def test_broadcast_scalar_weight_counts_as_param():
    c = cost_of(make_op("Mul", [(SHAPE, F32), ((), F32, W)], [(SHAPE, F32)]))
    assert c.flops == N
    assert c.bytes_read == N * 4 + 1 * 4
    assert c.params == 1


def test_where_broadcast():
    cond, x, y, out = (4, 1), (1, 7), (), (4, 7)
    c = cost_of(make_op("Where", [(cond, "bool"), (x, F32), (y, F32)], [(out, F32)]))
    assert c.flops == 4 * 7  # one select per output element
    assert c.bytes_read == 4 * 1 + 7 * 4 + 1 * 4
    assert c.bytes_written == 4 * 7 * 4


def test_prelu_slope_broadcast_and_param():
    x, slope = (2, 16, 8, 8), (16, 1, 1)
    c = cost_of(make_op("PRelu", [(x, F32), (slope, F32, W)], [(x, F32)]))
    n = math.prod(x)
    assert c.flops == 2 * n  # compare + multiply
    assert c.bytes_read == (n + 16) * 4
    assert c.params == 16


# --------------------------------------------------------------------------------------------- Clip
@pytest.mark.parametrize(
    ("attrs", "bounds"),
    [({}, 0), ({"min": 0.0}, 1), ({"max": 6.0}, 1), ({"min": 0.0, "max": 6.0}, 2)],
)
def test_clip_opset6_bounds_as_attributes(attrs, bounds):
    c = cost_of(make_op("Clip", [(SHAPE, F32)], [(SHAPE, F32)], opset=6, **attrs))
    assert c.flops == bounds * N
    assert c.bytes_read == N * 4


@pytest.mark.parametrize(
    ("lo", "hi", "bounds"),
    [(None, None, 0), (((), F32), None, 1), (None, ((), F32), 1), (((), F32), ((), F32), 2)],
)
@pytest.mark.parametrize("opset", [11, 13])
def test_clip_opset11_bounds_as_inputs(lo, hi, bounds, opset):
    c = cost_of(make_op("Clip", [(SHAPE, F32), lo, hi], [(SHAPE, F32)], opset=opset))
    assert c.flops == bounds * N
    scalars = sum(1 for t in (lo, hi) if t is not None)
    assert c.bytes_read == N * 4 + scalars * 4  # the bounds are data scalars, charged
    assert c.bytes_written == N * 4


# --------------------------------------------------------------------------------------------- Gelu
def test_gelu_erf_form():
    c = cost_of(make_op("Gelu", [(SHAPE, F32)], [(SHAPE, F32)], opset=20))
    # 0.5·x·(1 + erf(x/√2)): divide, erf, add, ·x, ·0.5
    assert c.flops == 5 * N


def test_gelu_tanh_form():
    c = cost_of(make_op("Gelu", [(SHAPE, F32)], [(SHAPE, F32)], opset=20, approximate="tanh"))
    # 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x·x·x))): x·x, ·x, ·c, +x, ·√(2/π), tanh, +1, ·x, ·0.5
    assert c.flops == 9 * N


def test_swish():
    c = cost_of(make_op("Swish", [(SHAPE, F32)], [(SHAPE, F32)], opset=24))
    assert c.flops == (1 + 4 + 1) * N  # α·x, sigmoid, ·x


# ------------------------------------------------------------------------------------ contrib (ORT)
@pytest.mark.parametrize(("op_type", "k"), [("Gelu", 5), ("BiasGelu", 1 + 5), ("QuickGelu", 1 + 4 + 1)])
def test_contrib_activations(op_type, k):
    inputs = [(SHAPE, F32), ((4,), F32, W)] if op_type == "BiasGelu" else [(SHAPE, F32)]
    c = cost_of(make_op(op_type, inputs, [(SHAPE, F32)], domain="com.microsoft"))
    assert c.flops == k * N


def test_fast_gelu_with_and_without_bias():
    plain = cost_of(make_op("FastGelu", [(SHAPE, F32)], [(SHAPE, F32)], domain="com.microsoft"))
    biased = cost_of(make_op("FastGelu", [(SHAPE, F32), ((4,), F32, W)], [(SHAPE, F32)], domain="com.microsoft"))
    assert plain.flops == 9 * N
    assert biased.flops == (9 + 1) * N
    assert biased.bytes_read == (N + 4) * 4
    assert biased.params == 4


# ---------------------------------------------------------------------------------------- variadic
@pytest.mark.parametrize(
    ("op_type", "per_element"),
    [("Sum", lambda n: n - 1), ("Max", lambda n: n - 1), ("Min", lambda n: n - 1), ("Mean", lambda n: n)],
)
@pytest.mark.parametrize("n_inputs", [1, 2, 3, 4])
def test_variadic(op_type, per_element, n_inputs):
    inputs = [(SHAPE, F32)] + [((4,), F32)] * (n_inputs - 1)  # later operands broadcast
    c = cost_of(make_op(op_type, inputs, [(SHAPE, F32)]))
    assert c.flops == per_element(n_inputs) * N
    assert c.bytes_read == (N + 4 * (n_inputs - 1)) * 4
    assert c.bytes_written == N * 4


# -------------------------------------------------------------------------------------------- Cast
def test_cast_is_pure_traffic():
    c = cost_of(make_op("Cast", [(SHAPE, F32)], [(SHAPE, "float16")], to=10))
    assert c.flops == 0
    assert c.bytes_read == N * 4
    assert c.bytes_written == N * 2


def test_castlike_target_is_config():
    op = make_op("CastLike", [(SHAPE, F32), ((1000,), "float16", W)], [(SHAPE, "float16")])
    c = cost_of(op)
    assert c.flops == 0
    assert c.bytes_read == N * 4  # target_type's data is never read
    assert c.bytes_written == N * 2
    assert c.params == 0
    assert REGISTRY.lookup("", "CastLike").config_inputs == {1}


# ------------------------------------------------------------------------------------ unknown shape
@pytest.mark.parametrize("shape", [None, (2, None, 4)])
def test_unknown_shape_propagates(shape):
    with pytest.raises(ShapeUnknown):
        cost_of(make_op("Relu", [(shape, F32)], [(shape, F32)]))
    with pytest.raises(ShapeUnknown):
        cost_of(make_op("Add", [(SHAPE, F32), (shape, F32)], [(shape, F32)]))


# -------------------------------------------------------------------------------------- properties
@st.composite
def broadcast_operands(draw):
    out = draw(st.lists(st.integers(1, 6), min_size=0, max_size=4))
    shapes = []
    for _ in range(2):
        drop = draw(st.integers(0, len(out)))
        shapes.append(tuple(d if draw(st.booleans()) else 1 for d in out[drop:]))
    return shapes, tuple(np.broadcast_shapes(*shapes))


@settings(max_examples=40, deadline=None)
@given(broadcast_operands(), st.sampled_from(["Add", "Mul", "Sub", "Div", "Pow"]), st.sampled_from([F32, "float16"]))
def test_property_binary_broadcast(operands, op_type, dtype):
    (a, b), out = operands
    itemsize = 4 if dtype == F32 else 2
    c = cost_of(make_op(op_type, [(a, dtype), (b, dtype)], [(out, dtype)]))
    assert c.bytes_written == math.prod(out) * itemsize
    assert c.bytes_read == (math.prod(a) + math.prod(b)) * itemsize
    assert c.flops == math.prod(out)
    assert c.macs == 0


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 8), min_size=0, max_size=4), st.sampled_from(sorted(UNARY_FLOAT)))
def test_property_unary_linear_in_elements(shape, op_type):
    c = cost_of(make_op(op_type, [(shape, F32)], [(shape, F32)]))
    n = math.prod(shape)
    assert c.flops == UNARY_FLOAT[op_type] * n
    assert c.bytes_written == n * 4 == c.bytes_read


# ------------------------------------------------------------------------------------------ registry
MODULE = "onnxroof.rules.elementwise"


def test_every_rule_documented():
    entries = [e for e in REGISTRY.all_rules() if e.fn.__module__ == MODULE]
    assert len(entries) > 60
    for e in entries:
        assert "Formula:" in e.doc, e.op_type
        assert "Bytes:" in e.doc, e.op_type
        assert "Assumptions:" in e.doc, e.op_type
        assert e.status == RuleStatus.EXACT


def test_generated_docstrings_carry_their_constant():
    assert "FLOPs = 4 · N_out" in REGISTRY.lookup("", "Sigmoid").doc
    assert "exp" in REGISTRY.lookup("", "Sigmoid").doc
    assert "FLOPs = 6 · N_out" in REGISTRY.lookup("com.microsoft", "QuickGelu").doc
