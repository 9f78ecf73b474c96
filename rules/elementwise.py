"""Cost rules: elementwise ops (arithmetic, comparisons, logic, activations, casts).

Every rule here costs ``k`` FLOPs per OUTPUT element, where ``k`` counts the arithmetic operations of the
op's defining formula in the ONNX spec (or ONNX Runtime's contrib-op docs), under these counting rules:

* each +, −, ·, /, comparison, min, max, |x|, bitwise or logical operation is one operation;
* each transcendental (exp, log, erf, tanh, sqrt, sin, cos, pow, ...) is ONE operation;
* a conditional ``c ? a : b`` costs its comparison; selecting a branch is free (except in ``Where``,
  whose condition is given, so the select is its one operation);
* operations on attribute constants alone (``√(2/π)``, ``1 − α``) are folded and cost nothing.

Traffic (``streaming``): every input is read once at its own size (a broadcast operand is read once, not
once per output element) and every output is written once. ``macs`` is always 0.

The per-op constants sit in the tables below next to the formula they are counted from; the rule
functions and their docstrings are generated from those rows by :func:`_per_element`.
"""

from __future__ import annotations

from onnxroof.core.cost import Cost
from onnxroof.core.ir import OpView
from onnxroof.core.registry import Family
from onnxroof.core.states import OpClass
from onnxroof.rules._common import out_numel, streaming

_BYTES_DOC = (
    "read every input once at its own size (a broadcast operand is read once, not once per output "
    "element); write the output."
)

FAMILY = Family("elementwise", OpClass.ELEMENTWISE)
rule = FAMILY.rule

# op_type: (FLOPs per output element, the defining formula with its operations counted)
_ONE_OP = "one operation per output element"
ELEMENTWISE_TABLE: dict[str, tuple[int, str]] = {
    # arithmetic (numpy-style broadcasting for the binary ones)
    "Add": (1, "a + b: 1 add"),
    "Sub": (1, "a − b: 1 subtract"),
    "Mul": (1, "a · b: 1 multiply"),
    "Div": (1, "a / b: 1 divide"),
    "Mod": (1, "a mod b (or fmod): 1 operation"),
    "Pow": (1, "x ^ y: 1 pow (transcendental, counted once)"),
    "Neg": (1, "−x: 1 negate"),
    "Abs": (1, "|x|: 1 operation"),
    "Reciprocal": (1, "1 / x: 1 divide"),
    "Floor": (1, "⌊x⌋: 1 operation"),
    "Ceil": (1, "⌈x⌉: 1 operation"),
    "Round": (1, "round half to even: 1 operation"),
    "Sign": (1, "sign(x): 1 operation"),
    # transcendentals: one each
    "Sqrt": (1, "√x: 1 sqrt"),
    "Exp": (1, "exp(x): 1 exp"),
    "Log": (1, "log(x): 1 log"),
    "Erf": (1, "erf(x): 1 erf"),
    "Tanh": (1, "tanh(x): 1 tanh"),
    "Sin": (1, "sin(x): 1 sin"),
    "Cos": (1, "cos(x): 1 cos"),
    "Tan": (1, "tan(x): 1 tan"),
    "Asin": (1, "asin(x): 1 asin"),
    "Acos": (1, "acos(x): 1 acos"),
    "Atan": (1, "atan(x): 1 atan"),
    "Sinh": (1, "sinh(x): 1 sinh"),
    "Cosh": (1, "cosh(x): 1 cosh"),
    "Asinh": (1, "asinh(x): 1 asinh"),
    "Acosh": (1, "acosh(x): 1 acosh"),
    "Atanh": (1, "atanh(x): 1 atanh"),
    # tests, comparisons and logic (boolean outputs)
    "IsNaN": (1, "x ≠ x: 1 test"),
    "IsInf": (1, "x = ±∞ (per detect_negative/detect_positive): 1 test"),
    "Equal": (1, "a = b: 1 compare"),
    "Less": (1, "a < b: 1 compare"),
    "LessOrEqual": (1, "a ≤ b: 1 compare"),
    "Greater": (1, "a > b: 1 compare"),
    "GreaterOrEqual": (1, "a ≥ b: 1 compare"),
    "And": (1, "a ∧ b: 1 logical op"),
    "Or": (1, "a ∨ b: 1 logical op"),
    "Xor": (1, "a ⊕ b: 1 logical op"),
    "Not": (1, "¬x: 1 logical op"),
    "BitShift": (1, "x << y or x >> y: 1 shift"),
    "BitwiseAnd": (1, "a & b: 1 bitwise op"),
    "BitwiseOr": (1, "a | b: 1 bitwise op"),
    "BitwiseXor": (1, "a ^ b: 1 bitwise op"),
    "BitwiseNot": (1, "~x: 1 bitwise op"),
    "Where": (1, "cond ? x : y: 1 select (the condition is an input, so the select is the operation)"),
    # activations
    "Relu": (1, "max(0, x): 1 max"),
    "LeakyRelu": (2, "x < 0 ? α·x : x: 1 compare + 1 multiply"),
    "PRelu": (2, "x < 0 ? slope·x : x: 1 compare + 1 multiply (slope broadcast)"),
    "ThresholdedRelu": (1, "x > α ? x : 0: 1 compare (no arithmetic on either branch)"),
    "Elu": (4, "x < 0 ? α·(exp(x) − 1) : x: 1 compare + 1 exp + 1 subtract + 1 multiply"),
    "Selu": (5, "γ·(x ≤ 0 ? α·(exp(x) − 1) : x): 1 compare + 1 exp + 1 subtract + 2 multiplies"),
    "Celu": (
        5,
        "max(0,x) + min(0, α·(exp(x/α) − 1)), evaluated as its equivalent piecewise form "
        "x < 0 ? α·(exp(x/α) − 1) : x: 1 compare + 1 divide + 1 exp + 1 subtract + 1 multiply",
    ),
    "Sigmoid": (4, "1 / (1 + exp(−x)): 1 negate + 1 exp + 1 add + 1 divide"),
    "HardSigmoid": (4, "max(0, min(1, α·x + β)): 1 multiply + 1 add + 1 min + 1 max"),
    "HardSwish": (5, "x · max(0, min(1, x/6 + 1/2)): HardSigmoid's 4 + 1 multiply"),
    "Softplus": (3, "log(exp(x) + 1): 1 exp + 1 add + 1 log"),
    "Softsign": (3, "x / (1 + |x|): 1 abs + 1 add + 1 divide"),
    "Mish": (5, "x · tanh(log(1 + exp(x))): Softplus's 3 + 1 tanh + 1 multiply"),
    "Swish": (6, "x · sigmoid(α·x) (opset 24): 1 multiply + Sigmoid's 4 + 1 multiply"),
    "Shrink": (3, "x < −λ ? x + bias : (x > λ ? x − bias : 0): 2 compares + 1 add or subtract"),
}

# com.microsoft contrib activations emitted by ONNX Runtime's transformer optimizer.
CONTRIB_TABLE: dict[str, tuple[int, str]] = {
    "Gelu": (5, "0.5·x·(1 + erf(x/√2)): 1 divide + 1 erf + 1 add + 2 multiplies"),
    "BiasGelu": (6, "Gelu(x + bias): 1 bias add + Gelu's 5"),
    "QuickGelu": (6, "x · sigmoid(α·x): 1 multiply + Sigmoid's 4 + 1 multiply"),
}

#: The table rows that are transcendental or fused activations: class ``activation``, not the family's ``elementwise``
#: (runtimes evaluate them with polynomial approximations, far from the one-op rate of Add or Relu).
ACTIVATIONS = frozenset(
    {
        *("Pow", "Sqrt", "Reciprocal", "Exp", "Log", "Erf", "Tanh", "Sigmoid"),
        *("Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"),
        *("Elu", "Selu", "Celu", "HardSwish", "Softplus", "Softsign", "Mish", "Swish"),
        *CONTRIB_TABLE,
    }
)

_GELU_ERF_FLOPS = 5  # 0.5·x·(1 + erf(x/√2)): divide, erf, add, multiply by x, multiply by 0.5
_GELU_TANH_FLOPS = 9  # 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x·x·x))): see gelu's docstring

_FLT_MAX = 3.4028234663852886e38  # Clip-1/6's schema default bounds are ±FLT_MAX: "no bound"


def _per_element(op_type: str, flops_per_element: int, formula: str, domain: str = "") -> None:
    """Declare the rule ``FLOPs = flops_per_element · N_out`` for ``op_type`` with a generated docstring (class
    ``activation`` for the op types in :data:`ACTIVATIONS`, else the family's ``elementwise``)."""
    op_class = OpClass.ACTIVATION if op_type in ACTIVATIONS else OpClass.ELEMENTWISE

    def cost(op: OpView) -> Cost:
        return streaming(op, flops_per_element * out_numel(op))

    cost.__name__ = cost.__qualname__ = f"{op_type.lower()}_cost"
    cost.__doc__ = f"""{domain or "ai.onnx"}::{op_type}, elementwise.

    Formula: FLOPs = {flops_per_element} · N_out, N_out = output elements; per element {formula}.
    Bytes: {_BYTES_DOC}
    Assumptions: operations counted per the module's rules (each transcendental = 1, a branch's compare
    counted, the select free); broadcasting costs per output element, not per input element.
    """
    rule(op_type, domain=domain, op_class=op_class)(cost)


for _op_type, (_k, _formula) in ELEMENTWISE_TABLE.items():
    _per_element(_op_type, _k, _formula)
for _op_type, (_k, _formula) in CONTRIB_TABLE.items():
    _per_element(_op_type, _k, _formula, domain="com.microsoft")


@rule("Gelu", op_class=OpClass.ACTIVATION)
def gelu(op: OpView) -> Cost:
    """ai.onnx::Gelu (opset 20), elementwise, in either form of its ``approximate`` attribute.

    Formula: FLOPs = k · N_out, N_out = output elements, with
      approximate="none": y = 0.5·x·(1 + erf(x/√2)) → k = 5 (divide, erf, add, multiply by x,
      multiply by 0.5);
      approximate="tanh": y = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x·x·x))) → k = 9 (x·x, ·x,
      ·0.044715, + x, ·√(2/π), tanh, + 1, multiply by x, multiply by 0.5).
    Bytes: read X; write Y.
    Assumptions: x³ is two multiplies (as the spec's function body computes it); √(2/π) is a constant.
    Reference: ONNX Gelu-20 function body.
    """
    k = _GELU_TANH_FLOPS if op.attrs.get("approximate", "none") == "tanh" else _GELU_ERF_FLOPS
    return streaming(op, k * out_numel(op))


@rule("FastGelu", domain="com.microsoft", op_class=OpClass.ACTIVATION)
def fast_gelu(op: OpView) -> Cost:
    """com.microsoft::FastGelu: the tanh approximation of Gelu, with an optional fused bias.

    Formula: FLOPs = (9 + b) · N_out, N_out = output elements, b = 1 if the ``bias`` input is given
      (x + bias: 1 add) else 0; 9 = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x·x·x))) counted as in
      ai.onnx::Gelu approximate="tanh".
    Bytes: read X and bias (if given); write Y.
    Assumptions: the bias is added per output element before the activation.
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.FastGelu.
    """
    bias = 1 if op.input(1) is not None else 0
    return streaming(op, (_GELU_TANH_FLOPS + bias) * out_numel(op))


@rule("Clip")
def clip(op: OpView) -> Cost:
    """ai.onnx::Clip: y = min(max(x, lo), hi).

    Formula: FLOPs = b · N_out, N_out = output elements, b = number of bounds given: 1 max for a lower
      bound + 1 min for an upper bound (b = 2 both, 1 one, 0 none: then Clip is a copy).
    Bytes: read x and, from opset 11, the ``min``/``max`` scalar inputs (data, charged); write y.
    Assumptions: in opsets < 11 the bounds are attributes; a bound equal to its schema default
      (∓FLT_MAX, i.e. unbounded) counts as absent.
    """
    if op.opset >= 11:
        bounds = sum(1 for i in (1, 2) if op.input(i) is not None)
    else:
        lo, hi = op.attrs.get("min"), op.attrs.get("max")
        bounds = (lo is not None and lo > -_FLT_MAX) + (hi is not None and hi < _FLT_MAX)
    return streaming(op, bounds * out_numel(op))


@rule("Sum", "Max", "Min")
def variadic_fold(op: OpView) -> Cost:
    """ai.onnx::Sum / Max / Min over n inputs (broadcast together).

    Formula: FLOPs = (n − 1) · N_out, n = inputs given, N_out = output elements: folding n operands
      takes n − 1 adds (Sum) or compares (Max, Min) per output element; n = 1 is a copy (0 FLOPs).
    Bytes: read every input once at its own size; write the output.
    Assumptions: broadcasting costs per output element.
    """
    n = sum(1 for t in op.inputs if t is not None)
    return streaming(op, max(n - 1, 0) * out_numel(op))


@rule("Mean")
def variadic_mean(op: OpView) -> Cost:
    """ai.onnx::Mean over n inputs (broadcast together).

    Formula: FLOPs = n · N_out, n = inputs given, N_out = output elements: n − 1 adds + 1 divide by n
      per output element.
    Bytes: read every input once at its own size; write the output.
    Assumptions: broadcasting costs per output element.
    """
    n = sum(1 for t in op.inputs if t is not None)
    return streaming(op, n * out_numel(op))


@rule("Cast")
def cast(op: OpView) -> Cost:
    """ai.onnx::Cast: a type conversion, pure memory traffic.

    Formula: FLOPs = 0 (a conversion, not arithmetic).
    Bytes: read the input at its dtype's size; write the output at the target dtype's size.
    Assumptions: conversion is free next to its traffic (no FLOPs counted for rounding/saturation).
    """
    return streaming(op, 0)


@rule("CastLike", config_inputs=(1,))
def cast_like(op: OpView) -> Cost:
    """ai.onnx::CastLike: Cast to the dtype of ``target_type``; a conversion, pure memory traffic.

    Formula: FLOPs = 0 (a conversion, not arithmetic).
    Bytes: read the input; write the output. ``target_type`` (input 1) supplies only its dtype, so it is a
      config input and is not charged.
    Assumptions: conversion is free next to its traffic.
    """
    return streaming(op, 0, skip=(1,))
