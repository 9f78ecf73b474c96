"""``onnxroof inspect``: a model file's inputs, dims to bind, opsets, ops, weights and KV cache, as a table or JSON."""

from __future__ import annotations

import json
import re

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from onnxroof.core.units import si
from onnxroof.report.columns import short_path
from onnxroof.studies.inspection import Inspection, TensorSpec

#: How many op types the table lists (the JSON has them all).
OP_TYPES_SHOWN = 12


def render_inspect_json(inspection: Inspection) -> str:
    return json.dumps(inspection.to_dict(), indent=2, ensure_ascii=False) + "\n"


def shape_text(spec: TensorSpec) -> str:
    """``batch×3×224×224``; ``?`` for an unnamed dim; ``(no shape)`` when the file gives none."""
    if spec.shape is None:
        return "(no shape)"
    if not spec.shape:
        return "scalar"
    return "×".join("?" if d is None else str(d) for d in spec.shape)


def _tensor_table(title: str, specs: tuple[TensorSpec, ...]) -> Table:
    table = Table(title=title, box=box.SIMPLE_HEAD, title_justify="left", padding=(0, 1))
    table.add_column("name", overflow="fold")
    table.add_column("dtype", no_wrap=True)
    table.add_column("shape", overflow="fold")
    for spec in specs:
        table.add_row(Text(spec.name), spec.dtype, Text(shape_text(spec)))
    return table


def _facts(inspection: Inspection, width: int) -> Text:
    i = inspection
    opsets = ", ".join(f"{domain or 'ai.onnx'} {version}" for domain, version in i.opsets.items())
    nested = f" (+{i.subgraph_nodes} in subgraphs)" if i.subgraph_nodes else ""
    lines = [
        f"IR {i.ir_version}, producer {i.producer or '?'}, graph '{i.graph_name}'",
        f"Opsets: {opsets or 'none'}",
        f"Nodes: {i.nodes}{nested}, {len(i.op_types)} op types"
        + (f", {i.functions} local functions" if i.functions else ""),
        f"Parameters: {si(i.parameters)}   Weights: {si(i.weight_bytes, 'B')} in {i.initializers} initializers"
        + (
            f" ({i.packed} hold packed low-bit weights, counted as their bytes; `report` counts their weights)"
            if i.packed
            else ""
        ),
    ]
    if i.external:
        parts = [
            f"{f.location} ({f.tensors} tensors, {si(f.bytes, 'B')}{'' if f.exists else ', MISSING'})"
            for f in i.external
        ]
        lines.append("External data: " + "; ".join(parts))
    else:
        lines.append("External data: none")
    custom = "; ".join(f"{domain}: {', '.join(ops)}" for domain, ops in i.custom_domains.items())
    lines.append(f"Custom domains: {custom or 'none'}")
    text = Text(short_path(i.path or "<model>", width), style="bold")
    text.append("\n" + "\n".join(lines))
    return text


def _dims_text(inspection: Inspection) -> Text:
    if not inspection.symbols:
        return Text("Dims to bind: none (every input shape is fixed)")
    text = Text("Dims to bind (--dim NAME=VALUE):", style="bold")
    for name, places in inspection.symbols.items():
        more = f" and {len(places) - 3} more" if len(places) > 3 else ""
        text.append(f"\n  {name}", style="cyan")
        text.append(f"  {', '.join(_place(p) for p in places[:3])}{more}")
    example = next(
        (spec for spec in inspection.inputs if spec.shape and any(not isinstance(d, int) for d in spec.shape)), None
    )
    if example is not None and example.shape is not None:
        whole = "x".join(str(d) if isinstance(d, int) else "1" for d in example.shape)
        first = next(iter(inspection.symbols))
        text.append(f"\n  e.g. --dim {first}=1, or a whole input: --shape {example.name}={whole}", style="dim")
    return text


def _place(place: str) -> str:
    """``input 'x' axis 0`` as ``x[0]``."""
    found = re.fullmatch(r"input '(.*)' axis (\d+)", place)
    return f"{found[1]}[{found[2]}]" if found else place


def _cache_text(inspection: Inspection) -> Text:
    cache = inspection.kv_cache
    if cache is None:
        return Text(f"KV cache: {inspection.kv_cache_note}")
    text = Text("KV cache:", style="bold")
    text.append(
        f" {cache.layers} layers × key and value, {cache.kv_heads} kv heads × head size {cache.head_dim}, "
        f"{cache.dtype}: {si(cache.bytes_per_token, 'B')}/token per sequence"
    )
    first_present = cache.present[0] or "(no present output)"
    text.append(f"\n  past: {cache.past[0]} … {cache.past[-1]}  present: {first_present} …")
    roles = ", ".join(f"{role}={symbol}" for role, symbol in cache.roles.items() if symbol)
    text.append(f"\n  dims: {roles}" + (f", branch input {cache.branch}" if cache.branch else ""))
    return text


def _op_table(inspection: Inspection) -> Table:
    shown = inspection.op_types[:OP_TYPES_SHOWN]
    left = len(inspection.op_types) - len(shown)
    table = Table(
        title="Op types" + (f" (top {len(shown)}; --format json lists all {len(inspection.op_types)})" if left else ""),
        box=box.SIMPLE_HEAD,
        title_justify="left",
    )
    table.add_column("op type", overflow="fold")
    table.add_column("count", justify="right", no_wrap=True)
    for domain, op_type, count in shown:
        table.add_row(Text(f"{domain}::{op_type}" if domain else op_type), str(count))
    return table


def render_inspect_console(inspection: Inspection, console: Console) -> None:
    """The facts, inputs, outputs, dims to bind, KV cache and op types, each block fitting ``console.width``."""
    console.print(_facts(inspection, console.width))
    console.print(_tensor_table("Inputs", inspection.inputs))
    console.print(_tensor_table("Outputs", inspection.outputs))
    console.print(_dims_text(inspection))
    console.print(_cache_text(inspection))
    console.print(_op_table(inspection))
