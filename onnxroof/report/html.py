"""The HTML report: one self-contained, offline file with the roofline chart, bottlenecks and a kernel table.

Everything the page needs is inline: the stylesheet, one small script (no chart library, no CDN, no web
font) and the data, as two ``<script type="application/json">`` blocks — ``onnxroof-analysis`` holds the
documented JSON document (:func:`onnxroof.analysis.document.to_dict`, so a reader can pull it back out of the
page) and ``onnxroof-view`` the colours the charts share with the server-rendered parts.

Given a profile (``onnxroof report --profile PROF.json``), the document carries its ``measured`` section
(:mod:`onnxroof.measure.overlay`): the chart adds a measured point per kernel (FLOPs ÷ measured time, at the
kernel's intensity) joined to its predicted point, and the kernel table a measured-time and a ratio column.

Model strings (node, tensor and graph names, doc strings) are untrusted. The template autoescapes every
value; the JSON blocks escape ``<``, ``>`` and ``&`` so nothing in them can close the script tag; the
script builds the DOM with ``textContent`` only; and a Content-Security-Policy allows exactly the inline
script and stylesheet shipped here (by hash) and no network access at all.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import math
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup

from onnxroof.analysis.analyze import Analysis, NodeResult
from onnxroof.analysis.document import SCHEMA_VERSION, time_model_fields, to_dict
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.states import Bound
from onnxroof.core.units import joules, percent, seconds, si
from onnxroof.measure.overlay import MeasuredOverlay, with_measured
from onnxroof.report.runtimes import runtime_lines
from onnxroof.roofline.energy import byte_energy, energy_ridge, op_energy
from onnxroof.roofline.kernels import KernelResult

TEMPLATES = Path(__file__).with_name("templates")

#: Qualitative colours for the op types with the most predicted time (Tableau 10, colour-blind aware order);
#: every other op type is drawn in :data:`OTHER_COLOUR`.
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f")
OTHER_COLOUR = "#b5b5b5"
BOUND_COLOURS = {Bound.MEMORY: "#2f6db5", Bound.COMPUTE: "#e8731c"}
BOTTLENECKS = 10
OP_BARS = 12


def _json_for_script(value: Any) -> Markup:
    """JSON safe inside ``<script type="application/json">``: no ``<``, ``>`` or ``&`` survives literally."""
    text = json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=True)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text)


def _csp_hash(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(si=si, seconds=seconds, percent=percent, number=_number, joules=joules)
    return env


@lru_cache(maxsize=1)
def _assets() -> tuple[str, str]:
    """The inline stylesheet and script; neither may contain a closing tag of its own element."""
    style = (TEMPLATES / "report.css").read_text(encoding="utf-8")
    script = (TEMPLATES / "report.js").read_text(encoding="utf-8")
    assert "</style" not in style.lower() and "</script" not in script.lower()
    return style, script


def _number(value: float | None, digits: int = 3) -> str:
    """A plain number with ``digits`` significant digits and thousands kept readable (``83``, ``2.3``)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if math.isinf(value):
        return "∞"
    if abs(value) >= 10**digits:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def shape_text(shape: Sequence[int | None] | None) -> str:
    if shape is None:
        return "?"
    return "×".join("?" if d is None else str(d) for d in shape) or "scalar"


# ------------------------------------------------------------------------------------------ explanations


def kernel_label(kernel: KernelResult, nodes: dict[str, NodeResult]) -> str:
    """How a reader names a kernel: its first node's name (or id), and how many nodes it fused."""
    first = nodes.get(kernel.node_ids[0]) if kernel.node_ids else None
    name = (first.name or first.id) if first else kernel.id
    extra = len(kernel.node_ids) - 1
    return f"{name} (+{extra}\u00a0fused)" if extra > 0 else name  # no break inside "(+2 fused)"


def explain(kernel: KernelResult) -> str:
    """One plain sentence: what sets this kernel's predicted time.

    ``memory-bound at 2.3 FLOP/B, ridge 83: its time is set by the 12 MB it moves``.
    """
    moved = si(kernel.bytes, "B")
    busy = max(kernel.t_compute_s, kernel.t_memory_s)
    if kernel.flops == 0:
        what = "a layout copy" if kernel.layout else "pure data movement"
        sentence = f"{what}, no arithmetic: its time is set by the {moved} it moves"
    elif kernel.bound == Bound.COMPUTE:
        sentence = (
            f"compute-bound at {_number(kernel.intensity, 2)} FLOP/B, above the ridge {_number(kernel.ridge, 2)}: "
            f"its time is set by its {si(kernel.flops, 'FLOP')} at the {kernel.precision} peak of "
            f"{si(kernel.peak_flops, 'FLOP/s', 3)}"
        )
    else:
        sentence = (
            f"memory-bound at {_number(kernel.intensity, 2)} FLOP/B, ridge {_number(kernel.ridge, 2)}: "
            f"its time is set by the {moved} it moves"
        )
    if kernel.utilization < 1.0:
        sentence += f"; its GEMM keeps {percent(kernel.utilization)} of the PE array busy (padding loss)"
    if kernel.t_overhead_s > busy:
        sentence += f"; launch overhead ({seconds(kernel.t_overhead_s)}) is more than the work itself ({seconds(busy)})"
    return sentence


@frozen_dataclass
class Bottleneck:
    rank: int
    kernel: KernelResult
    label: str
    ops: str
    share: float
    sentence: str
    colour: str


@frozen_dataclass
class OpBar:
    op_type: str
    kernels: int
    latency_s: float
    share: float
    width: float  # percent of the widest bar
    colour: str


def op_type_time(kernels: Iterable[KernelResult]) -> list[tuple[str, int, float]]:
    """(op type, kernels, predicted time) per kernel anchor op type, most time first."""
    groups: dict[str, list[float]] = {}
    for kernel in kernels:
        groups.setdefault(kernel.op_types[0] if kernel.op_types else "?", []).append(kernel.latency_s)
    rows = [(op, len(times), sum(times)) for op, times in groups.items()]
    return sorted(rows, key=lambda row: (-row[2], -row[1], row[0]))


def op_colours(rows: Sequence[tuple[str, int, float]]) -> dict[str, str]:
    """The op types with the most time get the palette, in order; the rest share the grey."""
    return {op: PALETTE[i] if i < len(PALETTE) else OTHER_COLOUR for i, (op, _, _) in enumerate(rows)}


SEVERITY_CLASSES = ("error", "warning", "note")


def _findings(analysis: Analysis) -> list[dict[str, Any]] | None:
    """The lint findings when :mod:`onnxroof.analysis.findings` exists (None: the section is not rendered)."""
    if importlib.util.find_spec("onnxroof.analysis.findings") is None:
        return None
    from onnxroof.analysis.findings import find

    return [
        {
            "id": f.id,
            "severity": f.severity,
            "severity_class": f.severity if f.severity in SEVERITY_CLASSES else "note",
            "title": f.title,
            "message": f.message,
            "suggestion": f.suggestion,
            "node_ids": f.node_ids,
        }
        for f in find(analysis)
    ]


# ------------------------------------------------------------------------------------ floorline (energy)


def floorline_view(analysis: Analysis) -> dict[str, Any] | None:
    """What the page's floorline chart draws; None when the platform gives no energy figures.

    The floor ``E_op + E_dram / I`` of the precision the most predicted time computes at (``primary``) and of
    each other precision the kernels compute in, the energy ridge ``E_dram / E_op`` of the first, and per
    energy bound the kernels and their share of the energy (the legend). Numbers in SI units (J/op, J/B).
    """
    p = analysis.platform
    if not p.has_energy:
        return None
    main = analysis.main_precision
    used = {k.precision for k in analysis.kernels if k.flops > 0} | {main}
    total = analysis.totals.energy_j or 0.0
    bounds = []
    for bound, colour in BOUND_COLOURS.items():
        members = [k for k in analysis.kernels if k.flops > 0 and k.energy_j and k.energy_bound == bound]
        energy = sum(k.energy_j or 0.0 for k in members)
        if members:
            bounds.append({"bound": bound, "colour": colour, "kernels": len(members), "share": energy / total})
    return {
        "precision": main,
        "e_op": op_energy(p, main),
        "e_dram": byte_energy(p, "dram"),
        "ridge": energy_ridge(p, main),
        "floors": [
            {"precision": q, "e_op": op_energy(p, q), "primary": q == main}
            for q in sorted(used, key=lambda q: (q != main, q))
        ],
        "bounds": bounds,
    }


# ------------------------------------------------------------------------------------------------ render


def _runtime_context(analysis: Analysis) -> dict[str, Any]:
    """What the page says of the runtime that ran: its lines and its figures' sources."""
    use = analysis.runtime
    if use is None:
        return {"runtime_lines": [], "runtime_sources": ""}
    sources = "; ".join(f"{k}: {v}" for k, v in use.runtime.sources.items())
    return {"runtime_lines": runtime_lines(use), "runtime_sources": sources}


def _context(analysis: Analysis, measured: MeasuredOverlay | None = None) -> dict[str, Any]:
    t, p, m = analysis.totals, analysis.platform, analysis.model
    nodes = {n.id: n for n in analysis.nodes}
    total = t.latency_s or 1.0
    by_op = op_type_time(analysis.kernels)
    colours = op_colours(by_op)
    widest = by_op[0][2] if by_op and by_op[0][2] > 0 else 1.0
    shown = by_op[:OP_BARS]
    rest = by_op[OP_BARS:]
    bars = [OpBar(op, count, lat, lat / total, 100 * lat / widest, colours[op]) for op, count, lat in shown]
    if rest:
        lat = sum(r[2] for r in rest)
        bars.append(
            OpBar(
                f"{len(rest)} other op types",
                sum(r[1] for r in rest),
                lat,
                lat / total,
                min(100.0, 100 * lat / widest),
                OTHER_COLOUR,
            )
        )
    bottlenecks = [
        Bottleneck(
            rank=i + 1,
            kernel=k,
            label=kernel_label(k, nodes),
            ops=" + ".join(k.op_types),
            share=k.latency_s / total,
            sentence=explain(k),
            colour=colours.get(k.op_types[0] if k.op_types else "?", OTHER_COLOUR),
        )
        for i, k in enumerate(analysis.top_kernels(BOTTLENECKS))
    ]
    used = sorted({k.precision for k in analysis.kernels}, key=lambda q: p.peak_flops.get(q, 0.0))
    roofs = used or list(p.precisions()[:1])  # nothing runs: still draw the platform's first roof
    peaks = [
        {
            "precision": q,
            "peak": p.peak(q),
            "datasheet": p.peak_flops[q],
            "ridge": p.ridge(q),
            "used": q in used,
            "source": p.sources.get(f"peak_tflops.{q}", ""),
        }
        for q in p.precisions()
    ]
    style, script = _assets()
    view = {
        "op_colours": colours,
        "other_colour": OTHER_COLOUR,
        "bound_colours": BOUND_COLOURS,
        "precisions_used": roofs,
        "roofs": {  # what the chart draws: the roofs every prediction used (sustained unless --peak)
            "sustained": bool(p.sustained) and not p.peak_roofs,
            "dram_bandwidth": p.roof_bandwidth,
            "peak_flops": {q: p.peak(q) for q in p.precisions()},
            "datasheet_dram_bandwidth": p.dram_bandwidth,
        },
        "floorline": floorline_view(analysis),
    }
    layout_kernels = sum(1 for k in analysis.kernels if k.layout)
    title = Path(m.path).name if m.path else (m.graph_name or "model")
    return {
        "title": title,
        "analysis": analysis,
        **_runtime_context(analysis),
        "model": m,
        "platform": p,
        "totals": t,
        "peaks": peaks,
        "bandwidth_source": p.sources.get("memory.dram_bandwidth_gbps", ""),
        "overhead_source": p.sources.get("runtime.launch_overhead_us", ""),
        "time_model": time_model_fields(analysis),
        "dims": ", ".join(f"{k}={v}" for k, v in m.dims.items()),
        "op_bars": bars,
        "bottlenecks": bottlenecks,
        "layout_kernels": layout_kernels,
        "unsupported": sorted(analysis.unsupported.items()),
        "unsupported_nodes": sum(len(ids) for ids in analysis.unsupported.values()),
        "warnings": analysis.warnings,
        "findings": _findings(analysis),
        "fusion_misses": analysis.fusion_misses,
        "peak_node": nodes.get(t.peak_activation_node) if t.peak_activation_node else None,
        "analysis_schema": SCHEMA_VERSION,
        "analysis_json": _json_for_script(with_measured(to_dict(analysis), measured)),
        "measured": measured,
        "measured_name": Path(measured.source).name if measured is not None else "",
        "view_json": _json_for_script(view),
        "floorline": view["floorline"],
        "style": Markup(style),
        "script": Markup(script),
        "csp": f"default-src 'none'; script-src '{_csp_hash(script)}'; style-src '{_csp_hash(style)}'; "
        "img-src data:; base-uri 'none'; form-action 'none'",
        "shape": shape_text,
    }


def render_html(analysis: Analysis, measured: MeasuredOverlay | None = None) -> str:
    """The report as one self-contained HTML document; with ``measured`` (a profile's
    :class:`~onnxroof.measure.overlay.MeasuredOverlay`) the chart and the kernel table show measured times beside
    the predicted ones, and the embedded document carries its ``measured`` section."""
    return _environment().get_template("report.html.j2").render(_context(analysis, measured))
