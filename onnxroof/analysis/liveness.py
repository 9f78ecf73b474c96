"""Peak activation memory: tensor liveness over the topological order.

Model: a run-time tensor (graph input or activation) is allocated when its producer runs (graph inputs at
the start) and freed after its last consumer runs; graph outputs live to the end. Outputs of view ops
(Reshape, Squeeze, Identity...) alias their input's buffer instead of allocating one. The peak is the
largest sum of live buffers, counted while a node runs (its inputs and its outputs both live). Weights and
load-time constants are excluded: they are reported as weight bytes.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from itertools import islice
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.ir import ModelIR, OpView
from onnxroof.core.states import Role


@frozen_dataclass(slots=True)
class PeakMemory:
    """The peak of live run-time buffers, bytes (module docstring), and the node running when it is reached."""

    bytes: float
    node_id: str | None  # the node running when the peak is reached
    unknown_tensors: int  # run-time tensors without a static shape (counted as 0 bytes)


#: The roles of run-time buffers (a tuple: ``in`` on it compares identities first, cheaper than hashing an enum).
_RUNTIME = (Role.INPUT, Role.ACTIVATION)


def peak_activation_memory(ir: ModelIR) -> PeakMemory:
    """The peak of live run-time buffers over ``ir``'s order (model: module docstring; views from the IR's index).

    Two passes over the ops, every per-tensor check inlined (they run for every tensor of the model): the first
    finds each buffer's size and last use (:func:`_buffers`), the second walks the order adding and freeing
    buffers in the sequence the model states (:func:`_peak_over_order`), so the float sums are the same to the
    last bit."""
    buffers = _buffers(ir)
    peak, peak_node = _peak_over_order(ir, buffers)
    return PeakMemory(peak, peak_node, buffers.unknown)


class _Buffers(NamedTuple):
    """The run-time buffers of a model: ``size`` (bytes) of each tensor that owns its buffer (a graph input, the
    output of an op that is not a view; 0 when its shape is not static), ``alias``: a view's output -> the buffer
    it shares, ``last_use``: buffer -> the step of its last reader (the number of ops for graph outputs), how
    many owners have an ``unknown`` size, and ``born``: the step of each op-made buffer's op, in ``size``'s order
    after the graph inputs (the graph is in SSA form, ONNX's checker holds it to that: each name made once)."""

    size: dict[str, float]
    alias: dict[str, str]
    last_use: dict[str, int]
    unknown: int
    born: array[int]


def _buffers(ir: ModelIR) -> _Buffers:
    """The first pass (:class:`_Buffers`): graph inputs own their buffers, then per op in order its outputs own
    or alias one and its inputs mark their buffer used at this step; graph outputs are used to the end.

    Complexity 16, kept: the per-tensor checks stay inline in the loop over every tensor of the model."""
    views = ir.index.views
    alias: dict[str, str] = {}
    size, unknown = _input_sizes(ir)
    last_use: dict[str, int] = {}
    born = array("q")  # 8 bytes a buffer, no int object each
    ops: Sequence[OpView] = ir.ops
    for step, op in enumerate(ops):
        source = _view_source(op, alias, size) if op.id in views else None  # the buffer a view's outputs alias
        for t in op.outputs:
            if t is None or t.role not in _RUNTIME:
                continue
            if source is not None:
                alias[t.name] = source
            else:
                born.append(step)
                shape = t.shape  # TensorInfo.is_static_shape and .nbytes inlined: a tensor per node (see commit)
                if shape is not None and None not in shape:
                    size[t.name] = math.prod(shape) * t.itemsize  # type: ignore[arg-type]  # no None: tested
                else:
                    size[t.name] = 0.0
                    unknown += 1
        for t in op.inputs:
            if t is not None and t.role in _RUNTIME:
                name = t.name
                used = alias.get(name) or (name if name in size else None)  # _buffer_of(), inlined
                if used is not None:
                    last_use[used] = step
    end = len(ops)
    for name in ir.graph_outputs:
        used = _buffer_of(name, alias, size)
        if used is not None:
            last_use[used] = end
    return _Buffers(size, alias, last_use, unknown, born)


def _input_sizes(ir: ModelIR) -> tuple[dict[str, float], int]:
    """The graph inputs' buffer sizes (0 for one whose shape is not static) and how many are not static."""
    size: dict[str, float] = {}
    unknown = 0
    for name in ir.graph_inputs:
        t = ir.tensors[name]
        if t.is_static_shape:
            size[name] = t.nbytes
        else:
            size[name] = 0.0
            unknown += 1
    return size, unknown


def _buffer_of(name: str, alias: dict[str, str], size: dict[str, float]) -> str | None:
    """The buffer tensor ``name`` lives in: the one it aliases, itself when it owns one, else None."""
    return alias.get(name) or (name if name in size else None)


def _view_source(op: OpView, alias: dict[str, str], size: dict[str, float]) -> str | None:
    """The buffer the outputs of the view ``op`` alias: its first input's, when that is a run-time tensor."""
    if not op.inputs:
        return None
    first = op.inputs[0]
    if first is None or first.role not in _RUNTIME:
        return None
    return _buffer_of(first.name, alias, size)


def _peak_over_order(ir: ModelIR, buffers: _Buffers) -> tuple[float, str | None]:
    """The second pass: the largest sum of live buffers and the node running then (None: the graph inputs alone).

    The walk the model states, per op in order: its outputs' own buffers are allocated, the live sum is compared
    with the peak, then the buffers whose last use this was are freed (in ``last_use``'s order), and the outputs
    nobody reads at once. The peak is the first largest live sum at a comparison, when it exceeds the graph
    inputs' sum. As columns, one live sum per op (:func:`_live_sums_exact`, :func:`_live_sums_in_order`), not
    a walk op by op."""
    size, last_use, born = buffers.size, buffers.last_use, buffers.born
    live = sum(size[name] for name in ir.graph_inputs)
    if not ir.ops:
        return live, None
    exact = set(map(type, size.values())) <= {int} and sum(size.values()) < 2**53
    compared = (_live_sums_exact if exact else _live_sums_in_order)(live, len(ir.ops), size, last_use, born)
    step = int(np.argmax(compared))  # the first largest
    if not compared[step] > live:
        return live, None
    return (int(compared[step]) if exact else compared[step]), ir.ops[step].id


def _live_sums_exact(
    live: float, count: int, size: dict[str, float], last_use: dict[str, int], born: array[int]
) -> npt.NDArray[np.float64]:
    """The live sum at each op's comparison when every size is an int and all of them sum below 2**53: float64
    holds every partial sum exactly, so the order of the additions does not matter:

    live_at[s] = live + Σ sizes allocated at steps ≤ s − Σ sizes freed at steps < s

    (allocated: a buffer at its op's step; freed: at its last use, or at its op's step when nobody reads it)."""
    inputs = len(size) - len(born)  # the graph inputs' buffers come first in ``size``
    owned = np.fromiter(islice(size.values(), inputs, None), np.float64, len(born))
    birth = np.frombuffer(born, dtype=np.int64)
    unread = np.fromiter((name not in last_use for name in islice(size, inputs, None)), bool, len(born))
    allocated = np.bincount(birth, weights=owned, minlength=count)
    last = np.fromiter(last_use.values(), np.int64, len(last_use))
    freed = np.bincount(last, np.fromiter((size[n] for n in last_use), np.float64, len(last_use)), count + 1)
    freed = freed[:count] + np.bincount(birth[unread], weights=owned[unread], minlength=count)
    return live + np.cumsum(allocated) - (np.cumsum(freed) - freed)


def _live_sums_in_order(
    live: float, count: int, size: dict[str, float], last_use: dict[str, int], born: array[int]
) -> npt.NDArray[np.object_]:
    """The live sum at each op's comparison, added in the walk's order: one signed delta per event, ordered by
    (step, phase: allocate, compare, free at last use, free unread) and, within a phase, as the walk meets them;
    their running sum over an object column (``cumsum`` adds Python numbers in sequence, as the walk did: an int
    stays an int until a float joins, and every float is the same to the last bit)."""
    inputs = len(size) - len(born)
    owned = np.fromiter(islice(size.values(), inputs, None), object, len(born))
    birth = np.frombuffer(born, dtype=np.int64)
    unread = np.fromiter((name not in last_use for name in islice(size, inputs, None)), bool, len(born))
    freed = np.fromiter((size[name] for name in last_use), object, len(last_use))  # in last_use's order
    last = np.fromiter(last_use.values(), np.int64, len(last_use))
    steps = np.concatenate([birth, np.arange(count), last, birth[unread]])
    phases = np.repeat(np.arange(4, dtype=np.int8), [len(birth), count, len(last), int(unread.sum())])
    deltas = np.concatenate([owned, np.zeros(count, dtype=object), -freed, -owned[unread]])
    order = np.argsort(steps * 4 + phases, kind="stable")  # within a phase: the order the walk meets them
    running = np.empty(len(order) + 1, dtype=object)
    running[0] = live
    running[1:] = deltas[order]
    return np.cumsum(running)[1:][phases[order] == 1]
