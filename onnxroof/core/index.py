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
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.protos import subgraph_outer_inputs

if TYPE_CHECKING:
    import networkx as nx


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


@frozen_dataclass
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


def build_dag(ops: Iterable[_Op]) -> nx.DiGraph[str]:
    """The DAG of ``ops`` (in topological order), keyed by op id, each node's ``op`` attribute its op; an edge
    ``(producer, reader)`` labelled ``tensors`` with the names it carries, in the order the reader reads them
    (inputs, then what its If/Loop/Scan bodies read from this scope). :attr:`onnxroof.core.ir.ModelIR.graph`."""
    import networkx as nx  # the DAG is built only when asked for: most analyses never import networkx

    dag: nx.DiGraph[str] = nx.DiGraph()
    producer_id: dict[str, str] = {}
    for op in ops:
        dag.add_node(op.id, op=op)
        consumed = [t.name for t in op.inputs if t is not None and t.name]
        if op.subgraphs:
            consumed.extend(name for sub in op.subgraphs.values() for name in subgraph_outer_inputs(sub))
        for name in consumed:
            src = producer_id.get(name)
            if src is None:
                continue
            if dag.has_edge(src, op.id):
                dag.edges[src, op.id]["tensors"].append(name)
            else:
                dag.add_edge(src, op.id, tensors=[name])
        for t in op.outputs:
            if t is not None:
                producer_id[t.name] = op.id
    return dag


def build_index(ops: Iterable[_Op], view_ops: frozenset[tuple[str, str]]) -> GraphIndex:
    """Index ``ops`` (in topological order); ``view_ops``: the (normalized domain, op_type) pairs that are views."""
    builder = IndexBuilder()
    for op in ops:
        builder.add(op, (op.domain, op.op_type) in view_ops)
    return builder.finish()


class IndexBuilder:
    """A :class:`GraphIndex` built one op at a time, in topological order: the IR builder feeds it each op as it
    makes it (:func:`onnxroof.core.ir.build_graph_ir`), so the ops are not walked a second time to index them.

    A tensor's first reader is stored as the one-element tuple the index keeps (most tensors have one reader); a
    second reader moves them to a list in ``more``, made a tuple again by :meth:`finish`."""

    def __init__(self) -> None:
        self.producer: dict[str, str] = {}
        self.consumers: dict[str, tuple[str, ...]] = {}
        self.more: dict[str, list[str]] = {}
        self.view_source: dict[str, str] = {}
        self.view_children: dict[str, list[str]] = {}
        self.views: set[str] = set()
        self.with_bodies: list[_Op] = []

    def add(self, op: _Op, view: bool) -> None:
        """Index ``op`` (after every op it reads from); ``view``: whether its op type is a view."""
        op_id, inputs, producer, consumers = op.id, op.inputs, self.producer, self.consumers
        for t in op.outputs:
            if t is not None:
                producer[t.name] = op_id
        if len(inputs) == 1:  # most ops: nothing to deduplicate
            if inputs[0] is not None:
                name = inputs[0].name
                if name in consumers:
                    self._read_again(name, op_id)
                else:
                    consumers[name] = (op_id,)
        else:
            seen: set[str] = set()
            for t in inputs:
                if t is not None and t.name not in seen:
                    seen.add(t.name)
                    if t.name in consumers:
                        self._read_again(t.name, op_id)
                    else:
                        consumers[t.name] = (op_id,)
        if view:
            self.views.add(op_id)
            source = inputs[0] if inputs else None
            output = op.outputs[0] if op.outputs else None
            if source is not None and output is not None:
                self.view_source[output.name] = source.name
                self.view_children.setdefault(source.name, []).append(output.name)
        if op.subgraphs:
            self.with_bodies.append(op)

    def add_simple(self, op_id: str, source: str | None, output: str, view: bool) -> None:
        """Index the op ``op_id`` writing one tensor, ``output``, and reading at most one, ``source`` (None: none),
        holding no body (most ops): what :meth:`add` does for such an op, from the names; ``view`` as there."""
        self.producer[output] = op_id
        if source is not None:
            if source in self.consumers:
                self._read_again(source, op_id)
            else:
                self.consumers[source] = (op_id,)
        if view:
            self.views.add(op_id)
            if source is not None:
                self.view_source[output] = source
                self.view_children.setdefault(source, []).append(output)

    def _read_again(self, name: str, op_id: str) -> None:
        """``op_id`` reads ``name``, which has a reader already."""
        more = self.more.get(name)
        if more is None:
            self.more[name] = [*self.consumers[name], op_id]
        else:
            more.append(op_id)

    def finish(self) -> GraphIndex:
        """The index of the ops added; then the If/Loop/Scan nodes whose bodies read a tensor some op produces
        join its readers. The builder is spent."""
        producer, consumers = self.producer, self.consumers
        for op in self.with_bodies:  # tensors read implicitly by If/Loop/Scan bodies (those some node produces)
            for sub in op.subgraphs.values():
                for name in subgraph_outer_inputs(sub):
                    if name not in producer:
                        continue
                    if name not in consumers:
                        consumers[name] = (op.id,)
                    elif op.id not in self.more.get(name, consumers[name]):
                        self._read_again(name, op.id)
        for name, users in self.more.items():
            consumers[name] = tuple(users)
        return GraphIndex(
            MappingProxyType(producer),
            MappingProxyType(consumers),
            MappingProxyType(self.view_source),
            MappingProxyType({k: tuple(v) for k, v in self.view_children.items()}),
            frozenset(self.views),
        )
