"""`report`: one model on one platform. The listings (`platforms`, `runtimes`, `rules`, `inspect`) are in
:mod:`onnxroof.cli.listings`, so that a report builds the typer options of its own command only."""

from pathlib import Path
from typing import Annotated

import typer

from onnxroof.analysis.select import TableLevel
from onnxroof.cli.common import (
    REPORT_SUFFIXES,
    CompressOption,
    DebugOption,
    DensityFileOption,
    DensityOption,
    DimOption,
    FusionOption,
    OutputOption,
    PeakOption,
    PlatformOption,
    PrecisionOption,
    ReportFormat,
    RuntimeOption,
    ShapeOption,
    SkipOption,
    TimeModelOption,
    app,
    chosen_format,
    emit,
    exit_on_errors,
    shape_options,
)


@app.command()
def report(
    model: Annotated[Path, typer.Argument(help="The ONNX model file.", show_default=False)],
    platform: PlatformOption = "xavier",
    dim: DimOption = None,
    shape: ShapeOption = None,
    precision: PrecisionOption = None,
    density: DensityOption = None,
    density_file: DensityFileOption = None,
    compress_mem: CompressOption = False,
    skip_compute: SkipOption = False,
    peak: PeakOption = False,
    time_model: TimeModelOption = None,
    output_format: Annotated[
        ReportFormat | None,
        typer.Option("--format", "-f", help="table (default), json or csv; default from -o's suffix."),
    ] = None,
    output: OutputOption = None,
    top: Annotated[
        int | None,
        typer.Option(help="How many kernels the table lists (default 15); with csv, only the N slowest rows.", min=1),
    ] = None,
    level: Annotated[
        TableLevel,
        typer.Option(help="csv: one row per node, or per kernel the runtime launches (their times sum to the total)."),
    ] = TableLevel.nodes,
    op: Annotated[
        list[str] | None,
        typer.Option("--op", help="table/csv: only kernels (nodes) of this op type; repeatable.", metavar="OP"),
    ] = None,
    exclude_op: Annotated[
        list[str] | None,
        typer.Option("--exclude-op", help="table/csv: leave out this op type; repeatable.", metavar="OP"),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option("--name", help="table/csv: only rows whose node name or id matches this regex.", metavar="REGEX"),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="table: every finding with its message, not one line per kind.")
    ] = False,
    strict: Annotated[
        bool, typer.Option(help="Fail (exit 2) if any node is unsupported or has no static shape.")
    ] = False,
    fusion: FusionOption = None,
    runtime: RuntimeOption = None,
    explain_fusion: Annotated[
        bool, typer.Option("--explain-fusion", help="List every fusion candidate that did not fuse, and why.")
    ] = False,
    profile: Annotated[
        Path | None,
        typer.Option(
            "--profile",
            help="A JSON file from `onnxroof profile --format json`: measured times beside the prediction "
            "(html: chart and table; json: a `measured` section; the table and csv ignore them).",
        ),
    ] = None,
    debug: DebugOption = False,
) -> None:
    """Cost every operator of MODEL and place it on the platform's roofline."""
    from onnxroof.analysis.analyze import analyze
    from onnxroof.analysis.select import RowFilter, only_for
    from onnxroof.analysis.whatif import whatif_options
    from onnxroof.load.reader import parse_dim_bindings
    from onnxroof.report.data import json_chunks, render_csv

    with exit_on_errors(debug):
        chosen = chosen_format(output_format, output, REPORT_SUFFIXES, ReportFormat.table)
        rows = RowFilter.of(op, exclude_op, name, top)
        only_for(chosen in (ReportFormat.table, ReportFormat.csv), rows, level, "table and csv formats")
        analysis = analyze(
            model,
            platform=platform,
            dims=parse_dim_bindings(dim or []),
            shapes=shape_options(shape),
            strict=strict,
            fusion=fusion,
            runtime=runtime,
            whatif=whatif_options(density, density_file, compress_mem, skip_compute, precision, peak, time_model),
        )
        measured = None
        if profile is not None:
            from onnxroof.measure.overlay import load_overlay

            measured = load_overlay(profile, analysis)
        warnings = analysis.warnings + (measured.warnings if measured is not None else ())
        if warnings:
            from rich.console import Console

            from onnxroof.report.console import render_warnings

            render_warnings(warnings, Console(stderr=True, highlight=False))
        if chosen is ReportFormat.json and measured is None:
            emit(json_chunks(analysis), output)
        elif chosen is ReportFormat.json:
            from onnxroof.report.measure_view import render_measured_json  # with the HTML page's machinery

            emit(render_measured_json(analysis, measured), output)
        elif chosen is ReportFormat.csv:
            picked = (
                (rows.kernels(analysis) if level is TableLevel.kernels else rows.nodes(analysis))
                if rows.active
                else None
            )
            emit(render_csv(analysis, level, picked), output)
        elif chosen is ReportFormat.html:
            from onnxroof.report.html import render_html

            emit(render_html(analysis, measured), output)
        else:
            from onnxroof.report.console import render_console

            emit(
                lambda console: render_console(
                    analysis, console, top or 15, explain_fusion, rows=rows, verbose=verbose
                ),
                output,
            )
