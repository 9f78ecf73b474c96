"""The efficiency class of one node (a key of a platform's ``[efficiency]`` table): a rule fact, refined per node.

The class of (domain, op_type) is its rule's (:attr:`onnxroof.core.registry.RuleEntry.op_class`: the family's
default or the rule's override), or the class a family gives an op type it has no rule for; ``other`` for any
other op. One class depends on the node: a convolution is ``depthwise`` when its ``group`` attribute is above 1
and equals its input channels (dim 1 of input 0), or, with the channels unknown, whenever it is grouped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from onnxroof.core.ir import OpView
from onnxroof.core.registry import Registry
from onnxroof.core.states import OpClass


def op_class(op: OpView, registry: Registry) -> OpClass:
    """The efficiency class of ``op``: its (domain, op_type)'s in ``registry``, ``conv`` refined to ``depthwise``
    (:func:`refine_conv`)."""
    return refine_conv(registry.op_class(op.domain, op.op_type), op.attrs, input_channels(op))


def refine_conv(cls: OpClass, attrs: Mapping[str, Any] | None, channels: int | None) -> OpClass:
    """``depthwise`` for a ``conv`` whose ``group`` g satisfies g > 1 and (g = ``channels`` or ``channels`` unknown);
    ``cls`` otherwise."""
    if cls != OpClass.CONV:
        return cls
    group = int((attrs or {}).get("group", 1) or 1)
    if group > 1 and (channels is None or group == channels):
        return OpClass.DEPTHWISE
    return cls


def input_channels(op: OpView) -> int | None:
    """The channel count of ``op``'s first input (dim 1), when static."""
    first = op.input(0)
    if first is None or first.shape is None or len(first.shape) < 2:
        return None
    return first.shape[1]
