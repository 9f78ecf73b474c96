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
        )
    console.print(table)


def render_platforms_json(platforms: tuple[Platform, ...]) -> str:
    rows = [
        {
            "name": p.name,
            "title": p.title,
            "kind": p.kind,
            "peak_flops": dict(p.peak_flops),
            "sparse_peak_flops": dict(p.sparse_peak_flops),
            "dram_bandwidth": p.dram_bandwidth,
            "ridge": {x: p.ridge(x) for x in p.precisions()},
            "launch_overhead_s": p.launch_overhead_s,
            "fusion_profile": p.fusion_profile,
        }
        for p in platforms
    ]
    return json.dumps(rows, indent=2) + "\n"


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
