"""One sentence on why a row's measurement differs from its prediction."""

from __future__ import annotations

import math
from dataclasses import replace

from onnxroof.core.states import Bound
from onnxroof.core.units import seconds, si
from onnxroof.measure.profile.result import Row


def explain(row: Row, platform) -> str:
    """One sentence on why a row's measurement differs from its prediction (empty when within 25 %)."""
    ratio = row.ratio
    if row.measured_s <= 0 or not math.isfinite(ratio) or 0.8 <= ratio <= 1.25:
        return ""
    factor = f"{ratio:.1f}× slower" if ratio > 1 else f"{1 / ratio:.1f}× faster"
    where = f"predicted {row.bound}-bound at {si(row.intensity)} FLOP/B"
    fused = len(row.kernels) > 1 or len(row.ort_nodes) > 1
    roof_s = row.predicted_s - row.predicted_overhead_s
    if ratio > 1:
        if row.measured_s < 20e-6 and row.predicted_overhead_s + 2e-6 >= roof_s:
            return (
                f"{where} but measured {factor}: a small kernel ({seconds(row.measured_s)}) dominated by dispatch "
                f"overhead, not by its {si(row.flops, 'FLOP')} or {si(row.bytes, 'B')}"
            )
        if row.bound == Bound.COMPUTE:
            share = row.achieved_flops / (row.efficiency * _peak_for(platform)) if row.efficiency else 0.0
            return (
                f"{where} but measured {factor}: reached {si(row.achieved_flops, 'FLOP/s')}, {share:.0%} of the "
                f"derated peak — {row.op_class} kernels of this shape use the vector units poorly"
            )
        return (
            f"{where} but measured {factor}: moved {si(row.bytes, 'B')} at {si(row.achieved_bandwidth, 'B/s')} "
            f"against the {row.level} roof — more traffic or less streaming than the model assumes"
            + (" (onnxruntime ran these ops separately)" if len(row.ort_nodes) > 1 else "")
        )
    if fused and len(row.kernels) > len(row.ort_nodes):
        return (
            f"{where} but measured {factor}: onnxruntime fused {len(row.kernels)} onnxroof kernels into "
            f"{len(row.ort_nodes)} node(s), saving their launches and intermediate traffic"
        )
    if row.bound == Bound.MEMORY:
        return (
            f"{where} but measured {factor}: its {si(row.bytes, 'B')} working set stayed in a faster cache than "
            f"the {row.level} roof assumed"
        )
    return (
        f"{where} but measured {factor}: reached {si(row.achieved_flops, 'FLOP/s')}, above the derated peak — "
        f"the {row.op_class} efficiency figure is too pessimistic for this shape"
    )


def _peak_for(platform) -> float:
    return platform.peak("fp32") if "fp32" in platform.peak_flops else max(platform.peak_flops.values())


def explained(row: Row, platform) -> Row:
    """``row`` with its :func:`explain` sentence filled in."""
    return replace(row, explanation=explain(row, platform))
