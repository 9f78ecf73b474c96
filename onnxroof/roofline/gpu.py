"""The ``gpu`` time model: a kernel's time from how a GPU runs it, bounded below by the roofline.

Learned from NeuSight (Lee et al., "Forecasting GPU Performance for Deep Learning Training and Inference",
ASPLOS 2025, https://dl.acm.org/doi/10.1145/3669940.3707265): a GEMM-like kernel is cut into output tiles, the
tiles run in waves over the SMs, and each tile's time is bounded by the roofline of one SM. NeuSight learns the
per-tile utilization from measurements; here it follows from the tile's own compute and L2 traffic, with every
constant below given with its source (:data:`CONSTANT_SOURCES`). What a platform gives comes from its ``[gpu]``
table (SM count, boost clock, L2 size and bandwidth, tensor-core generation, :class:`~onnxroof.platform.model.
GpuSpec`) and its sustained roofs (:class:`~onnxroof.roofline.place.Roofs`: ``P`` per precision, ``W``, the
op-class efficiency ``e``).

Three paths, chosen per row (formulas in :meth:`GpuTime.times` and the helpers that apply them):

* **tiles** (:func:`tile_time`): GEMM-like kernels (op class ``matmul`` or ``conv`` with a complete GEMM view)
  on tensor cores or, in fp32 / on GPUs without them, on CUDA cores through the same tiling;
* **CUDA cores** (:func:`cuda_core_time`): depthwise convolutions, grouped ones with fewer input channels per
  group than a tensor-core fragment, and the classes of :data:`CUDA_CORE_CLASSES` (elementwise, normalization,
  softmax, reductions, movement...): compute at the fp32 CUDA-core rate;
* **roofline compute**: any other kernel (fused attention, recurrent cells, GEMMs whose shape is not static):
  ``F / (e·u·P)`` at the precision's roof.

Every kernel streams its bytes at the bandwidth of the level that holds them (:func:`stream_time`).

Every row also pays one per-transfer latency ``t_lat`` (the first load of a kernel is a full memory round
trip, and no kernel ends before its grid drains) and its launches at ``launch_s`` each, the runtime's cost per
launch (:attr:`~onnxroof.roofline.place.Roofs.launch_s`: its ``per_kernel_us``, else the platform's
``launch_overhead_s``; a node of a replayed CUDA graph); the run's one-off cost (a graph launch) is the runtime's
too, added once by placement. A platform without a ``[gpu]`` table is placed by the roofline
(:class:`~onnxroof.roofline.place.RooflineTime`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from onnxroof.core.descriptor import KernelDescriptor
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.states import Bound, TimeModelKind
from onnxroof.platform.model import GpuSpec, Platform
from onnxroof.roofline.place import ROOFLINE, Floats, RooflineTime, Roofs, Times, Work, by_key, choose

Bools = npt.NDArray[np.bool_]

ITEM_BYTES: Mapping[str, float] = MappingProxyType(
    {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
)
"""Bytes per element of each precision (tf32 is stored as fp32)."""

TENSOR_CORE_PRECISIONS: Mapping[str, frozenset[str]] = MappingProxyType(
    {
        "none": frozenset(),
        "volta": frozenset({"fp16", "int8"}),
        "turing": frozenset({"fp16", "int8", "int4"}),
        "ampere": frozenset({"tf32", "fp16", "bf16", "int8", "int4"}),
        "ada": frozenset({"tf32", "fp16", "bf16", "fp8", "int8", "int4"}),
        "hopper": frozenset({"tf32", "fp16", "bf16", "fp8", "int8"}),
        "blackwell": frozenset({"tf32", "fp16", "bf16", "fp8", "int8", "int4"}),
    }
)
"""Precisions each tensor-core generation runs (NVIDIA V100, Turing, A100, Ada, H100 and Blackwell architecture
whitepapers; Xavier's Volta adds INT8, its datasheet)."""

FRAGMENT_BYTES = 16
"""Tensor-core operands come in 16-byte fragments: channel and K dims in multiples of 8 fp16, 16 int8, 4 tf32
elements (NVIDIA Deep Learning Performance guide, "Matrix Multiplication Background", Tensor Core requirements:
https://docs.nvidia.com/deeplearning/performance/dl-performance-matrix-multiplication/)."""

TILES: tuple[tuple[int, int], ...] = ((256, 128), (128, 256), (128, 128), (128, 64), (64, 128), (64, 64))
"""CTA output tiles (M × N) a GEMM library chooses among (the tile sizes of NVIDIA's "Matrix Multiplication
Background" guide, section "Dimension quantization effects": 256×128, 128×128, 64×128, 64×64...); the model
takes the fastest for each kernel, as cuBLAS's heuristics aim to."""

K_TILE_BYTES = 64
"""Bytes of K one main-loop step of a CTA consumes per row: 32 fp16, 64 int8, 16 fp32 elements (CUTLASS's
default threadblock shapes 128×128×32 for fp16 and 128×128×64 for int8 on SM80, [derived] 32 × 2 B = 64 B)."""

SMALL_TILE_MULTIPLE = 8
"""assumed: for a product smaller than a tile, libraries run a kernel whose tile shrinks to the problem (cuBLAS's
GEMV and small-tile kernels), to a multiple of 8 rows or columns (the n8 dimension of the mma.m16n8k16 tensor-core
instruction, PTX ISA): a tile is ``min(M_t, ⌈M/8⌉·8) × min(N_t, ⌈N/8⌉·8)``."""

MIN_SPLIT_STEPS = 4
"""assumed: split-K keeps at least 4 K-steps per slice (fewer cannot amortize the partial-sum reduction)."""

MAX_SPLIT_K = 2
"""[fitted] The most K-slices a GEMM library splits one output tile into: 2, the value of the grid {1, 2, 4, 8,
unbounded} that minimizes the median |error| of the even library rows of the H200 kernels
(benchmarks/data/gpu/kernels.csv, run 1; benchmarks/fit_gpu_kernels.py), the odd rows and run 2 held out. Small
GEMMs with deep K (M = 8, N = 64, K = 8192: 7.0 µs measured) run at the pace of a barely split K loop, not of one
split over every idle SM (unbounded split-K predicted 4.7 µs)."""

L2_BYTES_PER_CLOCK_PER_SM = 5120 / 108
"""[derived] NVIDIA A100 whitepaper: L2 read bandwidth 5120 B/clk over 108 SMs = 47.4 B/clk per SM; used for a
platform whose ``[gpu]`` table gives no ``l2_bytes_per_clock``."""

CUDA_CORE_GEMM_SHARE = 51.2874 / 67.0
"""measured: the share of the fp32 datasheet peak a CUDA-core GEMM (SGEMM) sustains, 0.766: ``onnxroof calibrate
--device cuda`` on the NVIDIA H200 measured torch.matmul 8192×8192×8192 fp32 at 51.29 TFLOP/s
(benchmarks/data/gpu/run2/h200-calibrated.toml) of the datasheet's 67 TFLOP/s (platforms/h200.toml); assumed for
every GPU (an FFMA GEMM is bound by register-file bandwidth and issue, not by the FMA units: a property of the SM
design, not of one chip). Applied to tiled rows off the tensor cores on datasheet platforms; a measured platform's
fp32 peak is this figure already."""

NARROW_GROUP = min(n for _, n in TILES)
"""A group narrower than the narrowest CTA tile of :data:`TILES` (64 columns) is what :data:`GROUPED_CONV_SHARE`
applies to: the range it was measured on (4–32 output channels per group); two wide groups (AlexNet's and
ZFNet's ``group = 2``, 128–192 per group) are ordinary GEMMs, one after the other."""

GROUPED_CONV_SHARE = 0.58
"""[fitted] The share of the tile model's (or, below a fragment of channels per group, the CUDA-core path's)
arithmetic rate that a narrow grouped convolution reaches (``groups > 1``, op class ``conv``: not depthwise, and
fewer output channels per group than :data:`NARROW_GROUP`): its time is ``t_arith / 0.58``. Such a convolution is
``g`` narrow GEMMs of ``N = C_out / g`` columns each (4–32 in ResNeXt); the library's grouped kernels reuse each
loaded input far less than a tile of that width would, and the
H200 measured them at 1.5–2.8× the tile model's time at every size where the arithmetic matters (ResNeXt-50's
3×3 convolutions at batch 32: 12–50 µs measured, 8–18 µs predicted). Fitted by benchmarks/fit_gpu_kernels.py on
the even grouped-convolution rows of run 1 of the H200 kernels (benchmarks/data/gpu/kernels.csv) whose prediction
the share moves (more than 10 % between shares 1 and 0.5: the others are latency-bound and carry no information
on it), the 0.01-grid value minimizing their median |error|; run 1's odd rows and run 2 are the held-out check
(run 2's 41 such rows: 24.8 % → 8.5 %). Assumed for every GPU and library (TensorRT's grouped kernels included):
a property of narrow grouped GEMMs, measured on one GPU."""

L2_FIT_SHARE = 0.5
"""assumed: a kernel whose bytes fit in half the L2 streams them from L2 (the producer just wrote them; the
other half holds what else is live)."""

TRANSFER_LATENCY_S = 1.5e-6
"""[fitted] A streaming kernel's fixed device time on the H200 (first DRAM round trip, grid launch and drain):
fitted on the even streaming rows (elementwise, reduction, norm, softmax) of benchmarks/data/gpu/kernels.csv
(NVIDIA H200, run 1 of 2026-11-26) by benchmarks/fit_gpu_kernels.py, the 0.1 µs grid value that minimizes their
median |error|; the odd rows are the held-out check (docs/accuracy.md). Applied in cycles
(:data:`TRANSFER_LATENCY_CYCLES`)."""

LIBRARY_LATENCY_S = 3.9e-6
"""[fitted] A library kernel's fixed device time on the H200 (:data:`LIBRARY_CLASSES`: prologue, epilogue,
split-K reduction): fitted as :data:`TRANSFER_LATENCY_S` on the even GEMM, GEMV, batched-GEMM, convolution and
SDPA rows of the H200 kernels, jointly with :data:`MAX_SPLIT_K` (4.4 µs before split-K was bounded); the odd
rows and run 2 are the held-out check. Applied in cycles
(:data:`LIBRARY_LATENCY_CYCLES`)."""

FIT_CLOCK_HZ = 1.83e9
"""The clock of the GPU the two fixed times were fitted on: platform ``h200``'s ``boost_clock_ghz`` (1.83 GHz,
[derived] from its dense FP16 peak, platforms/h200.toml)."""

TRANSFER_LATENCY_CYCLES = TRANSFER_LATENCY_S * FIT_CLOCK_HZ
"""[derived] 1.5 µs × 1.83 GHz = 2745 cycles: a kernel's fixed cost is counted in GPU clocks (grid launch, the
CTAs' prologue, the drain of the last wave and the grid's completion are steps of the SM and front-end clock), so
a lower-clocked GPU pays more time: ``t_lat = cycles / f`` with ``f`` the platform's ``boost_clock_ghz``."""

LIBRARY_LATENCY_CYCLES = LIBRARY_LATENCY_S * FIT_CLOCK_HZ
"""[derived] 3.9 µs × 1.83 GHz = 7137 cycles, the library kernels' fixed cost in cycles (as
:data:`TRANSFER_LATENCY_CYCLES`); the default for every tensor-core generation that
:data:`LIBRARY_CYCLES_BY_GENERATION` does not name."""

LIBRARY_CYCLES_BY_GENERATION: Mapping[str, float] = MappingProxyType({"volta": 18000.0, "turing": 16000.0})
"""[fitted] Library kernels' fixed cost in cycles per tensor-core generation where it differs from
:data:`LIBRARY_LATENCY_CYCLES`: Volta (Jetson AGX Xavier, Xavier NX) 18,000 cycles (13 µs at 1.377 GHz; 22,000
before the H200 kernel re-fit and the detection post-processing, refitted after both by the same procedure), Turing
(T4) 16,000 cycles (10 µs at 1.59 GHz), each the value of a 2,000-cycle grid minimizing the median |error| of the
``gpu`` model over that generation's **training** rows of benchmarks/gpu_measurements.toml (the declared split,
``benchmarks/bench_gpu_published.py`` ``training_ids``: per platform, every other row by id; ``--fit`` reruns
it); the other rows are held out and reported apart (docs/accuracy.md). What the cycles stand for is not
established: the measured per-kernel time of batch-1 TensorRT INT8 engines on these GPUs (ResNet-50: 33 µs per
kernel on Xavier, 18 µs on T4) is 2–3× what the H200-fitted cost and the tile model give."""
LIBRARY_CYCLES_SOURCE = (
    "[fitted] on the training rows of benchmarks/gpu_measurements.toml (bench_gpu_published.py --fit; "
    "every other row per platform, the rest held out)"
)
"""Where :data:`LIBRARY_CYCLES_BY_GENERATION` comes from, as reports show it."""

CONSTANT_SOURCES: Mapping[str, str] = MappingProxyType(
    {
        "fragment_bytes": f"{FRAGMENT_BYTES}: NVIDIA DL performance guide, Tensor Core requirements (8 fp16 / 16 int8)",
        "tiles": "256x128, 128x256, 128x128, 128x64, 64x128, 64x64: NVIDIA 'Matrix Multiplication Background' guide",
        "k_tile_bytes": f"{K_TILE_BYTES}: [derived] CUTLASS SM80 threadblock K 32 fp16 × 2 B",
        "min_split_steps": f"{MIN_SPLIT_STEPS}: assumed",
        "l2_bytes_per_clock_per_sm": f"{L2_BYTES_PER_CLOCK_PER_SM:.1f}: [derived] A100 whitepaper 5120 B/clk ÷ 108 SMs",
        "l2_fit_share": f"{L2_FIT_SHARE}: assumed",
        "transfer_latency_cycles": f"{TRANSFER_LATENCY_CYCLES:.0f}: [derived] {TRANSFER_LATENCY_S:g} s fitted on the "
        f"even streaming rows of the H200 kernels × {FIT_CLOCK_HZ / 1e9:g} GHz",
        "library_latency_cycles": f"{LIBRARY_LATENCY_CYCLES:.0f}: [derived] {LIBRARY_LATENCY_S:g} s fitted on the even "
        f"library rows of the H200 kernels × {FIT_CLOCK_HZ / 1e9:g} GHz",
        "small_tile_multiple": f"{SMALL_TILE_MULTIPLE}: assumed, the n8 of mma.m16n8k16 (PTX ISA)",
        "max_split_k": f"{MAX_SPLIT_K}: [fitted] on the even library rows of the H200 kernels",
        "cuda_core_gemm_share": f"{CUDA_CORE_GEMM_SHARE:.3f}: measured, calibrate --device cuda on an H200: fp32 "
        "matmul 51.3 of 67 TFLOP/s",
        "unaligned_operands": "L2 traffic × 16 B ÷ the widest load K and N allow: CUTLASS/cuBLAS alignment rule",
        "grouped_conv_share": f"{GROUPED_CONV_SHARE}: [fitted] on the even grouped-convolution rows of the H200 "
        "kernels that it moves",
    }
)
"""Each constant of the model with its value and source, as reports show them."""

_TILED = frozenset({"matmul", "conv"})
LIBRARY_CLASSES = frozenset({"matmul", "conv", "depthwise", "recurrent", "other"})
"""Op classes whose kernels come from GEMM / convolution / attention libraries (cuBLAS, cuDNN, flash attention),
with a longer fixed cost (prologue, epilogue, split-K reduction) than a streaming kernel's."""
CUDA_CORE_CLASSES = frozenset(
    {"depthwise", "elementwise", "activation", "normalization", "lrn", "softmax", "pooling", "reduction"}
    | {"movement", "indexing"}
)
"""Op classes whose arithmetic runs on CUDA cores (no tensor-core form): depthwise convolutions and every
pointwise, normalizing, pooling, reducing or data-moving kernel."""


class Shapes(NamedTuple):
    """The descriptor facts the model reads, one entry per row: a complete GEMM view (``tiled``) with its batch
    count ``g``, ``m``, ``n``, ``k``; the channels per group a fragment pads (``channels``, 0: not a convolution)
    and the window (``window``, 1 for products); ``groups`` of a convolution (1 otherwise)."""

    tiled: Bools
    g: Floats
    m: Floats
    n: Floats
    k: Floats
    channels: Floats
    window: Floats
    groups: Floats

    def take(self, rows: npt.NDArray[np.intp]) -> Shapes:
        """The facts of ``rows`` only."""
        return Shapes._make(column[rows] for column in self)


def shapes(descriptors: Sequence[object], rows: int) -> Shapes:
    """The :class:`Shapes` of ``descriptors`` (rows without a descriptor, or without a complete GEMM view, are not
    ``tiled``)."""
    # rows share descriptor objects (one per distinct node, the cost stage's): the facts of each object once, by
    # identity (hashing a descriptor's fields would cost more than _facts), gathered per row
    if not descriptors:
        descriptors = [None] * rows
    distinct = {id(d): d for d in descriptors}
    number = {key: i for i, key in enumerate(distinct)}
    table = np.asarray([_facts(d) for d in distinct.values()], dtype=np.float64).reshape(len(distinct), 8)
    columns = table[np.fromiter(map(number.__getitem__, map(id, descriptors)), np.intp, rows)]
    return Shapes(columns[:, 0] > 0, *(columns[:, i] for i in range(1, 8)))


def _facts(d: object) -> tuple[float, ...]:
    if not isinstance(d, KernelDescriptor) or d.gemm is None or not d.gemm.complete:
        return (0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0)
    gemm = d.gemm
    conv = d.conv
    channels, window, groups = (0.0, 1.0, 1.0) if conv is None else (conv.in_per_group, conv.window, conv.groups)
    tiled = 1.0 if d.op_class in _TILED else 0.0
    return (tiled, gemm.groups, gemm.m, gemm.n, gemm.k, channels, window, groups)  # type: ignore[return-value]


def aligned(values: Floats, multiple: Floats | float) -> Floats:
    """``⌈v / a⌉ · a``: ``v`` padded up to a multiple of ``a``."""
    return np.ceil(values / multiple) * multiple


def vector_bytes(elements: Floats, item: Floats) -> Floats:
    """The widest load (2, 4, 8 or 16 bytes, else 1) that a row of ``elements`` items of ``item`` bytes keeps
    aligned: the largest power of two up to :data:`FRAGMENT_BYTES` dividing ``elements · item``."""
    row = elements * item
    width = np.ones_like(row)
    for candidate in (2.0, 4.0, 8.0, float(FRAGMENT_BYTES)):
        width = np.where(np.mod(row, candidate) == 0, candidate, width)
    return width


def tile_time(
    s: Shapes,
    per_sm_flops: Floats,
    item: Floats,
    fragment: Floats,
    gpu: GpuSpec,
    l2_per_sm: float,
    max_split: float = MAX_SPLIT_K,
) -> Floats:
    """The time of a tiled GEMM: the fastest CTA tile of :data:`TILES`, over the waves its tiles take.

    For a GEMM of batch count ``g``, ``M × N`` outputs and reduction ``K`` on ``S`` SMs, with fragment ``a``
    elements (16 B ÷ item size on tensor cores, 1 on CUDA cores) and K-step ``k_t = 64 B ÷ item size``:

    * ``K' = ⌈C/a⌉·a · window`` for a convolution of ``C`` input channels per group (the fragment pads the
      channels, not the window), ``K' = ⌈K/a⌉·a`` for a product;
    * for each tile ``M_t × N_t`` of :data:`TILES`, shrunk to the problem (:data:`SMALL_TILE_MULTIPLE`:
      ``M_t ← min(M_t, ⌈M/8⌉·8)``, likewise ``N_t``): ``T = max(1, g · ⌈M/M_t⌉ · ⌈N/N_t⌉)`` output tiles (tile
      quantization: edge tiles are padded), ``s = clamp(⌊S/T⌋, 1, max(1, ⌊steps/4⌋))`` split-K slices when the
      tiles do not fill the SMs, at most :data:`MAX_SPLIT_K` (``s ← min(s, s_max)``), K-steps per slice
      ``⌈⌈K'/k_t⌉ / s⌉``, waves ``⌈T·s / S⌉`` (wave quantization);
    * one K-step of one tile on one SM: ``max(2·M_t·N_t·k_t / P_sm, (M_t + N_t)·k_t·b·u / W_L2,sm)`` with
      ``P_sm = e·P / S`` and ``W_L2,sm`` the L2 bandwidth per SM (the tile's operands come from L2), ``u = 16 B ÷
      v`` for a product whose rows of K (operand A) or N (operand B) elements do not keep 16-byte loads aligned
      (:func:`vector_bytes`: ``v`` the widest aligned load of both; a convolution's channels are padded, ``u =
      1``): the library falls back to kernels loading ``v`` bytes at a time, ``u`` times the load instructions
      for the same bytes (CUTLASS's ``kAlignment`` template parameter; cuBLAS requires leading dimensions that are
      multiples of 16 B for its tensor-core kernels: NVIDIA DL performance guide, Tensor Core requirements).
      Measured on the H200: 1000×1001×1024 fp16 30.3 µs, 1000×1024×1024 5.9 µs;
    * ``t = min over tiles of waves · steps per slice · step time``.
    """
    k_tile = K_TILE_BYTES / item
    conv = s.channels > 0
    k_eff = np.where(conv, aligned(np.maximum(s.channels, 1.0), fragment) * s.window, aligned(s.k, fragment))
    steps = np.ceil(k_eff / k_tile)
    sms = float(gpu.sm_count)
    best = np.full(len(s.m), np.inf)
    aligned_bytes = np.minimum(vector_bytes(s.k, item), vector_bytes(s.n, item))
    unaligned = np.where(conv, 1.0, FRAGMENT_BYTES / aligned_bytes)
    # at least one multiple: an empty product (a zero dim) still launches one tile, never a tile of 0 rows
    rows = np.maximum(aligned(s.m, SMALL_TILE_MULTIPLE), SMALL_TILE_MULTIPLE)
    cols = np.maximum(aligned(s.n, SMALL_TILE_MULTIPLE), SMALL_TILE_MULTIPLE)
    for m_full, n_full in TILES:
        m_tile, n_tile = np.minimum(float(m_full), rows), np.minimum(float(n_full), cols)
        tiles = np.maximum(1.0, s.g * np.ceil(s.m / m_tile) * np.ceil(s.n / n_tile))
        split = np.clip(
            np.floor(sms / tiles), 1.0, np.minimum(max_split, np.maximum(1.0, np.floor(steps / MIN_SPLIT_STEPS)))
        )
        waves = np.ceil(tiles * split / sms)
        step = np.maximum(
            2.0 * m_tile * n_tile * k_tile / per_sm_flops, (m_tile + n_tile) * k_tile * item * unaligned / l2_per_sm
        )
        best = np.minimum(best, waves * np.ceil(steps / split) * step)
    return best


def cuda_core_time(flops: Floats, efficiency: Floats, platform: Platform) -> Floats:
    """``F / (e · P_fp32)``: FLOPs at the fp32 CUDA-core rate (the platform's fp32 datasheet peak; fp16 math on
    CUDA cores is counted at the same rate, which is conservative where half2 doubles it)."""
    cores = platform.peak_flops.get("fp32") or max(platform.peak_flops.values())
    return flops / (efficiency * cores)


def stream_time(moved: Floats, cold: Floats, dram: Floats, gpu: GpuSpec, l2_bandwidth: float) -> Floats:
    """Seconds to move a row's bytes: its cold bytes ``C = clamp(cold, 0, B)`` (operands known to come from
    DRAM) at the DRAM roof ``W``, its hot bytes ``H = B − C`` at ``W_L2`` when they fit in :data:`L2_FIT_SHARE` of
    the L2 (``H ≤ ½ · L2``: the producer just wrote them), else at ``W``: ``C / W + H / W'``."""
    cold = np.minimum(np.maximum(cold, 0.0), moved)
    hot = moved - cold
    hot_bandwidth = np.where(hot <= L2_FIT_SHARE * gpu.l2_size, np.maximum(l2_bandwidth, dram), dram)
    return cold / dram + hot / hot_bandwidth


@frozen_dataclass
class GpuTime:
    """The ``gpu`` time model (module docstring); the default for ``kind = "gpu"`` platforms.

    Launches are the runtime's (``Roofs.launch_s`` per launch, the run's one-off cost added by placement). The
    fixed kernel times are counted in cycles at the platform's clock (:meth:`latencies`); ``transfer_latency_s``
    and ``library_latency_s``, when given, replace them with fixed seconds on every GPU (the H200 kernel fit
    sweeps them); ``library_cycles``, ``(generation, cycles)`` pairs (hashable, as the model is), when given,
    replaces :data:`LIBRARY_CYCLES_BY_GENERATION` (the published rows' fit sweeps it); ``max_split_k`` and
    ``grouped_conv_share``, when given, replace :data:`MAX_SPLIT_K` and :data:`GROUPED_CONV_SHARE` (the H200
    kernel fit sweeps them).
    """

    name: str = "gpu"
    transfer_latency_s: float | None = None
    library_latency_s: float | None = None
    library_cycles: tuple[tuple[str, float], ...] | None = None
    max_split_k: float | None = None
    grouped_conv_share: float | None = None

    def latencies(self, gpu: GpuSpec) -> tuple[float, float]:
        """The fixed times ``(t_transfer, t_library)`` of a streaming and a library kernel on ``gpu``:
        ``t = cycles / f`` with ``f`` its boost clock, ``cycles`` :data:`TRANSFER_LATENCY_CYCLES` and the
        generation's entry of :data:`LIBRARY_CYCLES_BY_GENERATION` (else :data:`LIBRARY_LATENCY_CYCLES`); a time
        given in seconds is taken as given."""
        by_generation = LIBRARY_CYCLES_BY_GENERATION if self.library_cycles is None else dict(self.library_cycles)
        cycles = by_generation.get(gpu.tensor_cores, LIBRARY_LATENCY_CYCLES)
        transfer = (
            TRANSFER_LATENCY_CYCLES / gpu.clock_hz if self.transfer_latency_s is None else self.transfer_latency_s
        )
        library = cycles / gpu.clock_hz if self.library_latency_s is None else self.library_latency_s
        return transfer, library

    def constants(self) -> dict[str, str]:
        """Each constant this model assumed, as ``"value: source"``."""
        out = dict(CONSTANT_SOURCES)
        for generation, cycles in sorted(LIBRARY_CYCLES_BY_GENERATION.items()):
            out[f"library_latency_cycles_{generation}"] = f"{cycles:.0f}: {LIBRARY_CYCLES_SOURCE}"
        if self.transfer_latency_s is not None:
            out["transfer_latency_s"] = f"{self.transfer_latency_s:g}: given by the caller"
        if self.library_latency_s is not None:
            out["library_latency_s"] = f"{self.library_latency_s:g}: given by the caller"
        if self.max_split_k is not None:
            out["max_split_k"] = f"{self.max_split_k:g}: given by the caller"
        if self.grouped_conv_share is not None:
            out["grouped_conv_share"] = f"{self.grouped_conv_share:g}: given by the caller"
        if self.library_cycles is not None:
            out["library_cycles"] = f"{dict(self.library_cycles)}: given by the caller"
        return out

    def times(self, work: Work, roofs: Roofs, platform: Platform) -> Times:
        """Times per row (module docstring), with ``e`` the op-class efficiency and ``P``, ``W`` the roofs:

        * ``t_lat``: the library time for the classes of :data:`LIBRARY_CLASSES`, else the transfer time, both
          from :meth:`latencies` (cycles ÷ clock);
        * tiled rows: ``t_compute = max(t_tiles, F / (e·u·c·P)) + t_lat`` (:func:`tile_time` at ``P_sm = e·u·c·P /
          S``), ``c`` :data:`CUDA_CORE_GEMM_SHARE` for a tiled row off the tensor cores on a datasheet platform,
          else 1; CUDA-core rows:
          ``t_compute = F / (e·P_fp32) + t_lat`` (:func:`cuda_core_time`); other rows ``F / (e·u·P) + t_lat``;
          a grouped convolution of fewer than :data:`NARROW_GROUP` output channels per group has its arithmetic
          term (tiled or CUDA-core) divided by ``r``, :data:`GROUPED_CONV_SHARE`: ``t_compute = t_arith / r +
          t_lat``;
        * ``t_memory = t_stream / e + t_lat`` with ``t_stream`` from :func:`stream_time`;
        * a row with a second pass of ``B_p`` bytes (:attr:`~onnxroof.roofline.place.Work.pass_bytes`: the
          runtime adds a convolution's bias with its own kernel) streams ``B − B_p`` in the kernel and runs the
          pass after it, an elementwise kernel: ``t_pass = t_stream(B_p) / e_elementwise + t_transfer`` (its bytes
          hot in L2 when they fit: the kernel just wrote them) is added to both ``t_compute`` and ``t_memory``, so
          ``t = max(t_compute, t_memory) + t_pass + t_overhead`` (its launch is one of the row's launches);
        * ``t_overhead = launch_s × launches`` (``launch_s`` the runtime's, :attr:`Roofs.launch_s`);
          ``t = max(t_compute, t_memory) + t_overhead``;
        * bound ``compute`` when ``t_compute ≥ t_memory`` and ``F > 0``, else ``memory``.
        """
        gpu = platform.gpu
        if gpu is None:
            return ROOFLINE.times(work, roofs, platform)
        rows = len(work)
        s = shapes(work.descriptors, rows)
        on_tensor_cores = TENSOR_CORE_PRECISIONS[gpu.tensor_cores]
        item = by_key(work.precision, lookup=lambda p: ITEM_BYTES.get(p, 4.0))
        tensor = by_key(work.precision, lookup=lambda p: float(p in on_tensor_cores)) > 0
        fragment = np.where(tensor, np.maximum(1.0, FRAGMENT_BYTES / item), 1.0)
        few_channels = (s.groups > 1) & (s.channels < fragment)
        tiled = s.tiled & ~few_channels & (work.op_class != "depthwise")
        l2_per_clock = gpu.l2_bytes_per_clock or L2_BYTES_PER_CLOCK_PER_SM * gpu.sm_count
        l2_bandwidth = l2_per_clock * gpu.clock_hz
        e = roofs.efficiency
        roofline_compute = work.flops / (e * work.utilization * roofs.peak)
        share = 1.0 if platform.measured else np.where(tensor, 1.0, CUDA_CORE_GEMM_SHARE)
        tiled_peak = e * work.utilization * share * roofs.peak
        split = MAX_SPLIT_K if self.max_split_k is None else self.max_split_k
        tiles = np.zeros(rows)  # read on the tiled rows only: the tile model runs on those alone
        if tiled.any():
            at = np.flatnonzero(tiled)
            per_sm = tiled_peak[at] / gpu.sm_count
            tiles[at] = tile_time(s.take(at), per_sm, item[at], fragment[at], gpu, l2_bandwidth / gpu.sm_count, split)
        cores = cuda_core_time(work.flops, e, platform)
        classes = work.op_class.astype(str)
        on_cores = few_channels | np.isin(classes, list(CUDA_CORE_CLASSES))
        untiled = np.where(on_cores, cores, roofline_compute)
        transfer_s, library_s = self.latencies(gpu)
        latency = np.where(np.isin(classes, list(LIBRARY_CLASSES)), library_s, transfer_s)
        arithmetic = np.where(tiled, np.maximum(tiles, work.flops / tiled_peak), untiled)
        grouped_share = GROUPED_CONV_SHARE if self.grouped_conv_share is None else self.grouped_conv_share
        grouped = (s.groups > 1) & (classes == "conv") & (s.n < NARROW_GROUP)
        compute = np.where(grouped, arithmetic / grouped_share, arithmetic) + latency
        passes = work.pass_bytes
        kernel_bytes = work.bytes if passes is None else work.bytes - passes
        memory = stream_time(kernel_bytes, work.cold_bytes, roofs.bandwidth, gpu, l2_bandwidth) / e + latency
        if passes is not None:  # a second, elementwise pass (a bias added by its own kernel) runs after the kernel
            second = stream_time(passes, np.zeros(rows), roofs.bandwidth, gpu, l2_bandwidth)
            second = np.where(passes > 0, second / platform.class_efficiency("elementwise") + transfer_s, 0.0)
            compute, memory = compute + second, memory + second
        overhead = roofs.launch_s * work.launches
        bound = choose((compute >= memory) & (work.flops > 0), Bound.COMPUTE, Bound.MEMORY)
        return Times(compute, memory, overhead, np.maximum(compute, memory) + overhead, bound)


GPU = GpuTime()


def time_model_for(kind: str | None, platform: Platform) -> GpuTime | RooflineTime:
    """The time model ``kind`` names (``roofline`` or ``gpu``, :class:`~onnxroof.core.states.TimeModelKind`);
    None: ``gpu`` on a ``kind = "gpu"`` platform with a ``[gpu]`` table, else ``roofline``."""
    if kind is None:
        return GPU if platform.kind == "gpu" and platform.gpu is not None else ROOFLINE
    return GPU if TimeModelKind(kind) == TimeModelKind.GPU else ROOFLINE


def describe_time_model(
    model: object, platform: Platform, *, runtime: str, launch_mode: str, per_kernel_s: float, per_run_s: float
) -> dict[str, str]:
    """What a report says of the time model that ran: its name, the runtime and its launch mode (``per-kernel``,
    or ``cuda-graph``: one replay per run), the launch figures (seconds, as ``%g``) and the model's constants
    with their sources (the roofline's: that it is the lower bound)."""
    info = {
        "name": str(getattr(model, "name", "roofline")),
        "launch_mode": launch_mode,
        "runtime": runtime,
        "per_kernel_launch_s": f"{per_kernel_s:g}",
        "per_run_s": f"{per_run_s:g}",
    }
    if isinstance(model, GpuTime) and platform.gpu is not None:
        return info | model.constants()
    if isinstance(model, GpuTime):
        info["note"] = f"platform {platform.name!r} has no [gpu] table: placed by the roofline"
    info["bound"] = "roofline: max(F / (e·P), B / (e·W)) + launches, the lower bound"
    return info
