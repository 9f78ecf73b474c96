"""Hardware platforms: the peaks and bandwidths a roofline is drawn from, loaded from TOML files.

One TOML file per platform (the bundled ones live in ``platforms/``, installed as the package
``onnxroof.platforms``). Every figure is an inline table ``{ value = <number > 0>, source = "<text>" }``
so that no number travels without the place it came from. Units are in the key names and are decimal SI:
``peak_tflops`` (TFLOP/s, or TOPS for integer precisions; dense, with 2:4-sparse peaks kept apart in
``sparse_peak_tflops``), ``dram_bandwidth_gbps`` (GB/s = 1e9 B/s), ``capacity_gb`` (1e9 B), ``onchip_mb``
(1e6 B), ``tdp_w``, ``launch_overhead_us`` and ``run_overhead_us``. :class:`Platform` holds the same figures in
base SI units (FLOP/s, B/s, bytes, seconds).

Files written by ``onnxroof calibrate`` (``measured = true``) may also hold:

* ``[measurement]``: free-form facts about the measurement (``date``, ``onnxruntime``, ``onnxroof``, ``threads``,
  ``cpu``, ``quick``, ``duration_s``, ``bandwidth_sweep``): strings, numbers or booleans, no sources;
* ``[memory] cache_levels``: an empirical memory hierarchy, a list of inline tables
  ``{ size_mb = <number > 0>, bandwidth_gbps = <number > 0>, source = "<text>" }`` in increasing size: a kernel
  whose working set fits in ``size_mb`` is costed at that level's bandwidth instead of DRAM's;
* ``[efficiency]``: FRAME-style derating per op class (see :data:`EFFICIENCY_CLASSES`), each a figure whose value
  lies in (0, 1]: the share of the roofline that kernels of that class attain.

Any platform may also give the what-if figures (issue 7):

* ``[memory] onchip_bandwidth_gbps``: the on-chip roof. With ``onchip_mb`` it forms a one-level hierarchy named
  ``onchip`` (when no measured ``cache_levels`` are given): a kernel whose working set fits on chip streams at
  this bandwidth instead of DRAM's (see :mod:`onnxroof.roofline.classify`).
* ``[array]``: a processing-element array — ``height`` and ``width`` (PEs), ``instances`` (arrays, default 1) and
  ``clock_ghz``. GEMM-like kernels are mapped onto it with the padding loss of dims that do not divide it
  (:mod:`onnxroof.roofline.pe_array`); the array's peak ``2 · height · width · instances · clock`` is reported beside
  the
  datasheet peaks, which stay the roofs.
* ``sparsity = "2:4" | "unstructured" | "none"``: what zeros the hardware can skip (``--skip-compute``). Absent:
  ``"2:4"`` when the file has ``[sparse_peak_tflops]``, else ``"none"``. ``"2:4"`` applies to the precisions
  with a sparse peak.
* ``[energy_pj_per_op]``: energy per operation (one FLOP; one OP for integer precisions) per precision, pJ;
  ``[energy_pj_per_byte]``: energy per byte moved for each memory level, ``dram`` (required when the table is
  given) and ``onchip`` (bytes served by the on-chip level or a measured cache level), pJ/B. Together they draw
  the floorline (:mod:`onnxroof.roofline.energy`).

GPU platforms (``kind = "gpu"``) give what the ``gpu`` time model (:mod:`onnxroof.roofline.gpu`) reads, in
``[gpu]`` (every bundled GPU file has it; a GPU file without it is placed by the roofline):

* ``sm_count`` (whole number of streaming multiprocessors), ``boost_clock_ghz`` (the clock the tensor peaks are
  quoted at), ``l2_mb`` (1e6 B), each a sourced figure;
* ``tensor_cores``: ``{ value = "<generation>", source = "..." }``, one of :data:`TENSOR_CORE_GENERATIONS`
  (``none`` for GPUs without tensor cores);
* optionally ``l2_bytes_per_clock`` (the L2's read bandwidth per clock, whole chip; absent: the model's
  ``[derived]`` default per SM).

Datasheet platforms may give the share of their datasheet figures that real kernels sustain:

* ``[sustained]``: ``dram_bandwidth`` and ``tensor``, each ``{ value = <0 < v ≤ 1>, source = "<text>" }``:
  the share of the datasheet DRAM bandwidth a streaming kernel sustains (STREAM / nvbandwidth / BabelStream
  style microbenchmarks), and the share of the datasheet dense peak a large GEMM sustains (cuBLAS / CUTLASS
  efficiency). On ``kind = "gpu"`` the ``tensor`` share applies to the precisions that run on tensor / matrix
  units, :data:`TENSOR_PRECISIONS` (tf32, fp16, bf16, fp8, int8, int4); fp32 and fp64 (CUDA cores) keep their
  datasheet peak. On ``cpu`` and ``accelerator`` platforms it applies to every precision. By default the
  roofline is drawn from the sustained roofs, ``W = f_bw · W_datasheet`` and ``P = f_tensor · P_datasheet``;
  ``--peak`` (:attr:`onnxroof.analysis.whatif.WhatIf.peak`) draws it from the datasheet figures as given.
  A measured platform (``measured = true``) has no ``[sustained]`` table: its roofs are measured already.

Loading validates strictly: an unknown key, a missing required key, a figure without a source or with a
value that is not a positive finite number, or a bad ``kind`` / ``fusion_profile`` raises
:class:`~onnxroof.core.errors.PlatformError` with one line naming the file and the dotted key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field, replace
from types import MappingProxyType
from typing import Any

from onnxroof.core.errors import PlatformError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.profiles import FusionProfile

SCHEMA_VERSION = 1
PRECISIONS: tuple[str, ...] = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "int4")
"""Precision keys a platform may give a peak for, in display order."""
PRECISION_FALLBACK: Mapping[str, str] = MappingProxyType(
    {"bf16": "fp16", "fp16": "fp32", "fp8": "fp16", "int4": "int8", "int8": "fp32", "fp64": "fp32", "tf32": "fp32"}
)
"""When a platform lacks a figure for a precision, the next one down this chain is used (and said)."""
KINDS: tuple[str, ...] = ("gpu", "cpu", "accelerator")
TENSOR_PRECISIONS: frozenset[str] = frozenset({"tf32", "fp16", "bf16", "fp8", "int8", "int4"})
"""Precisions a GPU runs on tensor cores: the ones ``[sustained] tensor`` derates on ``kind = "gpu"``."""
SUSTAINED_KEYS: tuple[str, ...] = ("dram_bandwidth", "tensor")
"""Figures a ``[sustained]`` table may give, each a share in (0, 1] of the datasheet figure."""
EFFICIENCY_CLASSES: tuple[str, ...] = (
    "matmul",
    "conv",
    "depthwise",
    "elementwise",
    "activation",
    "normalization",
    "skip_normalization",
    "lrn",
    "softmax",
    "pooling",
    "reduction",
    "movement",
    "indexing",
    "recurrent",
    "other",
)
"""Op classes an ``[efficiency]`` table may derate (see :class:`onnxroof.core.states.OpClass`)."""
EFFICIENCY_FALLBACK: Mapping[str, str] = MappingProxyType({"skip_normalization": "normalization"})
"""A class whose figure a platform file lacks takes the figure of this class (files calibrated before
``skip_normalization`` existed derate those kernels as they did: by the ``normalization`` figure)."""
SPARSITY_KINDS: tuple[str, ...] = ("2:4", "unstructured", "none")
"""What zeros a platform's compute units can skip: 2:4 structured weight sparsity, any zero, or none."""
TENSOR_CORE_GENERATIONS: tuple[str, ...] = ("none", "volta", "turing", "ampere", "ada", "hopper", "blackwell")
"""Tensor-core generations a ``[gpu] tensor_cores`` figure may name (``none``: CUDA cores only)."""
GPU_KEYS: tuple[str, ...] = ("sm_count", "boost_clock_ghz", "l2_mb", "tensor_cores", "l2_bytes_per_clock")
"""Keys of a ``[gpu]`` table; all but ``l2_bytes_per_clock`` required when the table is given."""
ENERGY_LEVELS: tuple[str, ...] = ("dram", "onchip")
"""Memory levels an ``[energy_pj_per_byte]`` table may price."""
MEASUREMENT_KEYS: tuple[str, ...] = (
    "date",
    "onnxruntime",
    "onnxroof",
    "threads",
    "cpu",
    "quick",
    "duration_s",
    "bandwidth_sweep",
    "gpu",
    "torch",
    "cuda",
)

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@frozen_dataclass(slots=True)
class CacheLevel:
    """One level of an empirical memory hierarchy: working sets up to ``size`` bytes stream at ``bandwidth``."""

    size: float
    """Largest working set measured at this bandwidth, bytes."""
    bandwidth: float
    """B/s."""
    source: str
    name: str = ""
    """Display name; empty: ``L1``, ``L2``... by position."""


@frozen_dataclass(slots=True)
class PEArray:
    """A processing-element array: ``instances`` arrays of ``height × width`` PEs, each one MAC per cycle."""

    height: int
    width: int
    instances: int
    clock_hz: float

    @property
    def peak_flops(self) -> float:
        """``2 · height · width · instances · clock`` FLOP/s (a MAC is 2 FLOPs)."""
        return 2.0 * self.height * self.width * self.instances * self.clock_hz


@frozen_dataclass(slots=True)
class GpuSpec:
    """What the ``gpu`` time model reads of a GPU (``[gpu]``), in SI units."""

    sm_count: int
    clock_hz: float
    """Boost clock the tensor peaks are quoted at, Hz."""
    l2_size: float
    """L2 cache, bytes."""
    tensor_cores: str
    """Tensor-core generation, one of :data:`TENSOR_CORE_GENERATIONS`."""
    l2_bytes_per_clock: float | None = None
    """The L2's read bandwidth per clock (whole chip), bytes; None: not given."""


@frozen_dataclass
class Platform:
    """One hardware target, in base SI units. Build it with :func:`load_platform`."""

    name: str
    title: str
    kind: str
    fusion_profile: FusionProfile
    peak_flops: Mapping[str, float] = field(hash=False)
    """Dense peak per precision, FLOP/s (integer precisions: OP/s)."""
    sparse_peak_flops: Mapping[str, float] = field(hash=False)
    """2:4 structured-sparse peak per precision, FLOP/s; never used as a dense roof."""
    dram_bandwidth: float
    """Off-chip memory bandwidth, B/s."""
    memory_capacity: float | None
    """Device memory, bytes."""
    onchip_memory: float | None
    """Last-level on-chip memory (L2 / L3 / SRAM), bytes."""
    tdp_w: float | None
    launch_overhead_s: float
    """Fixed cost per kernel launch / op dispatch, seconds."""
    sources: Mapping[str, str] = field(hash=False)
    """Dotted TOML key (e.g. ``peak_tflops.fp32``) to the source text, for every figure."""
    path: str
    """Where it was loaded from: ``bundled:<name>`` or the file path."""
    aliases: tuple[str, ...] = ()
    notes: str = ""
    measured: bool = False
    """True for files calibrated from measurements rather than datasheets."""
    measurement: Mapping[str, str | int | float | bool] = field(default_factory=lambda: _EMPTY, hash=False)
    """Facts about the measurement (``[measurement]``: date, onnxruntime version, threads, CPU...)."""
    cache_levels: tuple[CacheLevel, ...] = ()
    """Empirical cache levels in increasing size (``[memory] cache_levels``); empty: DRAM only."""
    efficiency: Mapping[str, float] = field(default_factory=lambda: _EMPTY, hash=False)
    """Op class to the share of the roofline its kernels attain, in (0, 1] (``[efficiency]``); absent: 1."""
    run_overhead_s: float = 0.0
    """Fixed cost per inference call (``runtime.run_overhead_us``), seconds; 0 when not given."""
    onchip_bandwidth: float | None = None
    """On-chip bandwidth (``memory.onchip_bandwidth_gbps``), B/s; forms the ``onchip`` cache level."""
    array: PEArray | None = None
    """The processing-element array (``[array]``), if the platform describes one."""
    sparsity: str = "none"
    """What zeros the compute units skip: one of :data:`SPARSITY_KINDS`."""
    energy_per_op: Mapping[str, float] = field(default_factory=lambda: _EMPTY, hash=False)
    """Precision to joules per operation (``[energy_pj_per_op]`` × 1e-12)."""
    energy_per_byte: Mapping[str, float] = field(default_factory=lambda: _EMPTY, hash=False)
    """Memory level (``dram``, ``onchip``) to joules per byte (``[energy_pj_per_byte]`` × 1e-12)."""
    sustained: Mapping[str, float] = field(default_factory=lambda: _EMPTY, hash=False)
    """``[sustained]`` shares of the datasheet figures (``dram_bandwidth``, ``tensor``), each in (0, 1]."""
    gpu: GpuSpec | None = None
    """The GPU's SMs, clock, L2 and tensor-core generation (``[gpu]``), None when not given."""
    peak_roofs: bool = False
    """True: the roofline uses the datasheet figures as given (``--peak``), not the sustained shares."""
    default_runtime: str = ""
    """The runtime profile analyses use unless told otherwise (``default_runtime``, a name in ``runtimes/``);
    empty: the one the fusion profile implies (:func:`onnxroof.runtime.lookup.default_runtime_name`)."""

    @property
    def bandwidth_share(self) -> float:
        """The share ``f_bw`` of the datasheet DRAM bandwidth the roofline uses (1 with ``--peak`` or none given)."""
        return 1.0 if self.peak_roofs else self.sustained.get("dram_bandwidth", 1.0)

    def compute_share(self, precision: str) -> float:
        """The share ``f_tensor`` of the datasheet peak of ``precision`` the roofline uses: the ``[sustained]
        tensor`` figure for :data:`TENSOR_PRECISIONS` on GPUs and for every precision elsewhere; else 1."""
        if self.peak_roofs or (self.kind == "gpu" and precision not in TENSOR_PRECISIONS):
            return 1.0
        return self.sustained.get("tensor", 1.0)

    @property
    def roof_bandwidth(self) -> float:
        """The DRAM roof, B/s: ``f_bw · dram_bandwidth`` (the datasheet figure with ``--peak``)."""
        return self.dram_bandwidth * self.bandwidth_share

    def datasheet_peak(self, precision: str) -> float:
        """The datasheet dense peak of ``precision``, FLOP/s; :class:`PlatformError` if the platform has none."""
        try:
            return self.peak_flops[precision]
        except KeyError:
            raise PlatformError(
                f"platform {self.name!r} has no peak for precision {precision!r}; "
                f"it has: {', '.join(self.precisions())}"
            ) from None

    def with_peak_roofs(self, peak: bool = True) -> Platform:
        """This platform with the roofline drawn from the datasheet figures (``peak``) or the sustained ones."""
        return self if peak == self.peak_roofs else replace(self, peak_roofs=peak)

    @property
    def has_energy(self) -> bool:
        """True when the platform gives both operation and DRAM byte energies (the floorline can be drawn)."""
        return bool(self.energy_per_op) and "dram" in self.energy_per_byte

    def precisions(self) -> tuple[str, ...]:
        """The precisions with a dense peak, in :data:`PRECISIONS` order."""
        return tuple(p for p in PRECISIONS if p in self.peak_flops)

    def peak(self, precision: str) -> float:
        """The compute roof for ``precision`` in FLOP/s: ``f_tensor · datasheet dense peak`` (see
        :meth:`compute_share`); :class:`PlatformError` if the platform has no peak for it."""
        return self.datasheet_peak(precision) * self.compute_share(precision)

    def ridge(self, precision: str) -> float:
        """Ridge point (FLOP/byte) for ``precision``: compute roof ÷ DRAM roof."""
        return self.peak(precision) / self.roof_bandwidth

    def class_efficiency(self, op_class: str) -> float:
        """The ``[efficiency]`` figure of ``op_class``; else that of its :data:`EFFICIENCY_FALLBACK` class; else 1."""
        figure = self.efficiency.get(op_class)
        if figure is None and op_class in EFFICIENCY_FALLBACK:
            figure = self.efficiency.get(EFFICIENCY_FALLBACK[op_class])
        return 1.0 if figure is None else figure

    def bandwidth_for(self, working_set: float) -> tuple[float, str]:
        """(bandwidth B/s, level name) for a kernel moving ``working_set`` bytes.

        The smallest cache level whose size holds the working set (named ``L1``, ``L2``... in order of the
        ``cache_levels`` list), else DRAM (``"dram"``).
        """
        for number, level in enumerate(self.cache_levels, start=1):
            if working_set <= level.size:
                return level.bandwidth, level.name or f"L{number}"
        return self.roof_bandwidth, "dram"
