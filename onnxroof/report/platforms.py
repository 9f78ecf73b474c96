"""Listings: bundled platforms with their ridge points, and the cost-rule registry."""

from __future__ import annotations

import inspect
import json

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from onnxroof.core.registry import RuleEntry
from onnxroof.core.units import si
from onnxroof.platform.model import Platform
from onnxroof.report.columns import Column, fit_columns, table_width

_SHOWN = ("fp32", "fp16", "bf16", "int8")
_MIN_TITLE_WIDTH = 20

# (header, keep) for the figure columns; keep 0: always shown, otherwise the larger, the sooner it goes
FIGURE_COLUMNS = (
    ("fp32\nFLOP/s", 0),
    ("fp16\nFLOP/s", 2),
    ("bf16\nFLOP/s", 6),
    ("int8\nOP/s", 4),
    ("DRAM\nB/s", 0),
    ("ridge\nfp32", 0),
    ("ridge\nfp16", 3),
    ("launch\nµs", 5),
    ("sustained\nBW/tensor", 1),
    ("pJ/op", 7),
    ("pJ/B\nDRAM", 7),
    ("PE\narray", 8),
)
_COLUMN_INDEX = {header: i for i, (header, _) in enumerate(FIGURE_COLUMNS)}


def platform_cells(p: Platform) -> tuple[str, ...]:
    """The figure cells of one platform, in :data:`FIGURE_COLUMNS` order; units live in the headers."""
    peaks = [si(p.peak_flops[x]) if x in p.peak_flops else "–" for x in _SHOWN]
    ridges = [f"{p.ridge(x):.3g}" if x in p.peak_flops else "–" for x in ("fp32", "fp16")]
    return (
        *peaks,
        si(p.dram_bandwidth),
        *ridges,
        f"{p.launch_overhead_s * 1e6:.3g}",
        _sustained_text(p),
        _energy_per_op_text(p),
        f"{p.energy_per_byte['dram'] * 1e12:.3g}" if p.has_energy else "–",
        f"{p.array.height}×{p.array.width}×{p.array.instances}" if p.array else "–",
    )


def platform_columns(platforms: tuple[Platform, ...], width: int) -> tuple[tuple[Column, ...], int]:
    """The figure columns that fit ``width`` beside the platform names, and the width left for the titles
    (0 when fewer than 20 characters are left: the titles go first)."""
    return _fit(platforms, [platform_cells(p) for p in platforms], width)


def _fit(platforms: tuple[Platform, ...], rows: list[tuple[str, ...]], width: int) -> tuple[tuple[Column, ...], int]:
    """:func:`platform_columns` over the platforms' cells, computed once by the caller."""
    columns = [
        Column(header, "right", max(*(len(line) for line in header.split("\n")), *(len(r[i]) for r in rows)), keep)
        for i, (header, keep) in enumerate(FIGURE_COLUMNS)
    ]
    name_width = max(len("name"), *(len(p.name) for p in platforms))
    kept = fit_columns(columns, width, name_width)
    room = width - table_width([name_width, *(c.width for c in kept)]) - 3  # a title column costs its width + 3
    title_width = min(room, max(len(p.title) for p in platforms)) if room >= _MIN_TITLE_WIDTH else 0
    return kept, title_width


def render_platforms_table(platforms: tuple[Platform, ...], console: Console) -> None:
    """One row per platform; on a narrow terminal the titles, then the least needed figures, are left out
    (named under the table), never folded or cut."""
    rows = [platform_cells(p) for p in platforms]
    columns, title_width = _fit(platforms, rows, console.width)
    table = Table(
        title="Bundled platforms (dense datasheet peaks; ridge from the sustained roofs, FLOP/B)",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    table.add_column("name", no_wrap=True)
    if title_width:
        table.add_column("title", no_wrap=True, overflow="ellipsis", max_width=title_width)
    for column in columns:
        table.add_column(column.name, justify=column.justify, no_wrap=True)
    shown = [_COLUMN_INDEX[c.name] for c in columns]
    for p, cells in zip(platforms, rows, strict=True):
        titles = [Text(p.title)] if title_width else []
        table.add_row(Text(p.name), *titles, *(cells[i] for i in shown))
    console.print(table)
    left_out = [header.replace("\n", " ") for i, (header, _) in enumerate(FIGURE_COLUMNS) if i not in shown]
    if not title_width:
        left_out.insert(0, "title")
    if left_out:
        console.print(f"Left out at this width: {', '.join(left_out)}. Widen the terminal or use --format json.")


def _sustained_text(p: Platform) -> str:
    """The ``[sustained]`` shares as percentages, ``"88%/69%"`` (bandwidth / tensor peak; ``–`` where not given)."""
    if not p.sustained:
        return "–"
    shares = [p.sustained.get(key) for key in ("dram_bandwidth", "tensor")]
    return "/".join("–" if s is None else f"{s:.0%}" for s in shares)


def _energy_per_op_text(p: Platform) -> str:
    """Energy per operation at the platform's first precision with a figure, in pJ, with that precision."""
    if not p.has_energy:
        return "–"
    precision = next(x for x in (*p.precisions(), *p.energy_per_op) if x in p.energy_per_op)
    return f"{p.energy_per_op[precision] * 1e12:.3g} {precision}"


def render_platforms_json(platforms: tuple[Platform, ...]) -> str:
    """Every platform's figures in SI units, as the report JSON's ``platform`` object."""
    from onnxroof.analysis.document import platform_fields

    return json.dumps([platform_fields(p) for p in platforms], indent=2) + "\n"


def _rule_name(entry: RuleEntry) -> str:
    return f"{entry.domain}::{entry.op_type}" if entry.domain else entry.op_type


def _formula(entry: RuleEntry) -> str:
    """The docstring's ``Formula:`` line, else its first line."""
    return next(
        (line.split(":", 1)[1].strip() for line in entry.doc.splitlines() if line.strip().startswith("Formula:")),
        entry.doc.splitlines()[0] if entry.doc else "",
    )


def select_rules(entries: tuple[RuleEntry, ...], op: str | None) -> tuple[RuleEntry, ...]:
    """The rules for ``op`` (an op type, any case, or ``domain::OpType``), every rule when None; an op no rule
    covers is an error naming it and the nearest op types."""
    if op is None:
        return entries
    wanted = op.strip().lower()
    found = tuple(e for e in entries if wanted in (e.op_type.lower(), _rule_name(e).lower()))
    if not found:
        import difflib

        from onnxroof.core.errors import OnnxroofError

        names = sorted({e.op_type for e in entries})
        near = difflib.get_close_matches(op.strip(), names, n=3, cutoff=0.6)
        hint = f" (did you mean {', '.join(near)}?)" if near else " (`onnxroof rules` lists them)"
        raise OnnxroofError(f"rules: no cost rule for op type '{op}'{hint}")
    return found


def render_rules_json(entries: tuple[RuleEntry, ...]) -> str:
    """Each rule as ``{op_type, domain, family, kind, status, op_class, formula, doc}``: the registry as data."""
    rows = [
        {
            "op_type": e.op_type,
            "domain": e.domain,
            "family": e.family,
            "kind": str(e.kind),
            "status": str(e.status),
            "op_class": str(e.op_class),
            "formula": _formula(e),
            "doc": inspect.cleandoc(e.doc),
        }
        for e in entries
    ]
    return json.dumps(rows, indent=2) + "\n"


def render_rules_table(entries: tuple[RuleEntry, ...], console: Console, full: bool = False) -> None:
    """The rules as a table (op type, kind, status, formula); with ``full`` (one op asked for) each rule's whole
    docstring follows its row: formula, bytes, assumptions, reference."""
    table = Table(title=f"{len(entries)} cost rules", box=box.SIMPLE_HEAD, title_justify="left")
    for name in ("op type", "kind", "status", "formula"):
        table.add_column(name, overflow="fold")
    for entry in entries:
        table.add_row(Text(_rule_name(entry)), entry.kind, entry.status, Text(_formula(entry)))
    console.print(table)
    if full:
        for entry in entries:
            console.print(Text(f"{_rule_name(entry)} ({entry.family or 'no family'}, class {entry.op_class})"))
            console.print(Text(inspect.cleandoc(entry.doc) + "\n"))
