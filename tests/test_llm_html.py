"""``onnxroof llm -o page.html`` (issue 24): the page in the report's design (its interactive roofline with tooltips,
its kernel table, the roofs used) for the decode step, the LLM's figures above it, numbers formatted as the report
formats them; checked as text and in the real browser the suite drives (skipped, saying why, without one)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from test_html import CHROMIUM_ARGS, Opened, browser, find_chromium, script_blocks  # noqa: F401  (browser: fixture)

from onnxroof.report.html import render_html
from onnxroof.report.llm_view import render_llm_html
from onnxroof.studies.llm import LLMResult, llm

ROOT = Path(__file__).resolve().parent.parent
GENAI = ROOT / "samples" / "llm" / "genai_llama_int4" / "model.onnx"

assert CHROMIUM_ARGS and find_chromium is not None  # the browser fixture's helpers, shared with test_html


@cache
def _result() -> LLMResult:
    return llm(GENAI, "a100", prompt=64, generate=16, batch=4, max_tpot_s=0.0002)


@cache
def _page() -> str:
    return render_llm_html(_result())


def test_the_page_is_the_reports_design_with_the_llm_figures_above() -> None:
    page, result = _page(), _result()
    report = render_html(result.analyses[-1])
    # the report's own script, stylesheet and CSP, unchanged: the LLM part adds no script and no style
    assert script_blocks(page) == script_blocks(report)
    csp = re.compile(r'http-equiv="Content-Security-Policy" content="([^"]+)"')
    assert csp.findall(page) == csp.findall(report) and len(csp.findall(page)) == 1
    assert page.count("<style>") == 1 and 'id="roofline"' in page and 'id="kernels"' in page
    summary = page[page.index('id="llm-summary"') : page.index('id="llm-decode-report"')]
    assert "<script" not in summary and "<style" not in summary and "<img" not in summary  # no matplotlib PNG
    # tokens/s labelled and formatted as the report formats numbers (thousands, not 3.24e+03)
    assert "Tokens/s per sequence" in summary and "Tokens/s aggregate" in summary
    assert "e+0" not in summary
    per_sequence = f"{float(f'{result.tokens_per_s_per_sequence:.3g}'):,.0f}"
    assert f'id="llm-per-sequence">{per_sequence}<' in summary
    assert f'id="llm-aggregate">{float(f"{result.tokens_per_s_aggregate:.3g}"):,.0f}<' in summary
    # the slowest kernels named by their layer's node, not by a bare op type that repeats in every layer
    named = re.findall(r"/model/layers\.\d+/[\w./]+", summary)
    assert len(named) >= 2 and all(name.split("/")[-1] for name in named)
    assert 'id="llm-search"' in summary and "largest batch with time per token" in summary
    assert "<title>LLM serving: model.onnx on a100" in page


def test_the_page_in_a_browser(browser, tmp_path: Path) -> None:  # noqa: F811  (the fixture imported above)
    path = tmp_path / "llm.html"
    path.write_text(_page(), encoding="utf-8")
    opened = Opened(browser, path)
    assert opened.errors == [] and [m for m in opened.console if m.startswith(("error", "warning"))] == []
    assert all(url.startswith("file://") for url in opened.requests), opened.requests
    page, decode = opened.page, _result().analyses[-1]
    assert page.locator("#roofline circle.pt").count() == len(decode.kernels)  # one point per decode kernel
    assert page.locator("#kernels tbody tr").count() == len(decode.kernels)
    assert page.locator("#llm-summary .kpi").count() == 6
    assert page.locator("#llm-steps tbody tr").count() == 1 + len(_result().decode)
    assert page.locator("svg circle.step").count() == len(_result().decode)  # the token-time chart's steps
    point = page.locator("#roofline circle.pt").first
    point.hover(force=True)  # the report's tooltip works on this page too
    tip = page.locator("#tip")
    assert tip.is_visible() and "FLOPs" in tip.text_content()
    assert opened.errors == []
    page.close()
