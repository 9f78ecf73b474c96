"""The graph index: who produces a tensor, who reads it, what a view aliases. Computed once per IR.

Every pass that asks a graph question (fusion, liveness, findings, the analysis' warnings) reads this index
instead of deriving the maps again:

* ``producer[t]``: the node writing tensor ``t`` (graph inputs and initializers have none);
* ``consumers[t]``: the nodes reading ``t``, each once, in topological order; then the If/Loop/Scan nodes whose
  bodies read ``t`` implicitly (from the enclosing scope);
* ``view_source[v]``: for the first output ``v`` of a view op (rule kind ``view``: Reshape, Squeeze,
  Identity...), its first input, the buffer ``v`` aliases; ``view_children`` the reverse;
* ``views``: the ids of the view ops.

View-ness is the registry's kind, so the rule families must be registered (:mod:`onnxroof.rules` imported, as
every stage above the rules does) before an IR's index is first asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from onnxroof.core.ir import ModelIR, implicit_reads
from onnxroof.core.registry import lookup
from onnxroof.core.states import RuleKind

_MEMO_KEY = "graph_index"


@dataclass(frozen=True)
class GraphIndex:
    """Producers, consumers and view aliases of one graph (see the module docstring)."""

    producer: Mapping[str, str]
    consumers: Mapping[str, tuple[str, ...]]
    view_source: Mapping[str, str]
    view_children: Mapping[str, tuple[str, ...]]
    views: frozenset[str]

    def root(self, name: str) -> str:
        """The tensor whose buffer ``name`` aliases through a chain of views (``name`` itself if none)."""
        while name in self.view_source:
            name = self.view_source[name]
        return name

    def is_view(self, node_id: str) -> bool:
        return node_id in self.views


def graph_index(ir: ModelIR) -> GraphIndex:
    """The index of ``ir``: built on first use and kept with the IR, so every pass shares one."""
    found = ir.memo.get(_MEMO_KEY)
    if found is None:
        found = ir.memo[_MEMO_KEY] = build_index(ir)
    return found


def build_index(ir: ModelIR) -> GraphIndex:
    """Index ``ir`` (prefer :func:`graph_index`, which builds it once)."""
    producer: dict[str, str] = {}
    consumers: dict[str, list[str]] = {}
    view_source: dict[str, str] = {}
    view_children: dict[str, list[str]] = {}
    views: set[str] = set()
    for op in ir.ops:
        for t in op.outputs:
            if t is not None:
                producer[t.name] = op.id
        seen: set[str] = set()
        for t in op.inputs:
            if t is not None and t.name not in seen:
                seen.add(t.name)
                consumers.setdefault(t.name, []).append(op.id)
        entry = lookup(op.domain, op.op_type)
        if entry is not None and entry.kind == RuleKind.VIEW:
            views.add(op.id)
            source, view = op.input(0), op.output(0)
            if source is not None and view is not None:
                view_source[view.name] = source.name
                view_children.setdefault(source.name, []).append(view.name)
    for op in ir.ops:  # tensors read implicitly by If/Loop/Scan bodies (those some node produces)
        if op.subgraphs:
            for name in implicit_reads(op):
                users = consumers.setdefault(name, []) if name in producer else None
                if users is not None and op.id not in users:
                    users.append(op.id)
    return GraphIndex(
        MappingProxyType(producer),
        MappingProxyType({k: tuple(v) for k, v in consumers.items()}),
        MappingProxyType(view_source),
        MappingProxyType({k: tuple(v) for k, v in view_children.items()}),
        frozenset(views),
    )
