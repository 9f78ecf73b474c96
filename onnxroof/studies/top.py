"""The kernels with the most predicted time, as a study keeps them (a comparison row, an LLM phase)."""

from __future__ import annotations

from onnxroof.analysis.analyze import Analysis
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.states import Bound


@frozen_dataclass(slots=True)
class TopKernel:
    """One kernel with much of an analysis' predicted time."""

    id: str
    op_types: tuple[str, ...]
    latency_s: float
    share: float
    """Of the analysis' predicted latency: ``latency_s / Σ latency_s`` (0 when that total is 0)."""
    bound: Bound


def top_kernels(analysis: Analysis, count: int) -> tuple[TopKernel, ...]:
    """The ``count`` kernels with the most predicted time, the slowest first (ties by id, as
    :meth:`~onnxroof.analysis.analyze.Analysis.top_kernels`)."""
    total = analysis.totals.latency_s
    return tuple(
        TopKernel(
            id=k.id,
            op_types=tuple(k.op_types),
            latency_s=k.latency_s,
            share=k.latency_s / total if total > 0 else 0.0,
            bound=k.bound,
        )
        for k in analysis.top_kernels(count)
    )


__all__ = ["TopKernel", "top_kernels"]
