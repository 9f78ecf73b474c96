"""The analysis as named stages, each a pure function over frozen values:

``read`` (parse and check, once per file: :func:`onnxroof.load.reader.read_file`) → :func:`bind` (dims and
shapes bound, the IR and its graph index) → :func:`cost` (the rules, the what-if knobs) → :func:`fuse` (the
runtime's kernels, each with a :class:`~onnxroof.core.descriptor.KernelDescriptor`) → place (a platform and a
time model: :func:`onnxroof.analysis.analyze.place`) → :class:`~onnxroof.analysis.analyze.Analysis`.

Studies reuse the stages instead of re-running everything: ``compare`` binds, costs and fuses once and places per
platform; ``sweep`` reads once and binds per point; ``llm`` reads once and binds per phase.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import field, replace
from operator import attrgetter, itemgetter
from pathlib import Path
from types import MappingProxyType

import numpy as np
import numpy.typing as npt
import onnx

from onnxroof.analysis.liveness import PeakMemory, peak_activation_memory
from onnxroof.analysis.results import ModelSummary, shape_list
from onnxroof.analysis.whatif import (
    DensityMap,
    WhatIf,
    compute_density,
    make_restate,
    operand_densities,
    skip_zeros,
    tensor_densities,
)
from onnxroof.core.cost import merge_weights
from onnxroof.core.descriptor import KernelDescriptor, accumulation_dtype, conv_geometry
from onnxroof.core.errors import StrictError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.gemm import array_gemm
from onnxroof.core.ir import ModelIR, OpView, build_ir
from onnxroof.core.kernel import Kernel, Miss
from onnxroof.core.node_cost import NodeCost
from onnxroof.core.states import NodeState, OpClass, Role
from onnxroof.costing.node import CostCache, cost_node, cost_signature, folded_signature, shareable
from onnxroof.costing.node import op_key as _op_key
from onnxroof.costing.opclass import op_class
from onnxroof.fusion.bodies import fuse_with_bodies
from onnxroof.fusion.descriptor import describe, describe_like
from onnxroof.fusion.graph import FusionGraph
from onnxroof.fusion.match import FunctionMatches
from onnxroof.fusion.patterns import QDQ_PATTERNS
from onnxroof.load.reader import LoadedModel, ModelFile, load_model, read_file
from onnxroof.platform.model import Platform
from onnxroof.roofline.precision import precision_of, resolve_precision
from onnxroof.rules import REGISTRY

Source = str | os.PathLike[str] | onnx.ModelProto | ModelFile


def read(source: Source) -> ModelFile:
    """The read stage: parse and check a model once, never reading its weight bytes
    (:func:`onnxroof.load.reader.read_file`); what :func:`bind` takes to bind it any number of times."""
    return read_file(source)


# ------------------------------------------------------------------------------------------------- bind


@frozen_dataclass(eq=False, repr=False)
class BoundModel:
    """A model with its dims bound: the IR (with its graph index), the what-if knobs it was bound with (precision
    and ``compress_mem`` restate element sizes), the tensor densities, and what the later stages read of the
    loaded model: its path, the loading warnings and the weight bytes the file stores.

    ``root_graph``: the shape-inferred main graph, kept only where the cost stage reads it (the constant trip
    counts and conditions of If/Loop nodes, which function bodies may hold too): None when no node has a body
    and every node has a rule. The IR holds everything else, so the protobuf (~700 B a node once shapes are
    inferred) is freed after binding."""

    path: Path | None
    warnings: tuple[str, ...]
    stored_weight_bytes: float
    root_graph: onnx.GraphProto | None = field(repr=False)
    ir: ModelIR = field(repr=False)
    plan: WhatIf
    densities: DensityMap = field(repr=False)
    summary: ModelSummary


def bind(
    source: Source,
    dims: Mapping[str, object] | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    whatif: WhatIf | None = None,
) -> BoundModel:
    """Bind ``source``'s dims (``dims``: symbols; ``shapes``: whole inputs) and build its IR under ``whatif``'s
    precision and ``compress_mem``. A :class:`~onnxroof.load.reader.ModelFile` is bound as a copy (read once, bind
    many times); a path or protobuf is read here."""
    plan = whatif or WhatIf()
    loaded = load_model(source, dims, shapes)
    density_map = tensor_densities(loaded.model.graph, plan)
    ir = build_ir(
        loaded.model,
        loaded.value_types,
        make_restate(plan, density_map),
        order=loaded.order,
        tied=loaded.tied,
        view_ops=REGISTRY.view_ops,
        attributes=loaded.attributes,
    )
    root_graph = loaded.model.graph if _reads_root_graph(ir) else None
    return BoundModel(
        loaded.path,
        loaded.warnings,
        loaded.stored_weight_bytes,
        root_graph,
        ir,
        plan,
        density_map,
        model_summary(loaded, ir),
    )


def _reads_root_graph(ir: ModelIR) -> bool:
    """Whether costing ``ir`` may read the root graph (:func:`~onnxroof.costing.node.cost_node`'s ``root_graph``:
    constants of If/Loop nodes, in the graph or inside the function body of an op without a rule)."""
    return bool(ir.bodies) or any(REGISTRY.lookup(domain, op_type) is None for domain, op_type in ir.op_kinds)


def model_summary(loaded: LoadedModel, ir: ModelIR) -> ModelSummary:
    """What the model is: its file, graph, producer, opset, node count, bound dims, inputs and outputs."""
    model = loaded.model

    def describe(names: Sequence[str]) -> tuple[tuple[str, list[int | None] | None, str], ...]:
        return tuple((n, shape_list(ir.tensors[n].shape), ir.tensors[n].dtype) for n in names if n in ir.tensors)

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
        subgraph_nodes=ir.bodies,
    )


# ------------------------------------------------------------------------------------------------- cost


@frozen_dataclass(eq=False, repr=False)
class CostedModel:
    """Every node of a bound model costed by its rule: one :class:`NodeCost` per op of the IR (what-if
    ``skip_compute`` applied), each node's efficiency class and the precision it asks for, the distinct weights,
    the peak of live activations, what could not be costed, and the warnings about it.

    ``sparse``: the platform facts ``skip_compute`` costing read (its sparsity pattern and the precisions with a
    sparse peak), None when it read none: such a costing holds on every platform."""

    bound: BoundModel
    node_costs: tuple[NodeCost, ...]
    op_classes: tuple[OpClass, ...]
    wanted: tuple[str, ...]
    compute_density: tuple[float, ...]
    weights: Mapping[str, tuple[float, float]]
    peak: PeakMemory
    unsupported: Mapping[str, tuple[str, ...]]
    warnings: tuple[str, ...]
    descriptors: tuple[KernelDescriptor, ...]
    """Each node on its own as a kernel (:func:`node_descriptors`), for the unfused view's placement."""
    sparse: tuple[str, frozenset[str]] | None = None
    firsts: tuple[int, ...] = ()
    """Each node's first node of its signature (:func:`~onnxroof.costing.node.cost_signature`): the node itself,
    or the earlier node whose row (NodeCost, precision, class, descriptor) it shares, and with it every fact of
    its tensors but their names. Empty: not known (every node its own)."""


def sparse_facts(plan: WhatIf, platform: Platform | None) -> tuple[str, frozenset[str]] | None:
    """What ``skip_compute`` costing reads of ``platform`` (None when the knob is off)."""
    if not plan.skip_compute or platform is None:
        return None
    return platform.sparsity, frozenset(platform.sparse_peak_flops)


def cost(bound: BoundModel, platform: Platform | None = None) -> CostedModel:
    """Cost every node of ``bound`` (its rules; control flow through its bodies). ``platform`` is read only under
    ``skip_compute`` (its sparsity pattern and sparse peaks decide the zeros skipped).

    Nodes of one :func:`~onnxroof.costing.node.cost_signature` (their weights described by shape, dtype and role;
    a folded node without one, of one :func:`~onnxroof.costing.node.folded_signature`) share one row (NodeCost,
    wanted precision, class, descriptor: each a function of the signature), built once. A shared row is costed by
    a rule, zero or folded, with no weights, warnings or unsupported ops inside
    (:func:`~onnxroof.costing.node.shareable`), so the unsupported ops, weights and warnings are gathered from the
    other nodes only (``notable``). A node of a known signature whose NodeCost is its own (it reads weights,
    named) still takes the signature's precision, class and descriptor (``alike``)."""
    ir, plan = bound.ir, bound.plan
    sparse = sparse_facts(plan, platform)
    by_type: dict[tuple[str, str], OpClass] = {}  # (op_type, domain) -> efficiency class by type
    shared: dict[tuple[OpClass, str], KernelDescriptor] = {}
    root_graph = bound.root_graph
    cache = CostCache()
    seen: dict[tuple[object, ...], _Row] = {}  # signature -> the row its nodes share
    rows: list[_Row] = []
    notable: list[int] = []  # the nodes whose row is their own
    folds_alike: dict[tuple[str, str], bool] = {}
    alike: dict[tuple[object, ...], tuple[str, OpClass, KernelDescriptor]] = {}  # signature -> its nodes' facts
    for i, op in enumerate(ir.ops):
        signature, folded = cost_signature(op, True), None
        if signature is None:  # none (a Constant's tensor attribute): keyed as folded, if it is
            signature = folded = folded_signature(op, folds_alike)
        row = seen.get(signature) if signature is not None else None
        if row is None:
            node_cost = cost_node(op, ir, root_graph, cache, None if folded else signature)
            facts = alike.get(signature) if signature is not None else None
            if facts is None:
                node_class, dtype = _node_class(op, by_type), op.dtype
                facts = (plan.precision or precision_of(dtype), node_class, _descriptor(op, node_class, shared, dtype))
                if signature is not None:
                    alike[signature] = facts
            row = (node_cost, *facts, i)
            if signature is not None and shareable(node_cost):
                seen[signature] = row
            else:
                notable.append(i)
        rows.append(row)
    node_costs = list(map(itemgetter(0), rows))
    densities = [1.0] * len(rows)
    if sparse is not None and platform is not None:
        _skip_zeros(ir.ops, rows, bound.densities, sparse, platform, node_costs, densities)
    unsupported: dict[str, list[str]] = {}
    weights: dict[str, tuple[float, float]] = {}
    for i in notable:
        op, node_cost = ir.ops[i], node_costs[i]
        if node_cost.state == NodeState.UNSUPPORTED:
            unsupported.setdefault(_op_key(op), []).append(op.id)
        for inner in node_cost.unsupported:  # ops without a rule inside If/Loop/Scan bodies
            unsupported.setdefault(inner, []).append(op.id)
        if node_cost.weights:
            merge_weights(weights, node_cost.weights)
    special = [(ir.ops[i], node_costs[i]) for i in notable]
    warnings = _shape_warnings(ir, special) + _branch_warnings(special)
    warnings += [line for _, node_cost in special for line in node_cost.warnings]  # inside If/Loop/Scan bodies
    return CostedModel(
        bound=bound,
        node_costs=tuple(node_costs),
        op_classes=tuple(map(itemgetter(2), rows)),
        wanted=tuple(map(itemgetter(1), rows)),
        compute_density=tuple(densities),
        weights=MappingProxyType(weights),
        peak=peak_activation_memory(ir),
        unsupported=MappingProxyType({k: tuple(v) for k, v in unsupported.items()}),
        warnings=tuple(warnings),
        descriptors=tuple(map(itemgetter(3), rows)),
        sparse=sparse,
        firsts=tuple(map(itemgetter(4), rows)),
    )


#: One node's costing: its NodeCost, the precision it asks for, its efficiency class, its descriptor, and the first
#: node of its row (:attr:`CostedModel.firsts`).
_Row = tuple[NodeCost, str, OpClass, KernelDescriptor, int]


def _skip_zeros(
    ops: Sequence[OpView],
    rows: Sequence[_Row],
    tensor_density: DensityMap,
    sparse: tuple[str, frozenset[str]],
    platform: Platform,
    node_costs: list[NodeCost],
    densities: list[float],
) -> None:
    """What-if ``skip_compute``: each costed node with MACs computes ``compute_density`` of them
    (:func:`~onnxroof.analysis.whatif.compute_density` of its operands' densities, the platform's sparsity pattern,
    and whether its precision has a sparse peak); ``node_costs`` and ``densities`` updated in place where below 1."""
    resolved: dict[str, str] = {}
    for i, (op, (node_cost, want, *_)) in enumerate(zip(ops, rows, strict=True)):
        if node_cost.state != NodeState.COSTED or node_cost.cost.macs <= 0:
            continue
        used = resolved.get(want) or resolved.setdefault(want, resolve_precision(platform, want))
        density = compute_density(sparse[0], used in sparse[1], *operand_densities(op.inputs, tensor_density))
        densities[i] = density
        if density < 1.0:
            node_costs[i] = replace(node_cost, cost=skip_zeros(node_cost.cost, density))


def node_descriptors(ops: Sequence[OpView], op_classes: Sequence[OpClass]) -> tuple[KernelDescriptor, ...]:
    """Each node on its own as a kernel (:func:`_descriptor`). Nothing here depends on a platform: the cost stage
    makes them once (one per distinct node, :func:`cost`), and every placement of the costing reads them."""
    shared: dict[tuple[OpClass, str], KernelDescriptor] = {}
    return tuple(_descriptor(op, kind, shared) for op, kind in zip(ops, op_classes, strict=True))


def _descriptor(
    op: OpView, kind: OpClass, shared: dict[tuple[OpClass, str], KernelDescriptor], dtype: str | None = None
) -> KernelDescriptor:
    """``op`` on its own as a kernel: its class, GEMM view, convolution geometry and dtypes (``dtype``: ``op.dtype``
    when the caller has it). The nodes without a GEMM view (most of them) share one descriptor per (class, dtype)
    in ``shared``: equal values, built once."""
    gemm = array_gemm(op)
    if dtype is None:
        dtype = op.dtype
    if gemm is not None:
        return KernelDescriptor(str(kind), gemm, dtype, conv=conv_geometry(op), accumulation=accumulation_dtype(dtype))
    key = (kind, dtype)
    if key not in shared:
        shared[key] = KernelDescriptor(str(kind), None, dtype, accumulation=accumulation_dtype(dtype))
    return shared[key]


def _node_class(op: OpView, by_type: dict[tuple[str, str], OpClass]) -> OpClass:
    """The efficiency class of ``op`` (:func:`~onnxroof.costing.opclass.op_class`), looked up once per op type;
    only a Conv's class depends on the node (depthwise)."""
    key = (op.op_type, op.domain)
    cls = by_type.get(key)
    if cls is None:
        cls = by_type[key] = REGISTRY.op_class(op.domain, op.op_type)
    return op_class(op, REGISTRY) if cls == OpClass.CONV else cls


def raise_if_incomplete(costed: CostedModel) -> None:
    """``--strict``: :class:`StrictError` when a node is unsupported or has no static shape."""
    parts = [f"{op} ×{len(ids)}" for op, ids in sorted(costed.unsupported.items())]
    ops = costed.bound.ir.ops
    unknown = [op.id for op, c in zip(ops, costed.node_costs, strict=True) if c.state == NodeState.UNKNOWN_SHAPE]
    if unknown:
        parts.append(f"{len(unknown)} node(s) without static shapes (first: {unknown[0]})")
    if parts:
        raise StrictError(f"--strict: not every node could be costed: {', '.join(parts)}")


def _branch_warnings(nodes: Sequence[tuple[OpView, NodeCost]]) -> list[str]:
    """An ``If`` on a model input costs its more expensive branch: say which, and how to pick the other."""
    warnings = []
    for op, node_cost in nodes:
        cond = op.input(0) if op.op_type == "If" else None
        if cond is None or cond.role != Role.INPUT or not node_cost.branch:
            continue
        other = "else_branch" if node_cost.branch == "then_branch" else "then_branch"
        warnings.append(
            f"node {op.id} (If) on input '{cond.name}': the more expensive branch ({node_cost.branch}) was costed; "
            f"bind --dim {cond.name}={1 if other == 'then_branch' else 0} to cost {other} instead"
        )
    return warnings


def _shape_warnings(ir: ModelIR, nodes: Sequence[tuple[OpView, NodeCost]]) -> list[str]:
    producer = ir.index.producer
    warnings = []
    for op, node_cost in nodes:
        if node_cost.state == NodeState.UNKNOWN_SHAPE:
            tensor = node_cost.missing_tensor or "?"
            origin = producer.get(tensor)
            made_by = f" (produced by node {origin})" if origin else ""
            warnings.append(f"node {op.id} ({op.op_type}) not costed: tensor '{tensor}' has no static shape{made_by}")
    return warnings


# ------------------------------------------------------------------------------------------------- fuse


@frozen_dataclass(eq=False, repr=False)
class FusedModel:
    """The kernels a runtime's fusion profile makes of a costed model, in the order of their anchors, each with
    its descriptor; the candidates that did not fuse; and how each kernel launches.

    ``anchors``: each kernel's anchor node (position in the IR's order); ``launches``: kernel launches per run
    (what each costs, and whether the run is one replayed graph, is the runtime's: placement); ``int8``: kernels
    a QDQ pattern runs at int8 (QLinearConv, QLinearMatMul, QGemm); ``pass_bytes``: bytes each kernel moves in a
    second, elementwise pass the runtime adds after it (a convolution's bias added separately,
    :func:`~onnxroof.analysis.runtime_use.separate_conv_bias`), already counted in its cost; None: no kernel has
    one. ``functions``: the fusion pass's phase-1 decisions, which another binding of the model may replay
    (:func:`fuse`'s ``prior``)."""

    costed: CostedModel
    profile: str
    kernels: tuple[Kernel, ...]
    misses: tuple[Miss, ...]
    op_types: tuple[tuple[str, ...], ...]
    descriptors: tuple[KernelDescriptor, ...]
    anchors: npt.NDArray[np.int64]
    launches: npt.NDArray[np.float64]
    int8: npt.NDArray[np.bool_]
    pass_bytes: npt.NDArray[np.float64] | None = None
    functions: FunctionMatches | None = field(default=None, compare=False, repr=False)


def fuse(costed: CostedModel, profile: str, prior: FusedModel | None = None) -> FusedModel:
    """Group ``costed``'s nodes into the kernels of fusion ``profile`` (:func:`onnxroof.fusion.fuse.fuse`), the
    bodies of If/Loop/Scan nodes fused the same way and their kernels put in the node's place
    (:func:`onnxroof.fusion.bodies.fuse_with_bodies`), and describe each kernel (:func:`describe`).

    ``prior``: another binding of the same model fused under ``profile`` (an LLM's previous phase): its
    decomposed-function matches are replayed where the facts the matcher reads are equal
    (:func:`onnxroof.fusion.match.apply_functions`), and matched afresh otherwise; the result is the same."""
    ir = costed.bound.ir
    graph = FusionGraph(ir, costed.node_costs)
    reuse = prior.functions if prior is not None and prior.profile == profile else None
    fusion, run = fuse_with_bodies(ir, costed.node_costs, profile, graph, reuse)
    position = graph.position
    type_lists: dict[tuple[str, ...], tuple[str, ...]] = {}  # equal op-type lists shared: kernels repeat them
    alone: dict[object, KernelDescriptor] = {}  # a signature -> its nodes' descriptor as kernels alone
    op_types, descriptors, anchors, launches, int8 = [], [], [], [], []
    for row, kernel in enumerate(fusion.kernels):
        patterns = kernel.patterns
        if run is None:  # no control-flow body: every kernel's members are nodes of the IR, by position
            at = fusion.positions[row]  # type: ignore[index]  # the graph's own kernels have their positions
            first = at[0]
            anchors.append(first)
            if len(at) == 1:
                op = ir.ops[first]
                types = type_lists.setdefault((op.op_type,), (op.op_type,))
                launches.append(costed.node_costs[first].launches)
                if not patterns:  # a node alone: its class and dtype are the cost stage's
                    op_types.append(types)
                    descriptors.append(_node_kernel(op, first, costed, types, alone))
                    int8.append(False)
                    continue
                ops = [op]
            else:
                ops = list(map(ir.ops.__getitem__, at))
                types = tuple(map(attrgetter("op_type"), ops))
                types = type_lists.setdefault(types, types)
                launches.append(1)
        else:
            ops = list(run[row].ops)
            anchors.append(position[run[row].anchor])
            launches.append(run[row].launches)
            types = tuple(map(attrgetter("op_type"), ops))
            types = type_lists.setdefault(types, types)
        op_types.append(types)
        descriptors.append(describe(ops, patterns, types))
        int8.append(bool(QDQ_PATTERNS.intersection(patterns)))
    return FusedModel(
        costed=costed,
        profile=profile,
        kernels=fusion.kernels,
        misses=fusion.misses,
        op_types=tuple(op_types),
        descriptors=tuple(descriptors),
        anchors=np.asarray(anchors, dtype=np.int64),
        launches=np.asarray(launches, dtype=np.float64),
        int8=np.asarray(int8, dtype=bool),
        functions=fusion.functions,
    )


def _node_kernel(
    op: OpView, at: int, costed: CostedModel, types: tuple[str, ...], alone: dict[object, KernelDescriptor]
) -> KernelDescriptor:
    """The descriptor of a kernel of ``op`` alone (the ``at``-th node, fused by no pattern): its class and dtype
    the cost stage's, and shared by the nodes of one signature (``alone``): when it names no weight, the same
    descriptor, else that descriptor with the node's own weights
    (:func:`~onnxroof.fusion.descriptor.describe_like`). A descriptor reads the node's op type, attributes and its
    tensors' shapes, dtypes and roles, and the names of its weights only. The signature: the node's row's first
    node (:attr:`CostedModel.firsts`); for a node reading weights (its row is its own: its cost names them), its
    :func:`~onnxroof.costing.node.cost_signature` with the weights described like the other inputs, with its class
    and dtype (the cost stage keys them by it), so the projections of a model's layers share one descriptor."""
    op_class, dtype = costed.op_classes[at], costed.descriptors[at].dtype
    key: object = costed.firsts[at] if costed.firsts else at
    if costed.node_costs[at].weights:
        signature = cost_signature(op, True)
        key = key if signature is None else (signature, op_class, dtype)
    template = alone.get(key)
    if template is None:
        template = alone[key] = describe((op,), (), types, op_class, dtype)
        return template
    return describe_like(template, op) if template.weights else template


def fallback_warnings(wanted: Sequence[str], platform: Platform) -> tuple[dict[str, str], list[str]]:
    """The platform precision each wanted one resolves to, and a warning per precision the platform lacks."""
    counts = Counter(wanted)
    resolved = {want: resolve_precision(platform, want) for want in counts}
    fallbacks: Counter[tuple[str, str]] = Counter()
    for want, used in resolved.items():
        if used != want:
            fallbacks[(want, used)] += counts[want]
    warnings = [
        f"platform '{platform.name}' has no {want} peak: {count} node(s) use its {used} peak"
        for (want, used), count in sorted(fallbacks.items())
    ]
    return resolved, warnings
