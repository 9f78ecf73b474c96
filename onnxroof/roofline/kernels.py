"""Kernels on the roofline: what a runtime launches, placed and summed.

The fusion pass (:mod:`onnxroof.fusion.fuse`) groups costed nodes into kernels; this module places each kernel on
the platform's roofline and computes the three totals every report shows:

* **unfused** — every costed node its own kernel (an upper bound: no runtime fuses nothing);
* **fused** — the kernels of the target runtime's fusion profile (the estimate);
* **ideal** — the fused kernels with all elementwise and layout traffic free, and no launch for kernels
  left with nothing to move (a lower bound).

Layout traffic is the bytes and time of kernels that are pure copies (Transpose, Concat, Slice, Pad...)
left after fusion.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from onnxroof.core.cost import Cost
from onnxroof.core.kernel import pattern_text
from onnxroof.core.states import Bound
from onnxroof.platform.model import Platform
from onnxroof.roofline.classify import RooflinePoint, classify


@dataclass(frozen=True, slots=True)
class Placement:
    """The cost and roofline figures every node and kernel result carries (same names in both)."""

    flops: float
    macs: float
    bytes_read: float
    bytes_written: float
    params: float
    intensity: float
    peak_flops: float
    ridge: float
    attainable_flops: float
    t_compute_s: float
    t_memory_s: float
    t_overhead_s: float
    latency_s: float
    bound: Bound
    utilization: float = field(default=1.0, kw_only=True)
    """Processing-element array utilization (1 without an array or for non-GEMM kernels)."""
    energy_j: float | None = field(default=None, kw_only=True)
    """Dynamic energy, J (None: the platform gives no energy figures)."""
    energy_compute_j: float | None = field(default=None, kw_only=True)
    energy_memory_j: float | None = field(default=None, kw_only=True)
    energy_bound: Bound = field(default=Bound.NONE, kw_only=True)
    """``compute`` or ``memory`` (which energy dominates), ``none`` when nothing runs or energy is unknown."""

    @property
    def bytes(self) -> float:
        return self.bytes_read + self.bytes_written

    def _plain(self) -> dict[str, Any]:
        """Own fields first, then the placement figures, as plain data (``asdict`` deep-copies slowly)."""
        names = [f.name for f in fields(self)]
        shared = len(fields(Placement))
        return {name: getattr(self, name) for name in names[shared:] + names[:shared]}


@dataclass(frozen=True, slots=True)
class KernelResult(Placement):
    """One kernel: its member nodes, its cost (only what crosses its boundary) and its roofline point."""

    id: str
    patterns: tuple[str, ...]  # fusion patterns applied, in order; empty for a node run alone
    node_ids: tuple[str, ...]  # members in topological order; the first is the anchor
    op_types: tuple[str, ...]
    folded_nodes: tuple[str, ...]  # members whose FLOPs and parameters fold away (e.g. a BatchNorm)
    layout: bool  # a pure copy left after fusion: layout traffic
    precision: str
    ideal_bytes: float  # this kernel's traffic in the ideal total
    ideal_latency_s: float  # this kernel's time in the ideal total

    @property
    def pattern(self) -> str:
        """The patterns as text (``conv_bn+ort_conv_activation``, ``single`` for a node run alone)."""
        return pattern_text(self.patterns)

    def to_dict(self) -> dict[str, Any]:
        data = {("pattern" if name == "patterns" else name): value for name, value in self._plain().items()}
        data["pattern"] = self.pattern
        for name in ("node_ids", "op_types", "folded_nodes"):
            data[name] = list(data[name])
        return data


@dataclass(frozen=True, slots=True)
class Bounds:
    """One of the three totals."""

    flops: float
    bytes: float
    latency_s: float


def placed_fields(cost: Cost, point: RooflinePoint) -> dict[str, Any]:
    """The cost and roofline fields shared by node and kernel results (same names in both)."""
    return {
        "flops": cost.flops,
        "macs": cost.macs,
        "bytes_read": cost.bytes_read,
        "bytes_written": cost.bytes_written,
        "params": cost.params,
        **point_fields(point),
    }


def point_fields(point: RooflinePoint) -> dict[str, Any]:
    """The roofline part of :func:`placed_fields`."""
    energy = point.energy
    return {
        "intensity": point.intensity,
        "peak_flops": point.peak_flops,
        "ridge": point.ridge,
        "attainable_flops": point.attainable_flops,
        "t_compute_s": point.t_compute,
        "t_memory_s": point.t_memory,
        "t_overhead_s": point.t_overhead,
        "latency_s": point.latency,
        "bound": point.bound,
        "utilization": point.utilization,
        "energy_j": energy.total_j if energy is not None else None,
        "energy_compute_j": energy.compute_j if energy is not None else None,
        "energy_memory_j": energy.memory_j if energy is not None else None,
        "energy_bound": energy.bound if energy is not None else Bound.NONE,
    }


#: The names :func:`point_fields` gives, in order: :class:`Placement`'s fields after the five cost figures.
POINT_FIELDS = tuple(f.name for f in fields(Placement))[5:]

PointFn = Callable[[Cost, str, bool, int, "str | None", float], tuple[Any, ...]]


def node_points(platform: Platform, limit: int = 4096) -> PointFn:
    """``(cost, precision, runs, launches, op_class, utilization) -> point``: the values of
    ``point_fields(classify(...))`` (names :data:`POINT_FIELDS`) for the nodes of one model on ``platform``, each
    distinct set of figures classified once.

    A point depends on the cost only through its FLOPs and its bytes moved (:func:`classify`), and a model's
    nodes repeat few of them (a transformer's layers, a chain of elementwise ops): equal figures share one
    tuple and its float objects, which saves the classification and the memory of the copies. Equal values of
    another type (an ``int`` FLOP count beside a ``float`` one) give the same point, as every figure of a point is
    computed in floating point. At most ``limit`` figure sets are remembered (then the memo starts afresh).
    """
    memo: dict[tuple, tuple[Any, ...]] = {}

    def place(
        cost: Cost, precision: str, runs: bool, launches: int, op_class: str | None, utilization: float
    ) -> tuple[Any, ...]:
        key = (cost.flops, cost.bytes_read + cost.bytes_written, precision, runs, launches, op_class, utilization)
        found = memo.get(key)
        if found is None:
            if len(memo) >= limit:
                memo.clear()
            point = classify(
                cost, platform, precision, runs=runs, launches=launches, op_class=op_class, utilization=utilization
            )
            found = memo[key] = tuple(point_fields(point).values())
        return found

    return place


def filled(cls: type[Any], *values: Any) -> Any:
    """``cls(*values)`` for a frozen, slotted :class:`Placement` subclass, every field given positionally in field
    order (the five cost figures, :data:`POINT_FIELDS`, then the class's own fields).

    The generated ``__init__`` of a frozen dataclass sets each of its ~30 fields through ``object.__setattr__``
    (~4.4 µs a result, the largest share of a per-node or per-kernel loop on huge graphs). This calls a
    constructor generated once per class, as ``dataclasses`` generates ``__init__``, that sets each slot through
    its descriptor in one straight run (~1.5 µs). The result is an ordinary, frozen instance equal to the
    constructed one; a wrong count of values is a ``TypeError``, and the tests compare both ways.
    """
    make = _MAKERS.get(cls)
    if make is None:
        make = _MAKERS[cls] = _maker(cls)
    return make(*values)


_MAKERS: dict[type, Callable[..., Any]] = {}


def _maker(cls: type[Any]) -> Callable[..., Any]:
    """A function ``(v0, v1, ...) -> cls`` that sets slot ``i`` of a new ``cls`` to ``vi`` (see :func:`filled`)."""
    count = len(fields(cls))
    names = ", ".join(f"v{i}" for i in range(count))
    lines = [f"def make({names}):", "    made = new(cls)"]
    lines += [f"    set{i}(made, v{i})" for i in range(count)]
    lines.append("    return made")
    scope: dict[str, Any] = {"new": object.__new__, "cls": cls}
    scope.update({f"set{i}": getattr(cls, f.name).__set__ for i, f in enumerate(fields(cls))})
    exec("\n".join(lines), scope)  # the code is built here from the class's own field count: nothing external
    return scope["make"]


KernelPointFn = Callable[[Cost, Cost, str, int, "str | None", float, float], tuple[tuple[Any, ...], float]]


def kernel_points(platform: Platform, limit: int = 4096) -> KernelPointFn:
    """``(cost, ideal, precision, launches, op_class, cold_bytes, utilization) -> (point, ideal_latency)`` for the
    kernels of one model on ``platform``: the values of ``point_fields(classify(...))`` (names
    :data:`POINT_FIELDS`) and the ideal cost's latency (:func:`place_kernel`), each distinct set of figures
    computed once, as :func:`node_points` does for nodes (a point depends on a cost only through its FLOPs and
    bytes moved). At most ``limit`` figure sets are remembered (then the memo starts afresh)."""
    memo: dict[tuple, tuple[tuple[Any, ...], float]] = {}

    def place(
        cost: Cost, ideal: Cost, precision: str, launches: int, op_class: str | None, cold: float, utilization: float
    ) -> tuple[tuple[Any, ...], float]:
        key = (cost.flops, cost.bytes, ideal.flops, ideal.bytes, precision, launches, op_class, cold, utilization)
        found = memo.get(key)
        if found is None:
            if len(memo) >= limit:
                memo.clear()
            common = {"launches": launches, "op_class": op_class, "utilization": utilization}
            point = classify(cost, platform, precision, cold_bytes=cold, **common)
            if ideal.bytes > 0:
                ideal_cold = min(cold, ideal.bytes)
                ideal_latency = classify(ideal, platform, precision, cold_bytes=ideal_cold, **common).latency
            else:
                roof = platform.peak(precision) * platform.efficiency.get(op_class or "", 1.0) * utilization
                ideal_latency = ideal.flops / roof
            found = memo[key] = (tuple(point_fields(point).values()), ideal_latency)
        return found

    return place


def place_kernel(
    kernel_id: str,
    patterns: tuple[str, ...],
    node_ids: tuple[str, ...],
    op_types: tuple[str, ...],
    cost: Cost,
    ideal: Cost,
    *,
    layout: bool,
    folded: tuple[str, ...],
    platform: Platform,
    precision: str,
    launches: int = 1,
    op_class: str | None = None,
    cold_bytes: float = 0.0,
    utilization: float = 1.0,
    points: KernelPointFn | None = None,
) -> KernelResult:
    """Classify a kernel's fused cost, and its ideal cost (no launch when nothing is left to move).

    ``op_class`` picks the platform's efficiency derating, ``cold_bytes`` the bytes that come from DRAM even
    when a measured cache level could hold the working set, ``utilization`` the processing-element array
    utilization (see :func:`onnxroof.roofline.classify.classify`). ``points``: a :func:`kernel_points` of
    ``platform`` shared by a model's kernels (equal figures classified once), else one made for this kernel.
    """
    place = points or kernel_points(platform, limit=1)
    point, ideal_latency = place(cost, ideal, precision, launches, op_class, cold_bytes, utilization)
    return filled(
        KernelResult,
        cost.flops,
        cost.macs,
        cost.bytes_read,
        cost.bytes_written,
        cost.params,
        *point,
        kernel_id,
        patterns,
        node_ids,
        op_types,
        folded,
        layout,
        precision,
        ideal.bytes,
        ideal_latency,
    )


def fused_bounds(kernels: tuple[KernelResult, ...]) -> Bounds:
    return Bounds(sum(k.flops for k in kernels), sum(k.bytes for k in kernels), sum(k.latency_s for k in kernels))


def memory_bound_share(kernels: tuple[KernelResult, ...]) -> float:
    total = sum(k.latency_s for k in kernels)
    return sum(k.latency_s for k in kernels if k.bound == Bound.MEMORY) / total if total > 0 else 0.0
