"""The rule registry: coverage of every op the core promises, documentation, duplicate protection."""

from __future__ import annotations

import pkgutil

import pytest

import onnxroof.rules
from onnxroof.core.registry import DuplicateRuleError, all_rules, lookup, rule
from onnxroof.core.states import RuleKind

# The op types the core issue requires (light models, torchvision CNNs, HF transformers, YOLO detectors).
REQUIRED = (
    "Conv",
    "ConvTranspose",
    "MatMul",
    "Gemm",
    "Einsum",
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Pow",
    "Sqrt",
    "Exp",
    "Log",
    "Erf",
    "Tanh",
    "Sigmoid",
    "Relu",
    "LeakyRelu",
    "PRelu",
    "Elu",
    "Selu",
    "HardSigmoid",
    "HardSwish",
    "Gelu",
    "Softplus",
    "Clip",
    "Min",
    "Max",
    "Sum",
    "Mean",
    "Neg",
    "Abs",
    "Reciprocal",
    "Floor",
    "Ceil",
    "Round",
    "Sign",
    "Where",
    "Equal",
    "Less",
    "Greater",
    "And",
    "Or",
    "Not",
    "Cast",
    "Mod",
    "Sin",
    "Cos",
    "IsNaN",
    "BatchNormalization",
    "LayerNormalization",
    "GroupNormalization",
    "InstanceNormalization",
    "Softmax",
    "LogSoftmax",
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
    "ArgMax",
    "ArgMin",
    "TopK",
    "MaxPool",
    "AveragePool",
    "GlobalAveragePool",
    "GlobalMaxPool",
    "LpPool",
    "GlobalLpPool",
    "Resize",
    "Upsample",
    "Gather",
    "GatherElements",
    "GatherND",
    "ScatterND",
    "ScatterElements",
    "Slice",
    "Split",
    "Concat",
    "Pad",
    "Expand",
    "Tile",
    "Transpose",
    "DepthToSpace",
    "SpaceToDepth",
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Identity",
    "Dropout",
    "Shape",
    "Size",
    "Range",
    "CumSum",
    "NonZero",
    "Trilu",
    "ConstantOfShape",
    "Constant",
    "OneHot",
    "LSTM",
    "GRU",
    "RNN",
    "LRN",
)


@pytest.mark.parametrize("op_type", REQUIRED)
def test_required_op_has_a_rule(op_type: str) -> None:
    assert lookup("", op_type) is not None, f"no rule for {op_type}"


def test_every_rule_is_documented() -> None:
    for entry in all_rules():
        assert entry.kind in tuple(RuleKind)
        assert "Formula:" in entry.doc or entry.kind in ("view", "metadata"), entry.op_type
        assert "Bytes:" in entry.doc or entry.kind in ("view", "metadata"), entry.op_type


def test_duplicate_registration_raises() -> None:
    with pytest.raises(DuplicateRuleError):
        rule("Conv")(lambda op: None)


def test_ai_onnx_domain_is_the_default_domain() -> None:
    assert lookup("ai.onnx", "Relu") is lookup("", "Relu")


def test_every_bundled_rule_declares_its_family() -> None:
    """The family is declared at registration (``family_rule``), not derived from the module's name: a module's
    own family, or (for a fused op filed with its neighbours: GemmFastGelu, GatherBlockQuantized...) the name of
    another family module."""
    modules = {m.name for m in pkgutil.iter_modules(onnxroof.rules.__path__) if not m.name.startswith("_")}
    for entry in all_rules():
        if entry.fn.__module__.startswith("onnxroof.rules."):
            assert entry.family in modules, (entry.op_type, entry.family)
