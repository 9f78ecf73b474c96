"""Measured truth: run a model in onnxruntime with profiling and hold onnxroof's prediction against it.

``profile(model, platform, dims)`` runs the model on onnxruntime's CPU execution provider with random inputs
of the bound dims (symbolic dims fixed in the session too, so that onnxruntime folds what onnxroof folds),
threads pinned to the platform's measured count. It returns a :class:`ProfileResult`:

* **end to end**: the predicted latency (Σ kernels + the platform's per-run overhead) against the median
  wall time of ``InferenceSession.run`` without profiling (timed in blocks, with its spread), and against the
  sum of the profiled kernel times;
* **per kernel**: onnxruntime's per-node kernel times (from its profiler) mapped back to onnxroof's kernels.
  onnxruntime runs an optimized graph whose nodes may be fusions of several original nodes (``Conv`` + ``BN``
  + ``Relu`` as one NCHWc ``Conv``, ``MatMul`` + ``Div`` as ``FusedMatMul``...). :func:`map_optimized_nodes`
  finds, for each node of the optimized graph (``SessionOptions.optimized_model_filepath``), the original
  nodes it runs; onnxroof's kernels and onnxruntime's nodes that share original nodes form one compared row
  (usually one kernel and one node; several when the two sides fuse differently);
* what could not be matched, both ways: onnxruntime nodes with no onnxroof kernel (layout conversions it
  inserts, ops onnxroof costs at zero), and onnxroof kernels that onnxruntime never ran (folded or removed);
* the achieved points on the roofline (FLOPs / measured time), the Spearman rank correlation of per-row
  predicted and measured times, and a sentence for each of the largest misses.

Measured per-node times: onnxruntime's profiler records whole microseconds, truncated, and its own
bookkeeping (thread-pool and memory statistics) sits inside each node's ``kernel_time`` span: about 3 µs per
node on a host where the node itself takes 0.2 µs. Both are corrected, and reported: each event gets +0.5 µs
(the mean truncation error) minus the profiler's overhead per event, measured in the same process on a chain
of tiny ops (profiled event time − unprofiled time per op). Each node's time per run is then the mean over
the profiled runs after dropping the slowest 10 % (a shared host's interruptions). The kernel time excludes
the executor's bookkeeping between nodes; that gap shows as wall time − Σ kernel times.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from onnxroof.errors import OnnxroofError

PROFILER_TRUNCATION_S = 0.5e-6
"""onnxruntime's profiler truncates durations to whole µs: +0.5 µs per event corrects the mean."""
TRIM_SHARE = 0.1
"""Share of the slowest profiled runs dropped per node before averaging."""

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
_INSERTED_TYPES = frozenset({"ReorderInput", "ReorderOutput", "MemcpyToHost", "MemcpyFromHost"})
_NCHWC_SUFFIX = "_nchwc"
_METADATA_TYPES = frozenset({"Shape", "Size"})
_VIEW_TYPES = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity"})
_FLOOR_S = 0.05e-6  # a corrected event time never drops below this


# --------------------------------------------------------------------------------------------- mapping


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
        if node.op_type not in _INSERTED_TYPES:
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


# ------------------------------------------------------------------------------------------- measuring


@dataclass(frozen=True)
class OrtRun:
    """What onnxruntime measured for one model."""

    node_times: Mapping[str, float]  # optimized node name -> seconds per run (trimmed mean, corrected)
    node_types: Mapping[str, str]  # optimized node name -> op type, as profiled
    wall_s: float  # median wall time of one run, profiling off
    wall_low_s: float  # 10th percentile
    wall_high_s: float  # 90th percentile
    wall_runs: int
    profiled_runs: int
    optimized: onnx.ModelProto
    threads: int
    dims_fixed: Mapping[str, int]
    profiler_overhead_s: float  # subtracted from each profiled event


_NUMPY_DTYPES = {
    "float32": np.float32,
    "float16": np.float16,
    "float64": np.float64,
    "bfloat16": np.float32,
    "int64": np.int64,
    "int32": np.int32,
    "int16": np.int16,
    "int8": np.int8,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
    "bool": np.bool_,
}


def random_inputs(
    inputs: Sequence[tuple[str, Sequence[int | None] | None, str]], seed: int = 0
) -> dict[str, np.ndarray]:
    """Random feeds for ``(name, shape, dtype)`` inputs: normal floats; integers in {0, 1} (valid as token ids,
    indices and masks alike); booleans at random. Every dim must be bound."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for name, shape, dtype in inputs:
        if shape is None or any(d is None for d in shape):
            raise OnnxroofError(
                f"input '{name}' has an unbound dim (shape {shape}); bind every symbolic dim with --dim NAME=VALUE"
            )
        np_type = _NUMPY_DTYPES.get(dtype)
        if np_type is None:
            raise OnnxroofError(f"input '{name}': cannot make random data of type {dtype}")
        dims = tuple(int(d) for d in shape)
        if np_type is np.bool_:
            feeds[name] = rng.integers(0, 2, size=dims).astype(np.bool_)
        elif np.issubdtype(np_type, np.integer):
            feeds[name] = rng.integers(0, 2, size=dims).astype(np_type)
        else:
            feeds[name] = rng.standard_normal(dims).astype(np_type)
    return feeds


def ort_options(threads: int, dims: Mapping[str, int], profile: bool = False, folder: str | None = None):
    """Session options for a model run: :func:`onnxroof.calibrate.session_options` with the bound symbolic
    dims fixed (``add_free_dimension_override_by_name``), and the profile / optimized model written to
    ``folder`` when given."""
    from onnxroof.calibrate import session_options

    opts = session_options(threads, profile=profile)
    for name, value in dims.items():
        opts.add_free_dimension_override_by_name(name, int(value))
    if folder is not None:
        opts.optimized_model_filepath = os.path.join(folder, "optimized.onnx")
        opts.profile_file_prefix = os.path.join(folder, "profile")
    return opts


class WallTimer:
    """An unprofiled session of a model, timed end to end on demand (``InferenceSession.run`` wall time)."""

    def __init__(
        self, model_path: str | os.PathLike[str], feeds: Mapping[str, np.ndarray], dims: Mapping[str, int], threads: int
    ) -> None:
        import onnxruntime as ort

        try:
            self._session = ort.InferenceSession(
                str(model_path), ort_options(threads, dims), providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise OnnxroofError(f"{model_path}: onnxruntime cannot load it: {exc}") from None
        self._feeds = dict(feeds)

    def measure(self, budget_s: float, min_runs: int = 5) -> list[float]:
        """Run times (seconds) of runs taken over about ``budget_s`` (after one warm-up run)."""
        from onnxroof.calibrate import run_blocks

        (blocks,) = run_blocks([lambda: self._session.run(None, self._feeds)], budget_s, min_runs, block_s=0.05)
        return [t for block in blocks for t in block]


def run_onnxruntime(
    model_path: str | os.PathLike[str],
    feeds: Mapping[str, np.ndarray],
    dims: Mapping[str, int],
    threads: int,
    profiled_runs: int = 20,
    wall_budget_s: float = 1.0,
    profile_budget_s: float = 3.0,
) -> OrtRun:
    """Profile up to ``profiled_runs`` runs after 3 warm-up runs (fewer when they would take longer than
    ``profile_budget_s``, but at least 3), then time unprofiled runs for ``wall_budget_s``."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="onnxroof-profile-") as folder:
        try:
            session = ort.InferenceSession(
                str(model_path), ort_options(threads, dims, True, folder), providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise OnnxroofError(f"{model_path}: onnxruntime cannot load it: {exc}") from None
        feeds = dict(feeds)
        warmup = 3
        started = time.perf_counter()
        for _ in range(warmup):
            session.run(None, feeds)
        per_run = (time.perf_counter() - started) / warmup
        profiled_runs = max(1, min(profiled_runs, max(3, int(profile_budget_s / max(per_run, 1e-6)))))
        for _ in range(profiled_runs):
            session.run(None, feeds)
        events = json.loads(Path(session.end_profiling()).read_text(encoding="utf-8"))
        optimized = onnx.load(os.path.join(folder, "optimized.onnx"), load_external_data=False)
    overhead = profiler_overhead(threads)
    node_times, node_types = _node_times(events, skip_runs=warmup, overhead_s=overhead)
    times = np.array(WallTimer(model_path, feeds, dims, threads).measure(wall_budget_s))
    return OrtRun(
        node_times=node_times,
        node_types=node_types,
        wall_s=float(np.median(times)),
        wall_low_s=float(np.percentile(times, 10)),
        wall_high_s=float(np.percentile(times, 90)),
        wall_runs=len(times),
        profiled_runs=profiled_runs,
        optimized=optimized,
        threads=threads,
        dims_fixed=dict(dims),
        profiler_overhead_s=overhead,
    )


def profiler_overhead(threads: int, chain: int = 64, budget_s: float = 0.25) -> float:
    """Seconds onnxruntime's profiler adds to each node's ``kernel_time`` event: the mean profiled event time
    of a chain of tiny ``Neg`` ops (+0.5 µs truncation) less their unprofiled time per op (slope between
    chains of 1 and 1 + ``chain``)."""
    import onnxruntime as ort

    from onnxroof.calibrate import run_blocks, session_options, tiny_probe

    probe = tiny_probe()
    feeds = probe.feeds(np.random.default_rng(0))
    longer = probe.build(1 + chain).SerializeToString()
    with tempfile.TemporaryDirectory(prefix="onnxroof-profile-") as folder:
        options = session_options(threads, profile=True)
        options.profile_file_prefix = os.path.join(folder, "overhead")
        session = ort.InferenceSession(longer, options, providers=["CPUExecutionProvider"])
        for _ in range(23):
            session.run(None, feeds)
        events = json.loads(Path(session.end_profiling()).read_text(encoding="utf-8"))
    times, _ = _node_times(events, skip_runs=3, overhead_s=0.0)
    profiled = float(np.mean(list(times.values())))
    one = ort.InferenceSession(
        probe.build(1).SerializeToString(), session_options(threads), providers=["CPUExecutionProvider"]
    )
    many = ort.InferenceSession(longer, session_options(threads), providers=["CPUExecutionProvider"])
    blocks_1, blocks_k = run_blocks(
        [lambda: one.run(None, feeds), lambda: many.run(None, feeds)], budget_s, min_runs=20
    )
    t1 = float(np.median([t for b in blocks_1 for t in b]))
    tk = float(np.median([t for b in blocks_k for t in b]))
    return max(profiled - max((tk - t1) / chain, 0.0), 0.0)


def _node_times(
    events: list[dict[str, Any]], skip_runs: int, overhead_s: float
) -> tuple[dict[str, float], dict[str, str]]:
    runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name") == "model_run")[skip_runs:]
    if not runs:
        raise OnnxroofError("onnxruntime's profile holds no runs")
    starts = np.array([start for start, _ in runs])
    per_run: dict[str, np.ndarray] = {}
    types: dict[str, str] = {}
    suffix = "_kernel_time"
    for event in events:
        if event.get("cat") != "Node" or not event.get("name", "").endswith(suffix):
            continue
        run = int(np.searchsorted(starts, event["ts"], side="right")) - 1
        if run < 0 or event["ts"] > runs[run][1]:
            continue  # a warm-up run
        name = event["name"][: -len(suffix)]
        times = per_run.setdefault(name, np.zeros(len(runs)))
        times[run] += max(event["dur"] * 1e-6 + PROFILER_TRUNCATION_S - overhead_s, _FLOOR_S)
        types.setdefault(name, str(event.get("args", {}).get("op_name", "")))
    result = {}
    for name, times in per_run.items():
        keep = max(1, math.ceil(len(times) * (1 - TRIM_SHARE)))
        result[name] = float(np.mean(np.sort(times)[:keep]))
    return result, types


# -------------------------------------------------------------------------------------------- comparing


@dataclass(frozen=True)
class Row:
    """Kernels and onnxruntime nodes that run the same original nodes: one predicted vs measured comparison."""

    kernels: tuple[str, ...]
    patterns: tuple[str, ...]
    op_types: tuple[str, ...]
    ort_nodes: tuple[str, ...]
    ort_op_types: tuple[str, ...]
    op_class: str
    flops: float
    bytes: float
    intensity: float
    predicted_s: float
    predicted_overhead_s: float
    bound: str
    level: str
    efficiency: float
    measured_s: float
    explanation: str = ""

    @property
    def ratio(self) -> float:
        """measured ÷ predicted (above 1: slower than predicted)."""
        return self.measured_s / self.predicted_s if self.predicted_s > 0 else math.inf

    @property
    def achieved_flops(self) -> float:
        return self.flops / self.measured_s if self.measured_s > 0 else 0.0

    @property
    def achieved_bandwidth(self) -> float:
        return self.bytes / self.measured_s if self.measured_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernels": list(self.kernels),
            "patterns": list(self.patterns),
            "op_types": list(self.op_types),
            "ort_nodes": list(self.ort_nodes),
            "ort_op_types": list(self.ort_op_types),
            "op_class": self.op_class,
            "flops": self.flops,
            "bytes": self.bytes,
            "intensity": self.intensity,
            "predicted_s": self.predicted_s,
            "predicted_overhead_s": self.predicted_overhead_s,
            "bound": self.bound,
            "memory_level": self.level,
            "efficiency": self.efficiency,
            "measured_s": self.measured_s,
            "ratio": self.ratio,
            "achieved_flops": self.achieved_flops,
            "achieved_bandwidth": self.achieved_bandwidth,
            "explanation": self.explanation,
        }


@dataclass(frozen=True)
class Unmatched:
    name: str
    op_type: str
    seconds: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "op_type": self.op_type, "seconds": self.seconds, "reason": self.reason}


@dataclass(frozen=True)
class ProfileResult:
    """onnxroof's prediction for one model held against onnxruntime's measurement."""

    model: str
    platform: str
    platform_path: str
    measured_platform: bool
    fusion_profile: str
    dims: Mapping[str, int]
    threads: int
    onnxruntime: str
    predicted_s: float  # Σ kernels + per-run overhead
    predicted_kernels_s: float
    run_overhead_s: float
    measured_s: float  # median wall time, profiling off
    measured_low_s: float
    measured_high_s: float
    wall_runs: int
    profiled_runs: int
    measured_kernels_s: float  # Σ profiled node times
    rows: tuple[Row, ...]
    unmatched_ort: tuple[Unmatched, ...]
    unmeasured_kernels: tuple[Unmatched, ...]
    spearman: float
    factors: Mapping[str, Any]
    peak_flops: float
    bandwidth: float
    cache_levels: tuple[tuple[float, float], ...]
    variants: Mapping[str, float] = field(default_factory=dict)
    """End-to-end predictions with fewer factors, for comparison: ``roofline`` (DRAM bandwidth only, no
    derating), ``roofline+cache`` (measured cache levels), ``roofline+cache+efficiency`` (= predicted_s);
    each includes the per-kernel and per-run overheads."""
    warnings: tuple[str, ...] = ()

    @property
    def ratio(self) -> float:
        """measured ÷ predicted, end to end."""
        return self.measured_s / self.predicted_s if self.predicted_s > 0 else math.inf

    @property
    def error(self) -> float:
        """|predicted − measured| ÷ measured, end to end."""
        return abs(self.predicted_s - self.measured_s) / self.measured_s if self.measured_s > 0 else math.inf

    def misses(self, count: int = 5) -> tuple[Row, ...]:
        """The rows whose prediction is off by the most time, largest first."""
        ranked = sorted(self.rows, key=lambda r: -abs(r.measured_s - r.predicted_s))
        return tuple(ranked[:count])

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (SI units; infinite or undefined numbers as null)."""
        return _json_ready(self._document())

    def _document(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "platform": {"name": self.platform, "path": self.platform_path, "measured": self.measured_platform},
            "fusion_profile": self.fusion_profile,
            "dims": dict(self.dims),
            "threads": self.threads,
            "onnxruntime": self.onnxruntime,
            "end_to_end": {
                "predicted_s": self.predicted_s,
                "predicted_kernels_s": self.predicted_kernels_s,
                "run_overhead_s": self.run_overhead_s,
                "measured_s": self.measured_s,
                "measured_p10_s": self.measured_low_s,
                "measured_p90_s": self.measured_high_s,
                "wall_runs": self.wall_runs,
                "profiled_runs": self.profiled_runs,
                "measured_kernels_s": self.measured_kernels_s,
                "ratio": self.ratio,
                "error": self.error,
                "variants": dict(self.variants),
            },
            "spearman": self.spearman,
            "factors": dict(self.factors),
            "roofline": {
                "peak_flops": self.peak_flops,
                "dram_bandwidth": self.bandwidth,
                "cache_levels": [{"size_bytes": s, "bandwidth": b} for s, b in self.cache_levels],
                "points": [
                    {
                        "kernels": list(r.kernels),
                        "intensity": r.intensity,
                        "predicted_flops": r.flops / r.predicted_s if r.predicted_s > 0 else 0.0,
                        "achieved_flops": r.achieved_flops,
                    }
                    for r in self.rows
                ],
            },
            "rows": [r.to_dict() for r in self.rows],
            "largest_misses": [
                {"kernels": list(r.kernels), "explanation": r.explanation} for r in self.misses() if r.explanation
            ],
            "unmatched_ort_nodes": [u.to_dict() for u in self.unmatched_ort],
            "unmeasured_kernels": [u.to_dict() for u in self.unmeasured_kernels],
            "warnings": list(self.warnings),
        }


def _json_ready(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {k: _json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_ready(v) for v in value]
    return value


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation of two equally long sequences (average ranks for ties); NaN below 3 pairs
    or when either side is constant."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError("spearman: sequences differ in length")
    if x.size < 3:
        return math.nan
    rx, ry = _ranks(x), _ranks(y)
    if np.std(rx) == 0 or np.std(ry) == 0:
        return math.nan
    return float(np.corrcoef(rx, ry)[0, 1])


def _ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="mergesort")
    ranks = np.empty(len(values), dtype=float)
    ranks[order] = np.arange(1, len(values) + 1, dtype=float)
    for value in np.unique(values):  # ties share their average rank
        tied = values == value
        if tied.sum() > 1:
            ranks[tied] = ranks[tied].mean()
    return ranks


def cold_weight_share(analysis, platform) -> float:
    """Bytes per weight parameter that come from DRAM on every run: the weights' item size when the model's
    weights and peak activations together exceed the largest measured cache level (they are evicted between
    runs), else 0 (they stay warm)."""
    totals = analysis.totals
    if not platform.cache_levels or totals.params <= 0:
        return 0.0
    footprint = totals.weight_bytes + totals.peak_activation_bytes
    return totals.weight_bytes / totals.params if footprint > platform.cache_levels[-1].size else 0.0


def kernel_point(
    kernel,
    nodes_by_id: Mapping[str, Any],
    platform,
    original: onnx.GraphProto | None = None,
    cold_per_param: float = 0.0,
):
    """``(op class, RooflinePoint)`` of a kernel re-placed on ``platform``'s roofline with its op class
    (:func:`onnxroof.roofline.kernel_op_class`: efficiency derating) and the measured cache levels: what
    :func:`onnxroof.roofline.classify` gives once the analysis passes the op class (``nodes_by_id``: the
    analysis' nodes by id)."""
    from onnxroof.cost import Cost
    from onnxroof.roofline import classify, kernel_op_class

    anchor = nodes_by_id.get(kernel.node_ids[0])
    attrs = None
    channels = None
    if anchor is not None and original is not None:
        index = int(anchor.id.split(":", 1)[0])
        if 0 <= index < len(original.node):
            attrs = {a.name: onnx.helper.get_attribute_value(a) for a in original.node[index].attribute}
        shapes = anchor.input_shapes
        if shapes and shapes[0] and len(shapes[0]) > 1:
            channels = shapes[0][1]
    cls = kernel_op_class(kernel.op_types, kernel.pattern, anchor.domain if anchor else "", attrs, channels)
    launches = round(kernel.t_overhead_s / platform.launch_overhead_s) if platform.launch_overhead_s > 0 else 1
    cost = Cost(kernel.flops, kernel.macs, kernel.bytes_read, kernel.bytes_written, kernel.params)
    cold = kernel.params * cold_per_param
    return cls, classify(cost, platform, kernel.precision, launches=max(launches, 1), op_class=cls, cold_bytes=cold)


def profile(
    model: str | os.PathLike[str],
    platform: str | os.PathLike[str] | Any,
    dims: Mapping[str, object] | None = None,
    threads: int | None = None,
    profiled_runs: int = 20,
    wall_budget_s: float = 1.0,
    fusion: str | None = None,
) -> ProfileResult:
    """Run ``model`` in onnxruntime and compare onnxroof's prediction on ``platform`` with what it measured.

    ``platform``: a :class:`~onnxroof.platform.Platform`, a bundled name or a TOML path (a file written by
    ``onnxroof calibrate`` is what makes the comparison meaningful); ``dims`` binds symbolic input dims (also
    fixed in the onnxruntime session); ``threads`` defaults to the platform's measured thread count, else every
    CPU; ``profiled_runs`` runs are profiled (fewer if they would take over 3 s) and unprofiled runs are timed
    for ``wall_budget_s``; ``fusion`` overrides the platform's fusion profile.
    """
    import onnxruntime as ort

    from onnxroof.analysis import analyze
    from onnxroof.calibrate import default_threads
    from onnxroof.ir import node_id
    from onnxroof.platform import Platform, load_platform

    target = platform if isinstance(platform, Platform) else load_platform(platform)
    path = Path(model)
    analysis = analyze(path, platform=target, dims=dims, fusion=fusion)
    bound = {k: int(v) for k, v in analysis.model.dims.items()}
    chosen_threads = threads or _platform_threads(target) or default_threads()
    feeds = random_inputs(analysis.model.inputs)
    measured = run_onnxruntime(path, feeds, bound, chosen_threads, profiled_runs, wall_budget_s)
    original = onnx.load(str(path), load_external_data=False).graph
    mapping = map_optimized_nodes(original, measured.optimized.graph)

    ids = [node_id(i, n) for i, n in enumerate(original.node)]
    kernel_of: dict[str, str] = {}
    for kernel in analysis.kernels:
        for nid in kernel.node_ids:
            kernel_of[nid] = kernel.id
    costed = {n.id for n in analysis.nodes if n.state == "costed"}
    warnings: list[str] = []
    missing_ids = set(kernel_of) - set(ids)
    if missing_ids:
        warnings.append(f"{len(missing_ids)} kernel node id(s) not found in the model file (first: {min(missing_ids)})")

    # measured time per optimized node (subgraph nodes count towards their control-flow parent)
    times: dict[str, float] = defaultdict(float)
    opt_by_name: dict[str, list[OptimizedNode]] = defaultdict(list)
    for node in mapping.nodes:
        opt_by_name[node.name].append(node)
    unmatched: list[Unmatched] = []
    for name, seconds in measured.node_times.items():
        if name in opt_by_name:
            times[name] += seconds
        elif name in mapping.subgraph_parent:
            times[mapping.subgraph_parent[name]] += seconds
        else:
            unmatched.append(Unmatched(name, measured.node_types.get(name, ""), seconds, "not in the optimized graph"))

    # union-find over kernels and optimized node names
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        parent.setdefault(key, key)
        while parent[key] != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    def union(a: str, b: str) -> None:
        parent[find(a)] = find(b)

    node_kernels: dict[str, set[str]] = defaultdict(set)
    for name, group in opt_by_name.items():
        for node in group:
            for index in node.original:
                kernel = kernel_of.get(ids[index])
                if kernel is not None:
                    node_kernels[name].add(kernel)
    for name, kernels in node_kernels.items():
        for kernel in kernels:
            union(f"ort:{name}", f"k:{kernel}")
    for name, group in opt_by_name.items():
        if name in node_kernels:
            continue
        seconds = times.get(name, 0.0)
        if name not in measured.node_times and seconds == 0.0:
            continue  # never ran (or ran inside nothing we profile): nothing to report
        node = group[0]
        originals = [i for n in group for i in n.original]
        if not originals:
            reason = (
                "inserted by onnxruntime (layout conversion); no original node"
                if node.op_type in _INSERTED_TYPES
                else "inserted by onnxruntime (e.g. a reshape around a fused Gemm); no original node"
            )
        else:
            kinds = sorted({original.node[i].op_type for i in originals})
            uncosted = [ids[i] for i in originals if ids[i] not in costed]
            reason = (
                f"runs original node(s) onnxroof costs at zero ({', '.join(kinds)}: views, shapes or folded constants)"
                if len(uncosted) == len(originals)
                else f"runs original node(s) {', '.join(kinds)} that belong to no kernel"
            )
        unmatched.append(Unmatched(name, node.op_type, seconds, reason))

    kernels_by_id = {k.id: k for k in analysis.kernels}
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for name in node_kernels:
        root = find(f"ort:{name}")
        groups.setdefault(root, ([], []))[1].append(name)
    for kernel in analysis.kernels:
        key = f"k:{kernel.id}"
        if key in parent:
            groups.setdefault(find(key), ([], []))[0].append(kernel.id)

    nodes_by_id = {n.id: n for n in analysis.nodes}
    cold_per_param = cold_weight_share(analysis, target)
    points = {k.id: kernel_point(k, nodes_by_id, target, original, cold_per_param) for k in analysis.kernels}
    rows: list[Row] = []
    for kernel_ids, names in groups.values():
        members = [kernels_by_id[k] for k in sorted(kernel_ids, key=_kernel_order)]
        if not members:
            continue
        cls, _ = points[members[0].id]
        predicted = sum(points[k.id][1].latency for k in members)
        overhead = sum(points[k.id][1].t_overhead for k in members)
        dominant = max(members, key=lambda k: points[k.id][1].latency)
        flops = sum(k.flops for k in members)
        moved = sum(k.bytes for k in members)
        intensity = flops / moved if moved > 0 else (math.inf if flops > 0 else 0.0)
        rows.append(
            Row(
                kernels=tuple(k.id for k in members),
                patterns=tuple(k.pattern for k in members),
                op_types=tuple(t for k in members for t in k.op_types),
                ort_nodes=tuple(sorted(names)),
                ort_op_types=tuple(opt_by_name[n][0].op_type for n in sorted(names)),
                op_class=cls,
                flops=flops,
                bytes=moved,
                intensity=intensity,
                predicted_s=predicted,
                predicted_overhead_s=overhead,
                bound=points[dominant.id][1].bound,
                level=points[dominant.id][1].level,
                efficiency=points[dominant.id][1].efficiency,
                measured_s=sum(times.get(n, 0.0) for n in names),
            )
        )
    rows.sort(key=lambda r: _kernel_order(r.kernels[0]))
    rows = [_explained(r, target) for r in rows]
    in_rows = {k for r in rows for k in r.kernels}
    unmeasured = tuple(
        Unmatched(
            k.id,
            "+".join(k.op_types),
            points[k.id][1].latency,
            "no onnxruntime node runs it (folded or removed by onnxruntime's optimizer)",
        )
        for k in analysis.kernels
        if k.id not in in_rows
    )

    predicted_kernels = sum(p.latency for _, p in points.values())
    variants = _variants(analysis.kernels, target, points, cold_per_param)
    fp32 = target.peak("fp32") if "fp32" in target.peak_flops else max(target.peak_flops.values())
    factors = {
        "launch_overhead_s": target.launch_overhead_s,
        "run_overhead_s": target.run_overhead_s,
        "efficiency": dict(target.efficiency),
        "cache_levels": [
            {"name": f"L{i}", "size_bytes": lv.size, "bandwidth": lv.bandwidth}
            for i, lv in enumerate(target.cache_levels, start=1)
        ],
        "cold_weight_bytes_per_param": cold_per_param,
        "profiler_truncation_correction_s": PROFILER_TRUNCATION_S,
        "profiler_overhead_per_event_s": measured.profiler_overhead_s,
        "trimmed_share": TRIM_SHARE,
        "dims_fixed_in_session": dict(measured.dims_fixed),
    }
    return ProfileResult(
        model=str(path),
        platform=target.name,
        platform_path=target.path,
        measured_platform=target.measured,
        fusion_profile=analysis.fusion_profile,
        dims=bound,
        threads=chosen_threads,
        onnxruntime=ort.__version__,
        predicted_s=predicted_kernels + target.run_overhead_s,
        predicted_kernels_s=predicted_kernels,
        run_overhead_s=target.run_overhead_s,
        measured_s=measured.wall_s,
        measured_low_s=measured.wall_low_s,
        measured_high_s=measured.wall_high_s,
        wall_runs=measured.wall_runs,
        profiled_runs=measured.profiled_runs,
        measured_kernels_s=sum(measured.node_times.values()),
        rows=tuple(rows),
        unmatched_ort=tuple(sorted(unmatched, key=lambda u: -u.seconds)),
        unmeasured_kernels=unmeasured,
        spearman=spearman([r.predicted_s for r in rows], [r.measured_s for r in rows]),
        factors=factors,
        peak_flops=fp32,
        bandwidth=target.dram_bandwidth,
        cache_levels=tuple((lv.size, lv.bandwidth) for lv in target.cache_levels),
        variants=variants,
        warnings=tuple(warnings + list(analysis.warnings)),
    )


def _variants(kernels, platform, points, cold_per_param: float) -> dict[str, float]:
    """End-to-end predictions with the factors added one at a time (see :attr:`ProfileResult.variants`)."""
    from onnxroof.cost import Cost
    from onnxroof.roofline import classify

    totals = {"roofline": 0.0, "roofline+cache": 0.0}
    for kernel in kernels:
        cost = Cost(kernel.flops, kernel.macs, kernel.bytes_read, kernel.bytes_written, kernel.params)
        launches = max(1, round(kernel.t_overhead_s / platform.launch_overhead_s)) if platform.launch_overhead_s else 1
        plain = classify(cost, platform, kernel.precision, launches=launches, hierarchy=False)
        cached = classify(
            cost, platform, kernel.precision, launches=launches, cold_bytes=kernel.params * cold_per_param
        )
        totals["roofline"] += plain.latency
        totals["roofline+cache"] += cached.latency
    totals["roofline+cache+efficiency"] = sum(p.latency for _, p in points.values())
    return {name: value + platform.run_overhead_s for name, value in totals.items()}


def _platform_threads(platform) -> int | None:
    value = platform.measurement.get("threads") if platform.measurement else None
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 1 else None


def _kernel_order(kernel_id: str) -> tuple[int, str]:
    digits = kernel_id.lstrip("k")
    return (int(digits), kernel_id) if digits.isdigit() else (1 << 30, kernel_id)


def _explained(row: Row, platform) -> Row:
    from dataclasses import replace

    return replace(row, explanation=explain(row, platform))


def explain(row: Row, platform) -> str:
    """One sentence on why a row's measurement differs from its prediction (empty when within 25 %)."""
    ratio = row.ratio
    if row.measured_s <= 0 or not math.isfinite(ratio) or 0.8 <= ratio <= 1.25:
        return ""
    factor = f"{ratio:.1f}× slower" if ratio > 1 else f"{1 / ratio:.1f}× faster"
    where = f"predicted {row.bound}-bound at {_fmt(row.intensity)} FLOP/B"
    fused = len(row.kernels) > 1 or len(row.ort_nodes) > 1
    roof_s = row.predicted_s - row.predicted_overhead_s
    if ratio > 1:
        if row.measured_s < 20e-6 and row.predicted_overhead_s + 2e-6 >= roof_s:
            return (
                f"{where} but measured {factor}: a small kernel ({_us(row.measured_s)}) dominated by dispatch "
                f"overhead, not by its {_fmt(row.flops, 'FLOP')} or {_fmt(row.bytes, 'B')}"
            )
        if row.bound == "compute":
            share = row.achieved_flops / (row.efficiency * _peak_for(platform)) if row.efficiency else 0.0
            return (
                f"{where} but measured {factor}: reached {_fmt(row.achieved_flops, 'FLOP/s')}, {share:.0%} of the "
                f"derated peak — {row.op_class} kernels of this shape use the vector units poorly"
            )
        return (
            f"{where} but measured {factor}: moved {_fmt(row.bytes, 'B')} at {_fmt(row.achieved_bandwidth, 'B/s')} "
            f"against the {row.level} roof — more traffic or less streaming than the model assumes"
            + (" (onnxruntime ran these ops separately)" if len(row.ort_nodes) > 1 else "")
        )
    if fused and len(row.kernels) > len(row.ort_nodes):
        return (
            f"{where} but measured {factor}: onnxruntime fused {len(row.kernels)} onnxroof kernels into "
            f"{len(row.ort_nodes)} node(s), saving their launches and intermediate traffic"
        )
    if row.bound == "memory":
        return (
            f"{where} but measured {factor}: its {_fmt(row.bytes, 'B')} working set stayed in a faster cache than "
            f"the {row.level} roof assumed"
        )
    return (
        f"{where} but measured {factor}: reached {_fmt(row.achieved_flops, 'FLOP/s')}, above the derated peak — "
        f"the {row.op_class} efficiency figure is too pessimistic for this shape"
    )


def _peak_for(platform) -> float:
    return platform.peak("fp32") if "fp32" in platform.peak_flops else max(platform.peak_flops.values())


def _fmt(value: float, unit: str = "") -> str:
    from onnxroof.report.units import si

    return si(value, unit)


def _us(seconds: float) -> str:
    from onnxroof.report.units import seconds as fmt

    return fmt(seconds)
