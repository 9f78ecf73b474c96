"""Cost rules: matrix products (MatMul, Gemm, Einsum).

A multiply-accumulate is ``FLOPS_PER_MAC`` = 2 FLOPs. Bytes: every operand read once at its own size
(a broadcast operand is not re-read per batch), the output written once.
"""

from __future__ import annotations

import math
import string

from onnxroof.core.cost import FLOPS_PER_MAC, Cost
from onnxroof.core.errors import ShapeUnknown
from onnxroof.core.ir import OpView
from onnxroof.core.registry import Family
from onnxroof.core.states import OpClass
from onnxroof.rules._common import (
    checked_gemm_shape,
    inputs_bytes,
    outputs_bytes,
    required_input,
    required_output,
    shape_of,
)

FAMILY = Family("matmul", OpClass.MATMUL)
rule = FAMILY.rule
FAMILY.classes("FusedMatMul", "FusedGemm", domain="com.microsoft")  # ONNX Runtime's fused ops: no rule (unsupported)


def matmul_macs(op: OpView) -> int:
    """MACs of a numpy-style matrix product of input 0 ``A[..., M, K]``: numel(Y) · K (K from
    :func:`onnxroof.core.gemm.gemm_shape`).

    Shared by MatMul and the quantized products (MatMulInteger, QLinearMatMul...) of
    :mod:`onnxroof.rules.quantized`.
    """
    out = required_output(op).numel
    shape_of(required_input(op, 0))  # raises ShapeUnknown naming A when it has no static shape
    k = checked_gemm_shape(op).k
    assert k is not None  # checked_gemm_shape raised otherwise
    return out * k


def gemm_mnk(op: OpView) -> tuple[int, int, int]:
    """``(M, N, K)`` of a Gemm-like op: ``A`` is input 0 (``[K, M]`` when ``transA``), N is the output's last dim.

    Shared by Gemm and com.microsoft::QGemm.
    """
    shape_of(required_input(op, 0))  # raise ShapeUnknown naming the first tensor without a static shape
    shape_of(required_output(op))
    shape = checked_gemm_shape(op)
    m, n, k = shape.m, shape.n, shape.k
    assert m is not None and n is not None and k is not None  # checked_gemm_shape raised otherwise
    return m, n, k


@rule("MatMul")
def matmul(op: OpView) -> Cost:
    """Batched matrix product ``Y[..., M, N] = A[..., M, K] · B[..., K, N]`` (numpy semantics).

    Formula: MACs = numel(Y) · K, K = A.shape[-1] (1-D operands promoted as numpy does, so the
    formula holds for them too); FLOPs = 2 · MACs.
    Bytes: read A and B once each, write Y.
    Assumptions: batch broadcasting re-uses the smaller operand without re-reading it.
    Reference: ONNX MatMul spec; numpy.matmul.
    """
    macs = matmul_macs(op)
    return Cost(flops=FLOPS_PER_MAC * macs, macs=macs, bytes_read=inputs_bytes(op), bytes_written=outputs_bytes(op))


@rule("Gemm")
def gemm(op: OpView) -> Cost:
    """General matrix multiply ``Y = α·op(A)·op(B) + β·C``, ``op(A)`` is ``[M, K]``, ``op(B)`` is ``[K, N]``.

    Formula: MACs = M·N·K; FLOPs = 2·MACs + M·N [α ≠ 1] + M·N [C given] + M·N [C given and β ≠ 1].
    Bytes: read A, B and C (at C's own, possibly broadcast, size), write Y.
    Assumptions: none beyond the spec (transA/transB only change which axis is K).
    Reference: ONNX Gemm spec.
    """
    m, n, k = gemm_mnk(op)
    macs = m * n * k
    flops = FLOPS_PER_MAC * macs
    if op.attrs.get("alpha", 1.0) != 1.0:
        flops += m * n
    if op.input(2) is not None:
        flops += m * n
        if op.attrs.get("beta", 1.0) != 1.0:
            flops += m * n
    return Cost(flops=flops, macs=macs, bytes_read=inputs_bytes(op), bytes_written=outputs_bytes(op))


def _expand_ellipsis(term: str, rank: int, letters: str) -> str:
    if "..." not in term:
        return term
    explicit = len(term) - 3
    width = rank - explicit
    if width < 0:
        raise ShapeUnknown(f"einsum term {term!r} rank {rank}")
    return term.replace("...", letters[len(letters) - width :] if width else "")


def einsum_terms(equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """Operand index strings and output string, ellipses expanded to explicit letters."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    used = set(equation) - set(".,->")
    spare = "".join(c for c in string.ascii_uppercase + string.ascii_lowercase if c not in used)
    width = max((r - (len(t) - 3) for t, r in zip(terms, ranks, strict=True) if "..." in t), default=0)
    broadcast = spare[:width]
    terms = [_expand_ellipsis(t, r, broadcast) for t, r in zip(terms, ranks, strict=True)]
    if arrow:
        out = _expand_ellipsis(rhs, width + len(rhs) - 3, broadcast) if "..." in rhs else rhs
    else:  # implicit mode: broadcast letters, then letters seen exactly once, alphabetically
        counts = {c: "".join(terms).count(c) for c in set("".join(terms))}
        out = broadcast + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in broadcast))
    return terms, out


@rule("Einsum")
def einsum(op: OpView) -> Cost:
    """Einstein summation, contracted pairwise left to right.

    Formula: for each pairwise step (running result ⊗ next operand) MACs = Π sizes of the union of the
    two operands' indices; the intermediate keeps indices still needed by later operands or the output.
    For two operands this is the exact count Π over all distinct indices. A single operand costs
    FLOPs = numel(input) when it sums over an index, 0 for a pure transpose/diagonal copy.
    FLOPs = 2 · MACs (+ the single-operand sums).
    Bytes: read every operand once, write the output.
    Assumptions: the runtime contracts left to right without reordering (ORT does).
    Reference: ONNX Einsum spec; numpy.einsum.
    """
    operands = [shape_of(t) for t in op.inputs if t is not None]
    terms, out = einsum_terms(str(op.attrs["equation"]), [len(s) for s in operands])
    size: dict[str, int] = {}
    for term, shape in zip(terms, operands, strict=True):
        for letter, dim in zip(term, shape, strict=True):
            size[letter] = max(size.get(letter, 1), dim)
    read, written = inputs_bytes(op), outputs_bytes(op)
    if len(terms) == 1:
        sums = set(terms[0]) - set(out)
        flops = float(math.prod(operands[0])) if sums else 0.0
        return Cost(flops=flops, bytes_read=read, bytes_written=written)
    macs = 0
    current = terms[0]
    for position in range(1, len(terms)):
        nxt = terms[position]
        union = set(current) | set(nxt)
        macs += math.prod(size[c] for c in union)
        later = set("".join(terms[position + 1 :])) | set(out)
        current = "".join(c for c in sorted(union) if c in later)
    return Cost(flops=FLOPS_PER_MAC * macs, macs=macs, bytes_read=read, bytes_written=written)
