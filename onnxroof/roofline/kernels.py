"""Kernels on the roofline: what a runtime launches, placed and summed.

The fusion pass (:mod:`onnxroof.fusion.fuse`) groups costed nodes into kernels; :func:`place_kernels` places them
all at once (:func:`onnxroof.roofline.place.place`) into a :class:`KernelTable`, whose rows read as
:class:`KernelResult` views, and this module sums the three totals every report shows:

* **unfused** — every costed node its own kernel (an upper bound: no runtime fuses nothing);
* **fused** — the kernels of the target runtime's fusion profile (the estimate);
* **ideal** — the fused kernels with all elementwise and layout traffic free, and no launch for kernels
  left with nothing to move (a lower bound).

Layout traffic is the bytes and time of kernels that are pure copies (Transpose, Concat, Slice, Pad...)
left after fusion.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from onnxroof.core.cost import Cost
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.kernel import pattern_text
from onnxroof.core.states import Bound
from onnxroof.platform.model import Platform
from onnxroof.roofline.place import FIGURES, ROOFLINE, Figures, Floats, Objects, TimeModel, Work, floats, place
from onnxroof.roofline.rows import Column, CostColumn, RowTable, RowView
from onnxroof.runtime.model import Runtime

#: The cost figures every node and kernel result carries, before the placed :data:`FIGURES`.
COST_FIELDS = ("flops", "macs", "bytes_read", "bytes_written", "params")


class Placed(RowView):
    """The cost and roofline figures every node and kernel result carries (same names in both)."""

    __slots__ = ()
    flops = CostColumn()
    macs = CostColumn()
    bytes_read = CostColumn()
    bytes_written = CostColumn()
    params = CostColumn()
    intensity = Column("figures")
    peak_flops = Column("figures")
    ridge = Column("figures")
    attainable_flops = Column("figures")
    t_compute_s = Column("figures")
    t_memory_s = Column("figures")
    t_overhead_s = Column("figures")
    latency_s = Column("figures")
    bound = Column("figures")
    utilization = Column("figures")
    """Processing-element array utilization (1 without an array or for non-GEMM kernels)."""
    energy_j = Column("figures", nan_is_none=True)
    """Dynamic energy, J (None: the platform gives no energy figures)."""
    energy_compute_j = Column("figures", nan_is_none=True)
    energy_memory_j = Column("figures", nan_is_none=True)
    energy_bound = Column("figures")
    """``compute`` or ``memory`` (which energy dominates), ``none`` when nothing runs or energy is unknown."""


class KernelResult(Placed):
    """One kernel: its member nodes, its cost (only what crosses its boundary) and its roofline point."""

    __slots__ = ()
    id = Column()
    patterns = Column()
    """Fusion patterns applied, in order; empty for a node run alone."""
    node_ids = Column()
    """Members in topological order; the first is the anchor."""
    op_types = Column()
    folded_nodes = Column()
    """Members whose FLOPs and parameters fold away (e.g. a BatchNorm)."""
    layout = Column()
    """A pure copy left after fusion: layout traffic."""
    precision = Column()
    ideal_bytes = Column()
    """This kernel's traffic in the ideal total."""
    ideal_latency_s = Column()
    """This kernel's time in the ideal total."""

    FIELDS = (
        "id",
        "patterns",
        "node_ids",
        "op_types",
        "folded_nodes",
        "layout",
        "precision",
        "ideal_bytes",
        "ideal_latency_s",
        *COST_FIELDS,
        *FIGURES,
    )

    @property
    def pattern(self) -> str:
        """The patterns as text (``conv_bn+ort_conv_activation``, ``single`` for a node run alone)."""
        return pattern_text(self.patterns)

    @classmethod
    def plain_columns(cls, columns: dict[str, list[Any]], lists: bool = True) -> dict[str, list[Any]]:
        """``patterns`` as the ``pattern`` text (in its place), member lists as lists (with ``lists``)."""
        plain: dict[str, list[Any]] = {}
        for name, values in columns.items():
            if name == "patterns":
                plain["pattern"] = [pattern_text(patterns) for patterns in values]
            elif lists and name in _MEMBER_LISTS:
                plain[name] = [list(members) for members in values]
            else:
                plain[name] = values
        return plain


_MEMBER_LISTS = frozenset(("node_ids", "op_types", "folded_nodes"))


@frozen_dataclass(eq=False)
class KernelTable(RowTable[KernelResult]):
    """A model's kernels as columns (one entry per kernel, in the order the fusion pass gave them); indexing or
    iterating gives :class:`KernelResult` views."""

    id: tuple[str, ...]
    patterns: tuple[tuple[str, ...], ...]
    node_ids: tuple[tuple[str, ...], ...]
    op_types: tuple[tuple[str, ...], ...]
    folded_nodes: tuple[tuple[str, ...], ...]
    layout: tuple[bool, ...]
    precision: Objects
    costs: tuple[Cost, ...]
    ideal_bytes: tuple[float, ...]
    ideal_latency_s: Floats
    figures: Figures

    VIEW = KernelResult

    def __len__(self) -> int:
        return len(self.id)


@frozen_dataclass(slots=True)
class Bounds:
    """One of the three totals."""

    flops: float
    bytes: float
    latency_s: float


def place_kernels(
    work: Work,
    ideal: Sequence[Cost],
    platform: Platform,
    model: TimeModel = ROOFLINE,
    runtime: Runtime | None = None,
) -> tuple[Figures, Floats]:
    """Place every kernel of ``work`` and the ideal version of each (``ideal``: its cost with elementwise and
    layout traffic free): the kernels' figures, and each kernel's ideal latency.

    The ideal latency of a kernel left with bytes to move is its placed latency with the ideal cost (its cold
    bytes capped at the ideal bytes, the same launches); one left with none is its ideal FLOPs at its
    roof with no launch, ``F / (P · e · u)``.
    """
    figures = place(work, platform, model, runtime)
    ideal_bytes = floats([cost.bytes for cost in ideal])
    ideal_flops = floats([cost.flops for cost in ideal])
    moving = ideal_bytes > 0
    ideal_work = Work(
        flops=ideal_flops,
        bytes=ideal_bytes,
        precision=work.precision,
        op_class=work.op_class,
        runs=np.ones(len(work), dtype=bool),
        launches=work.launches,
        utilization=work.utilization,
        cold_bytes=np.minimum(work.cold_bytes, ideal_bytes),
        descriptors=work.descriptors,
        runtime_class=work.runtime_class,
    )
    placed = place(ideal_work, platform, model, runtime)
    free = ideal_flops / (placed.peak_flops * placed.efficiency * work.utilization)
    return figures, np.where(moving, placed.latency_s, free)


def fused_bounds(kernels: KernelTable) -> Bounds:
    figures = kernels.figures
    return Bounds(
        sum(cost.flops for cost in kernels.costs),
        sum(cost.bytes for cost in kernels.costs),
        sum(figures.latency_s.tolist()),
    )


def memory_bound_share(kernels: KernelTable) -> float:
    latency = kernels.figures.latency_s.tolist()
    total = sum(latency)
    memory = [t for t, bound in zip(latency, kernels.figures.bound, strict=True) if bound == Bound.MEMORY]
    return sum(memory) / total if total > 0 else 0.0


class KernelsByNode(Mapping[str, KernelResult]):
    """Node id -> the kernel it runs in (nodes that run in none are absent), read off ``kernels``' member column:
    a kernel's view is made when looked up, not one per kernel up front."""

    def __init__(self, kernels: KernelTable) -> None:
        self._kernels = kernels
        self._row = {node: row for row, members in enumerate(kernels.node_ids) for node in members}

    def __getitem__(self, node_id: str) -> KernelResult:
        return self._kernels[self._row[node_id]]

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._row

    def __iter__(self) -> Iterator[str]:
        return iter(self._row)

    def __len__(self) -> int:
        return len(self._row)
