"""What the findings rules look up in an analysis (:mod:`onnxroof.analysis.findings`): nodes by id and by op type,
the kernel each node runs in, a node's neighbours and readers in the graph index, and connected groups of nodes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from onnxroof.core.ir import implicit_reads

if TYPE_CHECKING:
    from onnxroof.analysis.analyze import Analysis, NodeResult
    from onnxroof.roofline.kernels import KernelResult


class FindingContext:
    """Lookups every rule needs, built once."""

    def __init__(self, analysis: Analysis) -> None:
        self.analysis = analysis
        self.platform = analysis.platform
        self.total = analysis.totals.latency_s
        ops = analysis.nodes.ops
        self.row: dict[str, int] = {op.id: row for row, op in enumerate(ops)}
        """Node id -> its row in ``analysis.nodes`` (its position in topological order)."""
        self._rows_of: dict[str, list[int]] = {}
        for row, op in enumerate(ops):
            self._rows_of.setdefault(op.op_type, []).append(row)
        self.kernel_of: Mapping[str, KernelResult] = analysis.kernel_by_node
        self.index = analysis.index
        self.graph_outputs = frozenset(name for name, _, _ in analysis.model.outputs)

    def node(self, node_id: str) -> NodeResult | None:
        """The node with id ``node_id`` (None when there is none)."""
        row = self.row.get(node_id)
        return None if row is None else self.analysis.nodes[row]

    def rows_of(self, *op_types: str) -> list[int]:
        """The rows of the nodes of these op types in ``analysis.nodes``, in graph order."""
        return sorted(row for op_type in op_types for row in self._rows_of.get(op_type, ()))

    def nodes_of(self, *op_types: str) -> list[NodeResult]:
        """The nodes of these op types, in graph order: a rule that looks at a few op types reads their rows only,
        not a view of every node."""
        return list(map(self.analysis.nodes.__getitem__, self.rows_of(*op_types)))

    def neighbours(self, node_id: str) -> list[str]:
        """The nodes feeding ``node_id`` or reading its outputs (the DAG's edges either way), from the index."""
        op = self.analysis.op(node_id)
        if op is None or self.index is None:
            return []
        producer, consumers = self.index.producer, self.index.consumers
        reads = [t.name for t in op.inputs if t is not None] + implicit_reads(op)
        found = [producer[name] for name in reads if name in producer]
        for t in op.outputs:
            if t is not None:
                found.extend(consumers.get(t.name, ()))
        return found

    def share(self, seconds_: float) -> float:
        return seconds_ / self.total if self.total > 0 else 0.0

    def op(self, node_id: str):
        """The node's OpView (attributes, tensor names), or None without a graph."""
        return self.analysis.op(node_id)

    def producer(self, node_id: str, tensor: str) -> str | None:
        """The id of the node producing ``tensor`` for ``node_id``; None for graph inputs and weights."""
        if self.index is None:
            return None
        src = self.index.producer.get(tensor)
        return src if src is not None and node_id in self.index.consumers.get(tensor, ()) else None

    def readers(self, node_id: str, tensor: str) -> int:
        """How many nodes read ``tensor`` (produced by ``node_id``), plus one if it is a graph output."""
        produced = (index := self.index) is not None and index.producer.get(tensor) == node_id
        count = len(index.consumers.get(tensor, ())) if index is not None and produced else 0
        return count + (tensor in self.graph_outputs)

    def label(self, node_id: str) -> str:
        node = self.node(node_id)
        return f"{node.op_type} '{node.name or node_id}'" if node else node_id

    def components(self, members: set[str]) -> list[list[str]]:
        """Connected groups of ``members`` (edges in either direction), each in topological (id-index) order."""
        seen: set[str] = set()
        groups = []
        for start in sorted(members, key=node_index):
            if start in seen:
                continue
            stack, group = [start], []
            seen.add(start)
            while stack:
                nid = stack.pop()
                group.append(nid)
                for other in self.neighbours(nid):
                    if other in members and other not in seen:
                        seen.add(other)
                        stack.append(other)
            groups.append(sorted(group, key=node_index))
        return groups


def node_index(node_id: str) -> int:
    """The node's position in the graph, read from its id (``"{index}:{name}"``); 0 when the id has none."""
    head = node_id.split(":", 1)[0]
    return int(head) if head.isdigit() else 0
