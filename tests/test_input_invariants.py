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


# ----------------------------------------------------------------------- unknown ops are never folded


def _model(nodes, inputs, outputs, initializers, value_info=(), opsets=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializers, value_info=list(value_info))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), *opsets])


def test_unknown_op_on_weights_is_unsupported_not_folded() -> None:
    weight = numpy_helper.from_array(np.ones((8, 8), np.float32), "w")
    model = _model(
        [
            helper.make_node("Scramble", ["w"], ["v"], name="scramble", domain="com.example"),
            helper.make_node("MatMul", ["x", "v"], ["y"], name="mm"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [weight],
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, [8, 8])],
        [helper.make_opsetid("com.example", 1)],
    )
    analysis = onnxroof.analyze(model)
    states = {n.name: n.state for n in analysis.nodes}
    assert states["scramble"] == "unsupported"
    assert dict(analysis.unsupported) == {"com.example::Scramble": ("0:scramble",)}


def test_known_op_on_weights_still_folds() -> None:
    weight = numpy_helper.from_array(np.ones((8, 8), np.float32), "w")
    model = _model(
        [helper.make_node("Neg", ["w"], ["v"], name="neg"), helper.make_node("MatMul", ["x", "v"], ["y"], name="mm")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [weight],
    )
    assert {n.name: n.state for n in onnxroof.analyze(model).nodes}["neg"] == "folded"
