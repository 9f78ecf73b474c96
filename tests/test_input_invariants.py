"""Invariants every input must keep: costs never negative, tied and derived weights counted once, unknown ops
never silently folded, nothing uncosted inside a control-flow body left out of the warnings."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import make_op
from onnx import TensorProto, helper, numpy_helper

import onnxroof
from onnxroof.core.errors import CostError, ModelError
from onnxroof.core.registry import evaluate, lookup

# ------------------------------------------------------------------------------------ costs never negative


@pytest.mark.parametrize("op_type", ["Relu", "Add", "MatMul"])
def test_a_negative_dim_is_an_error_naming_the_node(op_type: str) -> None:
    shape = (-2, 8) if op_type != "MatMul" else (4, -8)
    inputs = [(shape, "float32")] * (1 if op_type == "Relu" else 2)
    op = make_op(op_type, inputs, [((-2, 8), "float32")])
    entry = lookup("", op_type)
    with pytest.raises(CostError, match=rf"node 0:{op_type} \({op_type}\): negative cost"):
        evaluate(op, entry)


def test_cost_error_is_a_model_error() -> None:
    assert issubclass(CostError, ModelError)  # exit 2 on the command line, one line
