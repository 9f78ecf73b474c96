"""What costing one node yields: its state, its rule's kind, its :class:`~onnxroof.core.cost.Cost` and what else
the later stages read (kernel launches, the weights it reads, what its bodies left uncosted).

Produced by :func:`onnxroof.costing.node.cost_node` (control-flow nodes through
:mod:`onnxroof.costing.control_flow`), read by the fusion pass and the analysis: a core type, so that no stage
imports another stage's module for it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field

from onnxroof.core.cost import Cost
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.ir import ModelIR
from onnxroof.core.states import NodeState, RuleKind


@frozen_dataclass(slots=True)
class BodyRun:
    """The body a control-flow node runs, as costed: the ``If`` branch taken (or costed), a ``Loop``'s or a ``Scan``'s
    body; its IR, one :class:`NodeCost` per op of that IR (in its order) and how many times it runs per run of the
    node. The fusion stage fuses it like the main graph (:mod:`onnxroof.fusion.bodies`)."""

    name: str  # "then_branch", "else_branch", "body"
    ir: ModelIR = field(repr=False)
    node_costs: tuple[NodeCost, ...] = field(repr=False)
    iterations: int = 1


@frozen_dataclass(slots=True)
class NodeCost:
    """What costing one node (or one control-flow node with its bodies) yields.

    ``launches``: kernels launched, ``Σ body kernels × iterations`` for a control-flow node, 1 for any other
    costed node, 0 for a node that does not run. ``weights``: weight name -> (elements, bytes) the node reads.
    """

    state: NodeState
    kind: RuleKind | str  # "" when no rule ran (folded, unsupported)
    cost: Cost
    note: str = ""
    launches: int = 1  # kernels launched (body kernels × iterations for control flow)
    weights: Mapping[str, tuple[float, float]] = field(default_factory=dict)  # name -> (numel, nbytes)
    unsupported: tuple[str, ...] = ()  # op keys without a rule found inside bodies
    missing_tensor: str | None = None  # the tensor without a static shape (state ``unknown_shape``)
    branch: str = ""  # If: the branch costed ("then_branch" / "else_branch")
    warnings: tuple[str, ...] = ()
    """What was not costed inside the node's bodies, one line each (nested bodies included): the analysis
    lists them in its warnings, so a body's uncosted nodes are never only a note."""
    body: BodyRun | None = field(default=None, compare=False, repr=False)
    """A control-flow node: the body that runs (None for any other node)."""


__all__ = ["BodyRun", "NodeCost"]
