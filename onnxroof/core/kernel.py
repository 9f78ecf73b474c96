"""What a runtime runs as one kernel (:class:`Kernel`) and a fusion candidate that did not fuse (:class:`Miss`).

The fusion pass (:func:`onnxroof.fusion.fuse.fuse`) makes them; placement (:mod:`onnxroof.roofline.kernels`), the
analysis and the reports read them: a core type, so that no stage imports another stage's module for it.
"""

from __future__ import annotations

from collections.abc import Sequence

from onnxroof.core.cost import Cost
from onnxroof.core.frozen import frozen_dataclass

SINGLE = "single"
"""The pattern text of a kernel no pattern applied to (one unfused node)."""


def pattern_text(patterns: Sequence[str]) -> str:
    """Pattern names as rendered (the JSON ``pattern`` field, tables): joined by ``+`` in the order they applied,
    ``single`` when none did."""
    return "+".join(patterns) if patterns else SINGLE


@frozen_dataclass
class Kernel:
    """Nodes a runtime executes as one kernel.

    ``node_ids``: the anchor first, then the other members in topological order (the anchor is also
    topologically first except where a producer was absorbed, e.g. a Transpose read by the MatMul anchor).
    ``patterns``: the patterns applied, in the order they applied (``("conv_bn", "ort_conv_activation")``), empty
    for an unfused node; :attr:`pattern` renders them as text.
    """

    id: str
    patterns: tuple[str, ...]
    node_ids: tuple[str, ...]
    cost: Cost
    ideal: Cost
    layout: bool
    folded_nodes: tuple[str, ...]

    @property
    def pattern(self) -> str:
        """The patterns as text: joined by ``+`` (``conv_bn+ort_conv_activation``), ``single`` for an unfused node."""
        return pattern_text(self.patterns)


@frozen_dataclass
class Miss:
    """A fusion candidate that did not fuse, and why."""

    pattern: str
    node_ids: tuple[str, ...]
    reason: str


__all__ = ["SINGLE", "Kernel", "Miss", "pattern_text"]
