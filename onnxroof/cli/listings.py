"""`platforms`, `runtimes`, `rules` and `inspect`: what onnxroof knows (the bundled platforms, runtimes and cost
rules) and what a model file holds, without analyzing it."""

from pathlib import Path
from typing import Annotated

import typer

from onnxroof.cli.common import (
    DebugOption,
    ListFormat,
    ListFormatOption,
    OutputOption,
    app,
    emit_listing,
    exit_on_errors,
)


@app.command()
def platforms(
    output_format: ListFormatOption = ListFormat.table,
    debug: DebugOption = False,
) -> None:
    """List the bundled platforms with their peaks, bandwidth and ridge points."""
    from onnxroof.platform.lookup import bundled_platforms
    from onnxroof.report.platforms import render_platforms_json, render_platforms_table

    with exit_on_errors(debug):
        found = bundled_platforms()
        emit_listing(output_format, lambda: render_platforms_json(found), lambda c: render_platforms_table(found, c))


@app.command()
def runtimes(
    output_format: ListFormatOption = ListFormat.table,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show every figure's source.")] = False,
    debug: DebugOption = False,
) -> None:
    """List the bundled runtime profiles: launch mode, KV-cache write, fusion profile, factors (sources: -v)."""
    from onnxroof.report.runtimes import render_runtimes_json, render_runtimes_table
    from onnxroof.runtime import bundled_runtimes

    with exit_on_errors(debug):
        found = bundled_runtimes()
        emit_listing(
            output_format, lambda: render_runtimes_json(found), lambda c: render_runtimes_table(found, c, verbose)
        )


@app.command()
def rules(
    op: Annotated[
        str | None,
        typer.Argument(help="One op type (any case, or DOMAIN::OpType): its rule in full.", show_default=False),
    ] = None,
    output_format: ListFormatOption = ListFormat.table,
    debug: DebugOption = False,
) -> None:
    """List every cost rule: op type, kind, exact or approximate, and its formula (OP: that op's rule in full)."""
    from onnxroof.report.platforms import render_rules_json, render_rules_table, select_rules
    from onnxroof.rules import REGISTRY

    with exit_on_errors(debug):
        chosen = select_rules(REGISTRY.all_rules(), op)
        full = op is not None
        emit_listing(
            output_format, lambda: render_rules_json(chosen), lambda c: render_rules_table(chosen, c, full=full)
        )


@app.command()
def inspect(
    model: Annotated[Path, typer.Argument(help="The ONNX model file.", show_default=False)],
    output_format: ListFormatOption = ListFormat.table,
    output: OutputOption = None,
    debug: DebugOption = False,
) -> None:
    """A quick look at MODEL: inputs and dims to bind, opsets, op types, parameters, external data, KV cache."""
    from onnxroof.report.inspect_view import render_inspect_console, render_inspect_json
    from onnxroof.studies.inspection import inspect_model

    with exit_on_errors(debug):
        found = inspect_model(model)
        emit_listing(
            output_format, lambda: render_inspect_json(found), lambda c: render_inspect_console(found, c), output
        )
