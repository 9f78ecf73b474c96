"""The rule registry: coverage of every op the core promises, documentation, duplicate protection."""

from __future__ import annotations

import pkgutil

import pytest

import onnxroof.rules
from onnxroof.core.cost import Cost
from onnxroof.core.registry import DuplicateRuleError, Registry, entries_of, rule
from onnxroof.core.states import OpClass, RuleKind, RuleStatus
from onnxroof.rules import REGISTRY

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
    assert REGISTRY.lookup("", op_type) is not None, f"no rule for {op_type}"


def test_every_rule_is_documented() -> None:
    for entry in REGISTRY.all_rules():
        assert entry.kind in tuple(RuleKind)
        assert "Formula:" in entry.doc or entry.kind in ("view", "metadata"), entry.op_type
        assert "Bytes:" in entry.doc or entry.kind in ("view", "metadata"), entry.op_type


def test_duplicate_registration_raises() -> None:
    """A duplicate (domain, op_type) raises when a registry is built, the bundled one extended or built anew."""
    with pytest.raises(DuplicateRuleError, match=r"ai\.onnx::Conv"):
        REGISTRY.with_rules(rule("Conv")(lambda op: None))
    twice = rule("MyOp", domain="example.com")(lambda op: None)
    with pytest.raises(DuplicateRuleError, match=r"example\.com::MyOp"):
        Registry.of((*entries_of(twice), *entries_of(twice)))
    with pytest.raises(DuplicateRuleError):
        Registry.from_families(*onnxroof.rules.FAMILIES, onnxroof.rules.FAMILIES[0])


def test_rule_registers_nothing_globally() -> None:
    """``@rule`` only records the entry on its function: the bundled registry is unchanged, and a user's rule enters
    only the new registry ``with_rules`` returns."""

    @rule("MyOp", domain="example.com", kind=RuleKind.LAYOUT, op_class=OpClass.MOVEMENT)
    def my_op(op):
        """Formula: none. Bytes: none."""
        return Cost.zero()

    before = REGISTRY.all_rules()
    extended = REGISTRY.with_rules(my_op)
    assert REGISTRY.all_rules() == before and REGISTRY.lookup("example.com", "MyOp") is None
    entry = extended.lookup("example.com", "MyOp")
    assert entry is not None and entry.fn is my_op and entry.kind == RuleKind.LAYOUT
    assert extended.op_class("example.com", "MyOp") == OpClass.MOVEMENT
    assert len(extended.rules) == len(REGISTRY.rules) + 1 and extended.view_ops == REGISTRY.view_ops
    assert extended.op_class("com.microsoft", "FusedConv") == OpClass.CONV  # classes without a rule are kept
    with pytest.raises(ValueError, match="declared a rule"):
        REGISTRY.with_rules(lambda op: None)


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("kind", "scatter", "unknown rule kind 'scatter'; expected one of"),
        ("status", "rough", "unknown rule status 'rough'; expected one of"),
        ("op_class", "gemm", "unknown op class 'gemm'; expected one of"),
        ("kind", ["view"], "unknown rule kind \\['view'\\]"),
    ],
)
def test_rule_refuses_an_unknown_kind_status_or_class(option: str, value: object, message: str) -> None:
    """``@rule`` takes each of kind, status and op class as a member or its value (a plain string) and refuses
    anything else with a ``ValueError`` naming the option and the value."""
    with pytest.raises(ValueError, match=message):
        rule("MyOp", **{option: value})  # type: ignore[arg-type]
    (entry,) = entries_of(rule("MyOp", kind="view", status="approximate", op_class="movement")(lambda op: None))  # type: ignore[arg-type]
    assert (entry.kind, entry.status, entry.op_class) == (RuleKind.VIEW, RuleStatus.APPROXIMATE, OpClass.MOVEMENT)


def test_view_ops_are_the_view_rules() -> None:
    views = {(e.domain, e.op_type) for e in REGISTRY.all_rules() if e.kind == RuleKind.VIEW}
    assert REGISTRY.view_ops == views and ("", "Reshape") in views and ("", "Transpose") not in views


def test_ai_onnx_domain_is_the_default_domain() -> None:
    assert REGISTRY.lookup("ai.onnx", "Relu") is REGISTRY.lookup("", "Relu")


def test_every_bundled_rule_declares_its_family() -> None:
    """The family is declared at registration (``Family.rule``), not derived from the module's name: a module's
    own family, or (for a fused op filed with its neighbours: GemmFastGelu, GatherBlockQuantized...) the name of
    another family module."""
    modules = {m.name for m in pkgutil.iter_modules(onnxroof.rules.__path__) if not m.name.startswith("_")}
    for entry in REGISTRY.all_rules():
        if entry.fn.__module__.startswith("onnxroof.rules."):
            assert entry.family in modules, (entry.op_type, entry.family)
