"""Matching onnxruntime's measured nodes to onnxroof's kernels.

Both sides run groups of the model's original nodes: onnxroof's kernels (its fusion profile) and the nodes of
onnxruntime's optimized graph (:func:`onnxroof.measure.profile.map.map_optimized_nodes`). A kernel and an onnxruntime
node that share an original node belong to one compared group; groups are the connected components of that
"shares a node" relation (union-find), usually one kernel and one node, several when the two sides fuse
differently. What is left is listed with a reason, both ways: onnxruntime nodes with no kernel (layout
conversions it inserts, ops onnxroof costs at zero) and kernels that no onnxruntime node runs (folded or
removed by its optimizer). A measured time of a node inside an ``If``/``Loop``/``Scan`` body counts towards
its control-flow parent.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import onnx

from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.states import NodeState
from onnxroof.measure.profile.map import INSERTED_TYPES, NodeMapping, OptimizedNode
from onnxroof.measure.profile.result import Unmatched


@frozen_dataclass
class Group:
    """Kernels and onnxruntime nodes that run the same original nodes (one compared row)."""

    kernels: tuple[str, ...]  # kernel ids, in the analysis' order
    ort_nodes: tuple[str, ...]  # optimized node names, sorted
    ort_op_types: tuple[str, ...]  # one per ort node
    measured_s: float  # Σ measured time of the ort nodes per run


@frozen_dataclass
class Matching:
    groups: tuple[Group, ...]
    unmatched_ort: tuple[Unmatched, ...]  # measured onnxruntime nodes with no kernel, slowest first
    unmatched_kernels: tuple[str, ...]  # kernel ids no onnxruntime node runs, in the analysis' order
    warnings: tuple[str, ...]


class _Components:
    """Union-find over string keys."""

    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, key: str) -> str:
        parent = self.parent
        parent.setdefault(key, key)
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    def union(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)


def match_kernels(
    analysis,
    original: onnx.GraphProto,
    mapping: NodeMapping,
    node_times: Mapping[str, float],
    node_types: Mapping[str, str],
) -> Matching:
    """Group ``analysis``' kernels with the onnxruntime nodes of ``mapping`` that run the same original nodes
    of ``original`` (the model's graph); ``node_times`` are the measured seconds per run of each profiled
    node and ``node_types`` their op types, as profiled."""
    from onnxroof.core.protos import node_id

    ids = [node_id(i, n) for i, n in enumerate(original.node)]
    kernel_of = {nid: kernel.id for nid, kernel in analysis.kernel_by_node.items()}
    costed = {n.id for n in analysis.nodes if n.state == NodeState.COSTED}
    warnings: list[str] = []
    missing_ids = set(kernel_of) - set(ids)
    if missing_ids:
        warnings.append(f"{len(missing_ids)} kernel node id(s) not found in the model file (first: {min(missing_ids)})")

    by_name: dict[str, list[OptimizedNode]] = defaultdict(list)
    for node in mapping.nodes:
        by_name[node.name].append(node)
    times, unmatched = _ort_node_times(by_name, mapping, node_times, node_types)
    node_kernels = _kernels_of_ort_nodes(by_name, ids, kernel_of)
    for name, group in by_name.items():
        if name in node_kernels:
            continue
        seconds = times.get(name, 0.0)
        if name not in node_times and seconds == 0.0:
            continue  # never ran (or ran inside nothing we profile): nothing to report
        reason = _unmatched_reason(group, original, ids, costed)
        unmatched.append(Unmatched(name, group[0].op_type, seconds, reason))

    groups = _groups(analysis, node_kernels, by_name, times)
    in_groups = {k for g in groups for k in g.kernels}
    return Matching(
        groups=tuple(groups),
        unmatched_ort=tuple(sorted(unmatched, key=lambda u: -u.seconds)),
        unmatched_kernels=tuple(k.id for k in analysis.kernels if k.id not in in_groups),
        warnings=tuple(warnings),
    )


def _ort_node_times(
    by_name: Mapping[str, list[OptimizedNode]],
    mapping: NodeMapping,
    node_times: Mapping[str, float],
    node_types: Mapping[str, str],
) -> tuple[dict[str, float], list[Unmatched]]:
    """The measured seconds per run of each optimized node (a node inside a body counts towards its control-flow
    parent), and the profiled nodes that are not in the optimized graph at all."""
    times: dict[str, float] = defaultdict(float)
    unmatched: list[Unmatched] = []
    for name, seconds in node_times.items():
        if name in by_name:
            times[name] += seconds
        elif name in mapping.subgraph_parent:
            times[mapping.subgraph_parent[name]] += seconds
        else:
            unmatched.append(Unmatched(name, node_types.get(name, ""), seconds, "not in the optimized graph"))
    return times, unmatched


def _kernels_of_ort_nodes(
    by_name: Mapping[str, list[OptimizedNode]], ids: Sequence[str], kernel_of: Mapping[str, str]
) -> dict[str, set[str]]:
    """Optimized node name -> the ids of the kernels that run one of its original nodes (names with none left
    out)."""
    node_kernels: dict[str, set[str]] = defaultdict(set)
    for name, group in by_name.items():
        for node in group:
            for index in node.original:
                kernel = kernel_of.get(ids[index])
                if kernel is not None:
                    node_kernels[name].add(kernel)
    return node_kernels


def _groups(
    analysis,
    node_kernels: Mapping[str, set[str]],
    by_name: Mapping[str, list[OptimizedNode]],
    times: Mapping[str, float],
) -> list[Group]:
    """The compared rows: the connected components of "shares an original node" over kernels and optimized nodes
    (union-find), each with its kernels in the analysis' order, its nodes sorted and Σ their measured times;
    rows in the order of their first kernel."""
    components = _Components()
    for name, kernels in node_kernels.items():
        for kernel in kernels:
            components.union(f"ort:{name}", f"k:{kernel}")
    members: dict[str, tuple[list[str], list[str]]] = {}
    for name in node_kernels:
        members.setdefault(components.find(f"ort:{name}"), ([], []))[1].append(name)
    for kernel in analysis.kernels:
        key = f"k:{kernel.id}"
        if key in components.parent:
            members.setdefault(components.find(key), ([], []))[0].append(kernel.id)
    groups = [
        Group(
            kernels=tuple(kernels),
            ort_nodes=tuple(sorted(names)),
            ort_op_types=tuple(by_name[n][0].op_type for n in sorted(names)),
            measured_s=sum(times.get(n, 0.0) for n in names),
        )
        for kernels, names in members.values()
        if kernels
    ]
    order = {kernel.id: position for position, kernel in enumerate(analysis.kernels)}
    groups.sort(key=lambda g: order[g.kernels[0]])
    return groups


def _unmatched_reason(
    group: Sequence[OptimizedNode], original: onnx.GraphProto, ids: Sequence[str], costed: set[str]
) -> str:
    """Why an onnxruntime node has no onnxroof kernel."""
    originals = [i for node in group for i in node.original]
    if not originals:
        if group[0].op_type in INSERTED_TYPES:
            return "inserted by onnxruntime (layout conversion); no original node"
        return "inserted by onnxruntime (e.g. a reshape around a fused Gemm); no original node"
    kinds = sorted({original.node[i].op_type for i in originals})
    uncosted = [ids[i] for i in originals if ids[i] not in costed]
    if len(uncosted) == len(originals):
        return f"runs original node(s) onnxroof costs at zero ({', '.join(kinds)}: views, shapes or folded constants)"
    return f"runs original node(s) {', '.join(kinds)} that belong to no kernel"
