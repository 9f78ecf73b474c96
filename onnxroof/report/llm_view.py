"""Views of an :class:`~onnxroof.studies.llm.LLMResult`: a terminal table, JSON, CSV (a row per analyzed step)
and a self-contained HTML page (time per token against context length; prefill and decode kernels on one
roofline, both inline SVG)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup
from rich import box
from rich.console import Console
from rich.table import Table

from onnxroof.analysis.document import sustained_fields
from onnxroof.analysis.runtime_use import RuntimeUse
from onnxroof.core.units import percent, seconds, si
from onnxroof.platform.model import Platform
from onnxroof.report.charts import figure_bytes, frame, plain_text
from onnxroof.report.data import csv_text, dumps_document
from onnxroof.report.plot import figure as roofline_figure
from onnxroof.report.runtimes import runtime_lines
from onnxroof.studies.llm import LLMResult, PhasePoint

TEMPLATE = Path(__file__).with_name("templates") / "llm.html.j2"
CSV_FIELDS = (
    "phase",
    "past",
    "new",
    "context",
    "latency_s",
    "flops",
    "bytes",
    "memory_bound_share",
    "top_kernel",
    "unsupported",
)


def _phase(point: PhasePoint) -> dict[str, Any]:
    return {
        "phase": point.phase,
        "past": point.past,
        "new": point.new,
        "latency_s": point.latency_s,
        "flops": point.flops,
        "bytes": point.bytes,
        "memory_bound_share": point.memory_bound_share,
        "top_kernels": [
            {"id": k.id, "op_types": list(k.op_types), "latency_s": k.latency_s, "bound": k.bound}
            for k in point.top_kernels
        ],
        "unsupported": {op: list(ids) for op, ids in point.unsupported.items()},
    }


def _runtime_use(result: LLMResult) -> RuntimeUse | None:
    """What the runtime did to the last decode step (the same runtime ran every phase; the decode step is where
    the KV write and the launch mode matter)."""
    return result.analyses[-1].runtime if result.analyses else None


def llm_dict(result: LLMResult) -> dict[str, Any]:
    """The result as plain data in SI units (the JSON view)."""
    cache, memory = result.cache, result.memory
    return {
        "model": result.model,
        "platform": result.platform,
        "fusion_profile": result.fusion_profile,
        **({"runtime": use.to_dict()} if (use := _runtime_use(result)) is not None else {}),
        **({"sustained": sustained_fields(roofs)} if (roofs := result.analyses[0].platform).sustained else {}),
        "precision": result.precision,
        "prompt": result.prompt,
        "generate": result.generate,
        "batch": result.batch,
        "ttft_s": result.ttft_s,
        "tpot_s": result.tpot_s,
        "tokens_per_s": result.tokens_per_s,
        "decode_first_s": result.decode_first_s,
        "decode_last_s": result.decode_last_s,
        "decode_total_s": result.decode_total_s,
        "interpolation": result.interpolation,
        "kv_cache_bytes": result.kv_cache_bytes,
        "weight_bytes": result.weight_bytes,
        "params": result.params,
        "unsupported": {phase: {op: list(ids) for op, ids in ops.items()} for phase, ops in result.unsupported.items()},
        "kv_cache": {
            "inputs": list(cache.past),
            "outputs": [name for name in cache.present],
            "layers": cache.layers,
            "kv_heads": cache.kv_heads,
            "head_dim": cache.head_dim,
            "dtype": cache.dtype,
            "bytes_per_token": cache.bytes_per_token,
            "dims": dict(cache.roles),
            "branch_input": cache.branch,
        },
        "memory": {
            "capacity_bytes": memory.capacity_bytes,
            "needed_bytes": memory.needed_bytes,
            "fits": "unknown" if memory.fits is None else memory.fits,
            "max_batch": memory.max_batch,
            "max_context": memory.max_context,
        },
        "prefill": _phase(result.prefill),
        "decode": [_phase(p) for p in result.decode],
        "warnings": list(result.warnings),
    }


def render_llm_json(result: LLMResult) -> str:
    return dumps_document(llm_dict(result))


def render_llm_csv(result: LLMResult) -> str:
    """One row per analyzed step: the prefill, then the sampled decode steps."""
    rows = []
    for point in (result.prefill, *result.decode):
        top = point.top_kernels[0] if point.top_kernels else None
        rows.append(
            {
                "phase": point.phase,
                "past": point.past,
                "new": point.new,
                "context": point.past + point.new,
                "latency_s": point.latency_s,
                "flops": point.flops,
                "bytes": point.bytes,
                "memory_bound_share": point.memory_bound_share,
                "top_kernel": f"{top.id} ({'+'.join(top.op_types)})" if top else "",
                "unsupported": ";".join(point.unsupported),
            }
        )
    return csv_text(CSV_FIELDS, rows)


def memory_line(result: LLMResult) -> str:
    """The memory check in one sentence."""
    m = result.memory
    need = f"weights {si(m.weight_bytes, 'B')} + KV cache {si(m.kv_cache_bytes, 'B')} = {si(m.needed_bytes, 'B')}"
    if m.capacity_bytes is None:
        return f"memory: {need}; the platform's capacity is unknown: fit not checked"
    verdict = "fits" if m.fits else "does NOT fit"
    return (
        f"memory: {need} {verdict} in {si(m.capacity_bytes, 'B')}; largest batch at context "
        f"{result.prompt + result.generate}: {m.max_batch}; largest context at batch {result.batch}: {m.max_context}"
    )


def roofs_text(p: Platform) -> str:
    """One line naming the roofs used when the platform has ``[sustained]`` shares (empty otherwise)."""
    if not p.sustained:
        return ""
    if p.peak_roofs:
        return f"roofs: datasheet (--peak): {si(p.dram_bandwidth, 'B/s')}"
    tensor = p.sustained.get("tensor")
    shares = f"{p.bandwidth_share:.0%} of {si(p.dram_bandwidth, 'B/s')}" + (
        f", tensor peaks {tensor:.0%} of datasheet" if tensor is not None else ""
    )
    return f"roofs: sustained DRAM {si(p.roof_bandwidth, 'B/s')} ({shares}); --peak for the datasheet roofline"


def render_llm_table(result: LLMResult, console: Console) -> None:
    """The headline figures, a row per analyzed step, the memory check."""
    c = result.cache
    console.print(
        f"{result.model} on {result.platform_title} ({result.fusion_profile}): prompt {result.prompt}, "
        f"generate {result.generate}, batch {result.batch}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        f"time to first token {seconds(result.ttft_s)}  ·  time per output token {seconds(result.tpot_s)}  ·  "
        f"{result.tokens_per_s:.3g} tokens/s  ·  decode {seconds(result.decode_first_s)} → "
        f"{seconds(result.decode_last_s)} ({result.interpolation}, {len(result.decode)} steps analyzed)",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    roofs = roofs_text(result.analyses[0].platform)
    if roofs:
        console.print(roofs, markup=False, highlight=False, soft_wrap=True)
    use = _runtime_use(result)
    for line in runtime_lines(use) if use is not None else ():
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(
        f"KV cache: {c.layers} layers × {c.kv_heads} KV heads × {c.head_dim} head dim, {c.dtype}: "
        f"{si(c.bytes_per_token, 'B')}/token, {si(result.kv_cache_bytes, 'B')} after {result.prompt + result.generate} "
        f"tokens; weights {si(result.weight_bytes, 'B')} ({si(result.params)} params)",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    rows = []
    for p in (result.prefill, *result.decode):
        top = p.top_kernels[0] if p.top_kernels else None
        kernel = f"{'+'.join(top.op_types)} {seconds(top.latency_s)} ({top.bound})" if top else ""
        rows.append(
            (p.phase, str(p.past + p.new), seconds(p.latency_s), si(p.flops), si(p.bytes, "B"),
             percent(p.memory_bound_share), kernel)
        )  # fmt: skip
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    names = ("phase", "context", "latency", "FLOPs", "bytes", "mem-bound", "top kernel")
    for i, name in enumerate(names):
        width = max(len(name), *(len(row[i]) for row in rows))
        if name == "top kernel":
            table.add_column(name, ratio=1, overflow="fold")
        else:
            table.add_column(name, justify="left" if i == 0 else "right", no_wrap=True, min_width=width)
    for row in rows:
        table.add_row(*row)
    console.print(table)
    console.print(memory_line(result), markup=False, highlight=False, soft_wrap=True)
    for phase, ops in result.unsupported.items():
        if ops:
            console.print(f"unsupported in {phase}: {', '.join(ops)}", style="yellow", markup=False)


def _svg(fig) -> str:
    text = figure_bytes(fig, "svg").decode("utf-8")
    return text[text.index("<svg") :]


def token_time_figure(result: LLMResult):
    """Decode-step latency against context length (the analyzed steps; the line between them is what is summed)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7, 3.6), dpi=100, layout="constrained")
    ax = fig.subplots()
    frame(ax, which="major")
    xs = [p.past + 1 for p in result.decode]
    ax.plot(xs, [1e3 * p.latency_s for p in result.decode], marker="o", color="#2f6db5", label="decode step")
    ax.axhline(1e3 * result.tpot_s, color="#e8731c", linestyle="--", linewidth=1, label="mean (time per token)")
    ax.set_xlabel("context length (tokens)")
    ax.set_ylabel("time per token (ms)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(plain_text(f"{Path(result.model).name} on {result.platform}"), fontsize=10, loc="left")
    return fig


def _name_phases(fig, names: tuple[str, str]) -> None:
    """Prefix the roofline legend's two entries (one per analysis, platform text) with the phase they show."""
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes)]
    for legend in filter(None, legends):
        texts = legend.get_texts()
        if len(texts) >= 2:
            for text, name in zip(texts, names, strict=False):
                text.set_text(f"{name}: {text.get_text()}")
            return


def render_llm_html(result: LLMResult) -> str:
    """A self-contained page: the figures, the two charts, the steps and their top kernels."""
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(si=si, seconds=seconds, percent=percent)
    prefill, last = result.analyses[0], result.analyses[-1]
    roof = roofline_figure([prefill, last], title=f"prefill and decode (context {result.prompt + result.generate})")
    _name_phases(roof, ("prefill", f"decode at context {result.prompt + result.generate}"))
    return env.from_string(TEMPLATE.read_text(encoding="utf-8")).render(
        r=result,
        data=llm_dict(result),
        memory=memory_line(result),
        roofs=roofs_text(prefill.platform),
        token_chart=Markup(_svg(token_time_figure(result))),
        roofline=Markup(_svg(roof)),
    )
