"""CLI commands for pre-deployment gatekeeping (check, diff); registered on the main app when imported.

``onnxroof check`` exit codes: 0 every model passes; 1 a limit or a failing finding is violated; 2 bad usage
or bad input (a bad budget or platform stops at once; a model that cannot be read makes its own row say
error and the others still run); 3 an internal error. With several models the worst code wins.
``onnxroof diff``: 0, or 1 when ``--fail-if-slower`` is exceeded; 2 bad input.
"""

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

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
    emit,
    exit_on_errors,
    platform_unused,
    progress_bar,
    shape_options,
)


class CheckFormat(StrEnum):
    table = "table"
    json = "json"
    junit = "junit"
    sarif = "sarif"
    github = "github"


class DiffFormat(StrEnum):
    table = "table"
    json = "json"


class FailOn(StrEnum):
    error = "error"
    warning = "warning"
    note = "note"
    never = "never"


_CHECK_SUFFIXES = {
    ".json": CheckFormat.json,
    ".xml": CheckFormat.junit,
    ".sarif": CheckFormat.sarif,
    ".txt": CheckFormat.table,
}


def _limit_option(help_text: str, metavar: str) -> Any:
    return typer.Option(help=help_text, metavar=metavar, rich_help_panel="Limits (override the budget file)")


@app.command()
def check(
    models: Annotated[
        list[Path], typer.Argument(help="ONNX model files, or folders searched for *.onnx.", show_default=False)
    ],
    platform: PlatformOption = "xavier",
    budget: Annotated[
        Path | None, typer.Option("--budget", "-b", help="A budget TOML file (see the README).", show_default=False)
    ] = None,
    dim: DimOption = None,
    shape: ShapeOption = None,
    precision: PeakPrecisionOption = None,
    fusion: FusionOption = None,
    runtime: RuntimeOption = None,
    peak: PeakOption = False,
    time_model: TimeModelOption = None,
    max_latency: Annotated[str | None, _limit_option("Predicted latency, e.g. 15ms, 800us.", "TIME")] = None,
    max_flops: Annotated[str | None, _limit_option("FLOPs, e.g. 5G.", "COUNT")] = None,
    max_params: Annotated[str | None, _limit_option("Parameters, e.g. 25M.", "COUNT")] = None,
    max_weight_bytes: Annotated[str | None, _limit_option("Weight bytes, e.g. 100MB, 64MiB.", "BYTES")] = None,
    max_peak_activation_bytes: Annotated[
        str | None, _limit_option("Peak activation memory, e.g. 32MiB.", "BYTES")
    ] = None,
    max_memory_bound_share: Annotated[
        str | None, _limit_option("Share of time in memory-bound kernels, e.g. 60%.", "SHARE")
    ] = None,
    max_layout_share: Annotated[str | None, _limit_option("Share of time in layout copies, e.g. 10%.", "SHARE")] = None,
    max_energy: Annotated[
        str | None, _limit_option("Energy per inference, e.g. 5mJ (platforms with energy figures).", "ENERGY")
    ] = None,
    allow_unsupported: Annotated[
        bool | None,
        typer.Option(
            "--allow-unsupported/--no-allow-unsupported",
            help="Whether ops without a cost rule are allowed (default: the budget's, else not checked).",
            rich_help_panel="Limits (override the budget file)",
            show_default=False,
        ),
    ] = None,
    fail_on: Annotated[
        FailOn | None,
        typer.Option(help="Findings of this severity or worse fail the check (default: error).", show_default=False),
    ] = None,
    fail_finding: Annotated[
        list[str] | None, typer.Option(help="A finding id that fails the check (repeatable).", metavar="ID")
    ] = None,
    allow_finding: Annotated[
        list[str] | None, typer.Option(help="A finding id reported but never failing (repeatable).", metavar="ID")
    ] = None,
    ignore_finding: Annotated[
        list[str] | None, typer.Option(help="A finding id not reported at all (repeatable).", metavar="ID")
    ] = None,
    baseline: Annotated[
        Path | None,
        typer.Option(help="A previous `report`/`check --format json` output: fail if slower.", show_default=False),
    ] = None,
    fail_if_slower: Annotated[
        str | None,
        typer.Option(help="With --baseline: predicted latency may grow by this much (default 0%).", metavar="SHARE"),
    ] = None,
    output_format: Annotated[
        CheckFormat | None,
        typer.Option("--format", "-f", help="table (default), json, junit, sarif or github; default from -o's suffix."),
    ] = None,
    output: OutputOption = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Models checked in parallel (processes).", min=1)] = 1,
    scheduler: Annotated[
        str | None,
        typer.Option(
            help="Check on a running Dask scheduler (tcp://host:8786 or its scheduler file) instead of local "
            "processes; needs `pip install onnxroof[dask]` and the model paths visible to its workers.",
            metavar="ADDRESS|FILE",
        ),
    ] = None,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="table: every finding with its message, not one line per kind.")
    ] = False,
    debug: DebugOption = False,
) -> None:
    """Check MODELS against a budget on a platform: exit 0 pass, 1 violated, 2 bad input."""
    from onnxroof.fleet.batch import check_models
    from onnxroof.fleet.engine import choose_engine
    from onnxroof.gate.budget import Budget, BudgetError, load_budget
    from onnxroof.gate.check import CheckSettings, overall_exit_code
    from onnxroof.load.reader import parse_dim_bindings
    from onnxroof.report import ci as ci_formats
    from onnxroof.report.console import render_warnings

    with exit_on_errors(debug):
        chosen = chosen_format(output_format, output, _CHECK_SUFFIXES, CheckFormat.table)
        rules = load_budget(budget) if budget is not None else Budget()
        if fail_if_slower is not None and baseline is None:
            raise BudgetError("--fail-if-slower: needs --baseline PREVIOUS.json (or use `onnxroof diff`)")
        rules = rules.with_options(
            {
                "max_latency": max_latency,
                "max_flops": max_flops,
                "max_params": max_params,
                "max_weight_bytes": max_weight_bytes,
                "max_peak_activation_bytes": max_peak_activation_bytes,
                "max_memory_bound_share": max_memory_bound_share,
                "max_layout_share": max_layout_share,
                "max_energy": max_energy,
                "max_slowdown": fail_if_slower,
            },
            allow_unsupported=allow_unsupported,
            fail_on=fail_on.value if fail_on else None,
            fail=fail_finding or (),
            allow=allow_finding or (),
            ignore=ignore_finding or (),
        )
        settings = CheckSettings(
            platform,
            parse_dim_bindings(dim or []),
            precision,
            fusion,
            shape_options(shape),
            peak=peak,
            time_model=time_model,
            runtime=runtime,
        )
        with progress_bar("checking") as progress:
            engine = choose_engine(workers=jobs, scheduler=scheduler)
            checks = check_models(
                models, rules, settings, baseline=baseline, engine=engine, debug=debug, progress=progress
            )
        warnings = tuple(f"{c.path}: {warning}" for c in checks for warning in c.warnings)
        render_warnings(warnings, Console(stderr=True, highlight=False))
        if chosen is CheckFormat.json:
            emit(ci_formats.render_check_json(checks, rules), output)
        elif chosen is CheckFormat.junit:
            emit(ci_formats.render_junit(checks), output)
        elif chosen is CheckFormat.sarif:
            emit(ci_formats.render_sarif(checks), output)
        elif chosen is CheckFormat.github:
            emit(ci_formats.render_github(checks), output)
        else:
            emit(lambda console: ci_formats.render_check_console(checks, console, verbose), output)
        code = overall_exit_code(checks)
    raise typer.Exit(code)


@app.command()
def diff(
    old: Annotated[Path, typer.Argument(help="The previous model (.onnx) or its `report --format json` output.")],
    new: Annotated[Path, typer.Argument(help="The new model (.onnx) or its `report --format json` output.")],
    platform: PlatformOption = "xavier",
    dim: DimOption = None,
    shape: ShapeOption = None,
    precision: PeakPrecisionOption = None,
    fusion: FusionOption = None,
    runtime: RuntimeOption = None,
    fail_if_slower: Annotated[
        str | None,
        typer.Option(help="Exit 1 if the predicted latency grows by more than this, e.g. 5%.", metavar="SHARE"),
    ] = None,
    output_format: Annotated[
        DiffFormat | None, typer.Option("--format", "-f", help="table (default) or json; default from -o's suffix.")
    ] = None,
    output: OutputOption = None,
    top: Annotated[int, typer.Option(help="How many kernel changes the table lists.", min=1)] = 15,
    debug: DebugOption = False,
) -> None:
    """Compare two versions of a model on a platform: totals, op types, kernels, predicted latency."""
    from onnxroof.gate.budget import parse_quantity
    from onnxroof.gate.diff import diff_documents, document_of, slowdown_gate
    from onnxroof.load.reader import parse_dim_bindings
    from onnxroof.report.diff_view import render_diff_console, render_diff_json

    with exit_on_errors(debug):
        tolerance = parse_quantity(fail_if_slower, "share", "--fail-if-slower") if fail_if_slower else None
        chosen = chosen_format(output_format, output, {".json": DiffFormat.json}, DiffFormat.table)
        dims = parse_dim_bindings(dim or [])
        shapes = shape_options(shape)
        docs = [document_of(side, platform, dims, precision, fusion, shapes, runtime) for side in (old, new)]
        if all(side.suffix.lower() == ".json" for side in (old, new)):
            platform_unused()  # both sides carry their own platform
        result = diff_documents(docs[0], docs[1], str(old), str(new))
        gate = slowdown_gate(result, tolerance, fail_if_slower) if tolerance is not None and fail_if_slower else None
        if chosen is DiffFormat.json:
            emit(render_diff_json(result, gate), output)
        else:
            emit(lambda console: render_diff_console(result, console, top, gate), output)
        code = 1 if gate is not None and not gate["passed"] else 0
    raise typer.Exit(code)
