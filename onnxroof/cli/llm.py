"""``onnxroof llm MODEL -p a100 --prompt 2048 --generate 4096``: first-token time, time per output token and the KV
cache of an ONNX decoder (:func:`onnxroof.studies.llm.llm`).

Exit codes: 0 success; 2 bad input (no KV cache found, a dim it cannot place: one line naming the option that maps
it); 3 an internal error.
"""

from pathlib import Path
from typing import Annotated

import typer

from onnxroof.cli.common import (
    REPORT_SUFFIXES,
    DebugOption,
    DimOption,
    FusionOption,
    OutputOption,
    PeakOption,
    PlatformOption,
    PrecisionOption,
    ReportFormat,
    RuntimeOption,
    ShapeOption,
    TimeModelOption,
    app,
    chosen_format,
    emit,
    exit_on_errors,
    shape_options,
)


def parse_kv_dims(text: str | None) -> dict[str, str]:
    """``past=NAME,new=NAME,total=NAME,batch=NAME`` to a role -> symbol mapping."""
    from onnxroof.core.errors import DimsError

    roles: dict[str, str] = {}
    for item in (text or "").split(","):
        if not item.strip():
            continue
        role, sep, name = item.partition("=")
        if not sep or not name.strip():
            raise DimsError(f"--kv-dims {item!r}: expected ROLE=NAME (roles: batch, new, past, total)")
        roles[role.strip()] = name.strip()
    return roles


@app.command()
def llm(
    model: Annotated[Path, typer.Argument(help="An ONNX decoder with a KV cache.", show_default=False)],
    platform: PlatformOption = "xavier",
    prompt: Annotated[int, typer.Option(help="Prompt tokens (the prefill).", min=1)] = 128,
    generate: Annotated[int, typer.Option(help="Tokens generated one at a time (the decode steps).", min=1)] = 128,
    batch: Annotated[int, typer.Option(help="Sequences served at once.", min=1)] = 1,
    dim: DimOption = None,
    shape: ShapeOption = None,
    kv_dims: Annotated[
        str | None,
        typer.Option(
            "--kv-dims",
            help="Name the cache's dims when they cannot be told: past=NAME,new=NAME,total=NAME,batch=NAME.",
            metavar="ROLE=NAME,...",
        ),
    ] = None,
    precision: PrecisionOption = None,
    kv_precision: Annotated[
        str | None,
        typer.Option(
            "--kv-precision",
            help="The KV cache alone in this precision (fp16, fp8, int8...); weights and activations unchanged.",
        ),
    ] = None,
    weights: Annotated[
        str | None,
        typer.Option(
            help="Weight-only quantization of a float graph: int4 or int8 (group size 128, fp16 scales); "
            "activations and the KV cache unchanged.",
            metavar="int4|int8",
        ),
    ] = None,
    max_tpot: Annotated[
        float | None,
        typer.Option(
            "--max-tpot", help="Find the largest batch whose time per output token is at most MS.", metavar="MS"
        ),
    ] = None,
    max_ttft: Annotated[
        float | None,
        typer.Option(
            "--max-ttft", help="Find the largest batch whose time to first token is at most MS.", metavar="MS"
        ),
    ] = None,
    fusion: FusionOption = None,
    runtime: RuntimeOption = None,
    peak: PeakOption = False,
    time_model: TimeModelOption = None,
    output_format: Annotated[
        ReportFormat | None, typer.Option("--format", "-f", help="table, json, csv or html (default: from -o).")
    ] = None,
    output: OutputOption = None,
    debug: DebugOption = False,
) -> None:
    """Time to the first token, time per output token, tokens/s and the KV cache of a decoder on a platform."""
    from onnxroof.analysis.whatif import WhatIf
    from onnxroof.load.dims import parse_dim_bindings
    from onnxroof.report.llm_view import render_llm_csv, render_llm_html, render_llm_json, render_llm_table
    from onnxroof.studies.llm import llm as run_llm

    with exit_on_errors(debug):
        chosen = chosen_format(output_format, output, REPORT_SUFFIXES, ReportFormat.table)
        result = run_llm(
            model,
            platform,
            prompt=prompt,
            generate=generate,
            batch=batch,
            dims=parse_dim_bindings(dim or []),
            shapes=shape_options(shape),
            precision=precision,
            fusion=fusion,
            runtime=runtime,
            whatif=WhatIf(peak=True, time_model=time_model) if peak or time_model else None,
            kv_dims=parse_kv_dims(kv_dims),
            kv_precision=kv_precision,
            weights=weights,
            max_tpot_s=None if max_tpot is None else max_tpot / 1e3,
            max_ttft_s=None if max_ttft is None else max_ttft / 1e3,
        )
        renderers = {
            ReportFormat.json: render_llm_json,
            ReportFormat.csv: render_llm_csv,
            ReportFormat.html: render_llm_html,
        }
        if chosen is None or chosen == ReportFormat.table:
            emit(lambda console: render_llm_table(result, console), output)
        else:
            emit(renderers[chosen](result), output)
