"""CLI commands for measured truth (calibrate, profile); registered on the main app when imported.

``onnxroof calibrate [-o host.toml] [--quick] [--threads N]`` measures this host with onnxruntime
micro-benchmarks and writes a platform file marked as measured (stdout without ``-o``); ``--device cuda``
measures CUDA GPU 0 with PyTorch instead (``onnxroof[torch]``; one line and exit 2 without a CUDA device).
``onnxroof profile MODEL --platform host.toml [-d NAME=VALUE]`` runs MODEL in onnxruntime with profiling and
compares measured per-kernel and end-to-end times with onnxroof's prediction (a table, or ``--format json``);
``--html OUT.html`` also writes the HTML report with the measured points on its roofline (as
``onnxroof report MODEL --profile PROF.json --format html`` does from a saved profile).
Exit codes as everywhere: 0 success, 2 bad input or usage, 3 an internal error.
"""

import sys
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
    RuntimeOption,
    ShapeOption,
    app,
    emit,
    exit_on_errors,
    progress_bar,
    shape_options,
)
from onnxroof.core.errors import OnnxroofError
from onnxroof.core.files import write_atomically


class Device(StrEnum):
    cpu = "cpu"
    cuda = "cuda"


class ProfileFormat(StrEnum):
    table = "table"
    json = "json"


ThreadsOption = Annotated[
    int | None,
    typer.Option(help="onnxruntime intra-op threads (default: calibrate, every CPU; profile, the platform's).", min=1),
]


@app.command()
def calibrate(
    output: OutputOption = None,
    quick: Annotated[
        bool, typer.Option("--quick", help="Short runs (a few seconds): indicative figures only.")
    ] = False,
    threads: ThreadsOption = None,
    name: Annotated[
        str | None,
        typer.Option(help="The platform name written to the file (default: host; with --device cuda, cuda)."),
    ] = None,
    device: Annotated[
        Device,
        typer.Option(
            help="cpu: this host with onnxruntime; cuda: CUDA GPU 0 with PyTorch (pip install 'onnxroof[torch]')."
        ),
    ] = Device.cpu,
    debug: DebugOption = False,
) -> None:
    """Measure this host (onnxruntime) or a CUDA GPU (PyTorch) with micro-benchmarks; write a measured platform TOML."""
    from onnxroof.measure.calibrate.calibrator import calibrate as run_calibration
    from onnxroof.measure.calibrate.cuda import measure_cuda, require_cuda
    from onnxroof.platform.lookup import load_platform
    from onnxroof.report.measure_view import render_calibration, render_cuda_calibration

    err = Console(stderr=True, highlight=False)
    with exit_on_errors(debug):
        if output is not None and output.is_dir():  # fail before a minute of measuring, not after
            raise OnnxroofError(f"{output}: is a folder; give a file name to write to")
        if device is Device.cuda:
            require_cuda()  # one line, before anything is measured
        with progress_bar("calibrating", paths=False) as progress:
            measured = (
                measure_cuda(name=name or "cuda", quick=quick)
                if device is Device.cuda
                else run_calibration(threads=threads, quick=quick, progress=progress, name=name or "host")
            )
        text = measured.to_toml()
        if output is None:
            sys.stdout.write(text)
        else:
            write_atomically(output, text)
            if output.is_file():
                load_platform(output)  # what we wrote must load
        if device is Device.cuda:
            render_cuda_calibration(measured, err, output)
        else:
            render_calibration(measured, err, output)


@app.command()
def profile(
    model: Annotated[Path, typer.Argument(help="The ONNX model file.", show_default=False)],
    platform: Annotated[
        str,
        typer.Option(
            "--platform", "-p", help="A measured platform TOML (from `onnxroof calibrate`) or a bundled name."
        ),
    ],
    dim: DimOption = None,
    shape: ShapeOption = None,
    threads: ThreadsOption = None,
    runs: Annotated[int, typer.Option(help="Profiled runs (after 3 warm-up runs).", min=1)] = 20,
    seconds: Annotated[float, typer.Option(help="Seconds of unprofiled runs timed end to end.", min=0.05)] = 1.0,
    fusion: FusionOption = None,
    runtime: RuntimeOption = None,
    output_format: Annotated[
        ProfileFormat | None,
        typer.Option("--format", "-f", help="table (default) or json; default from -o's suffix."),
    ] = None,
    output: OutputOption = None,
    top: Annotated[int, typer.Option(help="How many rows (by measured time) the table shows.", min=1)] = 20,
    html: Annotated[
        Path | None,
        typer.Option(
            "--html", help="Also write the HTML report with the measured points beside the predicted ones here."
        ),
    ] = None,
    debug: DebugOption = False,
) -> None:
    """Run MODEL in onnxruntime and compare measured per-kernel and end-to-end times with the prediction."""
    from onnxroof.load.reader import parse_dim_bindings
    from onnxroof.measure.profile.profiler import profile as run_profile
    from onnxroof.report.console import render_warnings
    from onnxroof.report.measure_view import render_profile, render_profile_html, render_profile_json

    with exit_on_errors(debug):
        if html is not None and html.is_dir():  # fail before profiling, not after
            raise OnnxroofError(f"{html}: is a folder; give a file name to write to")
        suffix = output.suffix.lower() if output else ""
        chosen = output_format or (ProfileFormat.json if suffix == ".json" else ProfileFormat.table)
        result = run_profile(
            model,
            platform=platform,
            dims=parse_dim_bindings(dim or []),
            shapes=shape_options(shape),
            threads=threads,
            profiled_runs=runs,
            wall_budget_s=seconds,
            fusion=fusion,
            runtime=runtime,
        )
        render_warnings(result.warnings, Console(stderr=True, highlight=False))
        if html is not None:
            write_atomically(html, render_profile_html(result))
        if chosen is ProfileFormat.json:
            emit(render_profile_json(result), output)
        else:
            emit(lambda console: render_profile(result, console, top), output)
