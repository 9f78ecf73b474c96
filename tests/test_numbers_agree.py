"""One name, one meaning (issue 24): "Bytes moved" is the fused figure wherever it is shown (table, HTML card,
Netron, diff), the unfused and ideal figures are labelled as such, the JSON's ``totals.bytes`` is the unfused
count everywhere it is read (its CSV, its diff row), and the weights are named twice: what the graph reads
(``weight_bytes``) and what the file stores (``weight_bytes_stored``)."""

from __future__ import annotations

import csv
import io
import json
import re
from html import unescape
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_cli import CNN, invoke

from onnxroof.analysis.analyze import analyze
from onnxroof.analysis.document import to_dict
from onnxroof.analysis.whatif import WhatIf
from onnxroof.core.units import si
from onnxroof.gate.diff import diff_documents
from onnxroof.report.data import render_csv
from onnxroof.report.diff_view import render_diff_console, render_diff_json
from onnxroof.report.graph import netron_attachment
from onnxroof.report.html import render_html


@pytest.fixture(scope="module")
def cnn():
    return analyze(CNN, "xavier", {"batch": 1})


def _bytes(rows) -> float:
    return sum(r["bytes_read"] + r["bytes_written"] for r in rows)


def test_the_three_byte_totals_are_what_their_rows_add_up_to(cnn) -> None:
    doc = to_dict(cnn)
    t = doc["totals"]
    costed = [n for n in doc["nodes"] if n["state"] == "costed"]
    assert t["bytes"] == t["unfused"]["bytes"] == _bytes(costed) == t["bytes_read"] + t["bytes_written"]
    assert t["fused"]["bytes"] == _bytes(doc["kernels"])
    assert t["ideal"]["bytes"] == sum(k["ideal_bytes"] for k in doc["kernels"])
    assert t["fused"]["bytes"] < t["unfused"]["bytes"]  # the labels separate two different figures (1.06 vs 2.63 MB)


def test_the_csv_rows_add_up_to_the_json_bytes(cnn) -> None:
    rows = [r for r in csv.DictReader(io.StringIO(render_csv(cnn))) if r["state"] == "costed"]
    assert sum(float(r["bytes_read"]) + float(r["bytes_written"]) for r in rows) == cnn.totals.bytes


def test_the_table_labels_fused_unfused_and_ideal(cnn) -> None:
    result = invoke("report", CNN, "-d", "batch=1", "-p", "xavier")
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    t = cnn.totals
    assert f"Bytes moved (fused) {si(t.fused.bytes, 'B')}" in text
    assert f"Bytes (unfused) {si(t.unfused.bytes, 'B')}" in text
    assert f"Bytes (ideal) {si(t.ideal.bytes, 'B')}" in text
    assert f"Weights read {si(t.weight_bytes, 'B')}" in text


def test_the_html_card_shows_the_fused_figure_labelled(cnn) -> None:
    page = render_html(cnn)
    card = re.search(
        r'<div class="k-label">Bytes moved \(fused\)</div>\s*<div class="k-value">(.*?)</div>\s*'
        r'<div class="k-sub">(.*?)</div>',
        page,
    )
    assert card is not None
    t = cnn.totals
    assert unescape(card[1]) == si(t.fused.bytes, "B")
    assert unescape(card[2]) == f"unfused {si(t.unfused.bytes, 'B')} · ideal {si(t.ideal.bytes, 'B')}"
    assert ">Bytes moved<" not in page


def test_netron_names_the_fused_figure(cnn) -> None:
    metrics = {m["name"]: m["value"] for m in netron_attachment(cnn)["metrics"] if m["kind"] == "model"}
    assert metrics["bytes moved (fused)"] == cnn.totals.fused.bytes
    assert metrics["bytes (unfused)"] == cnn.totals.unfused.bytes


def test_diff_rows_say_which_bytes(cnn) -> None:
    bigger = to_dict(analyze(CNN, "xavier", {"batch": 2}))
    diff = diff_documents(to_dict(cnn), bigger, "old", "new")
    data = json.loads(render_diff_json(diff))["totals"]
    assert data["bytes"]["old"] == cnn.totals.unfused.bytes
    assert data["fused.bytes"]["old"] == cnn.totals.fused.bytes
    assert data["fused.bytes"]["new"] == bigger["totals"]["fused"]["bytes"]
    from rich.console import Console

    out = io.StringIO()
    render_diff_console(diff, Console(file=out, width=200, color_system=None))
    lines = {line.split("  ")[1].strip() for line in out.getvalue().splitlines() if line.startswith("  bytes")}
    assert lines == {"bytes (unfused)", "bytes moved (fused)"}


def test_diff_of_a_document_without_fused_totals_skips_that_row(cnn) -> None:
    old = to_dict(cnn)
    del old["totals"]["fused"]  # a file from before the totals had bounds
    names = [d.name for d in diff_documents(old, to_dict(cnn), "old", "new").totals]
    assert "bytes" in names and "fused.bytes" not in names


# ---------------------------------------------------------------------------------------- weight bytes


def _weights_model(path: Path) -> Path:
    """x[2,16] · W[16,8] (fp32, read by the MatMul) beside an initializer U[10] (fp32) and a Constant c[4]
    (int64) that nothing reads as a weight: stored = 16·8·4 + 10·4 + 4·8 = 584 B, read = 512 B."""
    w = numpy_helper.from_array(np.ones((16, 8), np.float32), "W")
    u = numpy_helper.from_array(np.ones(10, np.float32), "U")
    const = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.arange(4, dtype=np.int64)))
    graph = helper.make_graph(
        [const, helper.make_node("MatMul", ["x", "W"], ["y"])],
        "weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8]), helper.make_tensor_value_info("c", 7, [4])],
        [w, u],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_weight_bytes_read_and_stored(tmp_path: Path) -> None:
    path = _weights_model(tmp_path / "w.onnx")
    t = analyze(path, "xavier").totals
    assert (t.weight_bytes, t.weight_bytes_stored) == (16 * 8 * 4, 16 * 8 * 4 + 10 * 4 + 4 * 8)
    half = analyze(path, "xavier", whatif=WhatIf(precision="fp16")).totals
    assert (half.weight_bytes, half.weight_bytes_stored) == (16 * 8 * 2, 584)  # a what-if restates reads only
    doc = json.loads(invoke("report", path, "-p", "xavier", "-f", "json").stdout)["totals"]
    assert (doc["weight_bytes"], doc["weight_bytes_stored"]) == (512, 584)


def test_json_schema_documents_both_weight_fields() -> None:
    schema = (Path(__file__).resolve().parents[1] / "docs" / "json-schema.md").read_text(encoding="utf-8")
    for field in ("`totals.weight_bytes`", "`totals.weight_bytes_stored`", "`totals.bytes`"):
        assert f"| {field} |" in schema, field
