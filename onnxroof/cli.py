"""The command line: a thin layer that parses options, calls the library and hands results to a renderer.

Exit codes: 0 success; 2 bad input or usage (one line on stderr naming the file/node/field, no traceback
unless ``--debug``); 3 an internal error (a bug: please report it with ``--debug`` output).
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import sys
import tempfile
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from onnxroof.errors import OnnxroofError

app = typer.Typer(
    name="onnxroof",
    help="Where an ONNX model's time goes on a given chip, and why: per-operator costs on a roofline.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class ReportFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"
    html = "html"


class ListFormat(StrEnum):
    table = "table"
    json = "json"


_SUFFIX_FORMATS = {
    ".json": ReportFormat.json,
    ".csv": ReportFormat.csv,
    ".txt": ReportFormat.table,
    ".html": ReportFormat.html,
    ".htm": ReportFormat.html,
}


def _fail(message: str, code: int = 2) -> None:
    Console(stderr=True, highlight=False, soft_wrap=True).print(f"[bold red]error:[/] {message}", markup=True)
    raise typer.Exit(code)


@contextlib.contextmanager
def _errors(debug: bool) -> Iterator[None]:
    """Turn library errors into one line and exit 2; unexpected ones into one line and exit 3."""
    try:
        yield
    except OnnxroofError as exc:
        if debug:
            raise
        _fail(str(exc).replace("[", r"\["), 2)
    except (typer.Exit, typer.Abort):
        raise
    except Exception as exc:
        if debug:
            raise
        _fail(
            f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)".replace("[", r"\["), 3
        )


def write_atomically(path: Path, content: str | bytes) -> None:
    """Write ``content`` (text as UTF-8, or bytes) to ``path`` so that a failure never leaves a partial file.

    A regular file (new or existing) is written through a temporary file in the same folder and renamed
    over the target; a new file gets the usual umask permissions, an existing one keeps its mode. Anything
    that is not a regular file (``/dev/null``, a FIFO, ``/dev/stdout``) is written directly: renaming over
    it would replace the device itself.
    """
    path = path.expanduser()
    if path.is_dir():
        raise OnnxroofError(f"{path}: is a folder; give a file name to write to")
    data = content.encode("utf-8") if isinstance(content, str) else content
    if path.exists() and not path.is_file():
        with open(path, "wb") as out:
            out.write(data)
        return
    if not path.parent.exists():
        raise OnnxroofError(f"{path}: folder '{path.parent}' does not exist")
    mode = stat.S_IMODE(path.stat().st_mode) if path.exists() else 0o666 & ~_umask()
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current


def _emit(text_or_render: str | Callable[[Console], None], output: Path | None) -> None:
    if isinstance(text_or_render, str):
        if output is None:
            sys.stdout.write(text_or_render)
        else:
            write_atomically(output, text_or_render)
        return
    if output is None:
        text_or_render(Console())
        return
    buffer = io.StringIO()
    text_or_render(Console(file=buffer, width=140, color_system=None, force_terminal=False))
    write_atomically(output, buffer.getvalue())


PlatformOption = Annotated[
    str,
    typer.Option(
        "--platform", "-p", help="A bundled platform name (see `onnxroof platforms`) or a path to a TOML file."
    ),
]
DimOption = Annotated[
    list[str] | None,
    typer.Option(
        "--dim", "-d", help="Bind a symbolic input dim: NAME=VALUE. Repeat for several.", metavar="NAME=VALUE"
    ),
]
DebugOption = Annotated[bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")]
FusionOption = Annotated[
    str | None,
    typer.Option("--fusion", help="Fusion profile: ort-cpu, tensorrt or none (default: the platform's)."),
]
OutputOption = Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.")]
PrecisionOption = Annotated[
    str | None,
    typer.Option(
        help="Re-cost as if run in this precision (fp32, fp16, bf16, int8...): float tensors take its element "
        "size, every node its peak."
    ),
]
DensityOption = Annotated[
    list[str] | None,
    typer.Option(
        "--density",
        help="Uniform density (share of non-zeros) of weight, input or output tensors: KIND=VALUE. Repeatable.",
        metavar="KIND=VALUE",
    ),
]
DensityFileOption = Annotated[
    Path | None,
    typer.Option("--density-file", help='Per-layer densities: TOML/JSON {"layers": {"<node>": {"weight": 0.5}}}.'),
]
CompressOption = Annotated[
    bool, typer.Option("--compress-mem", help="Sparse tensors are stored compressed: bytes scale with density.")
]
SkipOption = Annotated[
    bool,
    typer.Option("--skip-compute", help="Skip zero MACs as the platform can (2:4 structured, unstructured, none)."),
]


@app.command()
def report(
    model: Annotated[Path, typer.Argument(help="The ONNX model file.", show_default=False)],
    platform: PlatformOption = "xavier",
    dim: DimOption = None,
    precision: PrecisionOption = None,
    density: DensityOption = None,
    density_file: DensityFileOption = None,
    compress_mem: CompressOption = False,
    skip_compute: SkipOption = False,
    output_format: Annotated[
        ReportFormat | None,
        typer.Option("--format", "-f", help="table (default), json or csv; default from -o's suffix."),
    ] = None,
    output: OutputOption = None,
    top: Annotated[int, typer.Option(help="How many nodes the table's top list shows.", min=1)] = 15,
    strict: Annotated[
        bool, typer.Option(help="Fail (exit 2) if any node is unsupported or has no static shape.")
    ] = False,
    fusion: FusionOption = None,
    explain_fusion: Annotated[
        bool, typer.Option("--explain-fusion", help="List every fusion candidate that did not fuse, and why.")
    ] = False,
    profile: Annotated[
        Path | None,
        typer.Option(
            "--profile",
            help="A JSON file from `onnxroof profile --format json`: measured times beside the prediction "
            "(html: chart and table; json: a `measured` section; the table and csv ignore them).",
        ),
    ] = None,
    debug: DebugOption = False,
) -> None:
    """Cost every operator of MODEL and place it on the platform's roofline."""
    from onnxroof.analysis import analyze
    from onnxroof.load import parse_dim_bindings
    from onnxroof.measured_overlay import load_overlay, render_measured_json
    from onnxroof.report.console import render_console, render_warnings
    from onnxroof.report.data import render_csv, render_json
    from onnxroof.whatif import whatif_options

    with _errors(debug):
        chosen = output_format or (_SUFFIX_FORMATS.get(output.suffix.lower()) if output else None) or ReportFormat.table
        analysis = analyze(
            model,
            platform=platform,
            dims=parse_dim_bindings(dim or []),
            precision=precision,
            strict=strict,
            fusion=fusion,
            **whatif_options(density, density_file, compress_mem, skip_compute),
        )
        measured = load_overlay(profile, analysis) if profile is not None else None
        warnings = analysis.warnings + (measured.warnings if measured is not None else ())
        render_warnings(warnings, Console(stderr=True, highlight=False))
        if chosen is ReportFormat.json:
            _emit(render_json(analysis) if measured is None else render_measured_json(analysis, measured), output)
        elif chosen is ReportFormat.csv:
            _emit(render_csv(analysis), output)
        elif chosen is ReportFormat.html:
            from onnxroof.report.html import render_html

            _emit(render_html(analysis, measured), output)
        else:
            _emit(lambda console: render_console(analysis, console, top, explain_fusion), output)


@app.command()
def platforms(
    output_format: Annotated[ListFormat, typer.Option("--format", "-f", help="table or json.")] = ListFormat.table,
    debug: DebugOption = False,
) -> None:
    """List the bundled platforms with their peaks, bandwidth and ridge points."""
    from onnxroof.platform import bundled_platforms
    from onnxroof.report.platforms import render_platforms_json, render_platforms_table

    with _errors(debug):
        found = bundled_platforms()
        if output_format is ListFormat.json:
            _emit(render_platforms_json(found), None)
        else:
            _emit(lambda console: render_platforms_table(found, console), None)


@app.command()
def rules(debug: DebugOption = False) -> None:
    """List every cost rule: op type, kind, exact or approximate, and its formula."""
    from onnxroof.registry import all_rules
    from onnxroof.report.platforms import render_rules_table

    with _errors(debug):
        _emit(lambda console: render_rules_table(all_rules(), console), None)


# Command groups that live in their own modules register themselves on `app` when imported.
from onnxroof import cli_gate, cli_measure, cli_reports, cli_whatif  # noqa: E402, F401


def main() -> None:
    app()
