"""The floorline chart: the floor E_op + E_dram / I, its asymptote and ridge in closed form; kernels with every byte
from DRAM sit exactly on the floor; `plot --kind floorline`; a platform without energy figures is refused; the
HTML report's floorline section and energy totals."""

from __future__ import annotations

import inspect
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from helpers import ENERGY_TOML, write_platform
from typer.testing import CliRunner

from onnxroof.analysis.analyze import analyze
from onnxroof.cli.commands import app
from onnxroof.core.units import joules
from onnxroof.report.floorline import BOUND_COLOURS, NoEnergyError, floorline_figure, render_floorline
from onnxroof.report.html import floorline_view, render_html
from onnxroof.roofline.energy import floorline

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
CNN = SAMPLES / "tiny_cnn.onnx"
TRANSFORMER = SAMPLES / "tiny_transformer.onnx"
PNG = b"\x89PNG\r\n\x1a\n"
ENV = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
E_OP, E_DRAM = 2e-12, 10e-12  # J/op (fp32), J/B: the energy ridge is at 5 FLOP/B


def platform_file(folder: Path, energy: bool = True) -> Path:
    """fp32 10 TFLOP/s, 100 GB/s, 1 µs launches; the test energies (2 pJ/FLOP, 10 pJ/B) when asked."""
    path = folder / ("with-energy.toml" if energy else "no-energy.toml")
    return write_platform(path, peaks={"fp32": 10}, extra=ENERGY_TOML if energy else "")


def invoke(*args: object):
    kwargs = {"mix_stderr": False} if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters else {}
    return CliRunner(**kwargs).invoke(app, [str(a) for a in args], env=ENV)


@pytest.fixture()
def analysis(tmp_path: Path):
    return analyze(CNN, platform_file(tmp_path), {"batch": 1})


def test_the_floor_asymptote_and_ridge(analysis) -> None:
    ax = floorline_figure(analysis).axes[0]
    curves = [line for line in ax.get_lines() if len(line.get_xdata()) > 10]
    (floor,) = curves  # one precision: one floor
    xs, ys = np.asarray(floor.get_xdata()), np.asarray(floor.get_ydata())
    assert np.allclose(ys, E_OP + E_DRAM / xs, rtol=1e-12)
    flat = [line for line in ax.get_lines() if list(line.get_ydata()) == [E_OP, E_OP]]
    assert flat, "the asymptote E_op is drawn"
    ridge = [line for line in ax.get_lines() if list(line.get_xdata()) == [pytest.approx(E_DRAM / E_OP)]]
    assert any(list(line.get_ydata()) == [pytest.approx(2 * E_OP)] for line in ridge)  # the marked ridge point


def test_kernels_reading_everything_from_dram_sit_on_the_floor(analysis) -> None:
    """No on-chip level: a kernel's energy per FLOP is exactly the floor at its intensity."""
    drawn = [k for k in analysis.kernels if k.flops > 0 and k.energy_j]
    for kernel in drawn:
        expected = floorline(analysis.platform, kernel.precision, kernel.intensity)
        assert kernel.energy_j / kernel.flops == pytest.approx(expected, rel=1e-12)
    ax = floorline_figure(analysis).axes[0]
    (points,) = ax.collections
    offsets = {(round(math.log10(x), 9), round(math.log10(y), 9)) for x, y in points.get_offsets()}
    for kernel in drawn:
        assert (round(math.log10(kernel.intensity), 9), round(math.log10(kernel.energy_j / kernel.flops), 9)) in offsets
    colours = {tuple(np.round(c[:3], 3)) for c in points.get_facecolors()}
    from matplotlib.colors import to_rgb

    wanted = {tuple(np.round(to_rgb(BOUND_COLOURS[k.energy_bound]), 3)) for k in drawn}
    assert colours == wanted


def test_a_platform_without_energy_figures_is_refused(tmp_path: Path) -> None:
    bare = analyze(CNN, platform_file(tmp_path, energy=False), {"batch": 1})
    with pytest.raises(NoEnergyError, match=r"no-energy.*no energy figures"):
        floorline_figure(bare)


@pytest.mark.parametrize("fmt", ["png", "svg", "pdf"])
def test_render_formats(analysis, fmt: str) -> None:
    data = render_floorline(analysis, fmt)
    assert data.startswith({"png": PNG, "svg": b"<?xml", "pdf": b"%PDF-"}[fmt])


# ---------------------------------------------------------------------------------------------------- CLI


def test_cli_plot_kind_floorline(tmp_path: Path) -> None:
    out = tmp_path / "floorline.png"
    result = invoke(
        "plot",
        TRANSFORMER,
        "-d",
        "batch=1",
        "-d",
        "seq=16",
        "-p",
        platform_file(tmp_path),
        "--kind",
        "floorline",
        "-o",
        out,
    )
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(PNG)


def test_cli_plot_default_kind_is_still_the_roofline(tmp_path: Path) -> None:
    out = tmp_path / "roofline.svg"
    result = invoke("plot", CNN, "-d", "batch=1", "-p", platform_file(tmp_path), "-o", out)
    assert result.exit_code == 0, result.output
    assert "FLOP/s" in out.read_text(encoding="utf-8") and "J/op" not in out.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("energy", "extra", "text"),
    [
        (False, (), "has no energy figures"),
        (True, ("-p", "xavier"), "draws one platform"),
    ],
)
def test_cli_floorline_errors(tmp_path: Path, energy: bool, extra: tuple[str, ...], text: str) -> None:
    chip = platform_file(tmp_path, energy=energy)
    out = tmp_path / "out" / "floorline.png"
    out.parent.mkdir()
    result = invoke("plot", CNN, "-d", "batch=1", "-p", chip, *extra, "--kind", "floorline", "-o", out)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and text in lines[0], result.stderr
    assert not list(out.parent.iterdir())


# --------------------------------------------------------------------------------------------------- HTML


def _view(html: str) -> dict:
    block = re.search(r'<script type="application/json" id="onnxroof-view">(.*?)</script>', html, flags=re.S)
    assert block is not None
    return json.loads(block.group(1))


def test_html_floorline_section_and_energy_totals(analysis) -> None:
    html = render_html(analysis)
    assert 'id="floorline-panel"' in html and 'id="floorline"' in html
    assert "Energy-delay" in html and joules(analysis.totals.energy_j) in html
    floor = _view(html)["floorline"]
    assert floor == json.loads(json.dumps(floorline_view(analysis)))
    assert floor["e_op"] == pytest.approx(E_OP) and floor["e_dram"] == pytest.approx(E_DRAM)
    assert floor["ridge"] == pytest.approx(E_DRAM / E_OP) and floor["precision"] == "fp32"
    assert sum(b["kernels"] for b in floor["bounds"]) == sum(1 for k in analysis.kernels if k.flops > 0)
    assert sum(b["share"] for b in floor["bounds"]) == pytest.approx(
        sum(k.energy_j for k in analysis.kernels if k.flops > 0) / analysis.totals.energy_j
    )


def test_html_without_energy_figures_has_no_floorline(tmp_path: Path) -> None:
    html = render_html(analyze(CNN, platform_file(tmp_path, energy=False), {"batch": 1}))
    assert 'id="floorline-panel"' not in html and "Energy-delay" not in html
    assert _view(html)["floorline"] is None


def test_html_floorline_draws_in_a_browser(tmp_path: Path, analysis) -> None:
    """One point per kernel with arithmetic, one floor, the ridge; no page error (skipped without Chromium)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    executable = next((p for p in ("/usr/bin/chromium", "/usr/bin/chromium-browser") if Path(p).exists()), None)
    if executable is None:
        pytest.skip("no chromium")
    page_file = tmp_path / "report.html"
    page_file.write_text(render_html(analysis), encoding="utf-8")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_file.as_uri())
            page.wait_for_selector("html[data-ready]", timeout=10_000)
            drawn = [k for k in analysis.kernels if k.flops > 0 and k.energy_j]
            assert errors == []
            assert page.locator("#floorline circle.pt").count() == len(drawn)
            assert page.locator("#floorline path.roof").count() == 1
            assert page.locator("#floorline circle.ridge").count() == 1
            assert page.locator("#roofline circle.pt").count() == len(analysis.kernels)
            page.hover("#floorline circle.pt", force=True)
            assert "energy-bound" in page.locator("#tip").text_content()
        finally:
            browser.close()
