"""Measured truth for people: the calibrated figures, the profile's predicted-vs-measured table, and the
report documents (JSON, HTML) with the measured overlay."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console, JustifyMethod
from rich.table import Table

from onnxroof.analysis.document import to_dict
from onnxroof.core.units import seconds, si
from onnxroof.measure.overlay import MeasuredOverlay, measured_overlay, with_measured
from onnxroof.report.data import dumps_document
from onnxroof.report.html import render_html


def render_calibration(result, console: Console, output: Path | None) -> None:
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


def render_cuda_calibration(result, console: Console, output: Path | None) -> None:
    """The figures ``calibrate --device cuda`` measured (:class:`onnxroof.measure.calibrate.cuda.CudaCalibration`)."""
    table = Table(title=f"Calibrated figures: {result.gpu}", box=box.SIMPLE_HEAD, title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    for precision, figure in result.peaks.items():
        table.add_row(f"peak {precision}", si(figure.value, "FLOP/s"))
    table.add_row("DRAM bandwidth", si(result.dram_bandwidth.value, "B/s"))
    table.add_row("launch overhead", seconds(result.launch_overhead.value))
    for cls, figure in result.efficiency.items():
        table.add_row(f"efficiency {cls}", f"{figure.value:.2g}")
    table.add_row("SMs / L2", f"{result.sm_count} / {si(result.l2_bytes, 'B')}")
    console.print(table)
    where = f"wrote {output}" if output is not None else "platform TOML on stdout"
    console.print(
        f"{where} (PyTorch {result.torch}, CUDA {result.cuda}, {result.duration_s:.0f} s"
        + (", --quick: indicative only" if result.quick else "")
        + ")"
    )


def render_measured_json(analysis, overlay: MeasuredOverlay | None) -> str:
    """``onnxroof report --format json``'s document, with the ``measured`` section when given a profile."""
    return dumps_document(with_measured(to_dict(analysis), overlay))


def render_profile_html(result) -> str:
    """The HTML report of the profiled analysis with this run's measured overlay."""
    overlay = measured_overlay(result.to_dict(), result.analysis, "onnxroof profile")
    return render_html(result.analysis, overlay)


def render_profile_json(result) -> str:
    """``onnxroof profile --format json``: the result's document (non-finite numbers are refused)."""
    return json.dumps(result.to_dict(), indent=2, allow_nan=False, default=_finite) + "\n"


def _finite(value):  # pragma: no cover - json.dumps only calls it for non-JSON types
    raise TypeError(f"not JSON serializable: {value!r}")


def render_profile(result, console: Console, top: int = 20) -> None:
    """The terminal view of a :class:`onnxroof.measure.profile.profiler.ProfileResult`."""
    console.print(_profile_summary(result))
    console.print(_profile_rows(result, top, wide=console.width >= 130))
    _print_leftovers(result, console)
    console.print("[bold]Factors[/] " + "; ".join(_factor_parts(result.factors)), highlight=False)


def _profile_summary(result) -> Table:
    """The heading grid: model, platform, predicted = Σ kernels + per-run overhead, measured, their ratio, and
    the per-row agreement (Spearman rank correlation)."""
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
    return grid


def _profile_rows(result, top: int, wide: bool) -> Table:
    """The ``top`` rows by measured time, predicted beside measured; a ``wide`` console also shows the
    onnxruntime nodes, the intensity, the memory level of the bound and the achieved throughput."""
    rows = sorted(result.rows, key=lambda r: -r.measured_s)[:top]
    table = Table(
        title=f"Predicted vs measured, top {len(rows)} of {len(result.rows)} by measured time",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    columns: list[tuple[str, JustifyMethod]] = [("kernels", "left"), ("ops", "left")]
    if wide:
        columns.append(("onnxruntime node", "left"))
    columns.append(("bound", "left"))
    if wide:
        columns.append(("FLOP/B", "right"))
    columns += [("predicted", "right"), ("measured", "right"), ("ratio", "right")]
    if wide:
        columns.append(("achieved", "right"))
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
    return table


def _print_leftovers(result, console: Console) -> None:
    """The explained largest misses, the onnxruntime nodes with no onnxroof kernel and the onnxroof kernels
    onnxruntime never ran, each list under its heading when it has entries."""
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


def _factor_parts(factors: Mapping[str, Any]) -> list[str]:
    """The factors the prediction used, as text: the overheads, the cache levels and the efficiencies."""
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
    return parts


def _ratio(value: float) -> str:
    return "∞" if not math.isfinite(value) else f"{value:.2f}×"


def _rho(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.2f}"
