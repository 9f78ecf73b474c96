"""User-facing waits that unit tests used to assert and now only measure (timing in tests is flaky on a shared
2-core machine): how long ``onnxroof calibrate --quick`` takes, and how fast a 2,000-node HTML report opens.

``python benchmarks/bench_timings.py [--repeats 3] [--skip-calibrate] [--skip-html]``

* calibrate --quick: wall time of the command in a fresh process (target: under 15 s; it says "a few seconds");
* HTML: a Llama-shaped decoder of 24 layers (hidden 256, ~2,600 nodes, built by :mod:`llama_shaped`), its
  report opened in headless Chromium through playwright: file size, load-to-ready time and the page script's own
  render time (``data-render-ms``); targets: under 5 MB, ready under 2 s, script under 1 s.

Prints the median (min–max) of the repeats. Needs chromium at /usr/bin/chromium (or ONNXROOF_CHROMIUM) and
playwright for the HTML part.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llama_shaped import build_llama_shaped

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


def _summary(values: list[float], unit: str, scale: float = 1.0) -> str:
    scaled = [v * scale for v in values]
    return f"{statistics.median(scaled):.2f} {unit} ({min(scaled):.2f}–{max(scaled):.2f}, n={len(scaled)})"


def bench_calibrate(repeats: int, folder: Path) -> None:
    times = []
    for i in range(repeats):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "onnxroof", "calibrate", "--quick", "-o", str(folder / f"host{i}.toml")],
            check=True,
            capture_output=True,
        )
        times.append(time.perf_counter() - started)
    print(f"calibrate --quick: {_summary(times, 's')} (target < 15 s)")


def bench_html(repeats: int, folder: Path) -> None:
    from playwright.sync_api import sync_playwright

    from onnxroof.analysis.analyze import analyze
    from onnxroof.report.html import render_html

    model = build_llama_shaped(
        folder / "llama.onnx", layers=24, hidden=256, heads=4, kv_heads=4, intermediate=512, vocab=1000
    )
    analysis = analyze(model, "xavier", {"batch": 1, "seq": 128})
    path = folder / "llama.html"
    path.write_text(render_html(analysis), encoding="utf-8")
    executable = os.environ.get("ONNXROOF_CHROMIUM", "/usr/bin/chromium")
    loads, scripts = [], []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        for _ in range(repeats):
            page = browser.new_page(viewport={"width": 1320, "height": 900})
            started = time.perf_counter()
            page.goto(path.as_uri())
            page.wait_for_selector("html[data-ready]", timeout=30_000)
            loads.append(time.perf_counter() - started)
            scripts.append(float(page.evaluate("document.documentElement.dataset.renderMs")) / 1e3)
            page.close()
        browser.close()
    print(
        f"HTML report, {len(analysis.nodes)} nodes / {len(analysis.kernels)} kernels: "
        f"{path.stat().st_size / 1e6:.2f} MB (target < 5 MB); load to ready {_summary(loads, 'ms', 1e3)} "
        f"(target < 2000 ms); page script {_summary(scripts, 'ms', 1e3)} (target < 1000 ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-calibrate", action="store_true")
    parser.add_argument("--skip-html", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="onnxroof-timings-") as name:
        folder = Path(name)
        if not args.skip_calibrate:
            bench_calibrate(args.repeats, folder)
        if not args.skip_html:
            bench_html(args.repeats, folder)


if __name__ == "__main__":
    main()
