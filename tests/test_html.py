"""The HTML report: self-contained, escaped, and working in a real headless browser.

The browser tests drive Debian's chromium (``/usr/bin/chromium``, or ``$ONNXROOF_CHROMIUM``) with
playwright; they skip, saying why, where either is missing. ``python tests/test_html.py docs/`` retakes the
README screenshots.
"""

from __future__ import annotations

import base64
import hashlib
import html as htmllib
import importlib.util
import json
import os
import re
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import onnx
import pytest
from hostile import ALL, FILE_NAME, PWN, build_hostile, fuse_first_kernels
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxroof.analysis.analyze import analyze
from onnxroof.analysis.document import to_dict
from onnxroof.cli.commands import app
from onnxroof.core.states import Bound
from onnxroof.measure.overlay import measured_overlay, with_measured
from onnxroof.report.html import BOUND_COLOURS, explain, render_html
from onnxroof.roofline.kernels import KernelResult

ROOT = Path(__file__).resolve().parents[1]
TRANSFORMER = ROOT / "samples" / "tiny_transformer.onnx"
CNN = ROOT / "samples" / "tiny_cnn.onnx"
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def find_chromium() -> str | None:
    for candidate in (os.environ.get("ONNXROOF_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


def script_blocks(html: str) -> list[tuple[str, str]]:
    """(attributes, content) of every <script> element."""
    return re.findall(r"<script([^>]*)>(.*?)</script>", html, flags=re.S)


# ------------------------------------------------------------------------------------------------ models


@pytest.fixture(scope="module")
def transformer():
    return analyze(TRANSFORMER, "xavier", {"batch": 1, "seq": 128})


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    return analyze(build_hostile(tmp_path_factory.mktemp("hostile")), "xavier")


@pytest.fixture(scope="module")
def pages(tmp_path_factory, transformer, hostile):
    """The reports the browser tests open, written once."""
    folder = tmp_path_factory.mktemp("html")
    written = {}
    fused = fuse_first_kernels(analyze(CNN, "xavier", {"batch": 1}), 2)
    nothing = analyze(nothing_runs(), "xavier")
    for name, analysis in (("transformer", transformer), ("hostile", hostile), ("fused", fused), ("empty", nothing)):
        path = folder / f"{name}.html"
        path.write_text(render_html(analysis), encoding="utf-8")
        written[name] = (path, analysis)
    for name, analysis in (("measured", transformer), ("hostile-measured", hostile)):
        path = folder / f"{name}.html"
        path.write_text(render_html(analysis, overlay_of(analysis)), encoding="utf-8")
        written[name] = (path, analysis)
    return written


SLOWER = 1.5


def overlay_of(analysis, source: str = "prof.json"):
    """A measured overlay in which every kernel but the last ran :data:`SLOWER` times its predicted time, and
    onnxruntime's node names are hostile strings."""
    rows = [
        {
            "kernels": [k.id],
            "op_types": list(k.op_types),
            "ort_nodes": [f"{ALL[i % len(ALL)]}{k.id}"],
            "measured_s": SLOWER * k.latency_s,
        }
        for i, k in enumerate(analysis.kernels[:-1])
    ]
    document = {
        "model": analysis.model.path or "model.onnx",
        "platform": {"name": analysis.platform.name},
        "fusion_profile": analysis.fusion_profile,
        "dims": dict(analysis.model.dims),
        "onnxruntime": "1.0",
        "threads": 1,
        "end_to_end": {"measured_s": SLOWER * analysis.totals.latency_s},
        "rows": rows,
    }
    return measured_overlay(document, analysis, source)


def nothing_runs() -> onnx.ModelProto:
    """A model whose only node has no cost rule: no kernel at all."""
    node = helper.make_node("Mystery", ["x"], ["y"], domain="com.example", name="mystery")
    graph = helper.make_graph(
        [node],
        "nothing",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    model.ir_version = 8
    return model


# ------------------------------------------------------------------------------------------ without browser


def test_one_self_contained_file_that_fetches_nothing(transformer) -> None:
    html = render_html(transformer)
    assert html.startswith("<!DOCTYPE html>")
    assert not re.search(r"<link\b|<img\b|<iframe\b|@import|url\(|\bsrc\s*=", html, flags=re.I)
    assert "cdn" not in html.lower()
    csp = htmllib.unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1))
    assert "default-src 'none'" in csp and "connect-src" not in csp  # no fetch, no XHR, no font or image URL
    blocks = script_blocks(html)
    assert [attrs.strip() for attrs, _ in blocks] == [
        'type="application/json" id="onnxroof-analysis"',
        'type="application/json" id="onnxroof-view"',
        "",
    ]
    script = blocks[2][1]
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp  # the one inline script, and nothing else, may run
    style = re.search(r"<style>(.*?)</style>", html, flags=re.S).group(1)
    assert f"'sha256-{base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()}'" in csp


def test_the_page_embeds_the_json_document(transformer) -> None:
    html = render_html(transformer)
    attrs, content = script_blocks(html)[0]
    assert "onnxroof-analysis" in attrs
    assert json.loads(content) == json.loads(json.dumps(to_dict(transformer)))


def test_summary_bottlenecks_totals_and_table_are_there(transformer) -> None:
    html = render_html(transformer)
    for text in (
        "Predicted latency",
        "Memory-bound",
        "Peak activations",
        "Unsupported ops",
        "Opset",
        "Parameters",
        "Weight bytes",
        "Dims bound",
        "batch=1, seq=128",
        "DRAM bandwidth",
        "ridge",
        "bundled:xavier",
        "Roofline",
        "Predicted time by op type",
        "Top bottlenecks",
        "Unfused",
        "Fused",
        "Ideal",
        "Layout traffic:",
        'id="kernels"',
        'id="filter"',
    ):
        assert text in html, text
    assert html.count('<li>\n      <div class="rank">') == 10  # the ten slowest kernels, each with a sentence
    assert html.count("its time is set by") >= 10


def test_hostile_names_are_escaped_everywhere(hostile) -> None:
    html = render_html(hostile)
    for text in ALL:
        if "<" in text or '"' in text:
            assert text not in html, text
    assert PWN in html  # the names are shown (as text), not dropped
    assert len(script_blocks(html)) == 3 and html.lower().count("<script") == 3
    assert html.lower().count("</style") == 1 and html.lower().count("<style") == 1
    data = json.loads(script_blocks(html)[0][1])
    assert {n["name"] for n in data["nodes"]} >= {"<script>window.__pwned=1</script>"}
    assert "{{ 7*7 }}" in data["model"]["producer"]  # not evaluated as a template


def test_findings_section_lists_every_finding(transformer) -> None:
    from onnxroof.analysis.findings import find

    html = render_html(transformer)
    found = find(transformer)
    assert found, "the transformer sample has findings: the section must be rendered"
    assert 'id="findings"' in html
    for finding in found:
        assert finding.id in html


def _kernel(**changes) -> KernelResult:
    """A kernel row with the given figures (explain() reads only its fields and ``bytes``)."""
    base = dict(
        id="k0",
        patterns=(),
        node_ids=("0:a",),
        op_types=("Add",),
        folded_nodes=(),
        layout=False,
        precision="fp16",
        flops=2.3e6,
        macs=0.0,
        bytes_read=6e6,
        bytes_written=4e6,
        params=0.0,
        intensity=0.23,
        peak_flops=11.3e12,
        ridge=83.0,
        attainable_flops=3e10,
        t_compute_s=2e-7,
        t_memory_s=7.3e-5,
        t_overhead_s=1e-5,
        latency_s=8.3e-5,
        bound=Bound.MEMORY,
        ideal_bytes=0.0,
        ideal_latency_s=1e-5,
        utilization=1.0,
        energy_j=None,
        energy_compute_j=None,
        energy_memory_j=None,
        energy_bound="none",
    )
    base.update(changes)
    return SimpleNamespace(**base, bytes=base["bytes_read"] + base["bytes_written"])  # type: ignore[return-value]


def test_each_bottleneck_gets_a_plain_sentence() -> None:
    assert explain(_kernel()) == "memory-bound at 0.23 FLOP/B, ridge 83: its time is set by the 10 MB it moves"
    compute = explain(_kernel(bound=Bound.COMPUTE, intensity=120.0, flops=11.5e9, t_compute_s=1e-3))
    assert compute.startswith("compute-bound at 120 FLOP/B, above the ridge 83: its time is set by its 11.5 GFLOP")
    assert "fp16 peak of 11.3 TFLOP/s" in compute
    assert explain(_kernel(flops=0.0, layout=True)).startswith("a layout copy, no arithmetic")
    small = explain(_kernel(t_memory_s=2e-6, bytes_read=1e5, bytes_written=1e5))
    assert small.endswith("launch overhead (10 µs) is more than the work itself (2 µs)")


def test_the_measured_overlay_is_in_the_page_data_and_table(transformer) -> None:
    overlay = overlay_of(transformer)
    html = render_html(transformer, overlay)
    blocks = script_blocks(html)
    assert len(blocks) == 3
    data = json.loads(blocks[0][1])
    assert data == json.loads(json.dumps(with_measured(to_dict(transformer), overlay)))
    measured = data["measured"]["kernels"]
    assert len(measured) == len(transformer.kernels) - 1
    flops = {k.id: k.flops for k in transformer.kernels}
    for item in measured:
        assert item["ratio"] == pytest.approx(SLOWER)
        assert item["achieved_flops"] == pytest.approx(flops[item["id"]] / item["measured_s"])
    assert data["measured"]["unmeasured_kernels"] == [transformer.kernels[-1].id]
    for text in ('data-key="measured"', 'data-key="ratio"', 'id="measured-note"'):
        assert text in html
    csp = htmllib.unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html).group(1))
    assert f"'sha256-{base64.b64encode(hashlib.sha256(blocks[2][1].encode()).digest()).decode()}'" in csp


def test_hostile_onnxruntime_names_and_profile_path_are_escaped(hostile) -> None:
    html = render_html(hostile, overlay_of(hostile, source=f"{FILE_NAME}.json"))
    for text in ALL:
        if "<" in text or '"' in text:
            assert text not in html, text
    assert len(script_blocks(html)) == 3 and html.lower().count("<script") == 3
    ort = {n for k in json.loads(script_blocks(html)[0][1])["measured"]["kernels"] for n in k["ort_nodes"]}
    assert any(n.startswith("<script>") for n in ort)  # kept as data, shown as text


def test_cli_writes_the_html_report(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", str(CNN), "--dim", "batch=1", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


# -------------------------------------------------------------------------------------------- in a browser


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    executable = find_chromium()
    if executable is None:
        pytest.skip("no chromium at /usr/bin/chromium (apt-get install chromium, or set ONNXROOF_CHROMIUM)")
    try:
        playwright = sync_api.sync_playwright().start()
    except Exception as exc:
        pytest.skip(f"playwright's driver did not start: {str(exc).splitlines()[0]}")
    try:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
    except Exception as exc:
        playwright.stop()
        pytest.skip(f"chromium at {executable} did not start: {str(exc).splitlines()[0]}")
    yield launched
    launched.close()
    playwright.stop()


class Opened:
    """A report open in a page, with every console message, page error, dialog and request it caused."""

    def __init__(self, browser, path: Path, width: int = 1320) -> None:
        self.page = browser.new_page(viewport={"width": width, "height": 900})
        self.console: list[str] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.requests: list[str] = []
        self.page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}"))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.on("request", lambda r: self.requests.append(r.url))
        started = time.perf_counter()
        self.page.goto(path.as_uri())
        self.page.wait_for_selector("html[data-ready]", timeout=10_000)
        self.load_s = time.perf_counter() - started

    def wait_until(self, expression: str, timeout_s: float = 5.0) -> None:
        """Poll ``expression`` (the page's CSP forbids the eval that ``wait_for_function`` uses)."""
        deadline = time.perf_counter() + timeout_s
        while not self.page.evaluate(expression):
            assert time.perf_counter() < deadline, f"timed out waiting for {expression}"
            self.page.wait_for_timeout(20)

    def kernel_order(self) -> list[str]:
        return self.page.eval_on_selector_all("#kernels tbody tr", "rows => rows.map(r => r.dataset.kernel)")

    def visible_rows(self) -> int:
        return self.page.eval_on_selector_all("#kernels tbody tr", "rows => rows.filter(r => !r.hidden).length")


def test_page_loads_clean_and_draws_one_point_per_kernel(browser, pages) -> None:
    path, analysis = pages["transformer"]
    opened = Opened(browser, path)
    assert opened.errors == [] and [m for m in opened.console if m.startswith(("error", "warning"))] == []
    assert all(url.startswith("file://") for url in opened.requests), opened.requests
    page = opened.page
    assert page.locator("#roofline circle.pt").count() == len(analysis.kernels)
    assert page.locator("#roofline path.roof").count() == len({k.precision for k in analysis.kernels})
    assert page.locator("#kernels tbody tr").count() == len(analysis.kernels)
    assert page.locator("#legend .item").count() >= 2
    assert page.locator("#count").text_content() == f"{len(analysis.kernels)} kernels"
    page.close()


def test_the_roofs_drawn_are_the_roofs_used(browser, pages) -> None:
    """tiny_cnn on xavier: every prediction uses 75% of the 136.5 GB/s datasheet bandwidth (platforms/xavier.toml
    [sustained]), so the slope is that roof and says so, with the datasheet figure after it; fp32 is not a
    tensor precision on a GPU, so its roof is the datasheet peak and says nothing more."""
    path, analysis = pages["fused"]
    p = analysis.platform
    assert p.roof_bandwidth == pytest.approx(0.75 * 136.5e9) and p.dram_bandwidth == pytest.approx(136.5e9)
    opened = Opened(browser, path)
    labels = opened.page.eval_on_selector_all("#roofline text.roof-label", "ts => ts.map(t => t.textContent)")
    assert "sustained DRAM 102 GB/s (datasheet 137 GB/s)" in labels, labels
    assert p.peak("fp32") == p.peak_flops["fp32"] and "fp32 peak 1.41 TFLOP/s" in labels, labels
    ridge = opened.page.eval_on_selector_all("#roofline text.ridge-label", "ts => ts.map(t => t.textContent)")
    assert ridge == [f"ridge {p.ridge('fp32'):.3g} FLOP/B"]  # 1.41e12 / 1.024e11 = 13.8: the same roofs
    opened.page.close()


def test_sorting_a_column_reorders_the_rows(browser, pages) -> None:
    path, analysis = pages["transformer"]
    opened = Opened(browser, path)
    flops = {k.id: k.flops for k in analysis.kernels}
    by_time = opened.kernel_order()
    assert by_time == [k.id for k in sorted(analysis.kernels, key=lambda k: (-k.latency_s, analysis.kernels.index(k)))]
    opened.page.click("th[data-key=flops]")
    descending = [flops[k] for k in opened.kernel_order()]
    assert descending == sorted(descending, reverse=True) and opened.kernel_order() != by_time
    opened.page.click("th[data-key=flops]")
    assert [flops[k] for k in opened.kernel_order()] == sorted(descending)
    opened.page.click("th[data-key=ops]")
    ops = [" + ".join(next(k.op_types for k in analysis.kernels if k.id == i)) for i in opened.kernel_order()]
    assert ops == sorted(ops, key=str.lower)
    opened.page.close()


def test_filter_tooltip_toggle_and_click(browser, pages) -> None:
    path, analysis = pages["transformer"]
    opened = Opened(browser, path)
    page = opened.page
    page.fill("#filter", "softmax")
    opened.wait_until("document.getElementById('count').textContent.includes(' of ')")
    assert opened.visible_rows() == sum("Softmax" in k.op_types for k in analysis.kernels) > 0
    page.fill("#filter", "")
    opened.wait_until(f"document.getElementById('count').textContent === '{len(analysis.kernels)} kernels'")

    slowest = max(analysis.kernels, key=lambda k: k.latency_s)
    index = analysis.kernels.index(slowest)
    point = page.locator(f'#roofline circle.pt[data-i="{index}"]')
    point.hover(force=True)  # the real mouse: some kernel's tooltip (identical layers share a position)
    tip = page.locator("#tip")
    assert tip.is_visible() and "FLOPs" in tip.text_content()
    point.dispatch_event("pointermove", {"bubbles": True, "clientX": 300, "clientY": 300})
    name = next(n.name for n in analysis.nodes if n.id == slowest.node_ids[0])
    text = tip.text_content()
    for expected in (name, "FLOPs", "bytes", "intensity", "time", slowest.bound):
        assert expected in text

    page.click("button[data-colour=bound]")
    fills = page.eval_on_selector_all("#roofline circle.pt", "cs => cs.map(c => c.getAttribute('fill'))")
    assert set(fills) <= set(BOUND_COLOURS.values())

    point.dispatch_event("click", {"bubbles": True})
    opened.wait_until("document.getElementById('count').textContent.includes(' of ')")
    assert opened.visible_rows() == 1 and page.input_value("#filter") == f"id:{slowest.id}"
    assert opened.errors == []
    page.close()


def test_hostile_names_run_nothing(browser, pages) -> None:
    path, analysis = pages["hostile"]
    opened = Opened(browser, path)
    page = opened.page
    page.hover("#roofline circle.pt", force=True)  # tooltips render names too
    page.click("th[data-key=label]")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert opened.dialogs == [] and opened.errors == []
    assert page.locator("img, iframe, object, embed").count() == 0
    assert page.locator("script").count() == 3
    assert FILE_NAME in page.locator("h1").text_content()
    cells = page.eval_on_selector_all("#kernels td.name", "cs => cs.map(c => c.textContent)")
    assert any(cell.startswith("<script>window.__pwned=1</script>") for cell in cells)
    assert page.locator("#roofline circle.pt").count() == len(analysis.kernels)
    page.close()


def test_kernels_of_several_nodes(browser, pages) -> None:
    path, analysis = pages["fused"]
    fused = analysis.kernels[0]
    assert len(fused.node_ids) >= 2
    opened = Opened(browser, path)
    page = opened.page
    assert page.locator("#roofline circle.pt").count() == len(analysis.kernels)
    row = page.locator('#kernels tr[data-kernel="kfused"]')
    assert f"(+{len(fused.node_ids) - 1}\u00a0fused)" in row.text_content() and "test_fused" in row.text_content()
    assert " + ".join(fused.op_types) in row.text_content()
    assert opened.errors == []
    page.close()


def test_a_model_where_nothing_runs(browser, pages) -> None:
    path, analysis = pages["empty"]
    assert len(analysis.kernels) == 0 and analysis.unsupported
    opened = Opened(browser, path)
    page = opened.page
    assert opened.errors == [] and page.locator("#roofline circle.pt").count() == 0
    assert page.locator("#roofline path.roof").count() == 1  # the platform's roof, with nothing under it
    assert "com.example::Mystery" in page.locator(".kpi-bad").text_content()
    page.close()


def test_a_2000_node_model_is_small_and_renders_whole(browser, tmp_path: Path) -> None:
    """Size and completeness; how fast it opens is measured by benchmarks/bench_timings.py, not asserted here."""
    spec = importlib.util.spec_from_file_location("llama_shaped", ROOT / "benchmarks" / "llama_shaped.py")
    llama = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(llama)
    model = llama.build_llama_shaped(
        tmp_path / "llama.onnx", layers=24, hidden=256, heads=4, kv_heads=4, intermediate=512, vocab=1000
    )
    analysis = analyze(model, "xavier", {"batch": 1, "seq": 128})
    assert len(analysis.nodes) >= 2000
    path = tmp_path / "llama.html"
    path.write_text(render_html(analysis), encoding="utf-8")
    size = path.stat().st_size
    opened = Opened(browser, path)
    assert size < 5e6
    assert float(opened.page.evaluate("document.documentElement.dataset.renderMs")) >= 0  # the script finished
    page = opened.page
    assert page.locator("#roofline circle.pt").count() == len(analysis.kernels)
    assert len(analysis.kernels) > 300
    assert page.locator("#kernels tbody tr").count() == 150  # a page of rows; the rest on scroll or on request
    page.locator("#more").dispatch_event("click")  # (a real click scrolls the table, which loads more too)
    assert page.locator("#kernels tbody tr").count() == 300
    page.eval_on_selector(".table-wrap", "w => { w.scrollTop = w.scrollHeight; }")
    opened.wait_until(f"document.querySelectorAll('#kernels tbody tr').length === {min(450, len(analysis.kernels))}")
    page.fill("#filter", "lm_head")
    opened.wait_until("document.getElementById('count').textContent.includes(' of ')")
    assert page.locator("#kernels tbody tr").count() == sum(
        "lm_head" in n.name for k in analysis.kernels for n in analysis.nodes if n.id in k.node_ids
    )
    assert page.locator("#more").is_hidden()
    assert opened.errors == []
    opened.page.close()


def test_measured_points_beside_the_predicted_ones(browser, pages) -> None:
    path, analysis = pages["measured"]
    opened = Opened(browser, path)
    page = opened.page
    assert opened.errors == [] and [m for m in opened.console if m.startswith(("error", "warning"))] == []
    assert page.locator("#roofline circle.pt").count() == len(analysis.kernels)
    drawn = [i for i, k in enumerate(analysis.kernels[:-1]) if k.flops > 0]
    assert page.locator("#roofline path.mpt").count() == len(drawn) > 0
    index = max(drawn, key=lambda i: analysis.kernels[i].latency_s)
    circle = page.locator(f'#roofline circle.pt[data-i="{index}"]')
    diamond = page.locator(f'#roofline path.mpt[data-i="{index}"]')
    x, y = float(circle.get_attribute("cx")), float(circle.get_attribute("cy"))
    start = re.match(r"M([-\d.]+),([-\d.]+)", diamond.get_attribute("d"))
    assert float(start.group(1)) == pytest.approx(x, abs=0.11)  # the same intensity
    assert float(start.group(2)) > y  # slower than predicted: lower on the chart
    assert "measured (onnxruntime)" in page.locator("#legend").text_content()

    diamond.dispatch_event("pointermove", {"bubbles": True, "clientX": 300, "clientY": 300})
    text = page.locator("#tip").text_content()
    for expected in ("measured in onnxruntime", "predicted", f"{SLOWER:g}×", "slower than predicted", "achieved"):
        assert expected in text, expected

    headers = page.eval_on_selector_all("#kernels th", "hs => hs.map(h => h.textContent)")
    assert headers[-2:] == ["measured", "ratio"]
    page.click("th[data-key=ratio]")
    ratios = page.eval_on_selector_all("#kernels tbody tr", "rs => rs.map(r => r.lastChild.textContent)")
    assert ratios[0] == f"{SLOWER:g}×" and ratios[-1] == "–"  # the unmeasured kernel last
    page.click("button[data-colour=bound]")
    strokes = page.eval_on_selector_all("#roofline path.mpt", "ps => ps.map(p => p.getAttribute('stroke'))")
    assert set(strokes) <= set(BOUND_COLOURS.values())
    assert opened.errors == []
    page.close()


def test_hostile_measured_names_run_nothing(browser, pages) -> None:
    path, _ = pages["hostile-measured"]
    opened = Opened(browser, path)
    page = opened.page
    for diamond in page.locator("#roofline path.mpt").all():
        diamond.dispatch_event("pointermove", {"bubbles": True, "clientX": 200, "clientY": 200})
    page.fill("#filter", "script")
    opened.wait_until("document.getElementById('count').textContent.includes(' of ')")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert opened.dialogs == [] and opened.errors == []
    assert page.locator("script").count() == 3
    page.close()


# ------------------------------------------------------------------------------------------- screenshots


def take_screenshots(folder: Path) -> None:
    """The README screenshots on Xavier: light ResNet-50 (summary and roofline) and the tiny transformer at
    batch=1, seq=128 (a tooltip, time by op type, fusion bounds, bottlenecks)."""
    from PIL import Image
    from playwright.sync_api import sync_playwright

    def box(page, selector: str) -> dict:
        return page.locator(selector).bounding_box()

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
        for name, model, dims in (
            ("report-resnet50.png", LIGHT / "light_resnet50.onnx", {}),
            ("report-tiny-transformer.png", TRANSFORMER, {"batch": 1, "seq": 128}),
        ):
            html = folder / (name + ".html")
            analysis = analyze(model, "xavier", dims)
            html.write_text(render_html(analysis), encoding="utf-8")
            page = chromium.new_page(viewport={"width": 1280, "height": 2400})
            page.goto(html.as_uri())
            page.wait_for_selector("html[data-ready]")
            if name == "report-resnet50.png":
                clip = {"x": 0, "y": 0, "width": 1280, "height": box(page, "#roofline-panel")["y"] + 1}
                clip["height"] += box(page, "#roofline-panel")["height"] + 16
            else:
                top = box(page, "#roofline-panel")["y"] - 12
                bottom = box(page, "#bottlenecks")["y"] + 430
                slowest = max(analysis.kernels, key=lambda k: k.flops / k.latency_s if k.latency_s else 0)
                point = page.locator(f'#roofline circle.pt[data-i="{analysis.kernels.index(slowest)}"]')
                point.hover(force=True)
                clip = {"x": 0, "y": top, "width": 1280, "height": bottom - top}
            path = folder / name
            page.screenshot(path=str(path), clip=clip)
            if path.stat().st_size > 400_000:  # a UI screenshot loses nothing visible at 256 colours
                Image.open(path).convert("RGB").quantize(256, dither=Image.Dither.NONE).save(path, optimize=True)
            html.unlink()
            page.close()
        chromium.close()


if __name__ == "__main__":
    take_screenshots(Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "docs").resolve())
