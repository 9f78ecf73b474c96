"""Memory and time at scale: a model with its weights inside the file, and a graph of a million nodes.

``python benchmarks/bench_scale.py [--weights-mb 438] [--nodes 1000000] [--only embedded|chain|apart] [--profile]``

* **embedded weights**: a BERT-base-sized file (438 MB by default) whose weights sit inside the protobuf (four
  float32 MatMul weights). ``onnxroof.analyze`` runs in a fresh interpreter; the figures are its peak resident
  memory (``VmHWM``), the same interpreter's after ``import onnxroof`` and the peak over the file size;
  issue 16's target is ≤ 1.5× the file.
* **1M-node chain**: ``x`` through ``--nodes`` cheap elementwise ops (``Relu``, ``Neg``, ``Abs`` in turn, each
  ``[1, 16]``), analyzed in a fresh interpreter: wall time, peak memory and memory per node; the target is
  ≤ 60 s and ≤ 3 GB. ``--profile`` prints the top functions of a cProfile run of the chain instead.
* **a chain that stays apart** (``--only apart``, not run by default): ``Relu`` and ``Transpose`` in turn
  (``[1, 16]``, ``[16, 1]``...), so no two neighbours fuse and every ``Relu`` starts a pointwise group of its
  own; the same figures. Before pointwise fusion kept its dependency bitsets to the groups still in reach,
  they grew with the number of groups (quadratic: 100 MB of bitsets at 40k nodes, 62 GB at 1M).

Each figure comes from a subprocess started in the temporary folder (so peaks do not mix, and a checkout in
the working directory does not shadow the one chosen): ``PYTHONPATH`` chooses the onnxroof measured (else the
installed one), which is how the before/after figures of docs/performance.md were taken. The temporary folder
is removed at exit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MEASURE_SRC = """
import json, sys, time
import onnxroof

def status(key):
    with open("/proc/self/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith(key))

base = status("VmRSS:")  # VmHWM is the peak of this process image (exec starts it afresh)
start = time.perf_counter()
analysis = onnxroof.analyze(sys.argv[1], platform="xavier")
elapsed = time.perf_counter() - start
peak = status("VmHWM:")
print(json.dumps({"seconds": elapsed, "peak_kb": peak, "import_kb": base, "nodes": len(analysis.nodes),
                  "params": analysis.totals.params}))
"""


def embedded_model(folder: Path, megabytes: float) -> Path:
    """Four float32 MatMul weights inside the file, ``megabytes`` in all: ``x[1, a] · W1[a, b] · W2[b, a]...``."""
    elements = int(megabytes * 1e6 / 4 / 4)
    a = 6848
    b = max(1, elements // a)
    shapes = [(a, b), (b, a), (a, b), (b, a)]
    weights = [numpy_helper.from_array(np.zeros(shape, np.float32), f"W{i}") for i, shape in enumerate(shapes)]
    names = ["x", "h0", "h1", "h2", "y"]
    nodes = [helper.make_node("MatMul", [names[i], f"W{i}"], [names[i + 1]], name=f"mm{i}") for i in range(4)]
    graph = helper.make_graph(
        nodes,
        "embedded",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, a])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, a])],
        weights,
    )
    path = folder / "embedded.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def chain_model(folder: Path, count: int) -> Path:
    """``count`` elementwise ops in a chain, each ``[1, 16]``."""
    ops = ("Relu", "Neg", "Abs")
    nodes = [
        helper.make_node(
            ops[i % 3], ["x" if i == 0 else f"t{i - 1}"], [f"t{i}" if i < count - 1 else "y"], name=f"n{i}"
        )
        for i in range(count)
    ]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])],
    )
    path = folder / "chain.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def apart_model(folder: Path, count: int) -> Path:
    """``count`` ops, ``Relu`` and ``Transpose`` in turn: ``[1, 16]``, ``[16, 1]``, ``[1, 16]``..."""
    nodes = [
        helper.make_node("Relu", [f"t{i - 1}" if i else "x"], [f"t{i}"], name=f"n{i}")
        if i % 2 == 0
        else helper.make_node("Transpose", [f"t{i - 1}"], [f"t{i}"], name=f"n{i}", perm=[1, 0])
        for i in range(count)
    ]
    nodes[-1].output[0] = "y"
    shape = [1, 16] if count % 2 == 0 else [16, 1]
    graph = helper.make_graph(
        nodes,
        "apart",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    path = folder / "apart.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def measure(path: Path) -> dict:
    # run in the model's temporary folder: ``python -c`` puts its working directory first on sys.path, and a
    # checkout's own onnxroof/ there would win over PYTHONPATH
    result = subprocess.run(
        [sys.executable, "-c", MEASURE_SRC, str(path)],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        cwd=path.parent,
    )
    if result.returncode != 0:
        raise SystemExit(f"analysis of {path} failed:\n{result.stderr[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def profile(path: Path, top: int = 25) -> None:
    import cProfile
    import pstats

    import onnxroof

    profiler = cProfile.Profile()
    profiler.enable()
    onnxroof.analyze(str(path), platform="xavier")
    profiler.disable()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(top)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def _graph_line(label: str, build, folder: Path, nodes: int) -> str:
    """Build a graph of ``nodes`` nodes with ``build``, analyze it in a fresh interpreter, and say how it went."""
    start = time.perf_counter()
    path = build(folder, nodes)
    built = time.perf_counter() - start
    figures = measure(path)
    peak = figures["peak_kb"] * 1024
    return (
        f"{label}: file {path.stat().st_size / 1e6:.0f} MB (built in {built:.0f} s); analyze "
        f"{figures['seconds']:.1f} s, peak RSS {peak / 1e9:.2f} GB ({peak / nodes / 1e3:.1f} KB per node)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights-mb", type=float, default=438.0, help="embedded weights, MB (default 438)")
    parser.add_argument("--nodes", type=int, default=1_000_000, help="nodes of the chain (default 1,000,000)")
    parser.add_argument(
        "--only", choices=("embedded", "chain", "apart"), help="run one of them (apart runs only when named)"
    )
    parser.add_argument("--profile", action="store_true", help="cProfile the chain instead of timing it")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="onnxroof-scale-") as name:
        folder = Path(name)
        if args.profile:
            profile(chain_model(folder, args.nodes))
            return 0
        if args.only in (None, "embedded"):
            path = embedded_model(folder, args.weights_mb)
            size = path.stat().st_size
            figures = measure(path)
            path.unlink()
            peak = figures["peak_kb"] * 1024
            print(
                f"embedded weights: file {size / 1e6:.0f} MB; analyze {figures['seconds']:.1f} s, peak RSS "
                f"{peak / 1e6:.0f} MB ({peak / size:.2f}× the file; after import {figures['import_kb'] / 1e3:.0f} MB)"
            )
        if args.only in (None, "chain"):
            print(_graph_line(f"{args.nodes:,}-node chain", chain_model, folder, args.nodes))
        if args.only == "apart":
            label = f"{args.nodes:,}-node chain kept apart (Relu, Transpose)"
            print(_graph_line(label, apart_model, folder, args.nodes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
