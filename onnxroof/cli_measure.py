"""CLI commands for measured truth (calibrate, profile); registered on the main app when imported.

``onnxroof calibrate [-o host.toml] [--quick] [--threads N]`` measures this host with onnxruntime
micro-benchmarks and writes a platform file marked as measured (stdout without ``-o``).
``onnxroof profile MODEL --platform host.toml [-d NAME=VALUE]`` runs MODEL in onnxruntime with profiling and
compares measured per-kernel and end-to-end times with onnxroof's prediction (a table, or ``--format json``);
``--html OUT.html`` also writes the HTML report with the measured points on its roofline (as
``onnxroof report MODEL --profile PROF.json --format html`` does from a saved profile).
Exit codes as everywhere: 0 success, 2 bad input or usage, 3 an internal error.
"""

from __future__ import annotations

import json
import math
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from onnxroof.cli import DebugOption, DimOption, FusionOption, OutputOption, _emit, _errors, app, write_atomically
from onnxroof.errors import OnnxroofError


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
    name: Annotated[str, typer.Option(help="The platform name written to the file.")] = "host",
    debug: DebugOption = False,
) -> None:
    """Measure this host with onnxruntime micro-benchmarks and write a measured platform TOML."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from onnxroof.calibrate import calibrate as run_calibration
    from onnxroof.platform import load_platform

    err = Console(stderr=True, highlight=False)
    with _errors(debug):
        if output is not None and output.is_dir():  # fail before a minute of measuring, not after
            raise OnnxroofError(f"{output}: is a folder; give a file name to write to")
        bar = Progress(
            TextColumn("[bold]calibrating"),
            BarColumn(),
            TextColumn("{task.percentage:>3.0f}%"),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
            console=err,
            transient=True,
        )
        with bar:
            task = bar.add_task("", total=1)

            def progress(what: str, done: int, total: int) -> None:
                bar.update(task, total=total, completed=done, description=what)

            result = run_calibration(threads=threads, quick=quick, progress=progress, name=name)
        text = result.to_toml()
        if output is None:
            sys.stdout.write(text)
        else:
            write_atomically(output, text)
            if output.is_file():
                load_platform(output)  # what we wrote must load
        _print_calibration(result, err, output)


def _print_calibration(result, console: Console, output: Path | None) -> None:
    from onnxroof.report.units import seconds, si

    table = Table(title="Calibrated figures", box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for precision, figure in result.peaks.items():
        table.add_row(f"peak {precision}", si(figure.value, "FLOP/s"))
    table.add_row("DRAM bandwidth", si(result.dram_bandwidth.value, "B/s"))
    for number, (size, figure) in enumerate(result.cache_levels, start=1):
        table.add_row(f"L{number} (≤ {si(size, 'B')})", si(figure.value, "B/s"))
    table.add_row("ridge fp32", f"{result.ridge('fp32'):.3g} FLOP/B")
    table.add_row("per-kernel overhead", seconds(result.launch_overhead.value))
    table.add_row("per-run overhead", seconds(result.run_overhead.value))
    for cls, figure in result.efficiency.items():
        table.add_row(f"efficiency {cls}", f"{figure.value:.2g}")
    console.print(table)
    where = f"wrote {output}" if output is not None else "platform TOML on stdout"
    console.print(
        f"{where} ({result.threads} thread{'s' if result.threads != 1 else ''}, onnxruntime {result.onnxruntime}, "
        f"{result.duration_s:.0f} s" + (", --quick: indicative only" if result.quick else "") + ")"
    )


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
    threads: ThreadsOption = None,
    runs: Annotated[int, typer.Option(help="Profiled runs (after 3 warm-up runs).", min=1)] = 20,
    seconds: Annotated[float, typer.Option(help="Seconds of unprofiled runs timed end to end.", min=0.05)] = 1.0,
    fusion: FusionOption = None,
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
    from onnxroof.load import parse_dim_bindings
    from onnxroof.profile import profile as run_profile
    from onnxroof.report.console import render_warnings

    with _errors(debug):
        if html is not None and html.is_dir():  # fail before profiling, not after
            raise OnnxroofError(f"{html}: is a folder; give a file name to write to")
        suffix = output.suffix.lower() if output else ""
        chosen = output_format or (ProfileFormat.json if suffix == ".json" else ProfileFormat.table)
        result = run_profile(
            model,
            platform=platform,
            dims=parse_dim_bindings(dim or []),
            threads=threads,
            profiled_runs=runs,
            wall_budget_s=seconds,
            fusion=fusion,
        )
        render_warnings(result.warnings, Console(stderr=True, highlight=False))
        if html is not None:
            write_atomically(html, _html_report(result))
        if chosen is ProfileFormat.json:
            _emit(json.dumps(result.to_dict(), indent=2, allow_nan=False, default=_finite) + "\n", output)
        else:
            _emit(lambda console: render_profile(result, console, top), output)


def _html_report(result) -> str:
    """The HTML report of the profiled analysis with this run's measured overlay."""
    from onnxroof.measured_overlay import measured_overlay
    from onnxroof.report.html import render_html

    overlay = measured_overlay(result.to_dict(), result.analysis, "onnxroof profile")
    return render_html(result.analysis, overlay)


def _finite(value):  # pragma: no cover - json.dumps only calls it for non-JSON types
    raise TypeError(f"not JSON serializable: {value!r}")


def render_profile(result, console: Console, top: int = 20) -> None:
    """The terminal view of a :class:`onnxroof.profile.ProfileResult`."""
    from onnxroof.report.units import seconds, si

    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    spread = f"p10–p90 {seconds(result.measured_low_s)}–{seconds(result.measured_high_s)}, {result.wall_runs} runs"
    grid.add_row("Model", f"{result.model} ({', '.join(f'{k}={v}' for k, v in result.dims.items()) or 'no dims'})")
    grid.add_row(
        "Platform",
        f"{result.platform} ({'measured' if result.measured_platform else 'datasheet'}), "
        f"{result.threads} thread{'s' if result.threads != 1 else ''}, onnxruntime {result.onnxruntime}, "
        f"fusion {result.fusion_profile}",
    )
    grid.add_row(
        "Predicted",
        f"{seconds(result.predicted_s)} = Σ kernels {seconds(result.predicted_kernels_s)} "
        f"+ per-run overhead {seconds(result.run_overhead_s)}",
    )
    grid.add_row("Measured", f"{seconds(result.measured_s)} median wall time ({spread})")
    grid.add_row("Ratio", f"measured ÷ predicted = {_ratio(result.ratio)} (error {result.error:.0%})")
    grid.add_row(
        "Kernels",
        f"Σ profiled node times {seconds(result.measured_kernels_s)} over {result.profiled_runs} runs; "
        f"Spearman rank correlation per row {_rho(result.spearman)} ({len(result.rows)} rows)",
    )
    console.print(grid)

    rows = sorted(result.rows, key=lambda r: -r.measured_s)[:top]
    table = Table(
        title=f"Predicted vs measured, top {len(rows)} of {len(result.rows)} by measured time",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    wide = console.width >= 130
    columns = [("kernels", "left"), ("ops", "left")]
    columns += [("onnxruntime node", "left")] if wide else []
    columns += [("bound", "left")] + ([("FLOP/B", "right")] if wide else [])
    columns += [("predicted", "right"), ("measured", "right")]
    columns += [("ratio", "right")] + ([("achieved", "right")] if wide else [])
    widths = {
        "kernels": (4, 16 if wide else 12),
        "ops": (4, 34 if wide else 20),
        "onnxruntime node": (4, 34),
        "bound": (7, 20),
        "ratio": (6, 8),
    }
    for name, justify in columns:
        low, high = widths.get(name, (8, 14))
        table.add_column(name, justify=justify, overflow="ellipsis", no_wrap=True, min_width=low, max_width=high)
    for row in rows:
        cells = {
            "kernels": "+".join(row.kernels),
            "ops": "+".join(row.op_types),
            "onnxruntime node": ", ".join(row.ort_nodes),
            "bound": f"{row.bound} ({row.level})" if wide else row.bound,
            "FLOP/B": f"{row.intensity:.3g}",
            "predicted": seconds(row.predicted_s),
            "measured": seconds(row.measured_s),
            "ratio": _ratio(row.ratio),
            "achieved": si(row.achieved_flops, "FLOP/s"),
        }
        table.add_row(*(cells[name] for name, _ in columns))
    console.print(table)

    misses = [r for r in result.misses() if r.explanation]
    if misses:
        console.print("[bold]Largest misses[/]")
        for row in misses:
            console.print(f"  {'+'.join(row.kernels)}: {row.explanation}", markup=False, highlight=False)
    if result.unmatched_ort:
        console.print("[bold]onnxruntime nodes with no onnxroof kernel[/]")
        for item in result.unmatched_ort:
            console.print(
                f"  {item.name} ({item.op_type}): {seconds(item.seconds)} — {item.reason}",
                markup=False,
                highlight=False,
            )
    if result.unmeasured_kernels:
        console.print("[bold]onnxroof kernels onnxruntime never ran[/]")
        for item in result.unmeasured_kernels:
            console.print(
                f"  {item.name} ({item.op_type}): predicted {seconds(item.seconds)} — {item.reason}",
                markup=False,
                highlight=False,
            )
    factors = result.factors
    parts = [
        f"per-kernel overhead {seconds(factors['launch_overhead_s'])}",
        f"per-run overhead {seconds(factors['run_overhead_s'])}",
        f"profiler overhead removed per event {seconds(factors['profiler_overhead_per_event_s'])}",
    ]
    if factors["cache_levels"]:
        parts.append(
            "cache levels "
            + ", ".join(
                f"{c['name']} ≤ {si(c['size_bytes'], 'B')} at {si(c['bandwidth'], 'B/s')}"
                for c in factors["cache_levels"]
            )
        )
    if factors["efficiency"]:
        parts.append("efficiency " + ", ".join(f"{k} {v:.2g}" for k, v in factors["efficiency"].items()))
    console.print("[bold]Factors[/] " + "; ".join(parts), highlight=False)


def _ratio(value: float) -> str:
    return "∞" if not math.isfinite(value) else f"{value:.2f}×"


def _rho(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}"
