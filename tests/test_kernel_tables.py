"""Kernel tables as data: ``report --format csv --level kernels`` and ``Analysis.to_dataframe(level="kernels")``
hold the kernels the runtime launches (their times sum to the prediction), and the row filters ``--op``,
``--exclude-op``, ``--name``, ``--top`` pick rows of the table and the CSV."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import write_platform
from onnx import TensorProto, helper, numpy_helper
from test_cli import _assert_one_error_line, invoke

import onnxroof
from onnxroof.analysis.select import RowFilter, TableLevel
from onnxroof.report.data import render_csv

ROOT = Path(__file__).resolve().parents[1]
CNN = ROOT / "samples" / "tiny_cnn.onnx"


def _mlp() -> onnx.ModelProto:
    """x[1, 256] → MatMul(w[256, 256]) → Relu → y."""
    w = numpy_helper.from_array(np.zeros((256, 256), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 256])],
        [w],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.fixture(scope="module")
def cnn() -> onnxroof.Analysis:
    return onnxroof.analyze(CNN, "xavier", dims={"batch": 1})


def test_kernel_csv_times_are_the_closed_form_roofline_and_sum_to_the_prediction(tmp_path: Path) -> None:
    # fp32 10 TFLOP/s, 100 GB/s, 1 µs a launch, no fusion: two kernels.
    # MatMul: F = 2·256·256 = 131,072; B = 4·(256 + 256·256 + 256) = 264,192 → t = B / W + 1 µs = 3.64192 µs
    # Relu:   B = 4·(256 + 256) = 2,048 → t = 2,048 / 100e9 + 1 µs = 1.02048 µs; total 4.6624 µs
    platform = write_platform(tmp_path / "flat.toml")
    model = tmp_path / "mlp.onnx"
    onnx.save(_mlp(), str(model))
    result = invoke("report", model, "-p", platform, "-f", "csv", "--level", "kernels")
    assert result.exit_code == 0, result.output
    rows = _rows(result.stdout)
    assert [json.loads(r["op_types"]) for r in rows] == [["MatMul"], ["Relu"]]
    latency = [float(r["latency_s"]) for r in rows]
    assert latency == pytest.approx([264_192 / 100e9 + 1e-6, 2_048 / 100e9 + 1e-6], rel=1e-12)
    assert sum(latency) == pytest.approx(4.6624e-6, rel=1e-12)


def test_kernel_csv_sums_to_the_total_where_the_node_csv_does_not(cnn: onnxroof.Analysis) -> None:
    kernels = _rows(render_csv(cnn, TableLevel.kernels))
    nodes = _rows(render_csv(cnn))
    assert len(kernels) == len(cnn.kernels) < len(nodes) == len(cnn.nodes)
    assert sum(float(r["latency_s"]) for r in kernels) == pytest.approx(cnn.totals.latency_s, rel=1e-12)
    # each unfused node is charged its own traffic and launch: the node sum overstates the fused prediction
    assert sum(float(r["latency_s"]) for r in nodes) > 1.5 * cnn.totals.latency_s
    assert list(kernels[0]) == [*(k if k != "patterns" else "pattern" for k in cnn.kernels[0].FIELDS)]


def test_kernel_dataframe_matches_the_csv(cnn: onnxroof.Analysis) -> None:
    frame = cnn.to_dataframe(level="kernels")
    assert len(frame) == len(cnn.kernels)
    assert frame["latency_s"].sum() == pytest.approx(cnn.totals.latency_s, rel=1e-12)
    assert list(frame["id"]) == [k.id for k in cnn.kernels]
    assert len(cnn.to_dataframe()) == len(cnn.to_dataframe(level=TableLevel.nodes)) == len(cnn.nodes)
    with pytest.raises(ValueError, match="level"):
        cnn.to_dataframe(level="layers")


def test_op_filter_keeps_kernels_anchored_on_that_type(cnn: onnxroof.Analysis) -> None:
    rows = RowFilter.of(ops=["Conv"]).kernels(cnn)
    expected = [i for i, k in enumerate(cnn.kernels) if k.op_types[0] == "Conv"]
    assert list(rows) == expected and expected
    dropped = RowFilter.of(exclude_ops=["Conv"]).kernels(cnn)
    assert sorted((*rows, *dropped)) == list(range(len(cnn.kernels)))
    nodes = RowFilter.of(ops=["Relu", "Add"], exclude_ops=["Add"]).nodes(cnn)
    assert [cnn.nodes[i].op_type for i in nodes] == ["Relu"] * sum(n.op_type == "Relu" for n in cnn.nodes)


def test_name_filter_searches_every_member_id(cnn: onnxroof.Analysis) -> None:
    rows = RowFilter.of(name=r"layer2").kernels(cnn)
    assert rows and all(any("layer2" in n for n in cnn.kernels[i].node_ids) for i in rows)
    left = set(range(len(cnn.kernels))) - set(rows)
    assert all(not any("layer2" in n for n in cnn.kernels[i].node_ids) for i in left)
    nodes = RowFilter.of(name=r"^\d+:/stem/").nodes(cnn)
    assert [cnn.nodes[i].id for i in nodes] == [n.id for n in cnn.nodes if re.match(r"\d+:/stem/", n.id)]


def test_top_keeps_the_slowest_rows_slowest_first(cnn: onnxroof.Analysis) -> None:
    rows = RowFilter.of(top=4).kernels(cnn)
    times = [cnn.kernels[i].latency_s for i in rows]
    assert times == sorted((k.latency_s for k in cnn.kernels), reverse=True)[:4]
    assert [cnn.kernels[i].id for i in rows] == [k.id for k in cnn.top_kernels(4)]


def test_cli_filters_the_csv_and_the_table() -> None:
    result = invoke("report", CNN, "--dim", "batch=1", "-f", "csv", "--level", "kernels", "--op", "Conv", "--top", "3")
    assert result.exit_code == 0, result.output
    rows = _rows(result.stdout)
    assert len(rows) == 3 and all(json.loads(r["op_types"])[0] == "Conv" for r in rows)
    times = [float(r["latency_s"]) for r in rows]
    assert times == sorted(times, reverse=True)
    table = invoke("report", CNN, "--dim", "batch=1", "--name", "layer1", "--exclude-op", "Relu")
    assert table.exit_code == 0, table.output
    assert "kernels by predicted time (--exclude-op Relu --name 'layer1')" in table.stdout
    listed = [line.split()[0] for line in table.stdout.splitlines() if re.match(r"\s+\d+:/", line)]
    assert listed and all("layer1" in name for name in listed)


def test_filters_refused_where_they_do_not_apply() -> None:
    _assert_one_error_line(invoke("report", CNN, "--dim", "batch=1", "-f", "json", "--op", "Conv"), ("--op",))
    _assert_one_error_line(invoke("report", CNN, "--dim", "batch=1", "-f", "csv", "--name", "("), ("--name", "("))
    _assert_one_error_line(invoke("report", CNN, "--dim", "batch=1", "-f", "html", "--level", "kernels"), ("--level",))
