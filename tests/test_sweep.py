"""Sweeps: each point equals its own analyze() call; batch scaling, throughput and the compute-bound turn;
the CLI's table, JSON, CSV and chart; bad sweeps exit 2 with one line and write nothing."""

from __future__ import annotations

import csv
import inspect
import io
import json
import math
from pathlib import Path

import onnx
import pytest
from helpers import ENERGY_TOML, write_platform
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxroof.analysis.analyze import analyze
from onnxroof.analysis.whatif import WhatIf
from onnxroof.cli.commands import app
from onnxroof.core.errors import DimsError, PlatformError
from onnxroof.report.sweep_view import POINT_FIELDS, render_sweep_chart, sweep_dict
from onnxroof.studies.sweep import (
    SweepError,
    SweepPoint,
    is_batch_dim,
    parse_precisions,
    parse_sweep_dims,
    sweep,
    turns_compute_bound,
)

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
CNN = SAMPLES / "tiny_cnn.onnx"
TRANSFORMER = SAMPLES / "tiny_transformer.onnx"
LSTM = SAMPLES / "tiny_lstm.onnx"
BATCHES = (1, 2, 4, 8, 16, 32, 64)
PNG = b"\x89PNG\r\n\x1a\n"
ENV = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}


def platform_file(folder: Path, energy: bool) -> Path:
    """fp32 10 / fp16 20 TFLOP/s, 100 GB/s, 1 µs launches; the test energies when asked."""
    path = folder / ("with-energy.toml" if energy else "no-energy.toml")
    return write_platform(path, extra=ENERGY_TOML if energy else "")


def invoke(*args: object):
    kwargs = {"mix_stderr": False} if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters else {}
    return CliRunner(**kwargs).invoke(app, [str(a) for a in args], env=ENV)


@pytest.fixture(scope="module")
def batch_sweep():
    return sweep(CNN, "xavier", dim="batch", values=list(BATCHES))


# ------------------------------------------------------------------------------------------------ library


def test_each_point_is_its_own_analysis(batch_sweep) -> None:
    assert [p.value for p in batch_sweep.points] == list(BATCHES)
    for point in batch_sweep.points:
        alone = analyze(CNN, "xavier", {"batch": point.value})
        t = alone.totals
        assert point.latency_s == t.latency_s
        assert point.flops == t.fused.flops and point.bytes == t.fused.bytes
        assert point.intensity == t.fused.flops / t.fused.bytes
        assert point.memory_bound_share == t.memory_bound_share
        assert point.energy_j == t.energy_j and point.energy_delay_js == t.energy_delay_js


def test_flops_scale_with_batch(batch_sweep) -> None:
    """Every op of the tiny CNN scales with the batch: FLOPs at batch b are b times those at batch 1."""
    one = batch_sweep.points[0]
    for point in batch_sweep.points:
        assert point.flops == pytest.approx(point.value * one.flops, rel=1e-12)


def test_throughput_and_samples_per_second(batch_sweep) -> None:
    assert batch_sweep.per_sample
    for point in batch_sweep.points:
        assert point.throughput == pytest.approx(1 / point.latency_s)
        assert point.samples_per_s == pytest.approx(point.value / point.latency_s)


def test_turns_compute_bound_is_the_first_mostly_compute_bound_value(batch_sweep) -> None:
    turn = batch_sweep.turns_compute_bound
    shares = [(p.value, p.memory_bound_share) for p in batch_sweep.points]
    if turn is None:
        assert all(share >= 0.5 for _, share in shares)
        return
    index = [v for v, _ in shares].index(turn)
    assert shares[index][1] < 0.5
    assert all(share >= 0.5 for _, share in shares[:index])


def test_turns_compute_bound_on_made_up_points() -> None:
    def point(value: int, share: float) -> SweepPoint:
        return SweepPoint(value, 1.0, 1.0, None, 1.0, 1.0, 1.0, share, None, None)

    assert turns_compute_bound([point(1, 0.9), point(2, 0.5), point(4, 0.49), point(8, 0.7)]) == 4
    assert turns_compute_bound([point(1, 0.2)]) == 1
    assert turns_compute_bound([point(1, 0.5), point(2, 1.0)]) is None


def test_values_are_sorted_and_other_dims_fixed() -> None:
    result = sweep(TRANSFORMER, "xavier", {"batch": 1}, dim="seq", values=[64, 16])
    assert [p.value for p in result.points] == [16, 64]
    assert dict(result.dims) == {"batch": 1}
    assert not result.per_sample and all(p.samples_per_s is None for p in result.points)
    for point in result.points:
        assert point.latency_s == analyze(TRANSFORMER, "xavier", {"batch": 1, "seq": point.value}).totals.latency_s


def test_precision_sweep_keeps_the_given_order() -> None:
    result = sweep(TRANSFORMER, "agx-orin", {"batch": 1, "seq": 16}, precisions=["int8", "fp32", "fp16"])
    assert result.axis == "precision" and [p.value for p in result.points] == ["int8", "fp32", "fp16"]
    for point in result.points:
        alone = analyze(TRANSFORMER, "agx-orin", {"batch": 1, "seq": 16}, whatif=WhatIf(precision=str(point.value)))
        assert point.latency_s == alone.totals.latency_s and point.bytes == alone.totals.fused.bytes
    by = {p.value: p for p in result.points}
    assert by["fp16"].bytes < by["fp32"].bytes  # float tensors take the precision's element size


def test_energy_only_where_the_platform_gives_figures(tmp_path: Path) -> None:
    priced = sweep(CNN, platform_file(tmp_path, True), dim="batch", values=[1, 2])
    assert priced.has_energy and all(p.energy_j is not None and p.energy_j > 0 for p in priced.points)
    assert priced.points[1].energy_j == pytest.approx(2 * priced.points[0].energy_j, rel=0.05)
    bare = sweep(CNN, platform_file(tmp_path, False), dim="batch", values=[1, 2])
    assert not bare.has_energy and all(p.energy_j is None for p in bare.points)


def _model_with_first_dim(tmp_path: Path, first: str, second: str) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [first, second])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [first, second])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_batch_dim_by_name_then_by_position(tmp_path: Path) -> None:
    lstm = onnx.load(LSTM, load_external_data=False)  # inputs [seq, batch, 16]
    assert is_batch_dim(lstm, "batch") and not is_batch_dim(lstm, "seq")
    unnamed = _model_with_first_dim(tmp_path, "rows", "cols")
    assert is_batch_dim(unnamed, "rows") and not is_batch_dim(unnamed, "cols")
    assert is_batch_dim(_model_with_first_dim(tmp_path, "x", "N"), "N")


def test_parse_sweep_dims() -> None:
    assert parse_sweep_dims(["batch=4,1,2", "seq=128"]) == ({"seq": 128}, "batch", (4, 1, 2))
    assert parse_sweep_dims(["batch=1"]) == ({"batch": 1}, None, ())
    assert parse_precisions("fp32, fp16") == ("fp32", "fp16") and parse_precisions(None) == ()
    with pytest.raises(SweepError, match="one dim at a time"):
        parse_sweep_dims(["batch=1,2", "seq=16,32"])
    with pytest.raises(DimsError, match="dim 'batch'"):
        parse_sweep_dims(["batch=1,-2"])


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"dim": "width", "values": [1, 2]}, SweepError, "no symbolic dim of that name"),
        ({"dim": "batch", "values": [1, 0]}, DimsError, "positive integer"),
        ({"dim": "batch", "values": [2, 2]}, SweepError, "given twice"),
        ({"dim": "batch", "values": []}, SweepError, "no values"),
        ({"dim": "batch", "values": [1], "precisions": ["fp16"]}, SweepError, "not both"),
        ({}, SweepError, "nothing to sweep"),
        ({"precisions": ["fp32", "bf16"], "dims": {"batch": 1}}, PlatformError, "bf16"),
        ({"dim": "batch", "values": [1], "dims": {"batch": 2}}, SweepError, "both swept and fixed"),
    ],
)
def test_bad_sweeps_raise(kwargs: dict, error: type, text: str) -> None:
    dims = kwargs.pop("dims", None)
    with pytest.raises(error, match=text):
        sweep(CNN, "xavier", dims, **kwargs)


# ---------------------------------------------------------------------------------------------------- CLI


def test_cli_table_marks_the_turn(batch_sweep) -> None:
    result = invoke("sweep", CNN, "-p", "xavier", "--dim", "batch=1,2,4,8,16,32,64")
    assert result.exit_code == 0, result.output
    assert "samples/s" in result.stdout and "mem-bound" in result.stdout
    turn = batch_sweep.turns_compute_bound
    if turn is not None:
        assert f"{turn} ◂ compute" in result.stdout and f"batch={turn}" in result.stdout


def test_cli_json_is_the_library_document(batch_sweep) -> None:
    result = invoke("sweep", CNN, "-p", "xavier", "-d", "batch=64,1,2,4,8,16,32", "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document == json.loads(json.dumps(sweep_dict(batch_sweep)))
    assert document["kind"] == "onnxroof-sweep" and document["parameter"] == "batch"
    assert [p["value"] for p in document["points"]] == list(BATCHES)


def test_cli_csv_and_precision_sweep(tmp_path: Path) -> None:
    out = tmp_path / "sweep.csv"
    args = ("sweep", TRANSFORMER, "-p", "agx-orin", "-d", "batch=1", "-d", "seq=16", "--precision", "fp32,fp16,int8")
    result = invoke(*args, "-o", out)
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert tuple(rows[0]) == POINT_FIELDS
    assert [r["value"] for r in rows] == ["fp32", "fp16", "int8"]
    assert all(math.isclose(float(r["throughput"]), 1 / float(r["latency_s"])) for r in rows)
    assert all(r["samples_per_s"] == "" for r in rows)


def test_cli_fixed_precision_during_a_dim_sweep() -> None:
    result = invoke("sweep", CNN, "-p", "xavier", "-d", "batch=1,2", "--precision", "fp16", "-f", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["whatif"]["precision"] == "fp16"
    alone = analyze(CNN, "xavier", {"batch": 2}, whatif=WhatIf(precision="fp16"))
    assert document["points"][1]["latency_s"] == alone.totals.latency_s


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_cli_chart(tmp_path: Path, suffix: str) -> None:
    chart = tmp_path / f"sweep.{suffix}"
    result = invoke("sweep", CNN, "-p", "xavier", "-d", "batch=1,2,4", "--chart", chart)
    assert result.exit_code == 0, result.output
    data = chart.read_bytes()
    assert data.startswith(PNG) if suffix == "png" else b"<svg" in data[:2000]


def test_chart_of_a_precision_sweep_renders() -> None:
    result = sweep(CNN, "xavier", {"batch": 1}, precisions=["fp32", "fp16"])
    assert render_sweep_chart(result, "png").startswith(PNG)


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (("-d", "batch=1,2", "-d", "foo=1"), None),  # an unknown fixed dim only warns
        (("-d", "width=1,2"), "no symbolic dim"),
        (("-d", "batch=1,0"), "positive integer"),
        (("-d", "batch=1,2", "--precision", "fp32,fp16"), "not both"),
        (("--precision", "fp32,fp8", "-d", "batch=1"), "fp8"),
        (("-d", "batch=1"), "nothing to sweep"),
        (("-d", "batch=1,2", "-p", "no-such-chip"), "unknown platform"),
    ],
)
def test_cli_errors_exit_2_and_write_nothing(tmp_path: Path, args: tuple[str, ...], text: str | None) -> None:
    out, chart = tmp_path / "out.json", tmp_path / "chart.png"
    result = invoke("sweep", CNN, *args, "-o", out, "--chart", chart)
    if text is None:
        assert result.exit_code == 0, result.output
        assert "no symbolic dim of that name" in result.stderr
        return
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and text in lines[0], result.stderr
    assert "Traceback" not in result.output
    assert not list(tmp_path.iterdir())


def test_cli_two_swept_dims_exit_2(tmp_path: Path) -> None:
    result = invoke("sweep", TRANSFORMER, "-d", "batch=1,2", "-d", "seq=16,32", "--chart", tmp_path / "c.png")
    assert result.exit_code == 2 and "one dim at a time" in result.stderr
    assert not list(tmp_path.iterdir())


def test_cli_bad_chart_suffix_fails_before_the_work(tmp_path: Path) -> None:
    result = invoke("sweep", CNN, "-d", "batch=1,2", "--chart", tmp_path / "c.gif")
    assert result.exit_code == 2 and "unknown plot format" in result.stderr
    assert not list(tmp_path.iterdir())
