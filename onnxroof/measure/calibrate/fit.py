"""From timings to platform figures: each probe's FLOPs and bytes from onnxroof's own rules, and the memory
hierarchy (DRAM bandwidth and cache levels) from the bandwidth sweep.

Bandwidth of a sweep point: ``working set ÷ (time per op − per-kernel overhead)``. Efficiency of a probe:
``roofline time ÷ (measured time − per-kernel overhead)`` with ``roofline time = max(F ÷ P_fp32, B ÷ W)``,
``W`` the bandwidth of the smallest level holding the probe's bytes (:func:`bandwidth_for`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from onnx import helper

from onnxroof.core.errors import OnnxroofError
from onnxroof.measure.calibrate.probes import Probe
from onnxroof.measure.calibrate.timing import Timing
from onnxroof.measure.calibrate.write import Figure, mb_text

LEVEL_DROP = 1.5
"""A bandwidth drop by more than this factor starts the next memory level."""
MAX_LEVELS = 3


def probe_cost(probe: Probe) -> tuple[float, float, str]:
    """(FLOPs, bytes, efficiency class) of one copy of the probe, from onnxroof's own cost rules and its
    ``ort-cpu`` fusion (the kernels onnxroof predicts for two copies, halved); the class is the one onnxroof
    gives such a kernel (:func:`onnxroof.fusion.opclass.kernel_op_class`)."""
    from onnxroof.analysis.analyze import analyze
    from onnxroof.fusion.opclass import kernel_op_class

    if probe.cost is not None:
        return (*probe.cost, probe.op_class)
    model = probe.build(2)
    analysis = analyze(model, platform="xeon-8380", fusion="ort-cpu")
    if not analysis.kernels:
        raise OnnxroofError(f"calibrate: onnxroof has no cost for the probe {probe.name}")
    kernel = analysis.kernels[0]
    anchor = model.graph.node[int(kernel.node_ids[0].split(":", 1)[0])]
    attrs = {a.name: helper.get_attribute_value(a) for a in anchor.attribute}
    channels = probe.shape[1] if len(probe.shape) > 1 else None
    cls = kernel_op_class(kernel.op_types, kernel.patterns, "", attrs, channels)
    flops = sum(k.flops for k in analysis.kernels) / 2
    moved = sum(k.bytes for k in analysis.kernels) / 2
    return flops, moved, cls


def bandwidth_for(moved: float, levels: Sequence[tuple[float, Figure]], dram: float) -> float:
    for size, figure in levels:
        if moved <= size:
            return figure.value
    return dram


def hierarchy(
    sweep: Sequence[tuple[float, float, Timing]], threads_text: str
) -> tuple[Figure, tuple[tuple[float, Figure], ...]]:
    """DRAM bandwidth and cache levels from the bandwidth sweep.

    DRAM: the median of the two largest working sets. Levels: starting from the fastest working set, a level
    continues while bandwidth stays within a factor 1.5 of its best point; a larger drop starts the next level.
    Each level but the last (DRAM) whose median bandwidth beats DRAM's by 20 % or more becomes a cache level,
    sized at its largest measured working set (conservative: the true capacity lies between that and the next
    point). At most three levels are kept, merging the two closest in bandwidth.
    """
    points = [(ws, bw) for ws, bw, _ in sweep]
    tail = sorted(bw for _, bw in points[-2:])
    dram_value = float(np.median(tail))
    largest = points[-1][0]
    dram = Figure(
        dram_value,
        f"measured: chains of onnxruntime Relu ops streaming working sets of {mb_text(points[-2][0])} and "
        f"{mb_text(largest)} MB (one fp32 tensor read + one written), {threads_text}; bytes ÷ (time per op − "
        "per-kernel overhead), median of the two",
    )
    best = max(range(len(points)), key=lambda i: points[i][1])
    plateaus: list[list[tuple[float, float]]] = [[points[best]]]
    for point in points[best + 1 :]:
        current = plateaus[-1]
        if point[1] >= max(bw for _, bw in current) / LEVEL_DROP:
            current.append(point)
        else:
            plateaus.append([point])
    raw = [
        (max(ws for ws, _ in plateau), float(np.median([bw for _, bw in plateau])), plateau)
        for plateau in plateaus[:-1]
    ]
    raw = [level for level in raw if level[1] >= 1.2 * dram_value]
    while len(raw) > MAX_LEVELS:
        ratios = [raw[i][1] / raw[i + 1][1] for i in range(len(raw) - 1)]
        i = int(np.argmin(ratios))
        merged = raw[i][2] + raw[i + 1][2]
        raw[i : i + 2] = [(raw[i + 1][0], float(np.median([bw for _, bw in merged])), merged)]
    levels = []
    for size, bandwidth, plateau in raw:
        points_text = ", ".join(f"{mb_text(ws)} MB: {bw / 1e9:.3g} GB/s" for ws, bw in plateau)
        levels.append(
            (
                size,
                Figure(
                    bandwidth,
                    f"measured: median bandwidth of onnxruntime Relu chains over working sets {points_text} "
                    f"({threads_text}); size = the largest working set of this plateau",
                ),
            )
        )
    return dram, tuple(levels)
