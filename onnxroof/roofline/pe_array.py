"""Hardware shape: GEMM-like kernels mapped onto a processing-element array, with the padding loss.

A platform's ``[array]`` describes ``I`` instances of an ``h × w`` array of PEs (one MAC per PE per cycle).
A GEMM ``Y[M, N] = A[M, K] · B[K, N]`` (``batch`` independent ones) maps weight-stationary: a ``h × w`` tile of
``B`` (``h`` along the reduction ``K``, ``w`` along the outputs ``N``) sits in the array while the ``M`` rows of
``A`` stream through. The tiles cover ``⌈K/h⌉ · ⌈N/w⌉`` positions, the last ones padded, and the
``T = batch · ⌈K/h⌉ · ⌈N/w⌉`` tiles × ``M`` rows are spread over the instances in waves:

    utilization = K / (⌈K/h⌉ · h) · N / (⌈N/w⌉ · w) · (T · M) / (⌈T · M / I⌉ · I)

(e.g. a 100×100 weight on one 128×128 array: ``(100/128)²``). The kernel's compute roof is the peak × the
utilization. A convolution is the implicit GEMM of each group: ``M = N · Π out``, ``K = (C/group) · Π k``,
``N = M_out / group``, ``batch = group``, so a depthwise convolution (``K = Π k``, ``N = 1``) uses one column.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from onnxroof.core.errors import ShapeUnknown
from onnxroof.core.ir import OpView
from onnxroof.platform.model import PEArray

_MATMUL_OPS = {"MatMul": (0, 1), "FusedMatMul": (0, 1), "MatMulInteger": (0, 1), "QLinearMatMul": (0, 3)}
_GEMM_OPS = frozenset({"Gemm", "FusedGemm", "QGemm"})
_CONV_OPS = {"Conv": 1, "FusedConv": 1, "ConvInteger": 1, "QLinearConv": 3, "NhwcConv": 1}


@dataclass(frozen=True, slots=True)
class GemmShape:
    """``batch`` independent products ``[m, k] · [k, n]``."""

    batch: int
    m: int
    k: int
    n: int


def gemm_shape(op: OpView) -> GemmShape | None:
    """The GEMM an op performs (module docstring), or None for ops that are not GEMM-like or lack shapes."""
    try:
        if op.op_type in _MATMUL_OPS:
            a_index, _ = _MATMUL_OPS[op.op_type]
            a, y = op.input(a_index), op.output(0)
            if a is None or y is None or not a.shape or not y.shape:
                return None
            k = a.shape[-1]
            m, n = (y.shape[-2], y.shape[-1]) if len(y.shape) >= 2 else (1, y.shape[-1])
            if None in (k, m, n):
                return None
            return GemmShape(y.numel // (m * n), m, k, n)
        if op.op_type in _GEMM_OPS:
            a, y = op.input(0), op.output(0)
            if a is None or y is None or not a.is_static_shape or not y.is_static_shape or len(y.shape) != 2:
                return None
            k = a.shape[0] if op.attrs.get("transA", 0) else a.shape[1]
            return GemmShape(1, y.shape[0], k, y.shape[1])
        if op.op_type in _CONV_OPS:
            w, y = op.input(_CONV_OPS[op.op_type]), op.output(0)
            if w is None or y is None or not w.is_static_shape or not y.is_static_shape or len(y.shape) < 3:
                return None
            group = int(op.attrs.get("group", 1) or 1)
            return GemmShape(group, y.shape[0] * math.prod(y.shape[2:]), math.prod(w.shape[1:]), w.shape[0] // group)
    except ShapeUnknown:
        return None
    return None


def first_gemm_shape(ops: Iterable[OpView]) -> GemmShape | None:
    """The GEMM of the first GEMM-like member of a kernel (its anchor, or the Conv inside a QDQ group)."""
    for op in ops:
        shape = gemm_shape(op)
        if shape is not None:
            return shape
    return None


def utilization(shape: GemmShape, array: PEArray) -> float:
    """Share of the array's PE-cycles doing useful MACs for ``shape`` (formula: module docstring)."""
    if min(shape.batch, shape.m, shape.k, shape.n) <= 0:
        return 1.0
    k_tiles, n_tiles = math.ceil(shape.k / array.height), math.ceil(shape.n / array.width)
    rows = shape.k / (k_tiles * array.height)
    columns = shape.n / (n_tiles * array.width)
    units = shape.batch * k_tiles * n_tiles * shape.m
    waves = units / (math.ceil(units / array.instances) * array.instances)
    return rows * columns * waves
