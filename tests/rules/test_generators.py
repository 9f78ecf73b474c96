"""Generator rules: write the output, read nothing, count the arithmetic of the defining formula."""

from __future__ import annotations

import math

import pytest
from helpers import W, cost_of, make_op
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from onnxroof.core.cost import Cost
from onnxroof.core.errors import ShapeUnknown
from onnxroof.core.states import RuleStatus
from onnxroof.rules import REGISTRY
from onnxroof.rules.generators import RANDOM_FLOPS_PER_ELEMENT

F32, I64 = 4, 8


def test_constant_costs_nothing_at_inference():
    value = helper.make_tensor("v", TensorProto.FLOAT, [2, 3], [0.0] * 6)
    op = make_op("Constant", [], [([2, 3], "float32")], value=value)
    assert cost_of(op) == Cost.zero()


@pytest.mark.parametrize(
    ("op_type", "config"),
    [
        ("Constant", set()),
        ("ConstantOfShape", {0}),
        ("EyeLike", {0}),
        ("Range", {0, 1, 2}),
        ("RandomNormal", set()),
        ("RandomNormalLike", {0}),
        ("RandomUniformLike", {0}),
    ],
)
def test_config_inputs_are_declared(op_type, config):
    assert REGISTRY.lookup("", op_type).config_inputs == config


@settings(max_examples=50, deadline=None)
@given(
    shape=st.lists(st.integers(1, 8), max_size=4),
    dtype=st.sampled_from([("float32", 4), ("float16", 2), ("int64", 8), ("bool", 1)]),
)
def test_constant_of_shape_writes_only_its_output(shape, dtype):
    name, size = dtype
    cost = cost_of(make_op("ConstantOfShape", [([len(shape)], "int64")], [(shape, name)]))
    assert cost == Cost(bytes_written=math.prod(shape) * size)


def test_constant_of_shape_config_input_is_not_a_parameter():
    cost = cost_of(make_op("ConstantOfShape", [([2], "int64", W)], [([3, 5], "float32")]))
    assert cost == Cost(bytes_written=3 * 5 * F32)


def test_eye_like_reads_only_the_input_shape():
    n, m = 64, 32
    cost = cost_of(make_op("EyeLike", [([n, m], "float32")], [([n, m], "float32")]))
    assert cost == Cost(bytes_written=n * m * F32)


def test_range_is_one_add_per_element():
    n = 500
    op = make_op("Range", [([], "int64", W), ([], "int64"), ([], "int64", W)], [([n], "int64")])
    assert cost_of(op) == Cost(flops=n, bytes_written=n * I64)


def test_range_of_unknown_length_is_not_guessed():
    op = make_op("Range", [([], "int64"), ([], "int64"), ([], "int64")], [([None], "int64")])
    with pytest.raises(ShapeUnknown):
        cost_of(op)


@pytest.mark.parametrize(
    ("op_type", "inputs", "attrs"),
    [
        ("RandomNormal", [], {"shape": [16, 4]}),
        ("RandomUniform", [], {"shape": [16, 4]}),
        ("RandomNormalLike", [([16, 4], "float32")], {}),
        ("RandomUniformLike", [([16, 4], "float32", W)], {}),
    ],
)
def test_random_generators_write_their_output(op_type, inputs, attrs):
    cost = cost_of(make_op(op_type, inputs, [([16, 4], "float32")], **attrs))
    assert cost == Cost(flops=RANDOM_FLOPS_PER_ELEMENT * 16 * 4, bytes_written=16 * 4 * F32)
    assert REGISTRY.lookup("", op_type).status == RuleStatus.APPROXIMATE


def test_every_generator_rule_documents_formula_and_bytes():
    entries = [e for e in REGISTRY.all_rules() if e.fn.__module__ == "onnxroof.rules.generators"]
    assert {e.op_type for e in entries} >= {"Constant", "ConstantOfShape", "EyeLike", "Range"}
    for entry in entries:
        assert "Formula:" in entry.doc and "Bytes:" in entry.doc, entry.op_type
