"""Phase 3 of the fusion pass: pointwise fusion of neighbouring elementwise-only kernels.

Views are transparent here (a tensor read through a view is the same buffer); only kernels of equal element
count join, and never so that the fused kernel would both feed and wait for another kernel (no cycle).

The pass works on *blocks* (:mod:`onnxroof.fusion.blocks`): the units (kernels under construction) and every node
that is no kernel member, numbered in node order, with their data edges; a single-node pointwise unit that would
join its one producer's group in any case extends that unit's block as a *run* instead. Blocks are visited in
topological order; a block's ``dep`` is the bitset of the groups it transitively depends on. A unit joins a
producer's group G only if no other producer (views resolved) depends on G: otherwise the fused kernel would both
feed and wait for it. Each producer group's eligibility is read from prefix and suffix unions of the other groups'
dependencies.

The bitsets stay small: only a group holding a pointwise unit can be asked about (the others get no bit), a
block's ``dep`` is kept only while a successor is still to be visited, and when the bit positions handed out
outgrow twice the groups still held plus the masks kept (so that renumbering costs a constant per new bit),
the groups no kept ``dep`` belongs to are dropped and the bits renumbered (no later question can name them).
So a graph whose groups stay apart (a long chain of Relu and Transpose) costs linear time and memory, not
quadratic; the decisions are those of full bitsets. (A graph keeping n blocks waiting while groups come and go
still holds up to n bits per mask, as full bitsets would.)
"""

from __future__ import annotations

from array import array
from itertools import chain

from onnxroof.fusion.blocks import Blocks, zeros
from onnxroof.fusion.graph import PassState, Unit
from onnxroof.fusion.patterns import PointwisePattern

#: Bit positions handed out beyond twice the live groups before the bits are renumbered.
_SLACK = 64


def apply_pointwise(pattern: PointwisePattern, state: PassState) -> None:
    """Merge neighbouring elementwise-only units of equal element count, never creating a cycle."""
    blocks = Blocks(state)
    if not blocks.mergeable():  # no two pointwise units of one element count
        return
    grouping = _Grouping(state, blocks)
    if not blocks.visit_last_ready_first(grouping.visit):  # not a DAG (cannot happen for convex kernels)
        return  # no fusion
    position = state.g.position
    for members in grouping.grouped.values():
        units = list(chain.from_iterable(map(blocks.units, sorted(members))))
        if len(units) < 2:
            continue
        if len(members) > 1 and blocks.runs:  # in the order of their first node, as if every run were apart
            units.sort(
                key=lambda unit: position[unit] if isinstance(unit, str) else min(map(position.__getitem__, unit.nodes))
            )
        _merge(units, pattern, state)  # the head (first) unit's first node anchors the kernel


class _Grouping:
    """Which group each block is in, visited in topological order (mutable while the pass runs).

    ``dep[b]`` (kept while ``b`` has a successor to visit, or a view to visit still resolves to it) has bit
    ``bit[G]`` set when ``b`` depends on group G; only groups holding a pointwise unit have a bit.
    """

    def __init__(self, state: PassState, blocks: Blocks) -> None:
        self.state, self.blocks = state, blocks
        count = len(blocks.items)
        self.position = zeros(count)  # visiting order
        self.visited = 0
        self.remaining = array("q", blocks.out_degree)  # successors not visited yet
        self.effective: dict[int, tuple[int, ...]] = {}  # a view's producers, views resolved
        self.pins: dict[int, int] = {}  # how many kept views resolve to a block
        self.group = array("q", [-1]) * count
        self.dep: dict[int, int] = {}
        self.bit: dict[int, int] = {}
        self.next_bit, self.bit_limit = 0, _SLACK
        self.groups = 0
        self.grouped: dict[int, list[int]] = {}

    def visit(self, b: int) -> None:
        blocks, view, remaining = self.blocks, self.blocks.view, self.remaining
        self.position[b], self.visited = self.visited, self.visited + 1
        first, end = blocks.pred_start[b], blocks.pred_end[b]
        if first == end and blocks.size[b] < 0 and not view[b]:  # a source no unit can join (a Constant): no test
            self.group[b], self.groups = self.groups, self.groups + 1  # a group of its own, no bit
            if remaining[b]:
                self.dep[b] = 0  # it depends on no group
            return
        if end - first == 1:  # one producer (a chain's common case)
            p = blocks.preds[first]
            preds: tuple[int, ...] | array = (p,)
            resolved = self.effective[p] if view[p] else (p,)
        else:
            preds = blocks.preds[first:end]
            if any(map(view.__getitem__, preds)):
                effective = self.effective
                resolved = tuple(dict.fromkeys(q for p in preds for q in (effective[p] if view[p] else (p,))))
            else:  # no view among them: the producers themselves, distinct as gathered (:class:`Blocks`)
                resolved = tuple(preds)
        if view[b]:
            if remaining[b]:
                self.effective[b] = resolved
                for q in resolved:
                    self.pins[q] = self.pins.get(q, 0) + 1
        else:
            self._place(b, resolved)
        for p in preds:
            remaining[p] -= 1
            if remaining[p] == 0:  # p's last successor was visited: drop what only they needed
                if view[p] or p in self.pins:
                    self._release(p)
                else:
                    self.dep.pop(p, None)

    def _place(self, b: int, resolved: tuple[int, ...]) -> None:
        size, group = self.blocks.size, self.group
        if size[b] < 0:  # no pointwise unit: it joins no group
            candidates: list[int] = []
            chosen = None
        elif len(resolved) == 1:  # one producer: b joins its group if it can (a chain's common case)
            q = resolved[0]
            candidates = [q] if size[q] == size[b] else []
            chosen = group[q] if candidates else None
        else:
            candidates = self._candidates(b, resolved)
            chosen = self._eligible_group(candidates, resolved)
        if chosen is None:
            chosen = self.groups
            self.groups += 1
            if size[b] >= 0:  # a group only a pointwise unit starts can be asked about
                self.bit[chosen] = self._new_bit()
                self.grouped[chosen] = []
        group[b] = chosen
        if size[b] >= 0:
            self.grouped[chosen].append(b)
            if len(candidates) > 1 or (candidates and group[candidates[0]] != chosen):
                self._absorb_private_siblings(b, candidates)
        if self.remaining[b]:
            mask = 0
            for q in resolved:
                bit = self.bit.get(group[q])
                mask |= self.dep[q] if bit is None else self.dep[q] | (1 << bit)
            self.dep[b] = mask

    def _release(self, p: int) -> None:
        """``p``'s last successor was visited: drop what only its successors needed."""
        if not self.blocks.view[p]:
            if p not in self.pins:
                self.dep.pop(p, None)
            return
        for q in self.effective.pop(p, ()):
            pins = self.pins[q] - 1
            if pins:
                self.pins[q] = pins
            else:
                del self.pins[q]
                if self.remaining[q] == 0:
                    self.dep.pop(q, None)

    def _new_bit(self) -> int:
        if self.next_bit >= self.bit_limit:
            self._renumber()
        self.next_bit += 1
        return self.next_bit - 1

    def _renumber(self) -> None:
        """Keep the bits of the groups a kept ``dep`` belongs to, renumbered from 0 in their order. Each mask is
        rebuilt from its set bits, so the cost follows the dependencies held, not blocks × groups."""
        kept = sorted({self.bit[G] for G in (self.group[q] for q in self.dep) if G in self.bit})
        renumbered = {old: new for new, old in enumerate(kept)}
        for q, mask in self.dep.items():
            compact = 0
            while mask:
                low = mask & -mask
                new = renumbered.get(low.bit_length() - 1)
                if new is not None:
                    compact |= 1 << new
                mask ^= low
            self.dep[q] = compact
        self.bit = {G: renumbered[old] for G, old in self.bit.items() if old in renumbered}
        self.next_bit = len(kept)
        # the next renumbering costs about the kept masks: wait for as many new bits (amortized constant)
        self.bit_limit = 2 * len(kept) + len(self.dep) + _SLACK

    def _candidates(self, b: int, resolved: tuple[int, ...]) -> list[int]:
        """The producers ``b`` (a pointwise unit) could join: pointwise units of its element count, in visiting
        order."""
        size = self.blocks.size
        found = [p for p in resolved if size[p] == size[b]]
        if len(found) > 1:
            found.sort(key=self.position.__getitem__)
        return found

    def _eligible_group(self, candidates: list[int], resolved: tuple[int, ...]) -> int | None:
        """The group of the first candidate that no producer of another group depends on.

        Producers are gathered by group; ``others[G]`` is the union of the other groups' dependencies, from
        prefix and suffix unions, so the test costs one pass over the producers, not one per candidate.
        """
        if not candidates:
            return None
        group = self.group
        deps_by_group: dict[int, int] = {}
        for q in resolved:
            deps_by_group[group[q]] = deps_by_group.get(group[q], 0) | self.dep[q]
        groups = list(deps_by_group)
        before = [0] * (len(groups) + 1)
        for i, g in enumerate(groups):
            before[i + 1] = before[i] | deps_by_group[g]
        others: dict[int, int] = {}
        after = 0
        for i in range(len(groups) - 1, -1, -1):
            others[groups[i]] = before[i] | after
            after |= deps_by_group[groups[i]]
        for p in candidates:
            if not others[group[p]] >> self.bit[group[p]] & 1:
                return group[p]
        return None

    def _absorb_private_siblings(self, b: int, candidates: list[int]) -> None:
        """Sibling groups that feed only ``b`` (and do not depend on its group) join it."""
        group = self.group
        mine = group[b]
        bit = 1 << self.bit[mine]
        refused: set[int] = set()
        for p in candidates:
            other = group[p]
            if other == mine or other in refused or self.dep[p] & bit:
                continue
            nodes = [n for v in self.grouped[other] for n in self.blocks.nodes(v)]
            if not self.state.g.private(nodes, {*nodes, *self.blocks.nodes(b)}):
                refused.add(other)
                continue
            for u in self.grouped.pop(other):
                group[u] = mine
                self.grouped[mine].append(u)
            del self.bit[other]  # no block is in it any more


def _merge(units: list[Unit | str], pattern: PointwisePattern, state: PassState) -> None:
    """Merge a group's units, sorted by their first node, into the first, whose first node anchors the kernel.
    A unit given by a node id (a run's node never made, :meth:`Blocks.units`) is that node alone: the head is
    made if it is one."""
    first = units[0]
    head = state.unit_of[first] if isinstance(first, str) else first
    anchor = min(head.nodes, key=state.g.position.__getitem__)
    state.merge_all(head, units[1:], pattern.name, "Pointwise")
    head.anchor = anchor
    head.patterns = (*(name for name in head.patterns if name != pattern.name), pattern.name)
