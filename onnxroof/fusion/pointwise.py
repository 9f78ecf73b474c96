"""Phase 3 of the fusion pass: pointwise fusion of neighbouring elementwise-only kernels.

Views are transparent here (a tensor read through a view is the same buffer); only kernels of equal element
count join, and never so that the fused kernel would both feed and wait for another kernel (no cycle).

The pass works on *blocks*: the units (kernels under construction) and every node that is no kernel member
(views, metadata, uncosted nodes), numbered in node order, with their data edges in two adjacency arrays. A
single-node pointwise unit whose one producer is a single-node pointwise unit of its element count, read by it
alone, extends that unit's block as a *run* instead (:meth:`_Blocks._run_of`): it would join that group anyway.
Blocks are visited in topological order; a block's ``dep`` is the bitset of the groups it transitively
depends on. A unit joins a producer's group G only if no other producer (views resolved) depends on G:
otherwise the fused kernel would both feed and wait for it. Each producer group's eligibility is read from
prefix and suffix unions of the other groups' dependencies.

The bitsets stay small: only a group holding a pointwise unit can be asked about (the others get no bit), a
block's ``dep`` is kept only while a successor is still to be visited, and when the bit positions handed out
outgrow twice the groups still held plus the masks kept (so that renumbering costs a constant per new bit),
the groups no kept ``dep`` belongs to are dropped and the bits renumbered (no later question can name them).
So a graph whose groups stay apart (a long chain of Relu and Transpose) costs linear time and memory, not
quadratic; the decisions are those of full bitsets. (A graph keeping n blocks waiting while groups come and go
still holds up to n bits per mask, as full bitsets would.)
"""

from __future__ import annotations

import math
import operator
from array import array
from collections.abc import Callable

import numpy as np

from onnxroof.core.ir import OpView, implicit_reads
from onnxroof.core.states import RuleKind
from onnxroof.fusion.graph import PassState, Unit
from onnxroof.fusion.patterns import PointwisePattern

#: A kernel under construction, or the id of a node that is no kernel member or a member no unit can join.
Block = Unit | str

#: Bit positions handed out beyond twice the live groups before the bits are renumbered.
_SLACK = 64


def apply_pointwise(pattern: PointwisePattern, state: PassState) -> None:
    """Merge neighbouring elementwise-only units of equal element count, never creating a cycle."""
    blocks = _Blocks(state)
    if not blocks.mergeable():  # no two pointwise units of one element count
        return
    grouping = _Grouping(state, blocks)
    if not blocks.visit_last_ready_first(grouping.visit):  # not a DAG (cannot happen for convex kernels)
        return  # no fusion
    position = state.g.position
    for members in grouping.grouped.values():
        units = [unit for b in sorted(members) for unit in blocks.units(b)]
        if len(units) < 2:
            continue
        if len(members) > 1 and blocks.runs:  # in the order of their first node, as if every run were apart
            units.sort(
                key=lambda unit: position[unit] if isinstance(unit, str) else min(map(position.__getitem__, unit.nodes))
            )
        _merge(units, pattern, state)  # the head (first) unit's first node anchors the kernel


def _zeros(count: int) -> array:
    return array("q", bytes(8 * count))


def _size_number(unit: Unit | None, op: OpView, state: PassState, size_number: dict[int, int]) -> int:
    """The ``size`` of the block of ``unit`` (whose first node is ``op``; None: ``op``'s unit, never made, the node
    alone): the number of its element count when it is pointwise (elementwise-only, nothing folded into it, its
    output's shape static), numbered in ``size_number`` in order of first sight (a count may exceed 64 bits),
    else -1."""
    g = state.g
    if unit is not None and (unit.folded or unit.out is None):
        return -1
    if unit is None or len(unit.nodes) == 1:  # one node: its output is the op's first (no lookup among tensors)
        if not g.types[op.domain][op.op_type].elementwise:
            return -1
        t = op.outputs[0] if op.outputs else None
    elif g.all_elementwise(unit.nodes):
        t = g.ir.tensors.get(unit.out or "")
    else:
        return -1
    shape = t.shape if t is not None else None
    if shape is None or None in shape:
        return -1
    return size_number.setdefault(math.prod(shape), len(size_number))  # type: ignore[arg-type]  # no None: checked above


class _Blocks:
    """The blocks, numbered in the order of their first node, and their data edges (implicit reads by If/Loop
    bodies included): each block's distinct producers ``preds[pred_start[b]:pred_end[b]]``, its successors
    ``succs[succ_start[b]:succ_start[b + 1]]`` in block order.

    ``size[b]``: the element count of a *pointwise* unit (elementwise-only, nothing folded into it, its
    output's shape static) as a number, equal for equal counts (a count may not fit 64 bits), -1 for other
    blocks (a unit of dynamic size joins no group and no unit joins it);
    ``view[b]``: whether ``b`` is a view node.

    One pass over the nodes numbers the blocks and finds the producers of single-node blocks (numbered already:
    the nodes are in topological order); those of multi-node units and control-flow nodes come after it.
    """

    def __init__(self, state: PassState) -> None:
        n = len(state.g.position)  # at most one block per node: the arrays are cut to the blocks afterwards
        self.items: list[Block] = []
        self.size = array("q", [-1]) * n
        self.view = bytearray(n)
        self.preds = array("q")
        self.pred_start, self.pred_end = _zeros(n), _zeros(n)
        self.runs: dict[int, list[str]] = {}  # block -> the nodes extending its run, in node order
        number_at = array("q", [-1]) * n  # node position -> block number
        seen = array("q", [-1]) * n  # the block whose producers are being gathered, per block (dedup)
        later = self._number(state, number_at, seen)
        count = len(self.items)
        for cut in (self.size, self.view, self.pred_start, self.pred_end):
            del cut[count:]
        if later:
            self._gather_later(later, state, number_at, seen)
        del number_at, seen
        self._link_successors(count)

    def _number(self, state: PassState, number_at: array, seen: array) -> list[int]:
        """Number the blocks in the order of their first node (``number_at``: node position -> block), set each
        block's ``size`` and ``view``, and gather the producers of the single-node blocks whose producers are
        numbered already (the nodes are in topological order). Returns the blocks whose producers are gathered
        after the pass (:meth:`_gather_later`): multi-node units, control-flow nodes, and a node read from a unit
        not numbered yet. The producer gathering stays inline: it runs for every node of the model."""
        g = state.g
        position, producer, types, unit_of = g.position, g.producer, g.types, state.unit_of
        made, costed_at = unit_of.made, g.costed_at
        items, sizes, views, preds = self.items, self.size, self.view, self.preds
        pred_start, pred_end = self.pred_start, self.pred_end
        size_number: dict[int, int] = {}  # element count -> its number, the value kept in ``size``
        later: list[int] = []
        b = -1
        for i, op in enumerate(g.ir.ops):
            if number_at[i] >= 0:
                continue
            b += 1
            number_at[i] = b
            unit = made(op.id)
            if unit is None and not costed_at[i]:
                items.append(op.id)
                views[b] = types[op.domain][op.op_type].kind == RuleKind.VIEW
            else:
                sizes[b] = size = _size_number(unit, op, state, size_number)
                run = self._run_of(op, i, size, number_at, state) if size >= 0 else -1
                if run >= 0:  # b extends the run of its one producer: no block of its own
                    sizes[b] = -1
                    number_at[i] = run
                    self.runs.setdefault(run, []).append(op.id)
                    b -= 1
                    continue
                if unit is None and size >= 0:  # a member alone that no unit can join stays an id (unit not made)
                    unit = unit_of[op.id]
                items.append(op.id if unit is None else unit)
                if unit is not None and len(unit.nodes) != 1:
                    for node in unit.nodes:
                        number_at[position[node]] = b
                    later.append(b)
                    continue
            first = pred_start[b] = len(preds)
            if not op.subgraphs:
                for t in op.inputs:
                    if t is None:
                        continue
                    p = producer.get(t.name)
                    if p is None:
                        continue
                    bp = number_at[position[p]]
                    if bp < 0:  # a producer not numbered yet: after the pass
                        break
                    if bp != b and seen[bp] != b:
                        seen[bp] = b
                        preds.append(bp)
                else:
                    pred_end[b] = len(preds)
                    continue
            del preds[first:]
            later.append(b)
        return later

    def _run_of(self, op: OpView, i: int, size: int, number_at: array, state: PassState) -> int:
        """The block whose run the single-node unit of ``op`` (the ``i``-th op, of pointwise ``size``) extends,
        else -1.

        A unit extends a run when its one producer node ``p`` is in a block of single-node units (a unit alone, or
        a run), pointwise of the same element count, and every output of ``p`` is read by this op alone. The
        grouping would put the op in ``p``'s group in any case (a block with one producer of its size joins it),
        and visit it right after ``p`` (its only successor, made ready last): taking it into ``p``'s block
        changes no decision. A chain of a million Relus is then one block, not a million visited one by one. An op
        whose one input is the one output of the op before it (a chain's usual case) finds ``p`` without a lookup."""
        ops = state.g.ir.ops
        inputs, before = op.inputs, ops[i - 1].outputs if i else ()
        follows = len(inputs) == 1 and len(before) == 1 and inputs[0] is not None and inputs[0] is before[0]
        if op.subgraphs:
            return -1
        at = i - 1 if follows else self._producer_at(op, state)
        if at < 0:
            return -1
        bp = number_at[at]
        if bp < 0 or self.size[bp] != size:  # not numbered yet (a multi-node unit's member), or another size
            return -1
        item = self.items[bp]
        if not isinstance(item, Unit) or len(item.nodes) != 1:
            return -1
        consumers, reader = state.g.consumers, (op.id,)
        for t in ops[at].outputs:
            if t is None or consumers.get(t.name) != reader:
                return -1
        return bp

    @staticmethod
    def _producer_at(op: OpView, state: PassState) -> int:
        """The position of the one node producing ``op``'s inputs, else -1 (none, or several)."""
        producer, p = state.g.producer, None
        for t in op.inputs:
            q = producer.get(t.name) if t is not None else None
            if q is None or q == p:
                continue
            if p is not None:
                return -1
            p = q
        return -1 if p is None else state.g.position[p]

    def units(self, b: int) -> list[Unit | str]:
        """The units of pointwise block ``b`` in node order: its unit, then the nodes extending its run (each a
        unit of one node, by id: made or not, :class:`~onnxroof.fusion.graph.Units`)."""
        return [self.unit(b), *self.runs.get(b, ())]

    def nodes(self, b: int, state: PassState) -> list[str]:
        """The nodes of pointwise block ``b``: its unit's, then those of the units extending its run."""
        found = list(self.unit(b).nodes)
        for node in self.runs.get(b, ()):
            unit = state.unit_of.made(node)
            found.extend(unit.nodes if unit is not None else (node,))
        return found

    def _link_successors(self, count: int) -> None:
        """Each block's successors ``succs[succ_start[b]:succ_start[b + 1]]`` in block order, and its
        ``out_degree``, from the producers gathered (the CSR transpose of ``preds``, as columns: each entry of
        ``preds`` with the block reading it, sorted by producer, then reader; the ranges of ``preds`` are disjoint
        and cover it, so the readers are the blocks in order of their range, each repeated over its length)."""
        preds = np.frombuffer(self.preds, dtype=np.int64)
        starts, ends = np.frombuffer(self.pred_start, np.int64), np.frombuffer(self.pred_end, np.int64)
        blocks = np.argsort(starts, kind="stable")
        readers = np.repeat(blocks, (ends - starts)[blocks])
        degree = np.bincount(preds, minlength=count).astype(np.int64)
        self.out_degree = array("q", degree.tobytes())
        self.succ_start = array("q", np.concatenate(([0], np.cumsum(degree))).astype(np.int64).tobytes())
        self.succs = array("q", readers[np.lexsort((readers, preds))].tobytes())

    def _gather_later(self, later: list[int], state: PassState, number_at: array, seen: array) -> None:
        """The producers of multi-node units and control-flow nodes (what their bodies read included)."""
        g = state.g
        for b in later:
            item = self.items[b]
            self.pred_start[b] = len(self.preds)
            for node in item.nodes if isinstance(item, Unit) else (item,):
                op = g.ops[node]
                reads = [t.name for t in op.inputs if t is not None]
                if op.subgraphs:
                    reads += implicit_reads(op)
                for name in reads:
                    p = g.producer.get(name)
                    if p is None:
                        continue
                    bp = number_at[g.position[p]]
                    if bp != b and seen[bp] != -2 - b:  # a mark apart from the pass's
                        seen[bp] = -2 - b
                        self.preds.append(bp)
            self.pred_end[b] = len(self.preds)

    def unit(self, b: int) -> Unit:
        """Pointwise block ``b`` (``size[b] >= 0``), always a unit: a node that is no kernel member has size -1."""
        item = self.items[b]
        assert isinstance(item, Unit), f"pointwise block {b} is no unit"
        return item

    def mergeable(self) -> bool:
        """Whether two pointwise units have one element count (else nothing can merge): a run holds two."""
        sizes = [s for s in self.size if s >= 0]
        return bool(self.runs) or len(set(sizes)) < len(sizes)

    def visit_last_ready_first(self, visit: Callable[[int], None]) -> bool:
        """Visit the blocks in a topological order that takes the block made ready last first (a stack);
        False on a cycle (some blocks never visited).

        This order decides which producer a unit joins when several could take it (the earliest visited), so
        it is kept as is: ordering blocks by a fixed key (their first node) changes the kernels of some graphs
        (a Sigmoid feeding both an Add and a graph output).
        """
        start, succs = self.succ_start, self.succs
        waiting = array("q", map(operator.sub, self.pred_end, self.pred_start))
        ready = [b for b, n in enumerate(waiting) if n == 0]
        visited = 0
        while ready:
            b = ready.pop()
            visit(b)
            visited += 1
            for j in range(start[b], start[b + 1]):
                s = succs[j]
                waiting[s] -= 1
                if waiting[s] == 0:
                    ready.append(s)
        return visited == len(self.items)


class _Grouping:
    """Which group each block is in, visited in topological order (mutable while the pass runs).

    ``dep[b]`` (kept while ``b`` has a successor to visit, or a view to visit still resolves to it) has bit
    ``bit[G]`` set when ``b`` depends on group G; only groups holding a pointwise unit have a bit.
    """

    def __init__(self, state: PassState, blocks: _Blocks) -> None:
        self.state, self.blocks = state, blocks
        count = len(blocks.items)
        self.position = _zeros(count)  # visiting order
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
            effective = self.effective
            resolved = tuple(dict.fromkeys(q for p in preds for q in (effective[p] if view[p] else (p,))))
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
        if len(resolved) == 1:  # one producer: b joins its group if it can (a chain's common case)
            q = resolved[0]
            candidates = [q] if size[b] >= 0 and size[q] == size[b] else []
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
        """The producers ``b`` could join: pointwise units of its element count, in visiting order."""
        size = self.blocks.size
        if size[b] < 0:
            return []
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
            nodes = [n for v in self.grouped[other] for n in self.blocks.nodes(v, self.state)]
            if not self.state.g.private(nodes, {*nodes, *self.blocks.nodes(b, self.state)}):
                refused.add(other)
                continue
            for u in self.grouped.pop(other):
                group[u] = mine
                self.grouped[mine].append(u)
            del self.bit[other]  # no block is in it any more


def _merge(units: list[Unit | str], pattern: PointwisePattern, state: PassState) -> None:
    """Merge a group's units, sorted by their first node, into the first, whose first node anchors the kernel.
    A unit given by a node id (a run's node, :meth:`_Blocks.units`) is that node's unit: the head is made if it
    is one."""
    first = units[0]
    head = state.unit_of[first] if isinstance(first, str) else first
    anchor = min(head.nodes, key=state.g.position.__getitem__)
    others = [state.unit_of.made(u) or u if isinstance(u, str) else u for u in units[1:]]
    state.merge_all(head, others, pattern.name, "Pointwise")
    head.anchor = anchor
    head.patterns = (*(name for name in head.patterns if name != pattern.name), pattern.name)
