"""Listings of runtime profiles (``onnxroof runtimes``) and what a runtime did to one analysis, for every view."""

from __future__ import annotations

import json
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from onnxroof.analysis.runtime_use import RuntimeUse
from onnxroof.core.units import seconds, si
from onnxroof.runtime import Runtime


def _launch_text(value: float | None, absent: str) -> str:
    return absent if value is None else f"{value * 1e6:g} µs"


def runtime_dict(runtime: Runtime) -> dict[str, Any]:
    """One runtime as plain data: its identity, launch figures (µs; None: the default the mode implies), KV write,
    how it adds a convolution's bias, efficiency factors and every source."""
    return {
        "name": runtime.name,
        "title": runtime.title,
        "targets": list(runtime.targets),
        "fusion_profile": str(runtime.fusion_profile),
        "launch_mode": str(runtime.launch_mode),
        "per_kernel_us": None if runtime.per_kernel_s is None else runtime.per_kernel_s * 1e6,
        "per_run_us": None if runtime.per_run_s is None else runtime.per_run_s * 1e6,
        "per_request_us": runtime.per_request_s * 1e6,
        "kv_write": str(runtime.kv_write),
        "conv_bias": str(runtime.conv_bias),
        "efficiency": {str(cls): value for cls, value in runtime.efficiency.items()},
        "sources": dict(runtime.sources),
        "path": runtime.path,
    }


def render_runtimes_json(runtimes: tuple[Runtime, ...]) -> str:
    """Every runtime as a JSON list (:func:`runtime_dict`)."""
    return json.dumps([runtime_dict(r) for r in runtimes], indent=2, ensure_ascii=False) + "\n"


def render_runtimes_table(runtimes: tuple[Runtime, ...], console: Console, verbose: bool = False) -> None:
    """One row per runtime: name, title, targets, launch mode and figures, KV write, fusion profile, factors;
    ``verbose``: every figure's source below its row."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False)
    names = max((len(r.name) for r in runtimes), default=7)
    for header in ("runtime", "title", "targets", "launch", "per kernel", "per run", "KV write", "fusion", "factors"):
        wraps = header in ("title", "factors")  # the long texts wrap; a long factor list must not squeeze the names
        width = names if header == "runtime" else None  # a runtime's name is never cut, however narrow the terminal
        table.add_column(header, overflow="fold", no_wrap=not wraps, ratio=1 if wraps else None, min_width=width)
    for r in runtimes:
        host = "replay node: 0" if r.captured else "platform's"
        table.add_row(
            r.name,
            r.title,
            ", ".join(r.targets),
            str(r.launch_mode),
            _launch_text(r.per_kernel_s, host),
            _launch_text(r.per_run_s, "one launch" if r.captured else "0")
            + (f"; {_launch_text(r.per_request_s, '')} per request" if r.per_request_s else ""),
            str(r.kv_write),
            str(r.fusion_profile),
            ", ".join(f"{cls} {value:g}" for cls, value in r.efficiency.items()) or "–",
        )
        if verbose:
            for key, source in r.sources.items():
                table.add_row("", f"[dim]{key}: {source}[/dim]", "", "", "", "", "", "", "")
    console.print(table)


def runtime_lines(use: RuntimeUse) -> list[str]:
    """What the runtime did, as short lines for the console and HTML views."""
    runtime = use.runtime
    launch = f"{seconds(use.per_kernel_s)} per launch" + (
        f", {seconds(use.per_run_s)} per run" if use.per_run_s else ""
    )
    lines = [f"runtime {runtime.name}: {runtime.launch_mode} ({launch}); KV cache written {use.kv_write}"]
    if use.kv_from != "runtime":
        verdict = (
            "as the runtime does"
            if use.kv_write == runtime.kv_write
            else f"overriding the runtime's {runtime.kv_write}"
        )
        lines.append(f"KV write {use.kv_write} from {use.kv_from} (past_present_share_buffer), {verdict}")
    if use.kv_saved_bytes:
        lines.append(f"in-place KV write saves {si(use.kv_saved_bytes, 'B')} per run")
    if use.bias_passes:
        lines.append(f"convolution bias added by a kernel of its own after {use.bias_passes} convolution(s)")
    idle = [f"{cls} × {value:g}" for cls, (value, count) in use.factors.items() if not count]
    for cls, (value, count) in use.factors.items():
        if count:
            lines.append(f"efficiency {cls} × {value:g} on {count} kernel(s)")
    if idle:  # said once: a factor whose class no kernel of this model has changed nothing
        lines.append(f"efficiency {', '.join(idle)}: no kernel of their class here")
    if use.genai:
        lines.append(f"read from {use.genai_path}: " + ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in use.genai))
    if use.genai_error:
        lines.append(use.genai_error)
    return lines
