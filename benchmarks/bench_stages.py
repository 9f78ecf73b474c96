"""Issue 21's speed targets (a staged core), for one or more onnxroof checkouts measured in the same run.

``python benchmarks/bench_stages.py [--checkout PATH ...] [--repeats 3] [--only report,compare,llm,floor,chain]
[--chain-nodes 1000000] [--json PATH]``

Each ``--checkout`` is a source tree of onnxroof (default: this repository), e.g. ``--checkout /work/before
--checkout .`` for before and after. Measured per checkout, each run a FRESH child process:

* report: ``python -m onnxroof report 7B.onnx --platform a100 --dim batch=1 --dim seq=2048 --format json -o
  FILE``, the Llama-2-7B-shaped decoder of :mod:`llama_shaped` (sparse external weights, nothing allocated) with
  bench_core's dims;
* compare: ``python -m onnxroof compare 7B.onnx -p P1 -p P2 ... --dim ... --format json -o FILE`` on every
  bundled platform (the stems of the checkout's ``platforms/*.toml``);
* llm: ``python -m onnxroof llm 7B-kv.onnx -p a100 --prompt 2048 --generate 4096 --format json`` on the same
  decoder built with a KV cache, as bench_llm runs it;
* chain: bench_scale's million-node chain (``--chain-nodes`` elementwise ops, each ``[1, 16]``) through
  ``onnxroof.analyze(path, platform="xavier")`` in ``python -c``; ``analyze()`` is timed inside the child, as
  bench_scale does.

Once per round, shared by all checkouts: floor, bench_core's ``python -c`` doing ``onnx.load(path,
load_external_data=False)``, binding the dims on the graph inputs and ``onnx.shape_inference.infer_shapes(model,
data_prop=True)`` on 7B.onnx.

Which onnxroof runs: every child starts in the temporary folder (``python -c`` and ``-m`` put the working
directory first on ``sys.path``, where a checkout's own ``onnxroof/`` would win) with ``PYTHONPATH`` naming an
import root made for the checkout in that folder: ``onnxroof/`` there holds links to the entries of the
checkout's ``onnxroof/`` plus the subpackages that the checkout's pyproject maps from elsewhere
(``package-dir``, e.g. ``onnxroof.platforms = platforms``). ``PYTHONPATH=<checkout>`` alone would import the
checkout's package but take ``onnxroof.platforms`` from whatever onnxroof is installed (an editable install's
finder supplies it), not from the checkout. One child per checkout prints where ``onnxroof`` and those
subpackages were imported from; the run stops if any lies outside the checkout.

Rounds: one untimed ``report`` per checkout (page cache, bytecode), then ``--repeats`` rounds, each running
the measures in the order floor, report, compare, llm, chain and every measure for the checkouts in turn (A, B,
A, B...), so that drift on a shared machine hits all alike. Wall time is taken in the parent with
``time.perf_counter`` from spawn to reap; peak RSS and CPU time (user + system) are the rusage of that one child,
read with ``os.wait4(pid)`` (bench_core's ``run_child``).

Printed: per measure and checkout the median (min–max) of the repeats, the median CPU time and the peak RSS
(median, max); then per checkout the ratios and targets of issue 21, each with PASS or FAIL, from the medians:

* compare / report ≤ 2 (wall);
* llm ≤ 1.0 s (wall);
* chain: ``analyze()`` ≤ 30 s and peak RSS ≤ 1.5 GB (worst run);
* report / floor ≤ 2 (wall).

``--json PATH`` writes every figure of every run. MB and GB are 10^6 and 10^9 bytes. Needs no network; the
temporary folder is removed at exit.
"""

from __future__ import annotations

import argparse
import json
import os
import platform as host
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import FLOOR_SRC, LLAMA_DIMS, describe, dim_args, markdown_table, report_args, run_child
from bench_llm import llm_command
from bench_scale import MEASURE_SRC, chain_model
from llama_shaped import build_llama_shaped

REPO = Path(__file__).resolve().parents[1]


class Measure(StrEnum):
    """What is timed; the members' order is the order of a round."""

    FLOOR = "floor"
    REPORT = "report"
    COMPARE = "compare"
    LLM = "llm"
    CHAIN = "chain"


MEASURES = tuple(Measure)
PLATFORM = "a100"
PROMPT, GENERATE = 2048, 4096
CHAIN_NODES = 1_000_000

TARGET_COMPARE_OVER_REPORT = 2.0
TARGET_LLM_S = 1.0
TARGET_CHAIN_S = 30.0
TARGET_CHAIN_PEAK_B = 1.5e9
TARGET_REPORT_OVER_FLOOR = 2.0

# Where each module named on the command line was imported from, resolved through the links: a package's
# folder, a module's file.
_WHERE_SRC = """
import importlib, json, os, sys
where = {}
for name in sys.argv[1:]:
    module = importlib.import_module(name)
    where[name] = os.path.realpath(module.__file__ or next(iter(module.__path__)))
print(json.dumps(where))
"""


@dataclass(frozen=True)
class Checkout:
    """One onnxroof source tree: its label in the tables, its root and the import root made for it."""

    label: str
    root: Path
    revision: str
    imports: Path
    platforms: tuple[str, ...]

    def env(self) -> dict[str, str]:
        """The environment of its children (:func:`child_env`) with ``PYTHONPATH`` = its import root, then any
        inherited entries."""
        inherited = os.environ.get("PYTHONPATH")
        return {**child_env(), "PYTHONPATH": os.pathsep.join(filter(None, [str(self.imports), inherited]))}


def child_env() -> dict[str, str]:
    """Ours, less ``PYTHONDONTWRITEBYTECODE``: a child may write the bytecode it compiles, so that the untimed first
    round leaves it cached as an installed package has it (pip compiles a package's modules when it installs them).
    With the variable set (as some sandboxes and CI images do) every timed run recompiled onnxroof's ~120 modules:
    0.16 s of each ``report``, none of it onnxroof's work."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


@dataclass
class Runs:
    """The figures of one measure's runs: wall and CPU seconds, peak RSS in KiB (``ru_maxrss``); for the chain
    also ``analyze()`` seconds and ``VmHWM`` KiB as the child reports them."""

    wall_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    peak_kb: list[int] = field(default_factory=list)
    analyze_s: list[float] = field(default_factory=list)
    vmhwm_kb: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Target:
    """One of issue 21's targets for one checkout: ``value <= limit`` passes; ``value`` None when not measured.
    ``cpu`` is the same figure from CPU time (user + system), which load on a shared machine disturbs less:
    shown beside it, not judged; None where the target is not a time."""

    name: str
    checkout: str
    value: float | None
    limit: float
    unit: str
    cpu: float | None = None

    @property
    def passed(self) -> bool | None:
        return None if self.value is None else self.value <= self.limit


def _revision(root: Path) -> str:
    """``git describe --always --dirty`` of the checkout, or ``?`` where it is not a git work tree."""
    done = subprocess.run(
        ["git", "-C", str(root), "describe", "--always", "--dirty"], capture_output=True, text=True, check=False
    )
    return done.stdout.strip() if done.returncode == 0 else "?"


def mapped_subpackages(root: Path) -> dict[str, Path]:
    """The subpackages of ``onnxroof`` that the checkout's pyproject maps from another folder (``package-dir``)."""
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    package_dir = pyproject.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    return {
        name: root / folder
        for name, folder in package_dir.items()
        if name.startswith("onnxroof.") and name.count(".") == 1
    }


def make_import_root(root: Path, folder: Path) -> Path:
    """Make ``folder/onnxroof`` a package of links to ``root/onnxroof``'s entries and to the subpackages its
    pyproject maps from elsewhere; return ``folder``, the entry for ``PYTHONPATH``."""
    package = folder / "onnxroof"
    package.mkdir(parents=True)
    for entry in (root / "onnxroof").iterdir():
        (package / entry.name).symlink_to(entry.absolute())
    for name, source in mapped_subpackages(root).items():
        link = package / name.split(".")[1]
        if not link.exists():
            link.symlink_to(source.absolute())
    return folder


def prepare_checkout(label: str, root: Path, tmp: Path) -> Checkout:
    """Check that ``root`` is an onnxroof source tree, make its import root and list its bundled platforms."""
    root = root.resolve()
    if not (root / "onnxroof" / "__init__.py").is_file() or not (root / "pyproject.toml").is_file():
        raise SystemExit(f"--checkout {root}: not an onnxroof source tree (no onnxroof/__init__.py, pyproject.toml)")
    platforms = tuple(sorted(p.stem for p in (root / "platforms").glob("*.toml")))
    if not platforms:
        raise SystemExit(f"--checkout {root}: no platforms/*.toml")
    imports = make_import_root(root, tmp / f"imports-{label}")
    return Checkout(label, root, _revision(root), imports, platforms)


def where_imported(checkout: Checkout, tmp: Path) -> dict[str, str]:
    """Where a child with the checkout's environment imports ``onnxroof`` and its mapped subpackages from;
    raise SystemExit if any of them lies outside the checkout."""
    names = ["onnxroof", *mapped_subpackages(checkout.root)]
    done = subprocess.run(
        [sys.executable, "-c", _WHERE_SRC, *names],
        capture_output=True,
        text=True,
        cwd=tmp,
        env=checkout.env(),
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"checkout {checkout.root}: importing onnxroof failed:\n{done.stderr[-2000:]}")
    where: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    outside = {name: path for name, path in where.items() if not Path(path).is_relative_to(checkout.root)}
    if outside:
        raise SystemExit(f"checkout {checkout.root}: imported from elsewhere: {outside}")
    return where


@dataclass(frozen=True)
class Models:
    """The files measured: the 7B-shaped graph and its dims, the same with a KV cache, the chain."""

    llama: Path
    llama_dims: dict[str, int]
    llama_nodes: int
    llama_kv: Path
    chain: Path | None


def build_models(tmp: Path, chain_nodes: int, with_chain: bool) -> Models:
    """Write the 7B-shaped graph, its KV-cache variant (sparse weights) and, ``with_chain``, the chain to ``tmp``."""
    llama = describe("llama-7B-shaped", build_llama_shaped(tmp / "7B.onnx"), LLAMA_DIMS)
    llama_kv = build_llama_shaped(tmp / "7B-kv.onnx", kv_cache=True)
    chain = chain_model(tmp, chain_nodes) if with_chain else None
    return Models(llama.path, llama.dims, llama.nodes, llama_kv, chain)


def command(measure: Measure, models: Models, checkout: Checkout | None, tmp: Path) -> list[str]:
    """The child's command line for ``measure`` (``checkout`` None for the floor)."""
    onnxroof = [sys.executable, "-m", "onnxroof"]
    label = checkout.label if checkout else ""
    if measure is Measure.FLOOR:
        return [sys.executable, "-c", FLOOR_SRC, str(models.llama), json.dumps(models.llama_dims)]
    if measure is Measure.REPORT:
        return [*onnxroof, *report_args(models.llama, PLATFORM, models.llama_dims, tmp / f"report-{label}.json")]
    if measure is Measure.COMPARE:
        assert checkout is not None
        platforms = [arg for name in checkout.platforms for arg in ("-p", name)]
        out = ["--format", "json", "-o", str(tmp / f"compare-{label}.json")]
        return [*onnxroof, "compare", str(models.llama), *platforms, *dim_args(models.llama_dims), *out]
    if measure is Measure.LLM:
        return llm_command(models.llama_kv, PLATFORM, PROMPT, GENERATE)
    if measure is Measure.CHAIN:
        assert models.chain is not None
        return [sys.executable, "-c", MEASURE_SRC, str(models.chain)]
    raise AssertionError(measure)


def run_once(measure: Measure, models: Models, checkout: Checkout | None, tmp: Path, runs: Runs) -> float:
    """Run ``measure`` once in a fresh child in ``tmp`` (the checkout's environment, or ours for the floor),
    append its figures to ``runs`` and return its wall seconds."""
    stdout = tmp / "stdout.txt"
    env = checkout.env() if checkout else child_env()
    wall, peak, cpu = run_child(
        command(measure, models, checkout, tmp), tmp / "stderr.txt", cwd=tmp, env=env, stdout=stdout
    )
    runs.wall_s.append(wall)
    runs.cpu_s.append(cpu)
    runs.peak_kb.append(peak)
    if measure is Measure.LLM:
        json.loads(stdout.read_text(encoding="utf-8"))  # the document came out whole
    if measure is Measure.CHAIN:
        figures = json.loads(stdout.read_text(encoding="utf-8").strip().splitlines()[-1])
        runs.analyze_s.append(figures["seconds"])
        runs.vmhwm_kb.append(figures["peak_kb"])
    return wall


@dataclass
class Results:
    """Every run's figures: ``per_checkout[label][measure]`` and the floor's."""

    per_checkout: dict[str, dict[Measure, Runs]]
    floor: Runs = field(default_factory=Runs)


def measure_all(
    measures: Sequence[Measure],
    models: Models,
    checkouts: Sequence[Checkout],
    repeats: int,
    tmp: Path,
    progress: Callable[[str], None],
) -> Results:
    """One untimed report per checkout, then ``repeats`` rounds: the floor once, each other measure for the
    checkouts in turn."""
    results = Results({c.label: {m: Runs() for m in measures if m is not Measure.FLOOR} for c in checkouts})
    if Measure.REPORT in measures or Measure.COMPARE in measures:
        for checkout in checkouts:
            run_once(Measure.REPORT, models, checkout, tmp, Runs())
    for round_ in range(1, repeats + 1):
        for measure in measures:
            if measure is Measure.FLOOR:
                wall = run_once(Measure.FLOOR, models, None, tmp, results.floor)
                progress(f"  [{round_}/{repeats}] floor: {wall:.2f} s")
                continue
            for checkout in checkouts:
                wall = run_once(measure, models, checkout, tmp, results.per_checkout[checkout.label][measure])
                progress(f"  [{round_}/{repeats}] {measure} {checkout.label}: {wall:.2f} s")
    return results


def _med(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _ratio(top: Sequence[float], bottom: Sequence[float]) -> float | None:
    a, b = _med(top), _med(bottom)
    return None if a is None or b is None else a / b


def targets(results: Results, checkouts: Sequence[Checkout]) -> list[Target]:
    """Issue 21's targets per checkout, from the medians (the chain's memory: its worst run)."""
    out = []
    for checkout in checkouts:
        runs = results.per_checkout[checkout.label]
        empty = Runs()
        report, compare = runs.get(Measure.REPORT, empty), runs.get(Measure.COMPARE, empty)
        llm, chain = runs.get(Measure.LLM, empty), runs.get(Measure.CHAIN, empty)
        peak = max(chain.peak_kb) * 1024 if chain.peak_kb else None
        label = checkout.label
        out += [
            Target("compare / report (wall)", label, _ratio(compare.wall_s, report.wall_s),
                   TARGET_COMPARE_OVER_REPORT, "×", _ratio(compare.cpu_s, report.cpu_s)),
            Target("llm 7B KV (wall)", label, _med(llm.wall_s), TARGET_LLM_S, "s", _med(llm.cpu_s)),
            Target("chain analyze()", label, _med(chain.analyze_s), TARGET_CHAIN_S, "s"),
            Target("chain peak RSS (worst)", label, None if peak is None else peak / 1e9, TARGET_CHAIN_PEAK_B / 1e9,
                   "GB"),
            Target("report / floor (wall)", label, _ratio(report.wall_s, results.floor.wall_s),
                   TARGET_REPORT_OVER_FLOOR, "×", _ratio(report.cpu_s, results.floor.cpu_s)),
        ]  # fmt: skip
    return out


def _spread(values: Sequence[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f})"


def _runs_row(measure: str, label: str, runs: Runs) -> list[str]:
    peak = [kb * 1024 / 1e6 for kb in runs.peak_kb]
    return [
        measure,
        label,
        _spread(runs.wall_s),
        f"{statistics.median(runs.cpu_s):.2f}",
        f"{statistics.median(peak):.0f} (max {max(peak):.0f})",
    ]


def _figure(value: float, unit: str) -> str:
    return f"{value:.2f}{unit}" if unit == "×" else f"{value:.2f} {unit}"


def _value(target: Target) -> str:
    if target.value is None:
        return "n/a"
    cpu = "" if target.cpu is None else f" (CPU {_figure(target.cpu, target.unit)})"
    return f"{_figure(target.value, target.unit)} {'PASS' if target.passed else 'FAIL'}{cpu}"


def render(results: Results, checkouts: Sequence[Checkout], measures: Sequence[Measure], repeats: int) -> str:
    """The figures table and the targets table."""
    rows = []
    for measure in measures:
        if measure is Measure.FLOOR:
            rows.append(_runs_row("floor", "-", results.floor))
            continue
        for checkout in checkouts:
            runs = results.per_checkout[checkout.label][measure]
            rows.append(_runs_row(measure, checkout.label, runs))
            if measure is Measure.CHAIN:
                rows.append(["  chain analyze()", checkout.label, _spread(runs.analyze_s), "", ""])
    found = targets(results, checkouts)
    names = list(dict.fromkeys(t.name for t in found))
    limits = {t.name: f"≤ {t.limit:g}{t.unit}" if t.unit == "×" else f"≤ {t.limit:g} {t.unit}" for t in found}
    by_key = {(t.name, t.checkout): t for t in found}
    target_rows = [[name, limits[name], *(_value(by_key[name, c.label]) for c in checkouts)] for name in names]
    return "\n".join(
        [
            f"Fresh process per run, {repeats} round(s), checkouts interleaved: wall s median (min–max), CPU "
            "(user+sys) s median, peak RSS MB median (max); rusage of each child via os.wait4; 'chain analyze()' "
            "is analyze() timed inside the chain's child",
            markdown_table(["measure", "checkout", "wall s", "CPU s", "peak RSS MB"], rows),
            "",
            "Issue 21's targets (medians; the chain's memory: its worst run); in brackets the same from CPU "
            "time (user+sys), not judged:",
            markdown_table(["target", "limit", *(c.label for c in checkouts)], target_rows),
        ]
    )


def _raw(
    results: Results,
    checkouts: Sequence[Checkout],
    wheres: dict[str, dict[str, str]],
    models: Models,
    args: argparse.Namespace,
) -> dict[str, object]:
    """Every figure of the run, for ``--json``."""
    return {
        "python": sys.version.split()[0],
        "onnx": onnx.__version__,
        "cpus": os.cpu_count(),
        "machine": host.platform(),
        "repeats": args.repeats,
        "chain_nodes": args.chain_nodes,
        "llama": {"nodes": models.llama_nodes, "dims": models.llama_dims, "platform": PLATFORM},
        "llm": {"prompt": PROMPT, "generate": GENERATE},
        "checkouts": [
            {
                "label": c.label,
                "root": str(c.root),
                "revision": c.revision,
                "imported_from": wheres[c.label],
                "platforms": list(c.platforms),
                "runs": {m: asdict(r) for m, r in results.per_checkout[c.label].items()},
            }
            for c in checkouts
        ],
        "floor": asdict(results.floor),
        "targets": [{**asdict(t), "passed": t.passed} for t in targets(results, checkouts)],
    }


def _measures(text: str, parser: argparse.ArgumentParser) -> list[Measure]:
    wanted = {name.strip() for name in text.split(",") if name.strip()}
    unknown = sorted(wanted - set(MEASURES))
    if unknown or not wanted:
        parser.error(f"--only: unknown {unknown}; known: {','.join(MEASURES)}")
    return [m for m in MEASURES if m in wanted]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--checkout", type=Path, action="append", help="an onnxroof source tree; repeat (default: this repository)"
    )
    parser.add_argument("--repeats", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--only", default=",".join(MEASURES), help=f"comma-separated subset of {','.join(MEASURES)}")
    parser.add_argument("--chain-nodes", type=int, default=CHAIN_NODES, help="nodes of the chain (default 1,000,000)")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    measures = _measures(args.only, parser)
    roots = args.checkout or [REPO]
    if len(roots) > 26:
        parser.error("at most 26 checkouts")

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="onnxroof-stages-") as name:
        tmp = Path(name)
        checkouts = [prepare_checkout(chr(ord("A") + i), root, tmp) for i, root in enumerate(roots)]
        wheres = {c.label: where_imported(c, tmp) for c in checkouts}
        print(
            f"python {sys.version.split()[0]}, onnx {onnx.__version__}, {os.cpu_count()} CPU(s); measures "
            f"{','.join(measures)}; {args.repeats} round(s)"
        )
        for c in checkouts:
            others = ", ".join(f"{n} from {p}" for n, p in wheres[c.label].items() if n != "onnxroof")
            print(f"{c.label}: {c.root} ({c.revision}): onnxroof from {wheres[c.label]['onnxroof']}; {others}")
        models = build_models(tmp, args.chain_nodes, Measure.CHAIN in measures)
        print(
            f"7B-shaped graph: {models.llama_nodes} nodes, dims {models.llama_dims}, platform {PLATFORM}; llm: prompt "
            f"{PROMPT}, generate {GENERATE}; chain: {args.chain_nodes:,} nodes"
        )
        print("", flush=True)

        def progress(line: str) -> None:
            print(line, file=sys.stderr, flush=True)

        results = measure_all(measures, models, checkouts, args.repeats, tmp, progress)
    print(render(results, checkouts, measures, args.repeats))
    print(f"\n(total {time.perf_counter() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps(_raw(results, checkouts, wheres, models, args), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
