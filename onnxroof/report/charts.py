"""What every onnxroof chart shares: plain model text, whole-decade log limits, the figure's bytes, and the
pieces the roofline and floorline charts draw alike (log–log axes, ridge markers, kernel points, notes).

Figures are bare :class:`~matplotlib.figure.Figure` objects (no pyplot, no global state); matplotlib is
imported inside the functions that draw, so that importing a report module stays cheap.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Sequence
from pathlib import Path

from onnxroof.core.errors import OnnxroofError

FORMATS = ("png", "svg", "pdf")
POINT_COLOUR = "#1d2330"
"""The ink of a single-platform roof or floor and its ridge marker."""
GRID, SPINE, NOTE = "#e6e8ef", "#cfd4de", "#677085"


def plain_text(text: str) -> str:
    """Model text as literal matplotlib text: no mathtext, no control characters."""
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    return text.replace("$", r"\$")


def decades(values: Sequence[float], pad: float, minimum: int) -> tuple[float, float]:
    """Log-axis limits on whole decades around ``values`` (widened by ``pad``), at least ``minimum`` decades."""
    lo = math.floor(math.log10(min(values) / pad))
    hi = math.ceil(math.log10(max(values) * pad))
    while hi - lo < minimum:
        hi += 1
        if hi - lo < minimum:
            lo -= 1
    return 10.0**lo, 10.0**hi


def figure_bytes(fig, fmt: str) -> bytes:
    """A matplotlib figure as PNG, SVG or PDF bytes (every onnxroof chart is written this way)."""
    if fmt not in FORMATS:
        raise OnnxroofError(f"unknown plot format '{fmt}'; use one of {', '.join(FORMATS)}")
    buffer = io.BytesIO()
    metadata = {"Software": "onnxroof"} if fmt == "png" else {"Creator": "onnxroof"} if fmt == "pdf" else {}
    fig.savefig(buffer, format=fmt, metadata=metadata)
    return buffer.getvalue()


def model_name(model) -> str:
    """The model's file name, else its graph name, else ``model``."""
    return Path(model.path).name if model.path else (model.graph_name or "model")


def frame(ax, **grid) -> None:
    """Light major grid behind the data and light spines."""
    ax.grid(True, color=GRID, linewidth=0.8, **grid)
    ax.set_axisbelow(True)
    for spine in ax.spines.values():
        spine.set_color(SPINE)


# ------------------------------------------------------------------------------------- log-log kernel charts


def log_log_axes():
    """The figure and its one log–log axes, as the roofline and floorline charts are laid out."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 6.2), dpi=150, layout="constrained")
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    return fig, ax


def halo() -> list:
    """A white outline that keeps a label legible over lines and points."""
    from matplotlib import patheffects

    return [patheffects.withStroke(linewidth=3, foreground="white")]


def finish_log_axes(
    ax,
    limits: tuple[float, float, float, float],
    ticks: tuple[Callable[[float], str], Callable[[float], str]],
    ylabel: str,
) -> None:
    """Whole-decade limits ``(xmin, xmax, ymin, ymax)``, one tick per decade labelled by ``ticks`` (x, y), the
    intensity x label and ``ylabel``."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    xmin, xmax, ymin, ymax = limits
    x_tick, y_tick = ticks
    ax.set_xlim(xmin, xmax)
    ax.set_ylim(ymin, ymax)
    ax.xaxis.set_major_locator(LogLocator(base=10))
    ax.yaxis.set_major_locator(LogLocator(base=10))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: x_tick(v)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: y_tick(v)))
    frame(ax, which="major")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel(ylabel)


def ridge_marker(ax, x: float, y: float, colour: str = POINT_COLOUR) -> None:
    """A hollow dot at a ridge point."""
    ax.plot(
        [x],
        [y],
        marker="o",
        markersize=5,
        markerfacecolor="white",
        markeredgecolor=colour,
        markeredgewidth=1.5,
        zorder=4,
    )


def label(ax, text: str, xy: tuple[float, float], offset: tuple[float, float], **style) -> None:
    """Text ``offset`` points from the data point ``xy``, haloed, above the data."""
    ax.annotate(text, xy, xytext=offset, textcoords="offset points", zorder=6, path_effects=halo(), **style)


def intensity_x(kernels: Sequence, xmin: float, xmax: float) -> list[float]:
    """Each kernel's x: its intensity, no less than ``xmin``; an unknown or infinite one at ``xmax``."""
    return [xmax if k.intensity is None or not math.isfinite(k.intensity) else max(k.intensity, xmin) for k in kernels]


def finite_intensities(kernels: Sequence) -> list[float]:
    """The kernels' positive, finite intensities (those a log axis can place)."""
    return [k.intensity for k in kernels if k.intensity is not None and math.isfinite(k.intensity) and k.intensity > 0]


def sized_points(ax, points: Sequence[tuple[float, float, float, str]], weights: Sequence[float], **style) -> None:
    """Scatter ``(x, y, size, colour)`` points, the heaviest first (``weights``) so that small points stay on top."""
    order = [points[i] for i in sorted(range(len(points)), key=lambda i: -weights[i])]
    ax.scatter(
        [x for x, _, _, _ in order],
        [y for _, y, _, _ in order],
        s=[size for _, _, size, _ in order],
        c=[colour for _, _, _, colour in order],
        alpha=0.78,
        edgecolors="white",
        linewidths=0.5,
        zorder=3,
        **style,
    )


def point_size(value: float, largest: float) -> float:
    """A point's area: proportional to ``value``, 386 for the ``largest``."""
    return 6 + 380 * value / largest


def legend_dot(colour: str, text: str):
    """A legend entry: a dot of ``colour``."""
    from matplotlib.lines import Line2D

    return Line2D([], [], color=colour, marker="o", linestyle="", label=text)


def corner_note(ax, text: str) -> None:
    """A small grey note in the lower left corner of the axes."""
    ax.text(0.01, 0.01, text, transform=ax.transAxes, fontsize=7.5, color=NOTE, va="bottom")
