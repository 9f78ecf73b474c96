"""The analysis: every node costed, placed on the roofline, and summed — as one immutable value.

``analyze(model, platform, dims)`` is the public entry point; the CLI and every renderer consume the
:class:`Analysis` it returns. Numbers stay numbers in SI units (FLOPs, bytes, seconds); formatting happens
only in renderers.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import networkx as nx
import onnx

from onnxroof.analysis.grouping import array_utilization, build_kernels, channels_of, cold_weight_bytes
from onnxroof.analysis.liveness import peak_activation_memory
from onnxroof.analysis.totals import OpTypeRow, Totals, build_totals, op_type_rows
from onnxroof.analysis.whatif import (
    WhatIf,
    compute_density,
    make_restate,
    operand_densities,
    skip_zeros,
    tensor_densities,
    whatif_warnings,
)
from onnxroof.core.cost import merge_weights
from onnxroof.core.errors import StrictError
from onnxroof.core.index import GraphIndex, graph_index
from onnxroof.core.ir import ModelIR, OpView, TensorInfo, build_ir
from onnxroof.core.kernel import Miss
from onnxroof.core.node_cost import NodeCost
from onnxroof.core.states import NodeState, Role, RuleKind
from onnxroof.costing.node import cost_node
from onnxroof.costing.node import op_key as _op_key
from onnxroof.fusion.patterns import graph_captured
from onnxroof.load.reader import load_model
from onnxroof.platform.lookup import load_platform
from onnxroof.platform.model import Platform
from onnxroof.roofline.classify import op_class, precision_of, resolve_precision
from onnxroof.roofline.kernels import KernelResult, Placement, filled, node_points


def _shape_text(shape: tuple[int | None, ...] | None) -> list[int | None] | None:
    return None if shape is None else list(shape)


class _ShapeTexts:
    """The shapes of a node's tensors as :attr:`NodeResult.input_shapes` gives them (a list per tensor, None for
    an absent tensor or an unknown rank), equal shapes sharing one tuple and one list per analysis: a model's
    nodes repeat few shapes, and a fresh list for every tensor of every node costs ~250 bytes a node."""

    def __init__(self, limit: int = 4096) -> None:
        self._texts: dict[tuple, tuple[list[int | None] | None, ...]] = {}
        self._lists: dict[tuple[int | None, ...], list[int | None]] = {}
        self._limit = limit

    def __call__(self, tensors: tuple[TensorInfo | None, ...]) -> tuple[list[int | None] | None, ...]:
        key = tuple([None if t is None else t.shape for t in tensors])
        found = self._texts.get(key)
        if found is None:
            if len(self._texts) >= self._limit:
                self._texts.clear()
                self._lists.clear()
            found = self._texts[key] = tuple([None if shape is None else self._list(shape) for shape in key])
        return found

    def _list(self, shape: tuple[int | None, ...]) -> list[int | None]:
        found = self._lists.get(shape)
        if found is None:
            found = self._lists[shape] = list(shape)
        return found


@dataclass(frozen=True, slots=True)
class NodeResult(Placement):
    """One node: what it is, what it costs, where it sits on the roofline.

    ``input_shapes`` and ``output_shapes`` hold one list per tensor (None: absent, or rank unknown); nodes of equal
    shapes share these lists and tuples (a huge graph repeats few shapes), so treat them as read-only."""

    id: str
    name: str
    op_type: str
    domain: str
    state: NodeState
    kind: RuleKind | str  # compute | layout | view | metadata | "" (no rule)
    dtype: str
    precision: str
    input_shapes: tuple[list[int | None] | None, ...]
    output_shapes: tuple[list[int | None] | None, ...]
    note: str = ""
    compute_density: float = 1.0
    """Share of the node's dense FLOPs counted under ``skip_compute`` (1: all; see :mod:`onnxroof.analysis.whatif`)."""
    missing_tensor: str | None = None
    """The tensor without a static shape that kept the node from being costed (state ``unknown_shape``)."""

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain data (shapes as lists)."""
        data = self._plain()
        data["input_shapes"] = list(self.input_shapes)
        data["output_shapes"] = list(self.output_shapes)
        return data


@dataclass(frozen=True)
class ModelSummary:
    path: str | None
    graph_name: str
    producer: str
    ir_version: int
    opset: int
    nodes: int
    dims: Mapping[str, int]
    inputs: tuple[tuple[str, list[int | None] | None, str], ...]
    outputs: tuple[tuple[str, list[int | None] | None, str], ...]
    subgraph_nodes: tuple[str, ...]  # If/Loop/Scan node ids (their bodies are costed, see control_flow)


@dataclass(frozen=True)
class Analysis:
    """Everything onnxroof knows about one model on one platform. Immutable."""

    model: ModelSummary
    platform: Platform
    precision_override: str | None
    nodes: tuple[NodeResult, ...]
    totals: Totals
    op_types: tuple[OpTypeRow, ...]
    unsupported: Mapping[str, tuple[str, ...]]  # "domain::op_type" or op_type -> node ids
    warnings: tuple[str, ...]
    kernels: tuple[KernelResult, ...] = ()
    fusion_profile: str = "none"
    fusion_misses: tuple[Miss, ...] = ()
    ir: ModelIR | None = field(compare=False, repr=False, default=None)
    """The model's IR (ops, tensors), None when there is none."""
    whatif: WhatIf = field(default_factory=WhatIf)
    """The what-if knobs the model was costed with (precision, densities, compress_mem, skip_compute)."""

    index: GraphIndex | None = field(compare=False, repr=False, default=None)
    """The IR's graph index (producers, consumers, view roots), None when there is no graph."""

    @property
    def graph(self) -> nx.DiGraph | None:
        """The op DAG (:attr:`onnxroof.core.ir.ModelIR.graph`, built on first use), None without an IR."""
        return self.ir.graph if self.ir is not None else None

    def op(self, node_id: str) -> OpView | None:
        """The node's :class:`~onnxroof.core.ir.OpView` (attributes, tensors), None without an IR or such a node."""
        return self.ir.op(node_id) if self.ir is not None else None

    @functools.cached_property
    def kernel_by_node(self) -> Mapping[str, KernelResult]:
        """Node id -> the kernel it runs in (nodes that do not run are absent), built once."""
        return MappingProxyType({node: kernel for kernel in self.kernels for node in kernel.node_ids})

    def kernel_of(self, node_id: str) -> KernelResult | None:
        """The kernel a node runs in (None for nodes that do not run)."""
        return self.kernel_by_node.get(node_id)

    @property
    def main_precision(self) -> str:
        """The precision the most predicted time computes at: ``argmax_p Σ_{k : k.precision = p} k.latency_s`` over
        the kernels, a tie going to the greater name; with no kernel, the precision override, else the platform's
        first precision."""
        time: dict[str, float] = {}
        for kernel in self.kernels:
            time[kernel.precision] = time.get(kernel.precision, 0.0) + kernel.latency_s
        if time:
            return max(time, key=lambda p: (time[p], p))
        return self.precision_override or self.platform.precisions()[0]

    def top_kernels(self, count: int) -> tuple[KernelResult, ...]:
        ranked = sorted(self.kernels, key=lambda k: (-k.latency_s, k.id))
        return tuple(ranked[:count])

    def to_dataframe(self):
        """Per-node results as a pandas DataFrame (one row per node, SI units)."""
        import pandas as pd

        return pd.DataFrame([n.to_dict() for n in self.nodes])

    def top_nodes(self, count: int) -> tuple[NodeResult, ...]:
        ranked = sorted((n for n in self.nodes if n.latency_s > 0), key=lambda n: (-n.latency_s, n.id))
        return tuple(ranked[:count])


# --------------------------------------------------------------------------------------------- costing


def analyze(
    model: str | os.PathLike | onnx.ModelProto,
    platform: str | os.PathLike | Platform = "xavier",
    dims: Mapping[str, object] | None = None,
    precision: str | None = None,
    strict: bool = False,
    fusion: str | None = None,
    *,
    whatif: WhatIf | None = None,
    densities: Mapping[str, float] | None = None,
    layer_densities: Mapping[str, Mapping[str, float]] | None = None,
    compress_mem: bool = False,
    skip_compute: bool = False,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    peak: bool = False,
) -> Analysis:
    """Cost every node of ``model`` and place it on ``platform``'s roofline.

    ``dims`` binds symbolic input dims (``{"batch": 1}``), ``shapes`` whole inputs (``{"x": (1, 3, 48, 192)}``;
    a conflict between the two raises :class:`~onnxroof.core.errors.DimsError`); ``precision`` re-costs the model
    as if run in that precision (``fp32``/``fp16``/``bf16``/``int8``...: floating-point tensors take its element
    size, every node its peak); ``strict`` raises :class:`StrictError` when any node is unsupported or has no
    static shape;
    ``fusion`` names the fusion profile (default: the platform's). ``whatif`` gives the what-if knobs as one
    :class:`~onnxroof.analysis.whatif.WhatIf` (precision, densities, per-layer densities, compress_mem,
    skip_compute: FRAME's sparsity knobs, :mod:`onnxroof.analysis.whatif`); the same knobs may instead be given
    as keywords (``precision``, ``densities={"weight": 0.5}`` with kinds weight/input/output,
    ``layer_densities`` node name or id -> densities, ``compress_mem``, ``skip_compute``), not both; only
    ``precision`` may come beside a ``whatif`` that gives none. ``peak=True`` draws the roofline from the
    datasheet figures as given instead of the platform's ``[sustained]`` shares of them.
    """
    legacy = WhatIf.of(precision, densities, layer_densities, compress_mem, skip_compute, peak)
    if whatif is not None:
        rest = replace(legacy, precision=None, peak=False)
        if rest != WhatIf() or (precision is not None and whatif.precision not in (None, precision)):
            raise TypeError("analyze(): give the what-if knobs either as whatif=WhatIf(...) or as keywords, not both")
        plan = replace(whatif, precision=whatif.precision or precision, peak=whatif.peak or peak)
    else:
        plan = legacy
    with _gc_paused():
        return _analyze(model, platform, dims, plan, strict, fusion, shapes)


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while one analysis allocates its many small, long-lived objects.

    Measured on the 2,681-node decoder: analyze() 15-25% faster; nothing here creates reference cycles that
    must be collected mid-run, and the collector's previous state is restored.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _analyze(
    model: str | os.PathLike | onnx.ModelProto,
    platform: str | os.PathLike | Platform,
    dims: Mapping[str, object] | None,
    plan: WhatIf,
    strict: bool,
    fusion: str | None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> Analysis:
    target = platform if isinstance(platform, Platform) else load_platform(platform)
    target = target.with_peak_roofs(plan.peak)  # sustained roofs unless --peak
    precision = plan.precision
    if precision is not None:
        target.peak(precision)  # raises PlatformError naming what the platform has
    loaded = load_model(model, dims, shapes)
    density_map = tensor_densities(loaded.model.graph, plan)
    ir = build_ir(
        loaded.model, loaded.value_types, make_restate(plan, density_map), order=loaded.order, tied=loaded.tied
    )
    loaded = replace(loaded, value_types=MappingProxyType({}))  # the IR holds the shapes: free ~170 B a tensor
    warnings = list(loaded.warnings) + whatif_warnings(plan, target)

    profile = fusion or target.fusion_profile
    captured = graph_captured(profile)  # launch overhead once per run, not per kernel
    results, node_costs, fallbacks = _cost_nodes(ir, loaded.model.graph, target, plan, density_map, captured)
    for (wanted, used), count in sorted(fallbacks.items()):
        warnings.append(f"platform '{target.name}' has no {wanted} peak: {count} node(s) use its {used} peak")
    warnings += _shape_warnings(ir, results)
    warnings += _branch_warnings(ir, node_costs)
    warnings += [line for node_cost in node_costs for line in node_cost.warnings]  # inside If/Loop/Scan bodies

    unsupported: dict[str, list[str]] = {}
    for op, result, node_cost in zip(ir.ops, results, node_costs, strict=True):
        if result.state == NodeState.UNSUPPORTED:
            unsupported.setdefault(_op_key(op), []).append(op.id)
        for inner in node_cost.unsupported:  # ops without a rule inside If/Loop/Scan bodies
            unsupported.setdefault(inner, []).append(op.id)
    if strict:
        _raise_if_incomplete(results, unsupported)

    weights = _distinct_weights(node_costs)
    peak = peak_activation_memory(ir)
    cold = cold_weight_bytes(
        target, sum(b for _, b in weights.values()), sum(n for n, _ in weights.values()), peak.bytes
    )
    kernels, misses = build_kernels(ir, results, node_costs, profile, target, cold)
    running = [r for r in results if r.state == NodeState.COSTED]
    states = {state: sum(1 for r in results if r.state == state) for state in NodeState}
    totals = build_totals(
        results, running, states, weights, peak, kernels, target, graph_launch_s=target.launch_overhead_s * captured
    )
    summary = _model_summary(loaded, ir)
    return Analysis(
        model=summary,
        platform=target,
        precision_override=precision,
        nodes=tuple(results),
        totals=totals,
        op_types=op_type_rows(results, kernels, totals.latency_s),
        unsupported=MappingProxyType({k: tuple(v) for k, v in unsupported.items()}),
        warnings=tuple(warnings),
        kernels=kernels,
        fusion_profile=profile,
        fusion_misses=misses,
        ir=ir,
        whatif=plan,
        index=graph_index(ir),
    )


def _cost_nodes(
    ir: ModelIR,
    root_graph: onnx.GraphProto,
    target: Platform,
    plan: WhatIf,
    density_map: Mapping[str, float],
    captured: bool,
) -> tuple[list[NodeResult], list[NodeCost], Counter[tuple[str, str]]]:
    """Every node of ``ir`` costed and placed on ``target``'s roofline: the node results, their costs, and how
    many nodes fell back from each wanted precision to the one the platform has."""
    precision = plan.precision
    results: list[NodeResult] = []
    node_costs: list[NodeCost] = []
    fallbacks: Counter[tuple[str, str]] = Counter()
    place = node_points(target)
    shapes = _ShapeTexts()
    resolved: dict[str, str] = {}  # wanted precision -> the platform's
    classes: dict[tuple[str, str], str] = {}  # (op_type, domain) -> efficiency class by type
    for op in ir.ops:
        node_cost = cost_node(op, ir, root_graph)
        dtype = op.dtype
        wanted = precision or precision_of(dtype)
        used = resolved.get(wanted)
        if used is None:
            used = resolved[wanted] = resolve_precision(target, wanted)
        if used != wanted:
            fallbacks[(wanted, used)] += 1
        density = 1.0
        if plan.skip_compute and node_cost.state == NodeState.COSTED and node_cost.cost.macs > 0:
            density = compute_density(
                target.sparsity, used in target.sparse_peak_flops, *operand_densities(op.inputs, density_map)
            )
            if density < 1.0:
                node_cost = replace(node_cost, cost=skip_zeros(node_cost.cost, density))
        node_costs.append(node_cost)
        state, cost = node_cost.state, node_cost.cost
        key = (op.op_type, op.domain)
        cls = classes.get(key)
        if cls is None:
            cls = classes[key] = op_class(op.op_type, op.domain)
        if cls == "conv":  # only a Conv's class depends on the node: depthwise (op_class)
            cls = op_class(op.op_type, op.domain, op.attrs, channels_of(op))
        point = place(
            cost,
            used,
            state == NodeState.COSTED,
            0 if captured else node_cost.launches,
            cls,
            array_utilization(target, (op,)),
        )
        results.append(
            filled(
                NodeResult,
                cost.flops,
                cost.macs,
                cost.bytes_read,
                cost.bytes_written,
                cost.params,
                *point,
                op.id,
                op.name,
                op.op_type,
                op.domain,
                state,
                node_cost.kind,
                dtype,
                used,
                shapes(op.inputs),
                shapes(op.outputs),
                node_cost.note,
                density,
                node_cost.missing_tensor,
            )
        )
    return results, node_costs, fallbacks


def _branch_warnings(ir: ModelIR, node_costs: list[NodeCost]) -> list[str]:
    """An ``If`` on a model input costs its more expensive branch: say which, and how to pick the other."""
    warnings = []
    for op, node_cost in zip(ir.ops, node_costs, strict=True):
        cond = op.input(0) if op.op_type == "If" else None
        if cond is None or cond.role != Role.INPUT or not node_cost.branch:
            continue
        other = "else_branch" if node_cost.branch == "then_branch" else "then_branch"
        warnings.append(
            f"node {op.id} (If) on input '{cond.name}': the more expensive branch ({node_cost.branch}) was costed; "
            f"bind --dim {cond.name}={1 if other == 'then_branch' else 0} to cost {other} instead"
        )
    return warnings


def _shape_warnings(ir: ModelIR, results: list[NodeResult]) -> list[str]:
    producer = graph_index(ir).producer
    warnings = []
    for result in results:
        if result.state == NodeState.UNKNOWN_SHAPE:
            tensor = result.missing_tensor or "?"
            origin = producer.get(tensor)
            made_by = f" (produced by node {origin})" if origin else ""
            warnings.append(
                f"node {result.id} ({result.op_type}) not costed: tensor '{tensor}' has no static shape{made_by}"
            )
    return warnings


def _raise_if_incomplete(results: list[NodeResult], unsupported: Mapping[str, list[str]]) -> None:
    parts = [f"{op} ×{len(ids)}" for op, ids in sorted(unsupported.items())]
    unknown = [r.id for r in results if r.state == NodeState.UNKNOWN_SHAPE]
    if unknown:
        parts.append(f"{len(unknown)} node(s) without static shapes (first: {unknown[0]})")
    if parts:
        raise StrictError(f"--strict: not every node could be costed: {', '.join(parts)}")


def _distinct_weights(node_costs: list[NodeCost]) -> dict[str, tuple[float, float]]:
    """Weight name -> (elements, bytes): a weight shared by several nodes counts once, a derived weight's
    elements are its roots' (:func:`onnxroof.costing.node.weight_entries`)."""
    weights: dict[str, tuple[float, float]] = {}
    for node_cost in node_costs:
        merge_weights(weights, node_cost.weights)
    return weights


def _model_summary(loaded, ir: ModelIR) -> ModelSummary:
    model = loaded.model

    def describe(names):
        return tuple((n, _shape_text(ir.tensors[n].shape), ir.tensors[n].dtype) for n in names if n in ir.tensors)

    return ModelSummary(
        path=str(loaded.path) if loaded.path else None,
        graph_name=model.graph.name,
        producer=" ".join(p for p in (model.producer_name, model.producer_version) if p),
        ir_version=model.ir_version,
        opset=loaded.opset,
        nodes=len(ir.ops),
        dims=loaded.dims,
        inputs=describe(ir.graph_inputs),
        outputs=describe(ir.graph_outputs),
        subgraph_nodes=tuple(op.id for op in ir.ops if op.subgraphs),
    )
