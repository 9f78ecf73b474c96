"""Which original nodes each node of onnxruntime's optimized graph runs.

onnxruntime runs an optimized graph whose nodes may be fusions of several original nodes (``Conv`` + ``BN``
+ ``Relu`` as one NCHWc ``Conv``, ``MatMul`` + ``Div`` as ``FusedMatMul``...). :func:`map_optimized_nodes`
finds, for each node of the optimized graph (``SessionOptions.optimized_model_filepath``), the original nodes
it runs, and lists the original nodes no optimized node runs (folded or removed by onnxruntime). Pure graph
work: no onnxruntime session, no timing.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import field

import onnx

from onnxroof.core.frozen import frozen_dataclass

#: Optimized-graph op types that run an original op of another type (anchor of a fusion).
_ANCHOR_TYPES: dict[str, frozenset[str]] = {
    "Conv": frozenset({"Conv"}),
    "FusedConv": frozenset({"Conv"}),
    "NhwcFusedConv": frozenset({"Conv"}),
    "FusedGemm": frozenset({"Gemm", "MatMul"}),
    "Gemm": frozenset({"Gemm", "MatMul"}),
    "FusedMatMul": frozenset({"MatMul"}),
    "MatMul": frozenset({"MatMul"}),
    "QLinearConv": frozenset({"Conv", "QLinearConv"}),
    "QLinearMatMul": frozenset({"MatMul", "QLinearMatMul"}),
}
#: Optimized-graph op types that onnxruntime inserts for itself (no original node).
INSERTED_TYPES = frozenset({"ReorderInput", "ReorderOutput", "MemcpyToHost", "MemcpyFromHost"})
_NCHWC_SUFFIX = "_nchwc"
_METADATA_TYPES = frozenset({"Shape", "Size"})
_VIEW_TYPES = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})


@frozen_dataclass(slots=True)
class OptimizedNode:
    """One node of onnxruntime's optimized graph and the original nodes it runs."""

    name: str
    op_type: str
    domain: str
    original: tuple[int, ...]  # indices into the original graph's node list
    how: str  # how the original nodes were found


@frozen_dataclass
class NodeMapping:
    nodes: tuple[OptimizedNode, ...]
    unclaimed: tuple[int, ...]  # original nodes no optimized node runs (folded / removed by onnxruntime)
    subgraph_parent: Mapping[str, str] = field(default_factory=dict)  # name of a node in a body -> its parent


def map_optimized_nodes(original: onnx.GraphProto, optimized: onnx.GraphProto) -> NodeMapping:
    """For each node of onnxruntime's optimized graph, the original nodes it runs.

    1. *Seeds.* An optimized node's outputs that keep an original tensor's name (onnxruntime's fusions keep the
       last fused node's output), or, for NCHWc nodes whose outputs are renamed, the tensor its name is built
       from (``<tensor>_nchwc``); a node whose name is an original node's name seeds that node.
    2. *Regions.* From the seeds, walk the original graph backwards, claiming nodes, and stop at the node's
       own (original) inputs, at graph inputs and initializers, at nodes another optimized node seeds, and
       past the *anchor*: the first node of the optimized node's op type (``FusedMatMul`` → ``MatMul``, NCHWc
       ``Conv`` → ``Conv``), beyond which only constant-only inputs (folded weights) are followed.
    3. *Absorption.* Original nodes still unclaimed that compute on data were fused into a neighbour
       (``Add`` + ``Relu`` into a ``Conv``'s NCHWc node whose name names only the ``BatchNormalization``
       output): each joins the optimized node of its producer (preferring a producer that feeds only it, then
       the one onnxruntime runs last: a fused node runs after all its inputs exist), else of its first
       consumer. Nodes that compute only on constants (or shapes) stay
       unclaimed: onnxruntime folded them.
    """
    graph = _OriginalGraph.index(original)
    opt_nodes = list(optimized.node)
    seeds = [_seed(node, graph) for node in opt_nodes]
    seeded = {i for found, _ in seeds for i in found}
    claimed: dict[int, int] = {}  # original node -> optimized node position
    regions: list[list[int]] = []
    for position, (node, (found, _)) in enumerate(zip(opt_nodes, seeds, strict=True)):
        region = _region(node, found, graph, seeded, claimed)
        for index in region:
            claimed[index] = position
        regions.append(region)
    _absorb(graph, claimed, regions)
    mapped = tuple(
        OptimizedNode(
            node.name,
            node.op_type,
            node.domain,
            tuple(sorted(region)),
            how if region else "inserted by onnxruntime",
        )
        for node, region, (_, how) in zip(opt_nodes, regions, seeds, strict=True)
    )
    unclaimed = tuple(i for i in range(len(graph.nodes)) if i not in claimed)
    return NodeMapping(mapped, unclaimed, _subgraph_parents(opt_nodes))


@frozen_dataclass
class _OriginalGraph:
    """Lookups over the original graph: who produces and consumes each tensor, which nodes are constant."""

    nodes: list[onnx.NodeProto]
    producer: dict[str, int]
    consumers: dict[str, list[int]]
    known: set[str]  # every tensor name: node outputs, initializers, graph inputs
    constant: set[int]  # nodes that compute only on constants (see :func:`_constant_nodes`)
    by_name: dict[str, list[int]]

    @staticmethod
    def index(graph: onnx.GraphProto) -> _OriginalGraph:
        nodes = list(graph.node)
        producer: dict[str, int] = {}
        consumers: dict[str, list[int]] = defaultdict(list)
        by_name: dict[str, list[int]] = defaultdict(list)
        for index, node in enumerate(nodes):
            producer.update((name, index) for name in node.output if name)
            for name in node.input:
                if name:
                    consumers[name].append(index)
            if node.name:
                by_name[node.name].append(index)
        initializers = {t.name for t in graph.initializer}
        graph_inputs = {v.name for v in graph.input} - initializers
        known = set(producer) | initializers | graph_inputs
        return _OriginalGraph(nodes, producer, consumers, known, _constant_nodes(nodes, initializers), by_name)

    def canonical(self, name: str) -> str | None:
        """The original tensor an optimized graph's tensor name stands for (``<tensor>_nchwc`` → ``<tensor>``)."""
        if name in self.known:
            return name
        if name.endswith(_NCHWC_SUFFIX) and name[: -len(_NCHWC_SUFFIX)] in self.known:
            return name[: -len(_NCHWC_SUFFIX)]
        return None

    def canonical_all(self, names: Iterable[str]) -> list[str]:
        return [c for c in (self.canonical(name) for name in names if name) if c is not None]


# ----------------------------------------------------------------------------------------------- seeds

_Seed = tuple[list[int], str]  # the original nodes found, and how


def _seed_by_outputs(node: onnx.NodeProto, graph: _OriginalGraph) -> _Seed:
    """The producers of the optimized node's outputs (a view's only if of its own type: a reshape keeps a
    fused node's output name, not its computation)."""
    found = [graph.producer[t] for t in graph.canonical_all(node.output) if t in graph.producer]
    if node.op_type in _VIEW_TYPES:
        found = [i for i in found if graph.nodes[i].op_type == node.op_type]
    return found, "output tensor names"


def _seed_by_nchwc_name(node: onnx.NodeProto, graph: _OriginalGraph) -> _Seed:
    """The producer of the tensor an NCHWc node is named after."""
    base = graph.canonical(node.name) if node.name else None
    return ([graph.producer[base]] if base is not None and base in graph.producer else []), "node name (NCHWc tensor)"


def _seed_by_exact_name(node: onnx.NodeProto, graph: _OriginalGraph) -> _Seed:
    """Original nodes of the same name and op type."""
    return [i for i in graph.by_name.get(node.name, []) if graph.nodes[i].op_type == node.op_type], "node name"


def _seed_by_fusion_name(node: onnx.NodeProto, graph: _OriginalGraph) -> _Seed:
    """The original nodes ``<name>`` of a fusion onnxruntime names ``<name>/<FusionName>``."""
    prefix = _name_prefix(node.name, graph.by_name) if node.name else None
    return (graph.by_name[prefix] if prefix is not None else []), f"node name (fusion of '{prefix}')"


#: The seeding rules, tried in order: the first that finds original nodes wins.
_SEED_RULES = (_seed_by_outputs, _seed_by_nchwc_name, _seed_by_exact_name, _seed_by_fusion_name)


def _seed(node: onnx.NodeProto, graph: _OriginalGraph) -> _Seed:
    """The original nodes an optimized node certainly runs, and how they were found (none if inserted)."""
    if node.op_type in INSERTED_TYPES:
        return [], ""
    for rule in _SEED_RULES:
        found, how = rule(node, graph)
        if found:
            return found, how
    return [], ""


# --------------------------------------------------------------------------------------------- regions


def _region(
    node: onnx.NodeProto, found: list[int], graph: _OriginalGraph, seeded: set[int], claimed: Mapping[int, int]
) -> list[int]:
    """The unclaimed original nodes reached backwards from ``node``'s seeds (see step 2 of the docs)."""
    own_inputs = set(graph.canonical_all(node.input))
    anchors = _ANCHOR_TYPES.get(node.op_type, frozenset({node.op_type}))
    region: list[int] = []
    stack = [i for i in found if i not in claimed]
    while stack:
        index = stack.pop()
        if index in claimed or index in region:
            continue
        region.append(index)
        current = graph.nodes[index]
        at_anchor = current.op_type in anchors
        for name in current.input:
            if not name or name in own_inputs or name not in graph.producer:
                continue
            source = graph.producer[name]
            if source in claimed or source in region:
                continue
            if _stops_at(source, at_anchor, found, graph, seeded):
                continue
            stack.append(source)
    return region


def _stops_at(source: int, at_anchor: bool, found: list[int], graph: _OriginalGraph, seeded: set[int]) -> bool:
    """Whether the walk stops before ``source``: past the anchor only constants are followed, and a node
    another optimized node seeds is that node's (unless constant)."""
    if source in graph.constant:
        return False
    return at_anchor or (source in seeded and source not in found)


def _absorb(graph: _OriginalGraph, claimed: dict[int, int], regions: list[list[int]]) -> None:
    """Data-dependent original nodes nobody claimed were fused into a neighbour: each joins it."""
    for index, node in enumerate(graph.nodes):
        if index in claimed or index in graph.constant:
            continue
        target = _absorbing_node(node, graph, claimed)
        if target is not None:
            claimed[index] = target
            regions[target].append(index)


def _absorbing_node(node: onnx.NodeProto, graph: _OriginalGraph, claimed: Mapping[int, int]) -> int | None:
    """The optimized node that absorbed ``node``: its producer's (one that feeds only it first, then the one run
    last), else its first consumer's; None if neither is claimed."""
    candidates = [
        (len(graph.consumers[name]) == 1, claimed[graph.producer[name]])
        for name in node.input
        if name in graph.producer and graph.producer[name] in claimed
    ]
    if candidates:
        return max(candidates)[1]
    after = [claimed[c] for name in node.output for c in graph.consumers.get(name, []) if c in claimed]
    return min(after) if after else None


def _subgraph_parents(opt_nodes: Sequence[onnx.NodeProto]) -> dict[str, str]:
    """The name of each node in an optimized node's bodies -> that node's name (the first, if several)."""
    parent: dict[str, str] = {}
    for node in opt_nodes:
        for inner in _subgraph_node_names(node):
            parent.setdefault(inner, node.name)
    return parent


def _name_prefix(name: str, by_name: Mapping[str, list[int]]) -> str | None:
    """The longest original node name that ``name`` extends with ``/...`` (onnxruntime names fusions
    ``<anchor name>/<FusionName>``), if any."""
    parts = name.split("/")
    for end in range(len(parts) - 1, 0, -1):
        candidate = "/".join(parts[:end])
        if candidate in by_name:
            return candidate
    return None


def _constant_nodes(nodes: Sequence[onnx.NodeProto], initializers: set[str]) -> set[int]:
    """Original nodes whose inputs are all constant (initializers, Constant outputs, shapes of tensors)."""
    constant_tensors = set(initializers)
    result: set[int] = set()
    changed = True
    while changed:  # nodes may be listed out of order; iterate to a fixed point
        changed = False
        for index, node in enumerate(nodes):
            if index in result:
                continue
            data = [name for name in node.input if name]
            if node.op_type in _METADATA_TYPES or all(name in constant_tensors for name in data):
                result.add(index)
                constant_tensors.update(name for name in node.output if name)
                changed = True
    return result


def _subgraph_node_names(node: onnx.NodeProto) -> Iterable[str]:
    for attr in node.attribute:
        graphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
        for graph in graphs:
            for inner in graph.node:
                yield inner.name
                yield from _subgraph_node_names(inner)
