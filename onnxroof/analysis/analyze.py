"""The analysis: every node costed, placed on the roofline, and summed — as one immutable value.

``analyze(model, platform, dims)`` is the public entry point; the CLI and every renderer consume the
:class:`Analysis` it returns. It composes the stages of :mod:`onnxroof.analysis.stages` (read → bind → cost → fuse)
with :func:`place`, the placement stage: a platform and a time model turn the kernels' and nodes' columns into
figures. Numbers stay numbers in SI units (FLOPs, bytes, seconds); formatting happens only in renderers.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from dataclasses import field
from operator import attrgetter
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np
import onnx

from onnxroof.analysis.results import ModelSummary, NodeResult, NodeTable, Rows, TableLevel
from onnxroof.analysis.runtime_use import RuntimeUse, apply_runtime, node_classes
from onnxroof.analysis.stages import (
    CostedModel,
    FusedModel,
    bind,
    cost,
    fallback_warnings,
    fuse,
    raise_if_incomplete,
)
from onnxroof.analysis.totals import OpTypeRow, Totals, build_totals, op_type_rows
from onnxroof.analysis.whatif import WhatIf, whatif_warnings
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.gemm import array_gemm
from onnxroof.core.index import GraphIndex
from onnxroof.core.ir import ModelIR, OpView
from onnxroof.core.kernel import Miss
from onnxroof.core.states import NodeState
from onnxroof.load.reader import ModelFile
from onnxroof.platform.lookup import load_platform
from onnxroof.platform.model import Platform
from onnxroof.roofline.gpu import describe_time_model, time_model_for
from onnxroof.roofline.kernels import KernelResult, KernelsByNode, KernelTable, place_kernels
from onnxroof.roofline.pe_array import utilization
from onnxroof.roofline.place import ROOFLINE, Floats, Objects, TimeModel, Work, floats
from onnxroof.roofline.place import place as place_rows
from onnxroof.roofline.precision import resolve_precision
from onnxroof.runtime import Runtime, runtime_for

if TYPE_CHECKING:
    import networkx as nx

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Analysis", "ModelSummary", "NodeResult", "analyze", "place"]


@frozen_dataclass(eq=False)
class Analysis:
    """Everything onnxroof knows about one model on one platform. Immutable."""

    model: ModelSummary
    platform: Platform
    precision_override: str | None
    nodes: NodeTable
    """Every node as columns; indexing or iterating gives :class:`NodeResult` views."""
    totals: Totals
    op_types: tuple[OpTypeRow, ...]
    unsupported: Mapping[str, tuple[str, ...]]  # "domain::op_type" or op_type -> node ids
    warnings: tuple[str, ...]
    kernels: KernelTable
    """The kernels the runtime launches, as columns; indexing or iterating gives :class:`KernelResult` views."""
    fusion_profile: str = "none"
    fusion_misses: tuple[Miss, ...] = ()
    ir: ModelIR | None = field(compare=False, repr=False, default=None)
    """The model's IR (ops, tensors), None when there is none."""
    whatif: WhatIf = field(default_factory=WhatIf)
    """The what-if knobs the model was costed with (precision, densities, compress_mem, skip_compute)."""

    index: GraphIndex | None = field(compare=False, repr=False, default=None)
    """The IR's graph index (producers, consumers, view roots), None when there is no graph."""
    time_model: str = ROOFLINE.name
    """The time model that turned kernels into time (:mod:`onnxroof.roofline.place`)."""
    time_model_info: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), compare=False)
    """What the time model assumed: its name, the launch mode, launch figures and constants with their sources
    (:func:`~onnxroof.roofline.gpu.describe_time_model`)."""
    runtime: RuntimeUse | None = field(default=None, compare=False)
    """The runtime the kernels ran under and what it changed (:class:`~onnxroof.analysis.runtime_use.RuntimeUse`):
    launch mode and figures, KV-cache writes, efficiency factors; None for an analysis built without one."""

    @property
    def graph(self) -> nx.DiGraph[str] | None:
        """The op DAG (:attr:`onnxroof.core.ir.ModelIR.graph`, built on first use), None without an IR."""
        return self.ir.graph if self.ir is not None else None

    def op(self, node_id: str) -> OpView | None:
        """The node's :class:`~onnxroof.core.ir.OpView` (attributes, tensors), None without an IR or such a node."""
        return self.ir.op(node_id) if self.ir is not None else None

    @functools.cached_property
    def kernel_by_node(self) -> Mapping[str, KernelResult]:
        """Node id -> the kernel it runs in (nodes that do not run are absent; :class:`~onnxroof.roofline.kernels.
        KernelsByNode`: the lookup built once, a kernel's view made when looked up)."""
        return KernelsByNode(self.kernels)

    def kernel_of(self, node_id: str) -> KernelResult | None:
        """The kernel a node runs in (None for nodes that do not run)."""
        return self.kernel_by_node.get(node_id)

    @property
    def main_precision(self) -> str:
        """The precision the most predicted time computes at: ``argmax_p Σ_{k : k.precision = p} k.latency_s`` over
        the kernels, a tie going to the greater name; with no kernel, the precision override, else the platform's
        first precision."""
        time: dict[str, float] = {}
        kernels = self.kernels
        for precision, latency in zip(kernels.precision.tolist(), kernels.figures.latency_s.tolist(), strict=True):
            time[precision] = time.get(precision, 0.0) + latency
        if time:
            return max(time, key=lambda p: (time[p], p))
        return self.precision_override or self.platform.precisions()[0]

    def top_kernels(self, count: int) -> tuple[KernelResult, ...]:
        """The ``count`` kernels with the most predicted time, the slowest first (ties by id), ranked on the
        columns: a view is made for the kernels returned only."""
        kernels = self.kernels
        latency, ids = kernels.figures.latency_s.tolist(), kernels.id
        ranked = sorted(range(len(ids)), key=lambda row: (-latency[row], ids[row]))
        return tuple(kernels[row] for row in ranked[:count])

    def to_dataframe(self, level: str = "nodes") -> pd.DataFrame:
        """Results as a pandas DataFrame in SI units: ``level="nodes"`` one row per node, ``"kernels"`` one row
        per kernel the runtime launches (their ``latency_s`` sum to ``totals.latency_s``); a
        :class:`~onnxroof.analysis.select.TableLevel` or its value."""
        import pandas as pd

        try:
            chosen = TableLevel(level)
        except ValueError:
            raise ValueError(f"level: {level!r} is not one of {', '.join(TableLevel)}") from None
        table = self.kernels if chosen is TableLevel.kernels else self.nodes
        return pd.DataFrame(list(table.records()))

    def top_nodes(self, count: int) -> tuple[NodeResult, ...]:
        ranked = sorted((n for n in self.nodes if n.latency_s > 0), key=lambda n: (-n.latency_s, n.id))
        return tuple(ranked[:count])


# ---------------------------------------------------------------------------------------------- stages


def analyze(
    model: str | os.PathLike[str] | onnx.ModelProto | ModelFile,
    platform: str | os.PathLike[str] | Platform = "xavier",
    dims: Mapping[str, object] | None = None,
    *,
    whatif: WhatIf | None = None,
    strict: bool = False,
    fusion: str | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    time_model: TimeModel | None = None,
    runtime: str | os.PathLike[str] | Runtime | None = None,
) -> Analysis:
    """Cost every node of ``model`` and place it on ``platform``'s roofline: read → bind → cost → fuse → place.

    ``dims`` binds symbolic input dims (``{"batch": 1}``), ``shapes`` whole inputs (``{"x": (1, 3, 48, 192)}``;
    a conflict between the two raises :class:`~onnxroof.core.errors.DimsError`). ``whatif`` holds the what-if
    knobs (:class:`~onnxroof.analysis.whatif.WhatIf`: a precision to re-cost the model in, densities, per-layer
    densities, ``compress_mem``, ``skip_compute``, ``peak`` for the datasheet roofs instead of the sustained
    ones). ``strict`` raises :class:`~onnxroof.core.errors.StrictError` when any node is unsupported or has no
    static shape; ``runtime`` names the runtime profile (a bundled name, a TOML path or a
    :class:`~onnxroof.runtime.Runtime`; default: the platform's, :func:`~onnxroof.runtime.runtime_for`);
    ``fusion`` overrides the runtime's fusion profile; ``time_model`` turns each kernel into time (None: the
    what-if knobs' ``time_model``, else the platform's default, :func:`~onnxroof.roofline.gpu.time_model_for`:
    the ``gpu`` model on GPUs, the roofline bound elsewhere).
    """
    plan = whatif or WhatIf()
    target = platform if isinstance(platform, Platform) else load_platform(platform)
    if plan.precision is not None:
        target.peak(plan.precision)  # raises PlatformError naming what the platform has
    chosen = runtime_for(target, runtime, fusion)
    bound = bind(model, dims, shapes, plan)
    costed = cost(bound, target)
    if strict:
        raise_if_incomplete(costed)
    return place(fuse(costed, fusion or chosen.fusion_profile), target, time_model, chosen)


def place(
    fused: FusedModel,
    platform: Platform,
    time_model: TimeModel | None = None,
    runtime: str | os.PathLike[str] | Runtime | None = None,
) -> Analysis:
    """The placement stage: ``fused``'s nodes and kernels on ``platform`` under ``runtime`` through
    ``time_model``, summed into an :class:`Analysis`.

    ``runtime`` (None: the platform's default, or the runtime ``fused``'s fusion profile names,
    :func:`~onnxroof.runtime.runtime_for`) sets the launch cost (each launch ``launch_s =
    runtime.kernel_launch_s(platform.launch_overhead_s)``, the run once ``runtime.run_launch_s(...)``), writes
    the KV cache in place when it (or a ``genai_config.json`` beside the model) says so, and multiplies each
    row's efficiency by its kernel-class factor (:mod:`onnxroof.analysis.runtime_use`).

    A node computes at the precision it asks for resolved through the platform's fallback chain; a kernel at its
    anchor's, except that a QDQ kernel computes at the platform's int8 (through the same chain). ``platform``'s
    sustained roofs are used unless the what-if knobs ask for ``peak``. Weights are read from DRAM on every run
    when weights and peak activations together exceed the platform's largest cache level
    (:func:`cold_weight_bytes`). ``time_model`` None: the what-if knobs' ``time_model``, else the platform's
    default (:func:`~onnxroof.roofline.gpu.time_model_for`)."""
    costed = fused.costed
    bound = costed.bound
    plan = bound.plan
    target = platform.with_peak_roofs(plan.peak)  # sustained roofs unless --peak
    if time_model is None:
        time_model = time_model_for(plan.time_model, target)
    if plan.precision is not None:
        target.peak(plan.precision)
    if costed.sparse is not None and costed.sparse != (target.sparsity, frozenset(target.sparse_peak_flops)):
        raise ValueError(
            f"place(): the model was costed under skip_compute with another platform's sparsity than "
            f"'{target.name}''s; cost it with this platform (cost(bound, platform))"
        )
    chosen = runtime_for(target, runtime, fused.profile)
    fused, use, classes = apply_runtime(fused, target, chosen)
    chosen = use.runtime  # a genai_config.json may have turned on CUDA graphs
    costed = fused.costed
    resolved, fallbacks = fallback_warnings(costed.wanted, target)
    node_class = node_classes(costed) if chosen.efficiency else None
    nodes = _place_nodes(fused, target, resolved, time_model, chosen, node_class)
    kernels = _place_kernels(fused, target, nodes, time_model, chosen, classes)
    graph_launch_s = use.per_run_s
    totals = build_totals(
        nodes, costed.weights, costed.peak, kernels, target, graph_launch_s, bound.stored_weight_bytes
    )
    warnings = list(bound.warnings) + whatif_warnings(plan, target) + fallbacks + list(costed.warnings)
    return Analysis(
        model=bound.summary,
        platform=target,
        precision_override=plan.precision,
        nodes=nodes,
        totals=totals,
        op_types=op_type_rows(nodes, kernels, fused.anchors, totals.latency_s),
        unsupported=costed.unsupported,
        warnings=tuple(warnings),
        kernels=kernels,
        fusion_profile=fused.profile,
        fusion_misses=fused.misses,
        ir=bound.ir,
        whatif=plan,
        index=bound.ir.index,
        time_model=time_model.name,
        time_model_info=MappingProxyType(
            describe_time_model(
                time_model,
                target,
                runtime=use.runtime.name,
                launch_mode=str(use.runtime.launch_mode),
                per_kernel_s=use.per_kernel_s,
                per_run_s=use.per_run_s,
            )
        ),
        runtime=use,
    )


def _place_nodes(
    fused: FusedModel,
    target: Platform,
    resolved: Mapping[str, str],
    model: TimeModel,
    runtime: Runtime,
    classes: Objects | None,
) -> NodeTable:
    """Every node on its own (the unfused view): one row per node of the IR. The nodes that share everything
    placement reads (:func:`shared_rows`) are placed once, their figures given to each of them."""
    costed = fused.costed
    ops = costed.bound.ir.ops
    node_costs = costed.node_costs
    costs = tuple(map(attrgetter("cost"), node_costs))
    placed, inverse = shared_rows(costed, classes)
    at = placed.tolist()
    placed_costs = list(map(costs.__getitem__, at))
    placed_nodes = list(map(node_costs.__getitem__, at))
    rows = len(at)
    precision = np.fromiter(map(resolved.__getitem__, map(costed.wanted.__getitem__, at)), object, rows)
    work = Work(
        flops=np.fromiter(map(attrgetter("flops"), placed_costs), np.float64, rows),
        bytes=np.fromiter(map(attrgetter("bytes"), placed_costs), np.float64, rows),
        precision=precision,
        op_class=np.fromiter(map(costed.op_classes.__getitem__, at), object, rows),
        runs=np.fromiter((c.state == NodeState.COSTED for c in placed_nodes), bool, rows),
        launches=np.fromiter(map(attrgetter("launches"), placed_nodes), np.float64, rows),
        utilization=_node_utilization([ops[i] for i in at], target),
        cold_bytes=np.zeros(rows),
        descriptors=tuple(map(costed.descriptors.__getitem__, at)),
        runtime_class=None if classes is None else classes[placed],
    )
    figures = place_rows(work, target, model, runtime)
    if inverse is None:
        return NodeTable(ops, node_costs, costs, precision, costed.compute_density, figures)
    figures, precision = figures.take(inverse), precision[inverse]
    return NodeTable(ops, node_costs, costs, precision, costed.compute_density, figures, (placed, inverse))


def shared_rows(costed: CostedModel, classes: Objects | None = None) -> tuple[Rows, Rows | None]:
    """The nodes the unfused view places (``placed``, in order) and each node's row among them (``inverse``; None
    when every node is placed).

    Node ``i`` takes the figures of ``f = firsts[i]`` (:attr:`~onnxroof.analysis.stages.CostedModel.firsts`: the
    first node of its cost signature) when it holds the same :class:`~onnxroof.core.node_cost.NodeCost` object
    (a runtime writing the KV cache in place, or ``skip_compute``, gives some nodes their own) and the same
    runtime kernel class (``classes``, when the runtime has efficiency factors): everything else placement reads
    of a node (its precision, op class, descriptor, PE-array utilization) is a function of its signature, and a
    time model's figures of a row are a function of that row alone, so placing ``f`` once places both."""
    rows = len(costed.node_costs)
    if not costed.firsts:
        return np.arange(rows), None
    own = np.arange(rows)
    firsts = np.fromiter(costed.firsts, np.intp, rows)
    ids = np.fromiter(map(id, costed.node_costs), np.int64, rows)
    same = ids == ids[firsts]
    if classes is not None:
        same &= classes == classes[firsts]
    firsts = np.where(same, firsts, own)
    placed = np.flatnonzero(firsts == own)
    if len(placed) == rows:
        return placed, None
    row_of = np.empty(rows, dtype=np.intp)
    row_of[placed] = np.arange(len(placed))
    return placed, row_of[firsts]


def _node_utilization(ops: Sequence[OpView], target: Platform) -> Floats:
    """PE-array utilization of each node (:mod:`onnxroof.roofline.pe_array`); 1 without an array."""
    array = target.array
    if array is None:
        return np.ones(len(ops))
    shapes = [array_gemm(op) for op in ops]
    return floats([1.0 if shape is None else utilization(shape, array) for shape in shapes])


def _place_kernels(
    fused: FusedModel, target: Platform, nodes: NodeTable, model: TimeModel, runtime: Runtime, classes: Objects
) -> KernelTable:
    """Every kernel of the fusion profile: its cost is what crosses its boundary (:mod:`onnxroof.fusion.fuse`)."""
    kernels = fused.kernels
    costs = tuple(kernel.cost for kernel in kernels)
    int8 = resolve_precision(target, "int8") if fused.int8.any() else ""
    anchor_precision = nodes.precision[fused.anchors] if len(kernels) else np.zeros(0, dtype=object)
    precision = np.where(fused.int8, int8, anchor_precision).astype(object)
    array = target.array
    gemms = [d.gemm for d in fused.descriptors]
    usage = [1.0 if array is None or g is None else utilization(g, array) for g in gemms]
    weights, params = fused.costed.weights, sum(n for n, _ in fused.costed.weights.values())
    per_param = cold_weight_bytes(target, sum(b for _, b in weights.values()), params, fused.costed.peak.bytes)
    work = Work(
        flops=floats([c.flops for c in costs]),
        bytes=floats([c.bytes for c in costs]),
        precision=precision,
        op_class=np.asarray([d.op_class for d in fused.descriptors], dtype=object),
        runs=np.ones(len(kernels), dtype=bool),
        launches=fused.launches,
        utilization=floats(usage),
        cold_bytes=floats([c.params * per_param for c in costs]),
        descriptors=fused.descriptors,
        runtime_class=classes,
        pass_bytes=fused.pass_bytes,
    )
    ideal = tuple(kernel.ideal for kernel in kernels)
    figures, ideal_latency = place_kernels(work, ideal, target, model, runtime)
    return KernelTable(
        id=tuple(kernel.id for kernel in kernels),
        patterns=tuple(kernel.patterns for kernel in kernels),
        node_ids=tuple(kernel.node_ids for kernel in kernels),
        op_types=fused.op_types,
        folded_nodes=tuple(kernel.folded_nodes for kernel in kernels),
        layout=tuple(kernel.layout for kernel in kernels),
        precision=precision,
        costs=costs,
        ideal_bytes=tuple(cost.bytes for cost in ideal),
        ideal_latency_s=ideal_latency,
        figures=figures,
    )


def cold_weight_bytes(platform: Platform, weight_bytes: float, params: float, peak_activation_bytes: float) -> float:
    """Bytes per weight element read from DRAM on every run: the weights' item size when weights and peak
    activations together exceed the platform's largest cache (its last measured cache level, else a GPU's L2
    from its ``[gpu]`` table: evicted between runs), else 0. Other platforms stream everything from DRAM anyway
    (0 here, nothing changes). Only time models that place bytes by where they come from read it (the ``gpu``
    model: a decode step's weights stream from DRAM even when one layer's matrix would fit in the L2)."""
    largest = platform.cache_levels[-1].size if platform.cache_levels else platform.gpu.l2_size if platform.gpu else 0
    if largest <= 0 or params <= 0:
        return 0.0
    return weight_bytes / params if weight_bytes + peak_activation_bytes > largest else 0.0
