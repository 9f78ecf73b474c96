"""CLI commands for pre-deployment gatekeeping (check, diff); registered on the main app when imported.

``onnxroof check`` exit codes: 0 every model passes; 1 a limit or a failing finding is violated; 2 bad usage
or bad input (a bad budget or platform stops at once; a model that cannot be read makes its own row say
error and the others still run); 3 an internal error. With several models the worst code wins.
``onnxroof diff``: 0, or 1 when ``--fail-if-slower`` is exceeded; 2 bad input.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from onnxroof.cli import DebugOption, DimOption, FusionOption, OutputOption, PlatformOption, _emit, _errors, app


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

PrecisionOption = Annotated[
    str | None, typer.Option(help="Cost every node at this precision's peak (fp32, fp16, bf16, int8...).")
]


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
    precision: PrecisionOption = None,
    fusion: FusionOption = None,
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
    debug: DebugOption = False,
) -> None:
    """Check MODELS against a budget on a platform: exit 0 pass, 1 violated, 2 bad input."""
    from onnxroof import ci_formats
    from onnxroof.budget import Budget, BudgetError, load_budget
    from onnxroof.budget_check import CheckSettings, error_check, overall_exit_code
    from onnxroof.diff import load_baseline, pick_baseline
    from onnxroof.load import parse_dim_bindings
    from onnxroof.platform import load_platform
    from onnxroof.report.console import render_warnings

    with _errors(debug):
        chosen = output_format or (_CHECK_SUFFIXES.get(output.suffix.lower()) if output else None) or CheckFormat.table
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
        target = load_platform(platform)
        if precision is not None:
            target.peak(precision)
        rules.latency_limit((target.name, *target.aliases))  # a budget without this platform fails now
        settings = CheckSettings(platform, parse_dim_bindings(dim or []), precision, fusion)
        paths = _expand(models)
        entries = load_baseline(baseline) if baseline is not None else None

        tasks: list[tuple[str, Any]] = []
        ready: dict[int, Any] = {}
        for i, path in enumerate(paths):
            previous = None
            if entries is not None:
                previous = pick_baseline(entries, path, len(paths))
                if previous is None:
                    ready[i] = error_check(path, f"{baseline}: the baseline has no entry for this model")
                    continue
            tasks.append((path, previous))
        checks = _run(tasks, ready, rules, settings, jobs, len(paths), debug)

        warnings = tuple(f"{c.path}: {warning}" for c in checks for warning in c.warnings)
        render_warnings(warnings, Console(stderr=True, highlight=False))
        if chosen is CheckFormat.json:
            _emit(ci_formats.render_check_json(checks, rules), output)
        elif chosen is CheckFormat.junit:
            _emit(ci_formats.render_junit(checks), output)
        elif chosen is CheckFormat.sarif:
            _emit(ci_formats.render_sarif(checks), output)
        elif chosen is CheckFormat.github:
            _emit(ci_formats.render_github(checks), output)
        else:
            _emit(lambda console: ci_formats.render_check_console(checks, console), output)
        code = overall_exit_code(checks)
    raise typer.Exit(code)


def _expand(models: Sequence[Path]) -> list[str]:
    """Model paths in the order given; a folder becomes its *.onnx files (recursively, sorted)."""
    from onnxroof.budget import BudgetError

    paths: list[str] = []
    for model in models:
        if model.is_dir():
            found = sorted(p for p in model.rglob("*.onnx") if p.is_file())
            if not found:
                raise BudgetError(f"{model}: no .onnx files in this folder")
            paths.extend(str(p) for p in found)
        else:
            paths.append(str(model))
    return paths


def _run(tasks, ready, rules, settings, jobs: int, total: int, debug: bool) -> list:
    """Check every task (in ``jobs`` processes when > 1), with a progress bar on a terminal's stderr."""
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from onnxroof.budget import EXIT_INTERNAL
    from onnxroof.budget_check import check_model, error_check

    err = Console(stderr=True)
    results: list[Any] = []
    progress = Progress(
        TextColumn("[bold]checking"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    with progress:
        bar = progress.add_task("", total=len(tasks))
        if jobs > 1 and len(tasks) > 1:
            with ProcessPoolExecutor(max_workers=min(jobs, len(tasks))) as pool:
                futures = {
                    pool.submit(check_model, path, rules, settings, prev, debug): i
                    for i, (path, prev) in enumerate(tasks)
                }
                done: dict[int, Any] = {}
                for future in as_completed(futures):
                    index = futures[future]
                    try:
                        done[index] = future.result()
                    except Exception as exc:  # a worker died (killed, out of memory): its model's row says so
                        if debug:
                            raise
                        message = f"internal error: worker process failed: {type(exc).__name__}: {exc}"
                        done[index] = error_check(tasks[index][0], message, EXIT_INTERNAL)
                    progress.update(bar, advance=1, description=Path(tasks[index][0]).name)
                results = [done[i] for i in range(len(tasks))]
        else:
            for path, prev in tasks:
                progress.update(bar, description=Path(path).name)
                results.append(check_model(path, rules, settings, prev, debug))
                progress.update(bar, advance=1)
    merged, pending = [], iter(results)
    for i in range(total):
        merged.append(ready[i] if i in ready else next(pending))
    return merged


@app.command()
def diff(
    old: Annotated[Path, typer.Argument(help="The previous model (.onnx) or its `report --format json` output.")],
    new: Annotated[Path, typer.Argument(help="The new model (.onnx) or its `report --format json` output.")],
    platform: PlatformOption = "xavier",
    dim: DimOption = None,
    precision: PrecisionOption = None,
    fusion: FusionOption = None,
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
    from onnxroof.budget import parse_quantity
    from onnxroof.diff import diff_documents, render_diff_console, render_diff_json
    from onnxroof.load import parse_dim_bindings

    with _errors(debug):
        tolerance = parse_quantity(fail_if_slower, "share", "--fail-if-slower") if fail_if_slower else None
        chosen = output_format or (DiffFormat.json if output and output.suffix.lower() == ".json" else DiffFormat.table)
        dims = parse_dim_bindings(dim or [])
        docs = [_document(side, platform, dims, precision, fusion) for side in (old, new)]
        result = diff_documents(docs[0], docs[1], str(old), str(new))
        gate = None
        if tolerance is not None:
            relative = result.latency.relative
            passed = relative is not None and relative <= tolerance + 1e-9
            gate = {"fail_if_slower": fail_if_slower, "latency_change": relative, "passed": passed}
        if chosen is DiffFormat.json:
            _emit(render_diff_json(result, gate), output)
        else:

            def render(console: Console) -> None:
                render_diff_console(result, console, top)
                if gate is not None:
                    change = "new" if gate["latency_change"] is None else f"{gate['latency_change']:+.1%}"
                    verdict = "PASS" if gate["passed"] else "FAIL"
                    style = "bold green" if gate["passed"] else "bold red"
                    console.print(f"[{style}]{verdict}[/]: latency change {change}, allowed +{fail_if_slower}")

            _emit(render, output)
        code = 1 if gate is not None and not gate["passed"] else 0
    raise typer.Exit(code)


def _document(path: Path, platform: str, dims, precision, fusion) -> dict[str, Any]:
    """A model's analysis document: analyzed now (.onnx) or read from a saved JSON output."""
    from onnxroof.diff import BaselineError, load_document

    if path.suffix.lower() == ".json":
        doc = load_document(path)
        if "totals" not in doc:
            models = [m for m in doc["models"] if m.get("totals")]
            if len(models) != 1:
                raise BaselineError(f"{path}: holds {len(models)} analyzed models; give a single-model output")
            doc = models[0]
        return doc
    from onnxroof.analysis import analyze
    from onnxroof.report.data import to_dict

    return to_dict(analyze(path, platform=platform, dims=dims, precision=precision, fusion=fusion))
