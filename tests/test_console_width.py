"""The terminal report fits the terminal: the top-kernel table drops its least needed columns, never truncates
the figures it keeps, and never runs wider than the console."""

from __future__ import annotations

import io
import re
import shutil
from functools import cache
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

import onnxroof
from onnxroof.platform.lookup import bundled_platforms
from onnxroof.report.columns import short_path
from onnxroof.report.console import op_type_table, render_console, top_columns, top_table
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


# ------------------------------------------------------------------- names never cut, paths from the left

TRANSFORMER = SAMPLE.parent / "tiny_transformer.onnx"


@cache
def _transformer() -> onnxroof.Analysis:
    return onnxroof.analyze(TRANSFORMER, "xavier", dims={"batch": 1, "seq": 32})


def _first_column(lines: list[str], first: str) -> str:
    """The text of a SIMPLE_HEAD table's first column (header starting ``first``), its rows' lines and fold
    continuations joined in order: a name cut with "…" or lost to the width would differ. Cells are
    separated by at least two spaces; names hold none."""
    start = next(i for i, line in enumerate(lines) if line.split()[: len(first.split())] == first.split())
    cells: list[str] = []
    for line in lines[start + 2 :]:
        if not line.strip():
            break
        cells.append(re.split(r"\s{2,}", line.strip())[0])
    return "".join(cells)


@settings(max_examples=20, deadline=None)
@given(width=st.integers(min_value=60, max_value=160))
def test_top_kernel_names_fold_but_are_never_cut(width: int) -> None:
    analysis = _transformer()
    console = Console(width=width, record=True, color_system=None, force_terminal=True, file=io.StringIO())
    console.print(top_table(analysis, 8, width=width))
    lines = console.export_text().splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width
    assert _first_column(lines, "kernel") == "".join(k.node_ids[0] for k in analysis.top_kernels(8))
    assert "time" in lines[2].split()


@settings(max_examples=20, deadline=None)
@given(width=st.integers(min_value=40, max_value=160))
def test_op_type_names_are_never_cut_and_the_figures_kept_are_whole(width: int) -> None:
    analysis = _transformer()
    console = Console(width=width, record=True, color_system=None, force_terminal=True, file=io.StringIO())
    console.print(op_type_table(analysis, width))
    lines = console.export_text().splitlines()
    assert max(len(line.rstrip()) for line in lines) <= width
    body = [line for line in lines[4:] if line.strip()][: len(analysis.op_types)]
    assert all("…" not in line for line in body), body
    expected = [f"{r.domain}::{r.op_type}" if r.domain else r.op_type for r in analysis.op_types]
    assert _first_column(lines, "op type") == "".join(expected)
    header = next(line for line in lines if line.split()[:2] == ["op", "type"]).split()
    assert "time" in header and "share" in header


def test_output_that_is_not_a_terminal_keeps_whole_names_on_one_line(tmp_path: Path) -> None:
    analysis = _transformer()
    console = Console(width=80, record=True, color_system=None, force_terminal=False, file=io.StringIO())
    render_console(analysis, console, top=6)
    text = console.export_text()
    longest = max(analysis.top_kernels(6), key=lambda k: len(k.node_ids[0])).node_ids[0]
    assert len(longest) > 40
    for kernel in analysis.top_kernels(6):
        assert any(line.lstrip().startswith(kernel.node_ids[0] + " ") for line in text.splitlines())
    assert "…" not in "".join(line.split()[0] for line in text.splitlines() if re.match(r"\s+\d+:/", line))


def test_paths_are_shortened_from_the_left_at_a_folder_boundary() -> None:
    assert short_path("/very/long/tree/samples/x.onnx", 30) == "/very/long/tree/samples/x.onnx"
    assert short_path("/very/long/tree/samples/x.onnx", 20) == "…/samples/x.onnx"
    assert short_path("/very/long/tree/samples/x.onnx", 15) == "…/x.onnx"
    assert short_path("/a/b/a_rather_long_model_name.onnx", 10) == "…/a_rather_long_model_name.onnx"
    assert short_path("C:\\models\\deep\\net.onnx", 15) == "…/deep/net.onnx"


def test_the_report_header_shows_the_end_of_a_long_path_on_a_terminal(tmp_path: Path) -> None:
    deep = tmp_path / ("a" * 40) / ("b" * 40) / "samples"
    deep.mkdir(parents=True)
    model = deep / "tiny_cnn.onnx"
    shutil.copy(SAMPLE, model)
    analysis = onnxroof.analyze(model, "xavier", dims={"batch": 1})
    console = Console(width=80, record=True, color_system=None, force_terminal=True, file=io.StringIO())
    render_console(analysis, console, top=3)
    head = console.export_text().splitlines()[1]
    assert f"…/{'b' * 40}/samples/tiny_cnn.onnx" in head and "a" * 40 not in head


def test_an_empty_graph_renders_empty_tables() -> None:
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    model = helper.make_model(helper.make_graph([], "empty", [x], [x]), opset_imports=[helper.make_opsetid("", 17)])
    console = Console(width=80, record=True, color_system=None, file=io.StringIO())
    render_console(onnxroof.analyze(model, "xavier"), console)
    text = console.export_text()
    assert "Time by op type" in text and "Findings: none" in text
