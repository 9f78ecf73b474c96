"""The numpy evaluation of shape arithmetic (onnxroof.load.evaluate) agrees with the ONNX reference evaluator on
every op it takes over, and hands everything else to it."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxroof.load import evaluate
from onnxroof.load.evaluate import NUMPY_OPS, evaluate_node, reference_evaluate

I64 = np.int64


def a(*values: Any, dtype: Any = I64) -> np.ndarray:
    return np.array(values, dtype=dtype)


# (op_type, inputs, attributes, opset, numpy decides): one row per behaviour; each op of NUMPY_OPS has at least one
# row; False: the case is handed to the reference evaluator (an older opset, a float, an error)
CASES: list[tuple[str, list[np.ndarray | None], dict[str, Any], int, bool]] = [
    ("Shape", [np.zeros((2, 3, 5), np.float32)], {}, 17, True),
    ("Shape", [np.zeros((2, 3, 5), np.float32)], {"start": 1}, 17, True),
    ("Shape", [np.zeros((2, 3, 5), np.float32)], {"start": -2, "end": -1}, 17, True),
    ("Size", [np.zeros((2, 3), np.float32)], {}, 17, True),
    ("Identity", [a(4, 5)], {}, 17, True),
    ("Concat", [a(1, 2), a(3), a(4, 5, 6)], {"axis": 0}, 17, True),
    ("Concat", [a(1), np.array(2, I64)], {"axis": 0}, 17, False),  # a scalar input: both refuse
    ("Gather", [a(7, 8, 9), np.array(1, I64)], {"axis": 0}, 17, True),
    ("Gather", [a(7, 8, 9), a(-1, 0)], {}, 17, True),
    ("Gather", [a(7, 8, 9), a(3)], {}, 17, False),  # out of range: both refuse
    ("Gather", [np.arange(6, dtype=I64).reshape(2, 3), a(2, 0)], {"axis": 1}, 17, True),
    ("Unsqueeze", [np.array(5, I64), a(0)], {}, 17, True),
    ("Unsqueeze", [a(5, 6), a(-1, 0)], {}, 17, True),
    ("Unsqueeze", [a(5, 6)], {"axes": [0]}, 11, False),
    ("Squeeze", [a(5).reshape(1, 1), a(0)], {}, 17, True),
    ("Squeeze", [a(5).reshape(1, 1)], {}, 17, True),
    ("Squeeze", [a(5).reshape(1, 1)], {"axes": [1]}, 11, False),
    ("Slice", [a(1, 2, 3, 4, 5), a(1), a(-1)], {}, 17, True),
    ("Slice", [a(1, 2, 3, 4, 5), a(-1), a(-(2**63)), a(0), a(-2)], {}, 17, True),
    ("Slice", [a(1, 2, 3, 4, 5), a(2), a(2**63 - 1), None, a(2)], {}, 17, True),
    ("Slice", [np.arange(12, dtype=I64).reshape(3, 4), a(1), a(3), a(1)], {}, 17, True),
    ("Slice", [a(1, 2, 3)], {"starts": [1], "ends": [3]}, 9, False),
    ("Reshape", [a(1, 2, 3, 4), a(2, -1)], {}, 17, True),
    ("Reshape", [np.arange(6, dtype=I64).reshape(2, 3), a(0, 3)], {}, 17, True),
    ("Reshape", [np.zeros((0, 3), I64), a(0, 3)], {"allowzero": 1}, 17, True),
    ("Cast", [a(1, 0, 3)], {"to": TensorProto.FLOAT}, 17, True),
    ("Cast", [a(1, 0, 3)], {"to": TensorProto.INT32}, 17, True),
    ("Cast", [a(1, 0, 3)], {"to": TensorProto.BOOL}, 17, True),
    ("Cast", [a(1.5, dtype=np.float32)], {"to": TensorProto.INT64}, 17, False),  # float input: the reference's
    ("Add", [a(1, 2), a(10)], {}, 17, True),
    ("Sub", [a(1, 2), a(10)], {}, 17, True),
    ("Mul", [a(3, -2), a(4, 4)], {}, 17, True),
    ("Mul", [a(3, dtype=np.int32), a(4)], {}, 17, False),  # dtype mismatch: both refuse
    ("Div", [a(7, -7, 7, -7, 6), a(2, 2, -2, -2, 3)], {}, 17, True),
    ("Div", [a(7, dtype=np.int32), a(2, dtype=np.int32)], {}, 17, True),
    ("Div", [a(7.0, dtype=np.float32), a(2.0, dtype=np.float32)], {}, 17, False),  # float: the reference's
    ("Equal", [a(1, 2, 3), a(2)], {}, 17, True),
    ("Less", [a(1, 2, 3), a(2)], {}, 17, True),
    ("Greater", [a(1, 2, 3), a(2)], {}, 17, True),
    ("LessOrEqual", [a(1, 2, 3), a(2)], {}, 17, True),
    ("GreaterOrEqual", [a(1, 2, 3), a(2)], {}, 17, True),
    ("And", [a(True, False, dtype=bool), a(True, True, dtype=bool)], {}, 17, True),
    ("Or", [a(True, False, dtype=bool), a(False, False, dtype=bool)], {}, 17, True),
    ("Min", [a(1, 5), a(3, 2), a(0, 9)], {}, 17, True),
    ("Max", [a(1, 5), a(3, 2)], {}, 17, True),
    ("Neg", [a(1, -5)], {}, 17, True),
    ("Not", [a(True, False, dtype=bool)], {}, 17, True),
    ("Where", [a(True, False, dtype=bool), a(1, 2), a(8, 9)], {}, 17, True),
]


def _node(op: str, inputs: list[np.ndarray | None], attrs: dict[str, Any]) -> tuple[Any, dict[str, np.ndarray]]:
    names = [f"in{i}" if x is not None else "" for i, x in enumerate(inputs)]
    node = helper.make_node(op, names, ["out"], **attrs)
    return node, {n: x for n, x in zip(names, inputs, strict=True) if x is not None}


def test_every_numpy_op_has_a_case() -> None:
    assert set(NUMPY_OPS) == {case[0] for case in CASES}


@pytest.mark.parametrize(("op", "inputs", "attrs", "opset", "numpy"), CASES)
def test_numpy_agrees_with_the_reference_evaluator(
    op: str, inputs: list[np.ndarray | None], attrs: dict[str, Any], opset: int, numpy: bool
) -> None:
    node, values = _node(op, inputs, attrs)
    opsets = [helper.make_opsetid("", opset)]
    expected = reference_evaluate(node, values, opsets, 8)
    delegated: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(evaluate, "reference_evaluate", lambda node, *args: delegated.append(node.op_type) or expected)
        got = evaluate_node(node, values, opsets, 8)
    assert delegated == ([] if numpy else [op])
    if numpy:
        assert expected, "a case numpy decides must be one the reference evaluator can run"
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        assert got[name].dtype == value.dtype
        assert got[name].shape == value.shape
        np.testing.assert_array_equal(got[name], value)


def test_the_common_cases_never_reach_the_reference_evaluator(monkeypatch: pytest.MonkeyPatch) -> None:
    """Integer shape arithmetic is numpy's alone: the reference evaluator is not called."""

    def refuse(*args: object) -> dict[str, np.ndarray]:
        raise AssertionError("the reference evaluator was called")

    monkeypatch.setattr(evaluate, "reference_evaluate", refuse)
    opsets = [helper.make_opsetid("", 17)]
    node, values = _node("Concat", [a(1), a(2, 3)], {"axis": 0})
    assert evaluate_node(node, values, opsets, 8)["out"].tolist() == [1, 2, 3]
    node, values = _node("Div", [a(-7), a(2)], {})
    assert evaluate_node(node, values, opsets, 8)["out"].tolist() == [-3]  # toward zero, not -4


def test_other_ops_go_to_the_reference_evaluator() -> None:
    node, values = _node("CumSum", [a(1, 2, 3), np.array(0, I64)], {})
    assert "CumSum" not in NUMPY_OPS
    assert evaluate_node(node, values, [helper.make_opsetid("", 17)], 8)["out"].tolist() == [1, 3, 6]
