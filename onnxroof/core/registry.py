"""The registry of cost rules, keyed by (domain, op_type): one frozen :class:`Registry` value.

A rule is a pure function ``OpView -> Cost`` declared with :func:`rule` (or a family's :meth:`Family.rule`)::

    FAMILY = Family("elementwise", OpClass.ELEMENTWISE)   # a family module declares itself once
    rule = FAMILY.rule

    @rule("Relu", "Abs")                                   # several op types may share one rule
    def unary(op): ...

The decorator registers nothing globally: it records the :class:`RuleEntry` values on the function (and the
family keeps them, in order). :mod:`onnxroof.rules` builds the one registry from its family modules,
``REGISTRY = Registry.from_families(...)``; a duplicate (domain, op_type) raises :class:`DuplicateRuleError`.
Code that needs rules takes ``REGISTRY`` from there, or, below the rules layer, is given the facts it needs
(the IR's index takes :attr:`Registry.view_ops`). Rules outside the bundled families (a user's own) are added
explicitly: ``REGISTRY.with_rules(fn, ...)`` is a new registry with the entries recorded on each ``fn``.

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

``op_class`` is the rule's efficiency class (:class:`~onnxroof.core.states.OpClass`, a key of a platform's
``[efficiency]`` table): its family's unless the rule overrides it (``Exp`` in the elementwise family is
``activation``). A family may also class op types it has no rule for (:meth:`Family.classes`: ops costed
through their ONNX function body, fused ops a runtime creates), so an op's class has one source.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from enum import Enum
from types import MappingProxyType
from typing import TypedDict, TypeVar, Unpack

from onnxroof.core.contracts import NO_CONTRACT, NodeContract, check_node, schema_contract
from onnxroof.core.cost import Cost
from onnxroof.core.errors import CostError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.ir import OpView, TensorInfo
from onnxroof.core.protos import normalize_domain
from onnxroof.core.states import OpClass, Role, RuleKind, RuleStatus

RuleFn = Callable[[OpView], Cost]
ParamsFn = Callable[[OpView], Mapping[int, float]]


class RuleOptions(TypedDict, total=False):
    """The keyword arguments of :func:`rule` that :meth:`Family.rule` passes on as they are."""

    domain: str
    kind: RuleKind
    status: RuleStatus
    config_inputs: Iterable[int]
    params: ParamsFn | None
    required_attrs: tuple[str, ...]
    inputs: tuple[int, int | None]
    positive_attrs: tuple[str, ...]


"""A weight's logical elements by input index, for weights not stored one element per value (module docstring)."""
OpKey = tuple[str, str]
"""(normalized domain, op_type)."""

_ENTRIES_ATTR = "__onnxroof_rules__"
"""The attribute on a rule function holding the :class:`RuleEntry` values its decorators recorded."""


@frozen_dataclass(slots=True, eq=False)
class RuleEntry:
    """One declared rule: the (domain, op type) it costs, its function and what the registry knows of it."""

    domain: str
    op_type: str
    fn: RuleFn
    kind: RuleKind
    status: RuleStatus
    config_inputs: frozenset[int]
    family: str = ""
    """The op family the rule belongs to (the :class:`Family` its module declares, or another family's name
    for a fused op filed with its neighbours). "" for rules declared without one."""
    params: ParamsFn | None = None
    """Logical elements of weight inputs stored packed or derived (module docstring); None: stored elements."""
    op_class: OpClass = OpClass.OTHER
    """The efficiency class (module docstring): the family's default unless the rule overrides it."""
    contract: NodeContract = NO_CONTRACT
    """What the rule declares a node must hold beyond ONNX's schema (:mod:`onnxroof.core.contracts`)."""

    @property
    def doc(self) -> str:
        return (self.fn.__doc__ or "").strip()


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
    op_class: OpClass = OpClass.OTHER,
    required_attrs: tuple[str, ...] = (),
    inputs: tuple[int, int | None] = (0, None),
    positive_attrs: tuple[str, ...] = (),
) -> Callable[[RuleFn], RuleFn]:
    """Declare ``fn`` the cost rule of each op type in ``op_types`` (in ``domain``): the entries are recorded on
    ``fn`` (:func:`entries_of`), and a :class:`Registry` takes them in (:meth:`Registry.with_rules`). ``params``,
    when given, counts the logical elements of packed or derived weight inputs (module docstring).

    ``required_attrs``, ``inputs`` (min, max count; max None: unbounded) and ``positive_attrs`` (integers the
    rule divides by or loops over, ≥ 1 when present) declare what a node must hold beyond ONNX's schema (ONNX
    Runtime's contrib ops have none in ONNX): checked before the rule runs (:mod:`onnxroof.core.contracts`)."""
    kind = _member(RuleKind, kind, "rule kind")
    status = _member(RuleStatus, status, "rule status")
    cls = _member(OpClass, op_class, "op class")
    dom = normalize_domain(domain)
    config = frozenset(config_inputs)
    contract = NodeContract(tuple(required_attrs), inputs, tuple(positive_attrs))

    def record(fn: RuleFn) -> RuleFn:
        made = tuple(RuleEntry(dom, t, fn, kind, status, config, family, params, cls, contract) for t in op_types)
        setattr(fn, _ENTRIES_ATTR, entries_of(fn) + made)
        return fn

    return record


_E = TypeVar("_E", bound=Enum)


def _member(enum: type[_E], value: object, what: str) -> _E:
    """``value`` as a member of ``enum`` (a member, or its value: a rule module may pass plain strings); any other
    value is a ``ValueError`` naming ``what`` and the members."""
    try:
        return enum(value)
    except ValueError:
        raise ValueError(f"unknown {what} {value!r}; expected one of {tuple(enum)}") from None


def entries_of(fn: RuleFn) -> tuple[RuleEntry, ...]:
    """The entries :func:`rule` recorded on ``fn`` (none for a function never declared a rule)."""
    return getattr(fn, _ENTRIES_ATTR, ())


class Family:
    """One rule family, declared once by its module: a name and the default :class:`OpClass` of its rules.

    :meth:`rule` is :func:`rule` with the family's name and class filled in (a rule may override either); the
    family keeps the entries its module declares, in order, for :meth:`Registry.from_families`. This list is
    filled while the module is imported and read only after: a family is complete once its module is.
    """

    __slots__ = ("_classes", "_entries", "name", "op_class")

    def __init__(self, name: str, op_class: OpClass) -> None:
        self.name = name
        self.op_class = OpClass(op_class)
        self._entries: list[RuleEntry] = []
        self._classes: dict[OpKey, OpClass] = {}

    def rule(
        self,
        *op_types: str,
        family: str | None = None,
        op_class: OpClass | None = None,
        **options: Unpack[RuleOptions],
    ) -> Callable[[RuleFn], RuleFn]:
        """:func:`rule` in this family (``family`` and ``op_class`` default to the family's)."""
        declare = rule(
            *op_types,
            family=self.name if family is None else family,
            op_class=self.op_class if op_class is None else op_class,
            **options,
        )

        def record(fn: RuleFn) -> RuleFn:
            before = len(entries_of(fn))
            declare(fn)
            self._entries.extend(entries_of(fn)[before:])
            return fn

        return record

    def classes(self, *op_types: str, domain: str = "", op_class: OpClass | None = None) -> None:
        """Class op types that have no cost rule (ops costed through their ONNX function body, fused ops a
        runtime creates): the family's class unless ``op_class`` is given."""
        for op_type in op_types:
            self._classes[(normalize_domain(domain), op_type)] = OpClass(op_class or self.op_class)

    @property
    def entries(self) -> tuple[RuleEntry, ...]:
        return tuple(self._entries)

    @property
    def class_only(self) -> Mapping[OpKey, OpClass]:
        """The op types classed without a rule (:meth:`classes`)."""
        return MappingProxyType(dict(self._classes))


@frozen_dataclass(slots=True, eq=False)
class Registry:
    """Every rule by (normalized domain, op_type), and the facts other stages read from them. Build it with
    :meth:`from_families` or :meth:`of`; the mappings are read-only."""

    rules: Mapping[OpKey, RuleEntry]
    classes: Mapping[OpKey, OpClass]
    """The efficiency class of every op type a family classes: each rule's, and those classed without a rule."""
    view_ops: frozenset[OpKey]
    """The op types whose rule kind is ``view`` (Reshape, Squeeze, Identity...): the IR's index aliases their
    output to their input (:func:`onnxroof.core.index.build_index`)."""
    by_type: Mapping[str, frozenset[OpClass]]
    """op_type -> the classes it has in any domain (:meth:`type_classes`)."""

    @classmethod
    def of(cls, entries: Iterable[RuleEntry], classes: Mapping[OpKey, OpClass] | None = None) -> Registry:
        """The registry of ``entries`` (a duplicate (domain, op_type) raises :class:`DuplicateRuleError`) and of
        op types classed without a rule (``classes``; a rule's own class wins)."""
        rules: dict[OpKey, RuleEntry] = {}
        for entry in entries:
            key = (entry.domain, entry.op_type)
            if key in rules:
                raise DuplicateRuleError(
                    f"a rule for {entry.domain or 'ai.onnx'}::{entry.op_type} is already registered"
                )
            rules[key] = entry
        by_class = dict(classes or {})
        by_class.update((key, entry.op_class) for key, entry in rules.items())
        views = frozenset(key for key, entry in rules.items() if entry.kind == RuleKind.VIEW)
        by_type: dict[str, set[OpClass]] = {}
        for (_, op_type), op_class in by_class.items():
            by_type.setdefault(op_type, set()).add(op_class)
        frozen_by_type = MappingProxyType({k: frozenset(v) for k, v in by_type.items()})
        return cls(MappingProxyType(rules), MappingProxyType(by_class), views, frozen_by_type)

    @classmethod
    def from_families(cls, *families: Family) -> Registry:
        """The registry of every rule the ``families`` declare (and the op types they class without a rule)."""
        classes: dict[OpKey, OpClass] = {}
        for family in families:
            classes.update(family.class_only)
        return cls.of((entry for family in families for entry in family.entries), classes)

    def with_rules(self, *fns: RuleFn) -> Registry:
        """A new registry: this one and the rules recorded on ``fns`` by :func:`rule` (a user's own rules; a
        (domain, op_type) this registry already has raises :class:`DuplicateRuleError`)."""
        added = [entry for fn in fns for entry in entries_of(fn)]
        if not added:
            raise ValueError("with_rules: none of the functions was declared a rule (decorate it with @rule)")
        unruled = {key: cls for key, cls in self.classes.items() if key not in self.rules}
        return Registry.of((*self.rules.values(), *added), unruled)

    def lookup(self, domain: str, op_type: str) -> RuleEntry | None:
        """The rule for (domain, op_type), or None (``ai.onnx`` is the default domain)."""
        entry = self.rules.get((domain, op_type))  # the common case: the domain is already normalized
        if entry is None and domain == "ai.onnx":
            entry = self.rules.get((normalize_domain(domain), op_type))
        return entry

    def all_rules(self) -> tuple[RuleEntry, ...]:
        """Every rule, by (domain, op_type)."""
        return tuple(sorted(self.rules.values(), key=lambda e: (e.domain, e.op_type)))

    def op_class(self, domain: str, op_type: str) -> OpClass:
        """The efficiency class of (domain, op_type): its rule's, or the class a family gives it without a rule;
        ``other`` for an op no family classes. (``depthwise`` refines ``conv`` per node:
        :func:`onnxroof.costing.opclass.op_class`.)"""
        found = self.classes.get((domain, op_type))
        if found is None and domain == "ai.onnx":
            found = self.classes.get(("", op_type))
        return OpClass.OTHER if found is None else found

    def type_classes(self, op_type: str) -> frozenset[OpClass]:
        """The classes ``op_type`` has in any domain (for op types known only by name, such as a fused kernel's
        members)."""
        return self.by_type.get(op_type, frozenset())


def data_inputs(op: OpView, entry: RuleEntry) -> list[TensorInfo]:
    """The present inputs of ``op`` that carry data (config inputs excluded)."""
    return [t for i, t in enumerate(op.inputs) if t is not None and i not in entry.config_inputs]


def weight_inputs(op: OpView, entry: RuleEntry) -> list[TensorInfo]:
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
    analysis needs both for every node). The node is first held to its contract (:func:`node_contract`): a
    missing required attribute, a wrong input count, a head count of 0 or a data type outside the enum is a
    :class:`~onnxroof.core.errors.MalformedNode` naming the node and the attribute, never an internal error."""
    contract = node_contract(entry, op.opset)
    if contract is not NO_CONTRACT:
        key = f"{op.domain}::{op.op_type}" if op.domain else op.op_type
        check_node(op.id, key, len(op.inputs), op.attrs, contract)
    cost = entry.fn(op)
    table = weight_table(op, entry)
    params = float(sum(numel for numel, _ in table.values())) if table else 0.0
    if params != cost.params:  # built directly: dataclasses.replace costs ~5 µs a node on large graphs
        cost = Cost(cost.flops, cost.macs, cost.bytes_read, cost.bytes_written, params)
    return check_cost(op, cost), table


@functools.lru_cache(maxsize=4096)
def _joined(op_type: str, opset: int, domain: str, declared: NodeContract) -> NodeContract:
    joined = schema_contract(op_type, opset, domain).join(declared)
    return NO_CONTRACT if joined == NO_CONTRACT else joined


def node_contract(entry: RuleEntry, opset: int) -> NodeContract:
    """The contract a node of ``entry``'s op at ``opset`` is held to: ONNX's schema joined with the rule's own
    declaration (:mod:`onnxroof.core.contracts`), computed once per (op, opset) and declaration."""
    return _joined(entry.op_type, opset, entry.domain, entry.contract)


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
