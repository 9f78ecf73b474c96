"""The cost of one node: its state and its Cost from the registered rule (control flow through its bodies).

Importing this module registers every rule family (:mod:`onnxroof.rules`).
"""

from __future__ import annotations

from dataclasses import replace

import onnx

import onnxroof.rules  # noqa: F401  (registers every rule family)
from onnxroof.core.cost import Cost
from onnxroof.core.errors import ShapeUnknown
from onnxroof.core.index import graph_index
from onnxroof.core.ir import CONTROL_FLOW_OPS, ModelIR, OpView
from onnxroof.core.registry import evaluate, lookup, weight_table
from onnxroof.core.states import NodeState, Role, RuleKind
from onnxroof.costing.control_flow import NodeCost, cost_body, cost_control_flow
from onnxroof.costing.function import expand_function


def op_key(op: OpView) -> str:
    return f"{op.domain}::{op.op_type}" if op.domain else op.op_type


def cost_node(op: OpView, scope: ModelIR, root_graph: onnx.GraphProto | None = None) -> NodeCost:
    """State, kind, cost and weights of one node (control-flow nodes through their bodies). A weight read
    through a folded view (a Reshape of an initializer) is keyed by the initializer it aliases, so a weight
    two ops read in different shapes (GenAI's tied int4 embedding and lm_head) counts once."""
    produced = [t for t in op.outputs if t is not None]
    if produced and all(t.role in (Role.WEIGHT, Role.STATIC) for t in produced):
        return NodeCost(NodeState.FOLDED, "", Cost.zero(), "computed from constants at load time", launches=0)
    if op.subgraphs and op.op_type in CONTROL_FLOW_OPS and op.op_type != "SequenceMap":
        return cost_control_flow(op, scope, lambda inner, body: cost_node(inner, body, root_graph), root_graph)
    entry = lookup(op.domain, op.op_type)
    if entry is None:
        return _cost_function_body(op, scope, root_graph)
    if entry.kind.moves_nothing:
        return NodeCost(NodeState.ZERO, entry.kind, Cost.zero(), f"{entry.kind}: moves no data", launches=0)
    try:
        cost = evaluate(op, entry)
    except ShapeUnknown as missing:
        note = f"no static shape for '{missing.tensor}'"
        return NodeCost(NodeState.UNKNOWN_SHAPE, entry.kind, Cost.zero(), note, 0, missing_tensor=missing.tensor)
    root = graph_index(scope).root
    weights = {root(name): figures for name, figures in weight_table(op, entry).items()}
    return NodeCost(NodeState.COSTED, entry.kind, cost, "", 1, weights)


def _cost_function_body(op: OpView, scope: ModelIR, root_graph: onnx.GraphProto | None) -> NodeCost:
    """An op without a rule: through its ONNX function body when ONNX defines one (costing.function), else
    unsupported."""
    try:
        body = expand_function(op, scope)
    except (onnx.onnx_cpp2py_export.shape_inference.InferenceError, ValueError, TypeError):
        body = None
    if body is None:
        return NodeCost(NodeState.UNSUPPORTED, "", Cost.zero(), "no cost rule", launches=0)
    result = cost_body(body, scope, lambda inner, ir: cost_node(inner, ir, root_graph))
    note = "costed through its ONNX function body"
    if result.unknown:
        missing = next((t.name for t in op.inputs if t is not None and not t.is_static_shape), None)
        note = f"{note}: {result.unknown} body node(s) without static shapes"
        return NodeCost(NodeState.UNKNOWN_SHAPE, RuleKind.COMPUTE, Cost.zero(), note, 0, missing_tensor=missing)
    if result.unsupported:
        note += f"; body ops without a rule: {', '.join(sorted(set(result.unsupported)))}"
    operands = {t.name for t in op.inputs if t is not None}
    weights = {name: w for name, w in result.weights.items() if name in operands}  # body constants are no params
    cost = replace(result.cost, params=sum(n for n, _ in weights.values()))
    return NodeCost(NodeState.COSTED, RuleKind.COMPUTE, cost, note, result.launches, weights, result.unsupported)
