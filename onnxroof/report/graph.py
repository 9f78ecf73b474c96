"""Annotated graphs: the analysis attached to the model's own nodes, for Netron, ONNX tools and Graphviz.

* :func:`netron_attachment` — a side-car JSON with ``"signature": "netron:attachment"``: open it in Netron
  while the model is open and every node shows its figures (``metrics``) and roofline verdict
  (``metadata``). Netron matches a ``node`` row by the node's name (up to its first newline); a node without
  a name, or whose name is not unique, gets its rows on its first output tensor (``value``), whose name is
  unique in every valid model.
* :func:`annotated_model` — a copy of the model with the same figures in each node's ``metadata_props``
  (keys ``onnxroof.*``), the analysis in the model's, and the shapes inferred under the analysis's dims in
  the graph's ``value_info`` (so Netron shows them on every edge). Read without weights: initializers and
  external data references stay exactly as they were.
* :func:`render_dot` — Graphviz DOT: nodes coloured by bound and labelled with their predicted time, kernels
  of several nodes drawn as clusters; :func:`render_svg` runs Graphviz's ``dot`` on it.

Names are untrusted: DOT identifiers are synthetic (``n12``, ``cluster_k3``) and every label is a quoted,
escaped string (backslashes, quotes and control characters), so any name yields a file that parses.
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
import subprocess
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import onnx
import onnx.inliner

from onnxroof.analysis.analyze import Analysis, NodeResult
from onnxroof.core.dtypes import elem_type_of
from onnxroof.core.errors import ModelError, OnnxroofError, one_line
from onnxroof.core.ir import TensorInfo
from onnxroof.core.states import Bound, NodeState
from onnxroof.core.units import percent, seconds, si
from onnxroof.load.reader import read_model
from onnxroof.roofline.kernels import KernelResult

PREFIX = "onnxroof."
DOT_MAX_LABEL = 48


def _index(node_id: str) -> int:
    return int(node_id.split(":", 1)[0])


def _first_output(analysis: Analysis, node: NodeResult) -> str | None:
    op = analysis.op(node.id)
    outputs = [t.name for t in (op.outputs if op else ()) if t is not None and t.name]
    return outputs[0] if outputs else None


def summary(node: NodeResult, kernel: KernelResult | None) -> str:
    """One human line: ``12.3 µs · memory-bound at 0.12 FLOP/B · 524 kB moved · kernel k13``."""
    if node.state != NodeState.COSTED:
        return f"{node.state.replace('_', ' ')}: {node.note or 'does not run'}"
    parts = [
        seconds(node.latency_s),
        f"{node.bound}-bound at {node.intensity:.3g} FLOP/B",
        f"{si(node.bytes, 'B')} moved",
    ]
    if kernel is not None:
        fused = f" ({len(kernel.node_ids)} nodes, {seconds(kernel.latency_s)})" if len(kernel.node_ids) > 1 else ""
        folded = ", folded away" if node.id in kernel.folded_nodes else ""
        parts.append(f"kernel {kernel.id}{fused}{folded}")
    return " · ".join(parts)


def node_figures(analysis: Analysis, node: NodeResult, kernel: KernelResult | None) -> dict[str, Any]:
    """The per-node figures every annotated format carries (SI units; intensity None when infinite)."""
    total = analysis.totals.latency_s
    intensity = node.intensity if math.isfinite(node.intensity) else None
    return {
        "state": node.state,
        "flops": node.flops,
        "macs": node.macs,
        "bytes_read": node.bytes_read,
        "bytes_written": node.bytes_written,
        "intensity": intensity,
        "bound": node.bound,
        "precision": node.precision,
        "latency_s": node.latency_s,
        "kernel": kernel.id if kernel else "",
        "kernel_pattern": kernel.pattern if kernel else "",
        "kernel_latency_s": kernel.latency_s if kernel else 0.0,
        "kernel_share": kernel.latency_s / total if kernel and total > 0 else 0.0,
    }


# ----------------------------------------------------------------------------------------------- netron


def _netron_targets(analysis: Analysis) -> dict[str, tuple[str, str]]:
    """node id -> (kind, target) as Netron matches them (node name, else first output tensor)."""
    first_line = {n.id: n.name.split("\n", 1)[0] for n in analysis.nodes}
    counts = Counter(first_line.values())
    targets = {}
    for node in analysis.nodes:
        name = first_line[node.id]
        if name and counts[name] == 1:
            targets[node.id] = ("node", name)
        else:
            output = _first_output(analysis, node)
            targets[node.id] = ("value", output.split("\n", 1)[0]) if output else ("node", name)
    return targets


def netron_attachment(analysis: Analysis) -> dict[str, Any]:
    """The ``netron:attachment`` document: ``metadata`` and ``metrics`` rows for the model and every node."""
    kernels = analysis.kernel_by_node
    t, p = analysis.totals, analysis.platform
    metadata: list[dict[str, Any]] = [
        {"kind": "model", "target": "", "name": "onnxroof platform", "value": p.title, "type": "attribute"},
        {
            "kind": "model",
            "target": "",
            "name": "onnxroof fusion profile",
            "value": analysis.fusion_profile,
            "type": "attribute",
        },
    ]
    metrics: list[dict[str, Any]] = [
        {"kind": "model", "target": "", "name": name, "value": value, "type": "attribute"}
        for name, value in (
            ("predicted latency (µs)", round(t.latency_s * 1e6, 3)),
            ("FLOPs", t.flops),
            ("bytes moved (fused)", t.fused.bytes),
            ("bytes (unfused)", t.unfused.bytes),
            ("memory-bound share (%)", round(100 * t.memory_bound_share, 2)),
            ("peak activations (bytes)", t.peak_activation_bytes),
        )
    ]
    targets = _netron_targets(analysis)
    for node in analysis.nodes:
        kind, target = targets[node.id]
        kernel = kernels.get(node.id)
        fig = node_figures(analysis, node, kernel)

        def row(name: str, value: Any, container: list[dict[str, Any]], kind=kind, target=target) -> None:
            container.append({"kind": kind, "target": target, "name": name, "value": value, "type": "attribute"})

        row("onnxroof node", node.id, metadata)
        row("onnxroof", summary(node, kernel), metadata)
        row("state", node.state, metadata)
        row("bound", node.bound, metadata)
        row("precision", node.precision, metadata)
        row("kernel", f"{fig['kernel']} ({fig['kernel_pattern']})" if kernel else "none", metadata)
        row("FLOPs", node.flops, metrics)
        row("MACs", node.macs, metrics)
        row("bytes read", node.bytes_read, metrics)
        row("bytes written", node.bytes_written, metrics)
        row("intensity (FLOP/B)", None if fig["intensity"] is None else round(fig["intensity"], 4), metrics)
        row("predicted time (µs)", round(node.latency_s * 1e6, 4), metrics)
        row("kernel time (µs)", round(fig["kernel_latency_s"] * 1e6, 4), metrics)
        row("share of latency (%)", round(100 * fig["kernel_share"], 3), metrics)
    return {"signature": "netron:attachment", "metadata": metadata, "metrics": metrics}


def render_netron(analysis: Analysis) -> str:
    """The attachment as JSON text, one row per line (compact and still diffable)."""
    document = netron_attachment(analysis)

    def rows(name: str) -> str:
        return ",\n".join("  " + json.dumps(row, ensure_ascii=False, allow_nan=False) for row in document[name])

    return (
        f'{{"signature": "netron:attachment",\n"metadata": [\n{rows("metadata")}\n],\n'
        f'"metrics": [\n{rows("metrics")}\n]}}\n'
    )


# ------------------------------------------------------------------------------------------ annotated ONNX


def _set_props(props, values: dict[str, str]) -> None:
    """Replace every ``onnxroof.*`` entry of a metadata_props list with ``values`` (others kept, in order)."""
    kept = [(e.key, e.value) for e in props if not e.key.startswith(PREFIX)]
    del props[:]
    for key, value in [*kept, *values.items()]:
        entry = props.add()
        entry.key, entry.value = key, value


def _text(value: Any) -> str:
    """A figure as exact text: integral floats without ``.0``, others as ``repr``; None is infinity."""
    if value is None:
        return "inf"
    if isinstance(value, float):
        return str(int(value)) if math.isfinite(value) and value == int(value) and abs(value) < 1e16 else repr(value)
    return str(value)


def annotated_model(analysis: Analysis, source: str | Path | None = None) -> onnx.ModelProto:
    """The analysed model with every node's figures in its ``metadata_props`` and the inferred shapes in its
    ``value_info`` (:func:`write_inferred_shapes`); weights never loaded.

    ``source`` defaults to the file the analysis was made from. Model-local functions are inlined as the
    analysis inlined them, so node *i* of the copy is node *i* of the analysis.
    """
    path = source if source is not None else analysis.model.path
    if path is None:
        raise OnnxroofError("the analysis was made from an in-memory model: give the model file to annotate")
    model, _ = read_model(path)
    if model.functions:
        # when inlining fails the analysis kept the calls too (and said so in a warning)
        with contextlib.suppress(Exception):
            model = onnx.inliner.inline_local_functions(model)
    nodes = model.graph.node
    if len(nodes) != len(analysis.nodes):
        raise ModelError(f"{path}: has {len(nodes)} nodes but the analysis has {len(analysis.nodes)}")
    kernels = analysis.kernel_by_node
    for result in analysis.nodes:
        node = nodes[_index(result.id)]
        if node.op_type != result.op_type:
            raise ModelError(f"{path}: node {result.id} is a {node.op_type}, the analysis has a {result.op_type}")
        kernel = kernels.get(result.id)
        figures = {PREFIX + key: _text(value) for key, value in node_figures(analysis, result, kernel).items()}
        figures[PREFIX + "summary"] = summary(result, kernel)
        _set_props(node.metadata_props, figures)
    if analysis.ir is not None:
        write_inferred_shapes(model.graph, analysis.ir.tensors)
    t, p = analysis.totals, analysis.platform
    _set_props(
        model.metadata_props,
        {
            PREFIX + "platform": p.name,
            PREFIX + "platform_title": p.title,
            PREFIX + "fusion_profile": analysis.fusion_profile,
            PREFIX + "dims": ",".join(f"{k}={v}" for k, v in analysis.model.dims.items()),
            PREFIX + "latency_s": _text(t.latency_s),
            PREFIX + "flops": _text(t.flops),
            PREFIX + "bytes": _text(t.bytes),  # unfused, as the JSON's totals.bytes
            PREFIX + "fused.bytes": _text(t.fused.bytes),
            PREFIX + "memory_bound_share": _text(t.memory_bound_share),
            PREFIX + "summary": f"{seconds(t.latency_s)} predicted on {p.title}; "
            f"{percent(t.memory_bound_share)} of it memory-bound",
        },
    )
    return model


def write_inferred_shapes(graph: onnx.GraphProto, tensors: Mapping[str, TensorInfo]) -> int:
    """Write the shape and element type the analysis inferred for every value a node of ``graph`` produces
    into ``graph.value_info`` (replacing an entry of the same name; the graph's inputs, outputs and
    initializers keep their declarations). A value whose rank or type is unknown is left out; an unknown dim
    is written with neither a value nor a name. Returns how many values were written."""
    declared = {v.name for v in (*graph.input, *graph.output)} | {t.name for t in graph.initializer}
    written: dict[str, onnx.ValueInfoProto] = {}
    for node in graph.node:
        for name in node.output:
            info = tensors.get(name) if name and name not in declared else None
            if info is None or info.shape is None or elem_type_of(info.dtype) == 0:
                continue
            written[name] = onnx.helper.make_tensor_value_info(name, elem_type_of(info.dtype), list(info.shape))
    kept = [v for v in graph.value_info if v.name not in written]
    del graph.value_info[:]
    graph.value_info.extend([*kept, *written.values()])
    return len(written)


def external_data_files(model: onnx.ModelProto) -> list[str]:
    """The external-data locations the model's initializers refer to (relative to the model's folder)."""
    locations: set[str] = set()
    for tensor in model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            locations.update(e.value for e in tensor.external_data if e.key == "location")
    return sorted(locations)


# ------------------------------------------------------------------------------------------------ DOT

_FILL = {Bound.MEMORY: ("#d6e4f7", "#2f6db5"), Bound.COMPUTE: ("#fcdcc0", "#d0600f")}
_IDLE = ("#f1f2f5", "#b4bac8")
_UNSUPPORTED = ("#f8d3d3", "#c23a3a")


def dot_string(text: str) -> str:
    """A DOT quoted string showing ``text`` literally: quotes and backslashes escaped, newlines as ``\\n``."""
    clean = "".join(ch if ch.isprintable() or ch == "\n" else " " for ch in text)
    escaped = clean.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _short(text: str, limit: int = DOT_MAX_LABEL) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def _label(*lines: str) -> str:
    return dot_string("\n".join(lines))


def render_dot(analysis: Analysis) -> str:
    """The graph in Graphviz DOT: one box per node, clusters for kernels of several nodes."""
    kernels = analysis.kernel_by_node
    total = analysis.totals.latency_s or 1.0
    ids = {node.id: f"n{i}" for i, node in enumerate(analysis.nodes)}
    by_id = {node.id: node for node in analysis.nodes}
    model = analysis.model
    title = Path(model.path).name if model.path else (model.graph_name or "model")
    lines = [
        "digraph onnxroof {",
        f"  graph [rankdir=TB, fontname=Helvetica, fontsize=12, labelloc=t, label="
        f"{_label(f'{title} on {analysis.platform.title}', f'predicted {seconds(analysis.totals.latency_s)}')}];",
        '  node [shape=box, style="rounded,filled", fontname=Helvetica, fontsize=9, penwidth=1.2];',
        '  edge [color="#9aa3b5", arrowsize=0.6];',
    ]

    def node_line(node: NodeResult, indent: str) -> str:
        kernel = kernels.get(node.id)
        fused = kernel is not None and len(kernel.node_ids) > 1
        if node.state == NodeState.UNSUPPORTED:
            fill, border = _UNSUPPORTED
            detail = "unsupported: not costed"
        elif node.state != NodeState.COSTED:
            fill, border = _IDLE
            detail = node.state.replace("_", " ")
        else:
            fill, border = _FILL.get(kernel.bound if kernel else node.bound, _IDLE)
            if fused and kernel is not None and node.id in kernel.folded_nodes:
                detail = "folded into the kernel"
            elif fused:
                detail = f"{si(node.flops, 'FLOP')} · {si(node.bytes, 'B')}"
            else:
                detail = f"{seconds(node.latency_s)} · {node.bound} · {percent(node.latency_s / total)}"
        name = _short(node.name) if node.name and node.name != node.op_type else ""
        label = _label(*(x for x in (node.op_type, name, detail) if x))
        attrs = f'label={label}, fillcolor="{fill}", color="{border}", tooltip={dot_string(node.id)}'
        if node.state != NodeState.COSTED:
            attrs += ', fontsize=8, fontcolor="#677085"'
        return f"{indent}{ids[node.id]} [{attrs}];"

    clustered = set()
    for kernel in analysis.kernels:
        if len(kernel.node_ids) < 2:
            continue
        border = _FILL.get(kernel.bound, _IDLE)[1]
        head = f"{kernel.id} · {kernel.pattern}" if kernel.pattern != "single" else kernel.id
        label = _label(head, f"{seconds(kernel.latency_s)} · {kernel.bound} · {percent(kernel.latency_s / total)}")
        lines.append(f"  subgraph cluster_{kernel.id.replace('-', '_')} {{")
        lines.append(f'    label={label}; style="rounded,dashed"; color="{border}"; fontsize=9;')
        lines.extend(node_line(by_id[node_id], "    ") for node_id in kernel.node_ids if node_id in by_id)
        lines.append("  }")
        clustered.update(kernel.node_ids)
    lines.extend(node_line(n, "  ") for n in analysis.nodes if n.id not in clustered)
    if analysis.graph is not None:
        for source, target, data in analysis.graph.edges(data=True):
            if source in ids and target in ids:
                tensors = ", ".join(data.get("tensors", ()))
                lines.append(f"  {ids[source]} -> {ids[target]} [tooltip={dot_string(_short(tensors, 200))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def require_dot() -> str:
    """The path of Graphviz's ``dot`` program; :class:`OnnxroofError` in one line when it is not installed."""
    program = shutil.which("dot")
    if program is None:
        raise OnnxroofError(
            "the Graphviz 'dot' program is not installed: install graphviz, or write --format dot and render it "
            "elsewhere"
        )
    return program


def render_svg(dot_text: str, timeout_s: float = 300.0) -> str:
    """Graphviz's ``dot -Tsvg`` on ``dot_text``; :class:`OnnxroofError` when it is missing or fails."""
    program = require_dot()
    try:
        done = subprocess.run(
            [program, "-Tsvg"], input=dot_text, capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired:
        raise OnnxroofError(f"Graphviz 'dot' took more than {timeout_s:.0f} s; write --format dot instead") from None
    if done.returncode != 0:
        raise OnnxroofError(f"Graphviz 'dot' failed: {one_line(done.stderr) or f'exit code {done.returncode}'}")
    return done.stdout
