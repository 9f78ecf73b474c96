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

from typing import NamedTuple

from onnxroof.analysis.analyze import Analysis
from onnxroof.core.errors import OnnxroofError
from onnxroof.core.units import joules
from onnxroof.report import charts
from onnxroof.report.html import BOUND_COLOURS
from onnxroof.roofline.energy import byte_energy, energy_ridge, op_energy


class _Floor(NamedTuple):
    """The main floor: its precision, ``E_op`` (J/op), energy ridge (FLOP/B) and ``E_dram`` (J/B)."""

    precision: str
    per_op: float
    ridge: float
    dram: float


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
    require_energy(analysis)
    p = analysis.platform
    main = analysis.main_precision
    floor = _Floor(main, op_energy(p, main) or 0.0, energy_ridge(p, main) or 1.0, byte_energy(p, "dram"))
    drawn = [k for k in analysis.kernels if k.flops > 0 and k.energy_j]
    ys = [(k.energy_j or 0.0) / k.flops for k in drawn]
    limits = (
        *charts.decades([*charts.finite_intensities(drawn), floor.ridge], 2.0, 4),
        *charts.decades([*ys, floor.per_op, 2 * floor.per_op], 1.6, 3),
    )
    fig, ax = charts.log_log_axes()
    _floors(ax, analysis, drawn, floor, limits)
    _energy_points(ax, drawn, ys, limits)
    total = sum(k.energy_j or 0.0 for k in analysis.kernels) or 1.0
    handles = _bound_handles(drawn, total, main)
    _idle_note(ax, analysis, total)
    charts.finish_log_axes(ax, limits, (lambda v: f"{v:g}", lambda v: f"{joules(v)}/op"), "energy per operation (J/op)")
    name = charts.model_name(analysis.model)
    heading = title or f"{name} on {p.name}: floorline, {joules(analysis.totals.energy_j)} per inference"
    ax.set_title(charts.plain_text(heading), fontsize=11, loc="left")
    ax.legend(handles=handles, fontsize=8, loc="upper right", frameon=True, framealpha=0.9)
    return fig


def _floors(ax, analysis: Analysis, drawn: list, floor: _Floor, limits: tuple[float, float, float, float]) -> None:
    """The other precisions' floors (thin, grey), the main floor, its asymptote ``E_op`` and its energy ridge."""
    p = analysis.platform
    xmin, xmax = limits[:2]
    grid = [xmin * (xmax / xmin) ** (i / 200) for i in range(201)]
    used = sorted({k.precision for k in drawn} - {floor.precision}, key=lambda q: -(op_energy(p, q) or 0.0))
    for q in used:
        e_op = op_energy(p, q) or floor.per_op
        ax.plot(grid, [e_op + floor.dram / x for x in grid], color="#8a93a6", linewidth=1.1, linestyle="--", zorder=2)
    ax.plot(grid, [floor.per_op + floor.dram / x for x in grid], color=charts.POINT_COLOUR, linewidth=2.0, zorder=2)
    ax.axhline(floor.per_op, color=charts.POINT_COLOUR, linewidth=1.0, linestyle=":", zorder=2)
    ax.axvline(floor.ridge, color="#8a93a6", linewidth=0.9, linestyle=":", zorder=1)
    charts.ridge_marker(ax, floor.ridge, 2 * floor.per_op)
    text = f"{floor.precision} floor E_op = {joules(floor.per_op)}/op"
    charts.label(ax, text, (xmin, floor.per_op), (4, 5), ha="left", fontsize=8, color=charts.POINT_COLOUR)
    text = f"energy ridge {floor.ridge:.3g} FLOP/B"
    charts.label(ax, text, (floor.ridge, 2 * floor.per_op), (6, 6), fontsize=7.5, color="#4a5266")


def _energy_points(ax, drawn: list, ys: list[float], limits: tuple[float, float, float, float]) -> None:
    """Each kernel with arithmetic at (intensity, J/op), its area ∝ its energy, coloured by its energy bound."""
    xmin, xmax, ymin, _ = limits
    energies = [k.energy_j or 0.0 for k in drawn]
    largest = max(energies, default=1.0)
    points = [
        (x, max(y, ymin), charts.point_size(e, largest), BOUND_COLOURS.get(k.energy_bound, "#b5b5b5"))
        for k, x, y, e in zip(drawn, charts.intensity_x(drawn, xmin, xmax), ys, energies, strict=True)
    ]
    charts.sized_points(ax, points, energies)


def _bound_handles(drawn: list, total: float, main: str) -> list:
    """The legend: the main floor, then each energy bound with its kernels and share of the energy."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=charts.POINT_COLOUR, linewidth=2.0, label=f"floor E_op + E_dram / I ({main})")]
    for bound, colour in BOUND_COLOURS.items():
        members = [k for k in drawn if k.energy_bound == bound]
        if members:
            share = sum(k.energy_j or 0.0 for k in members) / total
            text = f"{bound}-energy-bound: {len(members)} kernels, {100 * share:.1f}% of energy"
            handles.append(charts.legend_dot(colour, text))
    return handles


def _idle_note(ax, analysis: Analysis, total: float) -> None:
    """How many kernels have no FLOPs (no place on the chart) and their share of the energy."""
    idle = [k for k in analysis.kernels if not k.flops > 0 and k.energy_j]
    if idle:
        share = sum(k.energy_j or 0.0 for k in idle) / total
        charts.corner_note(ax, f"not drawn: {len(idle)} kernels that only move data ({100 * share:.1f}% of energy)")


def render_floorline(analysis: Analysis, fmt: str, title: str | None = None) -> bytes:
    """The floorline chart as PNG, SVG or PDF bytes."""
    return charts.figure_bytes(floorline_figure(analysis, title), fmt)
