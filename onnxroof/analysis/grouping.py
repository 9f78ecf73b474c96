"""From costed nodes to kernels: run the fusion pass for a profile and place every kernel on the roofline."""

from __future__ import annotations

from collections.abc import Sequence

from onnxroof.core.ir import ModelIR
from onnxroof.core.kernel import Kernel, Miss
from onnxroof.core.node_cost import NodeCost
from onnxroof.fusion.fuse import fuse
from onnxroof.fusion.graph import FusionGraph
from onnxroof.fusion.patterns import QDQ_PATTERNS, graph_captured
from onnxroof.platform.model import Platform
from onnxroof.roofline.classify import kernel_op_class, resolve_precision
from onnxroof.roofline.kernels import KernelResult, kernel_points, place_kernel
from onnxroof.roofline.pe_array import first_gemm_shape, utilization


def build_kernels(
    ir: ModelIR,
    results: Sequence,
    node_costs: Sequence[NodeCost],
    profile: str,
    platform: Platform,
    cold_per_param: float = 0.0,
) -> tuple[tuple[KernelResult, ...], tuple[Miss, ...]]:
    """Kernels of ``profile`` placed on ``platform``'s roofline, and the candidates that did not fuse.

    ``results`` and ``node_costs``: one per op of ``ir``, in the order of ``ir.ops``.

    A kernel computes at its anchor's precision (a QDQ kernel at int8: :func:`kernel_precision`) and takes the
    efficiency class of the op the runtime runs for it (:func:`onnxroof.roofline.classify.kernel_op_class`); it launches
    once, except a lone control-flow node, which launches its body's kernels each iteration. ``cold_per_param``
    bytes per weight element come from DRAM even on a platform with cache levels (weights evicted between runs;
    see :func:`cold_weight_bytes`).
    """
    costs = {op.id: node_cost for op, node_cost in zip(ir.ops, node_costs, strict=True)}
    if len(results) != len(ir.ops):
        raise ValueError(f"{len(results)} node results for {len(ir.ops)} ops")
    graph = FusionGraph(ir, costs)
    op_of, position = graph.ops, graph.position
    fusion = fuse(ir, costs, profile, graph)
    captured = graph_captured(profile)  # one graph launch per run, counted in the totals
    points = kernel_points(platform)
    placed = []
    type_lists: dict[tuple[str, ...], tuple[str, ...]] = {}  # equal op-type lists shared: kernels repeat them
    for kernel in fusion.kernels:
        ops = [op_of[n] for n in kernel.node_ids]
        op_types = tuple(op.op_type for op in ops)
        op_types = type_lists.setdefault(op_types, op_types)
        placed.append(
            place_kernel(
                kernel.id,
                kernel.patterns,
                kernel.node_ids,
                op_types,
                kernel.cost,
                kernel.ideal,
                layout=kernel.layout,
                folded=kernel.folded_nodes,
                platform=platform,
                precision=kernel_precision(kernel, results[position[kernel.node_ids[0]]], platform),
                launches=0 if captured else costs[kernel.node_ids[0]].launches if len(kernel.node_ids) == 1 else 1,
                op_class=_kernel_class(kernel, ops[0], op_types),
                cold_bytes=kernel.cost.params * cold_per_param,
                utilization=array_utilization(platform, ops),
                points=points,
            )
        )
    kernels = tuple(placed)
    return kernels, fusion.misses


def kernel_precision(kernel: Kernel, anchor, platform: Platform) -> str:
    """The precision ``kernel`` computes at: its ``anchor`` node result's, except that a QDQ kernel (run as
    QLinearConv / QLinearMatMul / QGemm: :data:`onnxroof.fusion.patterns.QDQ_PATTERNS`) computes at the platform's
    int8 peak (through the fallback chain). A what-if precision restates floating-point tensors and nodes; the
    integer kernels keep theirs."""
    return resolve_precision(platform, "int8") if QDQ_PATTERNS.intersection(kernel.patterns) else anchor.precision


def array_utilization(platform: Platform, ops: Sequence) -> float:
    """Utilization of the platform's processing-element array by a kernel of ``ops`` (its first GEMM-like
    member, :mod:`onnxroof.roofline.pe_array`); 1 without an array or for kernels that are not GEMM-like."""
    if platform.array is None:
        return 1.0
    shape = first_gemm_shape(ops)
    return 1.0 if shape is None else utilization(shape, platform.array)


def channels_of(op) -> int | None:
    """The channel count of an op's first input (dim 1), when static: used to tell depthwise convolutions."""
    first = op.input(0)
    if first is None or first.shape is None or len(first.shape) < 2:
        return None
    return first.shape[1]


def _kernel_class(kernel, anchor, op_types: tuple[str, ...]) -> str:
    return kernel_op_class(op_types, kernel.patterns, anchor.domain, anchor.attrs, channels_of(anchor))


def cold_weight_bytes(platform: Platform, weight_bytes: float, params: float, peak_activation_bytes: float) -> float:
    """Bytes per weight element read from DRAM on every run: the weights' item size when weights and peak
    activations together exceed the platform's largest cache level (evicted between runs), else 0. Platforms
    without measured cache levels stream everything from DRAM anyway (0 here, nothing changes)."""
    if not platform.cache_levels or params <= 0:
        return 0.0
    return weight_bytes / params if weight_bytes + peak_activation_bytes > platform.cache_levels[-1].size else 0.0
