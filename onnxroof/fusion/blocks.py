"""The blocks of pointwise fusion (:mod:`onnxroof.fusion.pointwise`): the units (kernels under construction) and
every node that is no kernel member (views, metadata, uncosted nodes), numbered in node order, with their data
edges in two adjacency arrays.

A single-node pointwise unit whose one producer is a single-node pointwise unit of its element count, read by it
alone, extends that unit's block as a *run* instead (:meth:`Blocks._run_producers`): it would join that group
anyway. The per-node facts this needs are columns (:func:`alone_sizes`, :meth:`Blocks._run_producers`), and the
blocks are numbered from them at once (:meth:`Blocks._number`).
"""

from __future__ import annotations

import math
import operator
from array import array
from collections.abc import Callable, Mapping
from itertools import repeat
from operator import attrgetter

import numpy as np

from onnxroof.core.ir import OpView, TensorInfo, implicit_reads
from onnxroof.core.states import RuleKind
from onnxroof.fusion.graph import PassState, Unit

#: A kernel under construction, or the id of a node that is no kernel member or a member no unit can join.
Block = Unit | str


def zeros(count: int) -> array:
    """An array of ``count`` zeros (int64)."""
    return array("q", bytes(8 * count))


def alone_sizes(
    state: PassState,
    made: Mapping[int, Unit],
    outputs: list[tuple[TensorInfo | None, ...]],
    size_number: dict[int, int],
) -> list[int]:
    """Each node's ``size`` as a unit of its own: the number (``size_number``: element count -> its number, in order
    of first sight; a count may exceed 64 bits) of its first output's element count when it is a *pointwise unit
    alone* (costed, elementwise, that output's shape static, and its unit, if ``made`` (by position), of this node
    alone, nothing folded into it), else -1. ``outputs``: each node's outputs.

    One column over the nodes: the candidates' output shapes, each distinct shape counted once."""
    g = state.g
    types = g.types
    shapes = [
        out[0].shape if costed and out and out[0] is not None and types[op.domain][op.op_type].elementwise else None
        for op, out, costed in zip(g.ir.ops, outputs, g.costed_at, strict=True)
    ]
    numbered: dict[tuple[int | None, ...] | None, int] = {}
    for shape in dict.fromkeys(shapes):
        if shape is not None and None not in shape:
            numbered[shape] = size_number.setdefault(math.prod(shape), len(size_number))  # type: ignore[arg-type]
    sizes = list(map(numbered.get, shapes, repeat(-1)))
    for i, unit in made.items():
        if len(unit.nodes) != 1 or unit.folded or unit.out is None:
            sizes[i] = -1
    return sizes  # every shape not numbered gave the default, -1


def _unit_size(unit: Unit, state: PassState, size_number: dict[int, int]) -> int:
    """The ``size`` of a unit of several nodes: the number of its output's element count when it is pointwise
    (every member elementwise, nothing folded into it, its output's shape static), else -1."""
    if unit.folded or unit.out is None or not state.g.all_elementwise(unit.nodes):
        return -1
    t = state.g.ir.tensors.get(unit.out)
    shape = t.shape if t is not None else None
    if shape is None or None in shape:
        return -1
    return size_number.setdefault(math.prod(shape), len(size_number))  # type: ignore[arg-type]  # no None: checked


class Blocks:
    """The blocks, numbered in the order of their first node, and their data edges (implicit reads by If/Loop
    bodies included): each block's distinct producers ``preds[pred_start[b]:pred_end[b]]``, its successors
    ``succs[succ_start[b]:succ_start[b + 1]]`` in block order.

    ``size[b]``: the element count of a *pointwise* unit (elementwise-only, nothing folded into it, its
    output's shape static) as a number, equal for equal counts (a count may not fit 64 bits), -1 for other
    blocks (a unit of dynamic size joins no group and no unit joins it);
    ``view[b]``: whether ``b`` is a view node; ``runs[b]``: the units extending pointwise block ``b``'s run
    (:meth:`_run_producers`), in node order, each its unit if made, else its node's id.

    The per-node facts are columns (:func:`alone_sizes`, :meth:`_run_producers`); the blocks are numbered from
    them at once (:meth:`_number`), and only then is each block described and its producers gathered.
    """

    def __init__(self, state: PassState) -> None:
        made = state.unit_of.made_at()
        size_number: dict[int, int] = {}  # element count -> its number, the value kept in ``size``
        outputs = list(map(attrgetter("outputs"), state.g.ir.ops))
        alone = alone_sizes(state, made, outputs, size_number)
        run_from = self._run_producers(state, alone, outputs)
        number_at, firsts = self._number(state, made, run_from)
        count = len(firsts)
        self.items: list[Block] = []
        self.size = array("q", [-1]) * count
        self.view = bytearray(count)
        self.preds = array("q")
        self.pred_start, self.pred_end = zeros(count), zeros(count)
        self._describe(state, made, firsts, number_at, alone, size_number)
        self._link_successors(count)

    def _run_producers(
        self, state: PassState, sizes: list[int], outputs: list[tuple[TensorInfo | None, ...]]
    ) -> list[int]:
        """For each node, the position of the producer whose run it extends, else -1.

        A node extends a run when it is a pointwise unit alone (``sizes``, :func:`alone_sizes`) without a body,
        whose inputs come from one node ``p``, itself a pointwise unit alone of the same element count, and every
        output of ``p`` is read by this node alone. The grouping would put it in ``p``'s group in any case (a
        block with one producer of its size joins it), and visit it right after ``p`` (its only successor, made
        ready last): taking it into ``p``'s block changes no decision. A chain of a million Relus is then one
        block, not a million visited one by one.

        The nodes of the size of the node before are found as a column; among them, a node whose inputs are the
        outputs of the node before it (``outputs``: each node's), one tensor that it alone reads (a chain's usual
        case: the IR shares that tuple between them, :func:`~onnxroof.core.ir.build_ir`), is told without looking
        up its producer; the other candidates are looked at one by one (:meth:`_run_of`)."""
        g = state.g
        column = np.asarray(sizes)
        same = np.zeros(len(sizes), dtype=bool)  # pointwise, of the size of the node before
        same[1:] = (column[1:] >= 0) & (column[1:] == column[:-1])
        same[[g.position[node] for node in g.ir.bodies]] = False
        ops, ids, consumers = g.ir.ops, g.ids, g.consumers.get
        found = [-1] * len(sizes)
        for i in np.flatnonzero(same).tolist():
            before = outputs[i - 1]
            if ops[i].inputs is before and len(before) == 1:
                read = before[0].name  # type: ignore[union-attr]  # the output of a pointwise unit
                if consumers(read) == (ids[i],):
                    found[i] = i - 1
        others = np.flatnonzero((column >= 0) & (np.asarray(found) < 0)).tolist()
        for i in others:
            found[i] = self._run_of(i, sizes, state)
        return found

    def _run_of(self, i: int, sizes: list[int], state: PassState) -> int:
        """The position of the producer whose run the ``i``-th node (a pointwise unit alone) extends, else -1
        (:meth:`_run_producers`)."""
        op = state.g.ir.ops[i]
        at = -1 if op.subgraphs else self._producer_at(op, state)
        if at < 0 or sizes[at] != sizes[i]:
            return -1
        consumers, reader = state.g.consumers, (op.id,)
        for t in state.g.ir.ops[at].outputs:
            if t is None or consumers.get(t.name) != reader:
                return -1
        return at

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

    def _number(self, state: PassState, made: Mapping[int, Unit], run_from: list[int]) -> tuple[array, list[int]]:
        """Each node's block (``number_at``) and each block's first node (``firsts``), the blocks numbered in the
        order of their first node. A block starts at every node but those extending a run (``run_from``: they
        take their producer's block, and are kept in ``runs``) and the members of a unit of several nodes after
        its first (they take its block)."""
        position, ids = state.g.position, state.g.ids
        extending = np.asarray(run_from) >= 0
        starts = ~extending
        later, first = [], []  # the members of each unit of several nodes after its first, and that first
        for unit in dict.fromkeys(made.values()):
            if len(unit.nodes) > 1:
                at = sorted(map(position.__getitem__, unit.nodes))
                later += at[1:]
                first += [at[0]] * (len(at) - 1)
        starts[later] = False
        firsts = np.flatnonzero(starts)
        numbers = np.full(len(run_from), -1, dtype=np.int64)
        numbers[firsts] = np.arange(len(firsts))
        numbers[later] = numbers[first]
        number_at = array("q", numbers.tobytes())
        self.runs: dict[int, list[Unit | str]] = {}
        for i in np.flatnonzero(extending).tolist():  # node order: a producer is numbered before its readers
            b = number_at[i] = number_at[run_from[i]]
            self.runs.setdefault(b, []).append(made.get(i) or ids[i])
        return number_at, firsts.tolist()

    def _describe(
        self,
        state: PassState,
        made: Mapping[int, Unit],
        firsts: list[int],
        number_at: array,
        alone: list[int],
        size_number: dict[int, int],
    ) -> None:
        """Set each block's item (a unit, made now for a pointwise unit alone; else the node's id), ``size`` and
        ``view``, and gather its distinct producers (what its members read, in member order, then what their
        bodies read)."""
        g = state.g
        ops, position, producer, types, costed_at = g.ir.ops, g.position, g.producer, g.types, g.costed_at
        tensors = g.ir.tensors
        items, sizes, preds, view = self.items, self.size, self.preds, self.view
        pred_start, pred_end = self.pred_start, self.pred_end
        seen = array("q", [-1]) * len(firsts)  # the block whose producers are being gathered, per block (dedup)
        for b, i in enumerate(firsts):
            op = ops[i]
            unit = made.get(i)
            members: list[OpView] | tuple[OpView] = (op,)
            if unit is not None and len(unit.nodes) > 1:
                items.append(unit)
                sizes[b] = _unit_size(unit, state, size_number)
                members = [g.ops[node] for node in unit.nodes]
            elif unit is None and not costed_at[i]:  # no kernel member: a view, metadata, an uncosted node
                items.append(op.id)
                view[b] = types[op.domain][op.op_type].kind == RuleKind.VIEW
            else:
                sizes[b] = alone[i]
                if unit is None and alone[i] >= 0:  # a member alone that no unit can join stays an id (not made)
                    unit = state.unit_of[op.id]
                items.append(op.id if unit is None else unit)
            pred_start[b] = len(preds)
            for member in members:
                reads = member.inputs
                if member.subgraphs:  # and what its bodies read (a tensor produced here is one of ``tensors``)
                    reads = (*reads, *map(tensors.get, implicit_reads(member)))
                for t in reads:
                    p = producer.get(t.name) if t is not None else None
                    if p is None:
                        continue
                    bp = number_at[position[p]]
                    if bp != b and seen[bp] != b:
                        seen[bp] = b
                        preds.append(bp)
            pred_end[b] = len(preds)

    def units(self, b: int) -> list[Unit | str]:
        """The units of pointwise block ``b`` in node order: its unit, then those extending its run (each a unit of
        one node: the unit if made, else the node's id, :class:`~onnxroof.fusion.graph.Units`)."""
        return [self.unit(b), *self.runs.get(b, ())]

    def nodes(self, b: int) -> list[str]:
        """The nodes of pointwise block ``b``: its unit's, then those of the units extending its run."""
        found = list(self.unit(b).nodes)
        for unit in self.runs.get(b, ()):
            if isinstance(unit, str):
                found.append(unit)
            else:
                found.extend(unit.nodes)
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
