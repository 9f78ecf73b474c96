"""Range lengths found before shape inference (onnxroof.load.ranges): one inference shapes a bound decoder, with
the types the fold and re-inference gave, and a Range whose inputs are not known is left to that path."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

from onnxroof.load import reader
from onnxroof.load.ranges import range_length, seed_range_lengths
from onnxroof.load.reader import load_model


@pytest.mark.parametrize(
    ("start", "limit", "delta", "length"),
    [
        (0, 5, 1, 5),
        (2048, 2049, 1, 1),
        (0, 5, 2, 3),  # ⌈5 / 2⌉
        (10, 0, -3, 4),  # ⌈−10 / −3⌉
        (5, 0, 1, 0),  # empty, never negative
        (0, 5, 0, None),
        (0, 2**53, 1, None),  # beyond doubles' exact integers: left to ONNX
    ],
)
def test_range_length_is_onnx_s_definition(start: int, limit: int, delta: int, length: int | None) -> None:
    assert range_length(start, limit, delta) == length


def _decoder_positions(source: str = "Shape") -> onnx.ModelProto:
    """A decoder's positions: ``Range(Shape(past)[2], Shape(past)[2] + Shape(ids)[1], 1)`` (Shape → Gather →
    Add, as exporters write them), then ``Unsqueeze`` and a ``Cast``. ``source="ReduceMax"`` computes the start
    from the ids' values instead (known only at run time)."""
    zero = helper.make_tensor("zero", TensorProto.INT64, [], [0])
    nodes = [
        helper.make_node("Shape", ["past"], ["past_shape"]),
        helper.make_node("Constant", [], ["two"], value=helper.make_tensor("two", TensorProto.INT64, [], [2])),
        helper.make_node("Gather", ["past_shape", "two"], ["past_len"], axis=0),
        helper.make_node("Shape", ["ids"], ["ids_shape"]),
        helper.make_node("Constant", [], ["one"], value=helper.make_tensor("one", TensorProto.INT64, [], [1])),
        helper.make_node("Gather", ["ids_shape", "one"], ["seq"], axis=0),
        helper.make_node("Add", ["past_len", "seq"], ["total"]),
        helper.make_node("Range", ["past_len" if source == "Shape" else "start", "total", "one"], ["positions"]),
        helper.make_node("Unsqueeze", ["positions", "zero"], ["unsqueezed"]),
        helper.make_node("Cast", ["unsqueezed"], ["y"], to=TensorProto.FLOAT),
    ]
    if source == "ReduceMax":
        nodes.insert(0, helper.make_node("ReduceMax", ["ids"], ["start"], keepdims=0))
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq_len"]),
            helper.make_tensor_value_info("past", TensorProto.FLOAT, ["batch", 2, "past_len", 8]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "n"])],
        initializer=[zero],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _dims(loaded: reader.LoadedModel, name: str) -> list[int]:
    return [d.dim_value for d in loaded.value_types[name].tensor_type.shape.dim]


def test_a_known_range_is_shaped_by_one_inference(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    infer = reader._infer_serialized
    monkeypatch.setattr(reader, "_infer_serialized", lambda *a, **k: calls.append(1) or infer(*a, **k))
    loaded = load_model(_decoder_positions(), {"batch": 1, "seq_len": 3, "past_len": 7})
    assert _dims(loaded, "positions") == [3]  # ⌈(7 + 3 − 7) / 1⌉
    assert _dims(loaded, "y") == [1, 3]
    assert len(calls) == 1  # no fold, no second inference


@pytest.mark.parametrize(("seq", "past"), [(5, 0), (1, 7), (1, 4095)])
def test_the_types_are_the_fold_and_reinference_s(monkeypatch: pytest.MonkeyPatch, seq: int, past: int) -> None:
    dims = {"batch": 2, "seq_len": seq, "past_len": past}
    seeded = load_model(_decoder_positions(), dims)
    monkeypatch.setattr(reader, "seed_range_lengths", lambda model, positions=None: 0)
    folded = load_model(_decoder_positions(), dims)
    assert dict(seeded.value_types) == dict(folded.value_types)
    assert _dims(seeded, "positions") == [seq]


def test_a_range_read_from_run_time_values_is_left_to_the_fallbacks() -> None:
    model = _decoder_positions("ReduceMax")
    for dim, value in zip(model.graph.input[0].type.tensor_type.shape.dim, (1, 3), strict=True):
        dim.dim_value = value
    for dim, value in zip(model.graph.input[1].type.tensor_type.shape.dim, (1, 2, 7, 8), strict=True):
        dim.dim_value = value
    assert seed_range_lengths(model) == 0
    assert not any(v.name == "positions" for v in model.graph.value_info)


def test_a_range_with_a_value_info_of_its_own_is_left_as_it_is() -> None:
    model = _decoder_positions()
    model.graph.value_info.append(helper.make_tensor_value_info("positions", TensorProto.INT64, ["n"]))
    assert seed_range_lengths(model) == 0
    assert [v.name for v in model.graph.value_info] == ["positions"]


@pytest.mark.parametrize("kind", ["float", "shaped"])
def test_a_float_range_or_one_of_non_scalars_is_left_to_onnx(kind: str) -> None:
    # a float input: ONNX versions compute the length in different precisions; [1]-shaped inputs: ONNX refuses them
    model = _decoder_positions()
    for dim, value in zip(model.graph.input[0].type.tensor_type.shape.dim, (1, 3), strict=True):
        dim.dim_value = value
    for dim, value in zip(model.graph.input[1].type.tensor_type.shape.dim, (1, 2, 7, 8), strict=True):
        dim.dim_value = value
    one = next(n for n in model.graph.node if n.output[0] == "one")
    if kind == "float":
        for node in model.graph.node:
            if node.op_type == "Range":
                node.input[2] = "one_f"
        model.graph.initializer.append(helper.make_tensor("one_f", TensorProto.FLOAT, [], [1.0]))
    else:
        one.attribute[0].t.CopyFrom(helper.make_tensor("one", TensorProto.INT64, [1], [1]))
    assert seed_range_lengths(model) == 0


def test_the_scan_s_range_positions_are_the_ones_seeded() -> None:
    """Given the positions of the Range nodes (the read stage's scan), only those nodes are looked at: the scan's
    positions seed what a walk finds, and an empty list seeds nothing."""
    from onnxroof.load.checks import scan_model

    model = _decoder_positions()
    for dim, value in zip(model.graph.input[0].type.tensor_type.shape.dim, (1, 3), strict=True):
        dim.dim_value = value
    for dim, value in zip(model.graph.input[1].type.tensor_type.shape.dim, (1, 2, 7, 8), strict=True):
        dim.dim_value = value
    positions = scan_model(model).main.ranges
    assert [model.graph.node[i].op_type for i in positions] == ["Range"]
    walked, given, none = (onnx.ModelProto.FromString(model.SerializeToString()) for _ in range(3))
    assert seed_range_lengths(walked) == seed_range_lengths(given, positions) == 1
    assert list(walked.graph.value_info) == list(given.graph.value_info)
    assert seed_range_lengths(none, ()) == 0 and not none.graph.value_info
