"""CLI commands for what-if studies (sweep, compare); registered on the main app when imported.

``onnxroof sweep MODEL -p xavier --dim batch=1,2,4,8 [--dim seq=128]`` (or ``--precision fp32,fp16,int8``) and
``onnxroof compare MODEL -p xavier -p agx-orin -p pim``: a table, ``--format json|csv``, and ``--chart FILE``
(PNG, SVG or PDF). Exit codes as everywhere: 0 success, 2 bad input or usage, 3 an internal error.
"""

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple

import typer

from onnxroof.cli.common import (
    CompressOption,
    DebugOption,
    DensityFileOption,
    DensityOption,
    DimOption,
    FusionOption,
    OutputOption,
    PeakOption,
    PlatformOption,
    RuntimeOption,
    ShapeOption,
    SkipOption,
    TimeModelOption,
    app,
    emit,
    exit_on_errors,
    shape_options,
)
from onnxroof.core.errors import OnnxroofError
from onnxroof.core.files import write_atomically

if TYPE_CHECKING:  # rich, the chart's and the warnings' machinery are imported where they are used (_deliver)
    from rich.console import Console


class TableFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


_SUFFIXES = {".json": TableFormat.json, ".csv": TableFormat.csv, ".txt": TableFormat.table}

FormatOption = Annotated[
    TableFormat | None,
    typer.Option("--format", "-f", help="table (default), json or csv; default from -o's suffix."),
]
ChartOption = Annotated[
    Path | None, typer.Option("--chart", help="Also draw a chart to this file: .png, .svg or .pdf.", show_default=False)
]
TitleOption = Annotated[str | None, typer.Option(help="Chart title (default: the model and platform).")]
ModelArgument = Annotated[Path, typer.Argument(help="The ONNX model file.", show_default=False)]


def _chosen(output_format: TableFormat | None, output: Path | None) -> TableFormat:
    return output_format or (_SUFFIXES.get(output.suffix.lower()) if output else None) or TableFormat.table


class Renderers(NamedTuple):
    """How one what-if result is drawn (chart bytes), written (JSON, CSV) and shown (a terminal table)."""

    chart: Callable[[Any, str, str | None], bytes]
    json: Callable[[Any], str]
    csv: Callable[[Any], str]
    table: Callable[[Any, "Console"], None]


def _deliver(
    result: Any, render: Renderers, chosen: TableFormat, output: Path | None, chart: Path | None, title: str | None
) -> None:
    """Warnings to stderr, the chart (drawn before anything is written), then the chosen format.

    The chart's module (with the HTML page's machinery: jinja2, the measured overlay; ~30 ms) is imported only for
    ``--chart``, rich and the console renderer (~29 ms) only when there are warnings to print."""
    image = None
    if chart is not None:
        from onnxroof.report.plot import plot_format

        image = render.chart(result, plot_format(chart), title)
    if result.warnings:
        from rich.console import Console

        from onnxroof.report.console import render_warnings

        render_warnings(result.warnings, Console(stderr=True, highlight=False))
    if chart is not None and image is not None:
        write_atomically(chart, image)
    if chosen is TableFormat.json:
        emit(render.json(result), output)
    elif chosen is TableFormat.csv:
        emit(render.csv(result), output)
    else:
        emit(lambda console: render.table(result, console), output)


def _study(
    run: Callable[[], Any],
    render: Renderers,
    output_format: TableFormat | None,
    output: Path | None,
    chart: Path | None,
    title: str | None,
    debug: bool,
) -> None:
    """One what-if study: check the targets are writable, ``run`` it, then deliver the chosen format."""
    with exit_on_errors(debug):
        chosen = _chosen(output_format, output)
        _check_targets(output, chart)
        _deliver(run(), render, chosen, output, chart, title)


def _check_targets(output: Path | None, chart: Path | None) -> None:
    """Fail before any work on an output or chart path that cannot be written, or a chart suffix not drawable."""
    if chart is not None:
        from onnxroof.report.plot import plot_format

        plot_format(chart)
    _writable(output)
    _writable(chart)


def _writable(path: Path | None) -> None:
    """Fail before any work when ``path`` cannot be written (a folder, or in a folder that does not exist)."""
    if path is None:
        return
    path = path.expanduser()
    if path.is_dir():
        raise OnnxroofError(f"{path}: is a folder; give a file name to write to")
    if not path.parent.exists():
        raise OnnxroofError(f"{path}: folder '{path.parent}' does not exist")


@app.command()
def sweep(
    model: ModelArgument,
    platform: PlatformOption = "xavier",
    dim: Annotated[
        list[str] | None,
        typer.Option(
            "--dim",
            "-d",
            help="Bind a symbolic dim: NAME=VALUE, or NAME=V1,V2,... to sweep it (one dim at a time). Repeatable.",
            metavar="NAME=VALUE[,VALUE...]",
        ),
    ] = None,
    shape: ShapeOption = None,
    precision: Annotated[
        str | None,
        typer.Option(help="Re-cost in this precision; a comma list (fp32,fp16,int8) sweeps the precision instead."),
    ] = None,
    density: DensityOption = None,
    density_file: DensityFileOption = None,
    compress_mem: CompressOption = False,
    skip_compute: SkipOption = False,
    peak: PeakOption = False,
    time_model: TimeModelOption = None,
    fusion: FusionOption = None,
    runtime: RuntimeOption = None,
    output_format: FormatOption = None,
    output: OutputOption = None,
    chart: ChartOption = None,
    title: TitleOption = None,
    debug: DebugOption = False,
) -> None:
    """Sweep one symbolic dim (batch, seq...) or the precision: latency, throughput, intensity, energy per value."""
    from onnxroof.analysis.whatif import whatif_options
    from onnxroof.report.sweep_view import (
        render_sweep_chart,
        render_sweep_csv,
        render_sweep_json,
        render_sweep_table,
    )
    from onnxroof.studies.sweep import parse_precisions, parse_sweep_dims
    from onnxroof.studies.sweep import sweep as run_sweep

    def run() -> Any:
        fixed, swept, values = parse_sweep_dims(dim or [])
        precisions = parse_precisions(precision)
        return run_sweep(
            model,
            platform,
            fixed,
            shapes=shape_options(shape),
            dim=swept,
            values=values,
            precisions=precisions if len(precisions) > 1 else (),
            precision=precisions[0] if len(precisions) == 1 else None,
            fusion=fusion,
            runtime=runtime,
            whatif=whatif_options(density, density_file, compress_mem, skip_compute, peak=peak, time_model=time_model),
        )

    renderers = Renderers(render_sweep_chart, render_sweep_json, render_sweep_csv, render_sweep_table)
    _study(run, renderers, output_format, output, chart, title, debug)


@app.command()
def compare(
    model: ModelArgument,
    platform: Annotated[
        list[str] | None,
        typer.Option(
            "--platform",
            "-p",
            help="A bundled platform name or a platform TOML file; repeat for each platform to compare.",
        ),
    ] = None,
    dim: DimOption = None,
    shape: ShapeOption = None,
    precision: Annotated[
        str | None, typer.Option(help="Re-cost every platform as if run in this precision (fp32, fp16, int8...).")
    ] = None,
    density: DensityOption = None,
    density_file: DensityFileOption = None,
    compress_mem: CompressOption = False,
    skip_compute: SkipOption = False,
    peak: PeakOption = False,
    time_model: TimeModelOption = None,
    fusion: FusionOption = None,
    runtime: RuntimeOption = None,
    output_format: FormatOption = None,
    output: OutputOption = None,
    chart: ChartOption = None,
    title: TitleOption = None,
    debug: DebugOption = False,
) -> None:
    """Compare MODEL across platforms: latency, throughput, energy, bound mix and top kernel on each."""
    from onnxroof.analysis.whatif import whatif_options
    from onnxroof.load.reader import parse_dim_bindings
    from onnxroof.report.compare_view import (
        render_compare_chart,
        render_compare_csv,
        render_compare_json,
        render_compare_table,
    )
    from onnxroof.studies.compare import compare as run_compare

    def run() -> Any:
        if not platform:
            raise OnnxroofError("give the platforms to compare: --platform NAME, repeated (e.g. -p xavier -p h100)")
        return run_compare(
            model,
            platform,
            parse_dim_bindings(dim or []),
            shapes=shape_options(shape),
            precision=precision,
            fusion=fusion,
            runtime=runtime,
            whatif=whatif_options(density, density_file, compress_mem, skip_compute, peak=peak, time_model=time_model),
        )

    renderers = Renderers(render_compare_chart, render_compare_json, render_compare_csv, render_compare_table)
    _study(run, renderers, output_format, output, chart, title, debug)
