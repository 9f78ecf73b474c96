"""What an analysis adds up to: the model's totals (unfused / fused / ideal, layout, energy, PE-array
utilization) and the time per op type. Pure functions of node and kernel results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from onnxroof.analysis.liveness import PeakMemory
from onnxroof.platform.model import Platform
from onnxroof.roofline.kernels import Bounds, KernelResult, Placement, fused_bounds, memory_bound_share


@dataclass(frozen=True, slots=True)
class OpTypeRow:
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
    flops: float
    macs: float
    params: float  # distinct weight tensors consumed as data, each counted once
    weight_bytes: float
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

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written


def build_totals(
    results: Sequence[Placement],
    running: Sequence[Placement],
    states: Mapping[str, int],
    weights: Mapping[str, tuple[float, float]],
    peak: PeakMemory,
    kernels: tuple[KernelResult, ...],
    platform: Platform,
    graph_launch_s: float = 0.0,
) -> Totals:
    """The model's totals: ``results`` every node, ``running`` the costed ones, ``states`` nodes per state,
    ``weights`` the distinct weights (elements, bytes), ``kernels`` the fused kernels. ``graph_launch_s``: the
    one launch of a graph-captured run (:data:`onnxroof.fusion.patterns.GRAPH_CAPTURE`), added once to the
    latency and the overhead time (its kernels carry none)."""
    fused = fused_bounds(kernels)
    layout = [k for k in kernels if k.layout]
    return Totals(
        flops=sum(r.flops for r in running),
        macs=sum(r.macs for r in running),
        params=float(sum(numel for numel, _ in weights.values())),
        weight_bytes=float(sum(nbytes for _, nbytes in weights.values())),
        bytes_read=sum(r.bytes_read for r in running),
        bytes_written=sum(r.bytes_written for r in running),
        latency_s=fused.latency_s + graph_launch_s,
        compute_time_s=sum(k.t_compute_s for k in kernels),
        memory_time_s=sum(k.t_memory_s for k in kernels),
        overhead_time_s=sum(k.t_overhead_s for k in kernels) + graph_launch_s,
        memory_bound_share=memory_bound_share(kernels),
        peak_activation_bytes=peak.bytes,
        peak_activation_node=peak.node_id,
        nodes=len(results),
        kernels=len(kernels),
        states=MappingProxyType(dict(states)),
        unfused=Bounds(sum(r.flops for r in running), sum(r.bytes for r in running), sum(r.latency_s for r in running)),
        fused=fused,
        ideal=Bounds(
            sum(k.flops for k in kernels),
            sum(k.ideal_bytes for k in kernels),
            sum(k.ideal_latency_s for k in kernels),
        ),
        layout_bytes=sum(k.bytes for k in layout),
        layout_latency_s=sum(k.latency_s for k in layout),
        layout_share=sum(k.latency_s for k in layout) / fused.latency_s if fused.latency_s > 0 else 0.0,
        **energy_totals(kernels, fused.latency_s),
        array_utilization=array_utilization(kernels, platform),
    )


def energy_totals(kernels: tuple[KernelResult, ...], latency: float) -> dict[str, float | None]:
    """Energy per inference (Σ over kernels), its split, the energy-delay product; None without figures."""
    priced = [k for k in kernels if k.energy_j is not None]
    if not priced:
        return {}
    compute = sum(k.energy_compute_j or 0.0 for k in priced)
    memory = sum(k.energy_memory_j or 0.0 for k in priced)
    total = compute + memory
    return {
        "energy_j": total,
        "energy_compute_j": compute,
        "energy_memory_j": memory,
        "energy_delay_js": total * latency,
        "energy_memory_share": memory / total if total > 0 else 0.0,
    }


def array_utilization(kernels: tuple[KernelResult, ...], platform: Platform) -> float | None:
    """FLOP-weighted mean utilization of the multiply-accumulate kernels (None without a PE array)."""
    mapped = [k for k in kernels if k.macs > 0]
    flops = sum(k.flops for k in mapped)
    if platform.array is None or flops <= 0:
        return None
    return sum(k.flops * k.utilization for k in mapped) / flops


def op_type_rows(results: Sequence, kernels: tuple[KernelResult, ...], total_latency: float) -> tuple[OpTypeRow, ...]:
    """Per op type: node counts, FLOPs, bytes and params summed over its nodes (unfused); time = the predicted
    time of the kernels anchored on nodes of that type (a Conv+BN+Relu kernel counts as Conv time), so the
    shares add up to the fused estimate."""
    groups: dict[tuple[str, str], list] = {}
    for r in results:
        groups.setdefault((r.domain, r.op_type), []).append(r)
    by_id = {r.id: r for r in results}
    kernel_time: dict[tuple[str, str], float] = {}
    for kernel in kernels:
        anchor = by_id[kernel.node_ids[0]]
        key = (anchor.domain, anchor.op_type)
        kernel_time[key] = kernel_time.get(key, 0.0) + kernel.latency_s
    rows = [
        OpTypeRow(
            op_type=op_type,
            domain=domain,
            count=len(members),
            flops=sum(m.flops for m in members),
            macs=sum(m.macs for m in members),
            bytes=sum(m.bytes for m in members),
            params=sum(m.params for m in members),
            latency_s=kernel_time.get((domain, op_type), 0.0),
            share=kernel_time.get((domain, op_type), 0.0) / total_latency if total_latency > 0 else 0.0,
        )
        for (domain, op_type), members in groups.items()
    ]
    return tuple(sorted(rows, key=lambda row: (-row.latency_s, -row.count, row.op_type)))
