"""Peak activation memory: tensor liveness over the topological order.

Model: a run-time tensor (graph input or activation) is allocated when its producer runs (graph inputs at
the start) and freed after its last consumer runs; graph outputs live to the end. Outputs of view ops
(Reshape, Squeeze, Identity...) alias their input's buffer instead of allocating one. The peak is the
largest sum of live buffers, counted while a node runs (its inputs and its outputs both live). Weights and
load-time constants are excluded: they are reported as weight bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from onnxroof.core.index import graph_index
from onnxroof.core.ir import ModelIR, OpView
from onnxroof.core.states import Role


@dataclass(frozen=True, slots=True)
class PeakMemory:
    bytes: float
    node_id: str | None  # the node running when the peak is reached
    unknown_tensors: int  # run-time tensors without a static shape (counted as 0 bytes)


def peak_activation_memory(ir: ModelIR) -> PeakMemory:
    """The peak of live run-time buffers over ``ir``'s order (model: module docstring; views from the IR's index)."""
    views = graph_index(ir).views
    buffer_of: dict[str, str] = {}
    size: dict[str, float] = {}
    unknown = 0

    def runtime(t) -> bool:
        return t is not None and t.role in (Role.INPUT, Role.ACTIVATION)

    def nbytes(t) -> float:
        nonlocal unknown
        if t.is_static_shape:
            return t.nbytes
        unknown += 1
        return 0.0

    for name in ir.graph_inputs:
        buffer_of[name] = name
        size[name] = nbytes(ir.tensors[name])
    last_use: dict[str, int] = {}
    ops: Sequence[OpView] = ir.ops
    for step, op in enumerate(ops):
        for t in op.outputs:
            if not runtime(t):
                continue
            if op.id in views and runtime(op.input(0)) and op.input(0).name in buffer_of:
                buffer_of[t.name] = buffer_of[op.input(0).name]
            else:
                buffer_of[t.name] = t.name
                size[t.name] = nbytes(t)
        for t in op.inputs:
            if runtime(t) and t.name in buffer_of:
                last_use[buffer_of[t.name]] = step
    end = len(ops)
    for name in ir.graph_outputs:
        if name in buffer_of:
            last_use[buffer_of[name]] = end
    free_at: dict[int, list[str]] = {}
    for buffer, step in last_use.items():
        free_at.setdefault(step, []).append(buffer)

    live = sum(size[name] for name in ir.graph_inputs)
    peak, peak_node = live, None
    allocated = set(ir.graph_inputs)
    for step, op in enumerate(ops):
        for t in op.outputs:
            if runtime(t) and buffer_of.get(t.name) == t.name and t.name not in allocated:
                allocated.add(t.name)
                live += size[t.name]
        if live > peak:
            peak, peak_node = live, op.id
        for buffer in free_at.get(step, ()):
            live -= size.get(buffer, 0.0)
        for t in op.outputs:  # outputs nobody reads are freed at once
            if runtime(t) and buffer_of.get(t.name) == t.name and t.name not in last_use:
                live -= size[t.name]
    return PeakMemory(peak, peak_node, unknown)
