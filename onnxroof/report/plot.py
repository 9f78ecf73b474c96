"""Static roofline plots (PNG, SVG, PDF) with matplotlib, one model on one or several platforms.

One platform: its memory slope and a compute roof per precision the model computes in, ridge points
marked, every kernel a point at (intensity, predicted FLOP/s) with its area proportional to its predicted
time, coloured by op type as in the HTML report. Several platforms: one roof per platform (its main
precision) and the model's kernels once per platform, coloured by platform.

Kernels with no FLOPs have no place on log axes; the chart says how many there are and their share of
the predicted time. The figure is built on a bare :class:`~matplotlib.figure.Figure` (no pyplot, no
global state) and rendered with the Agg/SVG/PDF canvases; model strings are drawn as plain text (``$``
escaped so that mathtext never parses them).
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path

from onnxroof.analysis.analyze import Analysis
from onnxroof.core.errors import OnnxroofError
from onnxroof.core.units import seconds, si
from onnxroof.report.html import OTHER_COLOUR, PALETTE, op_colours, op_type_time

FORMATS = ("png", "svg", "pdf")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">")
_MAX_LEGEND_OPS = 9


def plot_format(path: Path) -> str:
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise OnnxroofError(f"{path}: unknown plot format '{path.suffix}'; use .png, .svg or .pdf")
    return suffix


def plain_text(text: str) -> str:
    """Model text as literal matplotlib text: no mathtext, no control characters."""
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    return text.replace("$", r"\$")


def _main_precision(analysis: Analysis) -> str | None:
    time: dict[str, float] = {}
    for kernel in analysis.kernels:
        time[kernel.precision] = time.get(kernel.precision, 0.0) + kernel.latency_s
    return max(time, key=lambda p: (time[p], p)) if time else None


def decades(values: Sequence[float], pad: float, minimum: int) -> tuple[float, float]:
    """Log-axis limits on whole decades around ``values`` (widened by ``pad``), at least ``minimum`` decades."""
    lo = math.floor(math.log10(min(values) / pad))
    hi = math.ceil(math.log10(max(values) * pad))
    while hi - lo < minimum:
        hi += 1
        if hi - lo < minimum:
            lo -= 1
    return 10.0**lo, 10.0**hi


def figure(analyses: Sequence[Analysis], title: str | None = None):
    """The roofline figure for one model on one or several platforms."""
    from matplotlib import patheffects
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator

    if not analyses:
        raise ValueError("nothing to plot")
    several = len(analyses) > 1
    fig = Figure(figsize=(10, 6.2), dpi=150, layout="constrained")
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")

    intensities, perfs, ridges, peaks = [], [], [], []
    for analysis in analyses:
        for kernel in analysis.kernels:
            if kernel.flops > 0 and kernel.latency_s > 0:
                perfs.append(kernel.flops / kernel.latency_s)
                if kernel.intensity is not None and math.isfinite(kernel.intensity) and kernel.intensity > 0:
                    intensities.append(kernel.intensity)
        p = analysis.platform
        used = {k.precision for k in analysis.kernels} or {p.precisions()[0]}
        ridges += [p.ridge(q) for q in used]
        peaks += [p.peak(q) for q in used]
    xmin, xmax = decades(intensities + ridges, 2.0, 4)
    ymin, ymax = decades(perfs + peaks, 1.6, 3)
    halo = [patheffects.withStroke(linewidth=3, foreground="white")]

    legend_handles = []
    for index, analysis in enumerate(analyses):
        p = analysis.platform
        colour = PALETTE[index % len(PALETTE)] if several else "#1d2330"
        marker = MARKERS[index % len(MARKERS)] if several else "o"
        used = sorted({k.precision for k in analysis.kernels}, key=p.peak)
        main = _main_precision(analysis)
        shown = [main] if several and main else (used or [p.precisions()[0]])
        for q in shown:
            peak, ridge = p.peak(q), p.ridge(q)
            start = max(xmin, ymin / p.dram_bandwidth)
            primary = q == main or several
            ax.plot(
                [start, ridge, xmax],
                [start * p.dram_bandwidth, peak, peak],
                color=colour if primary else "#8a93a6",
                linewidth=2.0 if primary else 1.3,
                linestyle="-" if primary else "--",
                zorder=2,
            )
            ax.plot(
                [ridge],
                [peak],
                marker="o",
                markersize=5,
                markerfacecolor="white",
                markeredgecolor=colour,
                markeredgewidth=1.5,
                zorder=4,
            )
            if several:  # roofs of similar platforms lie close together: their figures go in the legend
                continue
            ax.annotate(
                f"{q} peak {si(peak, 'FLOP/s')}",
                (xmax, peak),
                xytext=(-4, 5),
                textcoords="offset points",
                ha="right",
                va="bottom",
                fontsize=8,
                color=colour if primary else "#6a7387",
                zorder=6,
                path_effects=halo,
            )
            ax.annotate(
                f"ridge {ridge:.3g} FLOP/B",
                (ridge, peak),
                xytext=(6, -12),
                textcoords="offset points",
                fontsize=7.5,
                color="#4a5266",
                zorder=6,
                path_effects=halo,
            )
        if not several and main:
            _cache_roofs(ax, p, main, xmin, ymin, halo)
        drawn = [k for k in analysis.kernels if k.flops > 0 and k.latency_s > 0]
        xs = [xmax if k.intensity is None or not math.isfinite(k.intensity) else max(k.intensity, xmin) for k in drawn]
        ys = [max(k.flops / k.latency_s, ymin) for k in drawn]
        tmax = max((k.latency_s for k in analysis.kernels), default=1.0) or 1.0
        sizes = [6 + 380 * k.latency_s / tmax for k in drawn]  # area ∝ time, per platform
        if several:
            colours = [colour] * len(drawn)
        else:
            by_op = op_colours(op_type_time(analysis.kernels))
            colours = [by_op.get(k.op_types[0] if k.op_types else "?", OTHER_COLOUR) for k in drawn]
        order = sorted(range(len(drawn)), key=lambda i: -drawn[i].latency_s)  # small points on top
        ax.scatter(
            [xs[i] for i in order],
            [ys[i] for i in order],
            s=[sizes[i] for i in order],
            c=[colours[i] for i in order],
            marker=marker,
            alpha=0.78,
            edgecolors="white",
            linewidths=0.5,
            zorder=3,
        )
        idle = [k for k in analysis.kernels if not k.flops > 0]
        if several:
            roof = f"{main} {si(p.peak(main), 'FLOP/s')}, " if main else ""
            label = (
                f"{plain_text(p.title)}: {seconds(analysis.totals.latency_s)} "
                f"({roof}{si(p.dram_bandwidth, 'B/s')}, ridge {p.ridge(main):.3g})"
                if main
                else f"{plain_text(p.title)}: {seconds(analysis.totals.latency_s)}"
            )
            legend_handles.append(Line2D([], [], color=colour, marker=marker, linestyle="-", label=label))
        elif idle:
            share = sum(k.latency_s for k in idle) / (analysis.totals.latency_s or 1.0)
            ax.text(
                0.01,
                0.01,
                f"not drawn: {len(idle)} kernels that only move data ({100 * share:.1f}% of time)",
                transform=ax.transAxes,
                fontsize=7.5,
                color="#677085",
                va="bottom",
            )
    if not several:
        rows = op_type_time(analyses[0].kernels)
        colours = op_colours(rows)
        for op, _, latency in rows[:_MAX_LEGEND_OPS]:
            share = latency / (analyses[0].totals.latency_s or 1.0)
            legend_handles.append(
                Line2D(
                    [], [], color=colours[op], marker="o", linestyle="", label=f"{plain_text(op)} {100 * share:.1f}%"
                )
            )
        if len(rows) > _MAX_LEGEND_OPS:
            legend_handles.append(Line2D([], [], color=OTHER_COLOUR, marker="o", linestyle="", label="other"))

    ax.set_xlim(xmin, xmax)
    ax.set_ylim(ymin, ymax)
    ax.xaxis.set_major_locator(LogLocator(base=10))
    ax.yaxis.set_major_locator(LogLocator(base=10))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: si(v)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: si(v, "FLOP/s")))
    ax.grid(True, which="major", color="#e6e8ef", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("predicted throughput (FLOP/s)")
    for spine in ax.spines.values():
        spine.set_color("#cfd4de")
    model = analyses[0].model
    name = Path(model.path).name if model.path else (model.graph_name or "model")
    where = f"{len(analyses)} platforms" if several else analyses[0].platform.title
    ax.set_title(plain_text(title) if title else f"{plain_text(name)} on {plain_text(where)}", fontsize=11, loc="left")
    if several:  # long platform titles: below the chart, never over the points
        fig.legend(handles=legend_handles, fontsize=8, loc="outside lower center", frameon=False)
    else:
        ax.legend(handles=legend_handles, fontsize=8, loc="lower right", frameon=True, framealpha=0.9)
    return fig


def _cache_roofs(ax, platform, precision: str, xmin: float, ymin: float, halo) -> None:
    """Dotted memory slopes of the on-chip level or measured cache levels, up to the ``precision`` peak: a kernel
    whose working set fits a level is placed against that level's roof."""
    peak = platform.peak(precision)
    for number, level in enumerate(platform.cache_levels, start=1):
        ridge = peak / level.bandwidth
        start = max(xmin, ymin / level.bandwidth)
        if start >= ridge:
            continue
        ax.plot(
            [start, ridge], [start * level.bandwidth, peak], color="#8a93a6", linewidth=1.1, linestyle=":", zorder=2
        )
        ax.annotate(
            f"{level.name or f'L{number}'} {si(level.bandwidth, 'B/s')}",
            (start, start * level.bandwidth),
            xytext=(4, 6),
            textcoords="offset points",
            fontsize=7,
            color="#6a7387",
            zorder=6,
            path_effects=halo,
        )


def render_plot(analyses: Sequence[Analysis], fmt: str, title: str | None = None) -> bytes:
    """The chart as PNG, SVG or PDF bytes."""
    if fmt not in FORMATS:
        raise OnnxroofError(f"unknown plot format '{fmt}'; use one of {', '.join(FORMATS)}")
    return figure_bytes(figure(analyses, title), fmt)


def figure_bytes(fig, fmt: str) -> bytes:
    """A matplotlib figure as PNG, SVG or PDF bytes (every onnxroof chart is written this way)."""
    if fmt not in FORMATS:
        raise OnnxroofError(f"unknown plot format '{fmt}'; use one of {', '.join(FORMATS)}")
    buffer = io.BytesIO()
    metadata = {"Software": "onnxroof"} if fmt == "png" else {"Creator": "onnxroof"} if fmt == "pdf" else {}
    fig.savefig(buffer, format=fmt, metadata=metadata)
    return buffer.getvalue()
