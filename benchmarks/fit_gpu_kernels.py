"""Fit the gpu time model's two fixed kernel times on half the measured H200 kernels, report the other half.

    python benchmarks/fit_gpu_kernels.py [benchmarks/data/gpu/kernels.csv]

The rows of ``kernels.csv`` (benchmarks/data/gpu/README.md) are split by position: even rows fit, odd rows
test. ``transfer_latency_s`` is fitted on the streaming rows (elementwise, reduction, norm, softmax),
``library_latency_s`` on the library rows (GEMM, GEMV, batched GEMM, convolution, SDPA), each to the value on a
0.1 µs grid that minimizes the median |predicted / measured − 1| of its fitting rows. Prints both constants,
the median error per kind on the test rows and over all rows, with the roofline beside it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from onnxroof.measure.gpu_kernels import predict, read_kernels, summarize
from onnxroof.platform.lookup import load_platform
from onnxroof.roofline.gpu import GpuTime
from onnxroof.roofline.place import ROOFLINE

STREAMING = {"elementwise", "reduction", "norm", "softmax"}
GRID = np.round(np.arange(0.0, 8.01e-6, 0.1e-6), 9)


def _median_error(kernels, model, platform) -> float:
    predicted = predict(kernels, platform, model)
    return float(np.median([abs(p / k.time_s - 1) for k, p in zip(kernels, predicted, strict=True)]))


def main(path: str) -> None:
    kernels = read_kernels(path)
    platform = load_platform("h200")
    fit, test = kernels[0::2], kernels[1::2]
    stream = [k for k in fit if k.kind in STREAMING]
    library = [k for k in fit if k.kind not in STREAMING]
    transfer = min(GRID, key=lambda t: _median_error(stream, GpuTime(transfer_latency_s=t), platform))
    lib = min(GRID, key=lambda t: _median_error(library, GpuTime(library_latency_s=t), platform))
    model = GpuTime(transfer_latency_s=float(transfer), library_latency_s=float(lib))
    print(f"fitted on {len(fit)} even rows: transfer_latency_s = {transfer:.1e}, library_latency_s = {lib:.1e}")
    for name, rows in (("test (odd rows)", test), ("all rows", kernels)):
        for label, m in (("gpu", model), ("roofline", ROOFLINE)):
            s = summarize(rows, predict(rows, platform, m))
            kinds = ", ".join(f"{kind} {error:.0%} ({n})" for kind, error, n in s.by_kind)
            print(f"{name:16} {label:8} median |error| {s.median:.1%} over {s.rows}: {kinds}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).parent / "data" / "gpu" / "kernels.csv"))
