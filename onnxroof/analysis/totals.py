"""What an analysis adds up to: the model's totals (unfused / fused / ideal, layout, energy, PE-array
utilization) and the time per op type. Pure functions of node and kernel results."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import compress
from operator import attrgetter
from types import MappingProxyType

import numpy as np

from onnxroof.analysis.liveness import PeakMemory
from onnxroof.analysis.results import NodeTable
from onnxroof.core.states import NodeState
from onnxroof.platform.model import Platform
from onnxroof.roofline.kernels import Bounds, KernelTable, fused_bounds, memory_bound_share


@dataclass(frozen=True, slots=True)
class OpTypeRow:
    """The figures of every node of one op type, summed; ``share`` of the total predicted latency."""

    op_type: str
    domain: str
    count: int
    flops: float
    macs: float
    bytes: float
    params: float
    latency_s: float
    share: float  # of total predicted latency


@dataclass(frozen=True, slots=True)
class Totals:
    """The whole model's figures: costs, the three latencies (unfused, fused, ideal), layout traffic, energy."""

    flops: float
    macs: float
    params: float  # distinct weight tensors consumed as data, each counted once
    weight_bytes: float  # bytes of those weights as the bound graph reads them (weight_bytes_stored: the file's)
    bytes_read: float
    bytes_written: float
    latency_s: float  # predicted: Σ fused kernel latencies
    compute_time_s: float  # Σ t_compute over kernels
    memory_time_s: float  # Σ t_memory over kernels
    overhead_time_s: float  # Σ launch overhead over kernels
    memory_bound_share: float  # share of predicted time spent in memory-bound kernels
    peak_activation_bytes: float
    peak_activation_node: str | None
    nodes: int
    kernels: int  # kernels launched after fusion
    states: Mapping[str, int]
    unfused: Bounds  # every costed node its own kernel (upper bound)
    fused: Bounds  # the fusion profile's kernels (the estimate: latency_s above)
    ideal: Bounds  # fused, with elementwise and layout traffic free (lower bound)
    layout_bytes: float  # bytes moved by pure copies left after fusion
    layout_latency_s: float
    layout_share: float  # of the fused latency
    energy_j: float | None = None  # Σ kernel energy per inference (None: the platform gives no energy figures)
    energy_compute_j: float | None = None
    energy_memory_j: float | None = None
    energy_delay_js: float | None = None  # energy × latency (J·s)
    energy_memory_share: float | None = None  # share of the energy spent moving data
    array_utilization: float | None = None  # FLOP-weighted mean PE-array utilization of GEMM-like kernels
    weight_bytes_stored: float | None = None  # the weights as the file stores them (None: not known)

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written


def build_totals(
    nodes: NodeTable,
    weights: Mapping[str, tuple[float, float]],
    peak: PeakMemory,
    kernels: KernelTable,
    platform: Platform,
    graph_launch_s: float = 0.0,
    weight_bytes_stored: float | None = None,
) -> Totals:
    """The model's totals: ``nodes`` every node (the costed ones run), ``weights`` the distinct weights
    (elements, bytes), ``kernels`` the fused kernels. ``graph_launch_s``: what the run pays once under its runtime
    (:meth:`onnxroof.runtime.Runtime.run_launch_s`: the launch of a replayed CUDA graph), added once to the
    latency and the overhead time; ``weight_bytes_stored`` the file's weights as stored
    (``ModelScan.stored_weight_bytes``, :func:`onnxroof.load.checks.scan_model`), kept beside ``weight_bytes`` =
    Σ bytes of ``weights``, what the bound graph reads. Sums run in row order over the figures as placed."""
    fused = fused_bounds(kernels)
    node_states = list(map(attrgetter("state"), nodes.node_costs))
    running = [state == NodeState.COSTED for state in node_states]
    costs = list(compress(nodes.costs, running))
    flops = sum(map(attrgetter("flops"), costs))
    figures = kernels.figures
    layout = kernels.layout
    layout_latency = sum(compress(figures.latency_s.tolist(), layout))
    states = Counter(node_states)
    return Totals(
        flops=flops,
        macs=sum(map(attrgetter("macs"), costs)),
        params=float(sum(numel for numel, _ in weights.values())),
        weight_bytes=float(sum(nbytes for _, nbytes in weights.values())),
        bytes_read=sum(map(attrgetter("bytes_read"), costs)),
        bytes_written=sum(map(attrgetter("bytes_written"), costs)),
        latency_s=fused.latency_s + graph_launch_s,
        compute_time_s=sum(figures.t_compute_s.tolist()),
        memory_time_s=sum(figures.t_memory_s.tolist()),
        overhead_time_s=sum(figures.t_overhead_s.tolist()) + graph_launch_s,
        memory_bound_share=memory_bound_share(kernels),
        peak_activation_bytes=peak.bytes,
        peak_activation_node=peak.node_id,
        nodes=len(nodes),
        kernels=len(kernels),
        states=MappingProxyType({state: states.get(state, 0) for state in NodeState}),
        unfused=Bounds(
            flops,
            sum(map(attrgetter("bytes"), costs)),
            sum(compress(nodes.figures.latency_s.tolist(), running)),
        ),
        fused=fused,
        ideal=Bounds(
            sum(map(attrgetter("flops"), kernels.costs)),
            sum(kernels.ideal_bytes),
            sum(kernels.ideal_latency_s.tolist()),
        ),
        layout_bytes=sum(cost.bytes for cost, copy in zip(kernels.costs, layout, strict=True) if copy),
        layout_latency_s=layout_latency,
        layout_share=layout_latency / fused.latency_s if fused.latency_s > 0 else 0.0,
        **energy_totals(kernels, fused.latency_s),
        array_utilization=array_utilization(kernels, platform),
        weight_bytes_stored=weight_bytes_stored,
    )


def energy_totals(kernels: KernelTable, latency: float) -> dict[str, float | None]:
    """Energy per inference (Σ over kernels), its split, the energy-delay product; None without figures."""
    figures = kernels.figures
    priced = ~np.isnan(figures.energy_j)
    if not priced.any():
        return {}
    compute = sum(figures.energy_compute_j[priced].tolist())
    memory = sum(figures.energy_memory_j[priced].tolist())
    total = compute + memory
    return {
        "energy_j": total,
        "energy_compute_j": compute,
        "energy_memory_j": memory,
        "energy_delay_js": total * latency,
        "energy_memory_share": memory / total if total > 0 else 0.0,
    }


def array_utilization(kernels: KernelTable, platform: Platform) -> float | None:
    """FLOP-weighted mean utilization of the multiply-accumulate kernels (None without a PE array)."""
    usage = kernels.figures.utilization.tolist()
    mapped = [(cost.flops, u) for cost, u in zip(kernels.costs, usage, strict=True) if cost.macs > 0]
    flops = sum(f for f, _ in mapped)
    if platform.array is None or flops <= 0:
        return None
    return sum(f * u for f, u in mapped) / flops


def op_type_rows(
    nodes: NodeTable, kernels: KernelTable, anchors: np.ndarray, total_latency: float
) -> tuple[OpTypeRow, ...]:
    """Per op type: node counts, FLOPs, bytes and params summed over its nodes (unfused); time = the predicted
    time of the kernels anchored on nodes of that type (a Conv+BN+Relu kernel counts as Conv time), so the
    shares add up to the fused estimate. ``anchors``: each kernel's anchor node (its row in ``nodes``)."""
    ops = nodes.ops

    def keys() -> Iterator[tuple[str, str]]:  # (domain, op type) per node, made as read: no list of a pair a node
        return zip(map(attrgetter("domain"), ops), map(attrgetter("op_type"), ops), strict=True)

    number = {key: i for i, key in enumerate(dict.fromkeys(keys()))}  # each type in order of its first node
    codes = np.fromiter(map(number.__getitem__, keys()), np.intp, len(ops))
    order = np.argsort(codes, kind="stable")  # rows grouped by type, in row order within each
    bounds = np.searchsorted(codes[order], np.arange(len(number) + 1))
    costs = nodes.costs
    groups = {key: [costs[row] for row in order[bounds[i] : bounds[i + 1]].tolist()] for key, i in number.items()}
    kernel_time: dict[tuple[str, str], float] = {}
    for row, latency in zip(anchors.tolist(), kernels.figures.latency_s.tolist(), strict=True):
        anchor = nodes.ops[row]
        key = (anchor.domain, anchor.op_type)
        kernel_time[key] = kernel_time.get(key, 0.0) + latency
    rows = [
        OpTypeRow(
            op_type=op_type,
            domain=domain,
            count=len(members),
            flops=sum(map(attrgetter("flops"), members)),
            macs=sum(map(attrgetter("macs"), members)),
            bytes=sum(map(attrgetter("bytes"), members)),
            params=sum(map(attrgetter("params"), members)),
            latency_s=kernel_time.get((domain, op_type), 0.0),
            share=kernel_time.get((domain, op_type), 0.0) / total_latency if total_latency > 0 else 0.0,
        )
        for (domain, op_type), members in groups.items()
    ]
    return tuple(sorted(rows, key=lambda row: (-row.latency_s, -row.count, row.op_type)))
