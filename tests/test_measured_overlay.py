"""``onnxroof report --profile``: a profile's measured times beside the prediction in the HTML and JSON reports,
shared fairly among kernels onnxruntime ran as one, and every bad profile file refused with one line, exit 2
and no output file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from onnxroof.analysis.analyze import analyze
from onnxroof.cli.commands import app
from onnxroof.core.errors import OnnxroofError
from onnxroof.measure.overlay import check_profile, measured_overlay

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
CNN = SAMPLES / "tiny_cnn.onnx"
REPORT = ["report", str(CNN), "-p", "xeon-8380", "-d", "batch=1"]


@pytest.fixture(scope="module")
def profile_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real profile of the tiny CNN (onnxruntime, one thread, short runs)."""
    path = tmp_path_factory.mktemp("profile") / "prof.json"
    args = ["profile", str(CNN), "-p", "xeon-8380", "-d", "batch=1", "--threads", "1", "--runs", "3"]
    result = CliRunner().invoke(app, [*args, "--seconds", "0.05", "-o", str(path)])
    assert result.exit_code == 0, result.output
    return path


@pytest.fixture(scope="module")
def cnn():
    return analyze(CNN, "xeon-8380", {"batch": 1})


def _document(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _embedded(html: str) -> dict:
    block = re.search(r'<script type="application/json" id="onnxroof-analysis">(.*?)</script>', html, flags=re.S)
    assert block is not None
    return json.loads(block.group(1))


def _synthetic(analysis, factor: float = 1.5, **changes) -> dict:
    """A profile document of ``analysis`` in which every kernel ran ``factor`` times its predicted time."""
    document = {
        "kind": "onnxroof-profile",
        "schema": 1,
        "model": str(analysis.model.path),
        "platform": {"name": analysis.platform.name},
        "fusion_profile": analysis.fusion_profile,
        "dims": dict(analysis.model.dims),
        "threads": 1,
        "onnxruntime": "test",
        "end_to_end": {"measured_s": factor * analysis.totals.latency_s},
        "rows": [
            {
                "kernels": [k.id],
                "op_types": list(k.op_types),
                "ort_nodes": [f"ort_{k.id}"],
                "ort_op_types": [k.op_types[0]],
                "measured_s": factor * k.latency_s,
            }
            for k in analysis.kernels
        ],
        "unmeasured_kernels": [],
    }
    document.update(changes)
    return document


# ------------------------------------------------------------------------------------------------- HTML


def test_html_report_shows_the_measured_overlay(tmp_path: Path, profile_file: Path) -> None:
    out = tmp_path / "report.html"
    result = CliRunner().invoke(app, [*REPORT, "--profile", str(profile_file), "-o", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")
    data = _embedded(html)
    measured = data["measured"]
    assert measured["kernels"] and measured["fusion_profile"] == data["fusion"]["profile"]
    flops = {k["id"]: k["flops"] for k in data["kernels"]}
    latency = {k["id"]: k["latency_s"] for k in data["kernels"]}
    for item in measured["kernels"]:
        assert item["measured_s"] > 0 and item["predicted_s"] == pytest.approx(latency[item["id"]])
        assert item["achieved_flops"] == pytest.approx(flops[item["id"]] / item["measured_s"])
        assert item["ratio"] == pytest.approx(item["measured_s"] / item["predicted_s"])
    for text in ('data-key="measured"', 'data-key="ratio"', 'id="measured-note"', "prof.json", "Measured run"):
        assert text in html, text
    assert "figures are predictions from datasheet peaks" not in html


def test_html_report_without_a_profile_has_no_overlay(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = CliRunner().invoke(app, [*REPORT, "-o", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")
    assert "measured" not in _embedded(html)
    assert 'data-key="measured"' not in html and 'id="measured-note"' not in html


def test_profile_command_writes_the_html_overlay_too(tmp_path: Path) -> None:
    out = tmp_path / "profiled.html"
    args = ["profile", str(CNN), "-p", "xeon-8380", "-d", "batch=1", "--threads", "1", "--runs", "3"]
    result = CliRunner().invoke(app, [*args, "--seconds", "0.05", "--html", str(out)])
    assert result.exit_code == 0, result.output
    assert "Predicted" in result.output  # the table still goes to stdout
    data = _embedded(out.read_text(encoding="utf-8"))
    assert data["measured"]["kernels"] and data["measured"]["source"] == "onnxroof profile"


# ------------------------------------------------------------------------------------------------- JSON


def test_json_report_carries_the_measured_section(tmp_path: Path, profile_file: Path) -> None:
    out = tmp_path / "report.json"
    result = CliRunner().invoke(app, [*REPORT, "--profile", str(profile_file), "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = _document(out)
    profile = _document(profile_file)
    measured = data["measured"]
    assert {"source", "measured_s", "measured_kernels_s", "predicted_kernels_s", "ratio", "kernels"} <= set(measured)
    ids = {k["id"] for k in data["kernels"]}
    rows = [row for row in profile["rows"] if set(row["kernels"]) <= ids]
    assert measured["measured_kernels_s"] == pytest.approx(sum(row["measured_s"] for row in rows))
    assert set(measured["unmeasured_kernels"]) | {k["id"] for k in measured["kernels"]} == ids
    assert measured["ignored_kernels"] == [] and measured["warnings"] == []


def test_table_and_csv_ignore_a_valid_profile_but_still_check_it(tmp_path: Path, profile_file: Path) -> None:
    result = CliRunner().invoke(app, [*REPORT, "--profile", str(profile_file)])
    assert result.exit_code == 0, result.output
    bad = tmp_path / "bad.json"
    bad.write_text("{", encoding="utf-8")
    result = CliRunner().invoke(app, [*REPORT, "--profile", str(bad), "-f", "csv"])
    assert result.exit_code == 2


# ------------------------------------------------------------------------------------------- matching


def test_a_row_of_several_kernels_shares_its_time_by_predicted_time(cnn) -> None:
    first, second = cnn.kernels[0], cnn.kernels[1]
    document = _synthetic(cnn)
    document["rows"] = [
        {
            "kernels": [first.id, second.id],
            "op_types": [*first.op_types, *second.op_types],
            "ort_nodes": ["fused"],
            "measured_s": 3e-5,
        }
    ]
    overlay = measured_overlay(document, cnn, "prof.json")
    by_id = overlay.by_id()
    a, b = by_id[first.id], by_id[second.id]
    assert a.measured_s + b.measured_s == pytest.approx(3e-5)
    assert a.ratio == pytest.approx(b.ratio)
    assert a.measured_s / b.measured_s == pytest.approx(first.latency_s / second.latency_s)
    assert a.measured_with == (second.id,) and b.measured_with == (first.id,)
    assert set(overlay.unmeasured) == {k.id for k in cnn.kernels} - {first.id, second.id}


def test_every_kernel_measured_at_its_own_intensity(cnn) -> None:
    overlay = measured_overlay(_synthetic(cnn, 2.0), cnn, "prof.json")
    assert len(overlay.kernels) == len(cnn.kernels) and not overlay.unmeasured
    for kernel, item in zip(cnn.kernels, overlay.kernels, strict=True):
        assert item.id == kernel.id and item.intensity == kernel.intensity
        assert item.ratio == pytest.approx(2.0)
        if kernel.flops > 0:
            assert item.achieved_flops == pytest.approx(kernel.flops / kernel.latency_s / 2.0)
    assert overlay.ratio == pytest.approx(2.0)
    json.dumps(overlay.to_dict(), allow_nan=False)


def test_kernels_not_in_the_analysis_are_ignored_with_a_count(tmp_path: Path, cnn) -> None:
    document = _synthetic(cnn)
    document["rows"].append({"kernels": ["k900"], "op_types": ["Relu"], "ort_nodes": ["x"], "measured_s": 1e-6})
    document["unmeasured_kernels"] = [{"name": "k901", "op_type": "Relu", "seconds": 0.0, "reason": "folded"}]
    path = tmp_path / "prof.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    out = tmp_path / "report.json"
    result = CliRunner().invoke(app, [*REPORT, "--profile", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "2 kernel(s) of the profile are not in this analysis and are ignored" in " ".join(result.output.split())
    assert _document(out)["measured"]["ignored_kernels"] == ["k900", "k901"]


# ------------------------------------------------------------------------------------------ bad files


def _mangled(analysis, case: str):
    """(file content, the field the error must name) for one kind of bad profile."""
    good = _synthetic(analysis)
    if case == "not json":
        return "this is not JSON", "not a profile JSON"
    if case == "a list":
        return "[1, 2, 3]", "not a profile JSON"
    if case == "a report":
        return json.dumps({"schema": 1, "kernels": [], "totals": {}}), "rows"
    if case == "other kind":
        return json.dumps({**good, "kind": "onnxroof-check"}), "kind"
    if case == "newer schema":
        return json.dumps({**good, "schema": 99}), "schema"
    if case == "no dims":
        return json.dumps({k: v for k, v in good.items() if k != "dims"}), "dims"
    if case == "bad time":
        good["rows"][2]["measured_s"] = "fast"
        return json.dumps(good), "rows[2].measured_s"
    if case == "bad kernel ids":
        good["rows"][1]["kernels"] = [3]
        return json.dumps(good), "rows[1].kernels[0]"
    if case == "other model":
        return json.dumps({**good, "model": "models/resnet50.onnx"}), "model"
    if case == "other ops":
        good["rows"][0]["op_types"] = ["Softmax"]
        return json.dumps(good), "rows[0].op_types"
    if case == "other kernels":
        for number, row in enumerate(good["rows"]):
            row["kernels"] = [f"k{1000 + number}"]
        return json.dumps(good), "rows"
    if case == "other dims":
        return json.dumps({**good, "dims": {"batch": 8}}), "dims"
    if case == "other fusion":
        return json.dumps({**good, "fusion_profile": "tensorrt"}), "fusion_profile"
    raise AssertionError(case)


BAD = [
    "not json",
    "a list",
    "a report",
    "other kind",
    "newer schema",
    "no dims",
    "bad time",
    "bad kernel ids",
    "other model",
    "other ops",
    "other kernels",
    "other dims",
    "other fusion",
]


@pytest.mark.parametrize("output_format", ["html", "json"])
@pytest.mark.parametrize("case", BAD)
def test_a_bad_profile_fails_with_one_line_and_writes_nothing(tmp_path: Path, cnn, case: str, output_format: str):
    content, field = _mangled(cnn, case)
    path = tmp_path / "prof.json"
    path.write_text(content, encoding="utf-8")
    out = tmp_path / f"report.{output_format}"
    result = CliRunner().invoke(app, [*REPORT, "--profile", str(path), "-o", str(out)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert "Traceback" not in result.output
    assert lines[0].startswith("error: ") and str(path) in lines[0] and field in lines[0], lines[0]
    assert not out.exists()
    assert not list(tmp_path.glob(".report*"))  # no temporary file left behind either


def test_an_unreadable_profile(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    missing = tmp_path / "missing.json"
    result = CliRunner().invoke(app, [*REPORT, "--profile", str(missing), "-o", str(out)])
    assert result.exit_code == 2 and "cannot read the profile" in result.output and str(missing) in result.output
    assert not out.exists()


def test_check_profile_accepts_what_profile_writes(profile_file: Path) -> None:
    check_profile(_document(profile_file), "prof.json")
    with pytest.raises(OnnxroofError, match=r"prof.json: platform.name: missing"):
        check_profile({**_document(profile_file), "platform": {}}, "prof.json")
