"""Running a model in onnxruntime with profiling, and timing it end to end.

:func:`run_onnxruntime` profiles a few runs of the model (CPU execution provider, threads pinned, symbolic
dims fixed with ``add_free_dimension_override_by_name``) and then times unprofiled runs; it returns the
measured per-node times and the optimized graph onnxruntime ran (:class:`OrtRun`).

Measured per-node times: onnxruntime's profiler records whole microseconds, truncated, and its own
bookkeeping (thread-pool and memory statistics) sits inside each node's ``kernel_time`` span: about 3 µs per
node on a host where the node itself takes 0.2 µs. Both are corrected, and reported: each event gets +0.5 µs
(the mean truncation error) minus the profiler's overhead per event, measured in the same process on a chain
of tiny ops (profiled event time − unprofiled time per op, :func:`profiler_overhead`). Each node's time per
run is then the mean over the profiled runs after dropping the slowest 10 % (a shared host's interruptions).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from onnxroof.core.errors import OnnxroofError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.measure.calibrate.probes import tiny_probe
from onnxroof.measure.calibrate.timing import run_blocks, session_options

PROFILER_TRUNCATION_S = 0.5e-6
"""onnxruntime's profiler truncates durations to whole µs: +0.5 µs per event corrects the mean."""
TRIM_SHARE = 0.1
"""Share of the slowest profiled runs dropped per node before averaging."""
_FLOOR_S = 0.05e-6  # a corrected event time never drops below this


@frozen_dataclass
class OrtRun:
    """What onnxruntime measured for one model."""

    node_times: Mapping[str, float]  # optimized node name -> seconds per run (trimmed mean, corrected)
    node_types: Mapping[str, str]  # optimized node name -> op type, as profiled
    wall_s: float  # median wall time of one run, profiling off
    wall_low_s: float  # 10th percentile
    wall_high_s: float  # 90th percentile
    wall_runs: int
    profiled_runs: int
    optimized: onnx.ModelProto
    threads: int
    dims_fixed: Mapping[str, int]
    profiler_overhead_s: float  # subtracted from each profiled event


_NUMPY_DTYPES = {
    "float32": np.float32,
    "float16": np.float16,
    "float64": np.float64,
    "bfloat16": np.float32,
    "int64": np.int64,
    "int32": np.int32,
    "int16": np.int16,
    "int8": np.int8,
    "uint8": np.uint8,
    "uint16": np.uint16,
    "uint32": np.uint32,
    "uint64": np.uint64,
    "bool": np.bool_,
}


def random_inputs(
    inputs: Sequence[tuple[str, Sequence[int | None] | None, str]], seed: int = 0
) -> dict[str, np.ndarray]:
    """Random feeds for ``(name, shape, dtype)`` inputs: normal floats; integers in {0, 1} (valid as token ids,
    indices and masks alike); booleans at random. Every dim must be bound."""
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for name, shape, dtype in inputs:
        dims = tuple(int(d) for d in shape if d is not None) if shape is not None else None
        if shape is None or dims is None or len(dims) != len(shape):
            raise OnnxroofError(
                f"input '{name}' has an unbound dim (shape {shape}); bind every symbolic dim with --dim NAME=VALUE"
            )
        np_type = _NUMPY_DTYPES.get(dtype)
        if np_type is None:
            raise OnnxroofError(f"input '{name}': cannot make random data of type {dtype}")
        if np_type is np.bool_:
            feeds[name] = rng.integers(0, 2, size=dims).astype(np.bool_)
        elif np.issubdtype(np_type, np.integer):
            feeds[name] = rng.integers(0, 2, size=dims).astype(np_type)
        else:
            feeds[name] = rng.standard_normal(dims).astype(np_type)
    return feeds


def ort_options(threads: int, dims: Mapping[str, int], profile: bool = False, folder: str | None = None):
    """Session options for a model run: :func:`onnxroof.measure.calibrate.timing.session_options` with the bound
    symbolic
    dims fixed (``add_free_dimension_override_by_name``), and the profile / optimized model written to
    ``folder`` when given."""
    opts = session_options(threads, profile=profile)
    for name, value in dims.items():
        opts.add_free_dimension_override_by_name(name, int(value))
    if folder is not None:
        opts.optimized_model_filepath = os.path.join(folder, "optimized.onnx")
        opts.profile_file_prefix = os.path.join(folder, "profile")
    return opts


class WallTimer:
    """An unprofiled session of a model, timed end to end on demand (``InferenceSession.run`` wall time)."""

    def __init__(
        self, model_path: str | os.PathLike[str], feeds: Mapping[str, np.ndarray], dims: Mapping[str, int], threads: int
    ) -> None:
        import onnxruntime as ort

        try:
            self._session = ort.InferenceSession(
                str(model_path), ort_options(threads, dims), providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise OnnxroofError(f"{model_path}: onnxruntime cannot load it: {exc}") from None
        self._feeds = dict(feeds)

    def measure(self, budget_s: float, min_runs: int = 5) -> list[float]:
        """Run times (seconds) of runs taken over about ``budget_s`` (after one warm-up run)."""
        (blocks,) = run_blocks([lambda: self._session.run(None, self._feeds)], budget_s, min_runs, block_s=0.05)
        return [t for block in blocks for t in block]


def run_onnxruntime(
    model_path: str | os.PathLike[str],
    feeds: Mapping[str, np.ndarray],
    dims: Mapping[str, int],
    threads: int,
    profiled_runs: int = 20,
    wall_budget_s: float = 1.0,
    profile_budget_s: float = 3.0,
) -> OrtRun:
    """Profile up to ``profiled_runs`` runs after 3 warm-up runs (fewer when they would take longer than
    ``profile_budget_s``, but at least 3), then time unprofiled runs for ``wall_budget_s``."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="onnxroof-profile-") as folder:
        try:
            session = ort.InferenceSession(
                str(model_path), ort_options(threads, dims, True, folder), providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise OnnxroofError(f"{model_path}: onnxruntime cannot load it: {exc}") from None
        feeds = dict(feeds)
        warmup = 3
        started = time.perf_counter()
        for _ in range(warmup):
            session.run(None, feeds)
        per_run = (time.perf_counter() - started) / warmup
        profiled_runs = max(1, min(profiled_runs, max(3, int(profile_budget_s / max(per_run, 1e-6)))))
        for _ in range(profiled_runs):
            session.run(None, feeds)
        events = json.loads(Path(session.end_profiling()).read_text(encoding="utf-8"))
        optimized = onnx.load(os.path.join(folder, "optimized.onnx"), load_external_data=False)
    overhead = profiler_overhead(threads)
    node_times, node_types = _node_times(events, skip_runs=warmup, overhead_s=overhead)
    times = np.array(WallTimer(model_path, feeds, dims, threads).measure(wall_budget_s))
    return OrtRun(
        node_times=node_times,
        node_types=node_types,
        wall_s=float(np.median(times)),
        wall_low_s=float(np.percentile(times, 10)),
        wall_high_s=float(np.percentile(times, 90)),
        wall_runs=len(times),
        profiled_runs=profiled_runs,
        optimized=optimized,
        threads=threads,
        dims_fixed=dict(dims),
        profiler_overhead_s=overhead,
    )


def profiler_overhead(threads: int, chain: int = 64, budget_s: float = 0.25) -> float:
    """Seconds onnxruntime's profiler adds to each node's ``kernel_time`` event: the mean profiled event time
    of a chain of tiny ``Neg`` ops (+0.5 µs truncation) less their unprofiled time per op (slope between
    chains of 1 and 1 + ``chain``)."""
    import onnxruntime as ort

    probe = tiny_probe()
    feeds = probe.feeds(np.random.default_rng(0))
    longer = probe.build(1 + chain).SerializeToString()
    with tempfile.TemporaryDirectory(prefix="onnxroof-profile-") as folder:
        options = session_options(threads, profile=True)
        options.profile_file_prefix = os.path.join(folder, "overhead")
        session = ort.InferenceSession(longer, options, providers=["CPUExecutionProvider"])
        for _ in range(23):
            session.run(None, feeds)
        events = json.loads(Path(session.end_profiling()).read_text(encoding="utf-8"))
    times, _ = _node_times(events, skip_runs=3, overhead_s=0.0)
    profiled = float(np.mean(list(times.values())))
    one = ort.InferenceSession(
        probe.build(1).SerializeToString(), session_options(threads), providers=["CPUExecutionProvider"]
    )
    many = ort.InferenceSession(longer, session_options(threads), providers=["CPUExecutionProvider"])
    blocks_1, blocks_k = run_blocks(
        [lambda: one.run(None, feeds), lambda: many.run(None, feeds)], budget_s, min_runs=20
    )
    t1 = float(np.median([t for b in blocks_1 for t in b]))
    tk = float(np.median([t for b in blocks_k for t in b]))
    return max(profiled - max((tk - t1) / chain, 0.0), 0.0)


def _node_times(
    events: list[dict[str, Any]], skip_runs: int, overhead_s: float
) -> tuple[dict[str, float], dict[str, str]]:
    runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name") == "model_run")[skip_runs:]
    if not runs:
        raise OnnxroofError("onnxruntime's profile holds no runs")
    starts = np.array([start for start, _ in runs])
    per_run: dict[str, np.ndarray] = {}
    types: dict[str, str] = {}
    suffix = "_kernel_time"
    for event in events:
        if event.get("cat") != "Node" or not event.get("name", "").endswith(suffix):
            continue
        run = int(np.searchsorted(starts, event["ts"], side="right")) - 1
        if run < 0 or event["ts"] > runs[run][1]:
            continue  # a warm-up run
        name = event["name"][: -len(suffix)]
        times = per_run.setdefault(name, np.zeros(len(runs)))
        times[run] += max(event["dur"] * 1e-6 + PROFILER_TRUNCATION_S - overhead_s, _FLOOR_S)
        types.setdefault(name, str(event.get("args", {}).get("op_name", "")))
    result = {}
    for name, times in per_run.items():
        keep = max(1, math.ceil(len(times) * (1 - TRIM_SHARE)))
        result[name] = float(np.mean(np.sort(times)[:keep]))
    return result, types
