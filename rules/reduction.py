"""Cost rules: reductions (Reduce*, ArgMax/ArgMin, TopK, CumSum, CumProd).

Counting rules are those of :mod:`onnxroof.rules.elementwise`. A reduction accumulates from its identity
(0 for sums, ±∞ for max/min, 1 for products), so it costs one add / compare / multiply per INPUT element
(``N``), plus any per-element transform (|x|, x², exp) and any per-OUTPUT-element finish (divide, sqrt,
log). ``macs`` is always 0.

Traffic: the data input is read once and every output written once. Inputs that only configure the op
(Reduce*'s ``axes`` from opset 13/18, TopK's ``K``, CumSum's ``axis``) are config inputs, not charged.
"""

from __future__ import annotations

import math

from onnxroof.core.cost import Cost
from onnxroof.core.ir import OpView
from onnxroof.core.registry import Family
from onnxroof.core.states import OpClass, RuleStatus
from onnxroof.rules._common import (
    normalize_axis,
    out_numel,
    required_input,
    required_output,
    shape_of,
    streaming,
)

FAMILY = Family("reduction", OpClass.REDUCTION)
rule = FAMILY.rule

_AXES = 1  # Reduce*'s ``axes`` input (ReduceSum from opset 13, the others from 18); absent before

# op_type: (FLOPs per input element, FLOPs per output element, formula with its operations counted)
REDUCE_TABLE: dict[str, tuple[int, int, str]] = {
    "ReduceSum": (1, 0, "Σx: 1 add per input element"),
    "ReduceMean": (1, 1, "Σx / n: 1 add per input element + 1 divide per output element"),
    "ReduceMax": (1, 0, "max x: 1 compare per input element"),
    "ReduceMin": (1, 0, "min x: 1 compare per input element"),
    "ReduceProd": (1, 0, "Πx: 1 multiply per input element"),
    "ReduceL1": (2, 0, "Σ|x|: 1 abs + 1 add per input element"),
    "ReduceL2": (2, 1, "sqrt(Σx²): 1 square + 1 add per input element + 1 sqrt per output element"),
    "ReduceSumSquare": (2, 0, "Σx²: 1 square + 1 add per input element"),
    "ReduceLogSum": (1, 1, "log(Σx): 1 add per input element + 1 log per output element"),
    "ReduceLogSumExp": (
        2,
        1,
        "log(Σexp(x)): 1 exp + 1 add per input element + 1 log per output element",
    ),
}


def _reduce(op_type: str, per_input: int, per_output: int, formula: str) -> None:
    """Register ``FLOPs = per_input · N + per_output · N_out`` for ``op_type`` with a generated docstring."""

    def cost(op: OpView) -> Cost:
        n = required_input(op, 0).numel
        return streaming(op, per_input * n + per_output * out_numel(op), skip=(_AXES,))

    cost.__name__ = cost.__qualname__ = f"{op_type.lower()}_cost"
    cost.__doc__ = f"""ai.onnx::{op_type}, a reduction over ``axes``.

    Formula: FLOPs = {per_input}·N + {per_output}·N_out, N = input elements, N_out = output elements;
      {formula}.
    Bytes: read the data input; write the reduced output. The ``axes`` input (index 1, from opset 13 for
      ReduceSum and 18 for the others) is a config input, not charged; before that ``axes`` is an
      attribute.
    Assumptions: the accumulation starts from the identity, so every input element costs one step;
      with empty axes and noop_with_empty_axes=1 each output element is a reduction of one element, which
      the same formula counts (N_out = N).
    """
    rule(op_type, config_inputs=(_AXES,))(cost)


for _op_type, (_per_input, _per_output, _formula) in REDUCE_TABLE.items():
    _reduce(_op_type, _per_input, _per_output, _formula)


@rule("ArgMax", "ArgMin")
def arg_extreme(op: OpView) -> Cost:
    """ai.onnx::ArgMax / ArgMin along ``axis``.

    Formula: FLOPs = N, N = input elements: 1 compare per element (running max/min and its index).
    Bytes: read the data; write the int64 index output.
    Assumptions: keeping the index of the running extreme is bookkeeping, not arithmetic.
    """
    return streaming(op, required_input(op, 0).numel)


@rule("TopK", status=RuleStatus.APPROXIMATE, config_inputs=(1,))
def top_k(op: OpView) -> Cost:
    """ai.onnx::TopK: the K largest (or smallest) elements along ``axis``, with their indices.

    Formula: FLOPs = N · max(1, ⌈log2 K⌉), N = input elements, K = Values.shape[axis] (the output's
      extent along the axis): each element is compared against a size-K heap, about ⌈log2 K⌉ compares,
      and at least one.
    Bytes: read X; write Values and Indices. ``K`` (input 1) is a config input, not charged.
    Assumptions: APPROXIMATE. The true count depends on the algorithm (heap, partial sort, radix select)
      and on the data order; a heap selection of N elements into K slots is N·log2 K compares in the worst
      case. The final sort of the K results (``sorted=1``) is not counted.
    """
    x = required_input(op, 0)
    values = shape_of(required_output(op, 0))
    k = values[normalize_axis(op.attrs.get("axis", -1), len(values))]
    return streaming(op, x.numel * max(1, math.ceil(math.log2(k))) if k > 0 else 0, skip=(1,))


@rule("CumSum", "CumProd", config_inputs=(1,))
def cum_sum(op: OpView) -> Cost:
    """ai.onnx::CumSum (and CumProd, opset 26) along the axis given by input 1.

    Formula: FLOPs = N, N = input elements: 1 add (CumProd: 1 multiply) per element.
    Bytes: read x; write y. ``axis`` (input 1) is a config input, not charged.
    Assumptions: the running sum starts from 0 (one add per element, whichever ``exclusive``/``reverse``);
      the axis value is not known statically, so the N/len first elements of each line are not discounted.
    """
    return streaming(op, required_input(op, 0).numel, skip=(1,))
