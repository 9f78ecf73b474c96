"""Listings: bundled platforms with their ridge points, and the cost-rule registry."""

from __future__ import annotations

import json

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from onnxroof.platform import Platform
from onnxroof.registry import RuleEntry
from onnxroof.report.units import si

_SHOWN = ("fp32", "fp16", "bf16", "int8")


def render_platforms_table(platforms: tuple[Platform, ...], console: Console) -> None:
    table = Table(
        title="Bundled platforms (dense peaks; ridge = peak / DRAM bandwidth)",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    table.add_column("name")
    table.add_column("title", overflow="fold")
    for precision in _SHOWN:
        table.add_column(f"{precision} peak", justify="right")
    table.add_column("DRAM BW", justify="right")
    for precision in ("fp32", "fp16"):
        table.add_column(f"ridge {precision}", justify="right")
    table.add_column("launch", justify="right")
    table.add_column("pJ/op · pJ/B", justify="right")
    table.add_column("PE array", justify="right")
    for p in platforms:
        peaks = [si(p.peak_flops[x], "FLOP/s") if x in p.peak_flops else "–" for x in _SHOWN]
        ridges = [f"{p.ridge(x):.3g}" if x in p.peak_flops else "–" for x in ("fp32", "fp16")]
        table.add_row(
            Text(p.name),
            Text(p.title),
            *peaks,
            si(p.dram_bandwidth, "B/s"),
            *ridges,
            f"{p.launch_overhead_s * 1e6:.3g} µs",
            _energy_text(p),
            f"{p.array.height}×{p.array.width}×{p.array.instances}" if p.array else "–",
        )
    console.print(table)


def _energy_text(p: Platform) -> str:
    """Energy per operation at the platform's first precision with a figure, and per DRAM byte, in pJ."""
    if not p.has_energy:
        return "–"
    precision = next(x for x in (*p.precisions(), *p.energy_per_op) if x in p.energy_per_op)
    return f"{p.energy_per_op[precision] * 1e12:.3g} ({precision}) · {p.energy_per_byte['dram'] * 1e12:.3g}"


def render_platforms_json(platforms: tuple[Platform, ...]) -> str:
    """Every platform's figures in SI units, as the report JSON's ``platform`` object."""
    from onnxroof.report.data import platform_fields

    return json.dumps([platform_fields(p) for p in platforms], indent=2) + "\n"


def render_rules_table(entries: tuple[RuleEntry, ...], console: Console) -> None:
    table = Table(title=f"{len(entries)} cost rules", box=box.SIMPLE_HEAD, title_justify="left")
    for name in ("op type", "kind", "status", "formula"):
        table.add_column(name, overflow="fold")
    for entry in entries:
        formula = next(
            (line.split(":", 1)[1].strip() for line in entry.doc.splitlines() if line.strip().startswith("Formula:")),
            entry.doc.splitlines()[0] if entry.doc else "",
        )
        name = f"{entry.domain}::{entry.op_type}" if entry.domain else entry.op_type
        table.add_row(Text(name), entry.kind, entry.status, Text(formula))
    console.print(table)
