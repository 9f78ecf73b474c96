"""Measured truth: run a model in onnxruntime with profiling and hold onnxroof's prediction against it.

``profile(model, platform, dims)`` runs the model on onnxruntime's CPU execution provider with random inputs
of the bound dims (symbolic dims fixed in the session too, so that onnxruntime folds what onnxroof folds),
threads pinned to the platform's measured count. It returns a :class:`ProfileResult`:

* **end to end**: the predicted latency (Σ kernels + the platform's per-run overhead) against the median
  wall time of ``InferenceSession.run`` without profiling (timed in blocks, with its spread), and against the
  sum of the profiled kernel times;
* **per kernel**: onnxruntime's per-node kernel times (from its profiler) mapped back to onnxroof's kernels.
  onnxruntime runs an optimized graph whose nodes may be fusions of several original nodes;
  :func:`map_optimized_nodes` finds the original nodes each runs, and onnxroof's kernels and onnxruntime's
  nodes that share original nodes form one compared row (usually one kernel and one node; several when the
  two sides fuse differently). The predicted side of a row is the analysis' own kernels, read as they are
  (:mod:`onnxroof.measure.profile.predict`): ``onnxroof report`` and ``onnxroof profile`` give the same predictions;
* what could not be matched, both ways: onnxruntime nodes with no onnxroof kernel (layout conversions it
  inserts, ops onnxroof costs at zero), and onnxroof kernels that onnxruntime never ran (folded or removed);
* the achieved points on the roofline (FLOPs / measured time), the Spearman rank correlation of per-row
  predicted and measured times, and a sentence for each of the largest misses.

The kernel time excludes the executor's bookkeeping between nodes; that gap shows as wall time − Σ kernel
times. How per-node times are measured and corrected: :mod:`onnxroof.measure.profile.run`.

The parts, one job each: :mod:`onnxroof.measure.profile.map` (optimized node → original nodes),
:mod:`onnxroof.measure.profile.run` (running onnxruntime, timing), :mod:`onnxroof.measure.profile.match` (measured
nodes ↔
kernels), :mod:`onnxroof.measure.profile.predict` (the prediction side), :mod:`onnxroof.measure.profile.result` (rows,
the
result, its JSON) and :mod:`onnxroof.measure.profile.explain` (a sentence per miss). Their public names are
re-exported here.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import onnx

from onnxroof.measure.profile.explain import explain, explained
from onnxroof.measure.profile.map import NodeMapping, OptimizedNode, map_optimized_nodes
from onnxroof.measure.profile.match import Group, Matching, match_kernels
from onnxroof.measure.profile.predict import KernelFigures, cold_weight_share, kernel_figures, memory_level, variants
from onnxroof.measure.profile.result import PROFILE_KIND, PROFILE_SCHEMA, ProfileResult, Row, Unmatched, spearman
from onnxroof.measure.profile.run import (
    PROFILER_TRUNCATION_S,
    TRIM_SHARE,
    OrtRun,
    WallTimer,
    ort_options,
    profiler_overhead,
    random_inputs,
    run_onnxruntime,
)

__all__ = [
    "PROFILER_TRUNCATION_S",
    "PROFILE_KIND",
    "PROFILE_SCHEMA",
    "TRIM_SHARE",
    "KernelFigures",
    "Matching",
    "NodeMapping",
    "OptimizedNode",
    "OrtRun",
    "ProfileResult",
    "Row",
    "Unmatched",
    "WallTimer",
    "cold_weight_share",
    "explain",
    "kernel_figures",
    "map_optimized_nodes",
    "match_kernels",
    "memory_level",
    "ort_options",
    "profile",
    "profiler_overhead",
    "random_inputs",
    "run_onnxruntime",
    "spearman",
    "variants",
]

_UNMEASURED = "no onnxruntime node runs it (folded or removed by onnxruntime's optimizer)"


def profile(
    model: str | os.PathLike[str],
    platform: str | os.PathLike[str] | Any,
    dims: Mapping[str, object] | None = None,
    threads: int | None = None,
    profiled_runs: int = 20,
    wall_budget_s: float = 1.0,
    fusion: str | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    runtime: str | os.PathLike[str] | None = None,
) -> ProfileResult:
    """Run ``model`` in onnxruntime and compare onnxroof's prediction on ``platform`` with what it measured.

    ``platform``: a :class:`~onnxroof.platform.model.Platform`, a bundled name or a TOML path (a file written by
    ``onnxroof calibrate`` is what makes the comparison meaningful); ``dims`` binds symbolic input dims (also
    fixed in the onnxruntime session); ``threads`` defaults to the platform's measured thread count, else every
    CPU; ``profiled_runs`` runs are profiled (fewer if they would take over 3 s) and unprofiled runs are timed
    for ``wall_budget_s``; ``fusion`` overrides the platform's fusion profile, ``runtime`` its runtime.
    """
    import onnxruntime as ort

    from onnxroof.analysis.analyze import analyze
    from onnxroof.measure.calibrate.timing import default_threads
    from onnxroof.platform.lookup import load_platform
    from onnxroof.platform.model import Platform

    target = platform if isinstance(platform, Platform) else load_platform(platform)
    path = Path(model)
    analysis = analyze(path, platform=target, dims=dims, shapes=shapes, fusion=fusion, runtime=runtime)
    bound = {k: int(v) for k, v in analysis.model.dims.items()}
    chosen_threads = threads or _platform_threads(target) or default_threads()
    feeds = random_inputs(analysis.model.inputs)
    measured = run_onnxruntime(path, feeds, bound, chosen_threads, profiled_runs, wall_budget_s)
    original = onnx.load(str(path), load_external_data=False).graph
    mapping = map_optimized_nodes(original, measured.optimized.graph)
    matching = match_kernels(analysis, original, mapping, measured.node_times, measured.node_types)

    cold_per_param = cold_weight_share(analysis, target)
    figures = {k.id: kernel_figures(k, analysis, cold_per_param) for k in analysis.kernels}
    kernels_by_id = {k.id: k for k in analysis.kernels}
    rows = tuple(explained(_row(group, kernels_by_id, figures), target) for group in matching.groups)
    unmeasured = tuple(
        Unmatched(k, "+".join(kernels_by_id[k].op_types), figures[k].latency_s, _UNMEASURED)
        for k in matching.unmatched_kernels
    )
    predicted_kernels = analysis.totals.latency_s
    fp32 = target.peak("fp32") if "fp32" in target.peak_flops else max(target.peak_flops.values())
    factors = {
        "launch_overhead_s": target.launch_overhead_s,
        "run_overhead_s": target.run_overhead_s,
        "efficiency": dict(target.efficiency),
        "cache_levels": [
            {"name": f"L{i}", "size_bytes": lv.size, "bandwidth": lv.bandwidth}
            for i, lv in enumerate(target.cache_levels, start=1)
        ],
        "cold_weight_bytes_per_param": cold_per_param,
        "profiler_truncation_correction_s": PROFILER_TRUNCATION_S,
        "profiler_overhead_per_event_s": measured.profiler_overhead_s,
        "trimmed_share": TRIM_SHARE,
        "dims_fixed_in_session": dict(measured.dims_fixed),
    }
    return ProfileResult(
        model=str(path),
        platform=target.name,
        platform_path=target.path,
        measured_platform=target.measured,
        fusion_profile=analysis.fusion_profile,
        dims=bound,
        threads=chosen_threads,
        onnxruntime=ort.__version__,
        predicted_s=predicted_kernels + target.run_overhead_s,
        predicted_kernels_s=predicted_kernels,
        run_overhead_s=target.run_overhead_s,
        measured_s=measured.wall_s,
        measured_low_s=measured.wall_low_s,
        measured_high_s=measured.wall_high_s,
        wall_runs=measured.wall_runs,
        profiled_runs=measured.profiled_runs,
        measured_kernels_s=sum(measured.node_times.values()),
        rows=rows,
        unmatched_ort=matching.unmatched_ort,
        unmeasured_kernels=unmeasured,
        spearman=spearman([r.predicted_s for r in rows], [r.measured_s for r in rows]),
        factors=factors,
        peak_flops=fp32,
        bandwidth=target.dram_bandwidth,
        cache_levels=tuple((lv.size, lv.bandwidth) for lv in target.cache_levels),
        variants=variants(analysis.kernels, target, cold_per_param),
        warnings=matching.warnings + tuple(analysis.warnings),
        analysis=analysis,
    )


def _row(group: Group, kernels_by_id: Mapping[str, Any], figures: Mapping[str, KernelFigures]) -> Row:
    """One compared row: the group's kernels summed (intensity = Σ FLOPs ÷ Σ bytes; infinite when FLOPs move
    no bytes); bound, level and efficiency those of its slowest predicted kernel; op class its first's."""
    members = [kernels_by_id[k] for k in group.kernels]
    dominant = max(members, key=lambda k: figures[k.id].latency_s)
    flops = sum(k.flops for k in members)
    moved = sum(k.bytes for k in members)
    return Row(
        kernels=group.kernels,
        patterns=tuple(k.pattern for k in members),
        op_types=tuple(t for k in members for t in k.op_types),
        ort_nodes=group.ort_nodes,
        ort_op_types=group.ort_op_types,
        op_class=figures[members[0].id].op_class,
        flops=flops,
        bytes=moved,
        intensity=flops / moved if moved > 0 else (math.inf if flops > 0 else 0.0),
        predicted_s=sum(figures[k.id].latency_s for k in members),
        predicted_overhead_s=sum(figures[k.id].overhead_s for k in members),
        bound=figures[dominant.id].bound,
        level=figures[dominant.id].level,
        efficiency=figures[dominant.id].efficiency,
        measured_s=group.measured_s,
    )


def _platform_threads(platform) -> int | None:
    value = platform.measurement.get("threads") if platform.measurement else None
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 1 else None
