"""Cost of control-flow nodes (If, Loop, Scan): their bodies are costed with the same rules, recursively.

* ``If``: the branch that runs when its condition is known at load time (a constant, or a scalar bool model
  input bound with ``--dim NAME=0|1``, e.g. ``--dim use_cache_branch=1`` for Optimum's merged decoder: 1 runs
  ``then_branch``, 0 ``else_branch``; the loader makes a bound bool input a constant). Otherwise the more
  expensive branch (by FLOPs, then bytes) — an upper bound — and, when the condition is a model input, the
  analysis warns which branch was costed and how to pick the other.
* ``Loop``: body × trip count ``M`` when ``M`` is a constant; the loop may stop earlier on its condition, so
  this is an upper bound. When ``M`` is not a constant, ONE iteration is counted and the note says so.
* ``Scan``: body × the scan length (the first scan input's extent along its scan axis).

Body weights count once as parameters, however many iterations run. Every body node that runs is one
kernel launch per iteration in the node's unfused cost; the body that runs is kept on the node's cost
(:class:`~onnxroof.core.node_cost.BodyRun`: its IR and its nodes' costs), and the fusion stage fuses it like the
main graph (:mod:`onnxroof.fusion.bodies`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field, replace

import numpy as np
import onnx
from onnx import numpy_helper

from onnxroof.core.cost import Cost, merge_weights
from onnxroof.core.errors import MalformedNode
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.ir import ModelIR, OpView, build_graph_ir
from onnxroof.core.node_cost import BodyRun, NodeCost
from onnxroof.core.protos import graph_value_types
from onnxroof.core.states import NodeState, RuleKind

CostFn = Callable[[OpView, ModelIR], NodeCost]


@frozen_dataclass
class BodyCost:
    cost: Cost
    launches: int
    weights: dict[str, tuple[float, float]]
    unsupported: tuple[str, ...]
    unknown: int  # body nodes without static shapes
    uncosted: tuple[str, ...] = ()  # one line per body node not costed (unsupported, no static shape)
    ir: ModelIR | None = field(default=None, compare=False, repr=False)  # the body's IR
    node_costs: tuple[NodeCost, ...] = field(default=(), compare=False, repr=False)  # per op of ``ir``


def cost_body(graph: onnx.GraphProto, scope: ModelIR, cost_fn: CostFn) -> BodyCost:
    body = build_graph_ir(
        graph,
        scope.opsets,
        graph_value_types(graph),
        outer=scope.tensors,
        restate=scope.restate,
        view_ops=scope.view_ops,
    )
    total, launches, unknown = Cost.zero(), 0, 0
    weights: dict[str, tuple[float, float]] = {}
    unsupported: list[str] = []
    uncosted: list[str] = []
    results: list[NodeCost] = []
    for op in body.ops:
        result = cost_fn(op, body)
        results.append(result)
        key = f"{op.domain}::{op.op_type}" if op.domain else op.op_type
        if result.state == NodeState.COSTED:
            total += result.cost
            launches += result.launches
            merge_weights(weights, result.weights)
        elif result.state == NodeState.UNSUPPORTED:
            unsupported.append(key)
            uncosted.append(f"node {op.id} ({key}) not costed: {result.note or 'no cost rule'}")
        elif result.state == NodeState.UNKNOWN_SHAPE:
            unknown += 1
            uncosted.append(
                f"node {op.id} ({key}) not costed: tensor '{result.missing_tensor or '?'}' has no static shape"
            )
        unsupported.extend(result.unsupported)
        uncosted.extend(result.warnings)
    return BodyCost(total, launches, weights, tuple(unsupported), unknown, tuple(uncosted), body, tuple(results))


def _constant_scalar(name: str, graph: onnx.GraphProto | None) -> int | None:
    """The value of a scalar integer initializer or Constant output named ``name`` in ``graph``, if inline."""
    if graph is None:
        return None
    for tensor in graph.initializer:
        if tensor.name == name and tensor.data_location != onnx.TensorProto.EXTERNAL:
            return _scalar(tensor)
    for node in graph.node:
        if node.op_type == "Constant" and name in node.output:
            for attr in node.attribute:
                if attr.name == "value":
                    return _scalar(attr.t)
                if attr.name == "value_int":
                    return int(attr.i)
    return None


def _scalar(tensor: onnx.TensorProto) -> int | None:
    """The integer value of a one-element tensor; None when it has another size or cannot be read."""
    try:
        array = numpy_helper.to_array(tensor)
        return int(array.reshape(-1)[0]) if array.size == 1 and array.dtype.kind in "iub" else None
    except Exception:  # dims that contradict the data, an unknown dtype
        return None


def _iterations(op: OpView, root_graph: onnx.GraphProto | None) -> tuple[int, str]:
    if op.op_type == "Loop":
        trip = op.input(0)
        value = _constant_scalar(trip.name, root_graph) if trip is not None else None
        if value is None:
            return 1, "trip count not a constant: one iteration counted"
        return max(value, 0), f"{value} iterations (trip count; an upper bound if the condition ends it sooner)"
    if op.op_type == "Scan":
        scan_inputs = int(op.attrs.get("num_scan_inputs", 1))
        if not 1 <= scan_inputs <= len(op.inputs):
            raise MalformedNode(
                f"node {op.id} (Scan): num_scan_inputs = {scan_inputs}, but the node has {len(op.inputs)} input(s)"
            )
        first = op.inputs[len(op.inputs) - scan_inputs]
        axes = list(op.attrs.get("scan_input_axes", []) or [0])
        axis = 1 if op.opset < 9 else int(axes[0])
        if first is None or first.shape is None or not first.is_static_shape:
            return 1, "scan length unknown: one iteration counted"
        if not -len(first.shape) <= axis < len(first.shape):
            raise MalformedNode(
                f"node {op.id} (Scan): scan axis {axis} is out of range for scan input '{first.name}' of rank "
                f"{len(first.shape)}"
            )
        length = int(np.asarray(first.shape)[axis])
        return length, f"{length} iterations (scan length)"
    return 1, ""


def _if_bodies(
    op: OpView, scope: ModelIR, cost_fn: CostFn, value: int | None
) -> tuple[dict[str, BodyCost], dict[str, MalformedNode]]:
    """An ``If``'s branches costed, and those that cannot run with the bound shapes (a body node refused as
    malformed). Such a branch is left out when it does not run: the condition selects the other one, or is not
    known (the run would fail if it were taken: Silero VAD's 8 kHz branch given a 16 kHz window). When the
    condition selects it, or when no branch can run, the model is malformed and the error is raised."""
    taken = None if value is None else ("then_branch" if value else "else_branch")
    bodies: dict[str, BodyCost] = {}
    impossible: dict[str, MalformedNode] = {}
    for name, graph in op.subgraphs.items():
        try:
            bodies[name] = cost_body(graph, scope, cost_fn)
        except MalformedNode as error:
            if name == taken:
                raise
            impossible[name] = error
    if not bodies and impossible:
        raise next(iter(impossible.values()))
    return bodies, impossible


def cost_control_flow(op: OpView, scope: ModelIR, cost_fn: CostFn, root_graph: onnx.GraphProto | None) -> NodeCost:
    """Cost of an If/Loop/Scan node from its bodies (see the module docstring for the policy)."""
    if op.op_type == "If":
        cond = op.input(0)
        value = _constant_scalar(cond.name, root_graph) if cond is not None else None
        bodies, impossible = _if_bodies(op, scope, cost_fn, value)
        if cond is not None and value is not None and ("then_branch" if value else "else_branch") in bodies:
            name = "then_branch" if value else "else_branch"
            chosen, note = bodies[name], f"condition '{cond.name}' = {int(bool(value))}: {name} counted"
        else:
            name, chosen = max(bodies.items(), key=lambda item: (item[1].cost.flops, item[1].cost.bytes))
            note = f"the more expensive branch ({name}) counted"
        note += "".join(f"; {branch} cannot run with these shapes" for branch in impossible)
        iterations = 1
    else:
        bodies, impossible = {n: cost_body(g, scope, cost_fn) for n, g in op.subgraphs.items()}, {}
        name, chosen = next(iter(bodies.items()))
        iterations, note = _iterations(op, root_graph)
    unsupported = tuple(u for body in bodies.values() for u in body.unsupported)
    unknown = sum(body.unknown for body in bodies.values())
    if unsupported:
        note += f"; body ops without a rule: {', '.join(sorted(set(unsupported)))}"
    if unknown:
        note += f"; {unknown} body node(s) without static shapes not costed"
    weights: dict[str, tuple[float, float]] = {}
    for body in bodies.values():
        merge_weights(weights, body.weights)
    cost = replace(chosen.cost.scaled(iterations), params=sum(n for n, _ in weights.values()))
    warnings = tuple(
        f"inside node {op.id} ({op.op_type}) {body_name}: {line}"
        for body_name, body in bodies.items()
        for line in body.uncosted
    ) + tuple(
        f"inside node {op.id} (If) {branch}: not counted, it cannot run with these shapes ({error})"
        for branch, error in impossible.items()
    )
    return NodeCost(
        NodeState.COSTED,
        RuleKind.COMPUTE,
        cost,
        note,
        chosen.launches * iterations,
        weights,
        unsupported,
        branch=name if op.op_type == "If" else "",
        warnings=warnings,
        body=BodyRun(name, chosen.ir, chosen.node_costs, iterations) if chosen.ir is not None else None,
    )


__all__ = ["BodyCost", "cost_body", "cost_control_flow"]
