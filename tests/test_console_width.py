"""The terminal report fits the terminal: the top-kernel table drops its least needed columns, never truncates
the figures it keeps, and never runs wider than the console."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

import onnxroof
from onnxroof.report.console import top_columns, top_table

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "tiny_cnn.onnx"


@cache
def _analysis(platform: str) -> onnxroof.Analysis:
    return onnxroof.analyze(SAMPLE, platform, dims={"batch": 1})


def _lines(platform: str, width: int) -> list[str]:
    console = Console(width=width, record=True, color_system=None)
    console.print(top_table(_analysis(platform), 5, width=width))
    return console.export_text().splitlines()


@settings(max_examples=25, deadline=None)
@given(width=st.integers(min_value=70, max_value=200), platform=st.sampled_from(["xavier", "example-digital"]))
def test_top_table_fits_and_keeps_its_figures_whole(width: int, platform: str) -> None:
    lines = _lines(platform, width)
    assert max(len(line.rstrip()) for line in lines) <= width
    header = next(line for line in lines if "ops" in line.split())
    names = header.split()
    for row in lines[lines.index(header) + 2 :]:
        if not row.strip():
            break
        # every cell but the kernel name and the ops string is a figure: none is cut with an ellipsis
        cells = row.split("   ")
        figures = [c for c in cells[2:] if c.strip()]
        assert all("…" not in cell for cell in figures), (width, row)
    assert "time" in names and "bound" in names


def test_columns_drop_in_order_of_need() -> None:
    wide = [c.name for c in top_columns(200, with_array=True)]
    assert wide == ["ops", "output", "FLOPs", "bytes", "FLOP/B", "bound", "PE util", "time", "share"]
    assert "PE util" not in [c.name for c in top_columns(200, with_array=False)]
    narrow = [c.name for c in top_columns(80, with_array=True)]
    assert narrow == ["ops", "FLOPs", "bytes", "bound", "time"]
    # a console too narrow for anything else still gets the ops and the time
    assert [c.name for c in top_columns(20, with_array=True)] == ["ops", "time"]
