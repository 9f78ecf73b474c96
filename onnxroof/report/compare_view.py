"""A comparison rendered: a terminal table, the JSON document (``kind: onnxroof-compare``), CSV and a bar chart.

The chart (matplotlib, PNG/SVG/PDF) groups two bars per platform: predicted latency (left axis) and energy
per inference (right axis; absent for platforms without energy figures). Each axis turns logarithmic when its
values span more than a factor of 100.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onnxroof.core.units import joules, percent, seconds, si
from onnxroof.report.charts import figure_bytes, plain_text
from onnxroof.report.data import csv_text
from onnxroof.studies.compare import CompareRow, Comparison

if TYPE_CHECKING:  # rich and the console renderer: the table's only (the JSON and CSV never load them, ~29 ms)
    from rich.console import Console

COMPARE_SCHEMA = 1
LOG_SPAN = 100.0
"""An axis of the chart turns logarithmic when its largest value exceeds its smallest by more than this."""
CSV_FIELDS = (
    "platform",
    "title",
    "precision",
    "fusion_profile",
    "latency_s",
    "throughput",
    "flops",
    "bytes",
    "energy_j",
    "energy_delay_js",
    "energy_memory_share",
    "memory_bound_share",
    "compute_time_share",
    "kernels",
    "compute_kernels",
    "memory_kernels",
    "compute_kernel_share",
    "array_utilization",
    "top_kernel_id",
    "top_kernel_op_types",
    "top_kernel_share",
)
_LATENCY, _ENERGY = "#4e79a7", "#f28e2b"


def _finite(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def row_dict(row: CompareRow) -> dict[str, Any]:
    """One platform's row as plain data (SI units; infinities and unknowns as null)."""
    top = row.top_kernel
    return {
        "platform": row.platform,
        "title": row.title,
        "precision": row.precision,
        "fusion_profile": row.fusion_profile,
        "latency_s": row.latency_s,
        "throughput": _finite(row.throughput),
        "flops": row.flops,
        "bytes": row.bytes,
        "energy_j": row.energy_j,
        "energy_delay_js": row.energy_delay_js,
        "energy_memory_share": row.energy_memory_share,
        "memory_bound_share": row.memory_bound_share,
        "compute_time_share": row.compute_time_share,
        "kernels": row.kernels,
        "compute_kernels": row.compute_kernels,
        "memory_kernels": row.memory_kernels,
        "compute_kernel_share": row.compute_kernel_share,
        "array_utilization": row.array_utilization,
        "top_kernel": None
        if top is None
        else {
            "id": top.id,
            "op_types": list(top.op_types),
            "latency_s": top.latency_s,
            "share": top.share,
            "bound": top.bound,
        },
    }


def compare_dict(comparison: Comparison) -> dict[str, Any]:
    """The comparison as plain data (docs/json-schema.md, "Compare")."""
    return {
        "kind": "onnxroof-compare",
        "schema": COMPARE_SCHEMA,
        "model": comparison.model,
        "dims": dict(comparison.dims),
        "whatif": comparison.whatif.to_dict(),
        "fastest": comparison.fastest,
        "least_energy": comparison.least_energy,
        "platforms": [row_dict(r) for r in comparison.rows],
        "warnings": list(comparison.warnings),
    }


def render_compare_json(comparison: Comparison) -> str:
    return json.dumps(compare_dict(comparison), indent=2, allow_nan=False) + "\n"


def render_compare_csv(comparison: Comparison) -> str:
    """One row per platform; the top kernel flattened into ``top_kernel_*`` columns (op types joined by +)."""
    return csv_text(CSV_FIELDS, (_csv_row(row) for row in comparison.rows))


def _csv_row(row: CompareRow) -> dict[str, Any]:
    data = row_dict(row)
    top = data.pop("top_kernel") or {}
    data["top_kernel_id"] = top.get("id", "")
    data["top_kernel_op_types"] = "+".join(top.get("op_types", []))
    data["top_kernel_share"] = top.get("share", "")
    return data


def render_compare_table(comparison: Comparison, console: Console) -> None:
    """The terminal table: one row per platform, the fastest and the least-energy platform marked."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from onnxroof.report.console import short_ops

    dims = ", ".join(f"{k}={v}" for k, v in comparison.dims.items())
    knobs = f"precision {comparison.precision}" if comparison.precision else ""
    context = "; ".join(part for part in (dims, knobs) if part)
    table = Table(
        title=f"{comparison.model} on {len(comparison.rows)} platforms" + (f" ({context})" if context else ""),
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    precisions = {row.precision for row in comparison.rows}
    table.add_column("platform", no_wrap=True)
    if len(precisions) > 1:
        table.add_column("prec.")
    for name in ("latency", "inf/s", "energy", "EDP J·s", "time C/M"):
        table.add_column(name, justify="right", no_wrap=True)
    fastest, thrifty = comparison.fastest, comparison.least_energy
    tops = []
    for row in comparison.rows:
        marks = ("★" if row.platform == fastest else "") + (
            "⚡" if row.platform == thrifty and len(comparison.rows) > 1 else ""
        )
        cells: list[Text | str] = [Text(f"{row.platform} {marks}".rstrip(), style="bold" if marks else "")]
        cells += [row.precision] if len(precisions) > 1 else []
        cells += [
            seconds(row.latency_s),
            si(row.throughput),
            "—" if row.energy_j is None else joules(row.energy_j),
            "—" if row.energy_delay_js is None else f"{row.energy_delay_js:.3g}",
            f"{100 * row.compute_time_share:.0f}/{100 * row.memory_bound_share:.0f}%",
        ]
        table.add_row(*cells)
        top = row.top_kernel
        if top is not None:
            tops.append(f"  {row.platform}: {short_ops(top.op_types)} ({top.id}), {percent(top.share)} of the time")
    table.caption = "★ fastest  ⚡ least energy  time C/M: share of the time in compute- / memory-bound kernels" + (
        f"  (all at {precisions.pop()})" if len(precisions) == 1 else ""
    )
    table.caption_justify = "left"
    console.print(table)
    if tops:
        console.print(Text("Top kernel per platform", style="bold"))
        console.print(Text("\n".join(tops)))


# ------------------------------------------------------------------------------------------------- chart


def compare_figure(comparison: Comparison, title: str | None = None):
    """Grouped bars per platform: latency (left axis) and energy per inference (right axis)."""
    from matplotlib.figure import Figure

    rows = comparison.rows
    if not rows:
        raise ValueError("nothing to plot")
    priced = any(r.energy_j is not None for r in rows)
    width = 0.38 if priced else 0.6
    fig = Figure(figsize=(max(6.0, 1.4 * len(rows) + 3), 5.2), dpi=150, layout="constrained")
    ax = fig.add_subplot()
    xs = list(range(len(rows)))
    offset = -width / 2 if priced else 0.0
    handles = [_latency_bars(ax, rows, [x + offset for x in xs], width)]
    if priced:
        handles.append(_energy_bars(ax.twinx(), rows, [x + width / 2 for x in xs], width))
    ax.set_xticks(xs, [plain_text(r.platform) for r in rows])
    ax.grid(True, axis="y", color="#e6e8ef", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.legend(handles=handles, fontsize=8, loc="upper left", frameon=True, framealpha=0.9)
    name = Path(comparison.model).name
    ax.set_title(plain_text(title or f"{name}: latency and energy per platform"), fontsize=11, loc="left")
    if priced and any(r.energy_j is None for r in rows):
        _no_energy_note(ax)
    return fig


def _no_energy_note(ax) -> None:
    """What the "—" of a platform without energy figures means, in the upper right corner."""
    ax.text(
        0.99,
        0.99,
        "— : no energy figures in the platform file",
        transform=ax.transAxes,
        ha="right",
        va="top",
        fontsize=7.5,
        color="#677085",
    )


def _latency_bars(ax, rows: Sequence[CompareRow], xs: list[float], width: float):
    """Each platform's predicted latency, as labelled bars on the left axis."""
    from matplotlib.ticker import FuncFormatter

    latency = ax.bar(xs, [r.latency_s for r in rows], width, color=_LATENCY, label="latency")
    _scale(ax, [r.latency_s for r in rows])
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: seconds(v)))
    ax.set_ylabel("predicted latency per inference", color=_LATENCY)
    ax.bar_label(latency, labels=[seconds(r.latency_s) for r in rows], fontsize=7, padding=2)
    return latency


def _energy_bars(ax, rows: Sequence[CompareRow], xs: list[float], width: float):
    """Each platform's energy per inference, as labelled bars on ``ax`` (the right axis); "—" where unknown."""
    from matplotlib.ticker import FuncFormatter

    energies = [r.energy_j if r.energy_j is not None else 0.0 for r in rows]
    energy = ax.bar(xs, energies, width, color=_ENERGY, label="energy per inference")
    _scale(ax, [e for e in energies if e > 0])
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: joules(v)))
    ax.set_ylabel("energy per inference", color=_ENERGY)
    labels = ["—" if r.energy_j is None else joules(r.energy_j) for r in rows]
    ax.bar_label(energy, labels=labels, fontsize=7, padding=2)
    return energy


def _scale(ax, values: list[float]) -> None:
    """Log scale when the positive values span more than :data:`LOG_SPAN`, else linear from 0."""
    positive = [v for v in values if v > 0]
    if positive and max(positive) > LOG_SPAN * min(positive):
        ax.set_yscale("log")
    else:
        ax.set_ylim(0, 1.15 * max(positive, default=1.0))


def render_compare_chart(comparison: Comparison, fmt: str, title: str | None = None) -> bytes:
    """The comparison chart as PNG, SVG or PDF bytes."""
    return figure_bytes(compare_figure(comparison, title), fmt)
