"""Phase 3 of the fusion pass: pointwise fusion of neighbouring elementwise-only kernels.

Views are transparent here (a tensor read through a view is the same buffer); only kernels of equal element
count join, and never so that the fused kernel would both feed and wait for another kernel (no cycle).

The pass works on *blocks*: the units (kernels under construction) and every node that is no kernel member
(views, metadata, uncosted nodes). Blocks are visited in topological order; a block's ``dep`` is the bitset
of the groups it transitively depends on. A unit joins a producer's group G only if no other producer (views
resolved) depends on G: otherwise the fused kernel would both feed and wait for it. Linear in the number of
edges (bitset operations aside): a node's producers are deduplicated with dicts, and each producer group's
eligibility is read from prefix and suffix unions of the other groups' dependencies.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import networkx as nx

from onnxroof.core.states import RuleKind
from onnxroof.fusion.graph import PassState, Unit
from onnxroof.fusion.patterns import PointwisePattern

#: A kernel under construction, or the id of a node that is no kernel member.
Block = Unit | str


def apply_pointwise(pattern: PointwisePattern, state: PassState) -> None:
    """Merge neighbouring elementwise-only units of equal element count, never creating a cycle."""
    sizes = _pointwise_sizes(state)
    if len(sizes) < 2:  # nothing could merge: skip building the block graph
        return
    blocks = _block_graph(state)
    order = _last_ready_first(blocks)
    if order is None:  # the blocks do not form a DAG (cannot happen for convex kernels): no fusion
        return
    grouping = _Grouping(state, sizes, {b: i for i, b in enumerate(order)})
    for block in order:
        grouping.visit(block, list(blocks.predecessors(block)))
    for units in grouping.grouped.values():
        if len(units) >= 2:
            _merge(units, pattern, state)


def _pointwise_sizes(state: PassState) -> dict[Unit, int | None]:
    """Every elementwise-only unit (nothing folded into it) and its output's element count (None if dynamic)."""
    g = state.g
    sizes: dict[Unit, int | None] = {}
    for unit in state.unit_of.values():
        if unit in sizes or unit.folded or not all(n in g.elementwise for n in unit.nodes):
            continue
        t = g.ir.tensors.get(unit.out) if unit.out is not None else None
        sizes[unit] = t.numel if t is not None and t.is_static_shape else None
    return sizes


def _block_graph(state: PassState) -> nx.DiGraph:
    """The blocks and their data edges (implicit reads by If/Loop bodies included), in node order.

    Nodes are added in the order of their first node; each block's incoming edges in the order of the block
    that reads them, so that :func:`_last_ready_first` visits successors in node order.
    """
    g = state.g
    block: dict[str, Block] = {op.id: state.unit_of.get(op.id) or op.id for op in g.ir.ops}
    preds: dict[Block, dict[Block, None]] = {b: {} for b in block.values()}
    for name, readers in g.consumers.items():
        p = g.producer.get(name)
        if p is None:
            continue
        for reader in readers:
            if block[p] is not block[reader]:
                preds[block[reader]][block[p]] = None
    dag = nx.DiGraph()
    dag.add_nodes_from(preds)
    dag.add_edges_from((p, b) for b, ps in preds.items() for p in ps)
    return dag


def _last_ready_first(dag: nx.DiGraph) -> list[Block] | None:
    """A topological order of ``dag`` that visits the block made ready last first (a stack); None on a cycle.

    This order decides which producer a unit joins when several could take it (the earliest visited), so it
    is kept as is: ``nx.lexicographical_topological_sort`` orders by a fixed key, and ordering blocks by
    their first node changes the kernels of some graphs (a Sigmoid feeding both an Add and a graph output).
    """
    waiting = dict(dag.in_degree())
    ready = [b for b, n in waiting.items() if n == 0]
    order: list[Block] = []
    while ready:
        b = ready.pop()
        order.append(b)
        for s in dag.successors(b):
            waiting[s] -= 1
            if waiting[s] == 0:
                ready.append(s)
    return order if len(order) == len(waiting) else None


class _Grouping:
    """Which group each block is in, visited in topological order (mutable while the pass runs)."""

    def __init__(self, state: PassState, sizes: Mapping[Unit, int | None], position: Mapping[Block, int]) -> None:
        self.state = state
        self.sizes = sizes
        self.position = position
        self.effective: dict[Block, tuple[Block, ...]] = {}  # a view's producers, views resolved
        self.group: dict[Block, int] = {}
        self.dep: dict[Block, int] = {}
        self.grouped: dict[int, list[Unit]] = {}

    def is_view(self, b: Block) -> bool:
        return isinstance(b, str) and self.state.g.kind[b] == RuleKind.VIEW

    def visit(self, b: Block, preds: list[Block]) -> None:
        resolved = tuple(dict.fromkeys(q for p in preds for q in self._through_views(p)))
        if self.is_view(b):
            self.effective[b] = resolved
            return
        candidates = self._candidates(b, resolved)
        chosen = self._eligible_group(candidates, resolved)
        self.group[b] = len(self.group) if chosen is None else chosen
        if isinstance(b, Unit):
            self.grouped.setdefault(self.group[b], []).append(b)
            self._absorb_private_siblings(b, candidates)
        mask = 0
        for q in resolved:
            mask |= self.dep[q] | (1 << self.group[q])
        self.dep[b] = mask

    def _through_views(self, p: Block) -> Iterator[Block]:
        yield from self.effective[p] if self.is_view(p) else (p,)

    def _candidates(self, b: Block, resolved: tuple[Block, ...]) -> list[Unit]:
        """The producers ``b`` could join: pointwise units of its element count, in visiting order."""
        if b not in self.sizes:
            return []
        size = self.sizes[b]  # type: ignore[index]
        if size is None:
            return []
        found = [p for p in resolved if isinstance(p, Unit) and p in self.sizes and self.sizes[p] == size]
        return sorted(found, key=self.position.__getitem__)

    def _eligible_group(self, candidates: list[Unit], resolved: tuple[Block, ...]) -> int | None:
        """The group of the first candidate that no producer of another group depends on.

        Producers are gathered by group; ``others[G]`` is the union of the other groups' dependencies, from
        prefix and suffix unions, so the test costs one pass over the producers, not one per candidate.
        """
        if not candidates:
            return None
        deps_by_group: dict[int, int] = {}
        for q in resolved:
            deps_by_group[self.group[q]] = deps_by_group.get(self.group[q], 0) | self.dep[q]
        groups = list(deps_by_group)
        before = [0] * (len(groups) + 1)
        for i, group in enumerate(groups):
            before[i + 1] = before[i] | deps_by_group[group]
        others: dict[int, int] = {}
        after = 0
        for i in range(len(groups) - 1, -1, -1):
            others[groups[i]] = before[i] | after
            after |= deps_by_group[groups[i]]
        for p in candidates:
            if not others[self.group[p]] & (1 << self.group[p]):
                return self.group[p]
        return None

    def _absorb_private_siblings(self, b: Unit, candidates: list[Unit]) -> None:
        """Sibling groups that feed only ``b`` (and do not depend on its group) join it."""
        mine = self.group[b]
        bit = 1 << mine
        refused: set[int] = set()
        for p in candidates:
            other = self.group[p]
            if other == mine or other in refused or self.dep[p] & bit:
                continue
            if not _private(self.grouped[other], b, self.state):
                refused.add(other)
                continue
            for unit in self.grouped.pop(other):
                self.group[unit] = mine
                self.grouped[mine].append(unit)


def _merge(units: list[Unit], pattern: PointwisePattern, state: PassState) -> None:
    """Merge a group's units into its first (in node order), which anchors the kernel."""
    position = state.g.position
    units.sort(key=lambda u: min(position[n] for n in u.nodes))
    head = units[0]
    for other in units[1:]:
        state.merge(head, other, pattern.name, False, "Pointwise", other.out)
    head.anchor = min(head.nodes, key=position.__getitem__)
    head.patterns = [name for name in head.patterns if name != pattern.name] + [pattern.name]


def _private(units: list[Unit], consumer: Unit, state: PassState) -> bool:
    """Whether every output of ``units`` is used only inside them or by ``consumer`` (and is no graph output)."""
    inside = {id(u) for u in units} | {id(consumer)}
    for unit in units:
        for node in unit.nodes:
            for t in state.g.ops[node].outputs:
                if t is None:
                    continue
                users, exported = state.g.users(t.name)
                if exported or any(id(state.unit_of.get(u)) not in inside for u in users):
                    return False
    return True
