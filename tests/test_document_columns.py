"""The JSON document's rows are made a column at a time: non-finite floats become null per column, and the node
rows hold exactly the document's fields, in its order."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from onnxroof import analyze
from onnxroof.analysis.document import NODE_FIELDS, finite_column, kernel_records, node_records

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def test_finite_column_nulls_only_non_finite_floats():
    values = [1, 2.5, math.inf, -math.inf, math.nan, None, "x", 0.0, True]
    assert finite_column(values) == [1, 2.5, None, None, None, None, "x", 0.0, True]


def test_finite_column_nulls_numpy_floats_too():
    assert finite_column([np.float64("inf"), np.float64(2.0), np.float64("nan")]) == [None, 2.0, None]


def test_finite_column_returns_the_list_itself_when_all_are_finite():
    values = [1, 2.5, None, "x"]
    assert finite_column(values) is values


@given(st.lists(st.one_of(st.floats(), st.integers(), st.none(), st.text(max_size=3))))
def test_finite_column_agrees_with_a_per_value_check(values):
    expected = [None if isinstance(v, float) and not math.isfinite(v) else v for v in values]
    got = finite_column(values)
    assert len(got) == len(expected)
    assert all((a is None and b is None) or a == b or (a != a and b != b) for a, b in zip(got, expected, strict=True))


def test_node_and_kernel_records_match_the_row_views():
    analysis = analyze(SAMPLES / "tiny_cnn.onnx", platform="xavier", dims={"batch": 1})
    nodes = list(node_records(analysis))
    assert [list(record) for record in nodes] == [list(NODE_FIELDS)] * len(analysis.nodes)
    for record, view in zip(nodes, analysis.nodes, strict=True):
        expected = view.to_dict()
        for key in NODE_FIELDS:
            value = expected[key]
            finite = not (isinstance(value, float) and not math.isfinite(value))
            assert record[key] == (value if finite else None), key
    kernels = list(kernel_records(analysis))
    assert len(kernels) == len(analysis.kernels)
    assert kernels[0].keys() == analysis.kernels[0].to_dict().keys()


def test_finite_column_settles_sums_that_overflow_and_huge_ints_value_by_value():
    big = [1e308, 1e308]  # their sum is inf, yet each is finite
    assert finite_column(big) is big
    huge = [10**400, 1.0]  # no float sum: the values decide
    assert finite_column(huge) is huge
    assert finite_column([10**400, math.inf]) == [10**400, None]


def test_finite_column_keeps_columns_without_floats_as_they_are():
    values = ["a", None, [1.0, math.inf]]  # a list holding inf is no float value of the column
    assert finite_column(values) is values
