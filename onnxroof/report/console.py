"""The terminal view: totals, the top nodes by predicted time, time by op type, unsupported ops."""

from __future__ import annotations

from rich import box
from rich.console import Console, Group
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from onnxroof.analysis.analyze import Analysis
from onnxroof.analysis.findings import Finding, find
from onnxroof.core.units import joules, percent, seconds, si
from onnxroof.platform.model import Platform
from onnxroof.report.columns import Column, fit_columns, table_width
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
        ("Memory-bound share", percent(t.memory_bound_share), "Weights", si(t.weight_bytes, "B")),
        ("FLOPs", si(t.flops), "MACs", si(t.macs)),
        ("Bytes moved", si(t.fused.bytes, "B"), "Peak activations", si(t.peak_activation_bytes, "B")),
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


def top_columns(width: int, with_array: bool) -> tuple[Column, ...]:
    """The top-kernel columns that fit ``width`` beside a kernel name of at least 10 characters: the least
    needed go first (output shape, share, PE util, FLOP/B...); ops and time always stay."""
    columns = [c for c in _TOP_COLUMNS if with_array or c.name != "PE util"]
    return fit_columns(columns, width, _MIN_NAME_WIDTH)


def top_table(analysis: Analysis, count: int, width: int = 120) -> Table:
    """The kernels with the largest predicted time (named by their anchor node); the columns that fit the
    terminal (:func:`top_columns`), the name column takes what they leave."""
    total = analysis.totals.latency_s or 1.0
    kernels = analysis.top_kernels(count)
    node_of = {n.id: n for n in analysis.nodes}
    columns = top_columns(width, analysis.platform.array is not None)
    room = width - table_width([0, *(c.width for c in columns)])
    name_width = max(_MIN_NAME_WIDTH, min(48, room, max((len(k.node_ids[0]) for k in kernels), default=8)))
    table = Table(
        title=f"Top {count} kernels by predicted time", box=box.SIMPLE_HEAD, title_justify="left", padding=(0, 1)
    )
    table.add_column("kernel (anchor node)", overflow="ellipsis", no_wrap=True, width=name_width)
    for column in columns:
        table.add_column(column.name, justify=column.justify, no_wrap=True, max_width=column.width, overflow="ellipsis")
    for kernel in kernels:
        last = node_of[kernel.node_ids[-1]]
        cells = {
            "ops": Text(short_ops(kernel.op_types)),
            "output": Text(_shape(last.output_shapes[0] if last.output_shapes else None)),
            "FLOPs": si(kernel.flops),
            "bytes": si(kernel.bytes, "B"),
            "FLOP/B": f"{kernel.intensity:.3g}",
            "bound": kernel.bound,
            "time": seconds(kernel.latency_s),
            "share": percent(kernel.latency_s / total),
            "PE util": percent(kernel.utilization) if kernel.macs > 0 else "–",
        }
        table.add_row(Text(kernel.node_ids[0]), *(cells[c.name] for c in columns))
    return table


def op_type_table(analysis: Analysis) -> Table:
    """Per op type; the caption says how fused time is attributed, so a fused-away op showing 0 s is not read
    as free."""
    table = Table(
        title="Time by op type",
        caption="FLOPs, bytes, params: every node, unfused. Time: each kernel's goes to the type of its first node "
        "(Conv+BN+Relu counts as Conv).",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    table.add_column("op type", justify="left", no_wrap=True)
    for name in ("count", "FLOPs", "bytes", "params", "time", "share"):
        table.add_column(name, justify="right", no_wrap=True)
    for row in analysis.op_types:
        name = f"{row.domain}::{row.op_type}" if row.domain else row.op_type
        table.add_row(
            Text(name),
            str(row.count),
            si(row.flops),
            si(row.bytes, "B"),
            si(row.params),
            seconds(row.latency_s),
            percent(row.share),
        )
    return table


def unsupported_text(analysis: Analysis) -> Text:
    if not analysis.unsupported:
        return Text("Unsupported ops: none", style="green")
    text = Text("Unsupported ops (not costed, listed so nothing is silently zero): ", style="bold red")
    text.append(", ".join(f"{op} ×{len(ids)}" for op, ids in sorted(analysis.unsupported.items())))
    return text


_SEVERITY_STYLES = {"error": "bold red", "warning": "yellow", "note": "cyan"}


def findings_view(findings: tuple[Finding, ...], verdicts: tuple[str, ...] | None = None) -> Group | Text:
    """Findings, one block each: id, severity (and budget verdict), title and nodes; message; suggestion."""
    if not findings:
        return Text("Findings: none", style="green")
    blocks: list[Text | Padding] = [Text(f"Findings ({len(findings)})", style="bold")]
    for i, finding in enumerate(findings):
        head = Text.assemble("  ", (finding.id, "bold"), " ")
        head.append(finding.severity, style=_SEVERITY_STYLES.get(finding.severity, ""))
        if verdicts is not None:
            head.append(f" [{verdicts[i]}]", style="bold red" if verdicts[i] == "fail" else "dim")
        head.append(f"  {finding.title}", style="bold")
        more = len(finding.node_ids) - 3
        nodes = ", ".join(finding.node_ids[:3]) + (f" and {more} more" if more > 0 else "")
        body = Text.assemble(finding.message, "\n", ("→ " + finding.suggestion, "dim"))
        if nodes:
            body = Text.assemble(("nodes: " + nodes, "dim"), "\n", body)
        blocks += [head, Padding(body, (0, 0, 0, 8))]
    return Group(*blocks)


def render_console(analysis: Analysis, console: Console, top: int = 15, explain_fusion: bool = False) -> None:
    model = analysis.model
    dims = ", ".join(f"{k}={v}" for k, v in model.dims.items()) or "none"
    header = Text.assemble(
        (model.path or model.graph_name or "<model>", "bold"),
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
    console.print(top_table(analysis, top, console.width))
    console.print(op_type_table(analysis))
    console.print(unsupported_text(analysis))
    console.print(findings_view(find(analysis)))
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
