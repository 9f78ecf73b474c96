"""A diff of two versions of a model, for people (a table) and for tools (JSON)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from rich import box
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from onnxroof.core.units import joules, percent, seconds, si
from onnxroof.gate.diff import Delta, ModelDiff

#: How the totals table names a figure where its key alone is ambiguous (the report's labels).
TOTAL_LABELS = {"bytes": "bytes (unfused)", "fused.bytes": "bytes moved (fused)"}


def format_value(value: float, kind: str) -> str:
    if kind == "duration":
        return seconds(value) if value >= 0 else "-" + seconds(-value)
    if kind == "bytes":
        return si(value, "B")
    if kind == "share":
        return percent(value)
    if kind == "energy":
        return joules(value) if value >= 0 else "-" + joules(-value)
    return si(value)


def _signed(delta: Delta) -> str:
    if not delta.changed:
        return "="
    if delta.kind == "share":
        return f"{100 * delta.change:+.1f} pt"
    sign = "+" if delta.change > 0 else "-"
    text = sign + format_value(abs(delta.change), delta.kind)
    relative = delta.relative
    return text + (f" ({relative:+.1%})" if relative is not None else " (new)")


def render_diff_json(diff: ModelDiff, verdict: Mapping[str, Any] | None = None) -> str:
    data = diff.to_dict()
    if verdict is not None:
        data["gate"] = dict(verdict)
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


def render_diff_console(
    diff: ModelDiff, console: Console, top: int = 15, gate: Mapping[str, Any] | None = None
) -> None:
    """The diff as tables; with ``gate`` (from :func:`onnxroof.gate.diff.slowdown_gate`) a PASS/FAIL line last."""
    _render_diff_tables(diff, console, top)
    if gate is not None:
        change = "new" if gate["latency_change"] is None else f"{gate['latency_change']:+.1%}"
        verdict = "PASS" if gate["passed"] else "FAIL"
        style = "bold green" if gate["passed"] else "bold red"
        console.print(f"[{style}]{verdict}[/]: latency change {change}, allowed +{gate['fail_if_slower']}")


def _render_diff_tables(diff: ModelDiff, console: Console, top: int) -> None:
    """The predicted latency change, the two sources, the totals, the op types that changed, then the kernels
    added, removed and changed (the ``top`` largest latency changes)."""
    console.print(_latency_line(diff))
    console.print(Text(f"old: {diff.old}\nnew: {diff.new}", style="dim"))
    console.print(_totals_table(diff))
    if diff.op_types or diff.op_type_counts:
        console.print(_op_types_table(diff))
    if not diff.kernels_compared:
        console.print(Text("Kernels: not compared (the baseline holds totals only)", style="dim"))
        return
    _print_kernel_changes(diff, console, top)


def _latency_line(diff: ModelDiff) -> Text:
    """``Predicted latency old → new  change  on PLATFORM``, the change red when slower, green otherwise."""
    latency = diff.latency
    return Text.assemble(
        ("Predicted latency ", "bold"),
        f"{seconds(latency.old)} → {seconds(latency.new)}  ",
        (_signed(latency), "bold red" if latency.change > 0 and latency.changed else "bold green"),
        f"  on {diff.platform}" if diff.platform else "",
    )


def _totals_table(diff: ModelDiff) -> Table:
    """Each total's old and new value and its signed change."""
    table = Table(title="Totals", box=box.SIMPLE_HEAD, title_justify="left")
    totals_columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("figure", "left"),
        ("old", "right"),
        ("new", "right"),
        ("change", "right"),
    )
    for name, justify in totals_columns:
        table.add_column(name, justify=justify, no_wrap=True)
    for delta in diff.totals:
        table.add_row(
            TOTAL_LABELS.get(delta.name, delta.name),
            format_value(delta.old, delta.kind),
            format_value(delta.new, delta.kind),
            _signed(delta),
        )
    return table


def _op_types_table(diff: ModelDiff) -> Table:
    """The op types whose count or time changed, largest time change first: count and time old → new and the
    time's signed change (``=`` where one did not change)."""
    ops = Table(title="Op types that changed", box=box.SIMPLE_HEAD, title_justify="left")
    op_columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("op type", "left"),
        ("count", "right"),
        ("time", "right"),
        ("change", "right"),
    )
    for name, justify in op_columns:
        ops.add_column(name, justify=justify, no_wrap=True)
    counts = {d.name: d for d in diff.op_type_counts}
    latencies = {d.name: d for d in diff.op_types}
    for name in sorted(set(counts) | set(latencies), key=lambda n: -abs(latencies[n].change) if n in latencies else 0):
        count = counts.get(name)
        time = latencies.get(name)
        ops.add_row(
            Text(name),
            f"{count.old:g} → {count.new:g}" if count else "=",
            f"{seconds(time.old)} → {seconds(time.new)}" if time else "=",
            _signed(time) if time else "=",
        )
    return ops


def _print_kernel_changes(diff: ModelDiff, console: Console, top: int) -> None:
    """How many kernels were added, removed and changed, then the ``top`` of them by the size of their latency
    change, and how many more there are."""
    console.print(
        Text(
            f"Kernels: {len(diff.kernels_added)} added, {len(diff.kernels_removed)} removed, "
            f"{len(diff.kernels_changed)} changed",
            style="bold",
        )
    )
    rows = [("added", k) for k in diff.kernels_added] + [("removed", k) for k in diff.kernels_removed]
    rows += [("changed", k) for k in diff.kernels_changed]
    rows.sort(key=lambda r: -abs(r[1].latency_change))
    if not rows:
        return
    kernels = Table(box=box.SIMPLE_HEAD)
    kernel_columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("", "left"),
        ("kernel", "left"),
        ("old", "right"),
        ("new", "right"),
        ("change", "right"),
    )
    for name, justify in kernel_columns:
        kernels.add_column(name, justify=justify, overflow="fold")
    for what, k in rows[:top]:
        kernels.add_row(
            what,
            Text(k.label),
            seconds(k.old.latency_s) if k.old else "–",
            seconds(k.new.latency_s) if k.new else "–",
            ("+" if k.latency_change >= 0 else "-") + seconds(abs(k.latency_change)),
        )
    console.print(kernels)
    if len(rows) > top:
        console.print(Text(f"… {len(rows) - top} more (--top to show more)", style="dim"))
