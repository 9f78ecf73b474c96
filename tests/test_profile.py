"""``onnxroof profile``: onnxruntime's (fused) nodes map back to onnxroof's kernels, every measured node is
either matched or listed as unmatched, and the comparison, the Spearman correlation and the JSON hold up."""

from __future__ import annotations

import json
import math
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxroof.cli.commands import app
from onnxroof.measure.profile.profiler import (
    ProfileResult,
    Row,
    explain,
    map_optimized_nodes,
    profile,
    random_inputs,
    spearman,
)

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
FAST = {"profiled_runs": 5, "wall_budget_s": 0.1}


@pytest.fixture(scope="module")
def cnn() -> ProfileResult:
    return profile(SAMPLES / "tiny_cnn.onnx", platform="xeon-8380", dims={"batch": 1}, threads=1, **FAST)


@pytest.fixture(scope="module")
def transformer() -> ProfileResult:
    dims = {"batch": 1, "seq": 32}
    return profile(SAMPLES / "tiny_transformer.onnx", platform="xeon-8380", dims=dims, threads=1, **FAST)


def _ort_nodes(result: ProfileResult) -> set[str]:
    return {n for row in result.rows for n in row.ort_nodes} | {u.name for u in result.unmatched_ort}


@pytest.mark.parametrize("which", ["cnn", "transformer"])
def test_every_measured_node_maps_to_a_kernel_or_is_listed(which: str, request: pytest.FixtureRequest) -> None:
    result: ProfileResult = request.getfixturevalue(which)
    matched = [n for row in result.rows for n in row.ort_nodes]
    unmatched = [u.name for u in result.unmatched_ort]
    assert len(matched) == len(set(matched)), "an onnxruntime node in two rows"
    assert not set(matched) & set(unmatched)
    for item in result.unmatched_ort:
        assert item.reason
    kernels = [k for row in result.rows for k in row.kernels] + [u.name for u in result.unmeasured_kernels]
    assert len(kernels) == len(set(kernels)), "a kernel in two rows"
    assert result.measured_kernels_s > 0
    assert sum(row.measured_s for row in result.rows) > 0
    assert result.measured_s > 0 and result.predicted_s > 0
    for row in result.rows:
        assert row.measured_s > 0 and row.predicted_s > 0 and row.kernels and row.ort_nodes


def test_profiled_node_total_is_accounted_for(cnn: ProfileResult) -> None:
    in_rows = sum(row.measured_s for row in cnn.rows)
    listed = sum(u.seconds for u in cnn.unmatched_ort)
    assert in_rows + listed == pytest.approx(cnn.measured_kernels_s, rel=1e-9)


def test_cnn_fusions_map_to_their_kernels(cnn: ProfileResult) -> None:
    # onnxruntime runs Conv+BN(+Relu/+Add+Relu/+Clip) as one NCHWc Conv: every Conv kernel is matched
    conv_rows = [row for row in cnn.rows if "Conv" in row.op_types]
    assert len(conv_rows) == 8
    assert all(len(row.ort_nodes) == 1 for row in conv_rows)
    residual = [row for row in conv_rows if "Add" in row.op_types]
    assert residual, "the residual Add fused into a Conv's NCHWc node is found"
    assert {u.op_type for u in cnn.unmatched_ort} <= {"ReorderOutput", "ReorderInput", "Flatten"}
    assert not cnn.unmeasured_kernels


def test_transformer_fusions_map_to_their_kernels(transformer: ProfileResult) -> None:
    ort_types = {t for row in transformer.rows for t in row.ort_op_types}
    assert {"Gemm", "SkipLayerNormalization", "Gelu", "FusedMatMul", "Softmax"} <= ort_types
    for item in transformer.unmatched_ort:  # only reshapes and shape plumbing stay unmatched
        assert item.op_type in {"Reshape", "Shape", "Gather", "Unsqueeze", "Concat", "Slice", "Squeeze"}, item
    assert transformer.spearman > 0.3


def test_json_document(cnn: ProfileResult) -> None:
    doc = json.loads(json.dumps(cnn.to_dict(), allow_nan=False))
    assert doc["kind"] == "onnxroof-profile" and doc["schema"] == 1
    assert doc["end_to_end"]["measured_s"] > 0 and doc["end_to_end"]["predicted_s"] > 0
    assert set(doc["end_to_end"]["variants"]) == {"roofline", "roofline+cache", "roofline+cache+efficiency"}
    assert len(doc["rows"]) == len(cnn.rows)
    assert len(doc["roofline"]["points"]) == len(cnn.rows)
    assert doc["factors"]["profiler_overhead_per_event_s"] >= 0
    assert {"kernels", "ort_nodes", "predicted_s", "measured_s", "ratio", "achieved_flops", "explanation"} <= set(
        doc["rows"][0]
    )


def test_cli_profile_json_and_table(tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    args = ["profile", str(SAMPLES / "tiny_cnn.onnx"), "-p", "xeon-8380", "-d", "batch=1", "--runs", "3"]
    result = CliRunner().invoke(app, [*args, "--seconds", "0.05", "--threads", "1", "-o", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert doc["rows"] and doc["dims"] == {"batch": 1}
    table = CliRunner().invoke(app, [*args, "--seconds", "0.05", "--threads", "1"])
    assert table.exit_code == 0, table.output
    assert "Predicted" in table.output and "Measured" in table.output


def test_cli_profile_needs_bound_dims() -> None:
    result = CliRunner().invoke(app, ["profile", str(SAMPLES / "tiny_cnn.onnx"), "-p", "xeon-8380"])
    assert result.exit_code == 2
    assert "--dim" in result.output


# --- mapping without onnxruntime ----------------------------------------------------------------------


def _graph(nodes, inputs, outputs, inits=()):
    return helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        initializer=list(inits),
    )


def test_mapping_of_renamed_nchwc_outputs_and_absorbed_followers() -> None:
    w = helper.make_tensor("w", TensorProto.FLOAT, [1], [1.0])
    original = _graph(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
            helper.make_node("BatchNormalization", ["c", "w", "w", "w", "w"], ["b"], name="bn"),
            helper.make_node("Add", ["b", "x"], ["a"], name="add"),
            helper.make_node("Relu", ["a"], ["y"], name="relu"),
            helper.make_node("Identity", ["w"], ["unused"], name="folded"),
        ],
        ["x"],
        ["y"],
        [w],
    )
    optimized = _graph(
        [
            helper.make_node("ReorderInput", ["x"], ["r0"], name="ReorderInput", domain="com.microsoft.nchwc"),
            helper.make_node("Conv", ["r0", "w2", "r0"], ["r1"], name="b_nchwc", domain="com.microsoft.nchwc"),
            helper.make_node("ReorderOutput", ["r1"], ["y"], name="ReorderOutput", domain="com.microsoft.nchwc"),
        ],
        ["x"],
        ["y"],
    )
    mapping = map_optimized_nodes(original, optimized)
    by_name = {n.name: n for n in mapping.nodes}
    assert by_name["b_nchwc"].original == (0, 1, 2, 3)  # Conv, BN by name; Add, Relu absorbed
    assert by_name["ReorderInput"].original == () and by_name["ReorderOutput"].original == ()
    assert mapping.unclaimed == (4,)  # computed from constants: folded


def test_mapping_of_fusion_named_after_its_anchor() -> None:
    original = _graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["m"], name="/layer/MatMul"),
            helper.make_node("Add", ["m", "bias"], ["y"], name="/layer/Add"),
        ],
        ["x", "w", "bias"],
        ["y"],
    )
    optimized = _graph(
        [
            helper.make_node("Reshape", ["x", "s"], ["x2"], name="gemm_input_reshape"),
            helper.make_node("Gemm", ["x2", "w", "bias"], ["g"], name="/layer/MatMul/MatMulAddFusion"),
            helper.make_node("Reshape", ["g", "s2"], ["y"], name="gemm_output_reshape"),
        ],
        ["x", "w", "bias"],
        ["y"],
    )
    mapping = map_optimized_nodes(original, optimized)
    by_name = {n.name: n for n in mapping.nodes}
    assert by_name["/layer/MatMul/MatMulAddFusion"].original == (0, 1)
    assert by_name["gemm_input_reshape"].original == () and by_name["gemm_output_reshape"].original == ()


# --- helpers -----------------------------------------------------------------------------------------


def test_spearman() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert spearman([1, 1, 2, 3], [5, 5, 6, 7]) == pytest.approx(1.0)  # ties take their average rank
    assert math.isnan(spearman([1, 2], [2, 1]))
    assert math.isnan(spearman([1, 1, 1], [1, 2, 3]))
    with pytest.raises(ValueError):
        spearman([1, 2, 3], [1, 2])


def test_random_inputs_need_bound_dims() -> None:
    feeds = random_inputs([("ids", [1, 4], "int64"), ("x", [2, 3], "float32"), ("m", [2], "bool")])
    assert feeds["ids"].shape == (1, 4) and feeds["ids"].max() <= 1
    assert feeds["x"].dtype.name == "float32" and feeds["m"].dtype.name == "bool"
    from onnxroof.core.errors import OnnxroofError

    with pytest.raises(OnnxroofError, match="--dim"):
        random_inputs([("x", [None, 3], "float32")])


def _row(predicted: float, measured: float, bound: str = "memory", overhead: float = 0.0, **kw) -> Row:
    values = dict(
        kernels=("k0",),
        patterns=("single",),
        op_types=("Add",),
        ort_nodes=("n",),
        ort_op_types=("Add",),
        op_class="elementwise",
        flops=1e3,
        bytes=1e4,
        intensity=0.1,
        predicted_s=predicted,
        predicted_overhead_s=overhead,
        bound=bound,
        level="L1",
        efficiency=1.0,
        measured_s=measured,
    )
    values.update(kw)
    return Row(**values)


def test_explanations() -> None:
    platform = __import__("onnxroof").load_platform("xeon-8380")
    assert explain(_row(1e-5, 1.1e-5), platform) == ""
    small = explain(_row(1e-6, 4e-6, overhead=0.9e-6), platform)
    assert "dispatch overhead" in small and "4.0× slower" in small and "0.1 FLOP/B" in small
    slow_compute = explain(_row(1e-3, 3e-3, bound="compute", op_class="conv", flops=1e9), platform)
    assert "compute-bound" in slow_compute and "conv" in slow_compute
    fused = explain(_row(1e-3, 2e-4, kernels=("k0", "k1", "k2")), platform)
    assert "fused 3 onnxroof kernels" in fused
    cached = explain(_row(1e-3, 2e-4), platform)
    assert "faster" in cached and "cache" in cached


def test_optimized_graph_from_onnxruntime_is_a_model() -> None:
    # the mapping reads the optimized graph written by onnxruntime; it must parse as ONNX
    model = onnx.load(str(SAMPLES / "tiny_lstm.onnx"), load_external_data=False)
    mapping = map_optimized_nodes(model.graph, model.graph)
    for node in mapping.nodes:
        assert node.original or node.op_type == "Constant"


def test_report_and_profile_agree_on_a_measured_platform(tmp_path: Path) -> None:
    """On a calibrated platform, profile's predicted rows are the report's kernels (one prediction, not two),
    and those kernels apply the measured efficiency, cache levels and cold weights exactly as classify does."""
    from onnxroof.core.cost import Cost
    from onnxroof.measure.profile.profiler import cold_weight_share, kernel_figures
    from onnxroof.platform.lookup import load_platform
    from onnxroof.roofline.classify import classify

    host, report = tmp_path / "host.toml", tmp_path / "report.json"
    result = CliRunner().invoke(app, ["calibrate", "--quick", "-o", str(host)])
    assert result.exit_code == 0, result.output
    model = str(SAMPLES / "tiny_cnn.onnx")
    result = CliRunner().invoke(app, ["report", model, "-p", str(host), "-d", "batch=1", "-o", str(report)])
    assert result.exit_code == 0, result.output
    doc = json.loads(report.read_text(encoding="utf-8"))
    latency = {k["id"]: k["latency_s"] for k in doc["kernels"]}
    platform = load_platform(host)
    measured = profile(model, platform=platform, dims={"batch": 1}, threads=1, **FAST)
    assert measured.rows
    for row in measured.rows:
        assert row.predicted_s == pytest.approx(sum(latency[k] for k in row.kernels), rel=1e-12)
        assert row.efficiency == platform.efficiency.get(row.op_class, 1.0)
    assert measured.predicted_kernels_s == pytest.approx(doc["totals"]["latency_s"], rel=1e-12)
    assert measured.variants["roofline+cache+efficiency"] == pytest.approx(measured.predicted_s, rel=1e-12)

    analysis = measured.analysis
    cold = cold_weight_share(analysis, platform)
    derated = 0
    for kernel in analysis.kernels:
        figures = kernel_figures(kernel, analysis, cold)
        cost = Cost(kernel.flops, kernel.macs, kernel.bytes_read, kernel.bytes_written, kernel.params)
        launches = max(1, round(kernel.t_overhead_s / platform.launch_overhead_s))
        point = classify(
            cost,
            platform,
            kernel.precision,
            launches=launches,
            op_class=figures.op_class,
            cold_bytes=kernel.params * cold,
        )
        assert kernel.latency_s == pytest.approx(point.latency, rel=1e-12)
        assert (figures.level, figures.efficiency, figures.bound) == (point.level, point.efficiency, point.bound)
        derated += figures.efficiency < 1
    assert derated, "a calibrated platform derates some op class"
