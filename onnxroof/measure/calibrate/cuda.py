"""``onnxroof calibrate --device cuda``: a CUDA GPU's sustained roofs, measured with PyTorch (``onnxroof[torch]``).

What is measured (CUDA events around ``repeats`` back-to-back runs after warm-up, the median of the rounds):

* **peaks**: ``torch.matmul`` of two ``n × n`` matrices per precision (fp32 with TF32 off, tf32 with it on, fp16,
  bf16; int8 through ``torch._int_mm``): ``2·n³ / t`` FLOP/s;
* **DRAM bandwidth**: ``y.copy_(x)`` of a buffer far larger than the L2: ``2·bytes / t`` (a read and a write);
* **launch overhead**: host seconds per launch of a one-element ``add_`` issued back to back (PyTorch's dispatch
  included: what an eager run pays per kernel), ``t_wall / launches``;
* **efficiency per op class**: for ``elementwise`` (add), ``softmax``, ``normalization`` (layer_norm) and
  ``reduction`` (sum over the last axis) of fp16 tensors, ``(B / W) / t`` (the bandwidth roof's time over the
  measured one); for ``conv`` (3×3, 256 channels, channels-last fp16) ``(F / P_fp16) / t``; each clipped to (0, 1].

The device's SM count, L2 size and compute capability come from ``torch.cuda.get_device_properties``; its
maximum SM clock from ``nvidia-smi`` when present (without it the file has no ``[gpu]`` table, and the ``gpu``
time model places by the roofline). :class:`CudaCalibration` holds it all; :meth:`CudaCalibration.to_toml` writes
the measured platform file (``kind = "gpu"``, ``measured = true``, fusion profile ``none``: eager PyTorch runs
every op as its own kernel).
"""

from __future__ import annotations

import functools
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import field
from datetime import UTC, datetime
from typing import Any

from onnxroof.core.errors import OnnxroofError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.measure.calibrate.write import Figure, toml_number, toml_string

#: Compute capability (major, minor) → tensor-core generation (NVIDIA CUDA C++ Programming Guide, compute
#: capabilities table: 7.0/7.2 Volta, 7.5 Turing, 8.0/8.6/8.7 Ampere, 8.9 Ada, 9.0 Hopper, 10.x/12.x Blackwell).
GENERATIONS: Mapping[int, str] = {7: "volta", 8: "ampere", 9: "hopper", 10: "blackwell", 12: "blackwell"}


class CudaUnavailable(OnnxroofError):
    """PyTorch is not installed, or sees no CUDA device."""


@frozen_dataclass
class CudaCalibration:
    """What ``calibrate --device cuda`` measured (base SI units), each figure with how it was measured."""

    name: str
    gpu: str
    capability: tuple[int, int]
    sm_count: int
    l2_bytes: int
    clock_hz: float | None
    torch: str
    cuda: str
    date: str
    quick: bool
    duration_s: float
    peaks: dict[str, Figure]
    dram_bandwidth: Figure
    launch_overhead: Figure
    efficiency: dict[str, Figure] = field(default_factory=dict)

    @property
    def tensor_cores(self) -> str:
        """The tensor-core generation of the compute capability (:data:`GENERATIONS`; 7.5 is Turing)."""
        major, minor = self.capability
        if (major, minor) == (7, 5):
            return "turing"
        if (major, minor) == (8, 9):
            return "ada"
        return GENERATIONS.get(major, "none")

    def to_toml(self) -> str:
        """The measured platform file (loads with :func:`onnxroof.platform.lookup.load_platform`)."""
        from onnxroof.core.version import __version__

        def fig(value: float, source: str) -> str:
            return f"{{ value = {toml_number(value)}, source = {toml_string(source)} }}"

        props = f"measured: torch.cuda.get_device_properties on {self.gpu}"
        lines = [
            "# Written by `onnxroof calibrate --device cuda`: every figure measured on this GPU with PyTorch.",
            "schema = 1",
            f"name = {toml_string(self.name)}",
            f"title = {toml_string(f'{self.gpu}, measured (PyTorch {self.torch}, CUDA {self.cuda})')}",
            'kind = "gpu"',
            'fusion_profile = "none"',
            "measured = true",
            "notes = "
            + toml_string(
                "Measured by onnxroof calibrate --device cuda"
                + (" --quick (short runs: indicative only)" if self.quick else "")
                + ". Peaks are what torch.matmul sustained, bandwidth what a device copy sustained, the launch "
                "overhead what eager PyTorch pays per op; [efficiency] derates each op class to what its probe "
                "achieved." + ("" if self.clock_hz else " nvidia-smi gave no clock: no [gpu] table.")
            ),
            "",
            "[measurement]",
            f"date = {toml_string(self.date)}",
            f"onnxroof = {toml_string(__version__)}",
            f"gpu = {toml_string(self.gpu)}",
            f"torch = {toml_string(self.torch)}",
            f"cuda = {toml_string(self.cuda)}",
            f"quick = {'true' if self.quick else 'false'}",
            f"duration_s = {self.duration_s:.1f}",
            "",
            "[peak_tflops]",
            *(f"{p} = {fig(f.value / 1e12, f.source)}" for p, f in self.peaks.items()),
            "",
            "[memory]",
            f"dram_bandwidth_gbps = {fig(self.dram_bandwidth.value / 1e9, self.dram_bandwidth.source)}",
            f"onchip_mb = {fig(self.l2_bytes / 1e6, f'{props}: L2_cache_size {self.l2_bytes} B')}",
            "",
            "[runtime]",
            f"launch_overhead_us = {fig(self.launch_overhead.value * 1e6, self.launch_overhead.source)}",
        ]
        if self.efficiency:
            lines += ["", "[efficiency]", *(f"{c} = {fig(f.value, f.source)}" for c, f in self.efficiency.items())]
        if self.clock_hz:
            major, minor = self.capability
            lines += [
                "",
                "[gpu]",
                f"sm_count = {fig(self.sm_count, f'{props}: multi_processor_count')}",
                f"boost_clock_ghz = {fig(self.clock_hz / 1e9, 'measured: nvidia-smi clocks.max.sm')}",
                f"l2_mb = {fig(self.l2_bytes / 1e6, f'{props}: L2_cache_size {self.l2_bytes} B')}",
                f'tensor_cores = {{ value = "{self.tensor_cores}", source = '
                f"{toml_string(f'{props}: compute capability {major}.{minor} (CUDA C++ Programming Guide)')} }}",
            ]
        return "\n".join(lines) + "\n"


def require_cuda() -> Any:
    """The ``torch`` module when it sees a CUDA device, else :class:`CudaUnavailable` in one line."""
    try:
        import torch
    except ImportError:
        raise CudaUnavailable(
            "calibrate --device cuda: PyTorch is not installed (pip install 'onnxroof[torch]')"
        ) from None
    if not torch.cuda.is_available():
        raise CudaUnavailable(
            f"calibrate --device cuda: PyTorch {torch.__version__} sees no CUDA device "
            f"(torch.cuda.is_available() is false; CUDA build: {torch.version.cuda or 'none'})"
        )
    return torch


def _event_time(torch: Any, run: Callable[[], object], repeats: int, rounds: int) -> float:
    """Median over ``rounds`` of the CUDA-event seconds of ``repeats`` back-to-back ``run()`` ÷ ``repeats``."""
    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeats):
            run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3 / repeats)
    return statistics.median(times)


def _max_clock_hz() -> float | None:
    """``nvidia-smi --query-gpu=clocks.max.sm`` of device 0 in Hz, None without it."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=clocks.max.sm", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
        return float(out.strip().splitlines()[0]) * 1e6
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def measure_cuda(name: str = "cuda", quick: bool = False) -> CudaCalibration:
    """Measure device 0 (module docstring). :class:`CudaUnavailable` without PyTorch or a CUDA device."""
    torch = require_cuda()
    began = time.perf_counter()
    props = torch.cuda.get_device_properties(0)
    device = torch.device("cuda", 0)
    n, repeats, rounds = (4096, 5, 3) if quick else (8192, 20, 5)
    how = f"CUDA events, median of {rounds} rounds of {repeats}"
    peaks = _gemm_peaks(torch, device, n, repeats, rounds, how)
    bandwidth = _copy_bandwidth(torch, device, props.L2_cache_size, repeats, rounds, how)
    launch = _launch_overhead(torch, device, 2000 if quick else 20000)
    efficiency = _efficiencies(torch, device, bandwidth.value, peaks.get("fp16"), repeats, rounds, how)
    return CudaCalibration(
        name=name,
        gpu=props.name,
        capability=(props.major, props.minor),
        sm_count=props.multi_processor_count,
        l2_bytes=props.L2_cache_size,
        clock_hz=_max_clock_hz(),
        torch=torch.__version__,
        cuda=str(torch.version.cuda),
        date=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        quick=quick,
        duration_s=time.perf_counter() - began,
        peaks=peaks,
        dram_bandwidth=bandwidth,
        launch_overhead=launch,
        efficiency=efficiency,
    )


def _gemm_peaks(torch: Any, device: Any, n: int, repeats: int, rounds: int, how: str) -> dict[str, Figure]:
    """``2·n³ / t`` of ``torch.matmul`` per precision (TF32 off for fp32, on for tf32; int8 via ``_int_mm``)."""
    peaks: dict[str, Figure] = {}
    flops = 2.0 * n**3
    matmul = torch.backends.cuda.matmul
    for precision, dtype, tf32 in (
        ("fp32", torch.float32, False),
        ("tf32", torch.float32, True),
        ("fp16", torch.float16, False),
        ("bf16", torch.bfloat16, False),
    ):
        a, b = torch.randn(n, n, device=device, dtype=dtype), torch.randn(n, n, device=device, dtype=dtype)
        matmul.allow_tf32 = tf32
        seconds = _event_time(torch, functools.partial(torch.matmul, a, b), repeats, rounds)
        peaks[precision] = Figure(flops / seconds, f"measured: torch.matmul {n}×{n}×{n} {precision}, {how}")
    matmul.allow_tf32 = False
    a = torch.randint(-8, 8, (n, n), device=device, dtype=torch.int8)
    try:
        seconds = _event_time(torch, lambda: torch._int_mm(a, a), repeats, rounds)
        peaks["int8"] = Figure(flops / seconds, f"measured: torch._int_mm {n}×{n}×{n} int8, {how}")
    except RuntimeError:  # no int8 GEMM on this device or build: the platform has no int8 peak
        pass
    return peaks


def _copy_bandwidth(torch: Any, device: Any, l2: int, repeats: int, rounds: int, how: str) -> Figure:
    """``2·bytes / t`` of a device copy of ``max(1 GiB, 16 × L2)`` bytes."""
    size = max(1 << 30, 16 * l2)
    x = torch.empty(size, dtype=torch.uint8, device=device)
    y = torch.empty_like(x)
    seconds = _event_time(torch, lambda: y.copy_(x), repeats, rounds)
    return Figure(2.0 * size / seconds, f"measured: device copy of {size / 1e9:.3g} GB (read + write), {how}")


def _launch_overhead(torch: Any, device: Any, launches: int) -> Figure:
    """Host seconds per launch of ``launches`` one-element ``add_`` issued back to back."""
    x = torch.zeros(1, device=device)
    x.add_(1)
    torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(launches):
        x.add_(1)
    torch.cuda.synchronize()
    per = (time.perf_counter() - began) / launches
    return Figure(per, f"measured: {launches} one-element add_ launched back to back, wall time ÷ launches")


def _efficiencies(
    torch: Any, device: Any, bandwidth: float, fp16: Figure | None, repeats: int, rounds: int, how: str
) -> dict[str, Figure]:
    """Each class's share of its roof (module docstring), clipped to (0, 1]."""
    functional = torch.nn.functional
    rows, cols = 8192, 4096
    x = torch.randn(rows, cols, device=device, dtype=torch.float16)
    y = torch.randn_like(x)
    size = x.numel() * x.element_size()
    probes = {
        "elementwise": (lambda: x + y, 3 * size, "add of two"),
        "softmax": (lambda: torch.softmax(x, dim=-1), 2 * size, "softmax over the last axis of"),
        "normalization": (lambda: functional.layer_norm(x, (cols,)), 2 * size, "layer_norm of"),
        "reduction": (lambda: x.sum(dim=-1), size, "sum over the last axis of"),
    }
    shares: dict[str, Figure] = {}
    shape = f"{rows}×{cols} fp16"
    for op_class, (run, moved, what) in probes.items():
        seconds = _event_time(torch, run, repeats, rounds)
        share = min(1.0, moved / bandwidth / seconds)
        shares[op_class] = Figure(share, f"measured: {what} {shape}, ({moved} B ÷ copy bandwidth) ÷ time, {how}")
    if fp16 is not None:
        conv = torch.nn.Conv2d(256, 256, 3, padding=1, bias=False).to(device, torch.float16)
        conv = conv.to(memory_format=torch.channels_last)
        image = torch.randn(32, 256, 56, 56, device=device, dtype=torch.float16).to(memory_format=torch.channels_last)
        flops = 2.0 * 32 * 56 * 56 * 256 * 256 * 9
        with torch.no_grad():
            seconds = _event_time(torch, lambda: conv(image), repeats, rounds)
        share = min(1.0, flops / fp16.value / seconds)
        shares["conv"] = Figure(
            share, f"measured: 3×3 conv 32×256×56×56 fp16 channels-last, (F ÷ fp16 peak) ÷ time, {how}"
        )
    return shares
