"""Cost rules: convolutions (Conv, ConvTranspose).

Counts use the inferred output shape, so stride, dilation, padding (explicit or auto_pad) and groups are
exact. A multiply-accumulate is 2 FLOPs. MACs against zero padding are counted, as every standard count
(and every dense kernel) does.
"""

from __future__ import annotations

import math

from onnxroof.core.cost import FLOPS_PER_MAC, Cost
from onnxroof.core.errors import MalformedNode
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

FAMILY = Family("conv", OpClass.CONV)
rule = FAMILY.rule
FAMILY.classes("FusedConv", "NhwcConv", domain="com.microsoft")  # ONNX Runtime's fused ops: no rule (unsupported)


def _kernel_volume(weight_shape: tuple[int, ...]) -> int:
    return math.prod(weight_shape[2:])


def conv_macs(op: OpView, weight: int = 1) -> int:
    """MACs of a convolution whose filter ``W[M, C/group, *k]`` is input ``weight``: numel(Y) · (C / group) · Π k
    (the implicit GEMM's K, :func:`onnxroof.core.gemm.gemm_shape`).

    Shared by Conv and the quantized convolutions (ConvInteger, QLinearConv) of :mod:`onnxroof.rules.quantized`.
    """
    shape_of(required_input(op, weight))  # raises ShapeUnknown naming W when it has no static shape
    group = op.attrs.get("group", 1)
    if not isinstance(group, int) or group < 1:
        raise MalformedNode(f"node {op.id} ({op.op_type}): group = {group!r}, must be a positive integer")
    k = checked_gemm_shape(op, ("k",)).k
    assert k is not None  # checked_gemm_shape raised otherwise
    return required_output(op).numel * k


@rule("Conv")
def conv(op: OpView) -> Cost:
    """N-d convolution ``Y[N, M, *out] = X[N, C, *in] ⋆ W[M, C/group, *k] (+ B[M])``.

    Formula: MACs = numel(Y) · (C / group) · Π k; FLOPs = 2 · MACs + numel(Y) [B given].
    Bytes: read X, W and B once each, write Y.
    Assumptions: dense direct/implicit-GEMM computation (no Winograd/FFT savings).
    Reference: ONNX Conv spec; the standard count used by torchvision/fvcore.
    """
    out = required_output(op).numel
    macs = conv_macs(op)
    flops = FLOPS_PER_MAC * macs + (out if op.input(2) is not None else 0)
    return Cost(flops=flops, macs=macs, bytes_read=inputs_bytes(op), bytes_written=outputs_bytes(op))


@rule("ConvTranspose")
def conv_transpose(op: OpView) -> Cost:
    """Transposed convolution ``Y[N, M, *out]`` from ``X[N, C, *in]`` and ``W[C, M/group, *k]`` (+ B[M]).

    Formula: every input element scatters into (M / group) · Π k outputs:
    MACs = numel(X) · (M / group) · Π k; FLOPs = 2 · MACs + numel(Y) [B given].
    Bytes: read X, W and B once each, write Y.
    Assumptions: dense computation; output_padding/output_shape only change numel(Y).
    Reference: ONNX ConvTranspose spec.
    """
    x = required_input(op, 0).numel
    weight = shape_of(required_input(op, 1))
    macs = x * weight[1] * _kernel_volume(weight)
    flops = FLOPS_PER_MAC * macs + (required_output(op).numel if op.input(2) is not None else 0)
    return Cost(flops=flops, macs=macs, bytes_read=inputs_bytes(op), bytes_written=outputs_bytes(op))
