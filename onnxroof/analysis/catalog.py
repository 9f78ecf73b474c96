"""The findings catalog: each rule's id, name, severity and help text, the thresholds they fire at, and the
:class:`Finding` value every check yields (the checks themselves live in :mod:`onnxroof.analysis.findings`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from onnxroof.core.frozen import frozen_dataclass

if TYPE_CHECKING:
    from onnxroof.analysis.analyze import Analysis

SEVERITIES: tuple[str, ...] = ("error", "warning", "note")
"""Most severe first."""

#: A platform has matrix units (tensor cores) when its best low-precision peak is at least this many times
#: its fp32 peak: packed SIMD gives at most 4× (four int8 lanes per 32-bit lane), so more means matrix units.
TENSOR_CORE_RATIO = 6.0
#: Channel alignment tensor cores need, by the precision a node computes in (NVIDIA: multiples of 8 for
#: fp16/bf16, 16 for int8); other precisions use the fp16 figure (the precision the model should run in).
ALIGNMENT = MappingProxyType({"int8": 16, "fp8": 16, "int4": 32})
DEFAULT_ALIGNMENT = 8
#: OR002: a misaligned layer is reported when its padding wastes at least this share of the model's MACs.
MIN_WASTE_SHARE = 0.005
#: OR003: share of the predicted latency that memory-bound depthwise/grouped/1×1 convolutions must reach.
LOW_INTENSITY_CONV_SHARE = 0.15
#: OR004: share of the predicted latency that layout copies in movement-op chains must reach.
LAYOUT_CHAIN_SHARE = 0.05
#: OR005: how much faster the best low-precision peak must be than fp32.
LOW_PRECISION_RATIO = 4.0
#: OR006: share of the predicted latency in kernels dominated by launch overhead.
LAUNCH_OVERHEAD_SHARE = 0.30
#: OR008: a GEMM-like kernel under-uses a processing-element array below this utilization...
LOW_UTILIZATION = 0.5
#: ...and such kernels together take at least this share of the predicted latency.
LOW_UTILIZATION_SHARE = 0.10


@frozen_dataclass(slots=True)
class Finding:
    """One advisory: a stable rule id, a severity, the nodes at fault, the numbers and what to do."""

    id: str
    severity: str  # error | warning | note
    title: str
    node_ids: tuple[str, ...]
    message: str
    suggestion: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity,
            "title": self.title,
            "node_ids": list(self.node_ids),
            "message": self.message,
            "suggestion": self.suggestion,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(
            id=data["id"],
            severity=data["severity"],
            title=data["title"],
            node_ids=tuple(data["node_ids"]),
            message=data["message"],
            suggestion=data["suggestion"],
        )


@frozen_dataclass(slots=True)
class Rule:
    """A finding rule's metadata (SARIF ``reportingDescriptor``, docs)."""

    id: str
    name: str
    severity: str
    title: str
    trigger: str  # when it fires, in one sentence
    help: str  # why it matters, from deployment guidance


RULES: Mapping[str, Rule] = MappingProxyType(
    {
        r.id: r
        for r in (
            Rule(
                "OR001",
                "bn-not-folded",
                "warning",
                "BatchNorm cannot fold into a convolution",
                "A BatchNormalization that runs is not fed directly and only by a Conv/ConvTranspose with "
                "constant weights (e.g. Conv→ReLU→BN), or the fusion pass refused to fold it.",
                "Runtimes fold BatchNorm into the preceding convolution's weights and bias for free; a BN that "
                "cannot fold runs as its own memory-bound kernel.",
            ),
            Rule(
                "OR002",
                "channels-not-aligned",
                "warning",
                "Channel count not a multiple of the tensor-core width",
                "On a tensor-core platform, a Conv/ConvTranspose (or MatMul/Gemm with a weight operand) has "
                "per-group input or output channels not a multiple of 8 (16 for int8).",
                "Tensor cores work on tiles of 8 (fp16) or 16 (int8) channels; other counts are padded up (MACs "
                "wasted) or fall back to slower kernels.",
            ),
            Rule(
                "OR003",
                "low-intensity-conv",
                "warning",
                "Memory-bound depthwise/grouped or 1×1 convolutions take a large share of time",
                f"Depthwise/grouped and 1×1 convolutions below the ridge point take ≥ "
                f"{LOW_INTENSITY_CONV_SHARE:.0%} of the predicted latency.",
                "These convolutions do few FLOPs per byte and run at memory speed, far from the compute peak.",
            ),
            Rule(
                "OR004",
                "layout-chain",
                "warning",
                "Chains of Reshape/Transpose/Concat add layout traffic",
                f"Chains of two or more connected data-movement ops whose copies left after fusion take ≥ "
                f"{LAYOUT_CHAIN_SHARE:.0%} of the predicted latency.",
                "Each copy reads and writes the whole tensor without computing anything.",
            ),
            Rule(
                "OR005",
                "fp32-on-low-precision",
                "warning",
                "FP32 compute on a platform with much faster low-precision math",
                f"Float32 Conv/MatMul/Gemm work on a platform whose fp16/bf16/int8 peak is ≥ "
                f"{LOW_PRECISION_RATIO:g}× its fp32 peak.",
                "Tensor cores and int8 dot-product units only run at low precision; fp32 leaves most of the chip "
                "idle and moves twice the bytes of fp16.",
            ),
            Rule(
                "OR006",
                "launch-overhead",
                "warning",
                "Launch overhead dominates small kernels",
                f"Kernels whose launch overhead exceeds both their compute and memory time take ≥ "
                f"{LAUNCH_OVERHEAD_SHARE:.0%} of the predicted latency.",
                "Each kernel launch costs a fixed time; many tiny kernels spend more time launching than working.",
            ),
            Rule(
                "OR007",
                "exceeds-memory",
                "error",
                "Model does not fit in the platform's memory",
                "Weights plus peak activations exceed the platform's memory capacity.",
                "The model cannot be loaded and run on this device as is.",
            ),
            Rule(
                "OR008",
                "array-underutilized",
                "warning",
                "GEMM dims leave the processing-element array idle",
                f"On a platform with a PE array, GEMM-like kernels below {LOW_UTILIZATION:.0%} utilization (dims "
                f"that do not fill or divide the array) take ≥ {LOW_UTILIZATION_SHARE:.0%} of the predicted latency.",
                "An array computes whole tiles: a reduction or output dim just above a multiple of its height or "
                "width pads a nearly empty tile, and a depthwise convolution fills one column.",
            ),
        )
    }
)


def finding_weights(analysis: Analysis, findings: Iterable[Finding]) -> tuple[float, ...]:
    """How much each finding weighs, to show the worst of a kind first: ``Σ latency_s`` of its nodes (each
    node's own predicted time, unfused), 0 for nodes the analysis does not hold."""
    latency = dict(zip((op.id for op in analysis.nodes.ops), analysis.nodes.latency_s.tolist(), strict=True))
    return tuple(sum(latency.get(node, 0.0) for node in finding.node_ids) for finding in findings)


def launch_cost_text(analysis: Analysis) -> str:
    """The cost per launch placement charged, as OR006 says it: the runtime's per-kernel figure and name when a
    runtime ran (``5.5 µs each under torch-cuda on a100``), else the platform's launch overhead."""
    from onnxroof.core.units import seconds

    use, platform = analysis.runtime, analysis.platform
    if use is None:
        return f"{seconds(platform.launch_overhead_s)} each on {platform.name}"
    return f"{seconds(use.per_kernel_s)} each under {use.runtime.name} on {platform.name}"
