"""Silero VAD as shipped (tests/data/silero, issue 25): its ``If`` bodies are shaped with the branch that runs.

The exporter wraps the LSTM in ``If``s whose branches disagree in rank (squeeze a frame dim of 1 or keep it;
add a batch dim or not). The loader used to give each ``If`` the outputs of its first static branch, whatever
its condition, so ``/decoder/rnn/Unsqueeze_3`` came out [1, 1, 1, 128] (ONNX Runtime: [1, 1, 128]) and the
LSTM's rank check refused both files. FLOPs are held against ``silero_vad_v6.onnx``, the same network exported
without ``If``: its STFT computes one frame more (5, then slices 4), 2 × 258 × 256 FLOPs, the only difference.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from typer.testing import CliRunner

from onnxroof import analyze
from onnxroof.cli.commands import app
from onnxroof.load.reader import load_model

SILERO = Path(__file__).resolve().parent / "data" / "silero"
HALF, V5, V6 = (SILERO / f"silero_vad_{name}.onnx" for name in ("half", "v5", "v6"))
# 16 kHz: a 512-sample window and 64 samples of context. v5's input dims are anonymous (spox writes none).
BINDINGS: dict[Path, tuple[str, ...]] = {
    HALF: ("--dim", "batch=1", "--dim", "sequence=576"),
    V5: ("--shape", "input=1x576", "--shape", "state=2x1x128"),
    V6: ("--dim", "seq_len=1"),
}
EXTRA_STFT_FRAME = 2 * 258 * 256  # v6's fifth STFT frame (258 filters of 256 taps), sliced away after the Conv


def _analysis(path: Path):
    if path == V5:
        return analyze(path, "xavier", shapes={"input": (1, 576), "state": (2, 1, 128)})
    return analyze(path, "xavier", {"batch": 1, "sequence": 576} if path == HALF else {"seq_len": 1})


def _body_nodes(graph: onnx.GraphProto, prefix: str = "") -> Iterator[tuple[str, onnx.NodeProto, dict]]:
    """(branch path, node, the value types its graph declares) for every node inside a body, recursively."""
    types = {v.name: v.type for v in [*graph.value_info, *graph.output, *graph.input]}
    for node in graph.node:
        if prefix:
            yield prefix, node, types
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _body_nodes(attr.g, f"{prefix}/{node.name}.{attr.name}")


def _dims(type_proto: onnx.TypeProto) -> list[int | str]:
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in type_proto.tensor_type.shape.dim]


def test_the_files_are_the_ones_documented() -> None:
    readme = (SILERO / "README.md").read_text()
    for path in (HALF, V5, V6):
        assert hashlib.sha256(path.read_bytes()).hexdigest() in readme, path.name


@pytest.mark.parametrize("path", [HALF, V5], ids=["half", "v5"])
def test_the_lstm_input_is_rank_3_as_onnx_runtime_runs_it(path: Path) -> None:
    if path == V5:
        loaded = load_model(path, shapes={"input": (1, 576), "state": (2, 1, 128)})
    else:
        loaded = load_model(path, {"batch": 1, "sequence": 576})
    lstm_inputs = {
        branch: _dims(types[node.input[0]])
        for branch, node, types in _body_nodes(loaded.model.graph)
        if node.op_type == "LSTM" and "else_branch__Inline" not in node.name  # v5's 8 kHz branch: below
    }
    assert len(lstm_inputs) == 2  # the LSTM with the state given, and with a zero state
    assert all(dims == [1, 1, 128] for dims in lstm_inputs.values()), lstm_inputs


def test_an_if_takes_the_shapes_of_the_branch_its_known_condition_selects() -> None:
    # /decoder/If squeezes the frame dim when it is 1 (then) or keeps it (else); 576 samples leave one frame.
    loaded = load_model(HALF, {"batch": 1, "sequence": 576})
    assert _dims(loaded.value_types["/decoder/If_output_0"]) == [1, 128]
    assert _dims(loaded.value_types["stateN"]) == [2, 1, 128]
    assert _dims(loaded.value_types["output"]) == [1, 1]


@pytest.mark.parametrize("path", [HALF, V5], ids=["half", "v5"])
def test_the_flops_match_the_if_less_export(path: Path) -> None:
    analysis, reference = _analysis(path), _analysis(V6)
    expected = reference.totals.flops - EXTRA_STFT_FRAME
    # 1.3668 MFLOP against 1.3668 MFLOP: what is left is v5's ReduceMean and sr test (3 FLOPs), far under 5 %
    assert analysis.totals.flops == pytest.approx(expected, rel=1e-4)
    assert abs(analysis.totals.flops - expected) <= 0.05 * expected


def test_the_if_around_the_lstm_costs_what_the_if_less_lstm_does() -> None:
    lstm = next(n for n in _analysis(V6).nodes if n.op_type == "LSTM").flops
    decoder = next(n for n in _analysis(HALF).nodes if n.name == "/decoder/If_1")
    assert decoder.flops == pytest.approx(lstm, rel=1e-3)


def test_the_8khz_branch_that_cannot_run_on_a_16khz_window_is_left_out_with_a_warning() -> None:
    # ONNX Runtime with sr=8000 and 576 samples fails at this LSTM: X is {1, 1, 1, 128, 2}.
    analysis = _analysis(V5)
    assert any("else_branch: not counted, it cannot run with these shapes" in w for w in analysis.warnings)
    assert any("rank 5 [1, 1, 1, 128, 2]" in w for w in analysis.warnings)


@pytest.mark.parametrize("path", [HALF, V5, V6], ids=["half", "v5", "v6"])
def test_the_cli_analyzes_each_file(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    result = CliRunner().invoke(app, ["report", str(path), *BINDINGS[path], "-f", "json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.exists()


def _lstm_branches(then_rank: int, else_rank: int) -> onnx.ModelProto:
    """An ``If`` on a bool input whose branches run an LSTM on ``x`` ([5, 1, 4]) or on a view of ``x`` of
    another rank: an LSTM input of rank other than 3 cannot run."""
    from onnx import TensorProto, helper, numpy_helper

    shapes = {3: [5, 1, 4], 2: [5, 4], 4: [5, 1, 1, 4]}

    def branch(rank: int, tag: str) -> onnx.GraphProto:
        shape = numpy_helper.from_array(np.array(shapes[rank], np.int64), f"shape_{tag}")
        nodes = [
            helper.make_node("Reshape", ["x", f"shape_{tag}"], [f"v_{tag}"]),
            helper.make_node("LSTM", [f"v_{tag}", "w", "r"], [f"y_{tag}", f"h_{tag}"], hidden_size=8),
        ]
        out = helper.make_tensor_value_info(f"h_{tag}", TensorProto.FLOAT, [1, 1, 8])
        return helper.make_graph(nodes, tag, [], [out], [shape])

    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["h"], then_branch=branch(then_rank, "t"), else_branch=branch(else_rank, "e"))],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 1, 4]),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, 1, 8])],
        [
            numpy_helper.from_array(np.ones((1, 32, 4), np.float32), "w"),
            numpy_helper.from_array(np.ones((1, 32, 8), np.float32), "r"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _report(model: onnx.ModelProto, folder: Path, *args: str):
    path = folder / "model.onnx"
    onnx.save(model, path)
    return CliRunner().invoke(app, ["report", str(path), *args, "-f", "json", "-o", str(folder / "out.json")])


def test_a_branch_that_cannot_run_is_left_out_only_when_the_condition_is_unknown(tmp_path: Path) -> None:
    model = _lstm_branches(3, 4)
    assert _report(model, tmp_path).exit_code == 0
    assert _report(model, tmp_path, "--dim", "c=1").exit_code == 0
    # the condition bound to the branch that cannot run: the model is malformed for this binding
    refused = _report(model, tmp_path, "--dim", "c=0")
    assert refused.exit_code == 2
    assert "the operator needs rank 3" in refused.stderr


@pytest.mark.parametrize("ranks", [(2, 4), (4, 4)])
def test_an_if_whose_branches_all_cannot_run_is_still_refused(ranks: tuple[int, int], tmp_path: Path) -> None:
    refused = _report(_lstm_branches(*ranks), tmp_path)
    assert refused.exit_code == 2
    assert "the operator needs rank 3" in refused.stderr
