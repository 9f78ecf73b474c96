"""Comparisons: each row equals its platform's own analyze() call; bound mix and top kernel; the CLI's table,
JSON, CSV and chart; bad comparisons exit 2 with one line and write nothing."""

from __future__ import annotations

import csv
import inspect
import io
import json
from pathlib import Path

import pytest
from helpers import ENERGY_TOML, write_platform
from typer.testing import CliRunner

from onnxroof.analysis.analyze import analyze
from onnxroof.analysis.whatif import WhatIf
from onnxroof.cli.commands import app
from onnxroof.core.errors import PlatformError
from onnxroof.report.compare_view import CSV_FIELDS, compare_dict, compare_figure, render_compare_chart
from onnxroof.studies.compare import CompareError, compare
from onnxroof.studies.top import top_kernels

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
CNN = SAMPLES / "tiny_cnn.onnx"
PNG = b"\x89PNG\r\n\x1a\n"
ENV = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
DIMS = {"batch": 1}


def platform_file(folder: Path, name: str, energy: bool, peak: float = 10) -> Path:
    """fp32 ``peak`` TFLOP/s, 100 GB/s, 1 µs launches; the test energies when asked."""
    return write_platform(folder / f"{name}.toml", peaks={"fp32": peak}, extra=ENERGY_TOML if energy else "")


def invoke(*args: object):
    kwargs = {"mix_stderr": False} if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters else {}
    return CliRunner(**kwargs).invoke(app, [str(a) for a in args], env=ENV)


@pytest.fixture()
def chips(tmp_path: Path) -> list[Path]:
    return [platform_file(tmp_path, "priced", True), platform_file(tmp_path, "bare", False, peak=1)]


# ------------------------------------------------------------------------------------------------ library


def test_each_row_is_its_platforms_analysis(chips: list[Path]) -> None:
    result = compare(CNN, chips, DIMS)
    assert [r.platform for r in result.rows] == ["priced", "bare"]
    for row, chip in zip(result.rows, chips, strict=True):
        alone = analyze(CNN, chip, DIMS)
        t = alone.totals
        assert row.latency_s == t.latency_s
        assert row.throughput == pytest.approx(1 / t.latency_s)
        assert row.energy_j == t.energy_j and row.energy_delay_js == t.energy_delay_js
        assert row.memory_bound_share == t.memory_bound_share
        assert row.compute_kernels + row.memory_kernels == row.kernels == len(alone.kernels)
        assert row.compute_time_share == pytest.approx(1 - t.memory_bound_share)
        top = alone.top_kernels(1)[0]
        assert row.top_kernel is not None and row.top_kernel.id == top.id
        assert row.top_kernel.share == pytest.approx(top.latency_s / t.latency_s)


def test_energy_is_none_without_figures_and_the_winners(chips: list[Path]) -> None:
    result = compare(CNN, chips, DIMS)
    priced, bare = result.rows
    assert priced.energy_j is not None and priced.energy_j > 0 and bare.energy_j is None
    assert result.least_energy == "priced"
    assert result.fastest == min(result.rows, key=lambda r: r.latency_s).platform == "priced"  # 10× the peak


def test_bound_mix_counts_kernels_by_bound(chips: list[Path]) -> None:
    (row,) = compare(CNN, chips[:1], DIMS).rows
    kernels = analyze(CNN, chips[0], DIMS).kernels
    assert row.compute_kernels == sum(1 for k in kernels if k.bound == "compute")
    assert row.compute_kernel_share == pytest.approx(row.compute_kernels / len(kernels))


def test_whatif_options_reach_every_platform() -> None:
    result = compare(CNN, ["xavier", "h100"], DIMS, precision="fp16")
    assert result.whatif.precision == "fp16"
    for row in result.rows:
        assert row.precision == "fp16"
        assert row.latency_s == analyze(CNN, row.platform, DIMS, whatif=WhatIf(precision="fp16")).totals.latency_s


@pytest.mark.parametrize(
    ("platforms", "kwargs", "error", "text"),
    [
        ([], {}, CompareError, "at least one"),
        (["xavier", "XAVIER"], {}, CompareError, "given twice"),
        (["xavier", "coral-edgetpu"], {"precision": "bf16"}, PlatformError, "bf16"),
    ],
)
def test_bad_comparisons_raise(platforms: list[str], kwargs: dict, error: type, text: str) -> None:
    with pytest.raises(error, match=text):
        compare(CNN, platforms, DIMS, **kwargs)


def test_chart_scales_turn_logarithmic_past_a_hundredfold(chips: list[Path]) -> None:
    near = compare(CNN, chips, DIMS)
    ax = compare_figure(near).axes[0]
    spread = max(r.latency_s for r in near.rows) / min(r.latency_s for r in near.rows)
    assert ax.get_yscale() == ("log" if spread > 100 else "linear")
    far = compare(CNN, ["h100", "raspberry-pi-4"], {"batch": 64})
    assert max(r.latency_s for r in far.rows) > 100 * min(r.latency_s for r in far.rows)
    assert compare_figure(far).axes[0].get_yscale() == "log"
    assert render_compare_chart(far, "png").startswith(PNG)


# ---------------------------------------------------------------------------------------------------- CLI


def test_cli_table(chips: list[Path]) -> None:
    result = invoke("compare", CNN, "-d", "batch=1", "-p", chips[0], "-p", chips[1])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    bare = next(line for line in lines if line.strip().startswith("bare"))
    assert "—" in bare  # no energy figures
    comparison = compare(CNN, chips, DIMS)
    fastest = next(line for line in lines if line.strip().startswith(comparison.fastest))
    thrifty = next(line for line in lines if line.strip().startswith(comparison.least_energy))
    assert "★" in fastest and "⚡" in thrifty and "★ fastest  ⚡ least energy" in result.stdout
    for row in comparison.rows:
        assert f"{row.platform}: " in result.stdout and row.top_kernel.id in result.stdout


def test_cli_json_is_the_library_document(chips: list[Path]) -> None:
    result = invoke("compare", CNN, "-d", "batch=1", "-p", chips[0], "-p", chips[1], "-f", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document == json.loads(json.dumps(compare_dict(compare(CNN, chips, DIMS))))
    assert document["kind"] == "onnxroof-compare"
    assert [p["platform"] for p in document["platforms"]] == ["priced", "bare"]
    assert document["platforms"][1]["energy_j"] is None


def test_cli_csv_from_the_suffix(tmp_path: Path, chips: list[Path]) -> None:
    out = tmp_path / "compare.csv"
    result = invoke("compare", CNN, "-d", "batch=1", "-p", chips[0], "-p", chips[1], "-o", out)
    assert result.exit_code == 0, result.output
    rows = list(csv.DictReader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert tuple(rows[0]) == CSV_FIELDS and [r["platform"] for r in rows] == ["priced", "bare"]
    assert rows[1]["energy_j"] == "" and rows[0]["top_kernel_id"]


def test_cli_chart(tmp_path: Path) -> None:
    chart = tmp_path / "compare.png"
    result = invoke("compare", CNN, "-d", "batch=1", "-p", "xavier", "-p", "h100", "--chart", chart)
    assert result.exit_code == 0, result.output
    assert chart.read_bytes().startswith(PNG)


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (("-p", "xavier", "-p", "xavier"), "given twice"),
        (("-p", "xavier", "-p", "no-such-chip"), "unknown platform"),
        (("-p", "xavier", "--precision", "fp8"), "fp8"),
        (("-d", "batch=-1", "-p", "xavier"), "non-negative integer"),
        (("--density", "weight=2", "-p", "xavier"), "density"),
        ((), "give the platforms"),
    ],
)
def test_cli_errors_exit_2_and_write_nothing(tmp_path: Path, args: tuple[str, ...], text: str) -> None:
    result = invoke("compare", CNN, *args, "-o", tmp_path / "out.json", "--chart", tmp_path / "chart.png")
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and text in lines[0], result.stderr
    assert "Traceback" not in result.output
    assert not list(tmp_path.iterdir())


def test_top_kernels_are_ranked_by_time_with_their_share_and_bound():
    analysis = analyze(CNN, "xavier", DIMS)
    tops = top_kernels(analysis, 3)
    assert [t.id for t in tops] == [k.id for k in analysis.top_kernels(3)] and len(tops) == 3
    assert [t.latency_s for t in tops] == sorted((t.latency_s for t in tops), reverse=True)
    kernels = {k.id: k for k in analysis.kernels}
    for top in tops:
        assert top.share == pytest.approx(top.latency_s / analysis.totals.latency_s)
        assert top.bound is kernels[top.id].bound and top.op_types == kernels[top.id].op_types
