"""The fusion pass's working state: read-only lookups over the IR, and the kernels being built.

:class:`FusionGraph` holds read-only lookups for one :func:`onnxroof.fusion.fuse.fuse` call (producers, consumers
and view aliases from the IR's index, :attr:`onnxroof.core.ir.ModelIR.index`; which nodes are costed and
elementwise); :class:`Unit` is one kernel under construction; and
:class:`PassState` owns the units, merges them as patterns apply, and records the candidates that did not fuse.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from itertools import islice, repeat
from operator import attrgetter, itemgetter
from typing import NamedTuple

import numpy as np

from onnxroof.core.ir import ModelIR, OpView
from onnxroof.core.node_cost import NodeCost
from onnxroof.core.registry import RuleEntry
from onnxroof.core.states import NodeState, RuleKind
from onnxroof.rules import REGISTRY

#: Ops costed by other rule families that are elementwise too: (de)quantization is a per-element scale and
#: shift, and a GPU compiler fuses a leftover Q or DQ into its elementwise neighbours.
_ELEMENTWISE_OPS = frozenset({"QuantizeLinear", "DequantizeLinear"})
_PLAIN_DOMAINS = frozenset({"", "com.microsoft"})  # op keys without a domain prefix
_COSTED = frozenset({NodeState.COSTED})

# ------------------------------------------------------------------------------------ the graph context


class OpTypeFacts(NamedTuple):
    """What the pass needs to know about an op type (shared by every node of that type)."""

    entry: RuleEntry | None
    kind: str  # the rule's kind, "" without a rule
    elementwise: bool  # an elementwise rule, or a (de)quantization (``_ELEMENTWISE_OPS``)
    key: str  # what a unit of one such node is named by patterns: the op type, prefixed by a domain not plain


class FusionGraph:
    """Read-only lookups over the IR, built once per call.

    Per node it keeps only ``ids``, ``position`` (id → topological index) and ``ops`` (id → op, when first asked
    for); what depends on the op
    type (rule entry, kind, elementwise) is kept once per type in ``types`` (:meth:`entry`, :meth:`kind`,
    :meth:`all_elementwise`); which nodes are costed is the node costs' own state.
    """

    def __init__(self, ir: ModelIR, node_costs: Mapping[str, NodeCost] | Sequence[NodeCost]) -> None:
        self.ir = ir
        ids = list(map(attrgetter("id"), ir.ops))
        self.ids: list[str] = ids
        """Each node's id, by position."""
        self.position: dict[str, int] = dict(zip(ids, range(len(ids)), strict=True))
        column = list(map(node_costs.get, ids)) if isinstance(node_costs, Mapping) else node_costs
        self.cost_at: Sequence[NodeCost | None] = column
        """Each node's cost by position, None for a node without one (``node_costs`` by id, or already the column:
        the costs in node order)."""
        self.costed_at = bytes(map(_COSTED.__contains__, map(getattr, column, repeat("state"), repeat(None))))
        """1 at the position of each costed node (a kernel member), 0 elsewhere."""
        self.types: dict[str, dict[str, OpTypeFacts]] = {}  # domain -> op_type -> facts
        for domain, op_type in ir.op_kinds:  # the distinct (domain, op type) of the ops
            entry = REGISTRY.lookup(domain, op_type)
            elementwise = entry is not None and (entry.family == "elementwise" or op_type in _ELEMENTWISE_OPS)
            key = op_type if domain in _PLAIN_DOMAINS else f"{domain}::{op_type}"
            facts = OpTypeFacts(entry, entry.kind if entry is not None else "", elementwise, key)
            self.types.setdefault(domain, {})[op_type] = facts
        self.unit_keys = frozenset(facts.key for by_type in self.types.values() for facts in by_type.values())
        """The op keys (:attr:`Unit.op_type`) of the graph's op types: a pass none of whose patterns names one
        has nothing to do."""
        self.index = ir.index
        self.producer: Mapping[str, str] = self.index.producer
        self.consumers: Mapping[str, tuple[str, ...]] = self.index.consumers
        self.alias_children: Mapping[str, tuple[str, ...]] = self.index.view_children
        self.outputs = frozenset(ir.graph_outputs)
        self._users: dict[str, tuple[tuple[str, ...], bool]] = {}

    @functools.cached_property
    def ops(self) -> dict[str, OpView]:
        """Node id -> its op, built on first use (a chain fused by the pointwise pass alone reads ops by
        position)."""
        return dict(zip(self.ids, self.ir.ops, strict=True))

    def op_type(self, node: str) -> OpTypeFacts:
        op = self.ops[node]
        return self.types[op.domain][op.op_type]

    def type_at(self, position: int) -> OpTypeFacts:
        """The facts of the op type of the node at ``position`` (no lookup by id)."""
        op = self.ir.ops[position]
        return self.types[op.domain][op.op_type]

    def entry(self, node: str) -> RuleEntry | None:
        """The rule costing ``node`` (None without one)."""
        return self.op_type(node).entry

    def kind(self, node: str) -> str:
        """``node``'s rule kind ("" without a rule)."""
        return self.op_type(node).kind

    def all_elementwise(self, members: Iterable[str]) -> bool:
        """Whether every one of ``members`` (costed nodes: a unit's) is elementwise."""
        ops, types = self.ops, self.types
        for node in members:
            op = ops[node]
            if not types[op.domain][op.op_type].elementwise:
                return False
        return True

    def root(self, name: str) -> str:
        """The buffer a tensor aliases (through views)."""
        return self.index.root(name)

    def users(self, name: str) -> tuple[tuple[str, ...], bool]:
        """Nodes that need ``name``'s data (through views; metadata readers excluded), and whether it (or an
        alias) is a graph output."""
        cached = self._users.get(name)
        if cached is not None:
            return cached
        found: list[str] = []
        exported = name in self.outputs
        for node in self.consumers.get(name, ()):
            kind, source = self.kind(node), self.ops[node].input(0)
            if kind == RuleKind.VIEW and source is not None and source.name == name:
                continue  # an alias: its own users are followed below
            if kind != RuleKind.METADATA:
                found.append(node)
        for child in self.alias_children.get(name, ()):
            more, child_exported = self.users(child)
            found.extend(n for n in more if n not in found)
            exported = exported or child_exported
        result = (tuple(found), exported)
        self._users[name] = result
        return result

    def escapes(self, name: str, members: set[str]) -> bool:
        """Whether ``name``'s data is used outside ``members`` (or is a graph output). A tensor whose direct
        readers are all members and that no view aliases needs no :meth:`users` walk (nor its cache entry)."""
        if (
            name not in self.outputs
            and name not in self.alias_children
            and members.issuperset(self.consumers.get(name, ()))
        ):
            return False
        users, exported = self.users(name)
        return exported or any(u not in members for u in users)

    def private(self, nodes: Iterable[str], inside: set[str]) -> bool:
        """Whether every output of ``nodes`` is used only by ``inside`` (through views; no graph output)."""
        for node in nodes:
            for t in self.ops[node].outputs:
                if t is None:
                    continue
                users, exported = self.users(t.name)
                if exported or not inside.issuperset(users):
                    return False
        return True

    def label(self, node: str) -> str:
        return f"{self.ops[node].op_type} {node}"


# ----------------------------------------------------------------------------------------------- units


class Unit:
    """A kernel being built (internal, mutable while the pass runs)."""

    __slots__ = ("alive", "anchor", "folded", "function", "nodes", "op_type", "out", "patterns")

    def __init__(self, anchor: str, op_type: str, out: str | None) -> None:
        self.anchor = anchor
        self.nodes = [anchor]
        self.op_type = op_type
        self.out = out
        self.folded: tuple[str, ...] = ()  # few: tuples, replaced as they grow (no two lists per node)
        self.patterns: tuple[str, ...] = ()
        self.function = False  # formed only by function patterns
        self.alive = True


class MissRecord(NamedTuple):
    """A candidate that did not fuse, as the pass records it (the result's :class:`onnxroof.core.kernel.Miss`)."""

    pattern: str
    node_ids: tuple[str, ...]
    reason: str


class Units:
    """Who owns which node while the pass runs: node id -> its :class:`Unit`, for the costed nodes.

    A costed node that no pattern has asked about is a unit of its own, made on first access (``get``,
    ``[node]``, :meth:`items`): a graph of a million nodes that fuse into a few kernels makes a few
    :class:`Unit` objects, not a million. :meth:`made` answers without making one; the pointwise pass and the
    kernels (:meth:`anchored`) read an untouched node as its id."""

    __slots__ = ("_graph", "_made", "made")

    def __init__(self, graph: FusionGraph) -> None:
        self._graph = graph
        self._made: dict[str, Unit] = {}
        self.made: Callable[[str], Unit | None] = self._made.get
        """``made(node)``: ``node``'s unit if one was made (asked about, or merged), else None (none, or not made
        yet); the dict's own ``get``, called for every node by the pointwise pass."""

    def costed(self, node: str) -> bool:
        """Whether ``node`` is costed (a kernel member: it has a unit)."""
        position = self._graph.position.get(node)
        return position is not None and bool(self._graph.costed_at[position])

    def get(self, node: str) -> Unit | None:
        """``node``'s unit (made now if it was not), None for a node that is no kernel member."""
        unit = self._made.get(node)
        if unit is None:
            g = self._graph
            at = g.position.get(node)
            if at is not None and g.costed_at[at]:
                op = g.ir.ops[at]
                first = op.output(0)
                key = g.types[op.domain][op.op_type].key
                unit = self._made[node] = Unit(node, key, first.name if first is not None else None)
        return unit

    def __getitem__(self, node: str) -> Unit:
        unit = self.get(node)
        if unit is None:
            raise KeyError(node)
        return unit

    def __setitem__(self, node: str, unit: Unit) -> None:
        self._made[node] = unit

    def bind(self, nodes: Iterable[str], unit: Unit) -> None:
        """``nodes`` now belong to ``unit`` (merged into it)."""
        self._made.update(dict.fromkeys(nodes, unit))

    def __contains__(self, node: str) -> bool:
        return self.costed(node)

    def made_at(self) -> dict[int, Unit]:
        """The units made so far, by the position of each of their nodes."""
        position = self._graph.position
        return {position[node]: unit for node, unit in self._made.items()}

    def out_of(self, node: str) -> str | None:
        """The output of an untouched node's unit: the node's first output."""
        g = self._graph
        first = g.ir.ops[g.position[node]].output(0)
        return first.name if first is not None else None

    def items(self) -> Iterator[tuple[str, Unit]]:
        """Every costed node with its unit (made on demand), in node order."""
        for op in self._graph.ir.ops:
            unit = self.get(op.id)
            if unit is not None:
                yield op.id, unit

    def items_of(self, keys: Container[str]) -> Iterator[tuple[str, Unit]]:
        """:meth:`items` restricted to the units whose op type is in ``keys`` at their turn, in node order. An
        untouched node of another type is passed over without making its unit (its unit's op type would be its
        own key, :attr:`OpTypeFacts.key`)."""
        made, costed_at, types = self._made.get, self._graph.costed_at, self._graph.types
        for i, op in enumerate(self._graph.ir.ops):
            unit = made(op.id)
            if unit is None:
                if not costed_at[i] or types[op.domain][op.op_type].key not in keys:
                    continue
                unit = self[op.id]
            if unit.op_type in keys:
                yield op.id, unit

    def anchored(self) -> list[tuple[int, Unit | None, list[int]]]:
        """Each unit once, in the order of its anchor: (the anchor's position, the unit or None for a costed node
        whose unit was never made: a kernel of that node alone, the positions of its members in node order).

        As columns: the nodes alone are the costed positions less those of the made units' nodes; the made nodes'
        positions, sorted by unit and then by position, give each unit's members (a unit holds exactly the nodes
        bound to it)."""
        g, made = self._graph, self._made
        position = g.position
        at = np.fromiter(map(position.__getitem__, made), dtype=np.int64, count=len(made))
        alone = np.frombuffer(g.costed_at, dtype=np.uint8).astype(bool)
        alone[at] = False
        anchored: list[tuple[int, Unit | None, list[int]]] = [(i, None, [i]) for i in np.flatnonzero(alone).tolist()]
        owners = list(made.values())
        units = list(dict.fromkeys(owners))  # each unit once
        number = {id(unit): k for k, unit in enumerate(units)}
        owner = np.fromiter(map(number.__getitem__, map(id, owners)), dtype=np.int64, count=len(owners))
        members = at[np.lexsort((at, owner))].tolist()
        start = 0
        for unit, end in zip(units, np.cumsum(np.bincount(owner, minlength=len(units))).tolist(), strict=True):
            anchored.append((position[unit.anchor], unit, members[start:end]))
            start = end
        anchored.sort(key=itemgetter(0))
        return anchored


class PassState:
    """State of one fusion pass: the units, who owns which node, the misses found so far."""

    def __init__(self, graph: FusionGraph) -> None:
        self.g = graph
        self.unit_of = Units(graph)
        self.misses: list[MissRecord] = []

    def alone(self, node: str) -> bool:
        """Whether ``node`` is costed and alone in its unit (:meth:`single` is not None), without making its unit."""
        unit = self.unit_of.made(node)
        return self.unit_of.costed(node) if unit is None else len(unit.nodes) == 1

    def single(self, node: str) -> Unit | None:
        unit = self.unit_of.get(node)
        return unit if unit is not None and len(unit.nodes) == 1 else None

    def miss(self, pattern: str, nodes: Iterable[str], reason: str) -> None:
        ordered = tuple(sorted(set(nodes), key=self.g.position.__getitem__))
        self.misses.append(MissRecord(pattern, ordered, reason))

    def merge(self, unit: Unit, other: Unit, pattern: str, fold: bool, produces: str | None, out: str | None) -> None:
        unit.nodes.extend(other.nodes)
        if fold or other.folded:
            unit.folded = (*unit.folded, *(other.nodes if fold else ()), *other.folded)
        unit.patterns = tuple(dict.fromkeys((*unit.patterns, *other.patterns, pattern)))
        unit.op_type = produces or unit.op_type
        unit.out = out
        unit.function = False
        other.alive = False
        for node in other.nodes:
            self.unit_of[node] = unit

    def merge_all(self, unit: Unit, others: Sequence[Unit | str], pattern: str, produces: str) -> None:
        """``merge(unit, other, pattern, False, produces, other.out)`` for each of ``others`` in turn, in one pass:
        the same nodes, folded members, patterns (in order of first appearance), op type and output. An other given
        as a node id is an untouched node's unit, never made (:class:`Units`): the node alone, nothing folded, no
        pattern. (The pointwise kernel of a chain merges every unit into one.)"""
        if not others:
            return
        nodes, unit_of = unit.nodes, self.unit_of
        folded = list(unit.folded)
        patterns = dict.fromkeys(unit.patterns)
        start = len(nodes)
        for other in others:
            if isinstance(other, str):
                nodes.append(other)
            else:
                nodes.extend(other.nodes)
                if other.folded:
                    folded.extend(other.folded)
                if other.patterns:
                    patterns.update(dict.fromkeys(other.patterns))
                other.alive = False
            patterns[pattern] = None
        unit_of.bind(islice(nodes, start, None), unit)
        unit.folded = tuple(folded)
        unit.patterns = tuple(patterns)
        unit.op_type = produces
        last = others[-1]
        unit.out = unit_of.out_of(last) if isinstance(last, str) else last.out
        unit.function = False
