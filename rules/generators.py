"""Cost rules: generators. Ops that create a tensor from attributes, scalars or another tensor's shape:
they write their output and read (almost) nothing.
"""

from __future__ import annotations

from onnxroof.core.cost import Cost
from onnxroof.core.ir import OpView
from onnxroof.core.registry import Family
from onnxroof.core.states import OpClass, RuleStatus
from onnxroof.rules._common import out_numel, outputs_bytes

FAMILY = Family("generators", OpClass.OTHER)
rule = FAMILY.rule

RANDOM_FLOPS_PER_ELEMENT = 2
"""The affine map of one random draw: low + (high − low)·u, or mean + scale·z (1 multiply, 1 add)."""


@rule("Constant")
def constant(op: OpView) -> Cost:
    """A value stored in the model.

    Formula: 0 FLOPs.
    Bytes: none at inference: the value is part of the model, loaded with the weights; its output
    is a weight, so the analysis folds the node and counts the value as parameters where it is used.
    Assumptions: the runtime materialises constants at load time, not per inference.
    """
    return Cost.zero()


@rule("ConstantOfShape", config_inputs=(0,))
@rule("EyeLike", config_inputs=(0,))
def fill(op: OpView) -> Cost:
    """A tensor filled with one value (ConstantOfShape) or an identity pattern (EyeLike).

    Formula: 0 FLOPs (a fill).
    Bytes: read = 0: ConstantOfShape's input is a shape and EyeLike reads only its input's shape, so
    input 0 is a config input; written = bytes of the output.
    Assumptions: the node runs at inference (its input is computed at run time); when the input is
    constant the analysis folds it into a weight instead.
    """
    return Cost(bytes_written=outputs_bytes(op))


@rule("Range", config_inputs=(0, 1, 2))
def range_(op: OpView) -> Cost:
    """The sequence start, start + delta, ... up to (excluding) limit.

    Formula: out_numel FLOPs (one add per element: x_i = x_{i-1} + delta).
    Bytes: read = 0 (start, limit and delta are config scalars); written = bytes of the output.
    Assumptions: the output's length depends on the scalars' values: when shape inference cannot
    give it, the node is reported with an unknown shape rather than guessed.
    """
    return Cost(flops=float(out_numel(op)), bytes_written=outputs_bytes(op))


@rule("RandomNormal", "RandomUniform", status=RuleStatus.APPROXIMATE)
@rule("RandomNormalLike", "RandomUniformLike", status=RuleStatus.APPROXIMATE, config_inputs=(0,))
def random(op: OpView) -> Cost:
    """A tensor of random draws, uniform in [low, high) or normal(mean, scale).

    Formula: RANDOM_FLOPS_PER_ELEMENT (2) · out_numel: the affine map of each draw.
    Bytes: read = 0 (the *Like ops read only their input's shape, a config input); written = bytes of
    the output.
    Assumptions: approximate: the bit generator's integer work and the uniform-to-normal transform
    (Box–Muller: log, sqrt, cos) are not counted as FLOPs.
    """
    return Cost(flops=float(RANDOM_FLOPS_PER_ELEMENT * out_numel(op)), bytes_written=outputs_bytes(op))
