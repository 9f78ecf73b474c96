"""The closed sets of facts, as enums: a node's state, a rule's kind and status, a kernel's bound, a tensor's role.

Each is a :class:`~enum.StrEnum`, so a member is also its string value: JSON, CSV and f-strings show
``"costed"``, never ``NodeState.COSTED``, and comparisons with the documented strings hold.
"""

from __future__ import annotations

from enum import StrEnum


class NodeState(StrEnum):
    """Every node is in exactly one state (fvcore's distinction, made first class)."""

    COSTED = "costed"  # a rule computed its cost
    ZERO = "zero"  # declared free by its rule's kind (a view, metadata)
    FOLDED = "folded"  # computable from weights alone: done once at load time
    UNSUPPORTED = "unsupported"  # no rule: counted and listed in every output, never silently zero
    UNKNOWN_SHAPE = "unknown_shape"  # a rule exists but a tensor it needs has no static shape


class RuleKind(StrEnum):
    """What a rule's op does with memory."""

    COMPUTE = "compute"
    LAYOUT = "layout"  # a copy that only moves data (Transpose, Concat, Pad...): layout traffic
    VIEW = "view"  # aliases its input (Reshape, Squeeze...): moves nothing
    METADATA = "metadata"  # reads only shapes (Shape, Size): moves nothing

    @property
    def moves_nothing(self) -> bool:
        """A view or metadata op: declared free (state ``zero``)."""
        return self in (RuleKind.VIEW, RuleKind.METADATA)


class RuleStatus(StrEnum):
    """Whether a rule's count is exact or an approximation (said in its docstring)."""

    EXACT = "exact"
    APPROXIMATE = "approximate"


class Bound(StrEnum):
    """What limits a kernel on the roofline (or the floorline)."""

    COMPUTE = "compute"
    MEMORY = "memory"
    NONE = "none"  # nothing runs (views, folded constants, unsupported)


class TimeModelKind(StrEnum):
    """Which time model turns kernels into time (``--time-model``): ``roofline``, the lower bound from FLOPs and
    bytes alone, or ``gpu``, tiles, waves, alignment and launches on a GPU (:mod:`onnxroof.roofline.gpu`)."""

    ROOFLINE = "roofline"
    GPU = "gpu"


class Role(StrEnum):
    """Where a tensor's values come from."""

    INPUT = "input"  # a graph input
    WEIGHT = "weight"  # an initializer, a Constant, or computed from weights alone
    STATIC = "static"  # computed from shapes alone (Shape → Gather → Concat): not parameters
    ACTIVATION = "activation"  # computed per inference


class OpClass(StrEnum):
    """The efficiency class of an op or kernel: a key of a platform's ``[efficiency]`` table (FRAME-style derating).

    Each rule family declares its default class and a rule may override it (:class:`onnxroof.core.registry.Family`);
    a fusion pattern that renames its kernel declares the class of what it produces. ``depthwise`` is never
    declared: it refines ``conv`` per node (``group > 1`` and ``group`` equal to the input channels, or any grouped
    convolution when the channels are unknown)."""

    MATMUL = "matmul"
    CONV = "conv"
    DEPTHWISE = "depthwise"
    ACTIVATION = "activation"  # transcendental elementwise ops and fused activations (Erf, Exp, Sigmoid, Gelu...)
    ELEMENTWISE = "elementwise"
    NORMALIZATION = "normalization"
    LRN = "lrn"  # local response normalization: plain loops far below the roofline in most runtimes
    SOFTMAX = "softmax"
    POOLING = "pooling"
    REDUCTION = "reduction"
    MOVEMENT = "movement"
    INDEXING = "indexing"
    RECURRENT = "recurrent"
    OTHER = "other"
