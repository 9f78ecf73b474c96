"""The command line: typer's app, shared options, one module per command group; each command parses its
options, calls one library function and hands the result to a renderer.

A module registers its commands on :data:`~onnxroof.cli.common.app` when imported. :func:`main` imports only the
module of the command asked for (``onnxroof report ...`` never imports the ``audit`` or ``measure`` commands and
their libraries, and typer builds the options of that module's commands only); help, a bare ``onnxroof`` and an
unknown command import them all, in :data:`COMMAND_MODULES` order, the order ``--help`` lists them.
:mod:`onnxroof.cli.commands` is the app with every command, for tests and embedding. :func:`run` is the process's
entry point (the ``onnxroof`` script, ``python -m onnxroof``): :func:`main`, then the exit.

The command modules and :mod:`~onnxroof.cli.common` (the app's callback) do without ``from __future__ import
annotations``: typer reads a command's signature with ``inspect.signature(eval_str=True)`` three times while
building it, so string annotations were evaluated three times per parameter (104 ``eval`` calls for ``llm``);
evaluated once, where the function is defined, building the command (its module's import included, medians of 12
processes) takes report 9.5 -> 3.8 ms and llm 6.3 -> 3.5 ms, the listings' split included for report.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

__all__ = ["COMMAND_MODULES", "QUICK_EXIT", "VERSION_FLAGS", "load_commands", "main", "modules_for", "run"]

#: Each command's module under ``onnxroof.cli``, in the order ``--help`` lists the modules' commands.
COMMAND_MODULES: dict[str, str] = {
    "check": "gate",
    "diff": "gate",
    "plot": "graphs",
    "graph": "graphs",
    "calibrate": "measure",
    "profile": "measure",
    "report": "report",
    "platforms": "listings",
    "runtimes": "listings",
    "rules": "listings",
    "inspect": "listings",
    "sweep": "whatif",
    "compare": "whatif",
    "audit": "audit",
    "llm": "llm",
}

#: The command modules that run workloads of their own (onnxruntime, PyTorch): their BLAS is left as it is.
MEASURING = frozenset({"measure"})

#: The command modules that keep the cycle collector: those that measure, and ``audit``, whose process hosts
#: Dask's scheduler and event loop for the whole run (their garbage is theirs, not an analysis's).
COLLECTING = frozenset({"measure", "audit"})

#: The command modules whose process ends without the interpreter's teardown (:func:`run`): their commands run in
#: this one process and leave nothing to shut down once their output is written (no worker, thread, session or
#: open file of their own). Not ``gate`` (``check --jobs`` runs process pools or Dask), ``audit`` (Dask) or
#: ``measure`` (onnxruntime and PyTorch sessions): their shutdown is theirs.
QUICK_EXIT = frozenset({"report", "whatif", "llm", "graphs", "listings"})


#: The app's version flags: first on the line, they print the version and end the run before anything else.
VERSION_FLAGS = frozenset({"-V", "--version"})


def modules_for(args: Sequence[str]) -> tuple[str, ...]:
    """The command modules a run with arguments ``args`` needs: the named command's when the first argument
    names one (the app's own options, ``-h`` and ``-V``, come before the command and are flags, so the first
    argument is either an option or the command); none when it is a version flag (:data:`VERSION_FLAGS`: an
    eager option, processed first and ending the run, so ``onnxroof -V`` no longer imports every command and the
    libraries behind them); every module otherwise (help, a bare call, a typo: typer's answer lists every
    command)."""
    if args and args[0] in COMMAND_MODULES:
        return (COMMAND_MODULES[args[0]],)
    if args and args[0] in VERSION_FLAGS:
        return ()
    return tuple(dict.fromkeys(COMMAND_MODULES.values()))


def load_commands(modules: Sequence[str]) -> None:
    """Import the command modules ``modules`` (names under ``onnxroof.cli``), registering their commands."""
    for module in modules:
        importlib.import_module(f"onnxroof.cli.{module}")


def main(args: Sequence[str] | None = None) -> None:
    """Run the command line on ``args`` (default: the process's arguments), the process's way: the command's
    module alone is imported (:func:`modules_for`), numpy's BLAS keeps to one thread, and the run goes without the
    cycle collector.

    BLAS: numpy's OpenBLAS starts a thread per core when numpy is imported, and they spin a while; onnxroof's
    numpy work is elementwise over columns, no BLAS call is large enough to share out. ``OPENBLAS_NUM_THREADS=1``
    (set only when the environment does not say otherwise, and never for :data:`MEASURING` commands) spares that
    CPU. It must be set before numpy is imported, so this module imports the app (and with it onnx and numpy)
    only here.

    The collector (off for every command but :data:`COLLECTING`): an analysis leaves a few hundred objects of
    cyclic garbage whatever the model's size, so a command's memory does not grow for want of it, while its full
    passes over a large graph's live IR are a cost that grows with the graph. It is off from before the command's
    imports, whose allocations would run collections too. ``gc.freeze()`` at the end moves what is left out of the
    collection that interpreter shutdown still runs. What each of these saves is measured in docs/performance.md.
    The library itself never touches the collector or the environment."""
    chosen = list(sys.argv[1:] if args is None else args)
    modules = modules_for(chosen)
    if MEASURING.isdisjoint(modules):
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if COLLECTING.isdisjoint(modules):
        gc.disable()  # before the imports, whose allocations trigger collections too
    load_commands(modules)
    from onnxroof.cli.common import app

    try:
        app(args=chosen, prog_name="onnxroof")
    finally:
        gc.freeze()


def run() -> NoReturn:
    """The process's entry point (the ``onnxroof`` script, ``python -m onnxroof``): :func:`main` on the process's
    arguments, then the exit with its status.

    A command of the :data:`QUICK_EXIT` modules ends without the interpreter's teardown, once standard output and
    standard error are flushed (``os._exit``, as mypy ends its runs): the teardown frees every module and object
    one by one, and the process's memory is returned whole at exit anyway (docs/performance.md has the figures).
    Every other command, a status that is not a number (a message) and a flush that fails
    (a reader that closed the pipe) exit the usual way, as before."""
    quick = set(modules_for(sys.argv[1:])) <= QUICK_EXIT
    try:
        main()
    except SystemExit as exc:
        status = exc.code
    else:
        status = None
    if quick and (status is None or isinstance(status, int)):
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except OSError:  # the usual exit reports it, as it always did
            pass
        else:
            os._exit(status or 0)
    sys.exit(status)
