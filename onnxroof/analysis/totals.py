"""What an analysis adds up to: the model's totals (unfused / fused / ideal, layout, energy, PE-array
utilization) and the time per op type. Pure functions of node and kernel results."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import compress
from operator import attrgetter
from types import MappingProxyType

import numpy as np

from onnxroof.analysis.liveness import PeakMemory
from onnxroof.analysis.results import NodeTable
from onnxroof.core.cost import Cost
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.states import NodeState
from onnxroof.platform.model import Platform
from onnxroof.roofline.kernels import Bounds, KernelTable, fused_bounds, memory_bound_share


@frozen_dataclass(slots=True)
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


@frozen_dataclass(slots=True)
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
    rows, counts = nodes.distinct()
    node_costs = [nodes.node_costs[row] for row in rows]
    running = [node_cost.state == NodeState.COSTED for node_cost in node_costs]
    ran_costs = list(compress(map(nodes.costs.__getitem__, rows), running))
    ran_counts = list(compress(counts, running))
    ran_nodes = np.asarray(running, dtype=bool) if nodes.shared is None else np.asarray(running)[nodes.shared[1]]

    def total(figure: str) -> float:  # over the nodes that ran
        return figure_sum(figure, ran_costs, ran_counts, lambda: compress(nodes.costs, ran_nodes.tolist()))

    flops = total("flops")
    figures = kernels.figures
    layout = kernels.layout
    layout_latency = sum(compress(figures.latency_s.tolist(), layout))
    states: Counter[NodeState] = Counter()
    for node_cost, count in zip(node_costs, counts, strict=True):
        states[node_cost.state] += count
    return Totals(
        flops=flops,
        macs=total("macs"),
        params=float(sum(numel for numel, _ in weights.values())),
        weight_bytes=float(sum(nbytes for _, nbytes in weights.values())),
        bytes_read=total("bytes_read"),
        bytes_written=total("bytes_written"),
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
        unfused=Bounds(flops, total("bytes"), sum(nodes.figures.latency_s[ran_nodes].tolist())),
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


def repeated_sum(values: Sequence[float], counts: Sequence[int]) -> float | None:
    """``Σ counts[k] · values[k]``, the sum of a column in which ``values[k]`` appears ``counts[k]`` times, when
    it equals the column's sum in row order, whatever that order: every value an integer (an int, or a float
    without a fraction) and ``Σ counts[k] · |values[k]| < 2**53``, so that every partial sum is an integer a float
    holds exactly. Then the sum is an int when every value counted is one, else a float, as Python's ``sum`` in
    row order gives it. None otherwise (the caller sums in row order)."""
    total, magnitude, floating = 0, 0, False
    for value, count in zip(values, counts, strict=True):
        if not count:
            continue
        if isinstance(value, float):
            if not value.is_integer():  # a fraction, NaN or an infinity
                return None
            floating = True
        whole = int(value)
        total += whole * count
        magnitude += abs(whole) * count
    if magnitude >= 2**53:
        return None
    return float(total) if floating else total


def figure_sum(
    figure: str, costs: Sequence[Cost], counts: Sequence[int], in_row_order: Callable[[], Iterable[Cost]]
) -> float:
    """Σ ``figure`` over a column of costs given as its distinct ``costs``, each appearing ``counts`` times
    (:meth:`~onnxroof.analysis.results.NodeTable.distinct`): :func:`repeated_sum` when that is exact, else the sum
    in row order over every cost of the column (``in_row_order``, called only then)."""
    read = attrgetter(figure)
    exact = repeated_sum(list(map(read, costs)), counts)
    return exact if exact is not None else sum(map(read, in_row_order()))


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
    shares add up to the fused estimate. ``anchors``: each kernel's anchor node (its row in ``nodes``).

    The sums read each distinct node once with its count (:meth:`~onnxroof.analysis.results.NodeTable.distinct`;
    the nodes sharing a row are of its op type), through :func:`repeated_sum`, else in row order over the type's
    nodes (:func:`_members_by_type`)."""
    ops, costs = nodes.ops, nodes.costs
    rows, counts = nodes.distinct()
    groups: dict[tuple[str, str], tuple[list[Cost], list[int]]] = {}  # each type in order of its first node
    for row, count in zip(rows, counts, strict=True):
        op = ops[row]
        group = groups.get((op.domain, op.op_type)) or groups.setdefault((op.domain, op.op_type), ([], []))
        group[0].append(costs[row])
        group[1].append(count)
    members = functools.cache(lambda: _members_by_type(nodes))  # every node's cost by type: made if needed

    def total(key: tuple[str, str], figure: str) -> float:
        return figure_sum(figure, *groups[key], lambda: members()[key])

    kernel_time: dict[tuple[str, str], float] = {}
    for row, latency in zip(anchors.tolist(), kernels.figures.latency_s.tolist(), strict=True):
        anchor = nodes.ops[row]
        key = (anchor.domain, anchor.op_type)
        kernel_time[key] = kernel_time.get(key, 0.0) + latency
    rows_by_type = [
        OpTypeRow(
            op_type=op_type,
            domain=domain,
            count=sum(group[1]),
            flops=total((domain, op_type), "flops"),
            macs=total((domain, op_type), "macs"),
            bytes=total((domain, op_type), "bytes"),
            params=total((domain, op_type), "params"),
            latency_s=kernel_time.get((domain, op_type), 0.0),
            share=kernel_time.get((domain, op_type), 0.0) / total_latency if total_latency > 0 else 0.0,
        )
        for (domain, op_type), group in groups.items()
    ]
    return tuple(sorted(rows_by_type, key=lambda row: (-row.latency_s, -row.count, row.op_type)))


def _members_by_type(nodes: NodeTable) -> dict[tuple[str, str], list[Cost]]:
    """Every node's cost by (domain, op type), in row order within each type."""
    ops = nodes.ops

    def keys() -> Iterator[tuple[str, str]]:  # (domain, op type) per node, made as read: no list of a pair a node
        return zip(map(attrgetter("domain"), ops), map(attrgetter("op_type"), ops), strict=True)

    number = {key: i for i, key in enumerate(dict.fromkeys(keys()))}  # each type in order of its first node
    codes = np.fromiter(map(number.__getitem__, keys()), np.intp, len(ops))
    order = np.argsort(codes, kind="stable")  # rows grouped by type, in row order within each
    bounds = np.searchsorted(codes[order], np.arange(len(number) + 1))
    costs = nodes.costs
    return {key: [costs[row] for row in order[bounds[i] : bounds[i + 1]].tolist()] for key, i in number.items()}
