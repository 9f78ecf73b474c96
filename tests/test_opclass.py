"""Op classes declared by the rules (and by the fusion patterns that rename kernels) against a frozen copy of the
op-class tables they replaced (roofline/classify.py before the classes moved onto the rules): every registered op,
every op the tables named, every renaming pattern, and kernels of every pattern give the class they gave."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from helpers import make_op

from onnxroof.core.states import OpClass
from onnxroof.costing.opclass import op_class
from onnxroof.fusion.opclass import kernel_op_class
from onnxroof.fusion.patterns import PATTERNS, PATTERNS_BY_NAME, POINTWISE
from onnxroof.rules import REGISTRY

# ---------------------------------------------------------------- the frozen copy of the replaced tables

_CLASS_OPS: dict[str, frozenset[str]] = {
    "matmul": frozenset(
        {
            *("MatMul", "Gemm", "Einsum", "FusedMatMul", "FusedGemm", "MatMulInteger", "QLinearMatMul"),
            *("MatMulIntegerToFloat", "DynamicQuantizeMatMul", "MatMulNBits", "QGemm"),
        }
    ),
    "conv": frozenset({"Conv", "ConvTranspose", "FusedConv", "ConvResidual", "QLinearConv", "ConvInteger", "NhwcConv"}),
    "activation": frozenset(
        {
            *("Erf", "Exp", "Log", "Sigmoid", "Tanh", "Gelu", "BiasGelu", "FastGelu", "QuickGelu", "GeluTanh", "SiLU"),
            *("Swish", "Mish", "Softplus", "Softsign", "HardSwish", "Elu", "Selu", "Celu", "Pow", "Sqrt", "Reciprocal"),
            *("Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"),
        }
    ),
    "elementwise": frozenset({"BatchNormalization", "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}),
    "normalization": frozenset(
        {
            *("LayerNormalization", "SimplifiedLayerNormalization"),
            *("RMSNormalization", "GroupNormalization", "InstanceNormalization"),
            "MeanVarianceNormalization",
        }
    ),
    # issue 22: onnxruntime's CPU skip-norm kernels run 4-9x slower per byte than its LayerNormalization
    "skip_normalization": frozenset({"SkipLayerNormalization", "SkipSimplifiedLayerNormalization"}),
    "lrn": frozenset({"LRN"}),
    "softmax": frozenset({"Softmax", "LogSoftmax", "Hardmax"}),
}
_CLASS_OF_OP = {op: cls for cls, ops in _CLASS_OPS.items() for op in ops}
_FAMILY_CLASS = {
    f: f
    for f in (
        "matmul",
        "conv",
        "elementwise",
        "normalization",
        "pooling",
        "reduction",
        "movement",
        "indexing",
        "recurrent",
    )
}


def old_op_class(
    op_type: str, domain: str = "", attrs: Mapping[str, Any] | None = None, channels: int | None = None
) -> str:
    cls = _CLASS_OF_OP.get(op_type)
    if cls is None:
        entry = REGISTRY.lookup(domain, op_type)
        cls = _FAMILY_CLASS.get(entry.family if entry is not None else "", "other")
    if cls == "conv":
        group = int((attrs or {}).get("group", 1) or 1)
        if group > 1 and (channels is None or group == channels):
            return "depthwise"
    return cls


def old_kernel_op_class(
    op_types: Sequence[str],
    patterns: Sequence[str] = (),
    domain: str = "",
    attrs: Mapping[str, Any] | None = None,
    channels: int | None = None,
) -> str:
    produced = None
    for name in reversed(patterns):
        found = PATTERNS_BY_NAME.get(name)
        if found is not None and getattr(found, "produces", None):
            produced = found.produces
            break
    if produced is not None:
        return old_op_class(produced, domain, attrs, channels)
    if "pointwise" in patterns:
        return "activation" if any(_CLASS_OF_OP.get(t) == "activation" for t in op_types) else "elementwise"
    return old_op_class(op_types[0], domain, attrs, channels) if op_types else "other"


# ---------------------------------------------------------------- the comparisons

_RULES = REGISTRY.all_rules()


def test_every_registered_op_keeps_its_class() -> None:
    changed = [
        (e.domain, e.op_type, REGISTRY.op_class(e.domain, e.op_type), old_op_class(e.op_type, e.domain))
        for e in _RULES
        if REGISTRY.op_class(e.domain, e.op_type) != old_op_class(e.op_type, e.domain)
    ]
    assert not changed
    assert {REGISTRY.op_class(e.domain, e.op_type) for e in _RULES} >= set(OpClass) - {OpClass.DEPTHWISE}


def test_every_op_of_the_old_tables_keeps_its_class() -> None:
    """An op the tables named is classed by its rule (in some domain), by the family that classes it without a rule
    (ONNX Runtime's FusedConv, a function op such as MeanVarianceNormalization), or, for an op only a runtime's
    fusion creates (ConvResidual, GeluTanh, SiLU), by the pattern that produces it."""
    produced = {p.produces: p.op_class for p in PATTERNS if getattr(p, "produces", None)}
    for op_type, cls in _CLASS_OF_OP.items():
        found = REGISTRY.type_classes(op_type) or ({produced[op_type]} if op_type in produced else set())
        assert found == {cls}, (op_type, found, cls)
        if op_type in produced:
            assert produced[op_type] == cls, op_type


def test_renaming_patterns_declare_the_class_of_what_they_produce() -> None:
    for pattern in PATTERNS:
        produces = getattr(pattern, "produces", None)
        assert (getattr(pattern, "op_class", None) is None) == (produces is None), pattern.name
        if produces is not None:
            assert pattern.op_class == old_op_class(produces), pattern.name


@pytest.mark.parametrize("pattern", [(), (POINTWISE.name,), *((p.name,) for p in PATTERNS)], ids=str)
def test_kernel_classes_are_unchanged(pattern: tuple[str, ...]) -> None:
    for e in _RULES:
        for op_types in ((e.op_type,), (e.op_type, "Add"), ("Add", e.op_type)):
            new = kernel_op_class(op_types, pattern, e.domain if op_types[0] == e.op_type else "")
            old = old_kernel_op_class(op_types, pattern, e.domain if op_types[0] == e.op_type else "")
            assert new == old, (op_types, pattern, e.domain)


@pytest.mark.parametrize(
    ("group", "channels", "expected"),
    [(1, 32, OpClass.CONV), (32, 32, OpClass.DEPTHWISE), (4, 32, OpClass.CONV), (4, None, OpClass.DEPTHWISE)],
)
def test_depthwise_refines_conv_per_node(group: int, channels: int | None, expected: OpClass) -> None:
    shape = None if channels is None else [1, channels, 8, 8]
    weight = [32, 32 // group if channels else 1, 3, 3]
    conv = make_op("Conv", [(shape, "float32"), (weight, "float32", "weight")], [(None, "float32")], group=group)
    assert op_class(conv, REGISTRY) == expected == old_op_class("Conv", "", conv.attrs, channels)
    fused = kernel_op_class(("Conv", "Relu"), ("ort_conv_activation",), "", conv.attrs, channels)
    assert fused == expected  # FusedConv is a conv: refined the same way
    relu = make_op("Relu", [([1, 32], "float32")], [([1, 32], "float32")])
    assert op_class(relu, REGISTRY) == OpClass.ELEMENTWISE


def test_unknown_ops_are_other() -> None:
    assert REGISTRY.op_class("", "NoSuchOp") == OpClass.OTHER
    assert kernel_op_class(()) == OpClass.OTHER
    assert REGISTRY.op_class("ai.onnx", "Softmax") == OpClass.SOFTMAX  # the default domain, spelled out
