"""The fusion pass: the per-node graph turned into the kernels a target runtime would run.

``fuse(ir, node_costs, profile)`` groups the costed nodes into kernels (:class:`~onnxroof.core.kernel.Kernel`)
using the patterns the profile enables (:mod:`onnxroof.fusion.patterns`: the patterns are data, the pass applies
them), and explains every candidate that did not fuse (:class:`~onnxroof.core.kernel.Miss`). Only nodes whose
state is ``costed`` become kernel members; every costed node belongs to exactly one kernel.

Order of application (mirrors how runtimes rewrite): (1) decomposed functions (GELU, SiLU, LayerNorm,
RMSNorm) are recognised, scanning nodes in topological order; (2) edge patterns grow each kernel, in
topological order of anchors, one neighbour at a time until none applies (Conv → BN → Mul → Add → Relu);
(3) pointwise fusion merges neighbouring elementwise-only kernels (never creating a cycle between kernels,
joining only kernels of equal element count).

The pass's parts: :mod:`onnxroof.fusion.graph` (the IR lookups, the units being built, merging them),
:mod:`onnxroof.fusion.match` (phase 1), :mod:`onnxroof.fusion.edges` (phase 2) with the checks of
:mod:`onnxroof.fusion.checks`, and :mod:`onnxroof.fusion.pointwise` (phase 3). This module holds the result
(:class:`FusionResult`; its kernel types are in :mod:`onnxroof.core.kernel`), runs the phases and costs the
resulting kernels.

Views (Reshape, Squeeze, Flatten, Identity, Dropout...) alias their input. Named patterns need DIRECT edges,
as the runtimes' own pattern matchers do (a view between a MatMul and its Add blocks MatMul+Add → Gemm), but
views are transparent to pointwise fusion and to the traffic accounting: a tensor read through a view is the
same buffer, and a value consumed through a view by a kernel member is internal to the kernel.

Kernel costs (a single-node kernel keeps its node's cost exactly):

* FLOPs = Σ FLOPs of the members − those of the folded members (e.g. a BatchNormalization folded into the
  preceding Conv's weights); MACs likewise.
* bytes_read = Σ bytes of the distinct tensors the members read from OUTSIDE the kernel (each read once:
  one weight or activation read by two members counts once; views resolved to the buffer they alias). Config
  inputs (shape vectors, axes) are not charged, as the rules do not charge them; a folded member's constant
  inputs (BN scale, bias, mean, var) are not read. The bias a fold adds to a bias-less Conv is not charged.
* bytes_written = Σ bytes of member outputs used outside the kernel (a consumer outside it, directly or
  through views; a Shape/Size reading only metadata does not count) or that are graph outputs.
* params = elements of the distinct weights of the non-folded members.
* Both traffic figures are capped at the sum of the members' own figures (fusion never adds traffic).
* ideal: the kernel's cost with zero bytes for elementwise-only kernels and layout copies (the traffic a
  perfect compiler would fuse away); other kernels keep their fused cost.

A kernel is ``layout`` when it is one remaining copy (a rule of kind ``layout``: Transpose not absorbed,
Concat, Split, Slice, Expand, Tile, Pad, DepthToSpace...).
"""

from __future__ import annotations

import functools
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import field
from itertools import chain
from operator import attrgetter
from types import MappingProxyType

from onnxroof.core.cost import Cost, merge_weights
from onnxroof.core.errors import OnnxroofError, ShapeUnknown
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.ir import ModelIR, OpView, TensorInfo
from onnxroof.core.kernel import Kernel, Miss
from onnxroof.core.node_cost import NodeCost
from onnxroof.core.profiles import FusionProfile
from onnxroof.core.states import RuleKind
from onnxroof.fusion.checks import CHECKS, NOT_A_CANDIDATE
from onnxroof.fusion.edges import apply_edges
from onnxroof.fusion.graph import FusionGraph, OpTypeFacts, PassState
from onnxroof.fusion.match import FunctionMatches, apply_functions
from onnxroof.fusion.patterns import (
    PATTERNS,
    PATTERNS_BY_NAME,
    PROFILES,
    EdgePattern,
    FunctionPattern,
    PointwisePattern,
)
from onnxroof.fusion.pointwise import apply_pointwise

# ----------------------------------------------------------------------------------------------- result


@frozen_dataclass
class FusionResult:
    """The kernels of one profile (in topological order of their anchors) and the misses, explained."""

    profile: str
    kernels: tuple[Kernel, ...]
    misses: tuple[Miss, ...]
    functions: FunctionMatches | None = field(default=None, compare=False, repr=False)
    """Phase 1's decisions (:func:`~onnxroof.fusion.match.apply_functions`), for another binding of the model to
    replay (``fuse(..., prior=)``); None when no function pattern is enabled."""
    positions: tuple[array, ...] | None = field(default=None, compare=False, repr=False)
    """Each kernel's members as positions in the fused graph's ops, in the order of its ``node_ids``; None when
    the kernels are not all the graph's own (control-flow bodies expanded, :mod:`onnxroof.fusion.bodies`)."""

    @functools.cached_property
    def _by_node(self) -> Mapping[str, Kernel]:
        """Node id -> its kernel, built on first use (the analysis never asks: a dict per node saved)."""
        return MappingProxyType({node: kernel for kernel in self.kernels for node in kernel.node_ids})

    def kernel_of(self, node_id: str) -> Kernel | None:
        """The kernel ``node_id`` runs in (None for nodes that do not run: views, folded, unsupported...)."""
        return self._by_node.get(node_id)


def profile_patterns(profile: str) -> tuple[str, ...]:
    """The patterns ``profile`` enables; raises :class:`OnnxroofError` naming the known profiles."""
    try:
        return PROFILES[FusionProfile(profile)]
    except ValueError:
        known = ", ".join(sorted(PROFILES))
        raise OnnxroofError(f"unknown fusion profile '{profile}'; known profiles: {known}") from None


# ------------------------------------------------------------------------------------------- kernels


def _kernel_cost(at: Sequence[int], nodes: list[str], folded: set[str], g: FusionGraph) -> tuple[Cost, bool]:
    """The cost of a kernel of two or more ``nodes`` (at positions ``at``; see the module docstring; a node alone is
    its own cost, :func:`_build_kernels`), and whether every member is elementwise.

    FLOPs, MACs and params from the non-folded members (:func:`_member_compute`); traffic from what crosses the
    kernel's boundary (:func:`_boundary_traffic`), capped at the members' own sums, or those sums when a
    member's shape is unknown."""
    cost_at, ir_ops = g.cost_at, g.ir.ops
    costs: list[NodeCost] = list(map(cost_at.__getitem__, at))  # type: ignore[arg-type]  # members are costed
    figures = list(map(attrgetter("cost"), costs))
    if folded:
        kept = [c for n, c in zip(nodes, costs, strict=True) if n not in folded]
        flops, macs, params = _member_compute(kept, [c.cost for c in kept])
    else:
        flops, macs, params = _member_compute(costs, figures)
    sum_read = sum(map(attrgetter("bytes_read"), figures))
    sum_written = sum(map(attrgetter("bytes_written"), figures))
    ops = list(map(ir_ops.__getitem__, at))
    kinds = dict.fromkeys(map(attrgetter("domain", "op_type"), ops))  # each (domain, op type) once
    types = {(domain, op_type): g.types[domain][op_type] for domain, op_type in kinds}
    try:
        outside_read, escaping = _boundary_traffic(nodes, ops, types, folded, g)
        bytes_read, bytes_written = min(outside_read, sum_read), min(escaping, sum_written)
    except ShapeUnknown:
        bytes_read, bytes_written = sum_read, sum_written
    cost = Cost(float(flops), float(macs), float(bytes_read), float(bytes_written), params)
    return cost, all(facts.elementwise for facts in types.values())


def _member_compute(kept: list[NodeCost], figures: list[Cost]) -> tuple[float, float, float]:
    """FLOPs = Σ FLOPs of ``kept`` (the non-folded members, whose costs are ``figures``), MACs likewise, and
    params = elements of their distinct weights (a weight two members read counts once)."""
    flops = sum(map(attrgetter("flops"), figures))
    macs = sum(map(attrgetter("macs"), figures))
    weights: dict[str, tuple[float, float]] = {}
    for read in filter(None, map(attrgetter("weights"), kept)):
        merge_weights(weights, read)
    return flops, macs, float(sum(numel for numel, _ in weights.values()))


def _boundary_traffic(
    nodes: list[str], ops: list[OpView], types: Mapping[tuple[str, str], OpTypeFacts], folded: set[str], g: FusionGraph
) -> tuple[float, float]:
    """Bytes the kernel of ``nodes`` (``ops``, of the op ``types`` given) reads from outside and writes for outside,
    uncapped.

    read = Σ bytes of the distinct buffers (views resolved to the buffer they alias) that no member produces,
    over the charged inputs (:func:`_charged_inputs`), in member order; written = Σ bytes of member outputs that
    :meth:`~onnxroof.fusion.graph.FusionGraph.escapes` (a tensor read only by members answers without walking
    its users). The members' tensors are gathered once, as columns: a tensor a member produces is no read (nor
    a view's output: views are no members); every input is charged when nothing is folded and no type has
    config inputs. Raises :class:`ShapeUnknown` when a tensor's size is unknown."""
    outputs = [t for t in chain.from_iterable(map(attrgetter("outputs"), ops)) if t is not None]
    produced = {t.name for t in outputs}
    if folded or any(facts.entry is not None and facts.entry.config_inputs for facts in types.values()):
        inputs = chain.from_iterable(_charged_inputs(op, op.id in folded, g) for op in ops)
    else:
        inputs = chain.from_iterable(map(attrgetter("inputs"), ops))
    view_source, root = g.index.view_source, g.root
    reads: dict[str, float] = {}
    for t in [t for t in inputs if t is not None and t.name not in produced]:
        name = root(t.name) if t.name in view_source else t.name
        if name not in produced and name not in reads:
            reads[name] = t.nbytes
    members = set(nodes)
    written = sum((t.nbytes for t in outputs if g.escapes(t.name, members)), 0.0)
    return sum(reads.values()), written


def _charged_inputs(op: OpView, folded_member: bool, g: FusionGraph) -> tuple[TensorInfo | None, ...]:
    """The inputs of ``op`` whose reading a kernel is charged: all but its rule's config inputs (shape vectors,
    axes: the rules do not charge them) and, for a ``folded_member``, its constants (a folded BN's scale, bias,
    mean and var are not read)."""
    facts = g.types[op.domain][op.op_type]
    skip = facts.entry.config_inputs if facts.entry is not None else ()
    if not skip and not folded_member:
        return op.inputs
    return tuple(
        t for i, t in enumerate(op.inputs) if i not in skip and not (folded_member and t is not None and t.is_constant)
    )


def _build_kernels(state: PassState) -> tuple[tuple[Kernel, ...], tuple[array, ...]]:
    """The kernels, numbered in the order of their anchors: one per unit, and one per costed node whose unit was
    never made (:meth:`~onnxroof.fusion.graph.Units.anchored`: the node alone); and each kernel's members as
    positions in the IR's ops, in the order of its ``node_ids`` (the anchor, then the others in node order)."""
    g = state.g
    ir_ops, cost_at = g.ir.ops, g.cost_at
    kernels, positions = [], []
    for number, (anchor, unit, members) in enumerate(state.unit_of.anchored(), start=1):
        if len(members) == 1:  # a node alone (most kernels): its own cost, nothing folded
            facts = g.type_at(anchor)
            at, nodes, folded = members, [ir_ops[anchor].id], set()
            cost = cost_at[anchor].cost  # type: ignore[union-attr]  # a kernel member is costed
            layout = facts.kind == RuleKind.LAYOUT
            free = layout or facts.elementwise
        else:
            at = members if members[0] == anchor else [anchor, *(i for i in members if i != anchor)]
            nodes = [ir_ops[i].id for i in at]
            folded = set(unit.folded) if unit is not None and unit.folded else set()
            cost, free = _kernel_cost(at, nodes, folded, g)
            layout = False  # a layout kernel is one copy alone
        kernels.append(
            Kernel(
                id=f"k{number}",
                patterns=unit.patterns if unit is not None else (),
                node_ids=tuple(nodes),
                cost=cost,
                ideal=Cost(cost.flops, cost.macs, 0.0, 0.0, cost.params) if free else cost,
                layout=layout,
                folded_nodes=tuple(n for n in nodes if n in folded) if folded else (),
            )
        )
        positions.append(array("q", at))
    return tuple(kernels), tuple(positions)


def _final_misses(state: PassState) -> tuple[Miss, ...]:
    """The misses recorded, each once, less those whose nodes ended in one kernel after all (another pattern fused
    them) and those of a function recognised on their nodes from another start; in node order. A node's kernel is
    its unit's (:meth:`~onnxroof.fusion.graph.Units.made`, the kernel's patterns the unit's), or the node alone
    when its unit was never made (no pattern); a node that is no kernel member has none."""
    if not state.misses:
        return ()
    g, unit_of = state.g, state.unit_of
    kept: list[Miss] = []
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for miss in state.misses:
        key = (miss.pattern, miss.node_ids)
        if key in seen:
            continue
        seen.add(key)
        units = [unit_of.made(n) for n in miss.node_ids]
        owners = {n if unit is None else id(unit) for n, unit in zip(miss.node_ids, units, strict=True)}
        if len(miss.node_ids) > 1 and len(owners) == 1:
            continue  # another pattern fused these nodes after all
        function = isinstance(PATTERNS_BY_NAME.get(miss.pattern), FunctionPattern)
        if function and any(unit is not None and miss.pattern in unit.patterns for unit in units):
            continue  # the function was recognised on these nodes after all (from another start)
        kept.append(Miss(miss.pattern, miss.node_ids, miss.reason))
    kept.sort(key=lambda m: (g.position[m.node_ids[0]], m.pattern))
    return tuple(kept)


# ----------------------------------------------------------------------------------------------- entry


def fuse(
    ir: ModelIR,
    node_costs: Mapping[str, NodeCost] | Sequence[NodeCost],
    profile: str,
    graph: FusionGraph | None = None,
    prior: FunctionMatches | None = None,
) -> FusionResult:
    """Group ``ir``'s costed nodes into the kernels the ``profile`` target would run (see the module docs).

    ``node_costs``: by node id, or the column in node order. ``graph``: the lookups over ``ir`` and ``node_costs``
    when the caller built them already (and reads them too: ids to ops and positions). ``prior``: the phase-1
    decisions of another binding of the model (:attr:`FusionResult.functions`), replayed when the facts they read
    are equal (:func:`~onnxroof.fusion.match.apply_functions`)."""
    enabled = set(profile_patterns(profile))
    patterns = [p for p in PATTERNS if p.name in enabled]
    state = PassState(graph if graph is not None else FusionGraph(ir, node_costs))
    functions = apply_functions([p for p in patterns if isinstance(p, FunctionPattern)], state, prior)
    apply_edges([p for p in patterns if isinstance(p, EdgePattern)], state)
    for p in patterns:
        if isinstance(p, PointwisePattern):
            apply_pointwise(p, state)
    kernels, positions = _build_kernels(state)
    return FusionResult(profile, kernels, _final_misses(state), functions, positions)


__all__ = [
    "CHECKS",
    "NOT_A_CANDIDATE",
    "FusionResult",
    "fuse",
    "profile_patterns",
]
