"""The floorline chart (matplotlib, PNG/SVG/PDF): energy per operation against arithmetic intensity.

Log–log. The floor is the least energy per operation a kernel of intensity ``I`` can spend with every byte
from DRAM, ``E_op + E_dram / I`` (:func:`onnxroof.roofline.energy.floorline`), for the precision the most predicted
time computes at (other precisions the model computes in: thinner grey floors); it falls towards the
horizontal asymptote ``E_op`` and crosses ``2·E_op`` at the energy ridge ``I* = E_dram / E_op``, where moving
data and computing cost the same. Each kernel with arithmetic is a point at (intensity, its energy ÷ its
FLOPs), its area proportional to its share of the energy, coloured by what dominates its energy (compute or
memory). A kernel served by a cheaper on-chip level can sit below the DRAM floor.
"""

from __future__ import annotations

import math
from pathlib import Path

from onnxroof.analysis.analyze import Analysis
from onnxroof.core.errors import OnnxroofError
from onnxroof.core.units import joules
from onnxroof.report.html import BOUND_COLOURS
from onnxroof.report.plot import decades, figure_bytes, plain_text
from onnxroof.roofline.energy import byte_energy, energy_ridge, op_energy
from onnxroof.studies.compare import main_precision


class NoEnergyError(OnnxroofError):
    """The platform file gives no energy figures: there is no floorline to draw."""


def require_energy(analysis: Analysis) -> None:
    """Raise :class:`NoEnergyError` naming the platform when it gives no energy figures."""
    p = analysis.platform
    if not p.has_energy:
        raise NoEnergyError(
            f"platform '{p.name}' has no energy figures: the floorline needs [energy_pj_per_op] and "
            "[energy_pj_per_byte] (with dram) in its platform file"
        )


def floorline_figure(analysis: Analysis, title: str | None = None):
    """The floorline figure of one analysis (its platform must give energy figures)."""
    from matplotlib import patheffects
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, LogLocator

    require_energy(analysis)
    p = analysis.platform
    main = main_precision(analysis)
    per_op = op_energy(p, main) or 0.0
    ridge = energy_ridge(p, main) or 1.0
    dram = byte_energy(p, "dram")
    drawn = [k for k in analysis.kernels if k.flops > 0 and k.energy_j]
    finite = [k.intensity for k in drawn if k.intensity is not None and math.isfinite(k.intensity) and k.intensity > 0]
    xmin, xmax = decades([*finite, ridge], 2.0, 4)
    ys = [(k.energy_j or 0.0) / k.flops for k in drawn]
    ymin, ymax = decades([*ys, per_op, 2 * per_op], 1.6, 3)

    fig = Figure(figsize=(10, 6.2), dpi=150, layout="constrained")
    ax = fig.add_subplot()
    ax.set_xscale("log")
    ax.set_yscale("log")
    halo = [patheffects.withStroke(linewidth=3, foreground="white")]
    grid = [xmin * (xmax / xmin) ** (i / 200) for i in range(201)]
    used = sorted({k.precision for k in drawn} - {main}, key=lambda q: -(op_energy(p, q) or 0.0))
    for q in used:  # the other precisions' floors, thin and grey
        e_op = op_energy(p, q) or per_op
        ax.plot(grid, [e_op + dram / x for x in grid], color="#8a93a6", linewidth=1.1, linestyle="--", zorder=2)
    ax.plot(grid, [per_op + dram / x for x in grid], color="#1d2330", linewidth=2.0, zorder=2)
    ax.axhline(per_op, color="#1d2330", linewidth=1.0, linestyle=":", zorder=2)
    ax.axvline(ridge, color="#8a93a6", linewidth=0.9, linestyle=":", zorder=1)
    ax.plot(
        [ridge],
        [2 * per_op],
        marker="o",
        markersize=5,
        markerfacecolor="white",
        markeredgecolor="#1d2330",
        markeredgewidth=1.5,
        zorder=4,
    )
    ax.annotate(
        f"{main} floor E_op = {joules(per_op)}/op",
        (xmin, per_op),
        xytext=(4, 5),
        textcoords="offset points",
        ha="left",
        fontsize=8,
        color="#1d2330",
        zorder=6,
        path_effects=halo,
    )
    ax.annotate(
        f"energy ridge {ridge:.3g} FLOP/B",
        (ridge, 2 * per_op),
        xytext=(6, 6),
        textcoords="offset points",
        fontsize=7.5,
        color="#4a5266",
        zorder=6,
        path_effects=halo,
    )

    total = sum(k.energy_j or 0.0 for k in analysis.kernels) or 1.0
    xs = [xmax if k.intensity is None or not math.isfinite(k.intensity) else max(k.intensity, xmin) for k in drawn]
    sizes = [6 + 380 * (k.energy_j or 0.0) / max((k.energy_j or 0.0 for k in drawn), default=1.0) for k in drawn]
    colours = [BOUND_COLOURS.get(k.energy_bound, "#b5b5b5") for k in drawn]
    order = sorted(range(len(drawn)), key=lambda i: -(drawn[i].energy_j or 0.0))  # small points on top
    ax.scatter(
        [xs[i] for i in order],
        [max(ys[i], ymin) for i in order],
        s=[sizes[i] for i in order],
        c=[colours[i] for i in order],
        alpha=0.78,
        edgecolors="white",
        linewidths=0.5,
        zorder=3,
    )
    handles = [Line2D([], [], color="#1d2330", linewidth=2.0, label=f"floor E_op + E_dram / I ({main})")]
    for bound, colour in BOUND_COLOURS.items():
        members = [k for k in drawn if k.energy_bound == bound]
        if members:
            share = sum(k.energy_j or 0.0 for k in members) / total
            label = f"{bound}-energy-bound: {len(members)} kernels, {100 * share:.1f}% of energy"
            handles.append(Line2D([], [], color=colour, marker="o", linestyle="", label=label))
    idle = [k for k in analysis.kernels if not k.flops > 0 and k.energy_j]
    if idle:
        share = sum(k.energy_j or 0.0 for k in idle) / total
        ax.text(
            0.01,
            0.01,
            f"not drawn: {len(idle)} kernels that only move data ({100 * share:.1f}% of energy)",
            transform=ax.transAxes,
            fontsize=7.5,
            color="#677085",
            va="bottom",
        )

    ax.set_xlim(xmin, xmax)
    ax.set_ylim(ymin, ymax)
    ax.xaxis.set_major_locator(LogLocator(base=10))
    ax.yaxis.set_major_locator(LogLocator(base=10))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{joules(v)}/op"))
    ax.grid(True, which="major", color="#e6e8ef", linewidth=0.8)
    ax.set_axisbelow(True)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("energy per operation (J/op)")
    for spine in ax.spines.values():
        spine.set_color("#cfd4de")
    model = analysis.model
    name = Path(model.path).name if model.path else (model.graph_name or "model")
    heading = title or f"{name} on {p.name}: floorline, {joules(analysis.totals.energy_j)} per inference"
    ax.set_title(plain_text(heading), fontsize=11, loc="left")
    ax.legend(handles=handles, fontsize=8, loc="upper right", frameon=True, framealpha=0.9)
    return fig


def render_floorline(analysis: Analysis, fmt: str, title: str | None = None) -> bytes:
    """The floorline chart as PNG, SVG or PDF bytes."""
    return figure_bytes(floorline_figure(analysis, title), fmt)
