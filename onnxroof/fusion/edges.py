"""Phase 2 of the fusion pass: edge patterns grow each kernel one neighbour at a time.

Anchors are visited in topological order; each absorbs its consumer (or a producer) while a pattern applies
and its checks (:mod:`onnxroof.fusion.checks`) hold, so chains such as Conv → BN → Mul → Add → Relu form.
Named patterns need DIRECT edges, as the runtimes' own matchers do, except ``operand`` patterns, which
absorb the producer of any member's input through views (a flash-attention kernel reads K through the
Reshape after GQA's Expand). Afterwards, a node that a pattern would
have absorbed but that follows no anchor (an orphan, e.g. a Relu after a Conv → Add) gets a miss saying why.
"""

from __future__ import annotations

from collections.abc import Sequence

from onnxroof.fusion.checks import NOT_A_CANDIDATE, Edge, run_checks
from onnxroof.fusion.graph import PassState, Unit
from onnxroof.fusion.patterns import CONSUMER, OPERAND, PATTERNS, EdgePattern, FunctionPattern

#: The op types a pattern gives the unit it makes: with the graph's own, the op types a unit can have in phase 2.
_PRODUCED = frozenset(p.produces for p in PATTERNS if isinstance(p, (EdgePattern, FunctionPattern)) and p.produces)


def apply_edges(edges: Sequence[EdgePattern], state: PassState) -> None:
    """Grow every unit by ``edges`` (anchors in topological order), then explain the orphans.

    A unit's op type is its node's, or what a pattern made of it produces (``possible``): a pattern none of whose
    ``joins`` is among them has no candidate in this graph (:func:`_joinable`), so it merges nothing and records no
    miss, and is not tried; an op type that anchors only such patterns is not visited."""
    present = state.g.unit_keys  # a unit's op type is its node's until a pattern merges it
    if not any(present.intersection(p.anchor) or present.intersection(p.orphans) for p in edges):
        return  # no node a pattern anchors on or explains: nothing to grow, no orphan
    possible = present | _PRODUCED
    by_anchor: dict[str, list[EdgePattern]] = {}  # op type -> the patterns it anchors, in order
    for p in edges:
        if p.joins.isdisjoint(possible):
            continue
        for op_type in p.anchor:
            by_anchor.setdefault(op_type, []).append(p)
    for node, unit in state.unit_of.items_of(by_anchor):  # node order; merges only rebind existing keys
        if unit.anchor == node and unit.alive:
            _grow(unit, by_anchor, state)
    for p in edges:
        if not p.orphans.isdisjoint(possible):  # else no unit can be of an orphan type: no scan of the nodes
            _explain_orphans(p, state)


def _grow(unit: Unit, by_anchor: dict[str, list[EdgePattern]], state: PassState) -> None:
    """Apply the first pattern anchored on ``unit``'s op type that merges a neighbour, in order, until none does.
    Within one round nothing merges, so the units reading ``unit``'s output are found once for every consumer
    pattern of the round (a refused candidate only records a miss)."""
    progressed = True
    while progressed:
        progressed = False
        readers: list[Unit | None] | None = None
        for pattern in by_anchor.get(unit.op_type, ()):
            if pattern.direction != CONSUMER:
                progressed = _apply_edge(pattern, unit, state)
            elif unit.out is not None:
                if readers is None:
                    readers = [state.unit_of.get(u) for u in state.g.consumers.get(unit.out, ())]
                joined = next((c for c in readers if _joinable(c, unit, pattern)), None)
                progressed = joined is not None and _merge_if_checked(
                    pattern, unit, joined, unit.out, joined.out, state
                )
            if progressed:
                break


def _joinable(unit: Unit | None, anchor: Unit, pattern: EdgePattern) -> bool:
    return (
        unit is not None
        and unit is not anchor
        and unit.op_type in pattern.joins
        and (len(unit.nodes) == 1 or unit.function)
    )


def _apply_edge(pattern: EdgePattern, unit: Unit, state: PassState) -> bool:
    """Merge into ``unit`` a producer ``pattern`` (not a consumer one: :func:`_grow` joins readers) allows: of an
    operand read through views, or of the anchor's input."""
    g = state.g
    if pattern.direction == OPERAND:
        return _apply_operand(pattern, unit, state)
    for t in g.ops[unit.anchor].inputs:
        if (
            t is not None
            and t.name in g.producer
            and _absorb(pattern, unit, state.unit_of.get(g.producer[t.name]), t.name, state)
        ):
            return True
    return False


def _absorb(pattern: EdgePattern, unit: Unit, producer: Unit | None, tensor: str, state: PassState) -> bool:
    """Merge ``producer``, whose output ``tensor`` ``unit`` reads, into ``unit`` when ``pattern``'s checks pass;
    a candidate refused by a check is recorded as a miss."""
    if producer is None or not _joinable(producer, unit, pattern) or producer.out != tensor:
        return False
    return _merge_if_checked(pattern, unit, producer, tensor, unit.out, state)


def _merge_if_checked(
    pattern: EdgePattern, unit: Unit, other: Unit, tensor: str, out: str | None, state: PassState
) -> bool:
    """Merge ``other`` (joined to ``unit`` through ``tensor``) into ``unit``, the kernel writing ``out``, when
    ``pattern``'s checks pass; a candidate refused by a check is recorded as a miss."""
    reason = run_checks(Edge(pattern, unit, other, tensor, state), pattern.checks)
    if reason is not None:
        if reason != NOT_A_CANDIDATE:
            state.miss(pattern.name, (unit.anchor, *other.nodes), reason)
        return False
    state.merge(unit, other, pattern.name, pattern.fold, pattern.produces, out)
    return True


def _apply_operand(pattern: EdgePattern, unit: Unit, state: PassState) -> bool:
    """Absorb the producer of any member's input, read through views (its output is the buffer they alias)."""
    g = state.g
    producer, unit_of = g.producer, state.unit_of
    for node in list(unit.nodes):
        entry = g.entry(node)
        skip = entry.config_inputs if entry is not None else frozenset()
        for i, t in enumerate(g.ops[node].inputs):
            if t is None or i in skip:
                continue
            root = g.root(t.name)
            writer = producer.get(root)  # None: a graph input, a weight or a constant
            if writer is not None and _absorb(pattern, unit, unit_of.get(writer), root, state):
                return True
    return False


def _explain_orphans(pattern: EdgePattern, state: PassState) -> None:
    g = state.g
    explained = {node for miss in state.misses if miss.pattern == pattern.name for node in miss.node_ids}
    anchors = "/".join(sorted(pattern.anchor))
    verb = "fold" if pattern.fold else "fuse"
    for node, unit in state.unit_of.items_of(pattern.orphans):  # single-node units of an orphan type, in node order
        if len(unit.nodes) != 1 or node in explained:
            continue
        op = g.ops[node]
        first = op.input(0)
        source = g.producer.get(first.name) if first is not None else None
        if source is None:
            where = f"its input '{first.name}' is a graph input" if first is not None else "it has no input"
            state.miss(pattern.name, (op.id,), f"{g.label(op.id)} does not directly follow a {anchors}: {where}")
            continue
        reason = f"{g.label(op.id)} does not directly follow a {anchors}: its input comes from {g.label(source)}"
        before = g.ops[source].input(0)
        grand = g.producer.get(before.name) if before is not None else None
        kernel = state.unit_of.get(grand) if grand is not None else None
        grand_op = g.ops[kernel.anchor if kernel is not None else grand].op_type if grand is not None else ""
        if grand_op in pattern.anchor:  # e.g. the Relu follows a Conv (or a Conv kernel that folded its BN)
            reason += f" ({grand_op}→{g.ops[source].op_type}→{op.op_type} does not {verb})"
        state.miss(pattern.name, (source, op.id), reason)
