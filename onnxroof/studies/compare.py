"""Comparisons: one model on several platforms, one row per platform.

``compare(model, ["xavier", "agx-orin", "pim"], {"batch": 1})`` runs :func:`onnxroof.analyze` once per platform
with the same dims and what-if knobs and keeps, per platform, what a choice between chips turns on: predicted
latency and throughput (``1 / latency``), energy per inference and the energy-delay product (None where the
platform file gives no energy figures), the memory-bound share, the bound mix (the share of kernels and of
time that is compute-bound vs memory-bound) and the kernel that takes the most time.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import field, replace

import onnx

from onnxroof.analysis.analyze import Analysis, place
from onnxroof.analysis.stages import CostedModel, FusedModel, bind, cost, fuse, raise_if_incomplete, sparse_facts
from onnxroof.analysis.whatif import WhatIf
from onnxroof.core.errors import OnnxroofError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.states import Bound
from onnxroof.platform.lookup import load_platform
from onnxroof.platform.model import Platform
from onnxroof.runtime import Runtime, runtime_for
from onnxroof.studies.top import TopKernel, top_kernels


class CompareError(OnnxroofError):
    """A comparison is malformed: no platform, or one given twice."""


@frozen_dataclass(slots=True)
class CompareRow:
    """The model on one platform."""

    platform: str
    title: str
    precision: str
    """The precision the most predicted time computes at."""
    fusion_profile: str
    latency_s: float
    throughput: float
    """Inferences per second: ``1 / latency_s``."""
    flops: float
    """Fused FLOPs."""
    bytes: float
    """Fused bytes."""
    energy_j: float | None
    energy_delay_js: float | None
    energy_memory_share: float | None
    memory_bound_share: float
    """Share of the predicted time in memory-bound kernels."""
    kernels: int
    compute_kernels: int
    memory_kernels: int
    top_kernel: TopKernel | None
    array_utilization: float | None

    @property
    def compute_time_share(self) -> float:
        """Share of the predicted time in compute-bound kernels."""
        return 1.0 - self.memory_bound_share if self.kernels else 0.0

    @property
    def compute_kernel_share(self) -> float:
        """Share of the kernels that are compute-bound."""
        return self.compute_kernels / self.kernels if self.kernels else 0.0


@frozen_dataclass
class Comparison:
    """One model on several platforms, in the order given."""

    model: str
    dims: Mapping[str, int]
    precision: str | None
    """The precision override every platform was costed with (None: the model's own)."""
    rows: tuple[CompareRow, ...]
    warnings: tuple[str, ...]
    whatif: WhatIf = field(default_factory=WhatIf)
    """The what-if knobs every platform was costed with."""

    @property
    def fastest(self) -> str | None:
        """The platform with the least predicted latency."""
        return min(self.rows, key=lambda r: r.latency_s).platform if self.rows else None

    @property
    def least_energy(self) -> str | None:
        """The platform with the least energy per inference (None: no platform gives energy figures)."""
        priced = [r for r in self.rows if r.energy_j is not None]
        return min(priced, key=lambda r: r.energy_j or 0.0).platform if priced else None


def compare(
    model: str | os.PathLike | onnx.ModelProto,
    platforms: Sequence[str | os.PathLike | Platform],
    dims: Mapping[str, object] | None = None,
    precision: str | None = None,
    fusion: str | None = None,
    strict: bool = False,
    *,
    runtime: str | os.PathLike[str] | Runtime | None = None,
    whatif: WhatIf | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> Comparison:
    """Analyse ``model`` on each of ``platforms`` (names, files or :class:`Platform`) with the same options.

    ``whatif`` holds the what-if knobs every platform is costed with (:class:`WhatIf`); ``precision``, when
    given, replaces its precision.

    Every platform is loaded (and ``precision`` checked against each) before any analysis runs. Raises
    :class:`CompareError` when no platform is given or one is given twice (by name or alias).
    """
    if not platforms:
        raise CompareError("compare needs at least one platform")
    plan = whatif if whatif is not None else WhatIf()
    if precision is not None:
        plan = replace(plan, precision=precision)
    precision = plan.precision
    targets = [p if isinstance(p, Platform) else load_platform(p) for p in platforms]
    seen: set[str] = set()
    for target in targets:
        if target.name in seen:
            raise CompareError(f"platform '{target.name}' given twice")
        seen.add(target.name)
        if precision is not None:
            target.peak(precision)
    chosen = [runtime_for(target, runtime, fusion) for target in targets]  # each checked before any analysis
    analyses = _analyses(model, targets, dims, shapes, plan, fusion, strict, chosen)
    first = analyses[0].model
    return Comparison(
        model=first.path or first.graph_name or "model",
        dims=first.dims,
        precision=precision,
        rows=tuple(compare_row(a) for a in analyses),
        warnings=tuple(dict.fromkeys(w for a in analyses for w in a.warnings)),
        whatif=analyses[0].whatif,
    )


def _analyses(
    model: str | os.PathLike | onnx.ModelProto,
    targets: Sequence[Platform],
    dims: Mapping[str, object] | None,
    shapes: Mapping[str, tuple[int, ...]] | None,
    plan: WhatIf,
    fusion: str | None,
    strict: bool,
    runtimes: Sequence[Runtime],
) -> list[Analysis]:
    """One analysis per platform, sharing the stages that do not depend on it: the model is bound once, costed
    once (once per sparsity pattern under ``skip_compute``), fused once per fusion profile, and placed on each
    platform."""
    bound = bind(model, dims, shapes, plan)
    costings: dict[object, CostedModel] = {}
    fusions: dict[tuple[object, str], FusedModel] = {}
    analyses = []
    for target, chosen in zip(targets, runtimes, strict=True):
        sparse = sparse_facts(plan, target)
        costed = costings.get(sparse)
        if costed is None:
            costed = costings[sparse] = cost(bound, target)
            if strict:
                raise_if_incomplete(costed)
        profile = fusion or chosen.fusion_profile
        fused = fusions.get((sparse, profile))
        if fused is None:
            fused = fusions[(sparse, profile)] = fuse(costed, profile)
        analyses.append(place(fused, target, runtime=chosen))
    return analyses


def compare_row(analysis: Analysis) -> CompareRow:
    """One analysis as a comparison row."""
    t = analysis.totals
    kernels = analysis.kernels
    top = top_kernels(analysis, 1)
    latency = t.latency_s
    bounds = Counter(kernels.figures.bound.tolist())  # read off the column, not a view per kernel
    return CompareRow(
        platform=analysis.platform.name,
        title=analysis.platform.title,
        precision=analysis.main_precision,
        fusion_profile=analysis.fusion_profile,
        latency_s=latency,
        throughput=1.0 / latency if latency > 0 else math.inf,
        flops=float(t.fused.flops),
        bytes=float(t.fused.bytes),
        energy_j=t.energy_j,
        energy_delay_js=t.energy_delay_js,
        energy_memory_share=t.energy_memory_share,
        memory_bound_share=t.memory_bound_share,
        kernels=len(kernels),
        compute_kernels=bounds[Bound.COMPUTE],
        memory_kernels=bounds[Bound.MEMORY],
        top_kernel=top[0] if top else None,
        array_utilization=t.array_utilization,
    )
