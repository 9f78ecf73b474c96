"""Issue 25: a graph input or output of sequence type in the opset-23 decoder layer (one mutation of a shipped
sample) never crashes `llm` or `report` (it crashed with an IndexError in the KV-cache search and a division by zero
when nothing is predicted to run); and a dim name that is not valid UTF-8 is one line naming the input."""

from __future__ import annotations

import copy
from pathlib import Path

import onnx
import pytest
from typer.testing import CliRunner

from onnxroof.cli.commands import app

ROOT = Path(__file__).resolve().parents[1]
DECODER = ROOT / "samples" / "llm" / "onnx_decoder_layer_opset23.onnx"
DIMS = ["--dim", "batch_size=1", "--dim", "sequence_length=8", "--dim", "past_sequence_length=8"]


def _as_sequence(value: onnx.ValueInfoProto) -> None:
    """``value``'s tensor type turned into a sequence of that tensor type (same element type and shape)."""
    tensor = copy.deepcopy(value.type.tensor_type)
    value.type.ClearField("tensor_type")
    value.type.sequence_type.elem_type.tensor_type.CopyFrom(tensor)


@pytest.mark.parametrize(("where", "index"), [("input", 0), ("input", 2), ("output", 1)])
@pytest.mark.parametrize("command", ["llm", "report"])
def test_a_sequence_typed_value_is_no_internal_error(tmp_path: Path, where: str, index: int, command: str) -> None:
    model = onnx.load(str(DECODER), load_external_data=False)
    _as_sequence((model.graph.input if where == "input" else model.graph.output)[index])
    path = tmp_path / "decoder.onnx"
    onnx.save(model, str(path))
    args = ["--prompt", "8", "--generate", "8"] if command == "llm" else [*DIMS, "--dim", "total_sequence_length=16"]
    result = CliRunner().invoke(app, [command, str(path), "-p", "a100", *args, "-f", "json"])
    assert result.exit_code in (0, 2), result.output
    assert "internal error" not in result.output
    if result.exit_code == 2:
        assert result.output.strip().count("\n") == 0, result.output  # one line


def test_a_dim_name_that_is_not_utf8_is_one_line_naming_the_input(tmp_path: Path) -> None:
    model = onnx.load(str(DECODER), load_external_data=False)
    raw = bytearray(model.SerializeToString())
    at = raw.find(b"batch_size")
    assert at > 0
    raw[at] = 0xFF  # the first byte of a dim name flipped to an invalid UTF-8 lead byte
    path = tmp_path / "decoder.onnx"
    path.write_bytes(bytes(raw))
    result = CliRunner().invoke(app, ["report", str(path), "-p", "a100", *DIMS, "-f", "json"])
    assert result.exit_code == 2, result.output
    assert "internal error" not in result.output and "not valid UTF-8" in result.output
