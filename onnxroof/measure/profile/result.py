"""The comparison's result: rows of predicted against measured times, what did not match, and the JSON.

A :class:`Row` holds the kernels and the onnxruntime nodes that run the same original nodes; its ``ratio`` is
measured ÷ predicted and its achieved throughput ``FLOPs ÷ measured seconds``. :class:`ProfileResult` adds
the end-to-end figures, the unmatched nodes both ways, the Spearman rank correlation of per-row times
(:func:`spearman`) and the factors the prediction used; :meth:`ProfileResult.to_dict` is the JSON document
``onnxroof profile --format json`` writes (``kind: "onnxroof-profile"``, see docs/json-schema.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any

import numpy as np

from onnxroof.core.frozen import frozen_dataclass

PROFILE_KIND = "onnxroof-profile"
"""The ``kind`` of the profile JSON document (tells it from an analysis document)."""
PROFILE_SCHEMA = 1
"""The profile document's schema: fields are only added within it."""


class MeasuredPoint:
    """A predicted kernel (or group of kernels) with its measured time: the ratio and the achieved point.

    Mixed into frozen dataclasses that declare ``flops``, ``predicted_s`` and ``measured_s`` (seconds per run).
    """

    flops: float
    predicted_s: float
    measured_s: float

    @property
    def ratio(self) -> float:
        """measured ÷ predicted (above 1: slower than predicted; infinite when nothing is predicted)."""
        return self.measured_s / self.predicted_s if self.predicted_s > 0 else math.inf

    @property
    def achieved_flops(self) -> float:
        """FLOPs ÷ measured seconds: the measured point on the roofline (0 when nothing was measured)."""
        return self.flops / self.measured_s if self.measured_s > 0 else 0.0


@frozen_dataclass
class Row(MeasuredPoint):
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


@frozen_dataclass
class Unmatched:
    name: str
    op_type: str
    seconds: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "op_type": self.op_type, "seconds": self.seconds, "reason": self.reason}


@frozen_dataclass
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
    analysis: Any = field(default=None, compare=False, repr=False)
    """The :class:`~onnxroof.analysis.analyze.Analysis` the prediction came from (None when built by hand)."""

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
            "kind": PROFILE_KIND,
            "schema": PROFILE_SCHEMA,
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
