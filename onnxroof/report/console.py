"""The terminal view: totals, the top nodes by predicted time, time by op type, unsupported ops."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.console import Console, Group
from rich.measure import Measurement
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from onnxroof.analysis.analyze import Analysis
from onnxroof.analysis.catalog import finding_weights
from onnxroof.analysis.findings import Finding, find
from onnxroof.analysis.select import RowFilter
from onnxroof.core.units import joules, percent, seconds, si
from onnxroof.platform.model import Platform
from onnxroof.report.columns import Column, fit_columns, short_path, table_width
from onnxroof.report.runtimes import runtime_lines


def _shape(shape: list | None) -> str:
    if shape is None:
        return "?"
    return "×".join("?" if d is None else str(d) for d in shape)


def roofs_row(p: Platform, precision: str) -> tuple[str, str, str, str]:
    """Which roofs the roofline used: the ``[sustained]`` share of the datasheet bandwidth and the compute roof of
    ``precision`` with its share when below 1, e.g. ``("Sustained BW", "75% of 136 GB/s", "Peak (fp16)",
    "9.04 TFLOP/s (80%)")``; with ``--peak``, the datasheet figures as given."""
    if p.peak_roofs:
        return ("Roofs", "datasheet (--peak)", f"Peak ({precision})", si(p.peak(precision), "FLOP/s"))
    share = p.compute_share(precision)
    return (
        "Sustained BW",
        f"{p.bandwidth_share:.0%} of {si(p.dram_bandwidth, 'B/s')}",
        f"Peak ({precision})",
        si(p.peak(precision), "FLOP/s") + (f" ({share:.0%})" if share < 1 else ""),
    )


def summary_table(analysis: Analysis) -> Table:
    t, p = analysis.totals, analysis.platform
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(justify="right")
    grid.add_column(style="bold")
    grid.add_column(justify="right")
    shown = analysis.precision_override or analysis.main_precision
    ridge = p.ridge(shown)
    rows = [
        ("Predicted latency", seconds(t.latency_s), "Params", si(t.params)),
        ("Memory-bound share", percent(t.memory_bound_share), "Weights read", si(t.weight_bytes, "B")),
        ("FLOPs", si(t.flops), "MACs", si(t.macs)),
        ("Bytes moved (fused)", si(t.fused.bytes, "B"), "Peak activations", si(t.peak_activation_bytes, "B")),
        ("Bytes (unfused)", si(t.unfused.bytes, "B"), "Bytes (ideal)", si(t.ideal.bytes, "B")),
        ("Compute time", seconds(t.compute_time_s), "Memory time", seconds(t.memory_time_s)),
        ("Launch overhead", seconds(t.overhead_time_s), "Kernels", f"{t.kernels} for {t.nodes} nodes"),
        ("Unfused (upper)", seconds(t.unfused.latency_s), "Fusion profile", analysis.fusion_profile),
        ("Time model", time_model_text(analysis), "Launches", launch_text(analysis)),
        ("Ideal (lower)", seconds(t.ideal.latency_s), "Fusion saves", seconds(t.unfused.latency_s - t.fused.latency_s)),
        (
            "Layout traffic",
            si(t.layout_bytes, "B"),
            "Layout time",
            f"{seconds(t.layout_latency_s)} ({percent(t.layout_share)})",
        ),
        ("Bandwidth", si(p.roof_bandwidth, "B/s"), f"Ridge ({shown})", f"{ridge:.3g} FLOP/B"),
    ]
    if p.sustained:
        rows.append(roofs_row(p, shown))
    if t.energy_j is not None:
        rows.append(("Energy / inference", joules(t.energy_j), "Energy-delay", f"{t.energy_delay_js:.3g} J·s"))
        rows.append(
            ("Memory energy", percent(t.energy_memory_share or 0.0), "Compute energy", joules(t.energy_compute_j))
        )
    if t.array_utilization is not None:
        assert p.array is not None
        shape = f"{p.array.height}×{p.array.width}×{p.array.instances}"
        rows.append(("PE array", shape, "Utilization", percent(t.array_utilization)))
    for row in rows:
        grid.add_row(*row)
    return grid


def time_model_text(analysis: Analysis) -> str:
    """The time model's name, ``roofline`` marked as the (lower) bound it is."""
    name = analysis.time_model_info.get("name", analysis.time_model)
    return f"{name} (bound)" if name == "roofline" else name


def launch_text(analysis: Analysis) -> str:
    """The launch mode and its figure: ``per-kernel 10 µs`` or ``cuda-graph 10 µs/run``."""
    info = analysis.time_model_info
    mode = info.get("launch_mode", "per-kernel")
    if mode == "cuda-graph":
        return f"{mode} {seconds(float(info.get('per_run_s', 0.0)))}/run"
    return f"{mode} {seconds(float(info.get('per_kernel_launch_s', analysis.platform.launch_overhead_s)))}"


def whatif_text(analysis: Analysis) -> str:
    """The what-if knobs in one line (empty when none is set)."""
    plan = analysis.whatif
    parts = [plan.precision] if plan.precision else []
    parts += [f"{kind} density {value:g}" for kind, value in plan.densities.to_dict().items()]
    if plan.layers:
        parts.append(f"{len(plan.layers)} layer densities")
    parts += [name for name, on in (("compress_mem", plan.compress_mem), ("skip_compute", plan.skip_compute)) if on]
    return ", ".join(parts)


_SHORT_OPS = {  # display names for fused op chains
    "BatchNormalization": "BN",
    "LayerNormalization": "LN",
    "InstanceNormalization": "IN",
    "GroupNormalization": "GN",
    "GlobalAveragePool": "GAP",
    "Transpose": "T",
}


def short_ops(op_types) -> str:
    """A fused op chain as it fits a table cell: ``Conv+BN+Add+Relu``."""
    return "+".join(_SHORT_OPS.get(op, op) for op in op_types)


_TOP_COLUMNS = (  # keep: 0 always shown, larger dropped sooner on a narrow terminal
    Column("ops", "left", 16, 0),
    Column("output", "left", 14, 8),
    Column("FLOPs", "right", 7, 3),
    Column("bytes", "right", 8, 2),
    Column("FLOP/B", "right", 6, 5),
    Column("bound", "left", 7, 1),
    Column("PE util", "right", 7, 6),
    Column("time", "right", 8, 0),
    Column("share", "right", 6, 7),
)
_MIN_NAME_WIDTH = 10


def top_columns(width: int, with_array: bool, name_width: int = _MIN_NAME_WIDTH) -> tuple[Column, ...]:
    """The top-kernel columns that fit ``width`` beside a kernel name of ``name_width`` characters (at least
    10): the least needed go first (output shape, share, PE util, FLOP/B...); ops and time always stay."""
    columns = [c for c in _TOP_COLUMNS if with_array or c.name != "PE util"]
    return fit_columns(columns, width, max(_MIN_NAME_WIDTH, name_width))


#: A kernel name up to this long is given its whole width before the least needed figure columns (longer ones fold).
_NAME_RESERVE = 20


def top_table(
    analysis: Analysis,
    count: int,
    width: int = 120,
    *,
    rows: Sequence[int] | None = None,
    full_names: bool = False,
    title: str | None = None,
) -> Table:
    """The kernels with the largest predicted time (named by their anchor node), or the kernel ``rows`` given
    (a :class:`~onnxroof.analysis.select.RowFilter`'s choice, in order); the columns that fit ``width`` beside
    the name (:func:`top_columns`, reserving up to 20 characters for it), the name column takes what they leave.
    A name is never cut: one longer than its column folds onto the next line; with ``full_names`` (output that
    is not a terminal) the column is as wide as the longest name, so the table may run past ``width``
    (:func:`print_wide`)."""
    total = analysis.totals.latency_s or 1.0
    kernels = analysis.top_kernels(count) if rows is None else tuple(analysis.kernels[row] for row in rows)
    node_of = {n.id: n for n in analysis.nodes}
    longest = max((len(k.node_ids[0]) for k in kernels), default=8)
    columns = top_columns(width, analysis.platform.array is not None, min(longest, _NAME_RESERVE))
    room = width - table_width([0, *(c.width for c in columns)])
    name_width = max(_MIN_NAME_WIDTH, longest if full_names else min(48, room, longest))
    table = Table(
        title=title or f"Top {count} kernels by predicted time",
        box=box.SIMPLE_HEAD,
        title_justify="left",
        padding=(0, 1),
    )
    header = Text("kernel (anchor node)", overflow="ellipsis", no_wrap=True)  # cut like before; the names fold
    table.add_column(header, overflow="fold", width=name_width)
    for column in columns:
        table.add_column(column.name, justify=column.justify, no_wrap=True, max_width=column.width, overflow="ellipsis")
    for kernel in kernels:
        last = node_of.get(kernel.node_ids[-1])  # None: a node of an If/Loop/Scan body (fusion/bodies.py)
        cells = {
            "ops": Text(short_ops(kernel.op_types)),
            "output": Text(_shape(last.output_shapes[0] if last is not None and last.output_shapes else None)),
            "FLOPs": si(kernel.flops),
            "bytes": si(kernel.bytes, "B"),
            "FLOP/B": f"{kernel.intensity:.3g}",
            "bound": kernel.bound,
            "time": seconds(kernel.latency_s),
            "share": percent(kernel.latency_s / total),
            "PE util": percent(kernel.utilization) if kernel.macs > 0 else "–",
        }
        table.add_row(Text(kernel.node_ids[0], overflow="fold"), *(cells[c.name] for c in columns))
    return table


#: The width a table is measured in for :func:`print_wide`: its natural width.
_UNBOUNDED = 10_000


def print_wide(console: Console, renderable: Table) -> None:
    """Print a table; when the output is not a terminal (a pipe, a file) at its natural width even past the
    console's, so that no name in it folds or is cut (a terminal would wrap such lines: there it fits)."""
    width = console.width
    needed = Measurement.get(console, console.options.update_width(_UNBOUNDED), renderable).maximum
    if console.is_terminal or needed <= width:
        console.print(renderable)
        return
    console.width = needed
    try:
        console.print(renderable)
    finally:
        console.width = width


_OP_TYPE_COLUMNS = ("count", "FLOPs", "bytes", "params", "time", "share")
#: Which op-type columns a narrow terminal drops first (larger sooner; 0 never).
_OP_TYPE_KEEP = {"count": 2, "FLOPs": 4, "bytes": 3, "params": 5, "time": 0, "share": 1}
#: An op type up to this long keeps its whole width before figure columns are dropped (longer ones fold).
_OP_NAME_RESERVE = 24


def op_type_table(analysis: Analysis, width: int = 120) -> Table:
    """Per op type; the caption says how fused time is attributed, so a fused-away op showing 0 s is not read
    as free. The figure columns that fit ``width`` beside the op type (up to 24 characters of it reserved)
    are kept whole, the least needed dropped first (params, FLOPs, bytes, count); an op type longer than
    its column folds, never cut."""
    rows = [
        (
            f"{row.domain}::{row.op_type}" if row.domain else row.op_type,
            {
                "count": str(row.count),
                "FLOPs": si(row.flops),
                "bytes": si(row.bytes, "B"),
                "params": si(row.params),
                "time": seconds(row.latency_s),
                "share": percent(row.share),
            },
        )
        for row in analysis.op_types
    ]
    longest = max((len(name) for name, _ in rows), default=7)
    natural = [
        Column(name, "right", max([len(name), *(len(cells[name]) for _, cells in rows)]), _OP_TYPE_KEEP[name])
        for name in _OP_TYPE_COLUMNS
    ]
    columns = fit_columns(natural, width, max(7, min(longest, _OP_NAME_RESERVE)))
    table = Table(
        title="Time by op type",
        caption="FLOPs, bytes, params: every node, unfused. Time: each kernel's goes to the type of its first node "
        "(Conv+BN+Relu counts as Conv).",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    table.add_column("op type", justify="left", overflow="fold")
    for column in columns:
        table.add_column(column.name, justify="right", no_wrap=True)
    for name, cells in rows:
        table.add_row(Text(name, overflow="fold"), *(cells[c.name] for c in columns))
    return table


def unsupported_text(analysis: Analysis) -> Text:
    if not analysis.unsupported:
        return Text("Unsupported ops: none", style="green")
    text = Text("Unsupported ops (not costed, listed so nothing is silently zero): ", style="bold red")
    text.append(", ".join(f"{op} ×{len(ids)}" for op, ids in sorted(analysis.unsupported.items())))
    return text


_SEVERITY_STYLES = {"error": "bold red", "warning": "yellow", "note": "cyan"}


#: How many of a finding kind's worst cases its grouped line names.
WORST_SHOWN = 3


def findings_view(
    findings: tuple[Finding, ...],
    verdicts: tuple[str, ...] | None = None,
    *,
    verbose: bool = True,
    weights: Sequence[float] | None = None,
) -> Group | Text:
    """Findings, one block each (``verbose``: id, severity and budget verdict, title and nodes; message;
    suggestion), or grouped (:func:`group_findings`): a kind found once keeps its block, a kind found n > 1
    times is its head line (id, severity, ``×n``, title), its worst cases (by ``weights``, else the first
    ones) and its fix: three lines, not n blocks."""
    if not findings:
        return Text("Findings: none", style="green")
    marks = verdicts if verdicts is not None else ("",) * len(findings)
    groups = [[i] for i in range(len(findings))] if verbose else group_findings(findings, marks, weights)
    kinds = len(groups)
    head = f"Findings ({len(findings)})" if kinds == len(findings) else f"Findings ({len(findings)} in {kinds} kinds)"
    blocks: list[Text | Padding] = [Text(head, style="bold")]
    for group in groups:
        first = findings[group[0]]
        line = Text.assemble("  ", (first.id, "bold"), " ")
        line.append(first.severity, style=_SEVERITY_STYLES.get(first.severity, ""))
        if verdicts is not None:
            line.append(f" [{verdicts[group[0]]}]", style="bold red" if verdicts[group[0]] == "fail" else "dim")
        if len(group) > 1:
            line.append(f" ×{len(group)}", style="bold")
        line.append(f"  {first.title}", style="bold")
        if len(group) > 1:
            worst = [findings[i].node_ids[0] if findings[i].node_ids else "–" for i in group[:WORST_SHOWN]]
            rest = f" and {len(group) - WORST_SHOWN} more" if len(group) > WORST_SHOWN else ""
            label = "worst" if weights is not None else "first"
            body = Text.assemble((f"{label}: {', '.join(worst)}{rest}", "dim"), "\n", ("→ " + first.suggestion, "dim"))
            blocks += [line, Padding(body, (0, 0, 0, 8))]
            continue
        more = len(first.node_ids) - 3
        nodes = ", ".join(first.node_ids[:3]) + (f" and {more} more" if more > 0 else "")
        body = Text.assemble(first.message, "\n", ("→ " + first.suggestion, "dim"))
        if nodes:
            body = Text.assemble(("nodes: " + nodes, "dim"), "\n", body)
        blocks += [line, Padding(body, (0, 0, 0, 8))]
    if kinds < len(findings):
        blocks.append(Text("  (--verbose lists every finding with its message)", style="dim"))
    return Group(*blocks)


def group_findings(
    findings: Sequence[Finding], verdicts: Sequence[str], weights: Sequence[float] | None = None
) -> list[list[int]]:
    """Positions of ``findings`` grouped by (id, verdict), groups in order of first appearance; within a group,
    heaviest first (``weights``: e.g. the predicted time of each finding's nodes; ties and no weights keep the
    given order)."""
    groups: dict[tuple[str, str], list[int]] = {}
    for i, finding in enumerate(findings):
        groups.setdefault((finding.id, verdicts[i]), []).append(i)
    if weights is None:
        return list(groups.values())
    return [sorted(group, key=lambda i: (-weights[i], i)) for group in groups.values()]


def render_console(
    analysis: Analysis,
    console: Console,
    top: int = 15,
    explain_fusion: bool = False,
    *,
    rows: RowFilter | None = None,
    verbose: bool = False,
) -> None:
    """The terminal report: header and totals, the top kernels (or the kernels ``rows`` picks: ``--op``,
    ``--name``..., at most ``top``), time by op type, unsupported ops, findings (grouped by kind unless
    ``verbose``). Output that is not a terminal (a pipe, a file) gets whole kernel names and paths."""
    model = analysis.model
    dims = ", ".join(f"{k}={v}" for k, v in model.dims.items()) or "none"
    terminal = console.is_terminal
    path = model.path or model.graph_name or "<model>"
    header = Text.assemble(
        (short_path(path, console.width - 4) if terminal else path, "bold"),
        f"  opset {model.opset}, {model.nodes} nodes, dims: {dims}\n",
        ("on ", ""),
        (analysis.platform.title, "bold cyan"),
        f"  ({analysis.platform.name})",
    )
    if analysis.runtime is not None:
        for line in runtime_lines(analysis.runtime):
            header.append(f"\n{line}", style="dim")
    knobs = whatif_text(analysis)
    if knobs:
        header.append(f"\nwhat-if: {knobs}", style="yellow")
    console.print(Panel(Group(header, Text(""), summary_table(analysis)), title="onnxroof", expand=False))
    chosen, title = None, None
    if rows is not None and rows.active:
        chosen = RowFilter(rows.ops, rows.exclude_ops, rows.name, rows.top or top).kernels(analysis)
        title = f"{len(chosen)} kernels by predicted time ({rows.describe()})"
    print_wide(console, top_table(analysis, top, console.width, rows=chosen, full_names=not terminal, title=title))
    print_wide(console, op_type_table(analysis, console.width))
    console.print(unsupported_text(analysis))
    findings = find(analysis)
    console.print(findings_view(findings, verbose=verbose, weights=finding_weights(analysis, findings)))
    if explain_fusion:
        console.print(fusion_misses_table(analysis))


def render_warnings(warnings: tuple[str, ...], console: Console) -> None:
    for warning in warnings:
        console.print(Text("warning: ", style="yellow") + Text(warning))


def fusion_misses_table(analysis: Analysis) -> Table:
    table = Table(
        title=f"Fusion candidates that did not fuse (profile {analysis.fusion_profile})",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    for name in ("pattern", "nodes", "reason"):
        table.add_column(name, overflow="fold")
    for miss in analysis.fusion_misses:
        table.add_row(Text(miss.pattern), Text(", ".join(miss.node_ids)), Text(miss.reason))
    if not analysis.fusion_misses:
        table.add_row("–", "–", "every candidate fused")
    return table
