"""From costed nodes to kernels: run the fusion pass for a profile and place every kernel on the roofline."""

from __future__ import annotations

from collections.abc import Sequence

from onnxroof.control_flow import NodeCost
from onnxroof.fusion import Miss, fuse
from onnxroof.ir import ModelIR
from onnxroof.kernels import KernelResult, place_kernel
from onnxroof.platform import Platform


def build_kernels(
    ir: ModelIR, results: Sequence, node_costs: Sequence[NodeCost], profile: str, platform: Platform
) -> tuple[tuple[KernelResult, ...], tuple[Miss, ...]]:
    """Kernels of ``profile`` placed on ``platform``'s roofline, and the candidates that did not fuse.

    A kernel computes at its anchor's precision; it launches once, except a lone control-flow node, which
    launches its body's kernels each iteration.
    """
    costs = {op.id: node_cost for op, node_cost in zip(ir.ops, node_costs, strict=True)}
    result_of = {r.id: r for r in results}
    op_of = {op.id: op for op in ir.ops}
    fusion = fuse(ir, costs, profile)
    kernels = tuple(
        place_kernel(
            kernel.id,
            kernel.pattern,
            kernel.node_ids,
            tuple(op_of[n].op_type for n in kernel.node_ids),
            kernel.cost,
            kernel.ideal,
            layout=kernel.layout,
            folded=kernel.folded_nodes,
            platform=platform,
            precision=result_of[kernel.node_ids[0]].precision,
            launches=costs[kernel.node_ids[0]].launches if len(kernel.node_ids) == 1 else 1,
        )
        for kernel in fusion.kernels
    )
    return kernels, fusion.misses
