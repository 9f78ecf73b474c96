"""Binding shapes the way users do: anonymous dims (``?``, empty, -1), whole-input shapes, names holding ``=``."""

from __future__ import annotations

import onnx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper

import onnxroof
from onnxroof.core.errors import DimsError
from onnxroof.load.dims import parse_dim_bindings, parse_shape_bindings, shape_bindings, symbolic_dims

CONV_W = (8, 3, 3, 3)


def conv_model(input_shape) -> onnx.ModelProto:
    """A 3x3 conv (8 filters, pads 1) on an NCHW input declared with ``input_shape``."""
    weight = helper.make_tensor("w", TensorProto.FLOAT, CONV_W, [0.0] * (8 * 27))
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, input_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["?", 8, "?", "?"])],
        [weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def conv_macs(n: int, h: int, w: int) -> int:
    """MACs = N·C_out·H·W·C_in·kh·kw (stride 1, same padding)."""
    return n * CONV_W[0] * h * w * CONV_W[1] * CONV_W[2] * CONV_W[3]


def test_question_marks_are_anonymous_one_per_axis() -> None:
    """Paddle2ONNX writes [-1, 3, '?', '?']: three different unknowns, not one symbol."""
    model = conv_model(["?", 3, "?", "?"])
    assert set(symbolic_dims(model)) == {"x:0", "x:2", "x:3"}


def test_negative_and_empty_dims_are_anonymous() -> None:
    model = conv_model([-1, 3, "", 7])
    assert set(symbolic_dims(model)) == {"x:0", "x:2"}


def test_whole_input_shape_binds_every_anonymous_axis() -> None:
    model = conv_model(["?", 3, "?", "?"])
    dims = shape_bindings(model, parse_shape_bindings(["x=1x3x48x192"]))
    analysis = onnxroof.analyze(model, dims=dims)
    assert analysis.totals.macs == conv_macs(1, 48, 192)
    assert analysis.model.inputs[0][1] == [1, 3, 48, 192]


def test_binding_the_question_mark_is_not_a_symbol() -> None:
    """``--dim ?=48`` once bound all three axes alike and reported negative MACs; now the axes stay unbound."""
    model = conv_model(["?", 3, "?", "?"])
    with pytest.raises(DimsError, match=r"unbound symbolic dims: x:0 .*x:2 .*x:3"):
        onnxroof.analyze(model, dims=parse_dim_bindings(["?=48"]))


def test_shape_and_dim_conflict_is_one_error() -> None:
    model = conv_model(["batch", 3, 32, 32])
    with pytest.raises(DimsError, match=r"axis 0 \('batch'\) = 2 conflicts with --dim batch=1"):
        shape_bindings(model, parse_shape_bindings(["x=2x3x32x32"]), {"batch": 1})
    assert shape_bindings(model, parse_shape_bindings(["x=1x3x32x32"]), {"batch": 1}) == {"batch": 1}


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("x=1x3x32", r"3 dims given, input 'x' has rank 4"),
        ("y=1x3x32x32", r"the model has no input 'y'"),
        ("x=1x4x32x32", r"axis 1 is fixed at 3 in the model, not 4"),
        ("x=1xx32", r"expected INPUT=DIMxDIMx"),
        ("x=1x-1x2x2", r"expected INPUT=DIMxDIMx|non-negative integer"),
    ],
)
def test_bad_shapes_name_the_input(item: str, message: str) -> None:
    model = conv_model(["n", 3, "h", "w"])
    with pytest.raises(DimsError, match=message):
        shape_bindings(model, parse_shape_bindings([item]))


def test_dim_names_holding_equals_split_at_the_last_one() -> None:
    assert parse_dim_bindings(["a=b=2"]) == {"a=b": 2}
    assert parse_shape_bindings(["in=put=1x2"]) == {"in=put": (1, 2)}


@given(st.lists(st.integers(1, 64), min_size=4, max_size=4))
def test_shape_bindings_round_trip(sizes: list[int]) -> None:
    model = conv_model(["?", "c", "?", "?"])
    text = "x=" + "x".join(map(str, sizes))
    assert shape_bindings(model, parse_shape_bindings([text])) == {
        "x:0": sizes[0],
        "c": sizes[1],
        "x:2": sizes[2],
        "x:3": sizes[3],
    }


# ----------------------------------------------------------------------------------- --shape and shapes=


def test_api_shapes_bind_the_whole_input() -> None:
    analysis = onnxroof.analyze(conv_model(["?", 3, "?", "?"]), shapes={"x": (1, 3, 48, 192)})
    assert analysis.totals.macs == conv_macs(1, 48, 192)
    assert analysis.model.dims == {"x:0": 1, "x:2": 48, "x:3": 192}


def test_api_shapes_conflicting_with_dims_is_one_error() -> None:
    with pytest.raises(DimsError, match=r"conflicts with --dim batch=1"):
        onnxroof.analyze(conv_model(["batch", 3, 32, 32]), dims={"batch": 1}, shapes={"x": (2, 3, 32, 32)})


def _cli(*args: object):
    import inspect

    from typer.testing import CliRunner

    from onnxroof.cli.commands import app

    runner = CliRunner(mix_stderr=False) if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters else None
    return (runner or CliRunner()).invoke(app, [str(a) for a in args], env={"COLUMNS": "200", "NO_COLOR": "1"})


@pytest.mark.parametrize(
    "command",
    [
        ["report", "-f", "json"],
        ["graph", "-o", "{out}.dot"],
        ["sweep", "--precision", "fp32,fp16", "-f", "json"],
        ["compare", "-p", "xavier", "-p", "h100", "-f", "json"],
        ["check", "--max-flops", "1T"],
        ["diff", "{model}", "-f", "json"],
    ],
)
def test_cli_shape_option_on_every_command(tmp_path, command: list[str]) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(conv_model(["?", 3, "?", "?"]), path)
    args = [a.format(out=tmp_path / "g", model=path) for a in command]
    result = _cli(args[0], path, *args[1:], "--shape", "x=1x3x48x192")
    assert result.exit_code == 0, result.stderr
    conflict = _cli(args[0], path, *args[1:], "--shape", "x=1x3x48x192", "--dim", "x:2=8")
    assert conflict.exit_code == 2
    if args[0] == "check":  # a model's error is its row of the check table
        assert "conflicts with --dim x:2=8" in conflict.stdout
    else:
        assert len(conflict.stderr.strip().splitlines()) == 1
        assert "conflicts with --dim x:2=8" in conflict.stderr


def test_cli_report_shape_gives_the_macs() -> None:
    import json
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "m.onnx"
        onnx.save(conv_model(["?", 3, "?", "?"]), path)
        result = _cli("report", path, "-f", "json", "--shape", "x=1x3x48x192")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["totals"]["macs"] == conv_macs(1, 48, 192)


def test_an_unbound_dim_on_many_inputs_names_three_and_counts_the_rest() -> None:
    """A decoder's past length sits on one input per layer's key and value: the error stays one readable line."""
    inputs = [helper.make_tensor_value_info(f"past.{i}", TensorProto.FLOAT, [1, "past", 8]) for i in range(10)]
    graph = helper.make_graph(
        [helper.make_node("Concat", [f"past.{i}" for i in range(10)], ["y"], axis=1)],
        "many",
        inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, None, 8])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(DimsError) as raised:
        onnxroof.analyze(model, platform="xavier")
    message = str(raised.value)
    assert "past (input 'past.0' axis 1, input 'past.1' axis 1, input 'past.2' axis 1 and 7 more)" in message
    assert "past.3" not in message
