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

from collections.abc import Sequence
from pathlib import Path

from onnxroof.analysis.analyze import Analysis
from onnxroof.core.errors import OnnxroofError
from onnxroof.core.units import seconds, si
from onnxroof.report.charts import (
    FORMATS,
    POINT_COLOUR,
    corner_note,
    decades,
    figure_bytes,
    finish_log_axes,
    finite_intensities,
    intensity_x,
    label,
    legend_dot,
    log_log_axes,
    model_name,
    plain_text,
    point_size,
    ridge_marker,
    sized_points,
)
from onnxroof.report.html import OTHER_COLOUR, PALETTE, op_colours, op_type_time

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">")
_MAX_LEGEND_OPS = 9
_SECONDARY, _SECONDARY_TEXT = "#8a93a6", "#6a7387"
Limits = tuple[float, float, float, float]
"""``(xmin, xmax, ymin, ymax)`` of a chart's log axes."""


def plot_format(path: Path) -> str:
    suffix = path.suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise OnnxroofError(f"{path}: unknown plot format '{path.suffix}'; use .png, .svg or .pdf")
    return suffix


def figure(analyses: Sequence[Analysis], title: str | None = None):
    """The roofline figure for one model on one or several platforms."""
    from matplotlib.lines import Line2D

    if not analyses:
        raise ValueError("nothing to plot")
    several = len(analyses) > 1
    fig, ax = log_log_axes()
    limits = _limits(analyses)
    legend_handles = []
    for index, analysis in enumerate(analyses):
        colour = PALETTE[index % len(PALETTE)] if several else POINT_COLOUR
        marker = MARKERS[index % len(MARKERS)] if several else "o"
        _roofs(ax, analysis, colour, several, limits)
        _kernel_points(ax, analysis, colour if several else None, marker, limits)
        if several:
            text = _platform_text(analysis)
            legend_handles.append(Line2D([], [], color=colour, marker=marker, linestyle="-", label=text))
        else:
            _idle_note(ax, analysis)
    if not several:
        legend_handles += _op_handles(analyses[0])
    finish_log_axes(ax, limits, (si, lambda v: si(v, "FLOP/s")), "predicted throughput (FLOP/s)")
    ax.set_title(_title(analyses, title), fontsize=11, loc="left")
    if several:  # long platform titles: below the chart, never over the points
        fig.legend(handles=legend_handles, fontsize=8, loc="outside lower center", frameon=False)
    else:
        ax.legend(handles=legend_handles, fontsize=8, loc="lower right", frameon=True, framealpha=0.9)
    return fig


def _limits(analyses: Sequence[Analysis]) -> Limits:
    """Whole decades around every drawn kernel and every ridge and peak of the precisions the model uses."""
    intensities, perfs, ridges, peaks = [], [], [], []
    for analysis in analyses:
        drawn = _drawn(analysis)
        perfs += [k.flops / k.latency_s for k in drawn]
        intensities += finite_intensities(drawn)
        p = analysis.platform
        used = {k.precision for k in analysis.kernels} or {p.precisions()[0]}
        ridges += [p.ridge(q) for q in used]
        peaks += [p.peak(q) for q in used]
    return (*decades(intensities + ridges, 2.0, 4), *decades(perfs + peaks, 1.6, 3))


def _drawn(analysis: Analysis) -> list:
    """The kernels a log–log roofline can place: some FLOPs, some time."""
    return [k for k in analysis.kernels if k.flops > 0 and k.latency_s > 0]


def _roofs(ax, analysis: Analysis, colour: str, several: bool, limits: Limits) -> None:
    """One platform's roofs: every precision the model computes in (the main one solid), or only the main one
    when several platforms share the chart; on one platform, their figures and the cache levels' slopes."""
    p = analysis.platform
    main = analysis.main_precision if analysis.kernels else None
    used = sorted({k.precision for k in analysis.kernels}, key=p.peak)
    shown = [main] if several and main else (used or [p.precisions()[0]])
    for q in shown:
        primary = q == main or several
        _roof(ax, p, q, colour if primary else _SECONDARY, primary, limits)
        ridge_marker(ax, p.ridge(q), p.peak(q), colour)
        if not several:  # roofs of similar platforms lie close together: their figures go in the legend
            _roof_labels(ax, p, q, colour if primary else _SECONDARY_TEXT, limits[1])
    if not several and main:
        _cache_roofs(ax, p, main, limits)


def _roof(ax, platform, precision: str, colour: str, primary: bool, limits: Limits) -> None:
    """The DRAM slope up to the ridge, then the flat ``precision`` peak; solid when ``primary``, else dashed."""
    xmin, xmax, ymin, _ = limits
    peak, ridge = platform.peak(precision), platform.ridge(precision)
    start = max(xmin, ymin / platform.roof_bandwidth)
    ax.plot(
        [start, ridge, xmax],
        [start * platform.roof_bandwidth, peak, peak],
        color=colour,
        linewidth=2.0 if primary else 1.3,
        linestyle="-" if primary else "--",
        zorder=2,
    )


def _roof_labels(ax, platform, precision: str, colour: str, xmax: float) -> None:
    """The peak at the right end of its roof; the ridge intensity under the ridge point."""
    peak, ridge = platform.peak(precision), platform.ridge(precision)
    label(
        ax,
        f"{precision} peak {si(peak, 'FLOP/s')}",
        (xmax, peak),
        (-4, 5),
        ha="right",
        va="bottom",
        fontsize=8,
        color=colour,
    )
    label(ax, f"ridge {ridge:.3g} FLOP/B", (ridge, peak), (6, -12), fontsize=7.5, color="#4a5266")


def _cache_roofs(ax, platform, precision: str, limits: Limits) -> None:
    """Dotted memory slopes of the on-chip level or measured cache levels, up to the ``precision`` peak: a kernel
    whose working set fits a level is placed against that level's roof."""
    xmin, _, ymin, _ = limits
    peak = platform.peak(precision)
    for number, level in enumerate(platform.cache_levels, start=1):
        ridge = peak / level.bandwidth
        start = max(xmin, ymin / level.bandwidth)
        if start >= ridge:
            continue
        ax.plot(
            [start, ridge], [start * level.bandwidth, peak], color=_SECONDARY, linewidth=1.1, linestyle=":", zorder=2
        )
        text = f"{level.name or f'L{number}'} {si(level.bandwidth, 'B/s')}"
        label(ax, text, (start, start * level.bandwidth), (4, 6), fontsize=7, color=_SECONDARY_TEXT)


def _kernel_points(ax, analysis: Analysis, colour: str | None, marker: str, limits: Limits) -> None:
    """Every kernel with FLOPs at (intensity, FLOP/s), its area ∝ its time (per platform); all of ``colour``, or
    coloured by op type when ``colour`` is None."""
    xmin, xmax, ymin, _ = limits
    drawn = _drawn(analysis)
    tmax = max((k.latency_s for k in analysis.kernels), default=1.0) or 1.0
    if colour is None:
        by_op = op_colours(op_type_time(analysis.kernels))
        colours = [by_op.get(k.op_types[0] if k.op_types else "?", OTHER_COLOUR) for k in drawn]
    else:
        colours = [colour] * len(drawn)
    points = [
        (x, max(k.flops / k.latency_s, ymin), point_size(k.latency_s, tmax), c)
        for k, x, c in zip(drawn, intensity_x(drawn, xmin, xmax), colours, strict=True)
    ]
    sized_points(ax, points, [k.latency_s for k in drawn], marker=marker)


def _platform_text(analysis: Analysis) -> str:
    """A platform's legend entry on a chart of several: its title, the model's latency, its main roof."""
    p = analysis.platform
    main = analysis.main_precision if analysis.kernels else None
    head = f"{plain_text(p.title)}: {seconds(analysis.totals.latency_s)}"
    if not main:
        return head
    return f"{head} ({main} {si(p.peak(main), 'FLOP/s')}, {si(p.roof_bandwidth, 'B/s')}, ridge {p.ridge(main):.3g})"


def _idle_note(ax, analysis: Analysis) -> None:
    """How many kernels have no FLOPs (no place on log axes) and their share of the time."""
    idle = [k for k in analysis.kernels if not k.flops > 0]
    if idle:
        share = sum(k.latency_s for k in idle) / (analysis.totals.latency_s or 1.0)
        corner_note(ax, f"not drawn: {len(idle)} kernels that only move data ({100 * share:.1f}% of time)")


def _op_handles(analysis: Analysis) -> list:
    """The legend of one platform's chart: the op types with the most time and their share, then "other"."""
    rows = op_type_time(analysis.kernels)
    colours = op_colours(rows)
    total = analysis.totals.latency_s or 1.0
    handles = [
        legend_dot(colours[op], f"{plain_text(op)} {100 * (latency / total):.1f}%")
        for op, _, latency in rows[:_MAX_LEGEND_OPS]
    ]
    if len(rows) > _MAX_LEGEND_OPS:
        handles.append(legend_dot(OTHER_COLOUR, "other"))
    return handles


def _title(analyses: Sequence[Analysis], title: str | None) -> str:
    if title:
        return plain_text(title)
    where = f"{len(analyses)} platforms" if len(analyses) > 1 else analyses[0].platform.title
    return f"{plain_text(model_name(analyses[0].model))} on {plain_text(where)}"


def render_plot(analyses: Sequence[Analysis], fmt: str, title: str | None = None) -> bytes:
    """The chart as PNG, SVG or PDF bytes."""
    if fmt not in FORMATS:
        raise OnnxroofError(f"unknown plot format '{fmt}'; use one of {', '.join(FORMATS)}")
    return figure_bytes(figure(analyses, title), fmt)
