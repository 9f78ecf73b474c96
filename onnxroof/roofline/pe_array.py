"""Hardware shape: GEMM-like kernels mapped onto a processing-element array, with the padding loss.

A platform's ``[array]`` describes ``I`` instances of an ``h × w`` array of PEs (one MAC per PE per cycle).
A GEMM ``Y[M, N] = A[M, K] · B[K, N]`` (``groups`` independent ones: :func:`onnxroof.core.gemm.gemm_shape`) maps
weight-stationary: a ``h × w`` tile of ``B`` (``h`` along the reduction ``K``, ``w`` along the outputs ``N``) sits in
the array while the ``M`` rows of ``A`` stream through. The tiles cover ``⌈K/h⌉ · ⌈N/w⌉`` positions, the last ones
padded, and the ``T = groups · ⌈K/h⌉ · ⌈N/w⌉`` tiles × ``M`` rows are spread over the instances in waves:

    utilization = K / (⌈K/h⌉ · h) · N / (⌈N/w⌉ · w) · (T · M) / (⌈T · M / I⌉ · I)

(e.g. a 100×100 weight on one 128×128 array: ``(100/128)²``). The kernel's compute roof is the peak × the
utilization. A convolution is the implicit GEMM of each group: ``M = N · Π out``, ``K = (C/group) · Π k``,
``N = M_out / group``, ``groups = group``, so a depthwise convolution (``K = Π k``, ``N = 1``) uses one column.
"""

from __future__ import annotations

import math

from onnxroof.core.gemm import GemmShape
from onnxroof.platform.model import PEArray


def utilization(shape: GemmShape, array: PEArray) -> float:
    """Share of the array's PE-cycles doing useful MACs for ``shape`` (formula: module docstring); ``shape`` must
    be :attr:`~onnxroof.core.gemm.GemmShape.complete` (:func:`~onnxroof.core.gemm.array_gemm` gives only those)."""
    groups, m, k, n = shape.groups, shape.m, shape.k, shape.n
    if groups is None or m is None or k is None or n is None:
        raise ValueError(f"PE-array utilization needs a complete GEMM shape, got {shape}")
    if min(groups, m, k, n) <= 0:
        return 1.0
    k_tiles, n_tiles = math.ceil(k / array.height), math.ceil(n / array.width)
    rows = k / (k_tiles * array.height)
    columns = n / (n_tiles * array.width)
    units = groups * k_tiles * n_tiles * m
    waves = units / (math.ceil(units / array.instances) * array.instances)
    return rows * columns * waves
