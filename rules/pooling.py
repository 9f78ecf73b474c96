"""Cost rules: pooling (MaxPool, AveragePool, LpPool and their Global forms).

Counting rules are those of :mod:`onnxroof.rules.elementwise`. A windowed pool visits ``K`` input
positions per output element, K = kernel volume = Π kernel_shape; every visit costs the same whether the
position is real or padding, so strides, dilations, pads and ceil_mode enter only through the output shape.
A global pool visits every input element once (N = input elements). ``macs`` is always 0.

Traffic: the input is read once (window overlap is served from cache), every output written once.
"""

from __future__ import annotations

import math

from onnxroof.core.cost import Cost
from onnxroof.core.ir import OpView
from onnxroof.core.registry import Family
from onnxroof.core.states import OpClass
from onnxroof.rules._common import out_numel, required_input, streaming

FAMILY = Family("pooling", OpClass.POOLING)
rule = FAMILY.rule

_L2 = 2  # LpPool's p for which |x|^p is a single square x·x


def _kernel_volume(op: OpView) -> int:
    return math.prod(op.attrs["kernel_shape"])


def _lp_per_element(op: OpView) -> int:
    """Operations per visited element of Σ|x|^p: x·x + add for p = 2; |x|, pow, add otherwise."""
    return 2 if op.attrs.get("p", _L2) == _L2 else 3


@rule("MaxPool")
def max_pool(op: OpView) -> Cost:
    """ai.onnx::MaxPool.

    Formula: FLOPs = N_out · K, N_out = elements of Y, K = Π kernel_shape: 1 compare per window
      position.
    Bytes: read X; write Y and the optional int64 Indices output if present.
    Assumptions: padded positions are compared like real ones (a constant −∞ would be cheaper; no
      runtime distinguishes them); dilations and strides change only N_out.
    """
    return streaming(op, out_numel(op) * _kernel_volume(op))


@rule("AveragePool")
def average_pool(op: OpView) -> Cost:
    """ai.onnx::AveragePool.

    Formula: FLOPs = N_out · K + N_out, N_out = elements of Y, K = Π kernel_shape: 1 add per window
      position, 1 divide per output element.
    Bytes: read X; write Y.
    Assumptions: count_include_pad only changes the divisor, not the count; padded positions are added
      like real ones.
    """
    n_out = out_numel(op)
    return streaming(op, n_out * _kernel_volume(op) + n_out)


@rule("LpPool")
def lp_pool(op: OpView) -> Cost:
    """ai.onnx::LpPool. y = (Σ_window |x|^p)^(1/p).

    Formula: FLOPs = N_out · K · e + N_out, N_out = elements of Y, K = Π kernel_shape, e = operations per
      window position: e = 2 for p = 2 (x·x, add), e = 3 otherwise (|x|, pow p, add); 1 root per output
      element (sqrt, or pow 1/p).
    Bytes: read X; write Y.
    Assumptions: padded positions are visited like real ones.
    """
    n_out = out_numel(op)
    return streaming(op, n_out * _kernel_volume(op) * _lp_per_element(op) + n_out)


@rule("GlobalMaxPool")
def global_max_pool(op: OpView) -> Cost:
    """ai.onnx::GlobalMaxPool: max over all spatial positions of each (batch, channel).

    Formula: FLOPs = N, N = elements of X: 1 compare per element.
    Bytes: read X; write Y (B × C × 1 × ...).
    Assumptions: the running max starts from −∞.
    """
    return streaming(op, required_input(op, 0).numel)


@rule("GlobalAveragePool")
def global_average_pool(op: OpView) -> Cost:
    """ai.onnx::GlobalAveragePool: mean over all spatial positions of each (batch, channel).

    Formula: FLOPs = N + N_out, N = elements of X, N_out = elements of Y: 1 add per input element,
      1 divide per output element.
    Bytes: read X; write Y.
    Assumptions: the sum starts from 0.
    """
    return streaming(op, required_input(op, 0).numel + out_numel(op))


@rule("GlobalLpPool")
def global_lp_pool(op: OpView) -> Cost:
    """ai.onnx::GlobalLpPool. y = (Σ_spatial |x|^p)^(1/p) per (batch, channel).

    Formula: FLOPs = e·N + N_out, N = elements of X, N_out = elements of Y, e = 2 for p = 2 (x·x, add),
      e = 3 otherwise (|x|, pow p, add); 1 root per output element.
    Bytes: read X; write Y.
    Assumptions: the sum starts from 0.
    """
    return streaming(op, _lp_per_element(op) * required_input(op, 0).numel + out_numel(op))
