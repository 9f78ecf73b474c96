"""``onnxroof audit``: a model registry × platforms into one table, on Dask, with a result cache.

Exit codes as ``check``: 0 every row ok; 1 some model violated its budget or could not be analyzed; 2 bad
usage (an unknown platform, a bad budget or manifest, Dask not installed); 3 an internal error; 130 cancelled.
"""

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from onnxroof.cli.common import (
    DebugOption,
    DimOption,
    FusionOption,
    PeakOption,
    RuntimeOption,
    ShapeOption,
    TimeModelOption,
    app,
    default_platforms,
    exit_on_errors,
    fail,
    progress_bar,
    shape_options,
)

EXIT_CANCELLED = 130


@app.command()
def audit(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="ONNX model files, folders searched for *.onnx, or manifests (.csv/.toml) with per-model dims "
            "and budgets.",
            show_default=False,
        ),
    ],
    platform: Annotated[
        list[str] | None,
        typer.Option(
            "--platform", "-p", help="A bundled platform name or a TOML file; repeat for several (default xavier)."
        ),
    ] = None,
    dim: DimOption = None,
    shape: ShapeOption = None,
    precision: Annotated[str | None, typer.Option(help="Cost every node at this precision (fp16, int8...).")] = None,
    fusion: FusionOption = None,
    runtime: RuntimeOption = None,
    peak: PeakOption = False,
    time_model: TimeModelOption = None,
    budget: Annotated[
        Path | None, typer.Option("--budget", "-b", help="A budget TOML file for every model.", show_default=False)
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the table to .parquet, .csv or .json (default: a terminal view)."),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", "-w", help="Processes of the embedded Dask cluster (default: CPUs, at most 4).", min=1
        ),
    ] = None,
    scheduler: Annotated[
        str | None,
        typer.Option(
            help="A running Dask scheduler (tcp://host:8786) or its scheduler file; its workers must see the "
            "model paths (a shared filesystem).",
            metavar="ADDRESS|FILE",
        ),
    ] = None,
    cache: Annotated[
        Path | None, typer.Option(help="The result cache folder (default: ~/.cache/onnxroof).", show_default=False)
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Analyze everything; read and write no cache.")] = False,
    debug: DebugOption = False,
) -> None:
    """Audit the models of PATHS on every --platform into one table (a row per model × platform), on Dask."""
    from onnxroof.fleet.audit import AuditOptions
    from onnxroof.fleet.audit import audit as run_audit
    from onnxroof.fleet.cache import ResultCache, default_cache_dir
    from onnxroof.fleet.engine import choose_engine, require_dask
    from onnxroof.load.dims import parse_dim_bindings
    from onnxroof.report.audit_view import TABLE_SUFFIXES, render_audit_console, summary_line, write_table

    err = Console(stderr=True, highlight=False, soft_wrap=True)
    with exit_on_errors(debug):
        require_dask()
        if output is not None and output.suffix.lower() not in TABLE_SUFFIXES:
            fail(f"-o {output}: the table is written as .parquet, .csv or .json")
        options = AuditOptions(
            platforms=tuple(default_platforms(platform)),
            dims=parse_dim_bindings(dim or []),
            shapes=shape_options(shape),
            precision=precision,
            fusion=fusion,
            runtime=runtime,
            budget=budget,
            peak=peak,
            time_model=time_model,
        )
        engine = choose_engine(workers=workers or min(4, os.cpu_count() or 1), scheduler=scheduler, dask=True)
        try:
            store = ResultCache(None if no_cache else (cache or default_cache_dir()))
            with store, progress_bar("auditing") as progress:
                result = run_audit(paths, options, engine=engine, cache=store, progress=progress)
        except KeyboardInterrupt:
            fail("cancelled: the analyses that finished are in the cache", EXIT_CANCELLED)
        if output is not None:
            write_table(result.table, output)
        else:
            render_audit_console(result, Console())
        if result.unreadable:
            err.print(
                f"error: the Dask workers could not read {result.unreadable} model(s): they need the model files "
                "at the same paths as this machine (a shared filesystem); see the error column",
                markup=False,
            )
        err.print(summary_line(result), markup=False)
    raise typer.Exit(result.exit_code)
