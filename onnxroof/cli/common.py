"""The command line: a thin layer that parses options, calls the library and hands results to a renderer.

Exit codes: 0 success; 2 bad input or usage (one line on stderr naming the file/node/field, no traceback
unless ``--debug``); 3 an internal error (a bug: please report it with ``--debug`` output).
"""

import contextlib
import io
import os
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from typer.core import TyperGroup

try:  # recent typer carries its own copy of click
    from typer._click import exceptions as click_errors
    from typer._click.globals import get_current_context
except ImportError:  # pragma: no cover - older typer runs on click itself
    from click import exceptions as click_errors  # type: ignore[no-redef]
    from click.globals import get_current_context  # type: ignore[no-redef]

from onnxroof.core.errors import OnnxroofError
from onnxroof.core.files import write_atomically
from onnxroof.core.profiles import FusionProfile
from onnxroof.core.states import TimeModelKind
from onnxroof.core.version import __version__

# No `from __future__ import annotations` here either: typer reads the app callback's signature as it does the
# commands' (cli/__init__.py); rich's Console, imported on first use, is named in quotes.
if TYPE_CHECKING:
    from rich.console import Console

DEFAULT_PLATFORM = "xavier"
_DEFAULTED = "onnxroof.default_platform"
"""``ctx.meta`` key: the platform a command fell back to when ``--platform`` was not given."""


def _quiet_stdout() -> None:
    """After a closed pipe: point standard output at /dev/null so the interpreter's last flush cannot fail."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


class OnnxroofGroup(TyperGroup):
    """The command group, with the conventions of the other errors: a usage error is one ``error:`` line
    naming the command and exit 2 (not a framed box), and a closed pipe (``onnxroof report ... | head -1``)
    ends the run quietly with exit 0."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        def run() -> Any:
            return super(OnnxroofGroup, self).main(
                args, prog_name, complete_var, False, windows_expand_args=windows_expand_args, **extra
            )

        if not standalone_mode:
            return run()
        try:
            code = run()
            sys.stdout.flush()
        except click_errors.NoArgsIsHelpError as exc:  # bare `onnxroof`: typer has printed the help
            sys.exit(exc.exit_code)
        except click_errors.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "onnxroof"
            message = " ".join(exc.format_message().split()).replace("Value error, ", "")
            _usage_line(where, message)
            sys.exit(2)
        except click_errors.ClickException as exc:
            _usage_line("onnxroof", " ".join(exc.format_message().split()))
            sys.exit(exc.exit_code)
        except typer.Abort:
            _usage_line("onnxroof", "aborted")
            sys.exit(1)
        except BrokenPipeError:
            _quiet_stdout()
            sys.exit(0)
        except SystemExit as exc:  # typer's and rich's answer to a closed pipe is exit 1
            if isinstance(exc.__context__, BrokenPipeError):
                _quiet_stdout()
                sys.exit(0)
            raise
        sys.exit(code if isinstance(code, int) else 0)


def error_console() -> "Console":
    """A rich Console on standard error for one-line messages. rich is imported here, on first use, as by
    :func:`emit`'s terminal path: a run that writes its result to a file and has nothing to say on stderr
    never loads it (~23 ms of the 7B report's start-up)."""
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def _usage_line(where: str, message: str) -> None:
    text = f"{where}: {message} (see {where} -h)".replace("[", r"\[")
    error_console().print(f"[bold red]error:[/] {text}", markup=True)


app = typer.Typer(
    name="onnxroof",
    help="Where an ONNX model's time goes on a given chip, and why: per-operator costs on a roofline.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    cls=OnnxroofGroup,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if value:
        sys.stdout.write(f"onnxroof {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", "-V", help="Print onnxroof's version and exit.", callback=_show_version, is_eager=True
        ),
    ] = False,
) -> None:
    """Where an ONNX model's time goes on a given chip, and why: per-operator costs on a roofline."""


class ReportFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"
    html = "html"


class ListFormat(StrEnum):
    table = "table"
    json = "json"


REPORT_SUFFIXES = {
    ".json": ReportFormat.json,
    ".csv": ReportFormat.csv,
    ".txt": ReportFormat.table,
    ".html": ReportFormat.html,
    ".htm": ReportFormat.html,
}


_Format = TypeVar("_Format")


def chosen_format(
    given: _Format | None, output: Path | None, suffixes: Mapping[str, _Format], default: _Format | None = None
) -> _Format | None:
    """The output format: the one given (``--format``), else the one ``output``'s suffix names, else ``default``."""
    if given is not None:
        return given
    named = suffixes.get(output.suffix.lower()) if output is not None else None
    return named if named is not None else default


def fail(message: str, code: int = 2) -> None:
    error_console().print(f"[bold red]error:[/] {message}", markup=True)
    raise typer.Exit(code)


@contextlib.contextmanager
def exit_on_errors(debug: bool) -> Iterator[None]:
    """Turn library errors into one line and exit 2; unexpected ones into one line and exit 3. On success, a
    note on stderr names the platform used when ``--platform`` was left to its default."""
    try:
        yield
    except BrokenPipeError:  # the reader went away (`| head`): not an error (OnnxroofGroup ends the run)
        raise
    except OnnxroofError as exc:
        if debug:
            raise
        fail(str(exc).replace("[", r"\["), 2)
    except (typer.Exit, typer.Abort):
        raise
    except OSError as exc:  # the environment (a full disk, a vanished file), not a bug: exit 2
        if debug:
            raise
        where = f"{exc.filename}: " if exc.filename else ""
        fail(f"{where}{exc.strerror or exc}".replace("[", r"\["), 2)
    except Exception as exc:
        if debug:
            raise
        fail(
            f"internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)".replace("[", r"\["), 3
        )
    else:
        note_default_platform()


def note_default_platform() -> None:
    """One stderr line saying which platform a command used when ``--platform`` was not given (once a run)."""
    ctx = get_current_context(silent=True)
    name = ctx.meta.pop(_DEFAULTED, None) if ctx is not None else None
    if name is not None:
        error_console().print(
            f"note: platform {name} (the default; choose one with --platform, list them with `onnxroof platforms`)",
            markup=False,
        )


def default_platforms(given: list[str] | None) -> list[str]:
    """A repeatable ``--platform``'s value, or the default platform (noted on success) when none was given."""
    if given:
        return list(given)
    ctx = get_current_context(silent=True)
    if ctx is not None:
        ctx.meta[_DEFAULTED] = DEFAULT_PLATFORM
    return [DEFAULT_PLATFORM]


def platform_unused() -> None:
    """The command did not use ``--platform`` after all (``diff`` of two JSON documents): no note about it."""
    ctx = get_current_context(silent=True)
    if ctx is not None:
        ctx.meta.pop(_DEFAULTED, None)


def _record_default_platform(ctx: typer.Context, param: typer.CallbackParam, value: str) -> str:
    """``--platform``'s callback: remember when the value is the default, for :func:`note_default_platform`."""
    source = ctx.get_parameter_source(param.name) if param.name else None
    if source is not None and source.name in ("DEFAULT", "DEFAULT_MAP"):
        ctx.meta[_DEFAULTED] = value
    return value


def emit(text_or_render: str | Iterator[str] | Callable[["Console"], None], output: Path | None) -> None:
    """Write a result: text, text in pieces (a file is written as they come; standard output gets them whole,
    so a failure while making them prints nothing), or a Rich render."""
    if isinstance(text_or_render, Iterator):
        text_or_render = text_or_render if output is not None else "".join(text_or_render)
    if isinstance(text_or_render, str | Iterator):
        if output is None:
            sys.stdout.write(text_or_render)  # type: ignore[arg-type]
        else:
            write_atomically(output, text_or_render)
        return
    from rich.console import Console

    if output is None:
        text_or_render(Console())
        return
    buffer = io.StringIO()
    text_or_render(Console(file=buffer, width=140, color_system=None, force_terminal=False))
    write_atomically(output, buffer.getvalue())


def emit_listing(
    output_format: ListFormat,
    as_json: Callable[[], str],
    as_table: Callable[["Console"], None],
    output: Path | None = None,
) -> None:
    """A listing (``platforms``, ``runtimes``, ``rules``, ``inspect``) written as ``output_format`` asks: the text
    ``as_json`` makes, or the Rich table ``as_table`` renders (:func:`emit`)."""
    emit(as_json() if output_format is ListFormat.json else as_table, output)


PlatformOption = Annotated[
    str,
    typer.Option(
        "--platform",
        "-p",
        help="A bundled platform name (see `onnxroof platforms`) or a path to a TOML file.",
        callback=_record_default_platform,
    ),
]
DimOption = Annotated[
    list[str] | None,
    typer.Option(
        "--dim", "-d", help="Bind a symbolic input dim: NAME=VALUE. Repeat for several.", metavar="NAME=VALUE"
    ),
]
ShapeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--shape",
        help="Bind a whole input's shape: INPUT=1x3x224x224, or trtexec's INPUT:1x3x224x224 and its comma-separated "
        "list (ids:1x128,mask:1x128). Repeat for several inputs; a value that contradicts a --dim is an error.",
        metavar="INPUT=DIMxDIM...",
    ),
]
DebugOption = Annotated[bool, typer.Option("--debug", help="Show tracebacks instead of one-line errors.")]
FusionOption = Annotated[
    str | None,
    typer.Option(
        "--fusion",
        help=f"Fusion profile: {', '.join(FusionProfile)} (default: the runtime's); without --runtime, a profile "
        f"named like a runtime picks it ({FusionProfile.TENSORRT_LLM}: TensorRT with CUDA graphs, one launch per run).",
    ),
]
RuntimeOption = Annotated[
    str | None,
    typer.Option(
        "--runtime",
        help="Runtime profile: a bundled name (see `onnxroof runtimes`) or a path to a TOML file (default: the "
        "platform's). Sets launches (per kernel or one CUDA-graph replay), KV-cache writes, efficiency factors and "
        "the fusion profile (--fusion overrides it).",
        metavar="NAME|PATH.toml",
    ),
]
ListFormatOption = Annotated[ListFormat, typer.Option("--format", "-f", help="table or json.")]
OutputOption = Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.")]
PrecisionOption = Annotated[
    str | None,
    typer.Option(
        help="Re-cost as if run in this precision (fp32, fp16, bf16, int8...): float tensors take its element "
        "size, every node its peak."
    ),
]
PeakPrecisionOption = Annotated[
    str | None, typer.Option(help="Cost every node at this precision's peak (fp32, fp16, bf16, int8...).")
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
PeakOption = Annotated[
    bool,
    typer.Option(
        "--peak",
        help="Draw the roofline from the datasheet peaks and bandwidth as given, not the sustained shares of them.",
    ),
]
TimeModelOption = Annotated[
    TimeModelKind | None,
    typer.Option(
        "--time-model",
        help="How kernels become time: gpu (tiles, waves, alignment, launches; the default on GPU platforms) or "
        "roofline (max of compute and memory time: the lower bound; the default elsewhere).",
    ),
]
SkipOption = Annotated[
    bool,
    typer.Option("--skip-compute", help="Skip zero MACs as the platform can (2:4 structured, unstructured, none)."),
]


def shape_options(shape: list[str] | None) -> dict[str, tuple[int, ...]]:
    """``--shape`` items parsed (:func:`~onnxroof.load.dims.parse_shape_bindings`); empty when none."""
    from onnxroof.load.dims import parse_shape_bindings

    return parse_shape_bindings(shape or [])


@contextlib.contextmanager
def progress_bar(label: str, *, paths: bool = True) -> Iterator[Callable[[str, int, int], None]]:
    """A progress bar on a terminal's stderr (nothing when stderr is not a terminal), driven by the callback
    it yields: ``(item, items done, items in all)``. With ``paths`` the item is a file path, shown by its name;
    otherwise it is shown as given (calibrate's "peak fp32 MatMul")."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = Console(stderr=True)
    progress = Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    with progress:
        bar = progress.add_task("", total=None)

        def advance(item: str, done: int, total: int) -> None:
            progress.update(bar, completed=done, total=total, description=Path(item).name if paths else item)

        yield advance
