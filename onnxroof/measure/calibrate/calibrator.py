"""Measure this host with onnxruntime micro-benchmarks and write a platform file marked as measured.

``onnxroof calibrate`` runs small models built in memory with ``onnx.helper``, on the CPU execution provider,
threads pinned with ``SessionOptions.intra_op_num_threads``, every graph optimization on (the ``ort-cpu``
fusion profile is what the file declares). Each figure comes from the medians of blocks of repeated runs,
spread over the whole calibration in interleaved rounds (see :class:`OpTimer`); its ``source`` says what ran,
how often, and the spread.

What is measured, in order:

1. **Overheads.** A chain of 1 and of 1 + K tiny ops (``Neg`` on 16 floats). The slope is the per-kernel
   overhead (``runtime.launch_overhead_us``); the intercept, the fixed cost of one ``InferenceSession.run``
   (``runtime.run_overhead_us``).
2. **Peaks.** Large ``MatMul`` per precision onnxruntime runs on this CPU (fp32, fp16, fp64; int8 through
   ``MatMulInteger``), and a large 3×3 ``Conv`` for fp32; the fp32 peak is the faster of the two.
3. **Memory hierarchy.** Chains of ``Relu`` whose working set (one tensor read + one written) sweeps from
   64 kB to 256 MB, an empirical hierarchical roofline in the spirit of the Empirical Roofline Toolkit:
   bandwidth = bytes / (time per op − per-kernel overhead). The largest working sets give the DRAM bandwidth;
   plateaus above it give ``[memory] cache_levels``.
4. **Efficiency per op class.** Representative ops of each class (:data:`onnxroof.platform.model.EFFICIENCY_CLASSES`)
   at sizes typical of small CNNs and transformers. Each probe's FLOPs and bytes come from onnxroof's own cost
   rules; its efficiency is roofline time / (measured time − per-kernel overhead), with the roofline drawn from
   the measured peak and hierarchy; the class's figure is the median over its probes, capped at 1 (FRAME-style
   derating, ``[efficiency]``).

Time per op: a chain of ``K`` identical ops (or ``K`` independent copies fanned out from one input, for ops
that change the shape) is timed against a chain of one, in alternating blocks so that drift on a shared host
cancels: time per op = (t(1 + K) − t(1)) / K. Ops that take more than a few milliseconds are timed alone
(time − run overhead). Each block (~40 ms of runs) gives its median; every item is measured in 4 rounds
interleaved with all the others (1 with ``--quick``), and its time is the 25th percentile of its block
medians: on a shared host, other work only ever slows a block down, so the least-contended quarter of the
blocks is this host's own speed. Predictions made with the file are therefore for an uncontended host.

This module runs the calibration (:func:`calibrate`); its parts live beside it, one job each:
:mod:`onnxroof.measure.calibrate.timing` (sessions, blocks of runs, :class:`OpTimer`),
:mod:`onnxroof.measure.calibrate.probes`
(the micro-benchmark models), :mod:`onnxroof.measure.calibrate.fit` (probe costs, the memory hierarchy) and
:mod:`onnxroof.measure.calibrate.write` (:class:`Calibration`, the platform TOML). Their public names are re-exported
here.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable

import numpy as np

from onnxroof.core.errors import OnnxroofError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.measure.calibrate.fit import bandwidth_for, hierarchy, probe_cost
from onnxroof.measure.calibrate.probes import (
    Probe,
    efficiency_probes,
    matmul_probe,
    peak_probes,
    stream_probe,
    sweep_sizes,
    tiny_probe,
)
from onnxroof.measure.calibrate.timing import (
    BLOCK_QUANTILE,
    OpTimer,
    Timing,
    default_threads,
    fmt_time,
    run_blocks,
    session_options,
)
from onnxroof.measure.calibrate.write import Calibration, Figure, ProbeResult, cpu_model, mb_text, write_platform

__all__ = [
    "BLOCK_QUANTILE",
    "Calibration",
    "Figure",
    "OpTimer",
    "Probe",
    "ProbeResult",
    "Progress",
    "Timing",
    "calibrate",
    "cpu_model",
    "default_threads",
    "matmul_probe",
    "run_blocks",
    "session_options",
    "stream_probe",
    "tiny_probe",
    "write_platform",
]

Progress = Callable[[str, int, int], None]
"""``progress(what, done, total)``: called before each measurement (``done`` of ``total`` finished)."""

_CAP_EFFICIENCY = 1.0
_FLOOR_EFFICIENCY = 0.001
_OVERHEAD_CHAIN = 64


def calibrate(
    threads: int | None = None, quick: bool = False, progress: Progress | None = None, name: str = "host"
) -> Calibration:
    """Measure this host (under a minute; ``quick``: a few seconds, indicative only) and return the figures.

    Every measurement is taken in interleaved rounds (4; 1 when ``quick``) and each figure comes from the
    least-contended quarter of its blocks of runs (see :class:`OpTimer`). The steps, in the module's order:
    set every measurement up (:func:`_set_up`), measure them (:func:`_measure_rounds`), then the overheads
    (:func:`_overheads`), the peaks (:func:`_peaks`), the memory hierarchy (:func:`_bandwidth_sweep`,
    :func:`~onnxroof.measure.calibrate.fit.hierarchy`) and the efficiency per op class (:func:`_probe_results`,
    :func:`_class_efficiencies`).
    """
    import onnxruntime as ort

    started = time.perf_counter()
    threads = threads or default_threads()
    if threads < 1:
        raise OnnxroofError(f"threads must be at least 1, got {threads}")
    rounds = 1 if quick else 4
    budget = 0.06 if quick else 0.18  # seconds per item per round
    threads_text = f"{threads} intra-op thread{'s' if threads > 1 else ''}"
    plan = _Plan(peak_probes(quick), sweep_sizes(quick), efficiency_probes(quick))
    total = plan.count()

    def report(what: str, done: int) -> None:
        if progress is not None:
            progress(what, done, total * (rounds + 1))

    items = _set_up(plan, threads, budget, np.random.default_rng(0), report)
    _measure_rounds(items, rounds, budget, report, done=total)
    launch, run = _overheads(items.overhead, threads_text)
    peaks = _peaks(items.peaks, run.value, f"onnxruntime {ort.__version__} CPU, {threads_text}")
    sweep = _bandwidth_sweep(items.sweep, run.value, launch.value)
    dram, levels = hierarchy(sweep, threads_text)
    results = _probe_results(items.probes, run.value, launch.value, peaks["fp32"].value, levels, dram.value)
    efficiency = _class_efficiencies(results, f"{threads_text}, {rounds} round(s)")
    report("done", total * (rounds + 1))
    return Calibration(
        name=name,
        cpu=cpu_model(),
        threads=threads,
        onnxruntime=ort.__version__,
        date=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        quick=quick,
        duration_s=time.perf_counter() - started,
        peaks=peaks,
        dram_bandwidth=dram,
        cache_levels=levels,
        launch_overhead=launch,
        run_overhead=run,
        efficiency=efficiency,
        sweep=tuple(sweep),
        probes=tuple(results),
    )


@frozen_dataclass
class _Plan:
    """What will be measured besides the overheads: the peak probes (precision, probe), the working sets of the
    bandwidth sweep (bytes) and the efficiency probes."""

    peaks: list[tuple[str, Probe]]
    sizes: list[int]
    probes: list[Probe]

    def count(self) -> int:
        """How many measurements: the overhead chain, then one per peak probe, working set and efficiency probe."""
        return 1 + len(self.peaks) + len(self.sizes) + len(self.probes)


@frozen_dataclass
class _Items:
    """The measurements set up (sessions built, pilot runs done), each with what it is for."""

    overhead: OpTimer
    peaks: list[tuple[str, Probe, OpTimer]]
    sweep: list[tuple[int, OpTimer]]
    probes: list[tuple[Probe, OpTimer]]

    def labelled(self) -> list[tuple[str, OpTimer]]:
        """Every measurement with its progress label, in the order they are set up and measured."""
        items: list[tuple[str, OpTimer]] = [("per-kernel overhead", self.overhead)]
        items += [(f"peak {precision}: {probe.name}", item) for precision, probe, item in self.peaks]
        items += [(f"bandwidth: {mb_text(ws)} MB working set", item) for ws, item in self.sweep]
        items += [(f"efficiency {probe.op_class}: {probe.name}", item) for probe, item in self.probes]
        return items


def _set_up(
    plan: _Plan, threads: int, budget: float, rng: np.random.Generator, report: Callable[[str, int], None]
) -> _Items:
    """Build every measurement of ``plan`` (feeds drawn from ``rng`` in this order), reporting progress before
    each. A peak precision onnxruntime has no CPU kernel for is dropped, except fp32 (an error)."""
    done = 0
    report("per-kernel overhead: chains of tiny Neg ops", done)
    tiny = tiny_probe()
    overhead = OpTimer("overhead", tiny.build, tiny.feeds(rng), threads, budget, chain=_OVERHEAD_CHAIN)
    done += 1
    peak_items: list[tuple[str, Probe, OpTimer]] = []
    for precision, probe in plan.peaks:
        report(f"peak {precision}: {probe.name}", done)
        try:
            peak_items.append((precision, probe, OpTimer(probe.name, probe.build, probe.feeds(rng), threads, budget)))
        except Exception as exc:  # onnxruntime has no CPU kernel for this precision: no peak for it
            if precision == "fp32":
                raise OnnxroofError(f"calibrate: cannot run {probe.name} in onnxruntime: {exc}") from None
        done += 1
    sweep_items: list[tuple[int, OpTimer]] = []
    for working_set in plan.sizes:
        probe = stream_probe(working_set // 8)
        report(f"bandwidth: Relu streaming a {mb_text(working_set)} MB working set", done)
        sweep_items.append((working_set, OpTimer(probe.name, probe.build, probe.feeds(rng), threads, budget)))
        done += 1
    probe_items: list[tuple[Probe, OpTimer]] = []
    for probe in plan.probes:
        report(f"efficiency {probe.op_class}: {probe.name}", done)
        probe_items.append((probe, OpTimer(probe.name, probe.build, probe.feeds(rng), threads, budget)))
        done += 1
    return _Items(overhead, peak_items, sweep_items, probe_items)


def _measure_rounds(items: _Items, rounds: int, budget: float, report: Callable[[str, int], None], done: int) -> None:
    """Measure every item once per round, the rounds interleaved over all items; the overhead chain gets three
    times the ``budget`` of the others. ``done``: the progress count so far."""
    overhead = items.overhead
    labelled = items.labelled()
    for number in range(rounds):
        for what, item in labelled:
            report(f"round {number + 1}/{rounds}: {what}", done)
            item.measure(budget * (3 if item is overhead else 1))
            done += 1


def _overheads(overhead: OpTimer, threads_text: str) -> tuple[Figure, Figure]:
    """The per-kernel overhead = the slope between the chains of 1 and 1 + K tiny ops, and the per-run overhead =
    the intercept, t(1) − slope (at least 1 ns)."""
    slope = overhead.timing(0.0)
    launch = Figure(
        slope.seconds,
        f"measured: slope between chains of 1 and {1 + _OVERHEAD_CHAIN} Neg ops on 16 floats, {threads_text}; "
        f"{slope.describe()}",
    )
    run_s = max(overhead.single_time() - slope.seconds, 1e-9)
    run = Figure(
        run_s,
        "measured: intercept of the same fit, the fixed cost of one InferenceSession.run (input binding, output "
        f"allocation); the 1-op model took {fmt_time(overhead.single_time())} in all",
    )
    return launch, run


def _peaks(peak_items: list[tuple[str, Probe, OpTimer]], run_s: float, where: str) -> dict[str, Figure]:
    """Per precision, the best rate over its probes: FLOP/s = the probe's FLOPs ÷ its time per op; the source
    (``where``: runtime and threads) lists every probe's figures."""
    peaks: dict[str, Figure] = {}
    peak_notes: dict[str, list[str]] = {}
    for precision, probe, item in peak_items:
        timing = item.timing(run_s)
        flops = probe_cost(probe)[0]
        rate = flops / timing.seconds
        peak_notes.setdefault(precision, []).append(
            f"{probe.name}: {flops / 1e9:.3g} GFLOP in {fmt_time(timing.seconds)} = {rate / 1e12:.4g} TFLOP/s "
            f"({timing.describe()})"
        )
        if precision not in peaks or rate > peaks[precision].value:
            peaks[precision] = Figure(rate, "")
    for precision, figure in peaks.items():
        notes = peak_notes[precision]
        best = "the faster of: " if len(notes) > 1 else ""
        peaks[precision] = Figure(figure.value, f"measured: {where}; {best}" + "; ".join(notes))
    return peaks


def _bandwidth_sweep(
    sweep_items: list[tuple[int, OpTimer]], run_s: float, launch_s: float
) -> list[tuple[float, float, Timing]]:
    """Per working set: (bytes, bandwidth = bytes ÷ (time per op − per-kernel overhead), its timing)."""
    sweep: list[tuple[float, float, Timing]] = []
    for working_set, item in sweep_items:
        timing = item.timing(run_s)
        sweep.append((float(working_set), working_set / max(timing.seconds - launch_s, 1e-9), timing))
    return sweep


def _probe_results(
    probe_items: list[tuple[Probe, OpTimer]],
    run_s: float,
    launch_s: float,
    fp32_peak: float,
    levels: tuple[tuple[float, Figure], ...],
    dram: float,
) -> list[ProbeResult]:
    """Per efficiency probe: roofline time = max(FLOPs ÷ fp32 peak, bytes ÷ the bandwidth of its working set's
    level) and efficiency = roofline ÷ (time per op − per-kernel overhead), clamped to [0.001, 1]."""
    results: list[ProbeResult] = []
    for probe, item in probe_items:
        timing = item.timing(run_s)
        flops, moved, cls = probe_cost(probe)
        roof = max(flops / fp32_peak, moved / bandwidth_for(moved, levels, dram))
        spent = max(timing.seconds - launch_s, 1e-9)
        efficiency = min(_CAP_EFFICIENCY, max(_FLOOR_EFFICIENCY, roof / spent))
        results.append(ProbeResult(probe.name, cls, flops, moved, timing, roof, efficiency))
    return results


def _class_efficiencies(results: list[ProbeResult], how: str) -> dict[str, Figure]:
    """Per op class with probes, the median of its probes' efficiencies; the source lists each probe's roofline
    and measured times (``how``: threads and rounds)."""
    from onnxroof.platform.model import EFFICIENCY_CLASSES

    efficiency: dict[str, Figure] = {}
    for cls in EFFICIENCY_CLASSES:
        members = [r for r in results if r.op_class == cls]
        if not members:
            continue
        value = float(np.median([r.efficiency for r in members]))
        detail = "; ".join(
            f"{r.name}: roofline {fmt_time(r.roof_s)}, measured {fmt_time(r.timing.seconds)} → {r.efficiency:.3g}"
            for r in members
        )
        efficiency[cls] = Figure(
            value,
            f"measured: median over {len(members)} probe(s) of roofline time ÷ (measured time − per-kernel "
            f"overhead), capped at 1; FLOPs and bytes from onnxroof's rules and its ort-cpu fusion, {how}: {detail}",
        )
    return efficiency
