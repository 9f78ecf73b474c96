"""The JSON renderer writes long lists a column at a time: each column's values as the compact encoder writes
them, each distinct value once, and the rows' lines exactly as encoding each row's dict gives them."""

from __future__ import annotations

import json
import math
from enum import StrEnum

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onnxroof.report.data import json_items, json_texts

ENCODE = json.JSONEncoder(allow_nan=False, ensure_ascii=False).encode


class Side(StrEnum):
    LEFT = "left"


def test_equal_values_of_different_types_are_written_each_as_its_type():
    values = [1, 1.0, True, 0, 0.0, False, None, 2, 2.0]
    assert json_texts(values) == ["1", "1.0", "true", "0", "0.0", "false", "null", "2", "2.0"]


def test_a_negative_zero_is_written_with_its_sign_beside_a_positive_one():
    assert json_texts([0.0, -0.0, 1.5, -0.0]) == ["0.0", "-0.0", "1.5", "-0.0"]
    assert json_texts([0.0, -0.0, None]) == ["0.0", "-0.0", "null"]
    assert json_texts([-0.0, "x", 0.0]) == ["-0.0", '"x"', "0.0"]


def test_text_enums_and_lists_are_written_as_the_encoder_writes_them():
    values = ['a"b', Side.LEFT, "é\n", [1, None], (1, None), [[2, 3], None], None]
    assert json_texts(values) == [ENCODE(v) for v in values]


def test_a_non_finite_float_fails_as_the_encoder_does():
    with pytest.raises(ValueError, match="Out of range float"):
        json_texts([1.0, math.inf])


finite = st.floats(allow_nan=False, allow_infinity=False)
scalars = st.one_of(finite, st.integers(), st.booleans(), st.none(), st.text(max_size=3))


@given(st.lists(st.one_of(scalars, st.lists(scalars, max_size=3))))
def test_texts_agree_with_encoding_each_value(values):
    assert json_texts(values) == [ENCODE(v) for v in values]


def test_rows_are_written_as_their_dicts_encode_one_per_line():
    columns = {"id": ["a", "b"], "x%s": [1.0, None], "shape": [[1, 2], None]}
    rows = [dict(zip(columns, row, strict=True)) for row in zip(*columns.values(), strict=True)]
    assert list(json_items([columns])) == [",\n    ".join(ENCODE(row) for row in rows)]
