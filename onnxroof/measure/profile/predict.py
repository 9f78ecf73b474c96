"""The prediction side of a profile: what the analysis says about each kernel, and the ablation variants.

A compared row takes its predicted figures from :func:`onnxroof.analysis.analyze.analyze`'s kernels as they
are (latency, launch overhead, bound); nothing is re-derived here, so ``onnxroof report`` and ``onnxroof
profile`` cannot disagree. The row also names what the prediction used: the kernel's efficiency class
(:func:`onnxroof.fusion.opclass.kernel_op_class` of its anchor, as the analysis classes it) with the
platform's factor for it, and the memory level its bytes stream from (:func:`memory_level`).

:func:`variants` gives end-to-end predictions with fewer factors, to show what each one buys: the plain roofline
(DRAM bandwidth only, no derating), then with the measured cache levels, then with efficiency derating (=
the analysis' own total).
"""

from __future__ import annotations

from collections.abc import Sequence

from onnxroof.analysis.analyze import cold_weight_bytes
from onnxroof.core.cost import Cost
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.costing.opclass import input_channels
from onnxroof.fusion.opclass import kernel_op_class
from onnxroof.platform.model import Platform
from onnxroof.roofline.classify import classify
from onnxroof.roofline.kernels import KernelResult


@frozen_dataclass(slots=True)
class KernelFigures:
    """What the analysis predicts for one kernel, and the factors behind it."""

    op_class: str
    latency_s: float  # max(t_compute, t_memory) + launch overhead
    overhead_s: float  # launch overhead
    bound: str
    level: str  # memory level: dram, L1, L2..., or L1+dram when cold bytes come from DRAM
    efficiency: float  # the derating e applied (1: none)


def cold_weight_share(analysis, platform: Platform) -> float:
    """Bytes per weight parameter that come from DRAM on every run, as the analysis charged them
    (:func:`onnxroof.analysis.analyze.cold_weight_bytes`): the weights' item size when the model's weights and peak
    activations together exceed the largest measured cache level (evicted between runs), else 0."""
    totals = analysis.totals
    return cold_weight_bytes(platform, totals.weight_bytes, totals.params, totals.peak_activation_bytes)


def memory_level(platform: Platform, moved: float, cold: float) -> str:
    """The memory level a kernel moving ``moved`` bytes, ``cold`` of them from DRAM whatever the caches hold,
    streams from, named as :func:`onnxroof.roofline.classify.classify` names it: the smallest cache level holding the
    hot bytes (``L1``, ``L2``...), ``dram``, or ``L1+dram`` when both serve it."""
    if not platform.cache_levels:
        return "dram"
    cold = min(max(cold, 0.0), moved)
    hot = moved - cold
    _, level = platform.bandwidth_for(hot)
    if cold > 0 and level != "dram":
        return f"{level}+dram" if hot > 0 else "dram"
    return level


def kernel_figures(kernel: KernelResult, analysis, cold_per_param: float) -> KernelFigures:
    """The analysis' prediction for ``kernel`` (read, not recomputed) with the factors it used."""
    platform = analysis.platform
    op = analysis.op(kernel.node_ids[0]) if kernel.node_ids else None
    if op is not None:
        cls = kernel_op_class(kernel.op_types, kernel.patterns, op.domain, op.attrs, input_channels(op))
    else:
        cls = kernel_op_class(kernel.op_types, kernel.patterns)
    return KernelFigures(
        op_class=cls,
        latency_s=kernel.latency_s,
        overhead_s=kernel.t_overhead_s,
        bound=kernel.bound,
        level=memory_level(platform, kernel.bytes, kernel.params * cold_per_param),
        efficiency=platform.class_efficiency(cls),
    )


def variants(kernels: Sequence[KernelResult], platform: Platform, cold_per_param: float) -> dict[str, float]:
    """End-to-end predictions with the factors added one at a time, each with the per-kernel and per-run
    overheads: ``roofline`` (DRAM bandwidth only, no derating), ``roofline+cache`` (measured cache levels and
    cold weight bytes), ``roofline+cache+efficiency`` (Σ the analysis' kernel latencies: the prediction)."""
    totals = {"roofline": 0.0, "roofline+cache": 0.0, "roofline+cache+efficiency": 0.0}
    for kernel in kernels:
        cost = Cost(kernel.flops, kernel.macs, kernel.bytes_read, kernel.bytes_written, kernel.params)
        launches = max(1, round(kernel.t_overhead_s / platform.launch_overhead_s)) if platform.launch_overhead_s else 1
        common = {"launches": launches, "utilization": kernel.utilization}
        plain = classify(cost, platform, kernel.precision, hierarchy=False, **common)
        cached = classify(cost, platform, kernel.precision, cold_bytes=kernel.params * cold_per_param, **common)
        totals["roofline"] += plain.latency
        totals["roofline+cache"] += cached.latency
        totals["roofline+cache+efficiency"] += kernel.latency_s
    return {name: value + platform.run_overhead_s for name, value in totals.items()}
