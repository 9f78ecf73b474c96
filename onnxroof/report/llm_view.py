"""Views of an :class:`~onnxroof.studies.llm.LLMResult`: a terminal table, JSON, CSV (a row per analyzed step)
and a self-contained HTML page in the report's design (:func:`render_llm_html`).

The HTML page's machinery (jinja2 and markupsafe, :mod:`onnxroof.report.html` and the measured overlay it pulls
in: ~45 ms of imports) is imported by :func:`render_llm_html` when a page is rendered, not by the table, JSON or
CSV; rich (~20 ms) by :func:`render_llm_table`, not by the JSON or CSV."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from onnxroof.analysis.document import sustained_fields
from onnxroof.analysis.runtime_use import RuntimeUse
from onnxroof.analysis.whatif import WEIGHT_ONLY_GROUP, WEIGHT_ONLY_SCALE_BYTES, weight_only_itemsize
from onnxroof.core.units import percent, seconds, si
from onnxroof.platform.model import Platform
from onnxroof.report.data import csv_text, dumps_document
from onnxroof.studies.llm import LLMResult, PhasePoint

if TYPE_CHECKING:
    from rich.console import Console

TEMPLATE = Path(__file__).with_name("templates") / "llm_section.html.j2"
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
    "batch",
    "tokens_per_s_per_sequence",
    "tokens_per_s_aggregate",
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
        "kv_precision": result.kv_precision,
        "weights": _weights_dict(result),
        "prompt": result.prompt,
        "generate": result.generate,
        "batch": result.batch,
        "ttft_s": result.ttft_s,
        "request_s": result.request_s,
        "tpot_s": result.tpot_s,
        "tokens_per_s_per_sequence": result.tokens_per_s_per_sequence,
        "tokens_per_s_aggregate": result.tokens_per_s_aggregate,
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
            "dtype": result.kv_dtype or cache.dtype,
            "stored_dtype": cache.dtype,
            "bytes_per_token": _kv_per_token(result),
            "dims": dict(cache.roles),
            "branch_input": cache.branch,
        },
        "memory": {
            "capacity_bytes": memory.capacity_bytes,
            "needed_bytes": memory.needed_bytes,
            "fits": "unknown" if memory.fits is None else memory.fits,
            "max_batch": memory.max_batch,
            "max_context": memory.max_context,
            "max_context_limited_by": memory.context_limited_by,
            "context_limit": None
            if (limit := memory.context_limit) is None
            else {"tokens": limit.tokens, "source": str(limit.source), "detail": limit.detail},
        },
        "batch_search": _search_dict(result),
        "prefill": _phase(result.prefill),
        "decode": [_phase(p) for p in result.decode],
        "warnings": [*filter(None, [context_warning(result)]), *result.warnings],
    }


def _kv_per_token(result: LLMResult) -> float:
    """Cache bytes per token per sequence at the dtype counted: ``kv_cache_bytes / ((prompt + generate) · batch)``."""
    return result.kv_cache_bytes / ((result.prompt + result.generate) * result.batch)


def _weights_dict(result: LLMResult) -> dict[str, Any] | None:
    if result.weights is None:
        return None
    return {
        "quantization": result.weights,
        "bytes_per_weight": weight_only_itemsize(result.weights),
        "group_size": WEIGHT_ONLY_GROUP,
        "scale_bytes": WEIGHT_ONLY_SCALE_BYTES,
    }


def _search_dict(result: LLMResult) -> dict[str, Any] | None:
    search = result.search
    if search is None:
        return None
    found = search.found
    return {
        "max_ttft_s": search.max_ttft_s,
        "max_tpot_s": search.max_tpot_s,
        "batch": search.batch,
        "limited_by": str(search.limited_by),
        "bound": search.bound,
        "ttft_s": found.ttft_s if found else None,
        "tpot_s": found.tpot_s if found else None,
        "kv_cache_bytes": _kv_per_token(result) * (result.prompt + result.generate) * search.batch,
        "evaluated": [{"batch": p.batch, "ttft_s": p.ttft_s, "tpot_s": p.tpot_s} for p in search.evaluated],
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
                "batch": result.batch,
                "tokens_per_s_per_sequence": result.tokens_per_s_per_sequence,
                "tokens_per_s_aggregate": result.tokens_per_s_aggregate,
            }
        )
    return csv_text(CSV_FIELDS, rows)


def _context_text(result: LLMResult) -> str:
    """The largest context and what set it (the memory, or the model's own limit and where it was read)."""
    m = result.memory
    limit = m.context_limit
    if m.context_limited_by == "model" and limit is not None:
        return f"{m.max_context} (the model's limit: {limit.source}, {limit.detail})"
    if limit is not None:
        return f"{m.max_context} (memory; the model's limit is {limit.tokens}, {limit.source})"
    return f"{m.max_context} (memory; no model limit found)"


def context_warning(result: LLMResult) -> str:
    """A line when the run's context exceeds the model's own limit (empty otherwise)."""
    limit, context = result.memory.context_limit, result.prompt + result.generate
    if limit is None or context <= limit.tokens:
        return ""
    return f"prompt + generate = {context} tokens exceeds the model's context limit, {limit.text}"


def memory_line(result: LLMResult) -> str:
    """The memory check in one sentence."""
    m = result.memory
    need = f"weights {si(m.weight_bytes, 'B')} + KV cache {si(m.kv_cache_bytes, 'B')} = {si(m.needed_bytes, 'B')}"
    if m.capacity_bytes is None:
        limit = f"; the model's context limit: {m.context_limit.text}" if m.context_limit else ""
        return f"memory: {need}; the platform's capacity is unknown: fit not checked{limit}"
    verdict = "fits" if m.fits else "does NOT fit"
    return (
        f"memory: {need} {verdict} in {si(m.capacity_bytes, 'B')}; largest batch at context "
        f"{result.prompt + result.generate}: {m.max_batch}; largest context at batch {result.batch}: "
        f"{_context_text(result)}"
    )


def number(value: float) -> str:
    """A plain number as the report writes one: three significant digits, thousands separated at 1,000 and over
    (``83``, ``2.3``, ``7,211``)."""
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def rate(value: float) -> str:
    """A tokens/s figure as the report formats numbers: three significant digits, thousands separated
    (``7,211``, ``1,080,000``, ``52.4``), never an exponent."""
    return number(float(f"{value:.3g}"))


def throughput_line(result: LLMResult) -> str:
    """Tokens per second, labelled: per sequence, and aggregate over the batch."""
    per = f"{rate(result.tokens_per_s_per_sequence)} tokens/s per sequence"
    if result.batch == 1:
        return per
    return f"{per}, {rate(result.tokens_per_s_aggregate)} tokens/s aggregate (batch {result.batch})"


def search_line(result: LLMResult) -> str:
    """The batch search in one sentence (empty when no target was given)."""
    search = result.search
    if search is None:
        return ""
    targets = " and ".join(
        f"{name} ≤ {seconds(value)}"
        for name, value in (("time to first token", search.max_ttft_s), ("time per token", search.max_tpot_s))
        if value is not None
    )
    tried = f"{len(search.evaluated)} batch sizes predicted"
    found = search.found
    if search.batch == 0 or found is None:
        return f"largest batch with {targets}: none ({search.limited_by}; {tried})"
    context = result.prompt + result.generate
    kv = _kv_per_token(result) * context * search.batch
    figures = [f"time to first token {seconds(found.ttft_s)}" if found.ttft_s is not None else "",
               f"time per token {seconds(found.tpot_s)}" if found.tpot_s is not None else "",
               f"{rate(search.batch / found.tpot_s)} tokens/s aggregate in decode" if found.tpot_s else "",
               f"KV cache {si(kv, 'B')} at context {context}"]  # fmt: skip
    return (
        f"largest batch with {targets}: {search.batch} ({', '.join(f for f in figures if f)}; limited by "
        f"{search.limited_by}, searched 1…{search.bound}; {tried})"
    )


def weights_line(result: LLMResult) -> str:
    """The weight-only quantization applied, with its stated layout (empty when none)."""
    if result.weights is None:
        return ""
    size = weight_only_itemsize(result.weights)
    return (
        f"weights: {result.weights} weight-only ({size:g} B per weight: {result.weights} + one "
        f"{WEIGHT_ONLY_SCALE_BYTES}-byte scale per {WEIGHT_ONLY_GROUP}; activations and the KV cache unchanged)"
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


def _request_text(result: LLMResult) -> str:
    """`` (incl. 2 ms per request)`` when the runtime charges a per-request host cost to the first token."""
    return f" (incl. {seconds(result.request_s)} per request)" if result.request_s > 0 else ""


def render_llm_table(result: LLMResult, console: Console) -> None:
    """The headline figures, a row per analyzed step, the memory check (rich is imported here: the JSON and CSV
    renderers of this module never load it)."""
    from rich import box
    from rich.table import Table

    from onnxroof.report.runtimes import runtime_lines

    c = result.cache
    console.print(
        f"{result.model} on {result.platform_title} ({result.fusion_profile}): prompt {result.prompt}, "
        f"generate {result.generate}, batch {result.batch}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    console.print(
        f"time to first token {seconds(result.ttft_s)}{_request_text(result)}  ·  "
        f"time per output token {seconds(result.tpot_s)}  ·  "
        f"{throughput_line(result)}  ·  decode {seconds(result.decode_first_s)} → "
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
        f"KV cache: {c.layers} layers × {c.kv_heads} KV heads × {c.head_dim} head dim, {result.kv_dtype or c.dtype}: "
        f"{si(_kv_per_token(result), 'B')}/token per sequence, {si(result.kv_cache_bytes, 'B')} after "
        f"{result.prompt + result.generate} tokens × batch {result.batch}; weights {si(result.weight_bytes, 'B')} "
        f"({si(result.params)} params)",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    for line in (weights_line(result), search_line(result)):
        if line:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
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
    if warning := context_warning(result):
        console.print(warning, style="yellow", markup=False, highlight=False, soft_wrap=True)
    for phase, ops in result.unsupported.items():
        if ops:
            console.print(f"unsupported in {phase}: {', '.join(ops)}", style="yellow", markup=False)


def _steps(result: LLMResult) -> list[dict[str, Any]]:
    """The analyzed steps with their slowest kernels named as the report names them (the anchor node's name and
    how many nodes it fused), so that two GroupQueryAttention kernels read as their layers."""
    from onnxroof.report.html import kernel_label  # the HTML page's only: see the module docstring

    steps = []
    for point, analysis in zip((result.prefill, *result.decode), result.analyses, strict=True):
        nodes = {n.id: n for n in analysis.nodes}
        by_id = {k.id: k for k in analysis.kernels}
        kernels = [
            {
                "name": kernel_label(by_id[k.id], nodes) if k.id in by_id else k.id,
                "ops": " + ".join(k.op_types),
                "latency_s": k.latency_s,
                "bound": str(k.bound),
            }
            for k in point.top_kernels[:3]
        ]
        steps.append(
            {
                "phase": point.phase,
                "context": point.past + point.new,
                "latency_s": point.latency_s,
                "flops": point.flops,
                "bytes": point.bytes,
                "memory_bound_share": point.memory_bound_share,
                "kernels": kernels,
            }
        )
    return steps


_CHART_W, _CHART_H, _PAD_L, _PAD_R, _PAD_T, _PAD_B = 460, 210, 58, 12, 10, 36


def token_chart(result: LLMResult) -> str:
    """Decode-step latency against context length as a small inline SVG in the report's chart style: the analyzed
    steps (points) and the line between them (what is summed), the mean (time per output token) dashed.

    ``x = pad + (context − c₀) / (c₁ − c₀) · width``, ``y = pad + (1 − t / t_max) · height`` with ``t_max`` 1.1 × the
    slowest step (the axis starts at 0)."""
    from markupsafe import escape  # the HTML page's only, as jinja2 (the JSON and CSV never load it: ~1 ms)

    points = [(p.past + 1, p.latency_s) for p in result.decode]
    c0, c1 = points[0][0], points[-1][0]
    top = 1.1 * max(max(t for _, t in points), result.tpot_s) or 1.0
    width, height = _CHART_W - _PAD_L - _PAD_R, _CHART_H - _PAD_T - _PAD_B

    def x(c: float) -> float:
        return _PAD_L + ((c - c0) / (c1 - c0) if c1 > c0 else 0.5) * width

    def y(t: float) -> float:
        return _PAD_T + (1 - t / top) * height

    line = " ".join(f"{x(c):.1f},{y(t):.1f}" for c, t in points)
    parts = [
        f'<svg viewBox="0 0 {_CHART_W} {_CHART_H}" role="img" aria-label="time per token against context length">',
        f'<rect class="frame" x="{_PAD_L}" y="{_PAD_T}" width="{width}" height="{height}" fill="none" '
        'stroke="#c9ced8"/>',
    ]
    for share in (0.0, 0.5, 1.0):
        t = share * top / 1.1
        parts.append(
            f'<g class="grid"><line x1="{_PAD_L}" x2="{_PAD_L + width}" y1="{y(t):.1f}" y2="{y(t):.1f}" '
            f'stroke="#e6e9ef"/></g><g class="axis"><text x="{_PAD_L - 6}" y="{y(t) + 4:.1f}" text-anchor="end" '
            f'font-size="11">{escape(seconds(t))}</text></g>'
        )
    for c in sorted({c0, c1}):
        parts.append(
            f'<g class="axis"><text x="{x(c):.1f}" y="{_PAD_T + height + 16}" text-anchor="middle" '
            f'font-size="11">{c:,}</text></g>'
        )
    parts.append(
        f'<text class="axis-title" x="{_PAD_L + width / 2:.1f}" y="{_CHART_H - 4}" text-anchor="middle" '
        'font-size="11">context length (tokens)</text>'
    )
    parts.append(
        f'<line x1="{_PAD_L}" x2="{_PAD_L + width}" y1="{y(result.tpot_s):.1f}" y2="{y(result.tpot_s):.1f}" '
        'stroke="#e8731c" stroke-dasharray="5 4"><title>time per output token (mean)</title></line>'
    )
    parts.append(f'<polyline points="{line}" fill="none" stroke="#2f6db5" stroke-width="2"/>')
    parts.extend(
        f'<circle class="step" cx="{x(c):.1f}" cy="{y(t):.1f}" r="3.5" fill="#2f6db5">'
        f"<title>context {c:,}: {escape(seconds(t))}</title></circle>"
        for c, t in points
    )
    parts.append("</svg>")
    return "".join(parts)


_MAIN = '<main class="wrap">'


def render_llm_html(result: LLMResult) -> str:
    """A self-contained page in the report's design: the report of the decode step at the final context (its
    interactive roofline with tooltips, its kernel table, the roofs used: :func:`onnxroof.report.html.render_html`)
    with the LLM's figures set above it (time to first token, time per token, tokens/s per sequence and aggregate,
    the KV cache, memory, the batch search, the steps analyzed with their slowest kernels named by layer, time per
    token against context length). The added part has no script and no style: the page's CSP is unchanged."""
    import jinja2  # the HTML page's only, with report.html: see the module docstring
    from markupsafe import Markup, escape

    from onnxroof.report.html import render_html

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE.parent),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(si=si, seconds=seconds, percent=percent)
    section = env.get_template("llm_section.html.j2").render(
        r=result,
        number=number,
        rate=rate,
        kv_dtype=result.kv_dtype or result.cache.dtype,
        kv_per_token=_kv_per_token(result),
        memory=memory_line(result).removeprefix("memory: "),
        context_warning=context_warning(result),
        weights=weights_line(result).removeprefix("weights: "),
        search=search_line(result),
        roofs=roofs_text(result.analyses[0].platform).removeprefix("roofs: "),
        token_chart=Markup(token_chart(result)),
        steps=_steps(result),
    )
    page = render_html(result.analyses[-1])
    title = f"LLM serving: {Path(result.model).name} on {result.platform} — onnxroof"
    page = re.sub(r"<title>.*?</title>", lambda _: f"<title>{escape(title)}</title>", page, count=1, flags=re.S)
    at = page.index(_MAIN) + len(_MAIN)
    return page[:at] + "\n" + section + page[at:]
