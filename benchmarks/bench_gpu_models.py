"""Whole models measured on the H200 (benchmarks/data/gpu/models.csv, CUDA-graph replays) against onnxroof.

    python benchmarks/bench_gpu_models.py [benchmarks/data/gpu] [--mode cuda-graph|cuda-graph-folded]
        [--onnx benchmarks/data/gpu/run2/onnx.tar.gz] [--runtime benchmarks/runtimes/torch-cuda-graph.toml]

``--mode cuda-graph-folded`` reads the rows measured with every BatchNorm folded into its convolution
(``benchmarks/data/gpu/run3``, ``torch.fx`` ``fuse``): the graph the ONNX export describes, since the export
folds BatchNorm too. ``--runtime`` names the runtime profile (the default, ``torch-cuda-graph.toml``, is what
was measured: no per-node cost beyond the ``gpu`` model's fixed kernel time, one host launch per replay).

Each ``cuda-graph`` row of ``models.csv`` (torchvision, fp16 channels-last, batch 1 and 32, one captured CUDA
graph replayed: the kernels' device time with no host launches) is predicted from the ONNX export in
``onnx.tar.gz`` at the row's batch, ``--precision fp16``, on platform ``h200``, under the runtime that describes
what was measured (default ``benchmarks/runtimes/torch-cuda-graph.toml``: one replay per run, no cost per node
beyond the model's fixed kernel time, each convolution's bias added by a kernel of its own as PyTorch does) and
``--fusion none`` (eager PyTorch runs every op as its own kernel), once with the ``gpu`` time model and once with
the roofline. Prints every row's error and the median |error| of each model. Nothing is fitted on these rows.
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

MODELS = ("gpu", "roofline")
DEFAULT_RUNTIME = str(Path(__file__).parent / "runtimes" / "torch-cuda-graph.toml")


def predict_rows(folder: Path, mode: str, onnx_archive: Path, runtime: str) -> list[dict[str, object]]:
    """Each ``mode`` row of ``folder/models.csv`` with ``predicted`` (time model → seconds) added, or ``skipped``
    when the archive has no export for it (module docstring)."""
    with (folder / "models.csv").open(encoding="utf-8") as handle:
        rows: list[dict[str, object]] = [dict(r) for r in csv.DictReader(handle) if r["mode"] == mode]
    with tempfile.TemporaryDirectory() as scratch:
        with tarfile.open(onnx_archive) as archive:
            archive.extractall(scratch, filter="data")
        for row in rows:
            path = Path(scratch) / str(row["onnx"])
            if not path.exists():
                row["skipped"] = "no ONNX export in the archive"
                continue
            row["predicted"] = {
                model: onnxroof.analyze(
                    path,
                    "h200",
                    {"batch": int(str(row["batch"]))},
                    whatif=WhatIf(precision="fp16", time_model=model),
                    fusion="none",
                    runtime=runtime,
                ).totals.latency_s
                for model in MODELS
            }
    return rows


def median_errors(rows: list[dict[str, object]]) -> dict[str, float]:
    """Per time model, the median |predicted / measured − 1| over the predicted rows."""
    predicted = [row for row in rows if "predicted" in row]
    return {
        model: statistics.median(
            abs(row["predicted"][model] / float(str(row["time_s"])) - 1)  # type: ignore[index]
            for row in predicted
        )
        for model in MODELS
    }


def main(folder: Path, mode: str, onnx_archive: Path, runtime: str) -> None:
    rows = predict_rows(folder, mode, onnx_archive, runtime)
    for row in rows:
        if "skipped" in row:
            print(f"{row['model']:16} b{row['batch']:>2}  {row['skipped']}: skipped")
            continue
        measured = float(str(row["time_s"]))
        cells = [
            f"{model} {predicted * 1e3:7.3f} ms ({predicted / measured - 1:+.0%})"
            for model, predicted in row["predicted"].items()  # type: ignore[attr-defined]
        ]
        print(f"{row['model']:16} b{row['batch']:>2}  measured {measured * 1e3:7.3f} ms  " + "  ".join(cells))
    count = sum("predicted" in row for row in rows)
    for model, error in median_errors(rows).items():
        print(f"{model:8} median |error| {error:.1%} over {count} rows")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=Path(__file__).parent / "data" / "gpu")
    parser.add_argument("--mode", default="cuda-graph", choices=["cuda-graph", "cuda-graph-folded"])
    parser.add_argument("--onnx", type=Path, help="the exports (default: FOLDER/onnx.tar.gz)")
    parser.add_argument("--runtime", default=DEFAULT_RUNTIME, help="a runtime name or TOML path")
    args = parser.parse_args()
    main(args.folder, args.mode, args.onnx or args.folder / "onnx.tar.gz", args.runtime)
