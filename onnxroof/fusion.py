"""The fusion pass: the per-node graph turned into the kernels a target runtime would run.

``fuse(ir, node_costs, profile)`` groups the costed nodes into :class:`Kernel` s using the patterns the
profile enables (:mod:`onnxroof.fusion_patterns`: the patterns are data, this module applies them), and
explains every candidate that did not fuse (:class:`Miss`). Only nodes whose state is ``costed`` become
kernel members; every costed node belongs to exactly one kernel.

Order of application (mirrors how runtimes rewrite): (1) decomposed functions (GELU, SiLU, LayerNorm,
RMSNorm) are recognised, scanning nodes in topological order; (2) edge patterns grow each kernel, in
topological order of anchors, one neighbour at a time until none applies (Conv → BN → Mul → Add → Relu);
(3) pointwise fusion merges neighbouring elementwise-only kernels (never creating a cycle between kernels,
joining only kernels of equal element count).

Views (Reshape, Squeeze, Flatten, Identity, Dropout...) alias their input. Named patterns need DIRECT edges,
as the runtimes' own pattern matchers do (a view between a MatMul and its Add blocks MatMul+Add → Gemm), but
views are transparent to pointwise fusion and to the traffic accounting: a tensor read through a view is the
same buffer, and a value consumed through a view by a kernel member is internal to the kernel.

Kernel costs (a single-node kernel keeps its node's cost exactly):

* FLOPs = Σ FLOPs of the members − those of the folded members (e.g. a BatchNormalization folded into the
  preceding Conv's weights); MACs likewise.
* bytes_read = Σ bytes of the distinct tensors the members read from OUTSIDE the kernel (each read once:
  one weight or activation read by two members counts once; views resolved to the buffer they alias). Config
  inputs (shape vectors, axes) are not charged, as the rules do not charge them; a folded member's constant
  inputs (BN scale, bias, mean, var) are not read. The bias a fold adds to a bias-less Conv is not charged.
* bytes_written = Σ bytes of member outputs used outside the kernel (a consumer outside it, directly or
  through views; a Shape/Size reading only metadata does not count) or that are graph outputs.
* params = elements of the distinct weights of the non-folded members.
* Both traffic figures are capped at the sum of the members' own figures (fusion never adds traffic).
* ideal: the kernel's cost with zero bytes for elementwise-only kernels and layout copies (the traffic a
  perfect compiler would fuse away); other kernels keep their fused cost.

A kernel is ``layout`` when it is one remaining copy (a rule of kind ``layout``: Transpose not absorbed,
Concat, Split, Slice, Expand, Tile, Pad, DepthToSpace...).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import onnx

from onnxroof.control_flow import NodeCost
from onnxroof.cost import Cost
from onnxroof.errors import OnnxroofError, ShapeUnknown
from onnxroof.fusion_patterns import (
    CONSUMER,
    PATTERNS,
    PATTERNS_BY_NAME,
    PROFILES,
    Check,
    EdgePattern,
    FunctionPattern,
    PointwisePattern,
    Step,
)
from onnxroof.ir import ModelIR, OpView, TensorInfo
from onnxroof.registry import KIND_LAYOUT, KIND_METADATA, KIND_VIEW, RuleEntry, lookup

SINGLE = "single"
_ELEMENTWISE_MODULE = "onnxroof.rules.elementwise"
_COMMUTATIVE = frozenset({"Add", "Mul"})

# ------------------------------------------------------------------------------------------ public types


@dataclass(frozen=True)
class Kernel:
    """Nodes a runtime executes as one kernel.

    ``node_ids``: the anchor first, then the other members in topological order (the anchor is also
    topologically first except where a producer was absorbed, e.g. a Transpose read by the MatMul anchor).
    ``pattern``: the patterns applied, joined by ``+`` in the order they applied (``conv_bn+ort_conv_activation``),
    or ``single`` for an unfused node.
    """

    id: str
    pattern: str
    node_ids: tuple[str, ...]
    cost: Cost
    ideal: Cost
    layout: bool
    folded_nodes: tuple[str, ...]

    @property
    def patterns(self) -> tuple[str, ...]:
        """The individual pattern names (empty for an unfused node)."""
        return () if self.pattern == SINGLE else tuple(self.pattern.split("+"))


@dataclass(frozen=True)
class Miss:
    """A fusion candidate that did not fuse, and why."""

    pattern: str
    node_ids: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class FusionResult:
    """The kernels of one profile (in topological order of their anchors) and the misses, explained."""

    profile: str
    kernels: tuple[Kernel, ...]
    misses: tuple[Miss, ...]
    _by_node: Mapping[str, Kernel] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index = {node: kernel for kernel in self.kernels for node in kernel.node_ids}
        object.__setattr__(self, "_by_node", MappingProxyType(index))

    def kernel_of(self, node_id: str) -> Kernel | None:
        """The kernel ``node_id`` runs in (None for nodes that do not run: views, folded, unsupported...)."""
        return self._by_node.get(node_id)


def profile_patterns(profile: str) -> tuple[str, ...]:
    """The patterns ``profile`` enables; raises :class:`OnnxroofError` naming the known profiles."""
    try:
        return PROFILES[profile]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise OnnxroofError(f"unknown fusion profile '{profile}'; known profiles: {known}") from None


# ------------------------------------------------------------------------------------ the graph context


class _Graph:
    """Read-only lookups over the IR, built once per call."""

    def __init__(self, ir: ModelIR, node_costs: Mapping[str, NodeCost]) -> None:
        self.ir = ir
        self.costs = node_costs
        self.ops: dict[str, OpView] = {op.id: op for op in ir.ops}
        self.position: dict[str, int] = {op.id: i for i, op in enumerate(ir.ops)}
        self.entries: dict[str, RuleEntry | None] = {}
        self.costed: set[str] = set()
        self.elementwise: set[str] = set()
        self.kind: dict[str, str] = {}
        self.producer: dict[str, str] = {}
        self.consumers: dict[str, list[str]] = {}
        self.alias_of: dict[str, str] = {}  # view output -> view input
        self.alias_children: dict[str, list[str]] = {}
        self.outputs = frozenset(ir.graph_outputs)
        for op in ir.ops:
            entry = lookup(op.domain, op.op_type)
            self.entries[op.id] = entry
            self.kind[op.id] = entry.kind if entry is not None else ""
            cost = node_costs.get(op.id)
            if cost is not None and cost.state == "costed":
                self.costed.add(op.id)
                if entry is not None and entry.fn.__module__ == _ELEMENTWISE_MODULE:
                    self.elementwise.add(op.id)
            for t in op.outputs:
                if t is not None:
                    self.producer[t.name] = op.id
            seen: set[str] = set()
            for t in op.inputs:
                if t is not None and t.name not in seen:
                    seen.add(t.name)
                    self.consumers.setdefault(t.name, []).append(op.id)
            source, view = op.input(0), op.output(0)
            if self.kind[op.id] == KIND_VIEW and source is not None and view is not None:
                self.alias_of[view.name] = source.name
                self.alias_children.setdefault(source.name, []).append(view.name)
        for op in ir.ops:  # tensors read implicitly by If/Loop/Scan bodies
            if op.subgraphs and ir.graph.has_node(op.id):
                for _, _, data in ir.graph.in_edges(op.id, data=True):
                    for name in data.get("tensors", ()):
                        users = self.consumers.setdefault(name, [])
                        if op.id not in users:
                            users.append(op.id)
        self._users: dict[str, tuple[tuple[str, ...], bool]] = {}

    def root(self, name: str) -> str:
        """The buffer a tensor aliases (through views)."""
        while name in self.alias_of:
            name = self.alias_of[name]
        return name

    def users(self, name: str) -> tuple[tuple[str, ...], bool]:
        """Nodes that need ``name``'s data (through views; metadata readers excluded), and whether it (or an
        alias) is a graph output."""
        cached = self._users.get(name)
        if cached is not None:
            return cached
        found: list[str] = []
        exported = name in self.outputs
        for node in self.consumers.get(name, ()):
            kind, source = self.kind[node], self.ops[node].input(0)
            if kind == KIND_VIEW and source is not None and source.name == name:
                continue  # an alias: its own users are followed below
            if kind != KIND_METADATA:
                found.append(node)
        for child in self.alias_children.get(name, ()):
            more, child_exported = self.users(child)
            found.extend(n for n in more if n not in found)
            exported = exported or child_exported
        result = (tuple(found), exported)
        self._users[name] = result
        return result

    def escapes(self, name: str, members: set[str]) -> bool:
        users, exported = self.users(name)
        return exported or any(u not in members for u in users)

    def label(self, node: str) -> str:
        return f"{self.ops[node].op_type} {node}"


# ----------------------------------------------------------------------------------------------- units


class _Unit:
    """A kernel being built (internal, mutable while the pass runs)."""

    __slots__ = ("alive", "anchor", "folded", "function", "nodes", "op_type", "out", "patterns")

    def __init__(self, anchor: str, op_type: str, out: str | None) -> None:
        self.anchor = anchor
        self.nodes = [anchor]
        self.op_type = op_type
        self.out = out
        self.folded: list[str] = []
        self.patterns: list[str] = []
        self.function = False  # formed only by function patterns
        self.alive = True


def _op_key(op: OpView) -> str:
    return op.op_type if op.domain in ("", "com.microsoft") else f"{op.domain}::{op.op_type}"


class _Pass:
    """State of one fusion pass: the units, who owns which node, the misses found so far."""

    def __init__(self, graph: _Graph) -> None:
        self.g = graph
        self.unit_of: dict[str, _Unit] = {}
        for op in graph.ir.ops:
            if op.id in graph.costed:
                out = op.outputs[0].name if op.outputs and op.outputs[0] is not None else None
                self.unit_of[op.id] = _Unit(op.id, _op_key(op), out)
        self.misses: list[Miss] = []

    def single(self, node: str) -> _Unit | None:
        unit = self.unit_of.get(node)
        return unit if unit is not None and len(unit.nodes) == 1 else None

    def miss(self, pattern: str, nodes: Iterable[str], reason: str) -> None:
        ordered = tuple(sorted(set(nodes), key=self.g.position.__getitem__))
        self.misses.append(Miss(pattern, ordered, reason))

    def merge(self, unit: _Unit, other: _Unit, pattern: str, fold: bool, produces: str | None, out: str | None) -> None:
        unit.nodes.extend(other.nodes)
        if fold:
            unit.folded.extend(other.nodes)
        unit.folded.extend(other.folded)
        for name in other.patterns:
            if name not in unit.patterns:
                unit.patterns.append(name)
        if pattern not in unit.patterns:
            unit.patterns.append(pattern)
        unit.op_type = produces or unit.op_type
        unit.out = out
        unit.function = False
        other.alive = False
        for node in other.nodes:
            self.unit_of[node] = unit


# ------------------------------------------------------------------------------ phase 1: functions


class _Match:
    """Bindings of one template match attempt."""

    __slots__ = ("alias", "bind", "used")

    def __init__(self) -> None:
        self.bind: dict[str, str] = {}
        self.alias: dict[str, str] = {}
        self.used: dict[str, str] = {}  # node id -> step var

    def resolve(self, var: str) -> str:
        while var in self.alias:
            var = self.alias[var]
        return var


def _first_ref(step: Step) -> str | None:
    for token in step.alternatives[0][1]:
        if token.startswith("$"):
            return token[1:]
    return None


def _match_inputs(op: OpView, tokens: tuple[str, ...], match: _Match) -> dict[str, str] | None:
    inputs = list(op.inputs)
    while inputs and inputs[-1] is None:
        inputs.pop()
    if len(inputs) > len(tokens):
        return None
    orders = [tokens]
    if op.op_type in _COMMUTATIVE and len(tokens) == 2 and len(inputs) == 2:
        orders.append((tokens[1], tokens[0]))
    for order in orders:
        new: dict[str, str] = {}
        for i, token in enumerate(order):
            t = inputs[i] if i < len(inputs) else None
            if token == "c":
                ok = t is not None and t.is_constant
            elif token == "?c":
                ok = t is None or t.is_constant
            elif token == "*":
                ok = t is not None
            else:
                var = match.resolve(token[1:])
                bound = match.bind.get(var, new.get(var))
                ok = t is not None and (bound is None or bound == t.name)
                if ok and bound is None:
                    new[var] = t.name  # type: ignore[union-attr]
            if not ok:
                break
        else:
            return new
    return None


def _try_step(step: Step, node: str, match: _Match, g: _Graph) -> bool:
    """Bind ``node`` to ``step`` if its op type and inputs fit one of the step's alternatives."""
    op = g.ops[node]
    out = op.output(0)
    if out is None:
        return False
    for op_type, tokens in step.alternatives:
        if op.op_type != op_type:
            continue
        new = _match_inputs(op, tokens, match)
        if new is None:
            continue
        match.bind.update(new)
        match.bind[match.resolve(step.out)] = out.name
        match.used[node] = step.out
        return True
    return False


def _match_variant(steps: tuple[Step, ...], start: int, node: str, state: _Pass) -> _Match | None:
    g = state.g
    match = _Match()
    for step in steps[:start]:
        ref = _first_ref(step)
        if ref is None:
            return None
        match.alias[step.out] = ref
    if not _try_step(steps[start], node, match, g):
        return None
    for step in steps[start + 1 :]:
        found = False
        for op_type, tokens in step.alternatives:
            refs = [match.resolve(t[1:]) for t in tokens if t.startswith("$")]
            bound = [match.bind[r] for r in refs if r in match.bind]
            if not bound:
                continue
            for candidate in g.consumers.get(min(bound, key=lambda name: len(g.consumers.get(name, ()))), ()):
                if candidate in match.used or state.single(candidate) is None:
                    continue
                if g.ops[candidate].op_type == op_type and _try_step(step, candidate, match, g):
                    found = True
                    break
            if found:
                break
        if not found:
            if not step.optional:
                return None
            ref = _first_ref(step)
            if ref is None:
                return None
            match.alias[step.out] = ref
    return match


def _start_indices(steps: tuple[Step, ...], op_type: str) -> list[int]:
    starts = []
    for i, step in enumerate(steps):
        if any(alt[0] == op_type for alt in step.alternatives):
            starts.append(i)
        if not step.optional:
            break
    return starts


def _apply_function(pattern: FunctionPattern, node: str, state: _Pass) -> bool:
    g = state.g
    op_type = g.ops[node].op_type
    for steps in pattern.variants:
        for start in _start_indices(steps, op_type):
            match = _match_variant(steps, start, node, state)
            if match is None:
                continue
            output = match.bind.get(match.resolve(steps[-1].out))
            if output is None:
                continue
            members = set(match.used)
            reason = _internal_escape(members, output, g)
            if reason is not None:
                state.miss(pattern.name, members, f"{pattern.name}: {reason}")
                continue
            ordered = sorted(members, key=g.position.__getitem__)
            unit = state.unit_of[ordered[0]]
            for other in ordered[1:]:
                state.merge(unit, state.unit_of[other], pattern.name, False, None, None)
            unit.patterns = [pattern.name]
            unit.op_type = pattern.produces
            unit.out = output
            unit.function = True
            return True
    return False


def _internal_escape(members: set[str], output: str, g: _Graph) -> str | None:
    for node in sorted(members, key=g.position.__getitem__):
        for t in g.ops[node].outputs:
            if t is None or t.name == output:
                continue
            users, exported = g.users(t.name)
            if exported:
                return f"{g.label(node)}'s output '{t.name}' is a graph output"
            outside = [u for u in users if u not in members]
            if outside:
                return f"{g.label(node)}'s output '{t.name}' also feeds {g.label(outside[0])}"
    return None


# ---------------------------------------------------------------------------------- phase 2: edges


@dataclass(frozen=True, slots=True)
class _Edge:
    """One candidate application of an edge pattern: ``anchor`` absorbing ``joined`` through ``value``."""

    pattern: EdgePattern
    anchor: _Unit
    joined: _Unit
    value: str  # the tensor passed from the producer side to the consumer side
    state: _Pass

    @property
    def g(self) -> _Graph:
        return self.state.g

    @property
    def anchor_op(self) -> OpView:
        return self.g.ops[self.anchor.anchor]

    @property
    def joined_op(self) -> OpView:
        return self.g.ops[self.joined.anchor]

    def consumer_side(self) -> _Unit:
        return self.joined if self.pattern.direction == CONSUMER else self.anchor


@functools.lru_cache(maxsize=1024)
def _input_name(op_type: str, opset: int, index: int) -> str:
    try:
        schema = onnx.defs.get_schema(op_type, max_inclusive_version=opset)
    except onnx.defs.SchemaError:
        return f"#{index}"
    formal = schema.inputs
    if not formal:
        return f"#{index}"
    return formal[min(index, len(formal) - 1)].name


def _describe(t: TensorInfo) -> str:
    return "a graph input" if t.role == "input" else "computed at run time"


def _shape(t: TensorInfo | None) -> tuple[int | None, ...] | None:
    return None if t is None else t.shape


def _fmt(shape: tuple[int | None, ...] | None) -> str:
    if shape is None:
        return "unknown"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _other_operand(op: OpView, value: str) -> TensorInfo | None:
    present = [t for t in op.inputs if t is not None]
    others = [t for t in present if t.name != value]
    return others[0] if len(present) == 2 and len(others) == 1 else None


NOT_A_CANDIDATE = ""
"""What a check returns when the neighbour is no candidate at all (no :class:`Miss` is recorded)."""


def _check_sole_consumer(edge: _Edge, args: tuple[object, ...]) -> str | None:
    g = edge.g
    users = g.consumers.get(edge.value, ())
    exported = edge.value in g.outputs
    side = edge.consumer_side()
    producer = g.producer[edge.value]
    outside = [u for u in users if edge.state.unit_of.get(u) is not side]
    if outside or exported:
        count = len(users) + (1 if exported else 0)
        if exported and len(users) <= 1:
            return f"{g.ops[producer].op_type} output {producer} is a graph output"
        names = ", ".join(g.label(u) for u in users[:3]) + (", ..." if len(users) > 3 else "")
        extra = " and is a graph output" if exported else ""
        return f"{g.ops[producer].op_type} output {producer} feeds {count} nodes ({names}){extra}"
    producer_side = edge.anchor if edge.pattern.direction == CONSUMER else edge.joined
    members = set(producer_side.nodes)
    for node in producer_side.nodes:
        for t in g.ops[node].outputs:
            if t is not None and t.name != edge.value and g.escapes(t.name, members):
                return f"{g.label(node)} also outputs '{t.name}', used elsewhere"
    return None


def _check_constant_inputs(edge: _Edge, args: tuple[object, ...]) -> str | None:
    side, indices = args
    op = edge.anchor_op if side == "anchor" else edge.joined_op
    for i in indices:  # type: ignore[union-attr]
        t = op.input(i)
        if t is not None and not t.is_constant:
            name = _input_name(op.op_type, op.opset, i)
            return f"{edge.g.label(op.id)} input '{name}' ('{t.name}') is {_describe(t)}, not a constant"
    return None


def _check_inference_mode(edge: _Edge, args: tuple[object, ...]) -> str | None:
    op = edge.joined_op
    if op.attrs.get("training_mode", 0) or any(t is not None for t in op.outputs[1:]):
        return f"{edge.g.label(op.id)} computes batch statistics (training mode)"
    return None


def _channels(op: OpView) -> int | None:
    out = op.output(0)
    if out is None or out.shape is None or len(out.shape) < 2:
        return None
    return out.shape[1]


def _check_channel_params(edge: _Edge, args: tuple[object, ...]) -> str | None:
    (indices,) = args
    channels = _channels(edge.anchor_op)
    op = edge.joined_op
    for i in indices:  # type: ignore[union-attr]
        t = op.input(i)
        if t is None or channels is None or t.shape != (channels,):
            name = _input_name(op.op_type, op.opset, i)
            return (
                f"{edge.g.label(op.id)} input '{name}' has shape {_fmt(_shape(t))}, not one value per channel "
                f"([{channels if channels is not None else '?'}])"
            )
    return None


def _check_channel_operand(edge: _Edge, args: tuple[object, ...]) -> str | None:
    (allow_scalar,) = args
    g, op = edge.g, edge.joined_op
    verb = "multiplies by" if op.op_type == "Mul" else "adds"
    other = _other_operand(op, edge.value)
    if other is None:
        return f"{g.label(op.id)} does not combine the conv output with exactly one other tensor"
    if not other.is_constant:
        if op.op_type != "Add":
            return NOT_A_CANDIDATE  # a product of two run-time tensors folds into nothing
        return f"{g.label(op.id)} {verb} '{other.name}', {_describe(other)} (a residual), not a constant"
    if op.input(0) is None or op.inputs[0].name != edge.value:  # type: ignore[union-attr]
        return f"{g.label(op.id)} takes the conv output as its second operand (only Conv → {op.op_type}(y, c) folds)"
    weight = edge.anchor_op.input(1)
    shape = other.shape
    if weight is None or weight.shape is None or shape is None:
        return f"{g.label(op.id)}: shapes unknown"
    channels, rank = weight.shape[0], len(weight.shape)
    if not shape:
        return None if allow_scalar else f"{g.label(op.id)} {verb} a scalar, not one value per output channel"
    axis = 0 if len(shape) == rank - 1 else 1 if len(shape) == rank else None
    if axis is not None and shape[axis] == channels and all(d == 1 for i, d in enumerate(shape) if i != axis):
        return None
    return (
        f"{g.label(op.id)}'s constant '{other.name}' has shape {_fmt(shape)}, not one value per output "
        f"channel ([{channels},1,..] or [1,{channels},1,..])"
    )


def _bias_add(edge: _Edge) -> OpView:
    joined = edge.joined_op
    return joined if joined.op_type == "Add" and len(edge.joined.nodes) == 1 else edge.anchor_op


def _check_bias_operand(edge: _Edge, args: tuple[object, ...]) -> str | None:
    g, add = edge.g, _bias_add(edge)
    present = [t for t in add.inputs if t is not None]
    constants = [t for t in present if t.is_constant]
    if len(present) != 2 or len(constants) != 1:
        if not constants:
            return f"{g.label(add.id)} adds two run-time tensors, not a bias"
        return f"{g.label(add.id)} does not add a bias to a run-time tensor"
    bias, out = constants[0], add.output(0)
    last = out.shape[-1] if out is not None and out.shape else None
    shape = bias.shape
    if last is None or shape is None or not shape or shape[-1] != last or any(d != 1 for d in shape[:-1]):
        return (
            f"{g.label(add.id)}'s constant '{bias.name}' has shape {_fmt(shape)}, not a bias along the last axis "
            f"([{last if last is not None else '?'}])"
        )
    return None


def _check_residual_operand(edge: _Edge, args: tuple[object, ...]) -> str | None:
    g, op = edge.g, edge.joined_op
    other = _other_operand(op, edge.value)
    if other is None:
        return f"{g.label(op.id)} does not add exactly one other tensor"
    if other.is_constant:
        return f"{g.label(op.id)} adds the constant '{other.name}', not a residual"
    value = g.ir.tensors.get(edge.value)
    if value is None or other.shape != value.shape or not other.is_static_shape:
        shape = None if value is None else value.shape
        return f"{g.label(op.id)} broadcasts '{other.name}' {_fmt(other.shape)} onto {_fmt(shape)}"
    return None


def _check_skip_operands(edge: _Edge, args: tuple[object, ...]) -> str | None:
    g, add = edge.g, edge.anchor_op
    present = [t for t in add.inputs if t is not None]
    out = add.output(0)
    if len(present) != 2 or any(t.is_constant for t in present):
        return f"{g.label(add.id)} does not add two run-time tensors (not a residual)"
    a, b = present
    if out is None or a.shape != b.shape or a.shape != out.shape or not a.is_static_shape:
        shapes = f"{_fmt(a.shape)} with {_fmt(b.shape)}"
        return f"{g.label(add.id)} broadcasts {shapes} (SkipLayerNormalization needs one shape)"
    if len(a.shape) != 3:  # type: ignore[arg-type]
        return f"{g.label(add.id)} is {len(a.shape)}-D; SkipLayerNormalization takes 3-D inputs"  # type: ignore[arg-type]
    return None


def _check_scalar_operand(edge: _Edge, args: tuple[object, ...]) -> str | None:
    g, op = edge.g, edge.joined_op
    other = _other_operand(op, edge.value)
    if other is None:
        return f"{g.label(op.id)} does not scale by one other operand"
    if op.op_type == "Div" and (op.input(0) is None or op.inputs[0].name != edge.value):  # type: ignore[union-attr]
        return f"{g.label(op.id)} divides by the product, not the product by a constant"
    if not other.is_constant:
        return NOT_A_CANDIDATE  # a product of two run-time tensors is no scale
    if not other.is_static_shape or other.numel != 1:
        return f"{g.label(op.id)} scales by '{other.name}' of shape {_fmt(other.shape)}, not a scalar"
    return None


def _check_ops_in(edge: _Edge, args: tuple[object, ...]) -> str | None:
    ops, kernel = args
    if edge.joined.op_type not in ops:  # type: ignore[operator]
        return (
            f"{kernel} takes only {', '.join(sorted(ops))}: {edge.joined.op_type} {edge.joined.anchor} "  # type: ignore[arg-type]
            f"stays a separate kernel"
        )
    return None


def _check_clip_constant(edge: _Edge, args: tuple[object, ...]) -> str | None:
    op = edge.joined_op
    if edge.joined.op_type != "Clip" or len(edge.joined.nodes) != 1:
        return None
    for i in (1, 2):
        t = op.input(i)
        if t is not None and not t.is_constant:
            return f"{edge.g.label(op.id)} bound '{t.name}' is {_describe(t)}, not a constant"
    return None


def _check_dtype_in(edge: _Edge, args: tuple[object, ...]) -> str | None:
    (dtypes,) = args
    op = edge.anchor_op
    if op.dtype not in dtypes:  # type: ignore[operator]
        return f"{edge.g.label(op.id)} computes in {op.dtype}; this fusion handles {', '.join(dtypes)} only"  # type: ignore[arg-type]
    return None


def _check_matmul_add_shapes(edge: _Edge, args: tuple[object, ...]) -> str | None:
    g, mm, add = edge.g, edge.anchor_op, edge.joined_op
    a, b = mm.input(0), mm.input(1)
    bias = _other_operand(add, edge.value)
    if a is None or b is None or bias is None:
        return f"{g.label(add.id)} is not a MatMul output plus one other tensor"
    if a.dtype not in ("float32", "float16", "bfloat16") or add.inputs[0] is None or add.inputs[0].dtype != a.dtype:
        return f"{g.label(mm.id)} computes in {a.dtype}; Gemm takes float32/float16/bfloat16 only"
    if b.shape is None or len(b.shape) != 2:
        return f"{g.label(mm.id)}'s B operand '{b.name}' is {_fmt(b.shape)}, not 2-D"
    if not a.is_static_shape or not b.is_static_shape:
        return f"{g.label(mm.id)}'s operand shapes are not static"
    n = b.shape[1]
    allowed = [(n,)]
    if len(a.shape) == 2:  # type: ignore[arg-type]
        m = a.shape[0]  # type: ignore[index]
        allowed += [(1, n), (m, 1), (m, n)]
    if bias.shape not in allowed:
        shapes = " or ".join(_fmt(s) for s in allowed)
        return f"{g.label(add.id)} adds '{bias.name}' of shape {_fmt(bias.shape)}; Gemm's C must be {shapes}"
    return None


def _check_gemm_2d(edge: _Edge, args: tuple[object, ...]) -> str | None:
    op = edge.anchor_op
    a = op.input(0)
    if op.op_type == "MatMul" and (a is None or a.shape is None or len(a.shape) != 2):
        return (
            f"{edge.g.label(op.id)} + Add is {len(a.shape) if a is not None and a.shape else '?'}-D: ORT runs it as "
            f"Reshape → Gemm → Reshape, and the Reshape keeps the activation out of FusedGemm"
        )
    return None


def _check_swaps_last_two_axes(edge: _Edge, args: tuple[object, ...]) -> str | None:
    op = edge.joined_op
    t = op.input(0)
    rank = len(t.shape) if t is not None and t.shape is not None else None
    if rank is None:
        return f"{edge.g.label(op.id)}: rank unknown"
    perm = list(op.attrs.get("perm") or reversed(range(rank)))
    wanted = [*range(rank - 2), rank - 1, rank - 2]
    if rank < 2 or perm != wanted:
        return f"{edge.g.label(op.id)} has perm {perm}, not a swap of the last two axes: it stays a layout copy"
    return None


CHECKS = MappingProxyType(
    {
        "sole_consumer": _check_sole_consumer,
        "constant_inputs": _check_constant_inputs,
        "inference_mode": _check_inference_mode,
        "channel_params": _check_channel_params,
        "channel_operand": _check_channel_operand,
        "bias_operand": _check_bias_operand,
        "residual_operand": _check_residual_operand,
        "skip_operands": _check_skip_operands,
        "scalar_operand": _check_scalar_operand,
        "ops_in": _check_ops_in,
        "clip_constant": _check_clip_constant,
        "dtype_in": _check_dtype_in,
        "matmul_add_shapes": _check_matmul_add_shapes,
        "gemm_2d": _check_gemm_2d,
        "swaps_last_two_axes": _check_swaps_last_two_axes,
    }
)
"""Check kind → implementation ``(edge, args) -> reason | None``."""


def _run_checks(edge: _Edge, checks: tuple[Check, ...]) -> str | None:
    for item in checks:
        try:
            reason = CHECKS[item.kind](edge, item.args)
        except ShapeUnknown as missing:
            reason = f"no static shape for '{missing.tensor}'"
        if reason is not None:
            return reason
    return None


def _joinable(unit: _Unit | None, anchor: _Unit, pattern: EdgePattern) -> bool:
    return (
        unit is not None
        and unit is not anchor
        and unit.op_type in pattern.joins
        and (len(unit.nodes) == 1 or unit.function)
    )


def _apply_edge(pattern: EdgePattern, unit: _Unit, state: _Pass) -> bool:
    g = state.g
    if pattern.direction == CONSUMER:
        if unit.out is None:
            return False
        candidates = [state.unit_of.get(u) for u in g.consumers.get(unit.out, ())]
        joined = next((c for c in candidates if _joinable(c, unit, pattern)), None)
        if joined is None:
            return False
        edge = _Edge(pattern, unit, joined, unit.out, state)
        reason = _run_checks(edge, pattern.checks)
        if reason is not None:
            if reason != NOT_A_CANDIDATE:
                state.miss(pattern.name, (unit.anchor, *joined.nodes), reason)
            return False
        state.merge(unit, joined, pattern.name, pattern.fold, pattern.produces, joined.out)
        return True
    for t in g.ops[unit.anchor].inputs:
        if t is None or t.name not in g.producer:
            continue
        producer = state.unit_of.get(g.producer[t.name])
        if producer is None or not _joinable(producer, unit, pattern) or producer.out != t.name:
            continue
        edge = _Edge(pattern, unit, producer, t.name, state)
        reason = _run_checks(edge, pattern.checks)
        if reason is not None:
            if reason != NOT_A_CANDIDATE:
                state.miss(pattern.name, (unit.anchor, *producer.nodes), reason)
            continue
        state.merge(unit, producer, pattern.name, pattern.fold, pattern.produces, unit.out)
        return True
    return False


def _explain_orphans(pattern: EdgePattern, state: _Pass) -> None:
    g = state.g
    explained = {node for miss in state.misses if miss.pattern == pattern.name for node in miss.node_ids}
    anchors = "/".join(sorted(pattern.anchor))
    verb = "fold" if pattern.fold else "fuse"
    for op in g.ir.ops:
        unit = state.single(op.id)
        if unit is None or unit.op_type not in pattern.orphans or op.id in explained:
            continue
        first = op.input(0)
        source = g.producer.get(first.name) if first is not None else None
        if source is None:
            where = f"its input '{first.name}' is a graph input" if first is not None else "it has no input"
            state.miss(pattern.name, (op.id,), f"{g.label(op.id)} does not directly follow a {anchors}: {where}")
            continue
        reason = f"{g.label(op.id)} does not directly follow a {anchors}: its input comes from {g.label(source)}"
        before = g.ops[source].input(0)
        grand = g.producer.get(before.name) if before is not None else None
        kernel = state.unit_of.get(grand) if grand is not None else None
        grand_op = g.ops[kernel.anchor if kernel is not None else grand].op_type if grand is not None else ""
        if grand_op in pattern.anchor:  # e.g. the Relu follows a Conv (or a Conv kernel that folded its BN)
            reason += f" ({grand_op}→{g.ops[source].op_type}→{op.op_type} does not {verb})"
        state.miss(pattern.name, (source, op.id), reason)


# ------------------------------------------------------------------------------ phase 3: pointwise


def _apply_pointwise(pattern: PointwisePattern, state: _Pass) -> None:
    """Merge neighbouring elementwise-only units of equal element count, never creating a cycle.

    Blocks (units, and every node that is not a kernel member) are visited in topological order; ``dep`` is
    the bitset of groups a block transitively depends on. A unit joins a producer's group G only if no other
    producer (views resolved) depends on G: otherwise the fused kernel would both feed and wait for it.
    """
    g = state.g
    block: dict[str, object] = {op.id: state.unit_of.get(op.id) or op.id for op in g.ir.ops}
    preds: dict[object, list[object]] = {b: [] for b in block.values()}
    for name, readers in g.consumers.items():  # every data edge, implicit reads by If/Loop bodies included
        p = g.producer.get(name)
        if p is None:
            continue
        for reader in readers:
            found = preds[block[reader]]
            if block[p] is not block[reader] and all(block[p] is not q for q in found):
                found.append(block[p])
    waiting = {b: len(ps) for b, ps in preds.items()}
    succs: dict[object, list[object]] = {b: [] for b in preds}
    for b, ps in preds.items():
        for p in ps:
            succs[p].append(b)
    order: list[object] = []
    ready = [b for b, n in waiting.items() if n == 0]
    while ready:
        b = ready.pop()
        order.append(b)
        for s in succs[b]:
            waiting[s] -= 1
            if waiting[s] == 0:
                ready.append(s)
    if len(order) != len(preds):  # the blocks do not form a DAG (cannot happen for convex kernels): no fusion
        return
    position = {b: i for i, b in enumerate(order)}

    def is_view(b: object) -> bool:
        return isinstance(b, str) and g.kind[b] == KIND_VIEW

    def pointwise(b: object) -> bool:
        return isinstance(b, _Unit) and not b.folded and all(n in g.elementwise for n in b.nodes)

    def numel(unit: _Unit) -> int | None:
        t = g.ir.tensors.get(unit.out) if unit.out is not None else None
        return t.numel if t is not None and t.is_static_shape else None

    effective: dict[object, list[object]] = {}
    group: dict[object, int] = {}
    dep: dict[object, int] = {}
    grouped: dict[int, list[_Unit]] = {}
    for b in order:
        resolved: list[object] = []
        for p in preds[b]:
            for q in effective[p] if is_view(p) else (p,):
                if all(q is not r for r in resolved):
                    resolved.append(q)
        effective[b] = resolved
        if is_view(b):
            continue
        chosen = None
        candidates: list[_Unit] = []
        if pointwise(b):
            size = numel(b)  # type: ignore[arg-type]
            candidates = [
                p  # type: ignore[misc]
                for p in sorted(resolved, key=position.__getitem__)
                if size is not None and pointwise(p) and numel(p) == size  # type: ignore[arg-type]
            ]
            for p in candidates:
                bit = 1 << group[p]
                if all(group[q] == group[p] or not dep[q] & bit for q in resolved):
                    chosen = group[p]
                    break
        group[b] = len(group) if chosen is None else chosen
        if isinstance(b, _Unit):
            grouped.setdefault(group[b], []).append(b)
        for p in candidates:  # sibling groups that feed only this unit join it too
            other = group[p]
            if other != group[b] and not dep[p] & (1 << group[b]) and _private(grouped[other], b, state):
                for unit in grouped.pop(other):
                    group[unit] = group[b]
                    grouped[group[b]].append(unit)
        mask = 0
        for q in resolved:
            mask |= dep[q] | (1 << group[q])
        dep[b] = mask
    for units in grouped.values():
        if len(units) < 2:
            continue
        units.sort(key=lambda u: min(g.position[n] for n in u.nodes))
        head = units[0]
        for other in units[1:]:
            state.merge(head, other, pattern.name, False, "Pointwise", other.out)
        head.anchor = min(head.nodes, key=g.position.__getitem__)
        head.patterns = [name for name in head.patterns if name != pattern.name] + [pattern.name]


def _private(units: list[_Unit], consumer: _Unit, state: _Pass) -> bool:
    """Whether every output of ``units`` is used only inside them or by ``consumer`` (and is no graph output)."""
    inside = {id(u) for u in units} | {id(consumer)}
    for unit in units:
        for node in unit.nodes:
            for t in state.g.ops[node].outputs:
                if t is None:
                    continue
                users, exported = state.g.users(t.name)
                if exported or any(id(state.unit_of.get(u)) not in inside for u in users):
                    return False
    return True


# ------------------------------------------------------------------------------------------- kernels


def _kernel_cost(nodes: list[str], folded: set[str], g: _Graph) -> Cost:
    costs = [g.costs[n].cost for n in nodes]
    if len(nodes) == 1:
        return costs[0]
    flops = sum(c.flops for n, c in zip(nodes, costs, strict=True) if n not in folded)
    macs = sum(c.macs for n, c in zip(nodes, costs, strict=True) if n not in folded)
    weights: dict[str, tuple[float, float]] = {}
    for n in nodes:
        if n not in folded:
            weights.update(g.costs[n].weights)
    params = float(sum(numel for numel, _ in weights.values()))
    sum_read = sum(c.bytes_read for c in costs)
    sum_written = sum(c.bytes_written for c in costs)
    members = set(nodes)
    try:
        reads: dict[str, float] = {}
        written = 0.0
        for n in nodes:
            op, entry = g.ops[n], g.entries[n]
            skip = entry.config_inputs if entry is not None else frozenset()
            for i, t in enumerate(op.inputs):
                if t is None or i in skip or (n in folded and t.is_constant):
                    continue
                root = g.root(t.name)
                if g.producer.get(root) in members or root in reads:
                    continue
                reads[root] = t.nbytes
            for t in op.outputs:
                if t is not None and g.escapes(t.name, members):
                    written += t.nbytes
        bytes_read, bytes_written = min(sum(reads.values()), sum_read), min(written, sum_written)
    except ShapeUnknown:
        bytes_read, bytes_written = sum_read, sum_written
    return Cost(float(flops), float(macs), float(bytes_read), float(bytes_written), params)


def _build_kernels(state: _Pass) -> tuple[Kernel, ...]:
    g = state.g
    units = {id(u): u for u in state.unit_of.values() if u.alive}
    ordered = sorted(units.values(), key=lambda u: g.position[u.anchor])
    kernels = []
    for number, unit in enumerate(ordered, start=1):
        rest = sorted((n for n in unit.nodes if n != unit.anchor), key=g.position.__getitem__)
        nodes = [unit.anchor, *rest]
        folded = set(unit.folded)
        cost = _kernel_cost(nodes, folded, g)
        layout = len(nodes) == 1 and g.kind[unit.anchor] == KIND_LAYOUT
        free = layout or all(n in g.elementwise for n in nodes)
        ideal = Cost(cost.flops, cost.macs, 0.0, 0.0, cost.params) if free else cost
        kernels.append(
            Kernel(
                id=f"k{number}",
                pattern="+".join(unit.patterns) if unit.patterns else SINGLE,
                node_ids=tuple(nodes),
                cost=cost,
                ideal=ideal,
                layout=layout,
                folded_nodes=tuple(n for n in nodes if n in folded),
            )
        )
    return tuple(kernels)


def _final_misses(state: _Pass, kernels: tuple[Kernel, ...]) -> tuple[Miss, ...]:
    g = state.g
    kernel_of = {n: k for k in kernels for n in k.node_ids}
    kept: list[Miss] = []
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for miss in state.misses:
        key = (miss.pattern, miss.node_ids)
        if key in seen:
            continue
        seen.add(key)
        owners = {id(kernel_of[n]) if n in kernel_of else n for n in miss.node_ids}
        if len(miss.node_ids) > 1 and len(owners) == 1:
            continue  # another pattern fused these nodes after all
        function = isinstance(PATTERNS_BY_NAME.get(miss.pattern), FunctionPattern)
        if function and any(n in kernel_of and miss.pattern in kernel_of[n].patterns for n in miss.node_ids):
            continue  # the function was recognised on these nodes after all (from another start)
        kept.append(miss)
    kept.sort(key=lambda m: (g.position[m.node_ids[0]], m.pattern))
    return tuple(kept)


# ----------------------------------------------------------------------------------------------- entry


def fuse(ir: ModelIR, node_costs: Mapping[str, NodeCost], profile: str) -> FusionResult:
    """Group ``ir``'s costed nodes into the kernels the ``profile`` target would run (see the module docs)."""
    enabled = set(profile_patterns(profile))
    patterns = [p for p in PATTERNS if p.name in enabled]
    graph = _Graph(ir, node_costs)
    state = _Pass(graph)

    functions = [p for p in patterns if isinstance(p, FunctionPattern)]
    if functions:
        starts: dict[str, list[FunctionPattern]] = {}
        for p in functions:
            for steps in p.variants:
                for step in steps:
                    for op_type, _ in step.alternatives:
                        if p not in starts.setdefault(op_type, []):
                            starts[op_type].append(p)
                    if not step.optional:
                        break
        for op in ir.ops:
            for p in starts.get(op.op_type, ()):
                if state.single(op.id) is not None and _apply_function(p, op.id, state):
                    break

    edges = [p for p in patterns if isinstance(p, EdgePattern)]
    if edges:
        for op in ir.ops:
            unit = state.unit_of.get(op.id)
            if unit is None or not unit.alive or unit.anchor != op.id:
                continue
            progressed = True
            while progressed:
                progressed = any(unit.op_type in p.anchor and _apply_edge(p, unit, state) for p in edges)
        for p in edges:
            if p.orphans:
                _explain_orphans(p, state)

    for p in patterns:
        if isinstance(p, PointwisePattern):
            _apply_pointwise(p, state)

    kernels = _build_kernels(state)
    return FusionResult(profile, kernels, _final_misses(state, kernels))


__all__ = [
    "CHECKS",
    "NOT_A_CANDIDATE",
    "SINGLE",
    "FusionResult",
    "Kernel",
    "Miss",
    "fuse",
    "profile_patterns",
]
