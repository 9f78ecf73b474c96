"""The cost of one node: its state and its Cost from its rule in :data:`onnxroof.rules.REGISTRY` (control flow
through its bodies)."""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import onnx
import onnx.defs

from onnxroof.core.cost import Cost, merge_weights
from onnxroof.core.errors import ShapeUnknown
from onnxroof.core.gemm import ARRAY_OPS
from onnxroof.core.ir import CONTROL_FLOW_OPS, ModelIR, OpView, TensorInfo
from onnxroof.core.node_cost import NodeCost
from onnxroof.core.registry import RuleEntry, evaluate_with_weights, weight_table
from onnxroof.core.states import NodeState, OpClass, Role, RuleKind
from onnxroof.rules import REGISTRY

#: Names exporters give the rotary-embedding tables (``model.rotary_emb.cos_cached``, ``cos_cache``,
#: ``inv_freq``): PyTorch buffers computed from the config, not trained parameters. Their bytes count; their
#: elements are not parameters (a learned position table, ``wpe`` or ``position_embeddings``, is).
_BUFFER_NAME = re.compile(r"rotary|inv_freq|(^|[._/])(cos|sin)(_cached|_cache)?$", re.IGNORECASE)
BUFFER_NAME = _BUFFER_NAME
"""The names of computed buffers (rotary tables) among the initializers: not trained weights."""
_BUFFER_WORDS = ("rotary", "inv_freq", "cos", "sin")
"""Words one of which every ASCII name :data:`BUFFER_NAME` matches holds (lowercased)."""


def is_buffer_name(name: str) -> bool:
    """Whether :data:`BUFFER_NAME` matches ``name``. An ASCII name holding none of :data:`_BUFFER_WORDS`
    (lowercased) cannot match, and is told without the regex (most weight names; an unanchored, case-blind search
    tries each of its alternatives at every position). A name with other characters always runs the regex: its
    case-blind match pairs some of them with ASCII letters (``ſ`` with ``s``, ``ı`` with ``i``)."""
    if name.isascii():
        lowered = name.lower()
        if not any(word in lowered for word in _BUFFER_WORDS):
            return False
    return _BUFFER_NAME.search(name) is not None


_NO_WEIGHTS: Mapping[str, tuple[float, float]] = MappingProxyType({})
#: Ops whose derived weight takes its parameters from these inputs only: a dequantized weight's parameters are
#: its stored integers, its scale and zero point are not counted (as before tying was recognized).
_VALUE_INPUTS = {"DequantizeLinear": frozenset({0})}


_POOL_SIZE = 4096


@dataclass
class CostCache:
    """What costing one model remembers while it runs (one per cost stage, never kept on the IR): the weight
    roots of each scope's derived weights (:func:`derived_roots`), one :class:`NodeCost` per distinct
    weightless cost (:func:`_costed`), and the rule's figures per node signature (``rules``). A scope's roots
    are keyed by the scope itself, which the cache keeps."""

    roots: dict[int, tuple[ModelIR, dict[str, tuple[TensorInfo, ...] | None]]] = field(default_factory=dict)
    pool: dict[tuple[object, ...], NodeCost] = field(default_factory=dict)
    rules: dict[tuple[object, ...], Cost] = field(default_factory=dict)
    """The rule's figures per :func:`cost_signature` with its weights (:func:`_rule_cost`): a model's layers read
    weights of equal shapes."""

    def roots_of(self, scope: ModelIR) -> dict[str, tuple[TensorInfo, ...] | None]:
        """The remembered roots of ``scope``'s weights (filled by :func:`derived_roots`)."""
        found = self.roots.get(id(scope))
        if found is None or found[0] is not scope:
            found = self.roots[id(scope)] = (scope, {})
        return found[1]


#: The costs of nodes whose cost says nothing of the node itself, shared by every such node.
_FOLDED = NodeCost(NodeState.FOLDED, "", Cost.zero(), "computed from constants at load time", 0, _NO_WEIGHTS)
_NOT_FOLDED = NodeCost(
    NodeState.UNSUPPORTED,
    "",
    Cost.zero(),
    "no cost rule (its inputs are constant, but an unknown op is not folded)",
    0,
    _NO_WEIGHTS,
)
_MOVES_NOTHING = {
    kind: NodeCost(NodeState.ZERO, kind, Cost.zero(), f"{kind}: moves no data", 0, _NO_WEIGHTS)
    for kind in RuleKind
    if kind.moves_nothing
}


def op_key(op: OpView) -> str:
    return f"{op.domain}::{op.op_type}" if op.domain else op.op_type


def weight_entries(
    op: OpView,
    entry: RuleEntry,
    scope: ModelIR,
    table: Mapping[str, tuple[float, float]] | None = None,
    cache: CostCache | None = None,
) -> Mapping[str, tuple[float, float]]:
    """The node's weights as name -> (params, bytes read), for the distinct-weight totals.

    A weight is keyed by the tensor it aliases through folded views (a Reshape of an initializer), so one weight
    read in two shapes (GenAI's tied int4 embedding and lm_head) counts once; its figures are the rule's
    (:func:`~onnxroof.core.registry.weight_table`: packed low-bit weights count their logical elements). A
    *derived* weight — computed at load time from other weights by a folded node: the ``Transpose`` of a tied
    embedding, the ``DequantizeLinear`` of an int8 weight — or a tied copy an exporter stored twice
    (:mod:`onnxroof.load.tied`) is read by this node (its bytes) but holds no new parameters (PyTorch counts
    tied weights once): it counts ``(0, nbytes)``, and each of its root weights ``(numel, 0)`` (whoever reads a
    root counts its bytes). Rotary-embedding tables (:data:`_BUFFER_NAME`) are buffers: bytes, no parameters.
    Totals merge entries with :func:`~onnxroof.core.cost.merge_weights`. ``table``: the node's
    :func:`~onnxroof.core.registry.weight_table` when the caller has it already; ``cache``: the cost stage's
    :class:`CostCache` (a fresh one when None).
    """
    if table is None:
        table = weight_table(op, entry)
    if not table:
        return _NO_WEIGHTS  # one shared empty mapping: most nodes read no weight
    root = scope.index.root
    found: dict[str, tuple[float, float]] = {}
    for name, (params, nbytes) in table.items():
        key = root(name)
        roots = derived_roots(key, scope, cache or CostCache())
        if key in scope.tied:
            original = scope.tensors.get(scope.tied[key])
            roots = (original,) if original is not None else roots
        if roots is None:
            merge_weights(found, {key: (0.0 if is_buffer_name(key) else params, nbytes)})
            continue
        merge_weights(found, {key: (0.0, nbytes)})
        for source in roots:
            found.setdefault(source.name, (0.0 if is_buffer_name(source.name) else float(source.numel), 0.0))
    return found


def derived_roots(name: str, scope: ModelIR, cache: CostCache) -> tuple[TensorInfo, ...] | None:
    """The root weights (initializers, ``Constant`` values, outer-scope weights) a weight is computed from;
    None when ``name`` is itself a root. Walked once per tensor and remembered in ``cache``."""
    memo = cache.roots_of(scope)
    if name in memo:
        return memo[name]
    producer = scope.index.producer

    def sources(tensor: str) -> list[TensorInfo]:
        """The weights a tensor is computed from (none for a root: an initializer, a ``Constant``, a
        ``ConstantOfShape`` or any op whose data inputs are not weights, such as light models' weights)."""
        op_id = producer.get(tensor)
        if op_id is None:
            return []
        op = scope.op(op_id)
        if op is None or _is_constant_node(op):
            return []
        rule = REGISTRY.lookup(op.domain, op.op_type)
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
    return REGISTRY.lookup(op.domain, op.op_type) is not None or _has_schema(op.op_type, op.domain)


@functools.cache
def _has_schema(op_type: str, domain: str) -> bool:
    return onnx.defs.has(op_type, domain)


def cost_node(
    op: OpView,
    scope: ModelIR,
    root_graph: onnx.GraphProto | None = None,
    cache: CostCache | None = None,
    signature: tuple[object, ...] | None = None,
) -> NodeCost:
    """State, kind, cost and weights of one node (control-flow nodes through their bodies). A weight read
    through a folded view (a Reshape of an initializer) is keyed by the initializer it aliases, so a weight
    two ops read in different shapes (GenAI's tied int4 embedding and lm_head) counts once. ``cache``: what the
    cost stage remembers across nodes (:class:`CostCache`; a fresh one when None); ``signature``: the node's
    ``cost_signature(op, weights=True)`` when the caller has it (else built here when a rule costs the node)."""
    cache = cache if cache is not None else CostCache()
    if _computed_at_load(op.outputs):
        if not is_known_op(op):  # nothing can evaluate it at load time: never silently zero
            return _NOT_FOLDED
        return _FOLDED
    if op.subgraphs and op.op_type in CONTROL_FLOW_OPS and op.op_type != "SequenceMap":
        from onnxroof.costing.control_flow import cost_control_flow  # only models with bodies import it

        return cost_control_flow(op, scope, lambda inner, body: cost_node(inner, body, root_graph, cache), root_graph)
    entry = REGISTRY.lookup(op.domain, op.op_type)
    if entry is None:
        return _cost_function_body(op, scope, root_graph, cache)
    if entry.kind.moves_nothing:
        return _MOVES_NOTHING[entry.kind]
    try:
        cost, table = _rule_cost(op, entry, cache, signature)
    except ShapeUnknown as missing:
        note = f"no static shape for '{missing.tensor}'"
        return NodeCost(NodeState.UNKNOWN_SHAPE, entry.kind, Cost.zero(), note, 0, missing_tensor=missing.tensor)
    weights = weight_entries(op, entry, scope, table, cache)
    # the node's params are those of the weights it reads, a derived or tied weight's roots included
    params = float(sum(params for params, _ in weights.values())) if weights else 0.0
    if params != cost.params:
        cost = Cost(cost.flops, cost.macs, cost.bytes_read, cost.bytes_written, params)
    if not weights:
        return _costed(entry.kind, cost, cache)
    return NodeCost(NodeState.COSTED, entry.kind, cost, "", 1, weights)


def _rule_cost(
    op: OpView, entry: RuleEntry, cache: CostCache, key: tuple[object, ...] | None = None
) -> tuple[Cost, dict[str, tuple[float, float]]]:
    """:func:`~onnxroof.core.registry.evaluate_with_weights`, the rule run once per :func:`cost_signature` with
    the weights described like the other inputs (by shape, dtype, item size and role, not by name): the rule
    and the node's contract read nothing else. Its figures are then shared; the weight table (by name) and the
    params it gives are the node's own: params = Σ parameters of the node's weights, as the evaluation sets
    them. ``key``: the node's signature when the caller has it."""
    if key is None:
        key = cost_signature(op, weights=True)
    shared = cache.rules.get(key) if key is not None else None
    if shared is None:
        cost, table = evaluate_with_weights(op, entry)
        if key is not None:
            cache.rules[key] = cost
        return cost, table
    table = weight_table(op, entry)
    params = float(sum(numel for numel, _ in table.values())) if table else 0.0
    if params != shared.params:
        shared = Cost(shared.flops, shared.macs, shared.bytes_read, shared.bytes_written, params)
    return shared, table


def cost_signature(op: OpView, weights: bool = False) -> tuple[object, ...] | None:
    """What a rule's figures for ``op`` depend on, as one hashable key, or None when the node's cost depends on
    more (an input that is a weight: its entries are keyed by name; a body; an attribute value that is not
    hashable, such as a tensor; a list is keyed by its items, marked as a list). ``weights``: describe a weight
    input like the others instead: the key of the rule's figures (:func:`_rule_cost`), and of the whole cost of a
    node whose weights are config inputs only (a Slice's starts; :func:`shareable` tells).

    A rule is a pure function of the node's op type, domain, opset, attributes and its tensors' shapes, dtypes,
    item sizes and roles; names and ids enter only the weights (excluded here) and error messages (an error is
    raised, never kept). So two nodes with one signature get one :class:`NodeCost` (when costed by a rule), one
    efficiency class and one wanted precision: the cost stage costs each distinct signature once
    (:func:`onnxroof.analysis.stages.cost`), as a model repeats its layers: building the key costs a fraction
    of a rule call with its contract check, the precision, the class and the descriptor."""
    if op.subgraphs:
        return None
    attrs = op.attrs
    attrs_key: tuple[object, ...] = ()
    if attrs:
        if type(attrs.get("value")) is onnx.TensorProto:  # a Constant's (ConstantOfShape's) tensor: never hashable
            return None
        attrs_key = tuple(attrs.items())
        try:
            hash(attrs_key)
        except TypeError:  # a list (a Transpose's perm), an array or a tensor among the values
            if not any(type(v) is list for v in attrs.values()):
                return None  # a tensor (a Constant's value) or an array
            attrs_key = tuple((k, (list, *v) if type(v) is list else v) for k, v in attrs.items())
            try:
                hash(attrs_key)
            except TypeError:  # an array, a tensor, or a list of them
                return None
    tensors: list[object] = [op.op_type, op.domain, op.opset, attrs_key]
    for t in op.inputs:
        if t is None:
            tensors.append(None)
        elif t.role == Role.WEIGHT and not weights:
            return None
        else:
            tensors.append((t.shape, t.dtype, t.itemsize, t.role))
    tensors.append(len(op.inputs))  # the inputs and outputs apart
    for t in op.outputs:
        tensors.append(None if t is None else (t.shape, t.dtype, t.itemsize, t.role))
    return tuple(tensors)


def folded_signature(op: OpView, folds_alike: dict[tuple[str, str], bool] | None = None) -> tuple[object, ...] | None:
    """The key of a node :func:`cost_node` folds (its outputs computed at load time, its op known) whose row in
    the cost stage is a function of its op type, domain and dtype alone: the shared folded cost, the class of its
    type (not a convolution, whose class reads the node) and a descriptor without a GEMM view (not an op of
    :data:`~onnxroof.core.gemm.ARRAY_OPS`); None for any other node. The cost stage's key of a node without a
    :func:`cost_signature`: a ``Constant``'s value attribute (a tensor) leaves it none, and a model holds hundreds
    of them. ``folds_alike``: the answer of the op-type tests by (op type, domain), kept by the caller."""
    if not _computed_at_load(op.outputs):
        return None
    key = (op.op_type, op.domain)
    alike = folds_alike.get(key) if folds_alike is not None else None
    if alike is None:
        alike = (
            op.op_type not in ARRAY_OPS and is_known_op(op) and REGISTRY.op_class(op.domain, op.op_type) != OpClass.CONV
        )
        if folds_alike is not None:
            folds_alike[key] = alike
    return (NodeState.FOLDED, op.op_type, op.domain, op.dtype) if alike else None  # 4 items: a cost_signature has 5+


def shareable(node_cost: NodeCost) -> bool:
    """Whether ``node_cost`` holds nothing of its node beyond its :func:`cost_signature`: the cost shared by every
    folded node or one of a data-free node, or costed by a rule (no note: not through a function body); in each
    case with no weights, bodies, warnings or unsupported ops inside it. Not shared: an unknown shape (it names
    its tensor) and an unsupported node (the cost stage lists it by id), so the cost stage finds the unsupported
    ops, weights and warnings among the nodes whose cost is their own."""
    if node_cost.state == NodeState.UNSUPPORTED or node_cost.missing_tensor is not None:
        return False
    return (
        (node_cost is _FOLDED or node_cost.state in (NodeState.ZERO, NodeState.COSTED))
        and (node_cost.state != NodeState.COSTED or not node_cost.note)
        and not node_cost.weights
        and node_cost.body is None
        and not node_cost.warnings
        and not node_cost.unsupported
    )


def _costed(kind: RuleKind, cost: Cost, cache: CostCache) -> NodeCost:
    """The costed :class:`NodeCost` of a node that reads no weight: one per distinct (kind, cost) in ``cache``, so
    that the nodes of a model's repeated layers share one ``NodeCost`` and one ``Cost`` (~250 bytes a node kept
    for the whole analysis) and skip building them. Only all-float figures are shared: an ``int`` figure equals a
    ``float`` one, but the output shows the difference. At most :data:`_POOL_SIZE` are remembered (then afresh)."""
    if not (
        type(cost.flops) is float
        and type(cost.macs) is float
        and type(cost.bytes_read) is float
        and type(cost.bytes_written) is float
        and type(cost.params) is float
    ):
        return NodeCost(NodeState.COSTED, kind, cost, "", 1, _NO_WEIGHTS)
    pool = cache.pool
    key = (kind, cost.flops, cost.macs, cost.bytes_read, cost.bytes_written, cost.params)  # compared in C
    found = pool.get(key)
    if found is None:
        if len(pool) >= _POOL_SIZE:
            pool.clear()
        found = pool[key] = NodeCost(NodeState.COSTED, kind, cost, "", 1, _NO_WEIGHTS)
    return found


def _computed_at_load(outputs: tuple[TensorInfo | None, ...]) -> bool:
    """Whether the node's outputs (at least one present) are all weights or load-time values: it is folded."""
    present = False
    for t in outputs:  # a plain loop: this runs for every node of the model
        if t is None:
            continue
        if t.role != Role.WEIGHT and t.role != Role.STATIC:
            return False
        present = True
    return present


def _cost_function_body(op: OpView, scope: ModelIR, root_graph: onnx.GraphProto | None, cache: CostCache) -> NodeCost:
    """An op without a rule: through its ONNX function body when ONNX defines one (costing.function), else
    unsupported."""
    from onnxroof.costing.control_flow import cost_body  # only ops without a rule import these
    from onnxroof.costing.function import expand_function

    try:
        body = expand_function(op, scope)
    except (onnx.onnx_cpp2py_export.shape_inference.InferenceError, ValueError, TypeError):
        body = None
    if body is None:
        return NodeCost(NodeState.UNSUPPORTED, "", Cost.zero(), "no cost rule", launches=0)
    result = cost_body(body, scope, lambda inner, ir: cost_node(inner, ir, root_graph, cache))
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
