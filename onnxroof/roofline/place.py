"""Placement: rows of work (nodes or kernels, as columns) put on a platform through a time model.

``place(work, platform, model)`` is the placement stage. It reads what every row costs and what it is
(:class:`Work`: FLOPs, bytes, the precision it computes at, its op class, launches, its descriptor), derives the
platform's roofs for each row (:func:`roofs`: the compute roof for the row's precision, the bandwidth of the
memory level that serves it, the efficiency of its op class), asks the time model for the times and the bound
(:class:`TimeModel`; :class:`RooflineTime` is the first), and returns every figure as one array per figure
(:class:`Figures`). Nothing is computed per row in Python: a million rows cost a few array operations.

The roofs (for a row of ``F`` FLOPs and ``B`` bytes at precision ``p``, op class ``c``, PE-array utilization ``u``):

* ``P = platform.peak(p)`` (the sustained share of the datasheet peak, or the datasheet with ``--peak``);
* bandwidth ``W``: without measured cache levels, the DRAM roof ``W_dram``. With ``[memory] cache_levels``, the
  row's *cold* bytes ``C = clamp(cold_bytes, 0, B)`` stream from DRAM, its *hot* bytes ``H = B − C`` at ``W_H``,
  the bandwidth of the smallest level whose size holds ``H`` (DRAM if none does), and
  ``W = B / (C / W_dram + H / W_H)`` (``= W_H`` when nothing moves);
* efficiency ``e = e_platform(c) · f_runtime(k)``: the platform's ``[efficiency]`` figure for op class ``c``
  (:meth:`Platform.class_efficiency`: that of its fallback class, else 1, when it gives none) times the
  runtime's ``[efficiency]`` factor for the row's kernel class ``k`` (1 when it gives none or no runtime is
  given);
* launch cost per launch ``launch_s``: the runtime's (:meth:`onnxroof.runtime.Runtime.kernel_launch_s`: its
  ``per_kernel_us``, else the platform's ``launch_overhead_s`` per kernel, 0 per node of a replayed CUDA graph),
  the platform's ``launch_overhead_s`` without a runtime;
* memory efficiency ``e_mem``: the share of ``W`` a memory-bound row attains (:func:`memory_efficiency`):
  ``e`` where the row streams from the first cache level (where calibrate measured ``e``), nearer 1 the slower
  the row's level, ``e_mem = 1 / (1 + (1/e − 1) · min(W / W_1, 1))``; ``e`` without cache levels;
* intensity ``I = F / B`` (``∞`` for FLOPs without bytes, 0 for neither); ridge ``R = P / W``;
* attainable FLOP/s ``= min(e · u · P, e_mem · I · W)`` (0 for a row that does not run);
* energy (platforms with energy figures, :mod:`onnxroof.roofline.energy`): ``F · E_op(p)`` plus the DRAM bytes
  (``B`` minus the bytes a cache level serves) × ``E_dram`` and the cache-served bytes × ``E_onchip``; the row
  is energy-bound by ``compute`` when ``E_compute ≥ E_memory`` and ``E_compute > 0``, else ``memory``.

A row that does not run (views, folded constants, unsupported ops: ``runs`` false) has zero time, bound
``none``, utilization 1 and no energy; its intensity, roof and ridge are still given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.states import Bound
from onnxroof.platform.model import Platform
from onnxroof.roofline.energy import byte_energy, op_energy
from onnxroof.runtime.model import Runtime, RuntimeKernelClass

Floats = npt.NDArray[np.float64]
Objects = npt.NDArray[np.object_]


def floats(values: Sequence[float] | npt.ArrayLike) -> Floats:
    """``values`` as a float64 column."""
    return np.asarray(values, dtype=np.float64)


@frozen_dataclass(eq=False)
class Work:
    """What placement reads, one entry per row (a node or a kernel), in SI units.

    ``precision``: the platform precision each row computes at (already resolved through the platform's
    fallback chain); ``op_class``: the efficiency class of each row (a key of the platform's ``[efficiency]``);
    ``runs``: false for rows that take no time (views, folded, unsupported); ``launches``: kernel launches each
    row pays (0 under graph capture); ``utilization``: PE-array utilization (1 without an array);
    ``cold_bytes``: bytes that come from DRAM even when a cache level could hold the working set;
    ``descriptors``: each row's kernel descriptor (op class, GEMM view, dtypes) for time models that look at a
    kernel's shape (empty when none was built); ``runtime_class``: each row's
    :class:`~onnxroof.runtime.RuntimeKernelClass`, the key of the runtime's ``[efficiency]`` factors (None: no
    factor applies); ``pass_bytes``: bytes of ``bytes`` that a second, elementwise pass after the row moves (a
    convolution's bias added by its own kernel; None: none), which a time model may run after the row rather
    than overlapped with it (the roofline, a lower bound, overlaps them).
    """

    flops: Floats
    bytes: Floats
    precision: Objects
    op_class: Objects
    runs: npt.NDArray[np.bool_]
    launches: Floats
    utilization: Floats
    cold_bytes: Floats
    descriptors: tuple[object, ...] = ()
    runtime_class: Objects | None = None
    pass_bytes: Floats | None = None

    def __len__(self) -> int:
        return len(self.flops)


@frozen_dataclass(eq=False)
class Roofs:
    """The platform's and runtime's roofs for each row of a :class:`Work` (module docstring): compute roof ``P``,
    bandwidth ``W`` and the level that serves the row, efficiency ``e``, the bytes a cache level serves, the memory
    efficiency ``e_mem`` (:func:`memory_efficiency`), and ``launch_s``, the seconds each of a row's launches
    costs under the runtime's launch mode."""

    peak: Floats
    bandwidth: Floats
    level: Objects
    efficiency: Floats
    near_bytes: Floats
    launch_s: float
    memory_efficiency: Floats


@frozen_dataclass(eq=False)
class Times:
    """What a time model returns per row: compute, memory and overhead time, predicted latency (s), bound."""

    t_compute: Floats
    t_memory: Floats
    t_overhead: Floats
    latency: Floats
    bound: Objects


class TimeModel(Protocol):
    """Turns rows of work on a platform into times: the seam a new time model plugs into.

    ``name`` is what reports print; ``times`` receives every row's costs and descriptor (:class:`Work`), the
    roofs placement derived for it (:class:`Roofs`) and the platform, and returns :class:`Times` for the rows
    that run (rows that do not run are zeroed by :func:`place` whatever the model returns). Nothing above
    placement knows which model ran. A row's times are a function of that row alone (its work, roofs and the
    platform): the unfused view places each distinct node once and gives its figures to the nodes that share it
    (:func:`onnxroof.analysis.analyze.shared_rows`).
    """

    @property
    def name(self) -> str: ...

    def times(self, work: Work, roofs: Roofs, platform: Platform) -> Times: ...


@frozen_dataclass
class RooflineTime:
    """The roofline time model: a lower bound on a kernel's time, from its FLOPs and bytes alone.

    * ``t_compute = F / (e · u · P)``, ``t_memory = B / (e_mem · W)`` (``e_mem``: :func:`memory_efficiency`);
    * ``t_launch = launch_s × launches`` (``launch_s``: the runtime's cost per launch, :func:`roofs`);
    * ``t = max(t_compute, t_memory) + t_launch``;
    * bound ``compute`` when ``t_compute ≥ t_memory`` and ``F > 0``, else ``memory``.
    """

    name: str = "roofline"

    def times(self, work: Work, roofs: Roofs, platform: Platform) -> Times:
        t_compute = work.flops / (roofs.efficiency * work.utilization * roofs.peak)
        t_memory = work.bytes / (roofs.memory_efficiency * roofs.bandwidth)
        overhead = roofs.launch_s * work.launches
        bound = choose((t_compute >= t_memory) & (work.flops > 0), Bound.COMPUTE, Bound.MEMORY)
        return Times(t_compute, t_memory, overhead, np.maximum(t_compute, t_memory) + overhead, bound)


ROOFLINE = RooflineTime()


@frozen_dataclass(eq=False)
class Figures:
    """Every placed figure, one array per figure, in :data:`FIGURES` order (SI units).

    Energy columns hold NaN where the platform gives no energy figures or the row does not run (read as None).
    """

    intensity: Floats
    peak_flops: Floats
    ridge: Floats
    attainable_flops: Floats
    t_compute_s: Floats
    t_memory_s: Floats
    t_overhead_s: Floats
    latency_s: Floats
    bound: Objects
    utilization: Floats
    energy_j: Floats
    energy_compute_j: Floats
    energy_memory_j: Floats
    energy_bound: Objects
    level: Objects
    bandwidth: Floats
    efficiency: Floats
    time_model: str = ROOFLINE.name

    def __len__(self) -> int:
        return len(self.latency_s)

    def take(self, rows: npt.NDArray[np.intp]) -> Figures:
        """The figures of ``rows``, in that order (a row may repeat): every column indexed by ``rows``."""
        columns = {f.name: getattr(self, f.name)[rows] for f in fields(self) if f.name != "time_model"}
        return Figures(**columns, time_model=self.time_model)


#: The figures a node or kernel result shows, in the order results list them.
FIGURES = (
    "intensity",
    "peak_flops",
    "ridge",
    "attainable_flops",
    "t_compute_s",
    "t_memory_s",
    "t_overhead_s",
    "latency_s",
    "bound",
    "utilization",
    "energy_j",
    "energy_compute_j",
    "energy_memory_j",
    "energy_bound",
)


def choose(condition: npt.NDArray[np.bool_], yes: object, no: object) -> Objects:
    """An object column: ``yes`` where ``condition`` holds, else ``no`` (``np.where`` would turn enums into text)."""
    out = filled(len(condition), no)
    out[condition] = yes
    return out


def filled(rows: int, value: object) -> Objects:
    """An object column of ``rows`` times ``value`` (``np.full`` would turn an enum into text)."""
    out = np.empty(rows, dtype=object)
    out.fill(value)
    return out


def _none_unless(runs: npt.NDArray[np.bool_], bound: Objects) -> Objects:
    """``bound`` where the row runs, ``Bound.NONE`` where it does not."""
    out = np.array(bound, dtype=object)
    out[~runs] = Bound.NONE
    return out


def by_key(keys: Objects, lookup: Callable[[Any], float | None]) -> Floats:
    """One float per row, ``lookup(key)`` called once per distinct key (None reads as NaN)."""
    rows = keys.tolist()
    table = {key: np.nan if (value := lookup(key)) is None else value for key in dict.fromkeys(rows)}
    return np.fromiter(map(table.__getitem__, rows), np.float64, len(rows))


def roofs(work: Work, platform: Platform, runtime: Runtime | None = None) -> Roofs:
    """The platform's and the runtime's roofs for every row (module docstring)."""
    peak = by_key(work.precision, lookup=platform.peak)
    efficiency = by_key(work.op_class, lookup=platform.class_efficiency)
    launch_s = platform.launch_overhead_s
    if runtime is not None:
        launch_s = runtime.kernel_launch_s(platform.launch_overhead_s)
        if runtime.efficiency and work.runtime_class is not None:
            efficiency = efficiency * by_key(work.runtime_class, lookup=runtime_factor(runtime))
    moved = work.bytes
    rows = len(work)
    if not platform.cache_levels:
        bandwidth = np.full(rows, platform.roof_bandwidth)
        return Roofs(peak, bandwidth, filled(rows, "dram"), efficiency, np.zeros(rows), launch_s, efficiency)
    cold = np.minimum(np.maximum(work.cold_bytes, 0.0), moved)
    hot = moved - cold
    sizes = floats([level.size for level in platform.cache_levels])
    index = np.searchsorted(sizes, hot, side="left")  # the smallest level whose size holds H
    in_cache = index < len(sizes)
    level_bandwidths = floats([level.bandwidth for level in platform.cache_levels] + [platform.roof_bandwidth])
    names = [level.name or f"L{number}" for number, level in enumerate(platform.cache_levels, start=1)]
    hot_bandwidth = level_bandwidths[index]
    level = np.asarray([*names, "dram"], dtype=object)[index]
    seconds = cold / platform.roof_bandwidth + hot / hot_bandwidth
    with np.errstate(divide="ignore", invalid="ignore"):
        bandwidth = np.where(seconds > 0, moved / np.where(seconds > 0, seconds, 1.0), hot_bandwidth)
    near = np.where(in_cache, hot, 0.0)
    mixed = in_cache & (cold > 0)
    if mixed.any():
        level = level.copy()
        level[mixed] = np.where(hot[mixed] > 0, level[mixed] + "+dram", "dram")
    return Roofs(peak, bandwidth, level, efficiency, near, launch_s, memory_efficiency(efficiency, bandwidth, platform))


def runtime_factor(runtime: Runtime) -> Callable[[Any], float]:
    """``class → f_runtime(class)``: the runtime's efficiency factor of a kernel class (1 for None or absent)."""
    return lambda cls: 1.0 if cls is None else runtime.factor(RuntimeKernelClass(cls))


def memory_efficiency(efficiency: Floats, bandwidth: Floats, platform: Platform) -> Floats:
    """The share ``e_mem`` of its bandwidth ``W`` a memory-bound row attains, from its class's efficiency ``e``.

    Formula: ``e_mem = 1 / (1 + (1/e − 1) · min(W / W_1, 1))``, ``W_1`` the bandwidth of the first cache level;
    that is ``B / (e_mem · W) = B / W + (1/e − 1) · B / W_1``: the row's bytes stream at its level's bandwidth,
    and the work its kernel does per byte beyond streaming (an ``exp`` per element of a Softmax, an ``erf`` per
    element of a GELU) costs what it cost where ``e`` was measured. ``e_mem = e`` for a row served by the first
    level, and tends to 1 as its level slows (never below ``e``). Without cache levels ``e_mem = e``.

    Assumptions: calibrate measures ``e`` on probes whose working sets (at most 4.2 MB,
    :func:`onnxroof.measure.calibrate.probes.efficiency_probes`) lie in the first level it finds, so ``e · W_1``
    is the throughput those kernels reached there, and that per-byte work does not overlap the streaming (one
    thread issues both). Multiplying ``e`` onto a slower level's ``W`` instead charged that work again at the
    slower level's pace: a Softmax over [6,1500,1500] (108 MB through DRAM) was predicted 3.5× too slow with
    the class's figure 0.2, and the time of a kernel jumped 7× (W_1 ÷ W_dram) when its working set crossed the
    last level's size. Measured on the development host (1 thread, onnxruntime 1.32.0, one interleaved run):
    Softmax 1.55–1.73 G elements/s at [4,128,128] and [12,197,197] (in cache), 0.73 at [6,1500,1500]; an erf
    GELU 0.78–0.88 in cache, 0.34 at [1500,1536]; x·Sigmoid(x) 1.46 in cache, 0.72 at [1,256,128,128]: half
    the in-cache throughput through DRAM, not the 1/7 the product gave.
    """
    if not platform.cache_levels:
        return efficiency
    first = platform.cache_levels[0].bandwidth
    share = np.minimum(bandwidth / first, 1.0)
    return 1.0 / (1.0 + (1.0 / efficiency - 1.0) * share)


def intensity(flops: Floats, moved: Floats) -> Floats:
    """``F / B``; ``∞`` for FLOPs without bytes, 0 for neither."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = flops / np.where(moved > 0, moved, 1.0)
    return np.where(moved > 0, ratio, np.where(flops > 0, np.inf, 0.0))


def place(work: Work, platform: Platform, model: TimeModel = ROOFLINE, runtime: Runtime | None = None) -> Figures:
    """Every row of ``work`` placed on ``platform`` under ``runtime`` through ``model`` (module docstring)."""
    roof = roofs(work, platform, runtime)
    times = model.times(work, roof, platform)
    runs = work.runs
    intense = intensity(work.flops, work.bytes)
    utilization = np.where(runs, work.utilization, 1.0)
    attainable = np.minimum(
        roof.efficiency * utilization * roof.peak, roof.memory_efficiency * intense * roof.bandwidth
    )
    energy, compute_j, memory_j, energy_bound = _energy(work, roof, platform)
    zero = np.zeros(len(work))
    return Figures(
        intensity=intense,
        peak_flops=roof.peak,
        ridge=roof.peak / roof.bandwidth,
        attainable_flops=np.where(runs, attainable, 0.0),
        t_compute_s=np.where(runs, times.t_compute, zero),
        t_memory_s=np.where(runs, times.t_memory, zero),
        t_overhead_s=np.where(runs, times.t_overhead, zero),
        latency_s=np.where(runs, times.latency, zero),
        bound=_none_unless(runs, times.bound),
        utilization=utilization,
        energy_j=energy,
        energy_compute_j=compute_j,
        energy_memory_j=memory_j,
        energy_bound=energy_bound,
        level=roof.level,
        bandwidth=roof.bandwidth,
        efficiency=roof.efficiency,
        time_model=model.name,
    )


def _energy(work: Work, roof: Roofs, platform: Platform) -> tuple[Floats, Floats, Floats, Objects]:
    """Energy per row (module docstring): total, compute, memory (NaN: none) and the energy bound."""
    rows = len(work)
    if not platform.has_energy:
        nothing = np.full(rows, np.nan)
        return nothing, nothing, nothing, filled(rows, Bound.NONE)
    per_op = by_key(work.precision, lookup=lambda p: op_energy(platform, p))
    compute = work.flops * per_op
    memory = (work.bytes - roof.near_bytes) * byte_energy(platform, "dram") + roof.near_bytes * byte_energy(
        platform, "onchip"
    )
    runs = work.runs
    bound = choose((compute >= memory) & (compute > 0), Bound.COMPUTE, Bound.MEMORY)
    return (
        np.where(runs, compute + memory, np.nan),
        np.where(runs, compute, np.nan),
        np.where(runs, memory, np.nan),
        _none_unless(runs, bound),
    )
