"""Findings: lint-style deployment advisories drawn from an :class:`~onnxroof.analysis.analyze.Analysis`.

``find(analysis)`` returns every finding, each with a stable id, a severity (``error``, ``warning`` or
``note``), the node(s) at fault, a message that carries the numbers, and a suggestion. The rules come from
well-known deployment guidance (TensorRT / cuDNN performance guides, ONNX Runtime graph optimizations):

=====  ======================  =========================================================================
id     name                    fires when
=====  ======================  =========================================================================
OR001  bn-not-folded           a running BatchNormalization cannot fold into a preceding Conv: its input
                               is not a Conv/ConvTranspose output (Conv→ReLU→BN), the Conv's output is
                               also read elsewhere, the Conv's weights are not constant, or the fusion
                               pass reports a BN-fold miss for it
OR002  channels-not-aligned    on a tensor-core platform, a Conv/ConvTranspose (or a MatMul/Gemm with a
                               weight operand) has per-group input or output channels not a multiple of
                               8 (16 for int8) and padding them up wastes ≥ 0.5 % of the model's MACs;
                               the message gives the share of the layer's MACs wasted
OR003  low-intensity-conv      depthwise/grouped and 1×1 convolutions whose kernels are memory-bound
                               together take ≥ 15 % of the predicted latency
OR004  layout-chain            chains of ≥ 2 connected data-movement ops (Reshape, Transpose, Concat,
                               Slice...) whose copies left after fusion take ≥ 5 % of the latency
OR005  fp32-on-low-precision   float32 Conv/MatMul/Gemm work on a platform whose fp16/bf16/int8 peak is
                               ≥ 4× its fp32 peak
OR006  launch-overhead         kernels whose launch overhead exceeds both their compute and memory time
                               take ≥ 30 % of the predicted latency
OR007  exceeds-memory          weights + peak activations exceed the platform's memory capacity
OR008  array-underutilized     on a platform with a processing-element array, GEMM-like kernels below 50 %
                               utilization take ≥ 10 % of the predicted latency
=====  ======================  =========================================================================

Every threshold is a named module constant. Findings are computed from kernels where the fusion pass has
grouped nodes (what a runtime actually launches) and from the graph structure where a question is about
the model itself (which node feeds a BatchNorm).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import numpy as np

from onnxroof.analysis.catalog import (
    ALIGNMENT,
    DEFAULT_ALIGNMENT,
    LAUNCH_OVERHEAD_SHARE,
    LAYOUT_CHAIN_SHARE,
    LOW_INTENSITY_CONV_SHARE,
    LOW_PRECISION_RATIO,
    LOW_UTILIZATION,
    LOW_UTILIZATION_SHARE,
    MIN_WASTE_SHARE,
    RULES,
    SEVERITIES,
    TENSOR_CORE_RATIO,
    Finding,
    Rule,
    launch_cost_text,
)
from onnxroof.analysis.finding_context import FindingContext, node_index
from onnxroof.core.gemm import gemm_shape
from onnxroof.core.states import Bound, NodeState, RuleKind
from onnxroof.core.units import percent, seconds, si

if TYPE_CHECKING:
    from onnxroof.analysis.analyze import Analysis, NodeResult
    from onnxroof.core.ir import OpView
    from onnxroof.roofline.kernels import KernelResult, KernelTable
__all__ = ["RULES", "SEVERITIES", "Finding", "Rule", "find", "has_tensor_cores"]

_CONVS = ("Conv", "ConvTranspose")
_MAC_OPS = ("Conv", "ConvTranspose", "MatMul", "Gemm")
_LOW_PRECISIONS = ("fp16", "bf16", "fp8", "int8")


def find(analysis: Analysis) -> tuple[Finding, ...]:
    """Every finding for ``analysis``, in rule-id order, then by the first node's position."""
    context = FindingContext(analysis)
    findings: list[Finding] = []
    for check in _CHECKS:
        findings.extend(check(context))
    return tuple(findings)


# --------------------------------------------------------------------------------------------- OR001


def _bn_not_folded(ctx: FindingContext) -> Iterable[Finding]:
    rule = RULES["OR001"]
    misses: dict[str, str] = {}
    for miss in ctx.analysis.fusion_misses:
        text = f"{miss.pattern} {miss.reason}".lower()
        if "bn" in miss.pattern.lower() or "batchnorm" in text:
            for nid in miss.node_ids:
                node = ctx.node(nid)
                if node is not None and node.op_type == "BatchNormalization":
                    misses.setdefault(nid, miss.reason)
    for node in ctx.nodes_of("BatchNormalization"):
        if node.state != NodeState.COSTED:
            continue
        kernel = ctx.kernel_of.get(node.id)
        if kernel is not None and node.id in kernel.folded_nodes:
            continue
        reason = misses.get(node.id) or _bn_structure(ctx, node.id)
        if reason is None:
            continue
        latency = kernel.latency_s if kernel is not None and kernel.node_ids == (node.id,) else node.latency_s
        yield Finding(
            rule.id,
            rule.severity,
            rule.title,
            (node.id,),
            f"{ctx.label(node.id)} cannot fold into a convolution: {reason}. Unfolded, it computes "
            f"{si(node.flops, 'FLOP')} and moves {si(node.bytes, 'B')} on its own: {seconds(latency)} "
            f"({percent(ctx.share(latency))} of the predicted latency).",
            "Put BatchNorm directly after the convolution (Conv→BN→ReLU) so that the export or the runtime "
            "folds it into the convolution's weights and bias; if the order is intended, fold its scale and "
            "shift into the next linear layer offline.",
        )


def _bn_structure(ctx: FindingContext, bn_id: str) -> str | None:
    """Why the graph keeps this BatchNorm from folding into a convolution, or None if it could fold."""
    op = ctx.op(bn_id)
    if op is None or op.input(0) is None:
        return None
    tensor = op.input(0).name
    src = ctx.producer(bn_id, tensor)
    if src is None:
        return f"its input '{tensor}' is a graph input, not a convolution's output"
    producer = ctx.op(src)
    if producer.op_type not in _CONVS:
        return f"it follows {ctx.label(src)}, not a Conv (Conv→{producer.op_type}→BN does not fold)"
    readers = ctx.readers(src, tensor)
    if readers > 1:
        return f"the output of {ctx.label(src)} is also read by {readers - 1} other consumer(s)"
    weight = producer.input(1)
    if weight is not None and not weight.is_constant:
        return f"the weights of {ctx.label(src)} are not constant"
    return None


# --------------------------------------------------------------------------------------------- OR002


def has_tensor_cores(platform) -> bool:
    """A GPU whose best low-precision peak is ≥ TENSOR_CORE_RATIO × its fp32 peak."""
    fp32 = platform.peak_flops.get("fp32")
    best = max((platform.peak_flops.get(p, 0.0) for p in _LOW_PRECISIONS), default=0.0)
    return platform.kind == "gpu" and bool(fp32) and best >= TENSOR_CORE_RATIO * fp32


def _gemm_dims(op: OpView | None) -> tuple[int | None, int | None, int] | None:
    """(reduction channels per group, output channels per group, groups) of a MAC op (the channel dims of
    :func:`onnxroof.core.gemm.gemm_shape`), or None when not applicable."""
    if op is None or op.op_type not in _MAC_OPS:
        return None
    shape = gemm_shape(op)
    if shape is None:
        return None
    if op.op_type in _CONVS:
        return shape.in_channels, shape.out_channels, shape.groups or 1
    weight = op.input(1)
    if weight is None or not weight.is_constant:
        return None  # activation × activation (attention): dims follow the sequence, not the design
    return shape.in_channels, shape.out_channels, 1


def _channels_not_aligned(ctx: FindingContext) -> Iterable[Finding]:
    if not has_tensor_cores(ctx.platform):
        return
    rule = RULES["OR002"]
    model_macs = ctx.analysis.totals.macs
    nodes = ctx.analysis.nodes
    for row in ctx.rows_of(*_MAC_OPS):  # read off the columns: a view only for a node found
        if nodes.node_costs[row].state != NodeState.COSTED or nodes.costs[row].macs <= 0:
            continue
        dims = _gemm_dims(nodes.ops[row])
        if dims is None:
            continue
        reduction, output, groups = dims
        if reduction is None or output is None or reduction <= 1 or output < 1:
            # no channels to pad (a malformed node's zero or negative count); depthwise (one channel per
            # group) never runs on tensor cores: see OR003
            continue
        align = ALIGNMENT.get(nodes.precision[row], DEFAULT_ALIGNMENT)
        padded_r, padded_o = _pad(reduction, align), _pad(output, align)
        if (padded_r, padded_o) == (reduction, output):
            continue
        node = nodes[row]
        waste = 1 - (reduction * output) / (padded_r * padded_o)
        wasted_macs = node.macs * (padded_r * padded_o) / (reduction * output) - node.macs
        if wasted_macs < MIN_WASTE_SHARE * model_macs:
            continue
        names = ("input", "output") if node.op_type in _CONVS else ("K", "N")
        parts = [
            f"{names[0]} channels {reduction}" if reduction != padded_r else "",
            f"{names[1]} channels {output}" if output != padded_o else "",
        ]
        per_group = " per group" if groups > 1 else ""
        what = " and ".join(p for p in parts if p)
        tile = node.precision if node.precision in ALIGNMENT else "fp16"
        yield Finding(
            rule.id,
            rule.severity,
            rule.title,
            (node.id,),
            f"{ctx.label(node.id)} has {what}{per_group}, not a multiple of {align} (the {tile} tensor-core "
            f"tile on {ctx.platform.name}). Padded to {padded_r}×{padded_o}, {percent(waste)} of its MACs "
            f"({si(wasted_macs)} of {si(node.macs / (1 - waste))}) are wasted on padding "
            f"({percent(wasted_macs / model_macs if model_macs else 0.0)} of the model's MACs).",
            f"Round channel counts up to a multiple of {align} when designing or pruning the layer (for a 3-channel "
            "image input, pad the input to 4 or 8 channels), or export in a layout the runtime pads once.",
        )


def _pad(value: int, align: int) -> int:
    return -(-value // align) * align


# --------------------------------------------------------------------------------------------- OR003


def _low_intensity_convs(ctx: FindingContext) -> Iterable[Finding]:
    rule = RULES["OR003"]
    picked: list[tuple[NodeResult, KernelResult]] = []
    for node in ctx.nodes_of("Conv"):
        kernel = ctx.kernel_of.get(node.id)
        if node.state != NodeState.COSTED or kernel is None or kernel.node_ids[0] != node.id:
            continue
        dims = _gemm_dims(ctx.op(node.id))
        w = node.input_shapes[1]
        pointwise = w is not None and len(w) > 2 and all(d == 1 for d in w[2:])
        if dims is None or not (dims[2] > 1 or pointwise) or kernel.bound != Bound.MEMORY:
            continue
        picked.append((node, kernel))
    time = sum(k.latency_s for _, k in picked)
    if not picked or ctx.share(time) < LOW_INTENSITY_CONV_SHARE:
        return
    grouped = sum(1 for n, _ in picked if (d := _gemm_dims(ctx.op(n.id))) is not None and d[2] > 1)
    lowest = min(k.intensity for _, k in picked)
    highest = max(k.intensity for _, k in picked)
    precision = picked[0][1].precision
    yield Finding(
        rule.id,
        rule.severity,
        rule.title,
        tuple(n.id for n, _ in picked),
        f"{len(picked)} convolution kernel(s) ({grouped} depthwise/grouped, {len(picked) - grouped} 1×1) run "
        f"below the ridge point at {lowest:.3g}–{highest:.3g} FLOP/B (ridge {ctx.platform.ridge(precision):.3g} "
        f"FLOP/B at {precision}) and take {seconds(time)}, {percent(ctx.share(time))} of the predicted latency.",
        "Let the runtime fuse them with their neighbours (depthwise+pointwise, conv+activation), run them in "
        "fp16/int8 to cut their traffic, raise the batch size, or trade depthwise-separable blocks for dense "
        "convolutions where the FLOPs are affordable (e.g. fused-MBConv).",
    )


# --------------------------------------------------------------------------------------------- OR004


def _copy_time_bound(kernels: KernelTable) -> float:
    """An upper bound on the time of OR004's chains: ``Σ_k latency_k · |members_k|`` over the copy kernels
    (``layout``). A chain's time is that of the copy kernels holding its nodes, each once per chain, and a kernel
    is in at most as many chains as it has member nodes."""
    latency = kernels.figures.latency_s.tolist()
    return sum(len(ids) * t for ids, t, copy in zip(kernels.node_ids, latency, kernels.layout, strict=True) if copy)


def _layout_chains(ctx: FindingContext) -> Iterable[Finding]:
    """OR004. When even :func:`_copy_time_bound` is below the share, no chain is looked for."""
    if ctx.analysis.ir is None:
        return
    rule = RULES["OR004"]
    if ctx.share(_copy_time_bound(ctx.analysis.kernels)) * (1 + 1e-9) < LAYOUT_CHAIN_SHARE:
        return  # even counted once per member node, the copies left after fusion take too little time
    table = ctx.analysis.nodes
    movers = {
        op.id
        for op, cost in zip(table.ops, table.node_costs, strict=True)
        if cost.kind in (RuleKind.LAYOUT, RuleKind.VIEW) and cost.state in (NodeState.COSTED, NodeState.ZERO)
    }
    chains = []
    for chain in ctx.components(movers):
        if len(chain) < 2:
            continue
        kernels = {ctx.kernel_of[nid].id: ctx.kernel_of[nid] for nid in chain if nid in ctx.kernel_of}
        layout = [k for k in kernels.values() if k.layout]
        if layout:
            chains.append((chain, sum(k.latency_s for k in layout), sum(k.bytes for k in layout)))
    time = sum(t for _, t, _ in chains)
    if not chains or ctx.share(time) < LAYOUT_CHAIN_SHARE:
        return
    moved = sum(b for _, _, b in chains)
    order = ctx.row
    chains.sort(key=lambda c: (-c[1], order[c[0][0]]))
    biggest = chains[0][0]
    shape = "→".join(table.ops[order[nid]].op_type for nid in biggest)
    node_ids = tuple(sorted((nid for chain, _, _ in chains for nid in chain), key=order.__getitem__))
    yield Finding(
        rule.id,
        rule.severity,
        rule.title,
        node_ids,
        f"{len(chains)} chain(s) of data-movement ops copy {si(moved, 'B')} in {seconds(time)}, "
        f"{percent(ctx.share(time))} of the predicted latency (largest: {shape} from {ctx.label(biggest[0])}).",
        "Fold the reshapes and transposes into the neighbouring MatMul/Conv (transposed weights, a layout the "
        "consumer reads directly), keep one tensor layout end to end (NCHW or NHWC), and replace "
        "Concat-then-Split patterns by writing into preallocated slices.",
    )


# --------------------------------------------------------------------------------------------- OR005


def _fp32_on_low_precision(ctx: FindingContext) -> Iterable[Finding]:
    rule = RULES["OR005"]
    peaks = ctx.platform.peak_flops
    fp32 = peaks.get("fp32")
    ratios = {p: peaks[p] / fp32 for p in _LOW_PRECISIONS if fp32 and p in peaks}
    if not fp32 or not ratios or max(ratios.values()) < LOW_PRECISION_RATIO:
        return
    nodes = [
        n
        for n in ctx.nodes_of(*_MAC_OPS)
        if n.state == NodeState.COSTED and n.dtype == "float32" and n.precision == "fp32"
    ]
    if not nodes:
        return
    flops = sum(n.flops for n in nodes)
    compute = sum(n.t_compute_s for n in nodes)
    floats = [p for p in ratios if p != "int8"]
    targets = [max(floats, key=ratios.__getitem__)] if floats else []
    targets += ["int8"] if "int8" in ratios else []
    would = " and ".join(f"{seconds(compute / ratios[p])} at {p}" for p in targets)
    shown = ", ".join(f"{p} {ratios[p]:.3g}×" for p in _LOW_PRECISIONS if p in ratios)
    nodes.sort(key=lambda n: (-n.latency_s, node_index(n.id)))
    total_flops = ctx.analysis.totals.flops
    yield Finding(
        rule.id,
        rule.severity,
        rule.title,
        tuple(n.id for n in nodes),
        f"{len(nodes)} Conv/MatMul/Gemm node(s) compute in fp32: {si(flops, 'FLOP')} "
        f"({percent(flops / total_flops if total_flops else 0.0)} of the model's). {ctx.platform.name}'s "
        f"low-precision peaks are {shown} its fp32 peak ({si(fp32, 'FLOP/s')}): their compute time "
        f"{seconds(compute)} would be {would}.",
        f"Build the engine in {targets[0]} (mixed precision keeps sensitive layers in fp32) or quantize to "
        "int8 with calibration; check accuracy on a validation set, then pass --precision to cost it.",
    )


# --------------------------------------------------------------------------------------------- OR006


def _launch_overhead(ctx: FindingContext) -> Iterable[Finding]:
    rule = RULES["OR006"]
    kernels = ctx.analysis.kernels
    figures = kernels.figures
    overhead = figures.t_overhead_s
    launch_bound = (overhead > 0) & (overhead > figures.t_compute_s) & (overhead > figures.t_memory_s)
    small = [kernels[row] for row in np.flatnonzero(launch_bound).tolist()]
    time = sum(k.latency_s for k in small)
    if not small or ctx.share(time) < LAUNCH_OVERHEAD_SHARE:
        return
    overhead = sum(k.t_overhead_s for k in small)
    yield Finding(
        rule.id,
        rule.severity,
        rule.title,
        tuple(nid for k in small for nid in k.node_ids),
        f"{len(small)} of {len(ctx.analysis.kernels)} kernels spend longer launching ({launch_cost_text(ctx.analysis)})"
        f" than computing or moving data; they take {seconds(time)}, {percent(ctx.share(time))} of the predicted"
        f" latency, {seconds(overhead)} of it launch overhead.",
        "Let the runtime fuse small ops (TensorRT, ONNX Runtime graph optimizations at level 'all'), "
        "constant-fold shape arithmetic before export, batch several inputs per call, or capture the graph "
        "(CUDA graphs) to pay the launch cost once.",
    )


# --------------------------------------------------------------------------------------------- OR007


def _exceeds_memory(ctx: FindingContext) -> Iterable[Finding]:
    capacity = ctx.platform.memory_capacity
    totals = ctx.analysis.totals
    needed = totals.weight_bytes + totals.peak_activation_bytes
    if capacity is None or not math.isfinite(needed) or needed <= capacity:
        return
    rule = RULES["OR007"]
    node_ids = (totals.peak_activation_node,) if totals.peak_activation_node else ()
    yield Finding(
        rule.id,
        rule.severity,
        rule.title,
        node_ids,
        f"Weights ({si(totals.weight_bytes, 'B')}) plus peak activations ({si(totals.peak_activation_bytes, 'B')}"
        + (f" at {ctx.label(totals.peak_activation_node)}" if totals.peak_activation_node else "")
        + f") need {si(needed, 'B')}, {needed / capacity:.3g}× the {si(capacity, 'B')} of {ctx.platform.name}.",
        "Quantize the weights (fp16 halves them, int8 quarters them), shrink the batch or sequence length to cut "
        "activations, split the model across devices, or pick a platform with more memory.",
    )


# --------------------------------------------------------------------------------------------- OR008


def _array_underutilized(ctx: FindingContext) -> Iterable[Finding]:
    array = ctx.platform.array
    if array is None:
        return
    low = [k for k in ctx.analysis.kernels if k.macs > 0 and k.utilization < LOW_UTILIZATION]
    share = ctx.share(sum(k.latency_s for k in low))
    if not low or share < LOW_UTILIZATION_SHARE:
        return
    worst = sorted(low, key=lambda k: (-k.latency_s, k.id))
    rule = RULES["OR008"]
    named = ", ".join(f"{ctx.label(k.node_ids[0])} at {percent(k.utilization)}" for k in worst[:3])
    yield Finding(
        rule.id,
        rule.severity,
        rule.title,
        tuple(k.node_ids[0] for k in worst),
        f"{len(low)} kernel(s) use less than {percent(LOW_UTILIZATION)} of the {array.height}×{array.width}"
        f"×{array.instances} array and take {percent(share)} of the predicted latency ({named}).",
        f"Make reduction dims multiples of {array.height} and output dims multiples of {array.width} (channels, "
        "hidden sizes, heads), batch small GEMMs together, or replace depthwise convolutions by dense ones where "
        "the array makes them nearly free.",
    )


_CHECKS: tuple[Callable[[FindingContext], Iterable[Finding]], ...] = (
    _bn_not_folded,
    _channels_not_aligned,
    _low_intensity_convs,
    _layout_chains,
    _fp32_on_low_precision,
    _launch_overhead,
    _exceeds_memory,
    _array_underutilized,
)
