"""The result of a calibration and the measured platform file written from it.

:class:`Calibration` holds every figure (base SI units) with its ``source``, the sentence that says how it
was measured; :meth:`Calibration.to_toml` writes the platform TOML (``measured = true``, fusion profile
``ort-cpu``) that :func:`onnxroof.platform.lookup.load_platform` reads; :func:`write_platform` writes it atomically.
"""

from __future__ import annotations

import json
import os
import platform as _pyplatform

from onnxroof.core.frozen import frozen_dataclass
from onnxroof.measure.calibrate.timing import Timing


@frozen_dataclass(slots=True)
class Figure:
    value: float
    source: str


@frozen_dataclass(slots=True)
class ProbeResult:
    name: str
    op_class: str
    flops: float
    bytes: float
    timing: Timing
    roof_s: float
    efficiency: float


@frozen_dataclass
class Calibration:
    """Everything ``calibrate`` measured, and the platform figures derived from it (base SI units)."""

    name: str
    cpu: str
    threads: int
    onnxruntime: str
    date: str
    quick: bool
    duration_s: float
    peaks: dict[str, Figure]  # precision -> FLOP/s
    dram_bandwidth: Figure  # B/s
    cache_levels: tuple[tuple[float, Figure], ...]  # (size bytes, bandwidth B/s)
    launch_overhead: Figure  # s
    run_overhead: Figure  # s
    efficiency: dict[str, Figure]
    sweep: tuple[tuple[float, float, Timing], ...]  # (working set bytes, bandwidth B/s, timing)
    probes: tuple[ProbeResult, ...]

    def ridge(self, precision: str = "fp32") -> float:
        return self.peaks[precision].value / self.dram_bandwidth.value

    def to_toml(self) -> str:
        """The platform file: loads with :func:`onnxroof.platform.lookup.load_platform`."""
        from onnxroof.core.version import __version__

        def fig(value: float, source: str) -> str:
            return f"{{ value = {toml_number(value)}, source = {toml_string(source)} }}"

        sweep = "; ".join(f"{mb_text(ws)} MB: {bw / 1e9:.3g} GB/s" for ws, bw, _ in self.sweep)
        lines = [
            "# Written by `onnxroof calibrate`: every figure measured on this host with onnxruntime.",
            "schema = 1",
            f"name = {toml_string(self.name)}",
            "title = "
            + toml_string(f"{self.cpu}, measured ({_threads(self.threads)}, onnxruntime {self.onnxruntime})"),
            'kind = "cpu"',
            'fusion_profile = "ort-cpu"',
            "measured = true",
            "notes = "
            + toml_string(
                "Measured by onnxroof calibrate"
                + (" --quick (short runs: indicative only)" if self.quick else "")
                + ". Peaks, bandwidths and overheads are what onnxruntime achieved on this host, not datasheet "
                "figures; [efficiency] derates each op class to what its representative ops achieved. "
                "Re-run after changing the host, the thread count or the onnxruntime version."
            ),
            "",
            "[measurement]",
            f"date = {toml_string(self.date)}",
            f"onnxruntime = {toml_string(self.onnxruntime)}",
            f"onnxroof = {toml_string(__version__)}",
            f"threads = {self.threads}",
            f"cpu = {toml_string(self.cpu)}",
            f"quick = {'true' if self.quick else 'false'}",
            f"duration_s = {self.duration_s:.1f}",
            f"bandwidth_sweep = {toml_string(sweep)}",
            "",
            "[peak_tflops]",
        ]
        lines += [f"{p} = {fig(f.value / 1e12, f.source)}" for p, f in self.peaks.items()]
        dram = self.dram_bandwidth
        lines += ["", "[memory]", f"dram_bandwidth_gbps = {fig(dram.value / 1e9, dram.source)}"]
        if self.cache_levels:
            largest, _ = self.cache_levels[-1]
            lines.append(
                f"onchip_mb = {fig(largest / 1e6, 'measured: the largest working set of the last cache level above')}"
            )
            lines.append("cache_levels = [")
            for size, f in self.cache_levels:
                lines.append(
                    f"    {{ size_mb = {toml_number(size / 1e6)}, bandwidth_gbps = {toml_number(f.value / 1e9)}, "
                    f"source = {toml_string(f.source)} }},"
                )
            lines.append("]")
        lines += [
            "",
            "[runtime]",
            f"launch_overhead_us = {fig(self.launch_overhead.value * 1e6, self.launch_overhead.source)}",
            f"run_overhead_us = {fig(self.run_overhead.value * 1e6, self.run_overhead.source)}",
        ]
        if self.efficiency:
            lines += ["", "[efficiency]"]
            lines += [f"{c} = {fig(f.value, f.source)}" for c, f in self.efficiency.items()]
        return "\n".join(lines) + "\n"


def _threads(count: int) -> str:
    return f"{count} thread{'s' if count != 1 else ''}"


def toml_number(value: float) -> str:
    return repr(float(f"{value:.6g}"))


def toml_string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def mb_text(size: float) -> str:
    return f"{size / 1e6:.3g}"


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or what Python's ``platform`` module says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _pyplatform.processor() or _pyplatform.machine() or "unknown CPU"


def write_platform(calibration: Calibration, path: str | os.PathLike[str]) -> None:
    """Write the calibrated platform file (atomically) and check that it loads."""
    from pathlib import Path

    from onnxroof.core.files import write_atomically
    from onnxroof.platform.lookup import load_platform

    target = Path(path)
    write_atomically(target, calibration.to_toml())
    if target.is_file():
        load_platform(target)
