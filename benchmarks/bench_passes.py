"""In-process timings of single passes: the workloads the unit tests used to time (and assert on).

``python benchmarks/bench_passes.py [--repeats 5]``

Wall-clock limits in unit tests are flaky on a shared machine, so the tests keep only what they check about
the result (a partition, a count, memory) and the timings live here, as the median (and min–max) of repeated
runs after one untimed warm-up:

* ``fuse`` per fusion profile on the Llama-shaped graph (``llama_shaped``, 2 700+ nodes, batch=1, seq=128):
  the workload of ``tests/test_fusion.py::test_fusing_a_2700_node_llama_graph_partitions_it`` (which asserted
  min of 3 < 0.2 s);
* ``analyze()`` of ``y = x @ W`` with ``W`` a sparse 1 GiB external weight file that must never be read: the
  workload of ``tests/test_load.py::test_sparse_1gb_weight_file_is_never_read`` (which asserted < 5 s);
* pointwise fusion of a ``Sum`` of N ``Relu`` outputs (N = 1,000 / 10,000 / 40,000), ``tensorrt`` against
  ``none`` (which builds the same unfused kernels): the pass is linear in a node's fan-in when the ratio stays
  flat as N grows (it grew with N, 23× at 10,000, when the pass was quadratic; issue 16 measured 4.6 s at
  10,000 and 55 s at 40,000);
* the loader's stages on the 7B-shaped graph (batch=1, seq=2048): ``load_model`` (check of the external paths,
  shape inference and its fallbacks) and ``build_ir``, where the cheap wins of issue 13 landed.

Needs no network; the temporary folder is removed at exit.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import onnx
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llama_shaped import build_llama_shaped

from onnxroof.analysis.analyze import analyze
from onnxroof.core.ir import build_ir
from onnxroof.costing.node import cost_node
from onnxroof.fusion.fuse import fuse
from onnxroof.fusion.patterns import PROFILES
from onnxroof.load.reader import load_model
from onnxroof.rules import REGISTRY


def timed(work: Callable[[], object], repeats: int) -> list[float]:
    """Seconds of ``repeats`` calls of ``work`` after one untimed warm-up call."""
    work()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return times


def sparse_weight_model(folder: Path, rows: int = 16384, cols: int = 16384) -> Path:
    """``y = x @ W``, ``W`` float32 [rows, cols] in a sparse external file (1 GiB apparent, no blocks)."""
    with open(folder / "big.bin", "wb") as handle:
        handle.truncate(rows * cols * 4)
    weight = TensorProto()
    weight.name = "W"
    weight.data_type = TensorProto.FLOAT
    weight.dims.extend([rows, cols])
    weight.data_location = TensorProto.EXTERNAL
    entry = weight.external_data.add()
    entry.key, entry.value = "location", "big.bin"
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
        "external",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, cols])],
        [weight],
    )
    path = folder / "big.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def fan_in_graph(fan_in: int):
    """IR and node costs of ``y = Sum(Relu(x), ... fan_in times)`` on a [4, 8] float input."""
    relus = [helper.make_node("Relu", ["x"], [f"r{i}"]) for i in range(fan_in)]
    graph = helper.make_graph(
        [*relus, helper.make_node("Sum", [f"r{i}" for i in range(fan_in)], ["y"])],
        "fan_in",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])],
    )
    loaded = load_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    ir = build_ir(loaded.model, loaded.value_types, order=loaded.order, view_ops=REGISTRY.view_ops)
    return ir, {op.id: cost_node(op, ir, loaded.model.graph) for op in ir.ops}


def _line(name: str, times: list[float], note: str = "") -> str:
    ms = [t * 1000 for t in times]
    spread = f"({min(ms):.1f}–{max(ms):.1f})"
    return f"| {name:<34} | {statistics.median(ms):>9.1f} | {spread:>17} | {note}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per workload (default 5)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    import onnxroof

    print(f"onnxroof from {Path(onnxroof.__file__).parent}; {args.repeats} repeat(s) after a warm-up")
    print(f"| {'workload':<34} | {'median ms':>9} | {'(min–max)':>17} | note")
    print(f"|{'-' * 36}|{'-' * 10}:|{'-' * 18}:|-----")
    with tempfile.TemporaryDirectory(prefix="onnxroof-passes-") as name:
        tmp = Path(name)
        llama = build_llama_shaped(tmp / "llama.onnx")

        loaded = load_model(llama, {"batch": 1, "seq": 128})
        ir = build_ir(loaded.model, loaded.value_types, view_ops=REGISTRY.view_ops)
        costs = {op.id: cost_node(op, ir, loaded.model.graph) for op in ir.ops}
        for profile in PROFILES:
            times = timed(lambda p=profile: fuse(ir, costs, p), args.repeats)
            print(_line(f"fuse {profile} (seq=128)", times, f"{len(ir.ops)} ops; the test asserted min < 200 ms"))

        dims = {"batch": 1, "seq": 2048}
        print(_line("load_model 7B (seq=2048)", timed(lambda: load_model(llama, dims), args.repeats)))
        big = load_model(llama, dims)
        print(
            _line(
                "build_ir 7B (seq=2048)",
                timed(
                    lambda: build_ir(big.model, big.value_types, order=big.order, view_ops=REGISTRY.view_ops),
                    args.repeats,
                ),
                "with the loader's order",
            )
        )

        for fan_in in (1_000, 10_000, 40_000):
            fan_ir, fan_costs = fan_in_graph(fan_in)
            fused = timed(lambda i=fan_ir, c=fan_costs: fuse(i, c, "tensorrt"), args.repeats)
            plain = timed(lambda i=fan_ir, c=fan_costs: fuse(i, c, "none"), args.repeats)
            ratio = statistics.median(fused) / statistics.median(plain)
            print(_line(f"fuse tensorrt, Sum of {fan_in:,}", fused, f"{ratio:.1f}x the 'none' profile"))

        sparse = sparse_weight_model(tmp)
        print(_line("analyze sparse 1 GiB weight", timed(lambda: analyze(sparse), args.repeats), "test asserted < 5 s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
