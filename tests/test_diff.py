"""Regressions: kernels matched by member names and op types (not ids), totals and op-type deltas, baselines."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import onnx
import pytest
from onnx import helper
from rich.console import Console

from onnxroof.analysis.analyze import analyze
from onnxroof.analysis.document import to_dict
from onnxroof.gate.diff import BaselineError, diff_documents, load_baseline, load_document, pick_baseline
from onnxroof.report.diff_view import format_value, render_diff_console, render_diff_json

ROOT = Path(__file__).resolve().parents[1]
CNN = ROOT / "samples" / "tiny_cnn.onnx"
DIMS = {"batch": 1}


def doc(model, platform: str = "xavier", fusion: str | None = "none") -> dict:
    """The analysis document; fusion profile ``none`` (one node per kernel) unless told, so kernels are exact."""
    return to_dict(analyze(model, platform=platform, dims=DIMS, fusion=fusion))


@pytest.fixture(scope="module")
def base() -> dict:
    return doc(CNN)


def with_node_in_front(model: onnx.ModelProto) -> onnx.ModelProto:
    """An Identity on the input, placed first: every node id after it shifts by one index."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    first_input = graph.input[0].name
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name == first_input:
                node.input[i] = "image_copy"
    graph.node.insert(0, helper.make_node("Relu", [first_input], ["image_copy"], name="/pre/Relu"))
    return model


def without_node(model: onnx.ModelProto, name: str) -> onnx.ModelProto:
    """``model`` with the single-input node ``name`` bypassed."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    node = next(n for n in graph.node if n.name == name)
    for other in graph.node:
        for i, tensor in enumerate(other.input):
            if tensor == node.output[0]:
                other.input[i] = node.input[0]
    graph.node.remove(node)
    return model


def test_identical_models_have_no_changes(base) -> None:
    result = diff_documents(base, base, "a", "b")
    assert result.latency.change == 0 and result.latency.relative == 0
    assert not any(d.changed for d in result.totals)
    assert (result.kernels_added, result.kernels_removed, result.kernels_changed) == ((), (), ())
    assert result.op_types == () and result.op_type_counts == ()


def test_a_node_inserted_in_front_is_one_added_kernel(base) -> None:
    new = doc(with_node_in_front(onnx.load(CNN)))
    assert new["kernels"][1]["node_ids"] != base["kernels"][0]["node_ids"]  # ids shifted
    result = diff_documents(base, new, "old", "new")
    assert [k.label for k in result.kernels_added] == ["Relu /pre/Relu"]
    assert result.kernels_removed == () and result.kernels_changed == ()
    latency = result.latency
    assert latency.change == pytest.approx(result.kernels_added[0].new.latency_s)
    assert {d.name: (d.old, d.new) for d in result.op_type_counts} == {"Relu": (6, 7)}
    nodes = next(d for d in result.totals if d.name == "nodes")
    assert (nodes.old, nodes.new) == (30, 31)


def test_fused_kernels_match_by_their_members() -> None:
    """With the platform's fusion profile, kernels group several nodes; the match uses all their members."""
    old, new = doc(CNN, fusion=None), doc(with_node_in_front(onnx.load(CNN)), fusion=None)
    result = diff_documents(old, new, "old", "new")
    assert result.kernels_removed == () and result.kernels_changed == ()
    assert [k.label for k in result.kernels_added] == ["Relu /pre/Relu"]
    assert result.latency.change == pytest.approx(result.kernels_added[0].new.latency_s)


def test_a_removed_node_is_a_removed_kernel(base) -> None:
    new = doc(without_node(onnx.load(CNN), "/pw/Relu"))
    result = diff_documents(base, new, "old", "new")
    assert [k.label for k in result.kernels_removed] == ["Relu /pw/Relu"]
    assert result.kernels_added == () and result.latency.change < 0


def test_a_changed_shape_is_a_changed_kernel(base) -> None:
    bigger = to_dict(analyze(CNN, platform="xavier", dims={"batch": 4}, fusion="none"))
    result = diff_documents(base, bigger, "b1", "b4")
    assert result.kernels_added == () and result.kernels_removed == ()
    assert len(result.kernels_changed) == len(base["kernels"])
    top = result.kernels_changed[0]
    assert top.old.latency_s < top.new.latency_s
    assert abs(top.latency_change) == max(abs(k.latency_change) for k in result.kernels_changed)
    flops = next(d for d in result.totals if d.name == "flops")
    assert flops.relative == pytest.approx(3.0, rel=1e-3)  # 4× the batch


def test_unnamed_nodes_pair_up_in_order() -> None:
    def chain(count: int) -> onnx.ModelProto:
        nodes = [helper.make_node("Relu", [f"t{i}"], [f"t{i + 1}"]) for i in range(count)]
        graph = helper.make_graph(
            nodes,
            "g",
            [helper.make_tensor_value_info("t0", onnx.TensorProto.FLOAT, [1, 64])],
            [helper.make_tensor_value_info(f"t{count}", onnx.TensorProto.FLOAT, [1, 64])],
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    result = diff_documents(doc(chain(3)), doc(chain(5)), "3", "5")
    assert len(result.kernels_added) == 2 and result.kernels_removed == () and result.kernels_changed == ()
    assert result.kernels_added[0].label == "Relu"


def test_different_platforms_do_not_compare(base) -> None:
    with pytest.raises(BaselineError, match=r"platform 'xavier'.*'orin-nano'"):
        diff_documents(base, doc(CNN, "orin-nano"), "old", "new")


def test_renderers(base) -> None:
    new = doc(with_node_in_front(onnx.load(CNN)))
    result = diff_documents(base, new, "old.onnx", "new.onnx")
    data = json.loads(render_diff_json(result, {"fail_if_slower": "1%", "passed": False}))
    assert data["latency"]["change"] == pytest.approx(result.latency.change)
    assert [k["members"] for k in data["kernels"]["added"]] == [[{"op_type": "Relu", "name": "/pre/Relu"}]]
    assert data["op_types"]["Relu"]["count"] == {"old": 6, "new": 7, "change": 1, "relative": pytest.approx(1 / 6)}
    assert data["gate"]["passed"] is False
    buffer = StringIO()
    render_diff_console(result, Console(file=buffer, width=140, color_system=None))
    text = buffer.getvalue()
    assert "Predicted latency" in text and "1 added, 0 removed, 0 changed" in text and "Relu /pre/Relu" in text


# --------------------------------------------------------------------------------------------- baselines


def test_baseline_from_report_and_check_json(tmp_path: Path, base) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps(base), encoding="utf-8")
    (entry,) = load_baseline(report)
    assert entry["platform"] == "xavier" and entry["totals"]["latency_s"] == base["totals"]["latency_s"]
    assert entry["path"] == base["model"]["path"]
    check = {
        "models": [
            {"path": "a/m1.onnx", "platform": {"name": "xavier"}, "totals": {"latency_s": 1.0}},
            {"path": "a/bad.onnx", "platform": None, "totals": None, "status": "error"},
            {"path": "a/m2.onnx", "platform": {"name": "xavier"}, "totals": {"latency_s": 2.0}},
        ]
    }
    path = tmp_path / "check.json"
    path.write_text(json.dumps(check), encoding="utf-8")
    entries = load_baseline(path)
    assert [e["path"] for e in entries] == ["a/m1.onnx", "a/m2.onnx"]
    assert pick_baseline(entries, "elsewhere/m2.onnx", 2)["totals"]["latency_s"] == 2.0  # same file name
    assert pick_baseline(entries, "m3.onnx", 2) is None
    assert pick_baseline(load_baseline(report), "renamed.onnx", 1) is not None  # one model, one baseline


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not an onnxroof JSON output"),
        ('{"totals": {}}', "totals.latency_s: missing or not a number"),
        ('{"models": [{"status": "error", "totals": null}]}', "no model in it was analyzed"),
    ],
)
def test_bad_baselines(tmp_path: Path, content: str, says: str) -> None:
    path = tmp_path / "b.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(BaselineError) as caught:
        load_baseline(path)
    assert str(caught.value).startswith(str(path)) and says in str(caught.value)
    with pytest.raises(BaselineError, match="cannot read"):
        load_document(tmp_path / "missing.json")


def test_energy_is_compared_where_both_reports_have_it() -> None:
    small = to_dict(analyze(CNN, platform="xavier", dims={"batch": 1}, fusion="none"))
    bigger = to_dict(analyze(CNN, platform="xavier", dims={"batch": 4}, fusion="none"))
    energy = next(d for d in diff_documents(small, bigger, "a", "b").totals if d.name == "energy_j")
    assert energy.old == small["totals"]["energy_j"] and energy.new == bigger["totals"]["energy_j"]
    assert energy.change > 0 and format_value(energy.new, "energy").endswith("J")
    unpriced = {**small, "totals": {**small["totals"], "energy_j": None}}
    assert "energy_j" not in {d.name for d in diff_documents(unpriced, bigger, "a", "b").totals}
