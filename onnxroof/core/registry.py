"""The one registry of cost rules, keyed by (domain, op_type).

A rule is a pure function ``OpView -> Cost`` registered with :func:`rule`::

    @rule("Relu", "Abs", flops_per_element=1)   # several op types may share one rule
    def unary(op): ...

Every op is in exactly one state (fvcore's distinction, made first class):

* ``costed``      — a rule computed its cost;
* ``zero``        — declared free by its rule's ``kind`` (a view such as Reshape, metadata such as Shape);
* ``folded``      — computable from weights alone, so done once at load time, not per inference;
* ``unsupported`` — no rule: counted and listed in every output, never silently zero;
* ``unknown_shape`` — a rule exists but a tensor it needs has no static shape (named in a warning).

``config_inputs`` names inputs that configure the op rather than carry data (Reshape's ``shape``,
Slice's ``starts``...): they are not charged as traffic and never count as parameters.

``params`` gives the parameter count of weights stored in another form than one element per value: a
function ``OpView -> {input index: logical elements}`` registered with the rule. A weight input it names
counts those elements as parameters (0 for quantization metadata such as scales and zero points, or a
precomputed table such as a rotary cos/sin cache); every other weight input counts its stored elements.
Bytes never change: a weight is always charged at its stored size (MatMulNBits: params = N·K logical
elements of the packed ``B``, bytes = packed data + scales + zero points).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from onnxroof.core.cost import Cost
from onnxroof.core.errors import CostError
from onnxroof.core.ir import OpView
from onnxroof.core.protos import normalize_domain
from onnxroof.core.states import Role, RuleKind, RuleStatus

RuleFn = Callable[[OpView], Cost]
ParamsFn = Callable[[OpView], Mapping[int, float]]
"""A weight's logical elements by input index, for weights not stored one element per value (module docstring)."""


@dataclass(frozen=True, slots=True)
class RuleEntry:
    domain: str
    op_type: str
    fn: RuleFn
    kind: RuleKind
    status: RuleStatus
    config_inputs: frozenset[int]
    family: str = ""
    """The op family the rule belongs to (its module in :mod:`onnxroof.rules` declares it once, see
    :func:`family_rule`): the roofline's efficiency class of ops not classed by type. "" for rules
    registered without one."""
    params: ParamsFn | None = None
    """Logical elements of weight inputs stored packed or derived (module docstring); None: stored elements."""

    @property
    def doc(self) -> str:
        return (self.fn.__doc__ or "").strip()


_RULES: dict[tuple[str, str], RuleEntry] = {}


class DuplicateRuleError(ValueError):
    """Two rules registered for the same (domain, op_type)."""


def rule(
    *op_types: str,
    domain: str = "",
    kind: RuleKind = RuleKind.COMPUTE,
    status: RuleStatus = RuleStatus.EXACT,
    config_inputs: Iterable[int] = (),
    family: str = "",
    params: ParamsFn | None = None,
) -> Callable[[RuleFn], RuleFn]:
    """Register ``fn`` as the cost rule of each op type in ``op_types`` (in ``domain``); ``params``, when
    given, counts the logical elements of packed or derived weight inputs (module docstring)."""
    if kind not in tuple(RuleKind):
        raise ValueError(f"unknown rule kind {kind!r}; expected one of {tuple(RuleKind)}")
    if status not in tuple(RuleStatus):
        raise ValueError(f"unknown rule status {status!r}")
    kind, status = RuleKind(kind), RuleStatus(status)
    dom = normalize_domain(domain)

    def register(fn: RuleFn) -> RuleFn:
        for op_type in op_types:
            key = (dom, op_type)
            if key in _RULES:
                raise DuplicateRuleError(f"a rule for {dom or 'ai.onnx'}::{op_type} is already registered")
            _RULES[key] = RuleEntry(dom, op_type, fn, kind, status, frozenset(config_inputs), family, params)
        return fn

    return register


def family_rule(family: str) -> Callable[..., Callable[[RuleFn], RuleFn]]:
    """:func:`rule` with ``family`` set, for a rule module to declare its family once::

    rule = family_rule("matmul")

    @rule("MatMul")
    def matmul(op): ...
    """
    return functools.partial(rule, family=family)


def lookup(domain: str, op_type: str) -> RuleEntry | None:
    """The rule registered for (domain, op_type), or None. Rules register when their family module is
    imported: import :mod:`onnxroof.rules` (as :mod:`onnxroof.costing.node` does) before looking up."""
    entry = _RULES.get((domain, op_type))  # the common case: the domain is already normalized
    if entry is None and domain == "ai.onnx":
        entry = _RULES.get((normalize_domain(domain), op_type))
    return entry


def all_rules() -> tuple[RuleEntry, ...]:
    """Every registered rule, by (domain, op_type)."""
    return tuple(sorted(_RULES.values(), key=lambda e: (e.domain, e.op_type)))


def data_inputs(op: OpView, entry: RuleEntry) -> list:
    """The present inputs of ``op`` that carry data (config inputs excluded)."""
    return [t for i, t in enumerate(op.inputs) if t is not None and i not in entry.config_inputs]


def weight_inputs(op: OpView, entry: RuleEntry) -> list:
    """Data inputs that are weights: the node's parameters."""
    return [t for t in data_inputs(op, entry) if t.role == Role.WEIGHT]


_NO_LOGICAL: Mapping[int, float] = MappingProxyType({})


def weight_table(op: OpView, entry: RuleEntry) -> dict[str, tuple[float, float]]:
    """Weight name -> (parameters, stored bytes) of ``op``'s weight inputs: parameters are the logical elements
    the rule's ``params`` function gives for an input, else the stored elements (module docstring)."""
    logical = entry.params(op) if entry.params is not None else _NO_LOGICAL
    config = entry.config_inputs
    table: dict[str, tuple[float, float]] = {}
    for i, t in enumerate(op.inputs):  # a plain loop: this runs for every node of the model
        if t is None or t.role != Role.WEIGHT or i in config:
            continue
        table[t.name] = (float(logical.get(i, t.numel)), float(t.nbytes))
    return table


def evaluate(op: OpView, entry: RuleEntry) -> Cost:
    """Run ``entry``'s rule on ``op`` and attach the parameter count.

    params = Σ parameters of the weight tensors among the op's data inputs (:func:`weight_table`; a rule
    never counts them).

    The one place every rule's figures pass through, so the one place their invariant is checked: every
    figure is ≥ 0 (:func:`check_cost`).
    """
    return evaluate_with_weights(op, entry)[0]


def evaluate_with_weights(op: OpView, entry: RuleEntry) -> tuple[Cost, dict[str, tuple[float, float]]]:
    """:func:`evaluate`, and the :func:`weight_table` it counted the parameters from (computed once: the
    analysis needs both for every node)."""
    cost = entry.fn(op)
    table = weight_table(op, entry)
    params = float(sum(numel for numel, _ in table.values())) if table else 0.0
    if params != cost.params:  # built directly: dataclasses.replace costs ~5 µs a node on large graphs
        cost = Cost(cost.flops, cost.macs, cost.bytes_read, cost.bytes_written, params)
    return check_cost(op, cost), table


def check_cost(op: OpView, cost: Cost) -> Cost:
    """``cost`` when every figure is ≥ 0; else :class:`~onnxroof.core.errors.CostError` naming the node, the
    figure and the shapes it was computed from (a negative dim, e.g. a dim bound below zero, is the usual cause)."""
    if cost.flops >= 0 and cost.macs >= 0 and cost.bytes_read >= 0 and cost.bytes_written >= 0 and cost.params >= 0:
        return cost  # the common case, without a loop of getattr per node (NaN fails these tests too)
    for name in ("flops", "macs", "bytes_read", "bytes_written", "params"):
        value = getattr(cost, name)
        if not value >= 0:  # NaN fails too
            shapes = ", ".join(str(list(t.shape)) if t is not None and t.shape is not None else "?" for t in op.inputs)
            raise CostError(
                f"node {op.id} ({op.op_type}): negative cost ({name} = {value:g}) from input shapes {shapes}; "
                f"the model's shapes or attributes are malformed"
            )
    return cost
