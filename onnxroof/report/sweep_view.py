"""A sweep rendered: a terminal table, the JSON document (``kind: onnxroof-sweep``), CSV and a two-panel chart.

The chart (matplotlib, PNG/SVG/PDF): latency and throughput against the swept value (log x for a dim,
one tick per precision for a precision sweep) in the top panel; the model's intensity (fused FLOPs ÷ fused
bytes) and its memory-bound share in the bottom one; a vertical marker where it turns compute-bound.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onnxroof.core.units import joules, percent, seconds, si
from onnxroof.report.charts import decades, figure_bytes, frame, plain_text
from onnxroof.report.data import csv_text
from onnxroof.studies.sweep import AXIS_DIM, Sweep, SweepPoint

if TYPE_CHECKING:  # rich: the table's only (the JSON and CSV never load it)
    from rich.console import Console

SWEEP_SCHEMA = 1
POINT_FIELDS = (
    "value",
    "latency_s",
    "throughput",
    "samples_per_s",
    "flops",
    "bytes",
    "intensity",
    "memory_bound_share",
    "energy_j",
    "energy_delay_js",
)
LOG_SPAN = 10.0
"""A chart axis turns logarithmic when its largest value exceeds its smallest by more than this."""
_LATENCY, _THROUGHPUT, _INTENSITY, _SHARE, _TURN = "#4e79a7", "#f28e2b", "#59a14f", "#2f6db5", "#e15759"


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _point(point: SweepPoint) -> dict[str, Any]:
    return {name: _finite(getattr(point, name)) for name in POINT_FIELDS}


def sweep_dict(sweep: Sweep) -> dict[str, Any]:
    """The sweep as plain data (docs/json-schema.md, "Sweep"); SI units, infinities as null."""
    return {
        "kind": "onnxroof-sweep",
        "schema": SWEEP_SCHEMA,
        "model": sweep.model,
        "platform": {"name": sweep.platform, "title": sweep.platform_title},
        "axis": sweep.axis,
        "parameter": sweep.parameter,
        "dims": dict(sweep.dims),
        "fusion_profile": sweep.fusion_profile,
        "whatif": sweep.whatif.to_dict(),
        "per_sample": sweep.per_sample,
        "turns_compute_bound": sweep.turns_compute_bound,
        "points": [_point(p) for p in sweep.points],
        "warnings": list(sweep.warnings),
    }


def render_sweep_json(sweep: Sweep) -> str:
    return json.dumps(sweep_dict(sweep), indent=2, allow_nan=False) + "\n"


def render_sweep_csv(sweep: Sweep) -> str:
    """One row per swept value, the point fields as columns (empty where unknown)."""
    return csv_text(POINT_FIELDS, (_point(point) for point in sweep.points))


def _label(sweep: Sweep, value: int | str) -> str:
    return f"{sweep.parameter}={value}" if sweep.axis == AXIS_DIM else str(value)


def verdict(sweep: Sweep) -> str:
    """Where the model turns compute-bound, in one sentence."""
    turn = sweep.turns_compute_bound
    if turn is None:
        return "memory-bound throughout: more than half the predicted time is memory-bound at every value"
    if sweep.points and turn == sweep.points[0].value:
        return f"compute-bound from the first value ({_label(sweep, turn)}): memory-bound share below 50%"
    return f"turns compute-bound at {_label(sweep, turn)}: memory-bound share first below 50%"


def render_sweep_table(sweep: Sweep, console: Console) -> None:
    """The terminal table: one row per value, the compute-bound turn marked."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    fixed = ", ".join(f"{k}={v}" for k, v in sweep.dims.items())
    knobs = f"precision {sweep.whatif.precision}" if sweep.whatif.precision else ""
    context = "; ".join(part for part in (fixed, knobs) if part)
    table = Table(
        title=f"{sweep.model} on {sweep.platform_title}: {sweep.parameter} swept"
        + (f" ({context})" if context else ""),
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    wide = console.width >= 100  # a narrow terminal keeps the columns that answer "where does it turn"
    table.pad_edge = False
    columns = [
        ("latency", lambda p: seconds(p.latency_s), True),
        ("inf/s", lambda p: si(p.throughput), wide or not sweep.per_sample),
        ("samples/s", lambda p: si(p.samples_per_s or 0.0), sweep.per_sample),
        ("FLOPs", lambda p: si(p.flops), wide),
        ("bytes", lambda p: si(p.bytes, "B"), True),
        ("FLOP/B", lambda p: f"{p.intensity:.3g}", True),
        ("mem-bound", lambda p: percent(p.memory_bound_share), True),
        ("energy", lambda p: joules(p.energy_j), sweep.has_energy),
        (
            "EDP J·s",
            lambda p: "–" if p.energy_delay_js is None else f"{p.energy_delay_js:.3g}",
            sweep.has_energy and wide,
        ),
    ]
    shown = [(name, cell) for name, cell, keep in columns if keep]
    table.add_column(sweep.parameter, no_wrap=True)
    for name, _ in shown:
        table.add_column(name, justify="right", no_wrap=True)
    for point in sweep.points:
        turn = point.value == sweep.turns_compute_bound
        label = Text(str(point.value) + (" ◂ compute" if turn else ""), style="bold" if turn else "")
        table.add_row(label, *(cell(point) for _, cell in shown))
    console.print(table)
    console.print(Text(verdict(sweep), style="green" if sweep.turns_compute_bound is not None else "yellow"))


# ------------------------------------------------------------------------------------------------- chart


def sweep_figure(sweep: Sweep, title: str | None = None):
    """Two panels over the swept value: latency and throughput; intensity and memory-bound share."""
    from matplotlib.figure import Figure

    if not sweep.points:
        raise ValueError("nothing to plot")
    numeric = sweep.axis == AXIS_DIM
    xs = [float(p.value) if numeric else float(i) for i, p in enumerate(sweep.points)]
    fig = Figure(figsize=(9, 7), dpi=150, layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    for ax in (top, bottom):
        if numeric:
            ax.set_xscale("log", base=2 if all(_power_of_two(x) for x in xs) else 10)
        frame(ax, which="major")
    rate = _time_panel(top, xs, sweep)
    share = _intensity_panel(bottom, xs, sweep.points)
    _turn_marker(top, bottom, xs, sweep)
    _x_ticks(top, bottom, xs, sweep)
    for ax, twin in ((top, rate), (bottom, share)):
        handles = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
        ax.legend(handles=handles, fontsize=8, loc="best", frameon=True, framealpha=0.9)
    heading = title or f"{Path(sweep.model).name} on {sweep.platform}: {sweep.parameter} swept"
    top.set_title(plain_text(heading), fontsize=11, loc="left")
    return fig


def _time_panel(ax, xs: list[float], sweep: Sweep):
    """Latency on ``ax``; inferences (or samples) per second on its twin, which is returned."""
    latencies = [p.latency_s for p in sweep.points]
    ax.plot(xs, latencies, marker="o", color=_LATENCY, label="latency")
    _y_axis(ax, latencies, seconds)
    ax.set_ylabel("predicted latency", color=_LATENCY)
    rate = ax.twinx()
    per_sample = sweep.per_sample
    rates = [(p.samples_per_s if per_sample else p.throughput) or 0.0 for p in sweep.points]
    rate.plot(xs, rates, marker="s", color=_THROUGHPUT, label="samples/s" if per_sample else "inferences/s")
    _y_axis(rate, rates, si)
    rate.set_ylabel("samples / s" if per_sample else "inferences / s", color=_THROUGHPUT)
    return rate


def _intensity_panel(ax, xs: list[float], points: Sequence[SweepPoint]):
    """Intensity on ``ax`` (gaps where infinite); the memory-bound share on its twin, which is returned."""
    from matplotlib.ticker import PercentFormatter

    finite = [p.intensity if math.isfinite(p.intensity) else math.nan for p in points]
    ax.plot(xs, finite, marker="o", color=_INTENSITY, label="intensity")
    _y_axis(ax, [v for v in finite if math.isfinite(v)], si)
    ax.set_ylabel("intensity (FLOP/byte)", color=_INTENSITY)
    share = ax.twinx()
    share.plot(xs, [100 * p.memory_bound_share for p in points], marker="s", color=_SHARE, label="memory-bound")
    share.axhline(50, color="#8a93a6", linewidth=0.9, linestyle=":")
    share.set_ylim(-3, 103)
    share.yaxis.set_major_formatter(PercentFormatter())
    share.set_ylabel("memory-bound share of time", color=_SHARE)
    return share


def _turn_marker(top, bottom, xs: list[float], sweep: Sweep) -> None:
    """A dashed vertical line through both panels where the model turns compute-bound, named in the top one."""
    turn = sweep.turns_compute_bound
    if turn is None:
        return
    at = next(x for x, p in zip(xs, sweep.points, strict=True) if p.value == turn)
    for ax in (top, bottom):
        ax.axvline(at, color=_TURN, linewidth=1.2, linestyle="--", zorder=1)
    top.annotate(
        f"compute-bound from {plain_text(_label(sweep, turn))}",
        (at, 1.0),
        xycoords=("data", "axes fraction"),
        xytext=(4, -12),
        textcoords="offset points",
        fontsize=8,
        color=_TURN,
    )


def _x_ticks(top, bottom, xs: list[float], sweep: Sweep) -> None:
    """One tick per swept value (no minor ticks on a log axis), the parameter as the x label."""
    if sweep.axis == AXIS_DIM:
        bottom.set_xticks(xs, [str(p.value) for p in sweep.points])
        bottom.minorticks_off()
        top.minorticks_off()
    else:
        bottom.set_xticks(xs, [plain_text(str(p.value)) for p in sweep.points])
    bottom.set_xlabel(plain_text(sweep.parameter))


def _y_axis(ax, values: list[float], unit: Callable[[float], str]) -> None:
    """Log scale on whole decades when the positive values span more than :data:`LOG_SPAN`, else linear from 0;
    tick labels through ``unit`` (a formatter of :mod:`onnxroof.core.units`)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    positive = [v for v in values if v > 0 and math.isfinite(v)]
    if positive and max(positive) > LOG_SPAN * min(positive):
        ax.set_yscale("log")
        ax.set_ylim(*decades(positive, 1.3, 1))
        ax.yaxis.set_minor_formatter(NullFormatter())
    else:
        ax.set_ylim(0, 1.15 * max(positive, default=1.0))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: unit(v)))


def _power_of_two(value: float) -> bool:
    return value >= 1 and float(value).is_integer() and (int(value) & (int(value) - 1)) == 0


def render_sweep_chart(sweep: Sweep, fmt: str, title: str | None = None) -> bytes:
    """The sweep chart as PNG, SVG or PDF bytes."""
    return figure_bytes(sweep_figure(sweep, title), fmt)
