"""The graph index: who produces a tensor, who reads it, what a view aliases. Built with the IR.

Every pass that asks a graph question (fusion, liveness, findings, the analysis' warnings) reads the IR's index
(:attr:`onnxroof.core.ir.ModelIR.index`) instead of deriving the maps again:

* ``producer[t]``: the node writing tensor ``t`` (graph inputs and initializers have none);
* ``consumers[t]``: the nodes reading ``t``, each once, in topological order; then the If/Loop/Scan nodes whose
  bodies read ``t`` implicitly (from the enclosing scope);
* ``view_source[v]``: for the first output ``v`` of a view op (rule kind ``view``: Reshape, Squeeze,
  Identity...), its first input, the buffer ``v`` aliases; ``view_children`` the reverse;
* ``views``: the ids of the view ops.

View-ness is a rule fact, and core sits below the rules: the builder of the IR passes the view op types in
(``build_ir(..., view_ops=REGISTRY.view_ops)``, :attr:`onnxroof.core.registry.Registry.view_ops`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol, cast

from onnxroof.core.protos import subgraph_outer_inputs


class _Tensor(Protocol):
    @property
    def name(self) -> str: ...


class _Op(Protocol):
    """What the index reads of an op (:class:`onnxroof.core.ir.OpView`, which imports this module)."""

    @property
    def id(self) -> str: ...
    @property
    def op_type(self) -> str: ...
    @property
    def domain(self) -> str: ...
    @property
    def inputs(self) -> Sequence[_Tensor | None]: ...
    @property
    def outputs(self) -> Sequence[_Tensor | None]: ...
    @property
    def subgraphs(self) -> Mapping[str, Any]: ...


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


def build_index(ops: Iterable[_Op], view_ops: frozenset[tuple[str, str]]) -> GraphIndex:
    """Index ``ops`` (in topological order); ``view_ops``: the (normalized domain, op_type) pairs that are views."""
    producer: dict[str, str] = {}
    consumers: dict[str, list[str]] = {}
    view_source: dict[str, str] = {}
    view_children: dict[str, list[str]] = {}
    views: set[str] = set()
    with_bodies = []
    for op in ops:
        op_id = op.id
        for t in op.outputs:
            if t is not None:
                producer[t.name] = op_id
        inputs = op.inputs
        if len(inputs) == 1:  # most ops: nothing to deduplicate
            if inputs[0] is not None:
                consumers.setdefault(inputs[0].name, []).append(op_id)
        else:
            seen: set[str] = set()
            for t in inputs:
                if t is not None and t.name not in seen:
                    seen.add(t.name)
                    consumers.setdefault(t.name, []).append(op_id)
        if (op.domain, op.op_type) in view_ops:
            views.add(op.id)
            source = op.inputs[0] if op.inputs else None
            view = op.outputs[0] if op.outputs else None
            if source is not None and view is not None:
                view_source[view.name] = source.name
                view_children.setdefault(source.name, []).append(view.name)
        if op.subgraphs:
            with_bodies.append(op)
    for op in with_bodies:  # tensors read implicitly by If/Loop/Scan bodies (those some node produces)
        for sub in op.subgraphs.values():
            for name in subgraph_outer_inputs(sub):
                users = consumers.setdefault(name, []) if name in producer else None
                if users is not None and op.id not in users:
                    users.append(op.id)
    # each list made a tuple in place: a million lists, their tuples and a second dict are never alive at once
    readers = cast(dict[str, tuple[str, ...]], consumers)  # the same dict, its values changing type below
    for name, users in consumers.items():
        readers[name] = tuple(users)
    return GraphIndex(
        MappingProxyType(producer),
        MappingProxyType(readers),
        MappingProxyType(view_source),
        MappingProxyType({k: tuple(v) for k, v in view_children.items()}),
        frozenset(views),
    )
