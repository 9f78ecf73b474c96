"""From costed nodes to kernels: run the fusion profile's grouping and place every kernel on the roofline.

Profile ``none`` runs every costed node as its own kernel. In every profile a kernel's *ideal* cost drops
the bytes of elementwise and layout kernels (they could have been fused into a neighbour).
"""

from __future__ import annotations

from collections.abc import Sequence

from onnxroof.control_flow import NodeCost
from onnxroof.cost import Cost
from onnxroof.errors import OnnxroofError
from onnxroof.ir import ModelIR
from onnxroof.kernels import FusionMiss, KernelResult, place_kernel
from onnxroof.platform import Platform
from onnxroof.registry import KIND_LAYOUT, lookup

ELEMENTWISE_FAMILY = "onnxroof.rules.elementwise"
KNOWN_PROFILES = ("none", "ort-cpu", "tensorrt")  # grouping per profile: onnxroof.fusion


def is_elementwise(domain: str, op_type: str) -> bool:
    entry = lookup(domain, op_type)
    return entry is not None and entry.fn.__module__ == ELEMENTWISE_FAMILY


def build_kernels(
    ir: ModelIR, results: Sequence, node_costs: Sequence[NodeCost], profile: str, platform: Platform
) -> tuple[tuple[KernelResult, ...], tuple[FusionMiss, ...]]:
    """Kernels (placed on the roofline) and the fusion candidates that did not fuse."""
    if profile not in KNOWN_PROFILES:
        raise OnnxroofError(f"unknown fusion profile '{profile}'; known: {', '.join(KNOWN_PROFILES)}")
    kernels = []
    for op, result, node_cost in zip(ir.ops, results, node_costs, strict=True):
        if node_cost.state != "costed":
            continue
        cost = node_cost.cost
        free = node_cost.kind == KIND_LAYOUT or is_elementwise(op.domain, op.op_type)
        ideal = Cost(flops=cost.flops, macs=cost.macs, params=cost.params) if free else cost
        kernels.append(
            place_kernel(
                f"k{len(kernels)}",
                "single",
                (op.id,),
                (op.op_type,),
                cost,
                ideal,
                layout=node_cost.kind == KIND_LAYOUT,
                folded=(),
                platform=platform,
                precision=result.precision,
                launches=node_cost.launches,
            )
        )
    return tuple(kernels), ()
