"""Measured GPU kernels against a time model: one row of ``benchmarks/data/gpu/kernels.csv`` per timed kernel
shape (CUDA events, median of repeats after warm-up), predicted with the same placement the analyses use.

The CSV's columns (the measurement script's schema): ``kind`` (gemm | bmm | gemv | conv | sdpa | elementwise |
reduction | norm | softmax), ``op``, ``dtype`` (fp16, bf16, fp32, tf32, int8: the platform precision it computes
at), the GEMM view ``m, n, k, batch`` (``out[batch, m, n] = a[batch, m, k] @ b[batch, k, n]``), the convolution
``n_img, c_in, h, w, c_out, r, s, stride, pad, dilation, groups`` (NCHW input, weight ``c_out × c_in/groups × r ×
s``), attention ``heads, kv_heads, q_len, kv_len, head_dim, causal``, ``numel``, ``flops``, ``bytes`` (ideal:
inputs read once, output written once), ``time_s`` and ``repeats``.

Each row becomes one row of :class:`~onnxroof.roofline.place.Work` with its descriptor (:func:`row_work`), placed
without launches (CUDA events around a kernel time the device, not the host's launch). The error of a row is
``predicted / measured − 1``; :func:`summarize` gives the median ``|error|`` per kind and over all rows.
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np

from onnxroof.core.descriptor import ConvGeometry, KernelDescriptor
from onnxroof.core.errors import OnnxroofError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.gemm import GemmShape
from onnxroof.platform.model import Platform
from onnxroof.roofline.place import Floats, TimeModel, Work, floats, place
from onnxroof.runtime.classes import kernel_class
from onnxroof.runtime.model import Runtime

#: The op class each measured kind runs as (convolutions: ``depthwise`` when every group has one channel).
KIND_CLASSES: Mapping[str, str] = {
    "gemm": "matmul",
    "bmm": "matmul",
    "gemv": "matmul",
    "conv": "conv",
    "sdpa": "other",
    "elementwise": "elementwise",
    "reduction": "reduction",
    "norm": "normalization",
    "softmax": "softmax",
}
_DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "tf32": "float32", "int8": "int8"}


class KernelDataError(OnnxroofError):
    """A kernels CSV row that cannot be read (names the file, row and column)."""


@frozen_dataclass(slots=True)
class MeasuredKernel:
    """One measured row: its kind and op, the precision, ideal FLOPs and bytes, the measured seconds, the
    descriptor a time model reads, and an attention row's query tokens (``q_len``; None for other kinds)."""

    kind: str
    op: str
    precision: str
    flops: float
    bytes: float
    time_s: float
    descriptor: KernelDescriptor
    queries: int | None = None


def read_kernels(path: str | Path) -> tuple[MeasuredKernel, ...]:
    """Every row of a kernels CSV (module docstring); :class:`KernelDataError` names the file, row and column of
    the first bad value."""
    with open(path, newline="", encoding="utf-8") as handle:
        return tuple(_row(row, f"{path}: row {number}") for number, row in enumerate(csv.DictReader(handle), 2))


def _number(row: Mapping[str, str], key: str, where: str, default: float | None = None) -> float:
    text = (row.get(key) or "").strip()
    if not text:
        if default is None:
            raise KernelDataError(f"{where}: column {key!r} is empty")
        return default
    try:
        return float(text)
    except ValueError:
        raise KernelDataError(f"{where}: column {key!r} is not a number: {text!r}") from None


def _row(row: Mapping[str, str], where: str) -> MeasuredKernel:
    kind = (row.get("kind") or "").strip()
    if kind not in KIND_CLASSES:
        raise KernelDataError(f"{where}: column 'kind' must be one of {', '.join(KIND_CLASSES)}, got {kind!r}")
    precision = (row.get("dtype") or "").strip()
    if precision not in _DTYPES:
        raise KernelDataError(f"{where}: column 'dtype' must be one of {', '.join(_DTYPES)}, got {precision!r}")
    time_s = _number(row, "time_s", where)
    if time_s <= 0:
        raise KernelDataError(f"{where}: column 'time_s' must be positive, got {time_s!r}")
    return MeasuredKernel(
        kind=kind,
        op=(row.get("op") or "").strip(),
        precision=precision,
        flops=_number(row, "flops", where, 0.0),
        bytes=_number(row, "bytes", where, 0.0),
        time_s=time_s,
        descriptor=_descriptor(row, kind, _DTYPES[precision], where),
        queries=int(_number(row, "q_len", where)) if kind == "sdpa" else None,
    )


def _descriptor(row: Mapping[str, str], kind: str, dtype: str, where: str) -> KernelDescriptor:
    """The kernel as the time model sees it: a product's GEMM view, a convolution's implicit GEMM and geometry
    (``h_out = ⌊(h + 2·pad − dilation·(r − 1) − 1) / stride⌋ + 1``, likewise ``w_out``), none for the rest."""
    if kind in ("gemm", "bmm", "gemv"):
        batch, m, n, k = (int(_number(row, key, where, 1.0)) for key in ("batch", "m", "n", "k"))
        return KernelDescriptor("matmul", GemmShape(batch, m, n, k, k, n), dtype)
    if kind != "conv":
        return KernelDescriptor(KIND_CLASSES[kind], None, dtype)
    required = {key: int(_number(row, key, where)) for key in ("n_img", "c_in", "h", "w", "c_out")}
    optional = (("r", 1.0), ("s", 1.0), ("stride", 1.0), ("pad", 0.0), ("dilation", 1.0), ("groups", 1.0))
    values = required | {key: int(_number(row, key, where, default)) for key, default in optional}
    stride, pad, dilation, groups = values["stride"], values["pad"], values["dilation"], values["groups"]
    h_out = (values["h"] + 2 * pad - dilation * (values["r"] - 1) - 1) // stride + 1
    w_out = (values["w"] + 2 * pad - dilation * (values["s"] - 1) - 1) // stride + 1
    per_in, per_out = values["c_in"] // groups, values["c_out"] // groups
    geometry = ConvGeometry(
        values["n_img"], groups, per_in, per_out, (values["r"], values["s"]), (stride, stride), (dilation, dilation)
    )
    op_class = "depthwise" if groups > 1 and per_in == 1 else "conv"
    shape = GemmShape(groups, values["n_img"] * h_out * w_out, per_out, per_in * values["r"] * values["s"])
    return KernelDescriptor(op_class, shape, dtype, conv=geometry)


def row_work(kernels: Sequence[MeasuredKernel]) -> Work:
    """The measured kernels as placement rows: their FLOPs, bytes, precision, op class and descriptor, no
    launches, PE utilization 1, every byte cold (the measurement cycles input sets of ≥ 3 × the L2 so that
    operands come from DRAM), and each row's runtime kernel class (:func:`~onnxroof.runtime.classes.kernel_class`:
    products have no weight input here, SDPA rows are attention: ``decode_attention`` at one query token, else
    ``prefill_attention``), the key of a runtime's ``[efficiency]``."""
    count = len(kernels)
    return Work(
        flops=floats([k.flops for k in kernels]),
        bytes=floats([k.bytes for k in kernels]),
        precision=np.asarray([k.precision for k in kernels], dtype=object),
        op_class=np.asarray([k.descriptor.op_class for k in kernels], dtype=object),
        runs=np.ones(count, dtype=bool),
        launches=np.zeros(count),
        utilization=np.ones(count),
        cold_bytes=floats([k.bytes for k in kernels]),
        descriptors=tuple(k.descriptor for k in kernels),
        runtime_class=np.asarray([_runtime_class(k) for k in kernels], dtype=object),
    )


def _runtime_class(kernel: MeasuredKernel) -> str:
    gemm = kernel.descriptor.gemm
    m = gemm.m if gemm is not None and kernel.descriptor.op_class == "matmul" else None
    return str(kernel_class(kernel.descriptor.op_class, m, None, kernel.kind == "sdpa", kernel.queries))


def predict(
    kernels: Sequence[MeasuredKernel], platform: Platform, model: TimeModel, runtime: Runtime | None = None
) -> Floats:
    """Each kernel's predicted seconds on ``platform`` through ``model`` (with ``runtime``'s efficiency factors
    per kernel class when given)."""
    return place(row_work(kernels), platform, model, runtime).latency_s


@frozen_dataclass(slots=True)
class ErrorSummary:
    """Median ``|predicted / measured − 1|`` over all rows and per kind, with the row counts, worst kind first."""

    median: float
    rows: int
    by_kind: tuple[tuple[str, float, int], ...]


def summarize(kernels: Sequence[MeasuredKernel], predicted: Iterable[float]) -> ErrorSummary:
    """The median absolute relative error over all rows and per kind (module docstring)."""
    errors = [abs(p / k.time_s - 1.0) for k, p in zip(kernels, predicted, strict=True)]
    kinds: dict[str, list[float]] = {}
    for kernel, error in zip(kernels, errors, strict=True):
        kinds.setdefault(kernel.kind, []).append(error)
    by_kind = sorted(((kind, statistics.median(e), len(e)) for kind, e in kinds.items()), key=lambda r: -r[1])
    return ErrorSummary(statistics.median(errors) if errors else 0.0, len(errors), tuple(by_kind))
