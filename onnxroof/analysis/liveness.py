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


#: The roles of run-time buffers (a tuple: ``in`` on it compares identities first, cheaper than hashing an enum).
_RUNTIME = (Role.INPUT, Role.ACTIVATION)


def peak_activation_memory(ir: ModelIR) -> PeakMemory:
    """The peak of live run-time buffers over ``ir``'s order (model: module docstring; views from the IR's index).

    Two passes over the ops, every check inlined (they run for every tensor of the model): the first finds each
    buffer's size and last use, the second walks the order adding and freeing buffers in the sequence the model
    states, so the float sums are the same to the last bit. A tensor that owns its buffer (a graph input, the
    output of an op that is not a view) has a size; a view's output is in ``alias``, naming the buffer it shares.
    """
    views = graph_index(ir).views
    alias: dict[str, str] = {}
    size: dict[str, float] = {}
    unknown = 0

    def buffer(name: str) -> str | None:
        return alias.get(name) or (name if name in size else None)

    for name in ir.graph_inputs:
        tensor = ir.tensors[name]
        if tensor.is_static_shape:
            size[name] = tensor.nbytes
        else:
            size[name] = 0.0
            unknown += 1
    last_use: dict[str, int] = {}
    ops: Sequence[OpView] = ir.ops
    for step, op in enumerate(ops):
        source = None  # the buffer a view's outputs alias
        if op.id in views and op.inputs:
            first = op.inputs[0]
            if first is not None and first.role in _RUNTIME:
                source = buffer(first.name)
        for t in op.outputs:
            if t is None or t.role not in _RUNTIME:
                continue
            if source is not None:
                alias[t.name] = source
            elif t.is_static_shape:
                size[t.name] = t.nbytes
            else:
                size[t.name] = 0.0
                unknown += 1
        for t in op.inputs:
            if t is not None and t.role in _RUNTIME:
                name = t.name
                used = alias.get(name) or (name if name in size else None)  # buffer(), inlined
                if used is not None:
                    last_use[used] = step
    end = len(ops)
    for name in ir.graph_outputs:
        used = buffer(name)
        if used is not None:
            last_use[used] = end
    free_at: dict[int, list[str]] = {}
    for used, step in last_use.items():
        free_at.setdefault(step, []).append(used)

    live = sum(size[name] for name in ir.graph_inputs)
    peak, peak_node = live, None
    allocated = set(ir.graph_inputs)
    for step, op in enumerate(ops):
        for t in op.outputs:
            if t is not None:
                name = t.name
                if name in size and name not in alias and name not in allocated:
                    allocated.add(name)
                    live += size[name]
        if live > peak:
            peak, peak_node = live, op.id
        freed = free_at.get(step)
        if freed is not None:
            for used in freed:
                live -= size.get(used, 0.0)
        for t in op.outputs:  # outputs nobody reads are freed at once
            if t is not None:
                name = t.name
                if name not in last_use and name in size and name not in alias:
                    live -= size[name]
    return PeakMemory(peak, peak_node, unknown)
