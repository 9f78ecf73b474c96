"""The cost of one node: its state and its Cost from the registered rule (control flow through its bodies).

Importing this module registers every rule family (:mod:`onnxroof.rules`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType

import onnx
import onnx.defs

import onnxroof.rules  # noqa: F401  (registers every rule family)
from onnxroof.core.cost import Cost
from onnxroof.core.errors import ShapeUnknown
from onnxroof.core.index import graph_index
from onnxroof.core.ir import CONTROL_FLOW_OPS, ModelIR, OpView, TensorInfo
from onnxroof.core.registry import RuleEntry, evaluate, lookup, weight_inputs
from onnxroof.core.states import NodeState, Role
from onnxroof.costing.control_flow import NodeCost, cost_control_flow

_ROOTS_KEY = "weight_roots"
_NO_WEIGHTS: Mapping[str, tuple[float, float]] = MappingProxyType({})
#: Ops whose derived weight takes its parameters from these inputs only: a dequantized weight's parameters are
#: its stored integers, its scale and zero point are not counted (as before tying was recognized).
_VALUE_INPUTS = {"DequantizeLinear": frozenset({0})}


def op_key(op: OpView) -> str:
    return f"{op.domain}::{op.op_type}" if op.domain else op.op_type


def weight_entries(op: OpView, entry: RuleEntry, scope: ModelIR) -> Mapping[str, tuple[float, float]]:
    """The node's weights as name -> (params, bytes read), for the distinct-weight totals.

    A weight read directly counts ``(numel, nbytes)``. A *derived* weight — computed at load time from other
    weights by a folded node: the ``Transpose`` of a tied embedding, the ``DequantizeLinear`` of an int8
    weight — is read by this node (its bytes) but holds no new parameters (PyTorch counts tied weights
    once): it counts ``(0, nbytes)``, and each of its root weights ``(numel, 0)`` (whoever reads a root
    counts its bytes). Totals merge entries with :func:`~onnxroof.core.cost.merge_weights`.
    """
    inputs = weight_inputs(op, entry)
    if not inputs:
        return _NO_WEIGHTS  # one shared empty mapping: most nodes read no weight
    found: dict[str, tuple[float, float]] = {}
    for t in inputs:
        roots = derived_roots(t.name, scope)
        if roots is None:
            found[t.name] = (float(t.numel), float(t.nbytes))
            continue
        found[t.name] = (0.0, float(t.nbytes))
        for root in roots:
            found.setdefault(root.name, (float(root.numel), 0.0))
    return found


def derived_roots(name: str, scope: ModelIR) -> tuple[TensorInfo, ...] | None:
    """The root weights (initializers, ``Constant`` values, outer-scope weights) a weight is computed from;
    None when ``name`` is itself a root. Walked once per tensor and remembered with the IR."""
    memo: dict[str, tuple[TensorInfo, ...] | None] = scope.memo.setdefault(_ROOTS_KEY, {})
    if name in memo:
        return memo[name]
    producer = graph_index(scope).producer
    ops = scope.graph.nodes

    def sources(tensor: str) -> list[TensorInfo]:
        """The weights a tensor is computed from (none for a root: an initializer, a ``Constant``, a
        ``ConstantOfShape`` or any op whose data inputs are not weights, such as light models' weights)."""
        op_id = producer.get(tensor)
        if op_id is None:
            return []
        op = ops[op_id]["op"]
        if _is_constant_node(op):
            return []
        rule = lookup(op.domain, op.op_type)
        config = rule.config_inputs if rule is not None else frozenset()  # a Reshape's shape: not parameters
        only = _VALUE_INPUTS.get(op.op_type)
        return [
            t
            for i, t in enumerate(op.inputs)
            if t is not None and t.role == Role.WEIGHT and i not in config and (only is None or i in only)
        ]

    first = sources(name)
    if not first:
        memo[name] = None
        return None
    roots: dict[str, TensorInfo] = {}
    seen = {name, *(t.name for t in first)}
    stack = list(first)
    while stack:
        current = stack.pop()
        above = sources(current.name)
        if not above:
            roots[current.name] = current
        for t in above:
            if t.name not in seen:
                seen.add(t.name)
                stack.append(t)
    memo[name] = found = tuple(roots.values())
    return found


def _is_constant_node(op: OpView) -> bool:
    return op.op_type == "Constant" and not op.domain


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
    weights = weight_entries(op, entry, scope)
    return NodeCost(NodeState.COSTED, entry.kind, cost, "", 1, weights)
