"""Binding's constant folding: shape arithmetic evaluated, Constant nodes left as nodes, and the node-by-node
fallback skipped when ONNX's re-inference has shaped everything."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from onnxroof.load import reader
from onnxroof.load.reader import load_model
from onnxroof.load.shapes import fold_small_constants, infer, value_types


def _range_model() -> onnx.ModelProto:
    """``r = Range(0, Shape(x)[0], 1)``: ONNX's inference leaves ``r`` [?] (Range reads constant data only, and the
    Gather's value is propagated shape data), so it takes the fold and a re-inference to shape it."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["i0"], value=helper.make_tensor("i0", TensorProto.INT64, [], [0])),
        helper.make_node("Gather", ["s", "i0"], ["n"], axis=0),
        helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", TensorProto.INT64, [], [1])),
        helper.make_node("Range", ["i0", "n", "one"], ["r"]),
        helper.make_node("Cast", ["r"], ["y"], to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m"])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_fold_and_reinference_shape_the_range_without_the_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> int:
        raise AssertionError("propagate_fallback ran though nothing was left to shape")

    monkeypatch.setattr(reader, "propagate_fallback", refuse)
    # the path taken when no length is known
    monkeypatch.setattr(reader, "seed_range_lengths", lambda model, positions=None: 0)
    loaded = load_model(_range_model(), {"n": 3})
    for name in ("r", "y"):
        dims = [d.dim_value for d in loaded.value_types[name].tensor_type.shape.dim]
        assert dims == [3], name


def test_constant_nodes_stay_nodes_and_only_computed_values_are_folded() -> None:
    model = _range_model()
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 3
    inferred, _ = infer(model)
    folded, count = fold_small_constants(inferred, None, value_types(inferred))
    assert [n.op_type for n in folded.graph.node] == ["Constant", "Constant", "Range", "Cast"]
    assert count == 2  # s = [3, 4] (Shape of a static input) and n = 3; the Constants are read, not folded
    values = {t.name: onnx.numpy_helper.to_array(t) for t in folded.graph.initializer}
    np.testing.assert_array_equal(values["s"], [3, 4])
    assert values["n"].tolist() == 3
