"""Phase 1 of the fusion pass: decomposed functions (GELU, SiLU, LayerNorm, RMSNorm) matched by template.

:func:`apply_functions` scans the nodes in topological order and tries each :class:`FunctionPattern` whose
first step (or an optional step before it) the node can fill (template syntax: :mod:`onnxroof.fusion.patterns`).
A match becomes one unit, unless a member's output is also used outside the match: then a miss says where.

The matcher reads no shape, dtype or attribute: only the graph's structure, which inputs are constants and which
nodes are costed (:func:`matcher_facts`). Its decisions (:class:`FunctionMatches`) are therefore the same for
every binding of one model whose facts are equal (an LLM's prefill and decode steps), and are replayed there
instead of matched again (``prior``).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import NamedTuple

from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.ir import ModelIR, OpView, TensorInfo
from onnxroof.fusion.graph import FusionGraph, MissRecord, PassState
from onnxroof.fusion.patterns import FunctionPattern, Step

_COMMUTATIVE = frozenset({"Add", "Mul"})


@frozen_dataclass(slots=True, eq=False)
class FunctionMatch:
    """One decomposed function recognised: its pattern, its members (in topological order) and its output."""

    pattern: FunctionPattern
    members: tuple[str, ...]
    output: str


@frozen_dataclass(eq=False)
class FunctionMatches:
    """Phase 1's decisions on one graph (the matches and the misses, in the order found) and the facts they were
    made from (:attr:`facts`): another binding of the graph with equal facts replays them."""

    source: tuple[tuple[str, ...], ModelIR, bytes] | None = field(repr=False, compare=False)
    """What :attr:`facts` are read from (the patterns' names, the graph, which nodes are costed); None: not
    reused (a graph where no node's op type can start a function: matching it again costs a look at its op
    types, so its facts are not built)."""
    matches: tuple[FunctionMatch, ...]
    misses: tuple[MissRecord, ...]

    @functools.cached_property
    def facts(self) -> tuple[object, ...] | None:
        """:func:`matcher_facts`, built when first compared (a single analysis, which replays nothing, never
        asks); None when not reused."""
        return None if self.source is None else matcher_facts(*self.source)


def matcher_facts(names: tuple[str, ...], ir: ModelIR, costed_at: bytes) -> tuple[object, ...] | None:
    """Everything phase 1 reads, as one flat tuple (None for a graph with bodies: not reused there).

    The patterns' ``names``; the graph outputs; per node in topological order its id, op type and domain, its
    inputs (count, then each absent or its name and role: whether it is a constant), its outputs (count, then
    names) and whether it is costed (``costed_at``: has a unit). Producers, consumers and view aliases are
    functions of these (the graph index), and the rule kinds of the op types are the registry's. The lengths make
    the tuple unambiguous (one flat tuple, not a tuple per node: cheaper to build and to compare than the
    matching it saves)."""
    facts: list[object] = [names, tuple(ir.graph_outputs)]
    append = facts.append
    for op, costed in zip(ir.ops, costed_at, strict=True):
        if op.subgraphs:
            return None
        append(op.id)
        append(op.op_type)
        append(op.domain)
        append(len(op.inputs))
        for t in op.inputs:
            if t is None:
                append(None)
            else:
                append(t.name)
                append(t.role)
        append(len(op.outputs))
        for t in op.outputs:
            append(None if t is None else t.name)
        append(costed == 1)
    return tuple(facts)


def apply_functions(
    functions: Sequence[FunctionPattern], state: PassState, prior: FunctionMatches | None = None
) -> FunctionMatches | None:
    """Recognise ``functions`` on the nodes still alone in their unit, scanning in topological order; the
    decisions made (None when no function is enabled). ``prior``: another binding's decisions, replayed when its
    :func:`matcher_facts` equal this graph's (the matching is a function of them); matched afresh otherwise. The
    facts of a fresh match are built only when another binding compares them (:attr:`FunctionMatches.facts`); a
    graph where no node's op type can start a function is known to match nothing from its op types alone and
    keeps none.

    Only the variants the graph's op types can fill are tried (:func:`_plans`): a variant whose required step
    names no op type of the graph (an Erf for a GELU in a graph without one) never matches, so dropping it
    changes no decision."""
    if not functions:
        return None
    g = state.g
    present = frozenset(op_type for types in g.types.values() for op_type in types)
    starts: dict[str, list[_Plan]] = {}
    for plan in _plans(functions, present):
        for op_type in plan.starts:
            starts.setdefault(op_type, []).append(plan)
    if not any(op_type in starts for op_type in present):
        return FunctionMatches(None, (), ())  # no node can start a function: nothing to match, nor to replay
    source = (tuple(p.name for p in functions), g.ir, g.costed_at)
    if prior is not None and prior.facts is not None:
        facts = matcher_facts(*source)
        if prior.facts == facts:
            for replayed in prior.matches:
                _join(replayed, state)
            state.misses.extend(prior.misses)
            return prior
    first_miss = len(state.misses)
    matches: list[FunctionMatch] = []
    alone, reach = state.alone, _Reach(g)
    for op in g.ir.ops:
        tried = starts.get(op.op_type)
        if tried is None:
            continue
        for plan in tried:
            if alone(op.id):
                found = _apply_function(plan, op.id, state, reach)
                if found is not None:
                    matches.append(found)
                    break
    return FunctionMatches(source, tuple(matches), tuple(state.misses[first_miss:]))


#: The kinds of an input token: a constant (``c``), an absent input or a constant (``?c``), any present input
#: (``*``), a variable (``$x``: bound to the input's name, or equal to it when bound already).
_CONST, _OPTIONAL_CONST, _ANY, _VAR = range(4)

#: One input token, compiled: its kind and, for a variable, its name.
_Token = tuple[int, str]


class _Alternative(NamedTuple):
    """One alternative of a step, compiled: its op type, its input tokens (and in the other order, for a
    commutative op of two inputs) and the variables it reads."""

    op_type: str
    tokens: tuple[_Token, ...]
    swapped: tuple[_Token, ...] | None
    variables: tuple[str, ...]


class _Step(NamedTuple):
    """A template step as the matcher reads it: its output variable, whether it is optional, its alternatives
    and the variable its first alternative reads first (what a skipped step aliases)."""

    out: str
    optional: bool
    alternatives: tuple[_Alternative, ...]
    first_ref: str | None


class _Plan(NamedTuple):
    """The variants of one pattern a graph's op types can fill, compiled (:func:`_plans`).

    ``variants``: each as its steps; ``prefix[v][j]``: the first variant whose steps up to ``j`` equal variant
    ``v``'s (a variant that fails at step ``j`` from one start fails there for every variant sharing the prefix);
    ``starts``: per op type a match can start on, the steps of each variant it can start at (the steps up to the
    first required one naming it)."""

    pattern: FunctionPattern
    variants: tuple[tuple[_Step, ...], ...]
    prefix: tuple[tuple[int, ...], ...]
    starts: Mapping[str, tuple[tuple[int, ...], ...]]
    ahead: tuple[Mapping[int, tuple[frozenset[str], int]], ...]
    """Per variant, per start: what a match needs ahead (:func:`_ahead`), when it is known."""


def _plans(functions: Sequence[FunctionPattern], present: frozenset[str]) -> list[_Plan]:
    """Each pattern's variants that the op types ``present`` can fill (every required step has an alternative of
    a present op type), compiled; the patterns left without one are dropped."""
    plans = []
    for p in functions:
        kept = [
            steps
            for steps in p.variants
            if all(step.optional or any(alt[0] in present for alt in step.alternatives) for step in steps)
        ]
        if not kept:
            continue
        variants = tuple(tuple(map(_compile, steps)) for steps in kept)
        prefix = tuple(
            tuple(next(u for u in range(v + 1) if kept[u][: j + 1] == steps[: j + 1]) for j in range(len(steps)))
            for v, steps in enumerate(kept)
        )
        types = {op_type for steps in kept for step in _start_steps(steps) for op_type, _ in step.alternatives}
        starts = {op_type: tuple(_start_indices(steps, op_type) for steps in kept) for op_type in sorted(types)}
        ahead = tuple({i: need for i in range(len(steps)) if (need := _ahead(steps, i)) is not None} for steps in kept)
        plans.append(_Plan(p, variants, prefix, starts, ahead))
    return plans


def _compile(step: Step) -> _Step:
    alternatives = []
    for op_type, tokens in step.alternatives:
        compiled = tuple(map(_compile_token, tokens))
        swapped = (compiled[1], compiled[0]) if op_type in _COMMUTATIVE and len(compiled) == 2 else None
        variables = tuple(t[1:] for t in tokens if t.startswith("$"))
        alternatives.append(_Alternative(op_type, compiled, swapped, variables))
    return _Step(step.out, step.optional, tuple(alternatives), _first_ref(step))


def _compile_token(token: str) -> _Token:
    if token == "c":
        return (_CONST, "")
    if token == "?c":
        return (_OPTIONAL_CONST, "")
    if token == "*":
        return (_ANY, "")
    return (_VAR, token[1:])


def _start_steps(steps: tuple[Step, ...]) -> list[Step]:
    """The steps a match may start at: each optional one up to the first required step, and that step."""
    found = []
    for step in steps:
        found.append(step)
        if not step.optional:
            break
    return found


def _start_indices(steps: tuple[Step, ...], op_type: str) -> tuple[int, ...]:
    """The steps of ``steps`` a match from a node of ``op_type`` may start at."""
    starts = []
    for i, step in enumerate(steps):
        if any(alt[0] == op_type for alt in step.alternatives):
            starts.append(i)
        if not step.optional:
            break
    return tuple(starts)


def _ahead(steps: tuple[Step, ...], start: int) -> tuple[frozenset[str], int] | None:
    """(op types, hops): a match of ``steps`` from a node at step ``start`` binds the first required step after it,
    r, to a node of one of the op types of r, within r - start hops of the start node along the edges the matcher
    follows (from a matched node to a reader of its first output); None when that is not known.

    Known when every variable the steps after the start up to r read resolves, whichever optional steps match, to
    the output of a step matched from the start on, or to an input variable no step before it names (unbound
    then): each such step's node then reads the output of one matched before it, so the node of step r is at
    most one hop per step from the start node."""
    r = next((j for j in range(start + 1, len(steps)) if not steps[j].optional), None)
    if r is None:
        return None
    for j in range(start + 1, r + 1):
        named = {t[1:] for step in steps[start:j] for _, tokens in step.alternatives for t in tokens if t[0] == "$"}
        read = {t[1:] for _, tokens in steps[j].alternatives for t in tokens if t[0] == "$"}
        if not all(_downstream(var, j, steps, start, named) for var in read):
            return None
    return frozenset(op_type for op_type, _ in steps[r].alternatives), r - start


def _downstream(var: str, j: int, steps: tuple[Step, ...], start: int, named: set[str]) -> bool:
    """Whether ``var``, read at step ``j``, resolves to the output of a node matched from ``start`` on, or to an
    input variable unbound then (not in ``named``), whichever optional steps before ``j`` match."""
    at = next((i for i in range(j - 1, -1, -1) if steps[i].out == var), None)
    if at is None:
        return var not in named
    if at < start:
        return False
    ref = _first_ref(steps[at])  # what the step's output is read as when it is skipped (never the start: matched)
    return at == start or not steps[at].optional or ref is None or _downstream(ref, at, steps, start, named)


class _Reach:
    """For one pass: the nodes from which a node of some op types is reached within some hops, each edge from a
    node to a reader of its first output (:func:`_ahead`), found when first asked."""

    __slots__ = ("_by_type", "_found", "_g")

    def __init__(self, g: FusionGraph) -> None:
        self._g = g
        self._found: dict[tuple[frozenset[str], int], set[str]] = {}
        self._by_type: dict[str, list[str]] | None = None

    def of(self, need: tuple[frozenset[str], int]) -> set[str]:
        found = self._found.get(need)
        if found is None:
            types, hops = need
            g, found = self._g, set()
            if self._by_type is None:  # the nodes of each op type, in one pass over the graph
                self._by_type = {}
                for op in g.ir.ops:
                    self._by_type.setdefault(op.op_type, []).append(op.id)
            frontier = [node for op_type in types for node in self._by_type.get(op_type, ())]
            for _ in range(hops):  # breadth first: a node is found at its least distance
                step = []
                for node in frontier:
                    for t in g.ops[node].inputs:
                        writer = g.producer.get(t.name) if t is not None else None
                        if writer is None or writer in found:
                            continue
                        first = g.ops[writer].output(0)
                        if first is not None and t is not None and first.name == t.name:  # its first output, read
                            found.add(writer)
                            step.append(writer)
                frontier = step
            self._found[need] = found
        return found


class _Match:
    """Bindings of one template match attempt."""

    __slots__ = ("alias", "bind", "used")

    def __init__(self) -> None:
        self.bind: dict[str, str] = {}
        self.alias: dict[str, str] = {}
        self.used: dict[str, str] = {}  # node id -> step var

    def resolve(self, var: str) -> str:
        while var in self.alias:
            var = self.alias[var]
        return var


def _first_ref(step: Step) -> str | None:
    for token in step.alternatives[0][1]:
        if token.startswith("$"):
            return token[1:]
    return None


def _match_inputs(op: OpView, alternative: _Alternative, match: _Match) -> dict[str, str] | None:
    """The variables ``op``'s inputs bind for ``alternative``'s tokens (in either order for a commutative op of
    two inputs), None when they do not fit (trailing absent inputs ignored)."""
    inputs = op.inputs
    count = len(inputs)
    while count and inputs[count - 1] is None:
        count -= 1
    tokens = alternative.tokens
    if count > len(tokens):
        return None
    new = _bind_inputs(inputs, count, tokens, match)
    if new is None and count == 2 and alternative.swapped is not None:
        new = _bind_inputs(inputs, count, alternative.swapped, match)
    return new


def _bind_inputs(
    inputs: tuple[TensorInfo | None, ...], count: int, tokens: tuple[_Token, ...], match: _Match
) -> dict[str, str] | None:
    new: dict[str, str] = {}
    bind = match.bind
    for i, (kind, var) in enumerate(tokens):
        t = inputs[i] if i < count else None
        if kind == _VAR:
            if t is None:
                return None
            var = match.resolve(var)
            bound = bind.get(var, new.get(var))
            if bound is None:
                new[var] = t.name
            elif bound != t.name:
                return None
        elif kind == _CONST:
            if t is None or not t.is_constant:
                return None
        elif kind == _OPTIONAL_CONST:
            if t is not None and not t.is_constant:
                return None
        elif t is None:
            return None
    return new


def _try_step(step: _Step, op: OpView, match: _Match) -> bool:
    """Bind ``op`` (a node) to ``step`` if its op type and inputs fit one of the step's alternatives."""
    outputs = op.outputs
    out = outputs[0] if outputs else None
    if out is None:
        return False
    op_type = op.op_type
    for alternative in step.alternatives:
        if alternative.op_type != op_type:
            continue
        new = _match_inputs(op, alternative, match)
        if new is None:
            continue
        match.bind.update(new)
        match.bind[match.resolve(step.out)] = out.name
        match.used[op.id] = step.out
        return True
    return False


def _match_variant(steps: tuple[_Step, ...], start: int, node: str, state: PassState) -> _Match | int:
    """The bindings of ``steps`` matched from ``node`` at step ``start``, else the step where the match failed
    (the match up to a step is a function of the steps up to it)."""
    g = state.g
    match = _Match()
    for j in range(start):
        ref = steps[j].first_ref
        if ref is None:
            return j
        match.alias[steps[j].out] = ref
    if not _try_step(steps[start], g.ops[node], match):
        return start
    consumers, ops, bind, used, alone = g.consumers, g.ops, match.bind, match.used, state.alone
    for j in range(start + 1, len(steps)):
        step = steps[j]
        found = False
        for alternative in step.alternatives:
            bound = [bind[r] for r in map(match.resolve, alternative.variables) if r in bind]
            if not bound:
                continue
            fewest = bound[0] if len(bound) == 1 else min(bound, key=lambda name: len(consumers.get(name, ())))
            op_type = alternative.op_type
            for candidate in consumers.get(fewest, ()):
                op = ops[candidate]
                if op.op_type != op_type or candidate in used or not alone(candidate):
                    continue
                if _try_step(step, op, match):
                    found = True
                    break
            if found:
                break
        if not found:
            if not step.optional or step.first_ref is None:
                return j
            match.alias[step.out] = step.first_ref
    return match


def _apply_function(plan: _Plan, node: str, state: PassState, reach: _Reach | None = None) -> FunctionMatch | None:
    """The first variant of ``plan`` matching from ``node`` whose members keep their values inside (else a miss
    each), joined into one unit. Not tried: a variant sharing the steps up to where another failed from the same
    start (it fails there too), and one whose start ``node`` is not within :func:`_ahead`'s hops of a node its
    first required step needs (``reach``)."""
    g = state.g
    pattern = plan.pattern
    failed: list[tuple[int, int, int]] = []  # (start, the prefix's first variant, the step where it failed)
    for v, starts in enumerate(plan.starts[g.ops[node].op_type]):
        steps, prefix, ahead = plan.variants[v], plan.prefix[v], plan.ahead[v]
        for start in starts:
            if failed and any(at == start and prefix[j] == first for at, first, j in failed):
                continue
            need = ahead.get(start) if reach is not None else None
            if need is not None and node not in reach.of(need):  # type: ignore[union-attr]  # need implies reach
                continue
            match = _match_variant(steps, start, node, state)
            if isinstance(match, int):
                failed.append((start, prefix[match], match))
                continue
            output = match.bind.get(match.resolve(steps[-1].out))
            if output is None:
                continue
            members = set(match.used)
            reason = _internal_escape(members, output, g)
            if reason is not None:
                state.miss(pattern.name, members, f"{pattern.name}: {reason}")
                continue
            found = FunctionMatch(pattern, tuple(sorted(members, key=g.position.__getitem__)), output)
            _join(found, state)
            return found
    return None


def _join(found: FunctionMatch, state: PassState) -> None:
    """Merge ``found``'s members (each alone in its unit) into one unit: the function's kernel. A member whose unit
    was never made joins by id (:meth:`~onnxroof.fusion.graph.PassState.merge_all`): no unit is made to be merged."""
    unit_of = state.unit_of
    unit = unit_of[found.members[0]]
    others = [unit_of.made(node) or node for node in found.members[1:]]
    state.merge_all(unit, others, found.pattern.name, found.pattern.produces)
    unit.patterns = (found.pattern.name,)
    unit.op_type = found.pattern.produces
    unit.out = found.output
    unit.function = True


def _internal_escape(members: set[str], output: str, g: FusionGraph) -> str | None:
    """Why a value the members make, other than ``output``, is needed outside them (the first, in node order), None
    when none is (:meth:`~onnxroof.fusion.graph.FusionGraph.escapes` first: most answer without a walk)."""
    for node in sorted(members, key=g.position.__getitem__):
        for t in g.ops[node].outputs:
            if t is None or t.name == output or not g.escapes(t.name, members):
                continue
            users, exported = g.users(t.name)
            if exported:
                return f"{g.label(node)}'s output '{t.name}' is a graph output"
            outside = [u for u in users if u not in members]
            if outside:
                return f"{g.label(node)}'s output '{t.name}' also feeds {g.label(outside[0])}"
    return None
