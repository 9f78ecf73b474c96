"""Whole models measured on the H200 (benchmarks/data/gpu/models.csv, CUDA-graph replays) against onnxroof.

    python benchmarks/bench_gpu_models.py [benchmarks/data/gpu]

Each ``cuda-graph`` row of ``models.csv`` (torchvision, fp16 channels-last, batch 1 and 32, one captured CUDA
graph replayed: the kernels' device time with no host launches) is predicted from the ONNX export in
``onnx.tar.gz`` at the row's batch, ``--precision fp16``, on platform ``h200``, with the runtime
``tensorrt-cudagraph`` for its launch mode (one replay per run, 0.5 µs per node) and ``--fusion none`` (eager
PyTorch runs every op as its own kernel), once with the ``gpu`` time model and once with the roofline. Prints
every row's error and the median |error| of each model. Nothing is fitted on these rows.
"""

from __future__ import annotations

import csv
import statistics
import sys
import tarfile
import tempfile
from pathlib import Path

import onnxroof
from onnxroof.analysis.whatif import WhatIf


def main(folder: Path) -> None:
    rows = [r for r in csv.DictReader((folder / "models.csv").open(encoding="utf-8")) if r["mode"] == "cuda-graph"]
    errors: dict[str, list[float]] = {"gpu": [], "roofline": []}
    with tempfile.TemporaryDirectory() as scratch:
        with tarfile.open(folder / "onnx.tar.gz") as archive:
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
                    runtime="tensorrt-cudagraph",
                )
                predicted = analysis.totals.latency_s
                errors[model].append(abs(predicted / measured - 1))
                cells.append(f"{model} {predicted * 1e3:7.3f} ms ({predicted / measured - 1:+.0%})")
            print(f"{row['model']:16} b{row['batch']:>2}  measured {measured * 1e3:7.3f} ms  " + "  ".join(cells))
    for model, values in errors.items():
        if values:
            print(f"{model:8} median |error| {statistics.median(values):.1%} over {len(values)} rows")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent / "data" / "gpu")
