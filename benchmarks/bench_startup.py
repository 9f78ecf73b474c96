"""The fixed cost of one ``onnxroof`` command, apart from its work: what a run imports and how long typer takes to
build the command, per checkout, each figure from fresh processes.

``python benchmarks/bench_startup.py [--checkout PATH ...] [--repeats 9] [--only report,llm,compare]``

The commands are bench_stages' (``report`` and ``compare`` of the Llama-2-7B-shaped graph, ``llm`` of the same
decoder with a KV cache), run from bench_stages' import roots, so every checkout is imported from its own tree.

Per checkout and command, first one real run in process (``onnxroof.cli.main``) records the modules it imports, in
order (lazily imported ones included); then ``--repeats`` rounds, the checkouts interleaved, each a fresh child
that imports that list in four phases and times each (wall, and CPU with ``time.process_time``):

* floor: the modules bench_core's floor child imports (``onnx``, numpy, protobuf...), which the floor pays too;
* third party: the run's other modules outside onnxroof (typer and what it imports, tomllib...);
* onnxroof: onnxroof's own modules; within it, the time the standard library's ``dataclasses`` spends creating
  onnxroof's dataclasses (its class processing timed by a wrapper in the child: measurement only) and their count;
* command: typer building the app's command from the registered functions (``typer.main.get_command``).

Also, once per round: ``python -c pass`` (the interpreter and ``site``, an editable install's finder included).
Not measured here: the command's work, what happens at exit (bench_stages times whole runs).

Printed: per command and checkout the median of each phase (CPU ms; wall ms beside it) and the module and class
counts. Needs no network; the temporary folder is removed at exit.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import markdown_table
from bench_stages import Checkout, Measure, build_models, child_env, command, prepare_checkout, where_imported

COMMANDS = (Measure.REPORT, Measure.LLM, Measure.COMPARE)
PHASES = ("floor", "third_party", "onnxroof", "dataclasses", "command")

# Run the command line in process, then write the modules imported, in order, to the file named first.
_RECORD_SRC = """
import json, os, sys
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
out, args = sys.argv[1], sys.argv[2:]
from onnxroof.cli import main
try:
    main(args)
except SystemExit as exc:
    if exc.code not in (0, None):
        raise
with open(out, "w") as f:
    json.dump(list(sys.modules), f)
"""

# The floor child's imports (bench_core.FLOOR_SRC loads and infers with these).
_FLOOR_IMPORTS_SRC = """
import json, sys
import onnx, onnx.shape_inference
json.dump(list(sys.modules), open(sys.argv[1], "w"))
"""

# Import a recorded module list in phases; print each phase's wall and CPU seconds as JSON.
_PHASES_SRC = """
import dataclasses, importlib, json, os, sys, time
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
recorded, floor = json.load(open(sys.argv[1])), set(json.load(open(sys.argv[2])))
own = [m for m in recorded if m.split(".")[0] == "onnxroof"]
spent, classes = [0.0, 0.0], []
process_class = dataclasses._process_class

def timed(cls, *args, **kwargs):  # measurement only: the stdlib's own processing, timed
    wall, cpu = time.perf_counter(), time.process_time()
    made = process_class(cls, *args, **kwargs)
    spent[0] += time.perf_counter() - wall
    spent[1] += time.process_time() - cpu
    classes.append(made.__module__)
    return made

def load(names):
    for name in names:
        if name not in sys.modules:
            try:
                importlib.import_module(name)
            except ImportError:  # a module the run made under another name (__main__'s...)
                pass

figures, marks = {}, [(time.perf_counter(), time.process_time())]
def mark(phase):
    marks.append((time.perf_counter(), time.process_time()))
    figures[phase] = [marks[-1][0] - marks[-2][0], marks[-1][1] - marks[-2][1]]

load([m for m in recorded if m in floor and m not in own]); mark("floor")
load([m for m in recorded if m not in floor and m not in own]); mark("third_party")
dataclasses._process_class = timed
load(own); mark("onnxroof")
dataclasses._process_class = process_class
figures["dataclasses"] = list(spent)
import typer.main
from onnxroof.cli.common import app
typer.main.get_command(app); mark("command")
figures["modules"] = len(own)
figures["classes"] = sum(1 for m in classes if m.split(".")[0] == "onnxroof")
print(json.dumps(figures))
"""


def record_modules(checkout: Checkout, argv: list[str], out: Path, tmp: Path) -> None:
    """Run ``argv`` (``python -m onnxroof ...``) in process in a child and write the modules it imported to ``out``."""
    args = argv[argv.index("onnxroof") + 1 :]  # after `python -m onnxroof`
    done = subprocess.run(
        [sys.executable, "-c", _RECORD_SRC, str(out), *args],
        cwd=tmp,
        env=checkout.env(),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{checkout.root}: {' '.join(args[:2])} failed:\n{done.stderr[-2000:]}")


def run_phases(checkout: Checkout, recorded: Path, floor: Path, tmp: Path) -> dict[str, list[float] | int]:
    """One fresh child importing ``recorded`` in phases (module docstring); its figures."""
    done = subprocess.run(
        [sys.executable, "-c", _PHASES_SRC, str(recorded), str(floor)],
        cwd=tmp,
        env=checkout.env(),
        capture_output=True,
        text=True,
        check=True,
    )
    figures: dict[str, list[float] | int] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def interpreter(tmp: Path) -> tuple[float, float]:
    """``python -c pass``: wall and CPU seconds of the child (its rusage)."""
    launcher = (
        "import os, subprocess, sys, time\n"
        "t = time.perf_counter(); p = subprocess.Popen([sys.executable, '-c', 'pass'])\n"
        "_, _, ru = os.wait4(p.pid, 0)\n"
        "print(time.perf_counter() - t, ru.ru_utime + ru.ru_stime)\n"
    )
    done = subprocess.run([sys.executable, "-c", launcher], cwd=tmp, env=child_env(), capture_output=True, text=True)
    wall, cpu = (float(x) for x in done.stdout.split())
    return wall, cpu


def _ms(values: Sequence[float]) -> str:
    return f"{statistics.median(values) * 1000:.1f}"


def render(runs: dict[tuple[str, str], list[dict]], python_runs: list[tuple[float, float]], repeats: int) -> str:
    """The table of medians: CPU ms per phase, wall ms in brackets, module and class counts."""
    header = ["command", "checkout", *PHASES, "sum", "modules", "classes"]
    rows = []
    for (measure, label), figures in runs.items():
        cells = []
        for phase in PHASES:
            cpu = [f[phase][1] for f in figures]
            wall = [f[phase][0] for f in figures]
            cells.append(f"{_ms(cpu)} ({_ms(wall)})")
        total_cpu = [sum(f[p][1] for p in PHASES if p != "dataclasses") for f in figures]
        total_wall = [sum(f[p][0] for p in PHASES if p != "dataclasses") for f in figures]
        counts = [str(figures[0]["modules"]), str(figures[0]["classes"])]
        rows.append([measure, label, *cells, f"{_ms(total_cpu)} ({_ms(total_wall)})", *counts])
    python = f"`python -c pass`: CPU {_ms([c for _, c in python_runs])} ms (wall {_ms([w for w, _ in python_runs])})"
    note = (
        f"Medians of {repeats} fresh children per cell, CPU ms (wall ms); `dataclasses` is part of `onnxroof`, "
        f"`sum` adds the other four. {python}."
    )
    return note + "\n" + markdown_table(header, rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", action="append", type=Path, help="an onnxroof source tree (repeatable)")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--only", default="report,llm", help="commands: report, llm, compare (comma-separated)")
    options = parser.parse_args(argv)
    chosen = [Measure(name) for name in options.only.split(",")]
    if not set(chosen) <= set(COMMANDS):
        parser.error(f"--only: choose among {', '.join(COMMANDS)}")
    roots = options.checkout or [Path(__file__).resolve().parents[1]]
    with tempfile.TemporaryDirectory(prefix="bench_startup_") as folder:
        tmp = Path(folder)
        checkouts = [prepare_checkout(chr(ord("A") + i), root, tmp) for i, root in enumerate(roots)]
        for checkout in checkouts:
            where_imported(checkout, tmp)
        models = build_models(tmp, 0, with_chain=False)
        floor = tmp / "floor-modules.json"
        subprocess.run([sys.executable, "-c", _FLOOR_IMPORTS_SRC, str(floor)], cwd=tmp, env=child_env(), check=True)
        recorded = {}
        for measure in chosen:
            for checkout in checkouts:
                out = tmp / f"modules-{measure}-{checkout.label}.json"
                record_modules(checkout, command(measure, models, checkout, tmp), out, tmp)
                recorded[measure, checkout.label] = out
        runs: dict[tuple[str, str], list[dict]] = {(m.value, c.label): [] for m in chosen for c in checkouts}
        python_runs = []
        for _ in range(options.repeats):
            python_runs.append(interpreter(tmp))
            for measure in chosen:
                for checkout in checkouts:
                    figures = run_phases(checkout, recorded[measure, checkout.label], floor, tmp)
                    runs[measure.value, checkout.label].append(figures)
        for checkout in checkouts:
            print(f"{checkout.label}: {checkout.root} ({checkout.revision})")
        print(render(runs, python_runs, options.repeats))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
