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
from dataclasses import dataclass, field

import onnx

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


@dataclass(frozen=True, slots=True)
class OptimizedNode:
    """One node of onnxruntime's optimized graph and the original nodes it runs."""

    name: str
    op_type: str
    domain: str
    original: tuple[int, ...]  # indices into the original graph's node list
    how: str  # how the original nodes were found


@dataclass(frozen=True)
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
    nodes = list(original.node)
    producer: dict[str, int] = {}
    consumers: dict[str, list[int]] = defaultdict(list)
    for index, node in enumerate(nodes):
        for name in node.output:
            if name:
                producer[name] = index
        for name in node.input:
            if name:
                consumers[name].append(index)
    initializers = {t.name for t in original.initializer}
    graph_inputs = {v.name for v in original.input} - initializers
    known = set(producer) | initializers | graph_inputs
    constant = _constant_nodes(nodes, initializers)
    by_name: dict[str, list[int]] = defaultdict(list)
    for index, node in enumerate(nodes):
        if node.name:
            by_name[node.name].append(index)

    def canonical(name: str) -> str | None:
        if name in known:
            return name
        if name.endswith(_NCHWC_SUFFIX) and name[: -len(_NCHWC_SUFFIX)] in known:
            return name[: -len(_NCHWC_SUFFIX)]
        return None

    opt_nodes = list(optimized.node)
    seeds: list[tuple[list[int], str]] = []
    for node in opt_nodes:
        found: list[int] = []
        how = ""
        outs = [c for c in (canonical(o) for o in node.output if o) if c is not None]
        if node.op_type not in INSERTED_TYPES:
            exact = [i for i in by_name.get(node.name, []) if nodes[i].op_type == node.op_type]
            found = [producer[t] for t in outs if t in producer]
            how = "output tensor names" if found else ""
            if node.op_type in _VIEW_TYPES:  # a reshape keeps a fused node's output name: not its computation
                found = [i for i in found if nodes[i].op_type == node.op_type]
            if not found and node.name:
                base = canonical(node.name)
                if base is not None and base in producer:
                    found, how = [producer[base]], "node name (NCHWc tensor)"
            if not found and exact:
                found, how = exact, "node name"
            if not found and node.name:
                prefix = _name_prefix(node.name, by_name)
                if prefix is not None:
                    found, how = by_name[prefix], f"node name (fusion of '{prefix}')"
        seeds.append((found, how))
    seeded = {i for found, _ in seeds for i in found}

    claimed: dict[int, int] = {}  # original node -> optimized node position
    regions: list[list[int]] = []
    for position, (node, (found, _)) in enumerate(zip(opt_nodes, seeds, strict=True)):
        own_inputs = {c for c in (canonical(i) for i in node.input if i) if c is not None}
        anchors = _ANCHOR_TYPES.get(node.op_type, frozenset({node.op_type}))
        region: list[int] = []
        stack = [i for i in found if i not in claimed]
        while stack:
            index = stack.pop()
            if index in claimed or index in region:
                continue
            region.append(index)
            current = nodes[index]
            at_anchor = current.op_type in anchors
            for name in current.input:
                if not name or name in own_inputs or name not in producer:
                    continue
                source = producer[name]
                if source in claimed or source in region:
                    continue
                if at_anchor and source not in constant:
                    continue
                if source in seeded and source not in found and source not in constant:
                    continue
                stack.append(source)
        for index in region:
            claimed[index] = position
        regions.append(region)

    # absorption: data-dependent original nodes nobody claimed were fused into a neighbour
    for index, node in enumerate(nodes):
        if index in claimed or index in constant:
            continue
        candidates = [
            (len(consumers[name]) == 1, claimed[producer[name]])
            for name in node.input
            if name in producer and producer[name] in claimed
        ]
        if candidates:
            target = max(candidates)[1]
        else:
            after = [claimed[c] for name in node.output for c in consumers.get(name, []) if c in claimed]
            if not after:
                continue
            target = min(after)
        claimed[index] = target
        regions[target].append(index)

    subgraph_parent: dict[str, str] = {}
    for node in opt_nodes:
        for inner in _subgraph_node_names(node):
            subgraph_parent.setdefault(inner, node.name)
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
    unclaimed = tuple(i for i in range(len(nodes)) if i not in claimed)
    return NodeMapping(mapped, unclaimed, subgraph_parent)


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
