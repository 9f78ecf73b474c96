"""The terminal report fits the terminal: the top-kernel table drops its least needed columns, never truncates
the figures it keeps, and never runs wider than the console."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

import onnxroof
from onnxroof.platform.lookup import bundled_platforms
from onnxroof.report.console import top_columns, top_table
from onnxroof.report.platforms import FIGURE_COLUMNS, platform_cells, platform_columns, render_platforms_table

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


# ------------------------------------------------------------------------------------ platforms listing


def _platform_lines(width: int) -> list[str]:
    console = Console(width=width, record=True, color_system=None)
    render_platforms_table(bundled_platforms(), console)
    return console.export_text().splitlines()


@settings(max_examples=20, deadline=None)
@given(width=st.integers(min_value=60, max_value=220))
def test_platforms_table_fits_one_line_per_platform_and_names_what_it_left_out(width: int) -> None:
    lines = _platform_lines(width)
    assert max(len(line.rstrip()) for line in lines) <= width
    names = [p.name for p in bundled_platforms()]
    rows = [line for line in lines if line.split() and line.split()[0] in names]
    # one row per platform: nothing folds onto a second line, no figure is cut
    assert [row.split()[0] for row in rows] == names
    columns, title_width = platform_columns(bundled_platforms(), width)
    headers = [header for header, _ in FIGURE_COLUMNS]
    for platform, row in zip(bundled_platforms(), rows, strict=True):
        # the row ends with the shown figures, whole (a cut one would end in "…")
        cells = platform_cells(platform)
        figures = " ".join(" ".join(cells[headers.index(c.name)].split()) for c in columns)
        assert " ".join(row.split()).endswith(figures), (width, row)
    footer = " ".join(lines[lines.index(rows[-1]) + 1 :])
    left_out = len(columns) < len(FIGURE_COLUMNS) or not title_width
    assert ("Left out at this width" in footer) == left_out


def test_platform_columns_drop_the_title_first_and_keep_peak_bandwidth_and_ridge() -> None:
    platforms = bundled_platforms()
    wide, wide_title = platform_columns(platforms, 260)
    assert len(wide) == len(FIGURE_COLUMNS) and wide_title >= 20
    narrow, narrow_title = platform_columns(platforms, 60)
    assert narrow_title == 0
    assert {"fp32\nFLOP/s", "DRAM\nB/s", "ridge\nfp32"} <= {c.name for c in narrow} != {c.name for c in wide}
    medium, _ = platform_columns(platforms, 120)
    assert {c.name for c in narrow} <= {c.name for c in medium} <= {c.name for c in wide}
