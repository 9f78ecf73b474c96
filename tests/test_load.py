"""The loader: weights are never read, symbolic dims are bound, shapes are inferred, functions are inlined.

Bad-input cases (missing file, checker failures, bad ``--dim`` values...) are exercised through both the API
and the command line in ``test_cli.py``; this file covers what loading must get right.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import onnx
import pytest
from helpers import parse_model
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

from onnxroof.analysis.analyze import analyze
from onnxroof.core.errors import DimsError, ModelError, OnnxroofError
from onnxroof.core.states import NodeState
from onnxroof.load.reader import load_model, parse_dim_bindings, symbolic_dims

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
CNN = SAMPLES / "tiny_cnn.onnx"
TRANSFORMER = SAMPLES / "tiny_transformer.onnx"
LSTM = SAMPLES / "tiny_lstm.onnx"

# tiny_transformer's architecture (samples/build_samples.py): hidden 64, 4 heads, FFN 256, 2 layers.
HIDDEN, HEADS, FFN, LAYERS = 64, 4, 256, 2
HEAD_DIM = HIDDEN // HEADS


# ---------------------------------------------------------------------------------------------- builders


def external_matmul_model(location: str, rows: int = 1024, cols: int = 1024) -> onnx.ModelProto:
    """``y = x @ W`` with ``W`` (float32 [rows, cols]) stored as external data at ``location``."""
    weight = TensorProto()
    weight.name = "W"
    weight.data_type = TensorProto.FLOAT
    weight.dims.extend([rows, cols])
    weight.data_location = TensorProto.EXTERNAL
    entry = weight.external_data.add()
    entry.key = "location"
    entry.value = location
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
        "external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cols])],
        [weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def relu_model(opset: int = 17, shape: list | None = None) -> onnx.ModelProto:
    shape = [1, 8] if shape is None else shape
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "relu",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every path opened from Python (builtins.open, io.open, os.open) while the test runs, resolved."""
    seen: list[str] = []
    real_open, real_io_open, real_os_open = builtins.open, io.open, os.open

    def record(file: object) -> None:
        if isinstance(file, str | bytes | os.PathLike):
            seen.append(str(Path(os.fsdecode(file)).resolve()))

    def fake_open(file, *args, **kwargs):
        record(file)
        return real_open(file, *args, **kwargs)

    def fake_io_open(file, *args, **kwargs):
        record(file)
        return real_io_open(file, *args, **kwargs)

    def fake_os_open(path, *args, **kwargs):
        record(path)
        return real_os_open(path, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(io, "open", fake_io_open)
    monkeypatch.setattr(os, "open", fake_os_open)
    yield seen


# ------------------------------------------------------------------------------------- weights never read


def test_missing_external_weight_file_still_analyzes(tmp_path: Path, opened: list[str]) -> None:
    path = tmp_path / "ext.onnx"
    onnx.save(external_matmul_model("weights.bin"), path)
    assert not (tmp_path / "weights.bin").exists()

    analysis = analyze(path)

    (node,) = analysis.nodes
    assert node.state == NodeState.COSTED
    assert node.macs == 1024 * 1024
    assert analysis.totals.params == 1024 * 1024  # counted from the TensorProto's dims
    assert analysis.totals.weight_bytes == 1024 * 1024 * 4
    assert str((tmp_path / "weights.bin").resolve()) not in opened


def test_sparse_1gb_weight_file_is_never_read(tmp_path: Path, opened: list[str]) -> None:
    rows = cols = 16384  # float32: exactly 1 GiB
    weights = tmp_path / "big.bin"
    with open(weights, "wb") as handle:
        handle.truncate(rows * cols * 4)  # sparse: no disk blocks, but reading it would fill RAM
    path = tmp_path / "big.onnx"
    onnx.save(external_matmul_model("big.bin", rows, cols), path)
    opened.clear()

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    analysis = analyze(path)  # its wall time: benchmarks/bench_passes.py (not asserted: flaky when shared)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024

    assert analysis.totals.params == rows * cols
    assert analysis.nodes[0].macs == rows * cols
    assert grown_mb < 200, f"RSS grew by {grown_mb:.0f} MB for a 1 GiB weight file that must not be read"
    assert str(weights.resolve()) not in opened


def _external(name: str, location: str, rows: int = 8, cols: int = 8) -> TensorProto:
    tensor = TensorProto()
    tensor.name = name
    tensor.data_type = TensorProto.FLOAT
    tensor.dims.extend([rows, cols])
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key = "location"
    entry.value = location
    return tensor


def external_constant_model() -> onnx.ModelProto:
    """``y = x @ c`` where ``c`` is a Constant node whose value tensor is stored externally (w.bin)."""
    graph = helper.make_graph(
        [
            helper.make_node("Constant", [], ["c"], name="const", value=_external("c", "w.bin")),
            helper.make_node("MatMul", ["x", "c"], ["y"], name="mm"),
        ],
        "constant",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def external_subgraph_model() -> onnx.ModelProto:
    """An If whose then-branch holds an external initializer (w.bin)."""
    then = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["a"], name="mm")],
        "then",
        [],
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 8])],
        [_external("w", "w.bin")],
    )
    other = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["b"], name="relu")],
        "else",
        [],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 8])],
    )
    graph = helper.make_graph(
        [helper.make_node("If", ["cond"], ["y"], name="branch", then_branch=then, else_branch=other)],
        "if",
        [
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("weights", ["missing", "next-to-model"])
@pytest.mark.parametrize("build", [external_constant_model, external_subgraph_model], ids=["constant", "subgraph"])
def test_external_tensors_beyond_initializers_are_never_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, build, weights: str
) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    path = folder / "m.onnx"
    onnx.save(build(), path)
    if weights == "next-to-model":
        with open(folder / "w.bin", "wb") as handle:
            handle.truncate(8 * 8 * 4)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # the result must not depend on the working directory
    analysis = analyze(path)
    assert [n.op_type for n in analysis.nodes]


# ------------------------------------------------------------------------------------------ dims binding


def test_bound_transformer_has_static_shapes_everywhere() -> None:
    analysis = analyze(TRANSFORMER, dims={"batch": 2, "seq": 16})
    assert not [n.id for n in analysis.nodes if n.state == NodeState.UNKNOWN_SHAPE]
    assert analysis.totals.states[NodeState.UNKNOWN_SHAPE] == 0
    for node in analysis.nodes:
        for shape in node.output_shapes:
            assert shape is not None and None not in shape, f"{node.id}: output shape {shape}"
    assert dict(analysis.model.dims) == {"batch": 2, "seq": 16}
    assert not analysis.unsupported


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (CNN, {"batch"}),
        (TRANSFORMER, {"batch", "seq"}),
        (LSTM, {"batch", "seq"}),
    ],
)
def test_symbolic_dims_of_samples(path: Path, expected: set[str]) -> None:
    assert set(symbolic_dims(onnx.load(str(path), load_external_data=False))) == expected


def test_binding_an_absent_name_warns_naming_it() -> None:
    analysis = analyze(CNN, dims={"batch": 1, "foo": 3})
    assert any("foo" in w for w in analysis.warnings), analysis.warnings
    assert dict(analysis.model.dims)["batch"] == 1


def test_unnamed_dynamic_dims_are_reported_and_bound_as_input_axis(tmp_path: Path) -> None:
    model = relu_model(shape=[None, 8])
    dim = model.graph.input[0].type.tensor_type.shape.dim[0]
    assert not dim.HasField("dim_value") and not dim.dim_param  # truly unnamed
    assert symbolic_dims(model) == {"x:0": ["input 'x' axis 0"]}

    with pytest.raises(DimsError) as excinfo:
        analyze(model)
    assert "x:0" in str(excinfo.value)
    assert "--dim x:0=" in str(excinfo.value)

    analysis = analyze(model, dims={"x:0": 3})
    (node,) = analysis.nodes
    assert node.output_shapes == ([3, 8],)
    assert node.flops == 24


def test_unbound_symbols_are_all_listed() -> None:
    with pytest.raises(DimsError) as excinfo:
        analyze(TRANSFORMER, dims={})
    message = str(excinfo.value)
    assert "batch" in message and "seq" in message
    assert "--dim batch=" in message and "--dim seq=" in message
    assert "\n" not in message


def test_partially_bound_lists_only_the_rest() -> None:
    with pytest.raises(DimsError) as excinfo:
        analyze(TRANSFORMER, dims={"batch": 1})
    message = str(excinfo.value)
    assert "seq" in message
    assert "--dim batch=" not in message


@pytest.mark.parametrize("value", ["x", "abc", "-1", "1.5", "", -1, 1.5, True, None])
def test_api_rejects_negative_or_non_integer_dims(value: object) -> None:
    with pytest.raises(DimsError) as excinfo:
        analyze(CNN, dims={"batch": value})
    assert "batch" in str(excinfo.value)


@pytest.mark.parametrize("value", [2**63, str(2**64)])
def test_api_rejects_dims_beyond_int64(value: object) -> None:
    with pytest.raises(DimsError, match="batch"):
        analyze(CNN, dims={"batch": value})


@pytest.mark.parametrize("value", [1, "3", "+4"])
def test_api_accepts_positive_integer_dims(value: object) -> None:
    analysis = analyze(CNN, dims={"batch": value})
    assert dict(analysis.model.dims) == {"batch": int(value)}


@pytest.mark.parametrize("item", ["batch", "=3", "batch=", "batch=abc", "batch=-1", "batch=1.5"])
def test_parse_dim_bindings_rejects(item: str) -> None:
    with pytest.raises(DimsError) as excinfo:
        parse_dim_bindings([item])
    assert item.split("=")[0] in str(excinfo.value) or "NAME=VALUE" in str(excinfo.value)


def test_parse_dim_bindings_accepts() -> None:
    assert parse_dim_bindings(["batch=1", " seq = 128 "]) == {"batch": 1, "seq": 128}


def test_a_model_proto_is_not_mutated_by_binding() -> None:
    model = onnx.load(str(CNN), load_external_data=False)
    before = model.SerializeToString()
    analyze(model, dims={"batch": 4})
    assert model.SerializeToString() == before


def test_batch_scales_costs_linearly() -> None:
    one = analyze(CNN, dims={"batch": 1}).totals
    four = analyze(CNN, dims={"batch": 4}).totals
    assert four.macs == 4 * one.macs  # FLOPs need not be exactly linear (per-channel terms are batch-free)
    assert four.params == one.params  # weights do not depend on the batch


# --------------------------------------------------------------------------------------------- opset floor


def test_opset_below_the_floor_is_rejected_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "old.onnx"
    onnx.save(relu_model(opset=6), path)
    with pytest.raises(ModelError) as excinfo:
        load_model(path)
    message = str(excinfo.value)
    assert "old.onnx" in message and "opset 6" in message


def test_opset_at_the_floor_loads() -> None:
    loaded = load_model(relu_model(opset=7))
    assert loaded.opset == 7


# ------------------------------------------------------------------------------------ model-local functions

FUNCTION_MODEL = """
<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
agraph (float[2, 8] x, float[2, 8] b) => (float[2, 8] y) {
    y = local.AddRelu(x, b)
}
<domain: "local", opset_import: ["" : 17]>
AddRelu (a, c) => (out) {
    s = Add(a, c)
    out = Relu(s)
}
"""


def _assert_function_inlined(nodes: list[dict]) -> None:
    states = {n["op_type"]: n["state"] for n in nodes}
    assert states == {"Add": NodeState.COSTED, "Relu": NodeState.COSTED}, states
    assert {n["op_type"]: n["flops"] for n in nodes} == {"Add": 16, "Relu": 16}


def test_model_local_function_is_inlined_and_costed() -> None:
    import onnx.inliner  # noqa: F401  (see the subprocess test below: the loader does not import it itself)

    analysis = analyze(parse_model(FUNCTION_MODEL))
    _assert_function_inlined([{"op_type": n.op_type, "state": n.state, "flops": n.flops} for n in analysis.nodes])
    assert not analysis.unsupported
    assert not analysis.warnings


def test_model_local_function_is_inlined_in_a_fresh_process(tmp_path: Path) -> None:
    path = tmp_path / "func.onnx"
    onnx.save(parse_model(FUNCTION_MODEL), path)
    script = (
        "import json, sys\n"
        "from onnxroof.analysis.analyze import analyze\n"
        "a = analyze(sys.argv[1])\n"
        "print(json.dumps([{'op_type': n.op_type, 'state': n.state, 'flops': n.flops} for n in a.nodes]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    _assert_function_inlined(json.loads(done.stdout))


# ------------------------------------------------------------------------------------------- control flow

IF_MODEL = """
<ir_version: 8, opset_import: ["" : 17]>
agraph (bool cond, float[2, 8] x) => (float[2, 8] y) {
    y = If(cond) <then_branch = g1 () => (float[2, 8] a) { a = Relu(x) },
                  else_branch = g2 () => (float[2, 8] b) { b = Neg(x) }>
}
"""

LOOP_MODEL = """
<ir_version: 8, opset_import: ["" : 17]>
agraph (int64 n, bool c, float[2, 8] x) => (float[2, 8] y) {
    y = Loop(n, c, x) <body = body (int64 i, bool cin, float[2, 8] acc) => (bool cout, float[2, 8] accout) {
        cout = Identity(cin)
        accout = Relu(acc)
    }>
}
"""


@pytest.mark.parametrize(("text", "op_type"), [(IF_MODEL, "If"), (LOOP_MODEL, "Loop")])
def test_control_flow_node_is_listed_not_crashing(text: str, op_type: str) -> None:
    analysis = analyze(parse_model(text))
    (node,) = [n for n in analysis.nodes if n.op_type == op_type]
    listed = any(node.id in ids for ids in analysis.unsupported.values())
    assert listed or node.state == NodeState.COSTED, (node.state, dict(analysis.unsupported))
    assert node.id in analysis.model.subgraph_nodes


# -------------------------------------------------------------------------------- error classes and text


def test_errors_are_onnxroof_errors_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "notes.onnx"
    path.write_text("hello\nthis is not an ONNX model\n")
    with pytest.raises(OnnxroofError) as excinfo:
        load_model(path)
    assert isinstance(excinfo.value, ModelError)
    assert "notes.onnx" in str(excinfo.value)
    assert "\n" not in str(excinfo.value)


# ------------------------------------------------------------------------------------ property: MatMul MACs


def transformer_matmul_macs(batch: int, seq: int) -> int:
    projections = 4 * batch * seq * HIDDEN * HIDDEN  # Q, K, V, output
    scores = batch * HEADS * seq * seq * HEAD_DIM  # Q · Kᵀ
    context = batch * HEADS * seq * seq * HEAD_DIM  # softmax · V
    ffn = 2 * batch * seq * HIDDEN * FFN  # up and down projections
    return LAYERS * (projections + scores + context + ffn)


def test_transformer_matmul_macs_at_batch_2_seq_16() -> None:
    analysis = analyze(TRANSFORMER, dims={"batch": 2, "seq": 16})
    assert sum(n.macs for n in analysis.nodes if n.op_type == "MatMul") == transformer_matmul_macs(2, 16) == 3_276_800


@settings(max_examples=8, deadline=None)
@given(batch=st.integers(min_value=1, max_value=16), seq=st.integers(min_value=1, max_value=128))
def test_transformer_matmul_macs_follow_the_architecture(batch: int, seq: int) -> None:
    analysis = analyze(TRANSFORMER, dims={"batch": batch, "seq": seq})
    matmuls = [n for n in analysis.nodes if n.op_type == "MatMul"]
    assert len(matmuls) == LAYERS * 8  # 4 attention projections, 2 attention products, 2 FFN
    assert all(n.state == NodeState.COSTED for n in matmuls)
    assert sum(n.macs for n in matmuls) == transformer_matmul_macs(batch, seq)
