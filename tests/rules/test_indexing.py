"""Indexing rules: gathers read only what they gather; scatters copy and update; selections."""

from __future__ import annotations

import math

import pytest
from helpers import W, cost_of, make_op
from hypothesis import given, settings
from hypothesis import strategies as st

from onnxroof.core.cost import Cost
from onnxroof.core.errors import ShapeUnknown
from onnxroof.core.states import RuleStatus
from onnxroof.rules import REGISTRY
from onnxroof.rules.indexing import BOX_AREA_FLOPS, IOU_FLOPS

V, D, B, S = 50_000, 768, 4, 128
F32, F16, I64, I32 = 4, 2, 8, 4


def test_gather_on_a_weight_table_reads_only_the_gathered_rows():
    op = make_op("Gather", [([V, D], "float16", W), ([B, S], "int64")], [([B, S, D], "float16")])
    cost = cost_of(op)
    assert cost.bytes_read == B * S * I64 + B * S * D * F16
    assert cost.bytes_read < V * D * F16
    assert cost.bytes_written == B * S * D * F16
    assert cost.flops == 0 and cost.macs == 0
    assert cost.params == V * D  # the table is still the model's parameters


def test_gather_along_an_inner_axis():
    n, c, h, k = 8, 32, 10, 5
    op = make_op("Gather", [([n, c, h], "float32"), ([k], "int32")], [([n, k, h], "float32")], axis=1)
    assert cost_of(op) == Cost(bytes_read=k * I32 + n * k * h * F32, bytes_written=n * k * h * F32)


@settings(max_examples=50, deadline=None)
@given(rows=st.integers(1, 10_000), width=st.integers(1, 64), idx=st.lists(st.integers(1, 6), max_size=3))
def test_gather_bytes_do_not_depend_on_table_size(rows, width, idx):
    op = make_op("Gather", [([rows, width], "float32", W), (idx, "int64")], [([*idx, width], "float32")])
    cost = cost_of(op)
    k = math.prod(idx)
    assert cost == Cost(bytes_read=k * I64 + k * width * F32, bytes_written=k * width * F32, params=rows * width)


def test_gather_elements_reads_indices_shaped_data():
    n, m, k = 16, 1000, 3
    op = make_op("GatherElements", [([n, m], "float32"), ([n, k], "int64")], [([n, k], "float32")], axis=1)
    assert cost_of(op) == Cost(bytes_read=n * k * I64 + n * k * F32, bytes_written=n * k * F32)


def test_gather_nd_reads_the_gathered_slices():
    h, w, c, k = 64, 64, 32, 10
    op = make_op("GatherND", [([h, w, c], "float16"), ([k, 2], "int64")], [([k, c], "float16")])
    assert cost_of(op) == Cost(bytes_read=k * 2 * I64 + k * c * F16, bytes_written=k * c * F16)


@pytest.mark.parametrize(
    ("op_type", "opset", "attrs", "flops_per_update"),
    [
        ("ScatterElements", 18, {}, 0),
        ("ScatterElements", 18, {"reduction": "max"}, 1),
        ("Scatter", 10, {}, 0),
    ],
)
def test_scatter_elements_copies_data_and_writes_updates(op_type, opset, attrs, flops_per_update):
    n, m, k = 8, 100, 4
    op = make_op(
        op_type,
        [([n, m], "float32"), ([n, k], "int64"), ([n, k], "float32")],
        [([n, m], "float32")],
        opset=opset,
        axis=1,
        **attrs,
    )
    assert cost_of(op) == Cost(
        flops=flops_per_update * n * k, bytes_read=n * m * F32 + n * k * I64 + n * k * F32, bytes_written=n * m * F32
    )


def test_scatter_nd_add_is_one_flop_per_update_element():
    # KV-cache style update: write S rows of D into a [V, D] buffer.
    op = make_op(
        "ScatterND",
        [([V, D], "float16"), ([S, 1], "int64"), ([S, D], "float16")],
        [([V, D], "float16")],
        opset=18,
        reduction="add",
    )
    assert cost_of(op) == Cost(flops=S * D, bytes_read=V * D * F16 + S * I64 + S * D * F16, bytes_written=V * D * F16)


def test_compress_reads_input_and_condition():
    n, m, kept = 10, 6, 4
    op = make_op("Compress", [([n, m], "float32"), ([n], "bool")], [([kept, m], "float32")], axis=0)
    assert cost_of(op) == Cost(bytes_read=n * m * F32 + n, bytes_written=kept * m * F32)
    unknown = make_op("Compress", [([n, m], "float32"), ([n], "bool")], [([None, m], "float32")], axis=0)
    with pytest.raises(ShapeUnknown):
        cost_of(unknown)


def test_nonzero_compares_every_element():
    shape, nnz = [B, S], 37
    op = make_op("NonZero", [(shape, "float32")], [([2, nnz], "int64")])
    assert cost_of(op) == Cost(flops=B * S, bytes_read=B * S * F32, bytes_written=2 * nnz * I64)


def test_nonzero_with_a_data_dependent_output_is_not_guessed():
    op = make_op("NonZero", [([B, S], "float32")], [([2, None], "int64")])
    with pytest.raises(ShapeUnknown):
        cost_of(op)


def test_one_hot_reads_indices_and_writes_the_output():
    depth = 1000
    op = make_op("OneHot", [([B, S], "int64"), ([], "int64", W), ([2], "float32", W)], [([B, S, depth], "float32")])
    assert cost_of(op) == Cost(bytes_read=B * S * I64, bytes_written=B * S * depth * F32)  # params 0


def test_unique_sorts_and_counts_only_static_outputs():
    n = 1024
    op = make_op("Unique", [([n], "int64")], [([None], "int64"), ([None], "int64"), ([n], "int64"), ([None], "int64")])
    assert REGISTRY.lookup("", "Unique").status == RuleStatus.APPROXIMATE
    # Y, indices and counts are data-dependent: only inverse_indices ([n] int64) is counted.
    assert cost_of(op) == Cost(flops=n * math.log2(n), bytes_read=n * I64, bytes_written=n * I64)


def test_unique_along_an_axis_sorts_slices():
    rows, cols = 64, 8
    op = make_op("Unique", [([rows, cols], "float32")], [([None, cols], "float32")], axis=0)
    assert cost_of(op) == Cost(flops=rows * cols * math.log2(rows), bytes_read=rows * cols * F32)


def test_non_max_suppression_upper_bound():
    batch, boxes, classes = 2, 1000, 80
    op = make_op(
        "NonMaxSuppression",
        [
            ([batch, boxes, 4], "float32"),
            ([batch, classes, boxes], "float32"),
            ([1], "int64", W),
            ([1], "float32", W),
            ([1], "float32", W),
        ],
        [([None, 3], "int64")],
    )
    flops = batch * boxes * BOX_AREA_FLOPS + batch * classes * (
        boxes * math.log2(boxes) + IOU_FLOPS * boxes * (boxes - 1) / 2
    )
    cost = cost_of(op)
    assert cost == Cost(flops=flops, bytes_read=batch * boxes * 4 * F32 + batch * classes * boxes * F32)
    assert REGISTRY.lookup("", "NonMaxSuppression").status == RuleStatus.APPROXIMATE


def test_non_max_suppression_static_output_is_written():
    op = make_op("NonMaxSuppression", [([1, 1, 4], "float32"), ([1, 1, 1], "float32")], [([1, 3], "int64")])
    assert cost_of(op) == Cost(flops=BOX_AREA_FLOPS, bytes_read=4 * F32 + F32, bytes_written=3 * I64)


@pytest.mark.parametrize(
    ("op_type", "config"),
    [
        ("Gather", set()),
        ("GatherND", set()),
        ("ScatterND", set()),
        ("Compress", set()),
        ("OneHot", {1, 2}),
        ("NonMaxSuppression", {2, 3, 4}),
    ],
)
def test_config_inputs_are_declared(op_type, config):
    assert REGISTRY.lookup("", op_type).config_inputs == config


def test_every_indexing_rule_documents_formula_and_bytes():
    entries = [e for e in REGISTRY.all_rules() if e.fn.__module__ == "onnxroof.rules.indexing"]
    assert {e.op_type for e in entries} >= {"Gather", "GatherElements", "GatherND", "ScatterND", "OneHot"}
    for entry in entries:
        assert "Formula:" in entry.doc and "Bytes:" in entry.doc, entry.op_type
