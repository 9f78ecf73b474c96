"""The efficiency class of a kernel: that of the op the runtime runs for it.

* A fused kernel whose fusion patterns rename it (``Conv`` + ``Relu`` → ``FusedConv``, ``Add`` +
  ``LayerNormalization`` → ``SkipLayerNormalization``, erf-GELU → ``Gelu``) takes the class the last renaming
  pattern declares (:attr:`onnxroof.fusion.patterns.EdgePattern.op_class`, ``FunctionPattern.op_class``);
* a generic pointwise fusion is ``activation`` when any member's op type is (in any domain), else ``elementwise``;
* any other kernel takes its anchor's (first op's) class (:meth:`onnxroof.core.registry.Registry.op_class`).

A ``conv`` is refined to ``depthwise`` by the anchor's ``group`` and channels
(:func:`onnxroof.costing.opclass.refine_conv`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from onnxroof.core.registry import Registry
from onnxroof.core.states import OpClass
from onnxroof.costing.opclass import refine_conv
from onnxroof.fusion.patterns import PATTERNS_BY_NAME, POINTWISE
from onnxroof.rules import REGISTRY


def kernel_op_class(
    op_types: Sequence[str],
    patterns: Sequence[str] = (),
    domain: str = "",
    attrs: Mapping[str, Any] | None = None,
    channels: int | None = None,
    registry: Registry = REGISTRY,
) -> OpClass:
    """The efficiency class of a kernel of ``op_types`` fused by ``patterns`` (module docstring). ``domain``,
    ``attrs`` and ``channels`` are the anchor's (its domain, attributes and input channels)."""
    for name in reversed(patterns):
        found = PATTERNS_BY_NAME.get(name)
        produced = getattr(found, "op_class", None)
        if produced is not None:
            return refine_conv(produced, attrs, channels)
    if POINTWISE.name in patterns:
        activation = any(OpClass.ACTIVATION in registry.type_classes(t) for t in set(op_types))  # each type once
        return OpClass.ACTIVATION if activation else OpClass.ELEMENTWISE
    if not op_types:
        return OpClass.OTHER
    return refine_conv(registry.op_class(domain, op_types[0]), attrs, channels)
