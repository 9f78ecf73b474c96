"""CLI commands for visual reports (plot, graph); registered on the main app when imported.

``onnxroof plot MODEL -p xavier [-p orin ...] -o roofline.png`` draws the roofline (PNG, SVG or PDF, from the
suffix; ``--kind floorline`` the energy floorline of one platform); ``onnxroof graph MODEL --format
netron|onnx|dot|svg -o OUT`` writes an annotated graph. Exit codes as everywhere: 0 success, 2 bad input or
usage, 3 an internal error.
"""

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from onnxroof.cli.common import (
    DebugOption,
    DimOption,
    FusionOption,
    OutputOption,
    PeakOption,
    PeakPrecisionOption,
    PlatformOption,
    RuntimeOption,
    ShapeOption,
    TimeModelOption,
    app,
    chosen_format,
    default_platforms,
    emit,
    exit_on_errors,
    shape_options,
)
from onnxroof.core.errors import OnnxroofError
from onnxroof.core.files import write_atomically
from onnxroof.core.states import TimeModelKind


class GraphFormat(StrEnum):
    netron = "netron"
    onnx = "onnx"
    dot = "dot"
    svg = "svg"


class PlotKind(StrEnum):
    roofline = "roofline"
    floorline = "floorline"


_GRAPH_SUFFIXES = {
    ".json": GraphFormat.netron,
    ".onnx": GraphFormat.onnx,
    ".dot": GraphFormat.dot,
    ".gv": GraphFormat.dot,
    ".svg": GraphFormat.svg,
}

PlatformsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--platform",
        "-p",
        help="A bundled platform name or a platform TOML file; repeat to draw several platforms in one chart.",
    ),
]


def _analyze(
    model: Path,
    platforms: list[str],
    dim: list[str] | None,
    precision: str | None,
    fusion: str | None,
    shape: list[str] | None = None,
    peak: bool = False,
    time_model: TimeModelKind | None = None,
    runtime: str | None = None,
):
    """One analysis per platform; their warnings on stderr, each once."""
    from onnxroof.analysis.analyze import analyze
    from onnxroof.analysis.whatif import WhatIf
    from onnxroof.load.reader import parse_dim_bindings
    from onnxroof.report.console import render_warnings

    dims = parse_dim_bindings(dim or [])
    shapes = shape_options(shape)
    analyses = [
        analyze(
            model,
            p,
            dims,
            shapes=shapes,
            whatif=WhatIf(precision=precision, peak=peak, time_model=time_model),
            fusion=fusion,
            runtime=runtime,
        )
        for p in platforms
    ]
    warnings = tuple(dict.fromkeys(w for a in analyses for w in a.warnings))
    render_warnings(warnings, Console(stderr=True, highlight=False))
    return analyses


@app.command()
def plot(
    model: Annotated[Path, typer.Argument(help="The ONNX model file.", show_default=False)],
    output: Annotated[
        Path, typer.Option("--output", "-o", help="The image to write: .png, .svg or .pdf.", show_default=False)
    ],
    platform: PlatformsOption = None,
    dim: DimOption = None,
    shape: ShapeOption = None,
    precision: PeakPrecisionOption = None,
    fusion: FusionOption = None,
    runtime: RuntimeOption = None,
    peak: PeakOption = False,
    time_model: TimeModelOption = None,
    title: Annotated[str | None, typer.Option(help="Chart title (default: the model and platform).")] = None,
    kind: Annotated[
        PlotKind,
        typer.Option(
            "--kind",
            help="roofline (FLOP/s against intensity), or floorline (energy per operation against intensity: one "
            "platform with energy figures).",
        ),
    ] = PlotKind.roofline,
    debug: DebugOption = False,
) -> None:
    """Draw MODEL's kernels on the roofline of one or several platforms (PNG, SVG or PDF); --kind floorline
    draws energy per operation on one platform's floorline instead."""
    from onnxroof.report.plot import plot_format, render_plot

    with exit_on_errors(debug):
        fmt = plot_format(output)
        chosen = default_platforms(platform)
        if kind is PlotKind.floorline:
            from onnxroof.report.floorline import render_floorline

            if len(chosen) > 1:
                raise OnnxroofError("--kind floorline draws one platform: give one --platform")
            (analysis,) = _analyze(model, chosen, dim, precision, fusion, shape, peak, time_model, runtime)
            write_atomically(output, render_floorline(analysis, fmt, title))
            return
        analyses = _analyze(model, chosen, dim, precision, fusion, shape, peak, time_model, runtime)
        write_atomically(output, render_plot(analyses, fmt, title))


@app.command()
def graph(
    model: Annotated[Path, typer.Argument(help="The ONNX model file.", show_default=False)],
    platform: PlatformOption = "xavier",
    dim: DimOption = None,
    shape: ShapeOption = None,
    precision: PeakPrecisionOption = None,
    fusion: FusionOption = None,
    runtime: RuntimeOption = None,
    output_format: Annotated[
        GraphFormat | None,
        typer.Option(
            "--format",
            "-f",
            help="netron (a netron:attachment JSON), onnx (annotated copy), dot or svg; default from -o's suffix.",
        ),
    ] = None,
    output: OutputOption = None,
    debug: DebugOption = False,
) -> None:
    """Write MODEL's graph annotated with every node's figures: for Netron, as ONNX, or for Graphviz."""
    from onnxroof.report import graph as annotate

    with exit_on_errors(debug):
        chosen = chosen_format(output_format, output, _GRAPH_SUFFIXES)
        if chosen is None:
            raise OnnxroofError("give --format netron, onnx, dot or svg (or an -o file ending in one of those)")
        if chosen is GraphFormat.onnx and output is None:
            raise OnnxroofError("--format onnx writes a model file: give -o FILE.onnx")
        if chosen is GraphFormat.svg:
            annotate.require_dot()  # fail on a missing 'dot' before the analysis runs
        (analysis,) = _analyze(model, [platform], dim, precision, fusion, shape, runtime=runtime)
        if chosen is GraphFormat.netron:
            emit(annotate.render_netron(analysis), output)
        elif chosen is GraphFormat.dot:
            emit(annotate.render_dot(analysis), output)
        elif chosen is GraphFormat.svg:
            emit(annotate.render_svg(annotate.render_dot(analysis)), output)
        else:
            assert output is not None  # refused above: --format onnx needs -o FILE.onnx
            annotated = annotate.annotated_model(analysis)
            write_atomically(output, annotated.SerializeToString())
            _warn_external_data(annotated, model, output)


def _warn_external_data(annotated, model: Path, output: Path) -> None:
    """External weights are referenced relative to the model's folder: say so when the copy lands elsewhere."""
    from onnxroof.report.graph import external_data_files

    files = external_data_files(annotated)
    if files and model.resolve().parent != output.resolve().parent:
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            f"warning: the annotated model refers to its weights in {', '.join(files)} next to it; "
            f"they are in {model.resolve().parent}, so copy it there to load the weights",
            markup=False,
        )
