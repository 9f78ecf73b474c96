"""Place a cost on a platform's roofline.

For a kernel with ``F`` FLOPs and ``B`` bytes moved on a platform with peak ``P`` (FLOP/s, for the precision
it computes in) and DRAM bandwidth ``W`` (B/s):

* intensity ``I = F / B`` (FLOP/byte); ridge ``R = P / W``;
* attainable FLOP/s ``= min(P, I · W)`` (the roofline);
* ``t_compute = F / P``, ``t_memory = B / W``;
* predicted time ``t = max(t_compute, t_memory) + t_launch`` (per-kernel launch/dispatch overhead);
* bound: ``compute`` when ``t_compute ≥ t_memory`` (equivalently ``I ≥ R``), else ``memory``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from onnxroof.cost import Cost
from onnxroof.errors import PlatformError
from onnxroof.platform import Platform

BOUND_COMPUTE = "compute"
BOUND_MEMORY = "memory"
BOUND_NONE = "none"  # nothing runs (views, folded constants, unsupported)

#: The platform precision an element type computes in. Integer and boolean ops that are not int8 run on
#: the vector units at roughly the fp32 rate, so they use the fp32 peak.
PRECISION_OF_DTYPE = {
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float64": "fp64",
    "int8": "int8",
    "uint8": "int8",
    "int4": "int4",
    "uint4": "int4",
    "float8e4m3fn": "fp8",
    "float8e4m3fnuz": "fp8",
    "float8e5m2": "fp8",
    "float8e5m2fnuz": "fp8",
}
PRECISIONS = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "int4")
#: When a platform lacks a precision the node computes in, the next one down this chain is used (and said).
FALLBACK = {
    "bf16": "fp16",
    "fp16": "fp32",
    "fp8": "fp16",
    "int4": "int8",
    "int8": "fp32",
    "fp64": "fp32",
    "tf32": "fp32",
}


def precision_of(dtype: str) -> str:
    return PRECISION_OF_DTYPE.get(dtype, "fp32")


def resolve_precision(platform: Platform, wanted: str) -> str:
    """The precision whose peak a node of precision ``wanted`` uses on ``platform`` (fallback chain)."""
    available = platform.precisions()
    current: str | None = wanted
    while current is not None:
        if current in available:
            return current
        current = FALLBACK.get(current)
    if not available:
        raise PlatformError(f"{platform.path}: no peak figures")
    return available[0]


@dataclass(frozen=True, slots=True)
class RooflinePoint:
    precision: str
    intensity: float
    peak_flops: float
    bandwidth: float
    ridge: float
    attainable_flops: float
    t_compute: float
    t_memory: float
    t_overhead: float
    latency: float
    bound: str


def classify(cost: Cost, platform: Platform, precision: str, runs: bool = True, launches: int = 1) -> RooflinePoint:
    """The roofline point of ``cost`` run at ``precision`` on ``platform``.

    ``runs=False`` (views, folded constants, unsupported ops) gives a zero-time point bound ``none``.
    ``launches`` kernels pay the launch overhead (a control-flow node launches its body's kernels each
    iteration).
    """
    peak = platform.peak(precision)
    bandwidth = platform.dram_bandwidth
    ridge = peak / bandwidth
    moved = cost.bytes
    intensity = cost.flops / moved if moved > 0 else (math.inf if cost.flops > 0 else 0.0)
    if not runs:
        return RooflinePoint(precision, intensity, peak, bandwidth, ridge, 0.0, 0.0, 0.0, 0.0, 0.0, BOUND_NONE)
    attainable = min(peak, intensity * bandwidth)
    t_compute = cost.flops / peak
    t_memory = moved / bandwidth
    overhead = platform.launch_overhead_s * launches
    bound = BOUND_COMPUTE if t_compute >= t_memory and cost.flops > 0 else BOUND_MEMORY
    return RooflinePoint(
        precision,
        intensity,
        peak,
        bandwidth,
        ridge,
        attainable,
        t_compute,
        t_memory,
        overhead,
        max(t_compute, t_memory) + overhead,
        bound,
    )
