"""Phase 3 of the fusion pass: pointwise fusion of neighbouring elementwise-only kernels.

Views are transparent here (a tensor read through a view is the same buffer); only kernels of equal element
count join, and never so that the fused kernel would both feed and wait for another kernel (no cycle).
"""

from __future__ import annotations

from onnxroof.core.states import RuleKind
from onnxroof.fusion.graph import PassState, Unit
from onnxroof.fusion.patterns import PointwisePattern


def apply_pointwise(pattern: PointwisePattern, state: PassState) -> None:
    """Merge neighbouring elementwise-only units of equal element count, never creating a cycle.

    Blocks (units, and every node that is not a kernel member) are visited in topological order; ``dep`` is
    the bitset of groups a block transitively depends on. A unit joins a producer's group G only if no other
    producer (views resolved) depends on G: otherwise the fused kernel would both feed and wait for it.
    """
    g = state.g
    candidates_left = {
        id(u) for u in state.unit_of.values() if not u.folded and all(n in g.elementwise for n in u.nodes)
    }
    if len(candidates_left) < 2:  # nothing could merge: skip building the block graph
        return
    block: dict[str, object] = {op.id: state.unit_of.get(op.id) or op.id for op in g.ir.ops}
    preds: dict[object, list[object]] = {b: [] for b in block.values()}
    for name, readers in g.consumers.items():  # every data edge, implicit reads by If/Loop bodies included
        p = g.producer.get(name)
        if p is None:
            continue
        for reader in readers:
            found = preds[block[reader]]
            if block[p] is not block[reader] and all(block[p] is not q for q in found):
                found.append(block[p])
    waiting = {b: len(ps) for b, ps in preds.items()}
    succs: dict[object, list[object]] = {b: [] for b in preds}
    for b, ps in preds.items():
        for p in ps:
            succs[p].append(b)
    order: list[object] = []
    ready = [b for b, n in waiting.items() if n == 0]
    while ready:
        b = ready.pop()
        order.append(b)
        for s in succs[b]:
            waiting[s] -= 1
            if waiting[s] == 0:
                ready.append(s)
    if len(order) != len(preds):  # the blocks do not form a DAG (cannot happen for convex kernels): no fusion
        return
    position = {b: i for i, b in enumerate(order)}

    def is_view(b: object) -> bool:
        return isinstance(b, str) and g.kind[b] == RuleKind.VIEW

    def pointwise(b: object) -> bool:
        return isinstance(b, Unit) and not b.folded and all(n in g.elementwise for n in b.nodes)

    def numel(unit: Unit) -> int | None:
        t = g.ir.tensors.get(unit.out) if unit.out is not None else None
        return t.numel if t is not None and t.is_static_shape else None

    effective: dict[object, list[object]] = {}
    group: dict[object, int] = {}
    dep: dict[object, int] = {}
    grouped: dict[int, list[Unit]] = {}
    for b in order:
        resolved: list[object] = []
        for p in preds[b]:
            for q in effective[p] if is_view(p) else (p,):
                if all(q is not r for r in resolved):
                    resolved.append(q)
        effective[b] = resolved
        if is_view(b):
            continue
        chosen = None
        candidates: list[Unit] = []
        if pointwise(b):
            size = numel(b)  # type: ignore[arg-type]
            candidates = [
                p  # type: ignore[misc]
                for p in sorted(resolved, key=position.__getitem__)
                if size is not None and pointwise(p) and numel(p) == size  # type: ignore[arg-type]
            ]
            for p in candidates:
                bit = 1 << group[p]
                if all(group[q] == group[p] or not dep[q] & bit for q in resolved):
                    chosen = group[p]
                    break
        group[b] = len(group) if chosen is None else chosen
        if isinstance(b, Unit):
            grouped.setdefault(group[b], []).append(b)
        for p in candidates:  # sibling groups that feed only this unit join it too
            other = group[p]
            if other != group[b] and not dep[p] & (1 << group[b]) and _private(grouped[other], b, state):
                for unit in grouped.pop(other):
                    group[unit] = group[b]
                    grouped[group[b]].append(unit)
        mask = 0
        for q in resolved:
            mask |= dep[q] | (1 << group[q])
        dep[b] = mask
    for units in grouped.values():
        if len(units) < 2:
            continue
        units.sort(key=lambda u: min(g.position[n] for n in u.nodes))
        head = units[0]
        for other in units[1:]:
            state.merge(head, other, pattern.name, False, "Pointwise", other.out)
        head.anchor = min(head.nodes, key=g.position.__getitem__)
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
