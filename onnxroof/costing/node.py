"""The cost of one node: its state and its Cost from the registered rule (control flow through its bodies).

Importing this module registers every rule family (:mod:`onnxroof.rules`).
"""

from __future__ import annotations

import functools

import onnx
import onnx.defs

import onnxroof.rules  # noqa: F401  (registers every rule family)
from onnxroof.core.cost import Cost
from onnxroof.core.errors import ShapeUnknown
from onnxroof.core.ir import CONTROL_FLOW_OPS, ModelIR, OpView
from onnxroof.core.registry import evaluate, lookup, weight_inputs
from onnxroof.core.states import NodeState, Role
from onnxroof.costing.control_flow import NodeCost, cost_control_flow


def op_key(op: OpView) -> str:
    return f"{op.domain}::{op.op_type}" if op.domain else op.op_type


def is_known_op(op: OpView) -> bool:
    """Whether ``op`` has a cost rule or an ONNX schema (ai.onnx, ai.onnx.ml...): only such ops fold."""
    return lookup(op.domain, op.op_type) is not None or _has_schema(op.op_type, op.domain)


@functools.cache
def _has_schema(op_type: str, domain: str) -> bool:
    return onnx.defs.has(op_type, domain)


def cost_node(op: OpView, scope: ModelIR, root_graph: onnx.GraphProto | None = None) -> NodeCost:
    """State, kind, cost and weights of one node (control-flow nodes through their bodies)."""
    produced = [t for t in op.outputs if t is not None]
    if produced and all(t.role in (Role.WEIGHT, Role.STATIC) for t in produced):
        if not is_known_op(op):  # nothing can evaluate it at load time: never silently zero
            note = "no cost rule (its inputs are constant, but an unknown op is not folded)"
            return NodeCost(NodeState.UNSUPPORTED, "", Cost.zero(), note, launches=0)
        return NodeCost(NodeState.FOLDED, "", Cost.zero(), "computed from constants at load time", launches=0)
    if op.subgraphs and op.op_type in CONTROL_FLOW_OPS and op.op_type != "SequenceMap":
        return cost_control_flow(op, scope, lambda inner, body: cost_node(inner, body, root_graph), root_graph)
    entry = lookup(op.domain, op.op_type)
    if entry is None:
        return NodeCost(NodeState.UNSUPPORTED, "", Cost.zero(), "no cost rule", launches=0)
    if entry.kind.moves_nothing:
        return NodeCost(NodeState.ZERO, entry.kind, Cost.zero(), f"{entry.kind}: moves no data", launches=0)
    try:
        cost = evaluate(op, entry)
    except ShapeUnknown as missing:
        note = f"no static shape for '{missing.tensor}'"
        return NodeCost(NodeState.UNKNOWN_SHAPE, entry.kind, Cost.zero(), note, 0, missing_tensor=missing.tensor)
    weights = {t.name: (float(t.numel), float(t.nbytes)) for t in weight_inputs(op, entry)}
    return NodeCost(NodeState.COSTED, entry.kind, cost, "", 1, weights)
