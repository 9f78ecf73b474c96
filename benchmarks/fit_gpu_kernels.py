"""Fit the gpu time model's H200 constants on half the measured H200 kernels, report the other half and run 2.

    python benchmarks/fit_gpu_kernels.py [benchmarks/data/gpu/kernels.csv] [benchmarks/data/gpu/run2/kernels.csv]

The rows of run 1's ``kernels.csv`` (benchmarks/data/gpu/README.md) are split by position: even rows fit, odd rows
test; run 2 (an independent run an hour later, repeating run 1's shapes and adding GEMVs) plays no part in any fit.
Fitted, each to the grid value that minimizes the median |predicted / measured − 1| of its fitting rows:

* ``library_latency_s`` (0.1 µs grid) and ``max_split_k`` (1, 2, 4, 8, unbounded) jointly, on the even library
  rows (GEMM, GEMV, batched GEMM, convolution, SDPA);
* ``transfer_latency_s`` (0.1 µs grid) on the even elementwise rows (the streaming class whose efficiency is 1);
* ``grouped_conv_share`` (0.01 grid, 0.30–1.00), with the two fitted above, on the even grouped-convolution rows
  (``groups > 1``, not depthwise, fewer than 64 output channels per group) whose prediction it moves: more than
  10 % between shares 1 and 0.5 (the others are latency-bound and carry no information on it);
* the ``torch-cuda`` runtime's ``[efficiency]`` factors of ``normalization``, ``softmax``, ``reduction`` and
  ``prefill_attention`` (0.01 grid) on the even rows of each class (for the last, SDPA rows of more than one
  query token: run 1's even ones all have head size 128, its odd ones 64), with the fitted transfer latency (run 1
  has its 10 reduction rows at odd positions: none to fit on, so ``reduction`` keeps the runtime file's value,
  measured by ``calibrate``).

Prints the fitted values, then the median error per kind on the test rows (run 1 odd) and on run 2: the model as
committed (``GPU`` with ``runtimes/torch-cuda.toml``) and the model without the runtime's factors, each on the
datasheet platform ``h200`` and on the calibrated one (``run2/h200-calibrated.toml``, written by ``onnxroof
calibrate --device cuda`` on that H200), with the roofline beside them.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from onnxroof.measure.gpu_kernels import predict, read_kernels, summarize
from onnxroof.platform.lookup import load_platform
from onnxroof.roofline.gpu import GPU, NARROW_GROUP, GpuTime
from onnxroof.roofline.place import ROOFLINE
from onnxroof.runtime.lookup import load_runtime
from onnxroof.runtime.model import RuntimeKernelClass

DATA = Path(__file__).parent / "data" / "gpu"
STREAMING = {"elementwise", "reduction", "norm", "softmax"}
GRID = np.round(np.arange(0.0, 8.01e-6, 0.1e-6), 9)
SPLITS = (1.0, 2.0, 4.0, 8.0, float("inf"))
FACTORS = np.round(np.arange(0.1, 1.001, 0.01), 2)
SHARES = np.round(np.arange(0.3, 1.001, 0.01), 2)
CLASSES = {"norm": RuntimeKernelClass.NORMALIZATION, "softmax": RuntimeKernelClass.SOFTMAX}
CLASSES["reduction"] = RuntimeKernelClass.REDUCTION
CLASSES["sdpa"] = RuntimeKernelClass.PREFILL_ATTENTION  # the SDPA rows of more than one query token


def _median_error(kernels, model, platform, runtime=None) -> float:
    predicted = predict(kernels, platform, model, runtime)
    return float(np.median([abs(p / k.time_s - 1) for k, p in zip(kernels, predicted, strict=True)]))


def _grouped(kernel) -> bool:
    """A grouped convolution that is not depthwise, narrower than ``NARROW_GROUP`` per group (what
    ``grouped_conv_share`` applies to)."""
    conv = kernel.descriptor.conv
    narrow = conv is not None and conv.out_per_group < NARROW_GROUP
    return kernel.descriptor.op_class == "conv" and conv is not None and conv.groups > 1 and narrow


def _moved_by_share(kernels, model, platform):
    """The rows of ``kernels`` whose prediction moves by more than 10 % between grouped shares 1 and 0.5."""
    whole = predict(kernels, platform, replace(model, grouped_conv_share=1.0))
    half = predict(kernels, platform, replace(model, grouped_conv_share=0.5))
    return [k for k, a, b in zip(kernels, whole, half, strict=True) if b > 1.1 * a]


def fit(kernels, platform):
    """The fitted constants (module docstring) from the even rows of ``kernels``."""
    even = kernels[0::2]
    library = [k for k in even if k.kind not in STREAMING]
    pairs = [(s, t) for s in SPLITS for t in GRID]
    split, lib = min(
        pairs, key=lambda p: _median_error(library, GpuTime(library_latency_s=p[1], max_split_k=p[0]), platform)
    )
    elementwise = [k for k in even if k.kind == "elementwise"]
    transfer = min(GRID, key=lambda t: _median_error(elementwise, GpuTime(transfer_latency_s=t), platform))
    model = GpuTime(transfer_latency_s=float(transfer), library_latency_s=float(lib), max_split_k=split)
    grouped = _moved_by_share([k for k in even if _grouped(k)], model, platform)
    share = min(SHARES, key=lambda r: _median_error(grouped, replace(model, grouped_conv_share=float(r)), platform))
    model = replace(model, grouped_conv_share=float(share))
    base = load_runtime("torch-cuda")
    factors = {}
    for kind, cls in CLASSES.items():
        rows = [k for k in even if k.kind == kind and (kind != "sdpa" or (k.queries or 1) > 1)]
        if not rows:  # run 1 put every reduction row at an odd position: nothing to fit, the runtime's value stands
            factors[cls] = base.factor(cls)
            continue

        def error(f, rows=rows, cls=cls):
            return _median_error(rows, model, platform, replace(base, efficiency={cls: float(f)}))

        factors[cls] = float(min(FACTORS, key=error))
    return model, factors


def _line(name, rows, platform, model, runtime=None) -> str:
    s = summarize(rows, predict(rows, platform, model, runtime))
    kinds = ", ".join(f"{kind} {error:.0%} ({n})" for kind, error, n in s.by_kind)
    return f"{name:40} median |error| {s.median:.1%} over {s.rows}: {kinds}"


def main(run1: str, run2: str) -> None:
    kernels = read_kernels(run1)
    platform = load_platform("h200")
    model, factors = fit(kernels, platform)
    fitted = ", ".join(f"{cls} {f:.2f}" for cls, f in factors.items())
    print(
        f"fitted on {len(kernels[0::2])} even rows: transfer_latency_s = {model.transfer_latency_s:.1e}, "
        f"library_latency_s = {model.library_latency_s:.1e}, max_split_k = {model.max_split_k:g}, "
        f"grouped_conv_share = {model.grouped_conv_share:g}; "
        f"torch-cuda efficiency: {fitted}"
    )
    torch_cuda = load_runtime("torch-cuda")
    calibrated = load_platform(str(DATA / "run2" / "h200-calibrated.toml"))
    sets = [("run 1 odd (held out)", kernels[1::2])]
    if Path(run2).exists():
        sets.append(("run 2 (held out)", read_kernels(run2)))
    for name, rows in sets:
        for label, plat in (("h200", platform), ("calibrated", calibrated)):
            print(_line(f"{name} {label} gpu+torch-cuda", rows, plat, GPU, torch_cuda))
            print(_line(f"{name} {label} gpu", rows, plat, GPU))
            print(_line(f"{name} {label} roofline", rows, plat, ROOFLINE))


if __name__ == "__main__":
    main(
        sys.argv[1] if len(sys.argv) > 1 else str(DATA / "kernels.csv"),
        sys.argv[2] if len(sys.argv) > 2 else str(DATA / "run2" / "kernels.csv"),
    )
