"""Fusion through control flow: the body an ``If``, ``Loop`` or ``Scan`` runs is fused by the same pass as the main
graph, with the body's boundary as the kernel boundary.

A runtime executes the branch an ``If`` takes (a ``Loop``'s or a ``Scan``'s body, once per iteration) as a graph of
its own, and fuses it like any graph: Optimum's merged decoder, whose whole model sits in the ``use_cache_branch``
``If``, runs the same kernels as the unmerged ``model.onnx``. :func:`fuse_with_bodies` fuses the main graph
(:func:`onnxroof.fusion.fuse.fuse`) and replaces each kernel that is one control-flow node by the kernels of the
body it runs (:attr:`onnxroof.core.node_cost.NodeCost.body`, recorded by the costing stage), recursively:

* a body kernel reads what crosses the body's boundary (outer-scope values and the body's inputs are read from
  outside, the body's outputs are written), as any kernel reads what crosses its own boundary;
* a body that runs ``n`` times per run (a ``Loop``'s trip count, a ``Scan``'s length; an ``If`` runs once) gives
  each of its kernels ``cost × n`` (FLOPs, MACs, bytes; params are not scaled: weights are the same each
  iteration) and ``launches × n``: the roofline time ``max(n·F/P, n·B/W) = n · max(F/P, B/W)`` is the time of the
  ``n`` runs; nested bodies multiply their counts;
* kernel ids are renumbered ``k1 … kN`` in the new order; a body kernel's members are named
  ``<control-flow node id>/<body name>/<body node id>`` (``12:If/then_branch/3:MatMul``), as are its misses.

A control-flow node whose body was not recorded (no costed body) stays one kernel, as before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from operator import attrgetter

from onnxroof.core.cost import Cost
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.ir import ModelIR, OpView
from onnxroof.core.kernel import Kernel, Miss
from onnxroof.core.node_cost import BodyRun, NodeCost
from onnxroof.fusion.fuse import FusionResult, fuse
from onnxroof.fusion.graph import FusionGraph
from onnxroof.fusion.match import FunctionMatches


@frozen_dataclass(slots=True, eq=False)
class RunKernel:
    """One kernel the runtime launches, with what the analysis needs to describe and place it.

    ``ops``: its members' op views, the anchor first (a body kernel's are the body's ops); ``anchor``: the
    main-graph node it stands for (its own anchor, or the outermost control-flow node around it); ``launches``:
    launches per run before graph capture (``Σ`` over nested iterations)."""

    kernel: Kernel
    ops: tuple[OpView, ...]
    anchor: str
    launches: int


def _scaled(cost: Cost, times: int) -> Cost:
    """``cost`` run ``times`` times: FLOPs, MACs and bytes × ``times``, params unchanged."""
    if times == 1:
        return cost
    return replace(cost.scaled(times), params=cost.params)


def _expand(
    fusion: FusionResult,
    ir: ModelIR,
    costs: Mapping[str, NodeCost],
    profile: str,
    anchor: str | None,
    prefix: str,
    times: int,
    misses: list[Miss],
) -> list[RunKernel]:
    """The kernels of ``fusion`` (over ``ir``) with every control-flow kernel replaced by its body's kernels."""
    ops = {op.id: op for op in ir.ops}
    out: list[RunKernel] = []
    misses.extend(Miss(m.pattern, tuple(prefix + n for n in m.node_ids), m.reason) for m in fusion.misses)
    for kernel in fusion.kernels:
        first = kernel.node_ids[0]
        node_cost = costs[first]
        body = node_cost.body if len(kernel.node_ids) == 1 else None
        if body is not None:
            out.extend(_body_kernels(body, profile, anchor or first, f"{prefix}{first}/{body.name}/", times, misses))
            continue
        launches = node_cost.launches if len(kernel.node_ids) == 1 else 1
        if prefix or times != 1:
            kernel = replace(
                kernel,
                node_ids=tuple(prefix + n for n in kernel.node_ids),
                folded_nodes=tuple(prefix + n for n in kernel.folded_nodes),
                cost=_scaled(kernel.cost, times),
                ideal=_scaled(kernel.ideal, times),
            )
        out.append(RunKernel(kernel, tuple(ops[n] for n in kernel_members(kernel, prefix)), anchor or first,
                             launches * times))  # fmt: skip
    return out


def kernel_members(kernel: Kernel, prefix: str) -> tuple[str, ...]:
    """The member ids of ``kernel`` inside its own graph (``prefix`` removed)."""
    return tuple(n[len(prefix) :] for n in kernel.node_ids)


def _body_kernels(
    body: BodyRun, profile: str, anchor: str, prefix: str, times: int, misses: list[Miss]
) -> list[RunKernel]:
    """The kernels of one body run ``times × body.iterations`` times per run of the model."""
    costs = {op.id: c for op, c in zip(body.ir.ops, body.node_costs, strict=True)}
    fusion = fuse(body.ir, costs, profile)
    return _expand(fusion, body.ir, costs, profile, anchor, prefix, times * body.iterations, misses)


def fuse_with_bodies(
    ir: ModelIR,
    column: Sequence[NodeCost],
    profile: str,
    graph: FusionGraph | None = None,
    prior: FunctionMatches | None = None,
) -> tuple[FusionResult, tuple[RunKernel, ...] | None]:
    """Fuse ``ir`` (its nodes' costs ``column``, in node order) under ``profile`` and expand control-flow bodies
    (see the module docstring): the result with the kernels renumbered and the bodies' misses added, and each
    kernel with its ops, anchor and launches; None instead of those when no kernel has a body (the result is then
    :func:`~onnxroof.fusion.fuse.fuse`'s own, each kernel's members in ``ir``). ``prior``: the main graph's
    phase-1 decisions from another binding (:func:`~onnxroof.fusion.fuse.fuse`)."""
    fusion = fuse(ir, column, profile, graph, prior)
    positions = fusion.positions or ()
    if not any(column[at[0]].body is not None for at in positions if len(at) == 1):
        return fusion, None
    costs = dict(zip(map(attrgetter("id"), ir.ops), column, strict=True))
    misses: list[Miss] = []
    expanded = _expand(fusion, ir, costs, profile, None, "", 1, misses)
    renumbered = tuple(
        replace(r, kernel=replace(r.kernel, id=f"k{number}")) for number, r in enumerate(expanded, start=1)
    )
    result = FusionResult(profile, tuple(r.kernel for r in renumbered), tuple(misses))
    return result, renumbered


__all__ = ["RunKernel", "fuse_with_bodies", "kernel_members"]
