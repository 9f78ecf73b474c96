"""The GEMM a matrix product or a convolution performs: one function for its shape, read by the cost rules,
the processing-element array mapping and the findings.

``groups`` independent products ``Y[m, n] = A[m, k] · B[k, n]``:

* matmul form (MatMul and its fused and quantized variants), numpy semantics ``A[..., M, K] · B[..., K, N]``:
  ``k = A[-1]``, ``m = Y[-2]`` (1 for a 1-D output), ``n = Y[-1]``, ``groups = numel(Y) / (m · n)`` (the batch);
  when ``B`` has no batch dims (rank ≤ 2: a weight every batch entry shares) the batch folds into the rows, as
  every GEMM library runs it: ``m = numel(Y) / n``, ``groups = 1`` (a decode step's ``[B, 1, K] · [K, N]`` is one
  ``B × N × K`` GEMM reading the weight once, not B GEMVs reading it B times); a scalar output (vector · vector)
  has no ``m`` or ``n``;
* gemm form (Gemm, FusedGemm, QGemm): ``op(A)[M, K] · op(B)[K, N]`` (``transA`` / ``transB`` choose the axes):
  ``m``, ``k`` from ``A``, ``n = Y[-1]``, one group;
* convolution (Conv, FusedConv, ConvInteger, QLinearConv, NhwcConv), the implicit GEMM of each group, filter
  ``W[M, C/group, *k]``: ``m = N · Π out``, ``k = (C/group) · Π k``, ``n = M / group``, ``groups = group``;
* ConvTranspose, filter ``W[C, M/group, *k]``: channels only (its GEMM is a scatter, not mapped here);
* packed low-bit products (com.microsoft MatMulNBits, MatMulBnb4): the matmul form with ``k`` and ``n`` the
  op's ``K`` and ``N`` attributes (B is stored packed, so its shape says neither), B a shared weight (the batch
  folds into the rows).

``in_channels`` and ``out_channels`` are the channel dims of the reduction and of the output per group, the dims a
tensor-core tile pads: ``K`` and ``N`` of the weight ``B`` for products (``transB`` applied), ``C/group`` and
``M/group`` for convolutions (the kernel window excluded). A dim is None when it is not static.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TypeGuard

from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.ir import OpView, TensorInfo

MATMUL, GEMM, CONV, CONV_TRANSPOSE = "matmul", "gemm", "conv", "conv_transpose"

#: Op type -> (form, index of A or of the filter W, index of B).
GEMM_OPS: Mapping[str, tuple[str, int, int]] = MappingProxyType(
    {
        "MatMul": (MATMUL, 0, 1),
        "FusedMatMul": (MATMUL, 0, 1),
        "MatMulInteger": (MATMUL, 0, 1),
        "QLinearMatMul": (MATMUL, 0, 3),
        "MatMulIntegerToFloat": (MATMUL, 0, 1),
        "DynamicQuantizeMatMul": (MATMUL, 0, 1),
        "Gemm": (GEMM, 0, 1),
        "FusedGemm": (GEMM, 0, 1),
        "QGemm": (GEMM, 0, 3),
        "Conv": (CONV, 1, 1),
        "FusedConv": (CONV, 1, 1),
        "ConvInteger": (CONV, 1, 1),
        "QLinearConv": (CONV, 3, 3),
        "NhwcConv": (CONV, 1, 1),
        "ConvTranspose": (CONV_TRANSPOSE, 1, 1),
    }
)


@frozen_dataclass(slots=True)
class GemmShape:
    """``groups`` independent products ``[m, k] · [k, n]`` (module docstring); None: not static."""

    groups: int | None
    m: int | None
    n: int | None
    k: int | None
    in_channels: int | None = None
    out_channels: int | None = None

    @property
    def complete(self) -> bool:
        """Every GEMM dim is static."""
        return None not in (self.groups, self.m, self.n, self.k)

    @property
    def macs(self) -> int:
        """``groups · m · n · k`` (the shape must be :attr:`complete`)."""
        return self.groups * self.m * self.n * self.k  # type: ignore[operator]  # None excluded: callers check complete


#: Products whose B is packed low-bit weights (com.microsoft): K and N are attributes, B's stored shape is not [K, N].
PACKED_MATMUL_OPS = frozenset({"MatMulNBits", "MatMulBnb4"})


def gemm_shape(op: OpView) -> GemmShape | None:
    """The GEMM ``op`` performs (module docstring), or None for ops that are not GEMM-like or lack the tensors."""
    if op.op_type in PACKED_MATMUL_OPS:
        return _packed_matmul(op)
    form = GEMM_OPS.get(op.op_type)
    if form is None:
        return None
    kind, first, second = form
    if kind == MATMUL:
        return _matmul(op.input(first), op.input(second), op.output(0))
    if kind == GEMM:
        return _gemm(op, op.input(first), op.input(second), op.output(0))
    group = int(op.attrs.get("group", 1) or 1)
    if kind == CONV:
        return _conv(op.input(first), op.output(0), group)
    return _conv_transpose(op.input(first), group)


def _dims(t: TensorInfo | None) -> tuple[int | None, ...] | None:
    return None if t is None or t.shape is None else t.shape


def _static(dims: tuple[int | None, ...]) -> TypeGuard[tuple[int, ...]]:
    """Every dim is known (``None not in dims``, which the type checker cannot read as narrowing)."""
    return None not in dims


def _at(dims: tuple[int | None, ...] | None, i: int) -> int | None:
    return dims[i] if dims is not None and -len(dims) <= i < len(dims) else None


def _matmul(
    a: TensorInfo | None, b: TensorInfo | None, y: TensorInfo | None, shared_b: bool | None = None
) -> GemmShape | None:
    ad, bd, yd = _dims(a), _dims(b), _dims(y)
    if ad is None or yd is None or not ad:
        return None
    k = ad[-1]
    m, n = (yd[-2] if len(yd) >= 2 else 1, yd[-1]) if yd else (None, None)
    groups = None
    if y is not None and m is not None and n is not None and y.is_static_shape and m * n > 0:
        groups = y.numel // (m * n)
        if shared_b if shared_b is not None else bd is not None and len(bd) <= 2:
            m, groups = y.numel // n, 1  # the batch folds into the rows (module docstring)
    channels = (bd[-2], bd[-1]) if bd is not None and len(bd) >= 2 else (None, None)
    return GemmShape(groups, m, n, k, *channels)


def _packed_matmul(op: OpView) -> GemmShape | None:
    """MatMulNBits / MatMulBnb4: ``Y[..., M, N] = A[..., M, K] · dequantize(B)`` with K and N the op's attributes
    (B is stored packed, ``[N, ⌈K/block⌉, block·bits/8]`` or flat); M and the batch from A and Y as for MatMul."""
    k, n = op.attrs.get("K"), op.attrs.get("N")
    shape = _matmul(op.input(0), None, op.output(0), shared_b=True)
    if shape is None or not isinstance(k, int) or not isinstance(n, int):
        return None
    return GemmShape(shape.groups, shape.m, n, k, k, n)


def _gemm(op: OpView, a: TensorInfo | None, b: TensorInfo | None, y: TensorInfo | None) -> GemmShape | None:
    ad, bd, yd = _dims(a), _dims(b), _dims(y)
    if ad is None or len(ad) != 2:
        return None
    m, k = (ad[1], ad[0]) if op.attrs.get("transA", 0) else (ad[0], ad[1])
    n = yd[-1] if yd else None
    channels = (k, n)
    if bd is not None and len(bd) == 2:
        channels = (bd[1], bd[0]) if int(op.attrs.get("transB", 0)) else (bd[0], bd[1])
    return GemmShape(1, m, n, k, *channels)


def _conv(w: TensorInfo | None, y: TensorInfo | None, group: int) -> GemmShape | None:
    wd, yd = _dims(w), _dims(y)
    if wd is None or len(wd) < 2:
        return None
    spatial = wd[2:]
    window = math.prod(spatial) if _static(spatial) else None
    k = wd[1] * window if wd[1] is not None and window is not None else None
    n = wd[0] // group if wd[0] is not None else None
    m = None
    if yd is not None and len(yd) >= 3 and _static(yd):
        m = yd[0] * math.prod(yd[2:])
    return GemmShape(group, m, n, k, wd[1], n)


def _conv_transpose(w: TensorInfo | None, group: int) -> GemmShape | None:
    wd = _dims(w)
    if wd is None or len(wd) < 2:
        return None
    return GemmShape(group, None, None, None, wd[0] // group if wd[0] is not None else None, wd[1])


#: The ops whose GEMM a kernel descriptor and a PE array take: the forward products and convolutions
#: (ConvTranspose's scatter is not one).
ARRAY_OPS = frozenset(
    {"MatMul", "FusedMatMul", "MatMulInteger", "QLinearMatMul", "Gemm", "FusedGemm", "QGemm"}
    | {"Conv", "FusedConv", "ConvInteger", "QLinearConv", "NhwcConv"}
    | PACKED_MATMUL_OPS
)


def array_gemm(op: OpView) -> GemmShape | None:
    """The GEMM view of an op (:func:`gemm_shape`) as a kernel descriptor and a PE array take it, or None for ops
    that are not in :data:`ARRAY_OPS` or whose GEMM dims are not all static."""
    if op.op_type not in ARRAY_OPS:
        return None
    shape = gemm_shape(op)
    return shape if shape is not None and shape.complete else None


def first_gemm_shape(ops: Iterable[OpView]) -> GemmShape | None:
    """The GEMM of the first GEMM-like member of a kernel (its anchor, or the Conv inside a QDQ group)."""
    for op in ops:
        shape = array_gemm(op)
        if shape is not None:
            return shape
    return None
