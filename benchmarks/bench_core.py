"""Speed and memory of onnxroof against the floor: what ``onnx`` alone needs to load the graph and infer shapes.

``python benchmarks/bench_core.py [--repeats 5] [--quick] [--models NAME,...] [--platform xavier] [--json PATH]``

Models: a Llama-2-7B-shaped decoder (built by :mod:`llama_shaped` into a temporary folder, weights in a sparse
external file: ~13.5 GB apparent, nothing allocated; dims batch=1, seq=2048), the nine ``light_*`` models shipped
in the onnx wheel (``onnx/backend/test/data/light``) and ``samples/*.onnx`` (symbolic dims bound as batch=1,
seq=128).

Per model, each measurement is one FRESH child process, so every run pays interpreter start-up and its own
imports, and its peak memory is its own:

* onnxroof: the command line users run, ``onnxroof report MODEL --platform P --dim ... --format json -o FILE``
  (``FILE`` in the temporary folder; not ``/dev/null``, because ``-o`` writes atomically through a temporary
  file renamed over the target);
* floor: ``python -c`` doing ``onnx.load(path, load_external_data=False)``, binding the dims on the graph
  inputs and ``onnx.shape_inference.infer_shapes(model, data_prop=True)``.

The two alternate (onnxroof, floor, onnxroof, floor, ...) so that drift on a shared machine hits both alike.
Wall time is taken with ``time.perf_counter`` from spawn to reap (median, min, max). Peak RSS is
the kernel's ``ru_maxrss`` for that one child, read with ``os.wait4(pid)`` (exact per run, unlike
``getrusage(RUSAGE_CHILDREN)``, which is a running maximum over all children reaped so far); the same rusage gives
the child's CPU time (user + system), which other load on a shared machine disturbs less than wall time. The
child is spawned and reaped by a small ``python -S`` launcher, because ``exec`` carries the peak of the image it
replaces into ``ru_maxrss``: spawned from this interpreter directly, every child would report at least this
script's own peak.

A second child per model measures the same work in-process, after the imports and one warm-up call, so that
start-up is visible separately: ``analyze()`` and ``render_json()`` vs load + bind + infer, interleaved,
median of the repeats.

``--quick``: one repeat, the 7B model and two light models (a smoke check). ``--models``: only the models
named (comma-separated, e.g. ``llama-7B-shaped`` or ``llama-7B-shaped,light_resnet50``). Needs no network; the
temporary folder is removed at exit.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llama_shaped import build_llama_shaped

REPO = Path(__file__).resolve().parents[1]
LIGHT_DIR = Path(onnx.__file__).resolve().parent / "backend" / "test" / "data" / "light"
QUICK_LIGHT = ("light_resnet50", "light_squeezenet")
DEFAULT_DIMS = {"batch": 1, "seq": 128}
LLAMA_DIMS = {"batch": 1, "seq": 2048}
TARGET_WALL_S = 2.0
TARGET_PEAK_MB = 500.0

# Shared by the floor child and the in-process child: exactly the floor's work.
_FLOOR_FUNC = """
import onnx

def floor(path, dims):
    model = onnx.load(path, load_external_data=False)
    initializers = {t.name for t in model.graph.initializer}
    for value in model.graph.input:
        if value.name in initializers or not value.type.HasField("tensor_type"):
            continue
        for dim in value.type.tensor_type.shape.dim:
            if dim.HasField("dim_param") and dim.dim_param in dims:
                dim.dim_value = dims[dim.dim_param]  # a oneof: clears dim_param
    return onnx.shape_inference.infer_shapes(model, data_prop=True)
"""

FLOOR_SRC = (
    _FLOOR_FUNC
    + """
import json, sys
floor(sys.argv[1], json.loads(sys.argv[2]))
"""
)

INPROC_SRC = (
    _FLOOR_FUNC
    + """
import json, statistics, sys, time
from onnxroof.analysis.analyze import analyze
from onnxroof.report.data import render_json

from onnxroof.analysis import grouping

path, dims, platform, repeats = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], int(sys.argv[4])

# Time the fusion pass inside analyze(): wrap the function grouping.build_kernels calls.
fuse_calls = []
_fuse = grouping.fuse

def _timed_fuse(*args, **kwargs):
    t0 = time.perf_counter()
    result = _fuse(*args, **kwargs)
    fuse_calls.append(time.perf_counter() - t0)
    return result

grouping.fuse = _timed_fuse

def ours():
    t0 = time.perf_counter()
    analysis = analyze(path, platform=platform, dims=dims)
    t1 = time.perf_counter()
    render_json(analysis)
    return t1 - t0, time.perf_counter() - t1

def timed_floor():
    t0 = time.perf_counter()
    floor(path, dims)
    return time.perf_counter() - t0

first_ours, first_floor = ours(), timed_floor()  # warm-up: rule modules, platform file, caches
analyze_s, json_s, floor_s = [], [], []
fuse_calls.clear()
for _ in range(repeats):
    a, j = ours()
    analyze_s.append(a)
    json_s.append(j)
    floor_s.append(timed_floor())
print(json.dumps({"analyze_s": analyze_s, "json_s": json_s, "floor_s": floor_s, "fuse_s": list(fuse_calls),
                  "first_analyze_s": first_ours[0], "first_json_s": first_ours[1], "first_floor_s": first_floor}))
"""
)


@dataclass
class Model:
    name: str
    path: Path
    dims: dict[str, int]
    nodes: int


@dataclass
class Result:
    model: str
    nodes: int
    dims: dict[str, int]
    ours_wall_s: list[float] = field(default_factory=list)
    ours_peak_kb: list[int] = field(default_factory=list)
    ours_cpu_s: list[float] = field(default_factory=list)
    floor_wall_s: list[float] = field(default_factory=list)
    floor_peak_kb: list[int] = field(default_factory=list)
    floor_cpu_s: list[float] = field(default_factory=list)
    inproc: dict[str, object] = field(default_factory=dict)


def _kilobytes(maxrss: int) -> int:
    """``ru_maxrss`` is in KiB on Linux, in bytes on macOS."""
    return maxrss // 1024 if sys.platform == "darwin" else maxrss


# A small launcher (``python -S``, ~10 MB) between us and the measured child: ``exec`` saves the RSS of the
# process image it replaces into ``ru_maxrss``, so a child spawned by this (larger) interpreter would report at
# least our own peak. The launcher spawns the command, reaps it with wait4 and writes its wall seconds (spawn to
# reap), ``ru_maxrss`` and CPU seconds to the file named first; it exits with the command's status.
_LAUNCH_SRC = """
import os, sys, time
start = time.perf_counter()
pid = os.posix_spawnp(sys.argv[2], sys.argv[2:], os.environ)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - start
with open(sys.argv[1], "w") as out:
    out.write(f"{wall!r} {usage.ru_maxrss} {usage.ru_utime + usage.ru_stime!r}")
code = os.waitstatus_to_exitcode(status)
sys.exit(code if code >= 0 else 128 - code)
"""


def run_child(
    cmd: list[str],
    log: Path,
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    stdout: Path | None = None,
) -> tuple[float, int, float]:
    """Run ``cmd`` in a fresh process; return wall seconds (spawn to reap), peak RSS KiB and CPU seconds (user +
    system) of that process alone, from ``os.wait4`` in a small launcher (``_LAUNCH_SRC``). Its stderr goes to
    ``log``, its stdout to ``stdout`` (else nowhere); ``cwd`` and ``env`` as for :class:`subprocess.Popen`."""
    figures = log.with_name(log.name + ".rusage")
    launcher = [sys.executable, "-S", "-c", _LAUNCH_SRC, str(figures), *cmd]
    with open(log, "wb") as err, open(stdout if stdout is not None else os.devnull, "wb") as out:
        done = subprocess.run(launcher, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=cwd, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}:\n{log.read_text(errors='replace')[-2000:]}")
    wall, maxrss, cpu = figures.read_text().split()
    return float(wall), _kilobytes(int(maxrss)), float(cpu)


def onnxroof_command() -> list[str]:
    script = Path(sys.executable).parent / "onnxroof"
    if script.exists():
        return [str(script)]
    found = shutil.which("onnxroof")
    return [found] if found else [sys.executable, "-m", "onnxroof"]


def symbolic_inputs(model: onnx.ModelProto) -> set[str]:
    initializers = {t.name for t in model.graph.initializer}
    names = set()
    for value in model.graph.input:
        if value.name in initializers or not value.type.HasField("tensor_type"):
            continue
        for dim in value.type.tensor_type.shape.dim:
            if not dim.HasField("dim_value"):
                if not dim.dim_param:
                    raise ValueError(f"input {value.name!r} has an unnamed symbolic dim: cannot bind it")
                names.add(dim.dim_param)
    return names


def describe(name: str, path: Path, defaults: dict[str, int]) -> Model:
    proto = onnx.load(path, load_external_data=False)
    symbols = symbolic_inputs(proto)
    missing = symbols - defaults.keys()
    if missing:
        raise ValueError(f"{path}: no value to bind symbolic dims {sorted(missing)}")
    return Model(name, path, {s: defaults[s] for s in sorted(symbols)}, len(proto.graph.node))


def collect_models(tmp: Path, quick: bool) -> list[Model]:
    llama = build_llama_shaped(tmp / "llama_shaped.onnx")
    models = [describe("llama-7B-shaped", llama, LLAMA_DIMS)]
    light = sorted(LIGHT_DIR.glob("*.onnx"))
    if quick:
        light = [p for p in light if p.stem in QUICK_LIGHT]
    models += [describe(p.stem, p, DEFAULT_DIMS) for p in light]
    if not quick:
        models += [describe(p.stem, p, DEFAULT_DIMS) for p in sorted((REPO / "samples").glob("*.onnx"))]
    return models


def dim_args(dims: dict[str, int]) -> list[str]:
    """``--dim NAME=VALUE`` for each bound dim."""
    return [arg for name, value in dims.items() for arg in ("--dim", f"{name}={value}")]


def report_args(path: Path, platform: str, dims: dict[str, int], out: Path) -> list[str]:
    """The arguments of ``onnxroof report PATH --platform P --dim ... --format json -o OUT`` after the command."""
    return ["report", str(path), "--platform", platform, *dim_args(dims), "--format", "json", "-o", str(out)]


def measure(model: Model, repeats: int, platform: str, tmp: Path) -> Result:
    result = Result(model.name, model.nodes, model.dims)
    ours = [*onnxroof_command(), *report_args(model.path, platform, model.dims, tmp / "report.json")]
    floor = [sys.executable, "-c", FLOOR_SRC, str(model.path), json.dumps(model.dims)]
    log = tmp / "stderr.txt"
    for _ in range(repeats):
        wall, peak, cpu = run_child(ours, log)
        result.ours_wall_s.append(wall)
        result.ours_peak_kb.append(peak)
        result.ours_cpu_s.append(cpu)
        wall, peak, cpu = run_child(floor, log)
        result.floor_wall_s.append(wall)
        result.floor_peak_kb.append(peak)
        result.floor_cpu_s.append(cpu)
    inproc = subprocess.run(
        [sys.executable, "-c", INPROC_SRC, str(model.path), json.dumps(model.dims), platform, str(repeats)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if inproc.returncode != 0:
        raise RuntimeError(f"in-process run of {model.name} failed:\n{inproc.stderr[-2000:]}")
    result.inproc = json.loads(inproc.stdout.strip().splitlines()[-1])
    return result


def _med(values: list[float]) -> float:
    return statistics.median(values)


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def _mb(kib: float) -> str:
    return f"{kib / 1024:.0f}"


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    lines = [
        "| "
        + " | ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(headers, widths, strict=True)))
        + " |",
        "|" + "|".join(("-" * (w + 1) + ":") if i else ("-" * (w + 2)) for i, w in enumerate(widths)) + "|",
    ]
    for row in rows:
        lines.append(
            "| "
            + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
            + " |"
        )
    return "\n".join(lines)


def report(results: list[Result], repeats: int) -> str:
    fresh_rows, inproc_rows = [], []
    for r in results:
        ow, fw = _med(r.ours_wall_s), _med(r.floor_wall_s)
        om, fm = _med(r.ours_peak_kb), _med(r.floor_peak_kb)
        fresh_rows.append(
            [
                r.model,
                str(r.nodes),
                f"{_ms(ow)} ({_ms(min(r.ours_wall_s))}–{_ms(max(r.ours_wall_s))})",
                f"{_ms(fw)} ({_ms(min(r.floor_wall_s))}–{_ms(max(r.floor_wall_s))})",
                f"{ow / fw:.2f}",
                _ms(_med(r.ours_cpu_s)),
                _ms(_med(r.floor_cpu_s)),
                f"{_mb(om)} (max {_mb(max(r.ours_peak_kb))})",
                f"{_mb(fm)}",
                f"{om / fm:.2f}",
            ]
        )
        a, j, f = (_med(r.inproc[k]) for k in ("analyze_s", "json_s", "floor_s"))  # type: ignore[arg-type]
        fuse = _med(r.inproc["fuse_s"])  # type: ignore[arg-type]
        inproc_rows.append(
            [
                r.model,
                _ms(a),
                _ms(fuse),
                f"{100 * fuse / (a - fuse):.1f}%",
                _ms(j),
                _ms(f),
                f"{a / f:.2f}",
                f"{(a + j) / f:.2f}",
                _ms(float(r.inproc["first_analyze_s"])),  # type: ignore[arg-type]
                _ms(ow - a - j),
                _ms(fw - f),
            ]
        )
    out = [
        f"Fresh process per run, interleaved onnxroof/floor, {repeats} repeat(s): wall ms median (min–max), "
        "CPU (user+sys) ms median, peak RSS MB median (max over runs); rusage of each child via os.wait4",
        markdown_table(
            [
                "model",
                "nodes",
                "onnxroof CLI ms",
                "floor ms",
                "time ×",
                "CLI CPU ms",
                "floor CPU ms",
                "onnxroof MB",
                "floor MB",
                "mem ×",
            ],
            fresh_rows,
        ),
        "",
        f"In-process, after imports and one warm-up call, median of {repeats}: analyze() and render_json() vs "
        "load+bind+infer_shapes; 'fusion' = the fusion pass inside analyze() for the platform's profile, 'fusion "
        "adds' = fusion / (analyze - fusion); 'start-up' = fresh-process median minus in-process median "
        "(interpreter, imports, CLI parsing, file write)",
        markdown_table(
            [
                "model",
                "analyze ms",
                "fusion ms",
                "fusion adds",
                "json ms",
                "floor ms",
                "analyze ×",
                "+json ×",
                "1st analyze ms",
                "onnxroof start-up ms",
                "floor start-up ms",
            ],
            inproc_rows,
        ),
    ]
    big = results[0]
    wall, peak = _med(big.ours_wall_s), max(big.ours_peak_kb) / 1024
    out += [
        "",
        f"Targets for {big.model} (batch=1, seq=2048), full CLI run:",
        f"  wall (median) {wall:.2f} s < {TARGET_WALL_S:.0f} s: {'PASS' if wall < TARGET_WALL_S else 'FAIL'}",
        f"  peak RSS (worst run) {peak:.0f} MB < {TARGET_PEAK_MB:.0f} MB: "
        f"{'PASS' if peak < TARGET_PEAK_MB else 'FAIL'}",
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per model and tool (default 5)")
    parser.add_argument("--quick", action="store_true", help="1 repeat; the 7B model and two light models")
    parser.add_argument("--models", help="comma-separated model names to measure (default: all of the set)")
    parser.add_argument("--platform", default="xavier", help="platform name or TOML path (default xavier)")
    parser.add_argument("--json", type=Path, help="also write the raw measurements here")
    args = parser.parse_args(argv)
    repeats = 1 if args.quick else args.repeats
    if repeats < 1:
        parser.error("--repeats must be at least 1")

    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="onnxroof-bench-") as name:
        tmp = Path(name)
        models = collect_models(tmp, args.quick)
        if args.models:
            wanted = [name.strip() for name in args.models.split(",") if name.strip()]
            unknown = sorted(set(wanted) - {m.name for m in models})
            if unknown:
                parser.error(f"--models: unknown {unknown}; known: {', '.join(m.name for m in models)}")
            models = [m for m in models if m.name in wanted]
        print(
            f"python {sys.version.split()[0]}, onnx {onnx.__version__}, {os.cpu_count()} CPU(s); "
            f"{len(models)} models; platform {args.platform}",
            file=sys.stderr,
        )
        # One untimed pair first: warms the page cache for the interpreter, site-packages and the model files.
        warm = models[0]
        measure(warm, 1, args.platform, tmp)
        results = []
        for model in models:
            print(f"  {model.name} ...", file=sys.stderr, flush=True)
            results.append(measure(model, repeats, args.platform, tmp))
    print(report(results, repeats))
    print(f"\n(total {time.perf_counter() - started:.0f} s)")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
