"""Whole models measured on the H200 (benchmarks/data/gpu/models.csv, CUDA-graph replays) against onnxroof.

    python benchmarks/bench_gpu_models.py [benchmarks/data/gpu] [--mode cuda-graph|cuda-graph-folded]
        [--onnx benchmarks/data/gpu/run2/onnx.tar.gz] [--runtime tensorrt-cudagraph]

``--mode cuda-graph-folded`` reads the rows measured with every BatchNorm folded into its convolution
(``benchmarks/data/gpu/run3``, ``torch.fx`` ``fuse``): the graph the ONNX export describes, since the export
folds BatchNorm too. ``--runtime`` names the launch profile (``benchmarks/runtimes/torch-cuda-graph.toml`` is what
was measured: no per-node cost beyond the ``gpu`` model's fixed kernel time, one host launch per replay).

Each ``cuda-graph`` row of ``models.csv`` (torchvision, fp16 channels-last, batch 1 and 32, one captured CUDA
graph replayed: the kernels' device time with no host launches) is predicted from the ONNX export in
``onnx.tar.gz`` at the row's batch, ``--precision fp16``, on platform ``h200``, with the runtime
``tensorrt-cudagraph`` for its launch mode (one replay per run, 0.5 µs per node) and ``--fusion none`` (eager
PyTorch runs every op as its own kernel), once with the ``gpu`` time model and once with the roofline. Prints
every row's error and the median |error| of each model. Nothing is fitted on these rows.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import tarfile
import tempfile
from pathlib import Path

import onnxroof
from onnxroof.analysis.whatif import WhatIf


def main(folder: Path, mode: str, onnx_archive: Path, runtime: str) -> None:
    with (folder / "models.csv").open(encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["mode"] == mode]
    errors: dict[str, list[float]] = {"gpu": [], "roofline": []}
    with tempfile.TemporaryDirectory() as scratch:
        with tarfile.open(onnx_archive) as archive:
            archive.extractall(scratch, filter="data")
        for row in rows:
            path = Path(scratch) / row["onnx"]
            if not path.exists():
                print(f"{row['model']:16} b{row['batch']:>2}  no ONNX export in the archive: skipped")
                continue
            measured = float(row["time_s"])
            cells = []
            for model in errors:
                analysis = onnxroof.analyze(
                    path,
                    "h200",
                    {"batch": int(row["batch"])},
                    whatif=WhatIf(precision="fp16", time_model=model),
                    fusion="none",
                    runtime=runtime,
                )
                predicted = analysis.totals.latency_s
                errors[model].append(abs(predicted / measured - 1))
                cells.append(f"{model} {predicted * 1e3:7.3f} ms ({predicted / measured - 1:+.0%})")
            print(f"{row['model']:16} b{row['batch']:>2}  measured {measured * 1e3:7.3f} ms  " + "  ".join(cells))
    for model, values in errors.items():
        if values:
            print(f"{model:8} median |error| {statistics.median(values):.1%} over {len(values)} rows")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=Path(__file__).parent / "data" / "gpu")
    parser.add_argument("--mode", default="cuda-graph", choices=["cuda-graph", "cuda-graph-folded"])
    parser.add_argument("--onnx", type=Path, help="the exports (default: FOLDER/onnx.tar.gz)")
    parser.add_argument("--runtime", default="tensorrt-cudagraph", help="a runtime name or TOML path")
    args = parser.parse_args()
    main(args.folder, args.mode, args.onnx or args.folder / "onnx.tar.gz", args.runtime)
