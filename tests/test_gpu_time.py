"""The ``gpu`` time model (onnxroof/roofline/gpu.py) against closed-form rows, its choice as the default on GPU
platforms, the ``[gpu]`` platform table, and what reports say of the model."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import onnxroof
from onnxroof.cli.commands import app
from onnxroof.core.descriptor import ConvGeometry, KernelDescriptor, accumulation_dtype
from onnxroof.core.errors import PlatformError
from onnxroof.core.gemm import GemmShape
from onnxroof.core.states import Bound
from onnxroof.platform.lookup import bundled_platforms, load_platform
from onnxroof.roofline import gpu as gpu_model
from onnxroof.roofline.gpu import GPU, GpuTime, time_model_for
from onnxroof.roofline.place import ROOFLINE, Work, floats, place
from onnxroof.runtime import load_runtime

SAMPLES = Path(__file__).parent.parent / "samples"

# 4 SMs at 1 GHz, fp16 8 TFLOP/s (2 per SM), fp32 1 TFLOP/s, DRAM 100 GB/s, L2 1 MB at 1000 B/clk = 1 TB/s
GPU_TOML = """schema = 1
name = "toygpu"
title = "toy GPU"
kind = "gpu"
fusion_profile = "none"
[peak_tflops]
fp32 = { value = 1, source = "test" }
fp16 = { value = 8, source = "test" }
[memory]
dram_bandwidth_gbps = { value = 100, source = "test" }
[runtime]
launch_overhead_us = { value = 5, source = "test" }
[gpu]
sm_count = { value = 4, source = "test" }
boost_clock_ghz = { value = 1, source = "test" }
l2_mb = { value = 1, source = "test" }
tensor_cores = { value = "ampere", source = "test" }
l2_bytes_per_clock = { value = %s, source = "test" }
"""

NO_LATENCY = GpuTime(transfer_latency_s=0.0, library_latency_s=0.0)


def toy(tmp_path: Path, l2_bytes_per_clock: float = 1e9, extra: str = "") -> onnxroof.Platform:
    path = tmp_path / "toygpu.toml"
    path.write_text(GPU_TOML % l2_bytes_per_clock + extra, encoding="utf-8")
    return load_platform(path)


def gemm_row(m: int, n: int, k: int, groups: int = 1, *, op_class: str = "matmul", conv=None) -> KernelDescriptor:
    return KernelDescriptor(op_class, GemmShape(groups, m, n, k), "float16", conv=conv)


def work(rows, precision="fp16", bytes_=0.0, launches=0.0) -> Work:
    """Rows of (descriptor, flops); each with ``bytes_`` bytes and ``launches`` launches."""
    count = len(rows)
    return Work(
        flops=floats([flops for _, flops in rows]),
        bytes=np.full(count, float(bytes_)),
        precision=np.asarray([precision] * count, dtype=object),
        op_class=np.asarray([d.op_class if d else "elementwise" for d, _ in rows], dtype=object),
        runs=np.ones(count, dtype=bool),
        launches=np.full(count, float(launches)),
        utilization=np.ones(count),
        cold_bytes=np.zeros(count),
        descriptors=tuple(d for d, _ in rows),
    )


STEP_64 = 2 * 64 * 64 * 32 / 2e12  # one K-step (32 fp16) of a 64×64 tile on one SM of 2 TFLOP/s


def test_a_full_wave_of_tiles_runs_at_the_roof(tmp_path: Path) -> None:
    # 256×256×64: every tile size fills whole waves without padding, so the time is the roofline's F / P
    platform = toy(tmp_path)
    flops = 2 * 256 * 256 * 64
    figures = place(work([(gemm_row(256, 256, 64), flops)]), platform, NO_LATENCY)
    assert figures.t_compute_s[0] == pytest.approx(flops / 8e12, rel=1e-12)
    assert figures.bound[0] == Bound.COMPUTE


def test_edge_tiles_are_padded(tmp_path: Path) -> None:
    # 100×100×64: the best tile is 64×64 (2×2 = 4 tiles = one wave on 4 SMs), 2 K-steps each: 2 · STEP_64,
    # against the roofline's 2·100·100·64 / 8e12 = 0.16 µs
    platform = toy(tmp_path)
    figures = place(work([(gemm_row(100, 100, 64), 2 * 100 * 100 * 64)]), platform, NO_LATENCY)
    assert figures.t_compute_s[0] == pytest.approx(2 * STEP_64, rel=1e-12)
    assert figures.t_compute_s[0] > 2 * 100 * 100 * 64 / 8e12 * 1.6


def test_tiles_run_in_waves_over_the_sms(tmp_path: Path) -> None:
    # 5 batched 64×64×32 products: 5 tiles of one K-step on 4 SMs take 2 waves (split-K needs ≥ 4 steps)
    platform = toy(tmp_path)
    figures = place(work([(gemm_row(64, 64, 32, groups=5), 5 * 2 * 64 * 64 * 32)]), platform, NO_LATENCY)
    assert figures.t_compute_s[0] == pytest.approx(2 * STEP_64, rel=1e-12)


def test_split_k_fills_the_sms_when_the_tiles_do_not(tmp_path: Path) -> None:
    # 64×64×1024: one tile of 32 K-steps; unbounded, split in 4 slices of 8 steps on the 4 SMs: 8 · STEP_64 = the
    # roof; at most MAX_SPLIT_K = 2 slices (the default): 16 steps
    platform = toy(tmp_path)
    flops = 2 * 64 * 64 * 1024
    unbounded = GpuTime(transfer_latency_s=0.0, library_latency_s=0.0, max_split_k=float("inf"))
    figures = place(work([(gemm_row(64, 64, 1024), flops)]), platform, unbounded)
    assert figures.t_compute_s[0] == pytest.approx(8 * STEP_64, rel=1e-12)
    assert figures.t_compute_s[0] == pytest.approx(flops / 8e12, rel=1e-12)
    assert gpu_model.MAX_SPLIT_K == 2
    bounded = place(work([(gemm_row(64, 64, 1024), flops)]), platform, NO_LATENCY)
    assert bounded.t_compute_s[0] == pytest.approx(16 * STEP_64, rel=1e-12)


def test_channels_pad_to_the_tensor_core_fragment(tmp_path: Path) -> None:
    # a 3×3 convolution of 3 input channels pads them to 8 (16 B of fp16): K' = 8 · 9 = 72, 3 K-steps of 32;
    # in fp32 (CUDA cores, no fragment) K' = 27: 2 K-steps of 16
    platform = toy(tmp_path)
    geometry = ConvGeometry(1, 1, 3, 64, (3, 3), (1, 1), (1, 1))
    row = gemm_row(64, 64, 27, op_class="conv", conv=geometry)
    padded = place(work([(row, 2 * 64 * 64 * 27)]), platform, NO_LATENCY)
    assert padded.t_compute_s[0] == pytest.approx(3 * STEP_64, rel=1e-12)
    fp32 = place(work([(row, 2 * 64 * 64 * 27)], precision="fp32"), platform, NO_LATENCY)
    # CUDA cores at the SGEMM share of the fp32 peak on a datasheet platform (51.29 of 67 TFLOP/s measured)
    share = gpu_model.CUDA_CORE_GEMM_SHARE
    assert share == pytest.approx(0.7655, abs=1e-4)
    assert fp32.t_compute_s[0] == pytest.approx(2 * (2 * 64 * 64 * 16) / (share * 1e12 / 4), rel=1e-12)


def test_grouped_convolutions_run_at_the_fitted_share_of_their_arithmetic(tmp_path: Path) -> None:
    # 4 groups of a 64×16×(8·9) product (8 input, 16 output channels per group: narrow, tiled on one fp16
    # fragment): 4 tiles of 64×16 and 3 K-steps on the 4 SMs, one wave: 3 · STEP_64 / 4 ungrouped; as a narrow
    # grouped convolution, that / GROUPED_CONV_SHARE; the same product without a convolution is not touched
    platform = toy(tmp_path)
    geometry = ConvGeometry(1, 4, 8, 16, (3, 3), (1, 1), (1, 1))
    row = gemm_row(64, 16, 72, groups=4, op_class="conv", conv=geometry)
    flops = 4 * 2 * 64 * 16 * 72
    ungrouped = 3 * STEP_64 / 4
    assert gpu_model.GROUPED_CONV_SHARE == 0.58
    grouped = place(work([(row, flops)]), platform, NO_LATENCY)
    assert grouped.t_compute_s[0] == pytest.approx(ungrouped / 0.58, rel=1e-12)
    whole = GpuTime(transfer_latency_s=0.0, library_latency_s=0.0, grouped_conv_share=1.0)
    assert place(work([(row, flops)]), platform, whole).t_compute_s[0] == pytest.approx(ungrouped, rel=1e-12)
    batched = place(work([(gemm_row(64, 16, 72, groups=4), flops)]), platform, NO_LATENCY)
    assert batched.t_compute_s[0] == pytest.approx(ungrouped, rel=1e-12)
    # two groups of 64 output channels (AlexNet-style, not narrow) are ordinary GEMMs
    wide = ConvGeometry(1, 2, 8, 64, (3, 3), (1, 1), (1, 1))
    two = gemm_row(64, 64, 72, groups=2, op_class="conv", conv=wide)
    assert gpu_model.NARROW_GROUP == 64
    plain = place(work([(gemm_row(64, 64, 72, groups=2), flops)]), platform, NO_LATENCY).t_compute_s[0]
    assert place(work([(two, flops)]), platform, NO_LATENCY).t_compute_s[0] == pytest.approx(plain, rel=1e-12)
    # the fixed kernel time is not divided: only the arithmetic is
    latency = GpuTime(transfer_latency_s=0.0, library_latency_s=1e-6)
    assert place(work([(row, flops)]), platform, latency).t_compute_s[0] == pytest.approx(
        ungrouped / 0.58 + 1e-6, rel=1e-12
    )


def test_a_second_pass_runs_after_its_kernel(tmp_path: Path) -> None:
    # L2 1 MB at 1 TB/s, DRAM 100 GB/s: a row of 4.4 MB with a 400 kB bias pass streams its 4 MB from DRAM (40 µs)
    # and then the pass from L2 (the kernel just wrote it; 0.4 µs), where 4.4 MB in one kernel take 44 µs
    platform = toy(tmp_path, l2_bytes_per_clock=1000)
    plain = work([(None, 0.0)], bytes_=4.4e6)
    two = Work(**{**plain.__dict__, "pass_bytes": floats([0.4e6])})
    assert place(plain, platform, NO_LATENCY).latency_s[0] == pytest.approx(44e-6, rel=1e-12)
    figures = place(two, platform, NO_LATENCY)
    assert figures.latency_s[0] == pytest.approx(40e-6 + 0.4e-6, rel=1e-12)
    assert figures.t_compute_s[0] == pytest.approx(0.4e-6, rel=1e-12)  # the pass follows the kernel either way
    # with the fixed kernel times: the pass pays one transfer latency of its own
    assert platform.gpu is not None
    transfer = GPU.latencies(platform.gpu)[0]
    assert place(two, platform, GPU).latency_s[0] == pytest.approx(40e-6 + 0.4e-6 + 2 * transfer, rel=1e-12)


def test_small_tiles_are_limited_by_the_l2(tmp_path: Path) -> None:
    # L2 at 64 B/clk over 4 SMs = 16 GB/s per SM: a 64×64 tile's K-step reads (64+64)·32·2 B = 8 KiB in
    # 0.512 µs, slower than its 0.131 µs of math; 96×96×64 is still best as 4 such tiles in one wave
    # (one 96×96 tile would take 2 steps of 0.768 µs): 2 steps of 0.512 µs, 3.9× the unconstrained time
    platform = toy(tmp_path, l2_bytes_per_clock=64)
    figures = place(work([(gemm_row(96, 96, 64), 2 * 96 * 96 * 64)]), platform, NO_LATENCY)
    assert figures.t_compute_s[0] == pytest.approx(2 * (64 + 64) * 32 * 2 / 16e9, rel=1e-12)
    assert figures.t_compute_s[0] > 3.9 * 2 * STEP_64  # 0.512 / 0.131 µs per step


def test_unaligned_operands_load_narrower_vectors(tmp_path: Path) -> None:
    # rows of K = 63 fp16 (126 B) keep only 2-byte loads aligned: 16 / 2 = 8 times the load work of K = 64
    # (128 B, 16-byte loads) for the same padded K' = 64: 2 L2-bound steps of 0.512 µs become 8 × as long
    assert gpu_model.vector_bytes(floats([64, 63, 100, 4, 1]), floats([2, 2, 2, 1, 1])).tolist() == [16, 2, 8, 4, 1]
    platform = toy(tmp_path, l2_bytes_per_clock=64)
    aligned, unaligned = place(
        work([(gemm_row(64, 64, 64), 2 * 64 * 64 * 64), (gemm_row(64, 64, 63), 2 * 64 * 64 * 63)]), platform, NO_LATENCY
    ).t_compute_s
    assert aligned == pytest.approx(2 * 8192 / 16e9, rel=1e-12)
    assert unaligned == pytest.approx(8 * aligned, rel=1e-12)
    # a convolution's channels are padded by the library: no penalty
    geometry = ConvGeometry(1, 1, 63, 64, (1, 1), (1, 1), (1, 1))
    conv = place(work([(gemm_row(64, 64, 63, op_class="conv", conv=geometry), 2 * 64 * 64 * 63)]), platform, NO_LATENCY)
    assert conv.t_compute_s[0] == pytest.approx(aligned, rel=1e-12)


def test_depthwise_and_pointwise_kernels_run_on_cuda_cores(tmp_path: Path) -> None:
    platform = toy(tmp_path)
    depthwise = KernelDescriptor(
        "depthwise", GemmShape(32, 64, 1, 9), "float16", conv=ConvGeometry(1, 32, 1, 1, (3, 3), (1, 1), (1, 1))
    )
    grouped = KernelDescriptor(
        "conv", GemmShape(8, 64, 4, 36), "float16", conv=ConvGeometry(1, 8, 4, 4, (3, 3), (1, 1), (1, 1))
    )
    flops = 1e6
    figures = place(work([(depthwise, flops), (grouped, flops), (None, flops)]), platform, NO_LATENCY)
    # the fp32 CUDA-core rate; the grouped convolution (4 output channels per group: narrow) at its share of it
    expected = [flops / 1e12, flops / 1e12 / gpu_model.GROUPED_CONV_SHARE, flops / 1e12]
    assert figures.t_compute_s.tolist() == pytest.approx(expected, rel=1e-12)


def test_memory_rows_stream_from_l2_when_they_fit_else_from_dram(tmp_path: Path) -> None:
    # L2 1 MB at 1000 B/clk × 1 GHz = 1 TB/s; DRAM 100 GB/s; half the L2 (500 kB) is the fit limit
    platform = toy(tmp_path, l2_bytes_per_clock=1000)
    small = place(work([(None, 0.0)], bytes_=400e3), platform, GPU)
    large = place(work([(None, 0.0)], bytes_=4e6), platform, GPU)
    assert platform.gpu is not None
    latency = GPU.latencies(platform.gpu)[0]  # cycles at the toy's clock
    assert small.t_memory_s[0] == pytest.approx(400e3 / 1e12 + latency, rel=1e-12)
    assert large.t_memory_s[0] == pytest.approx(4e6 / 100e9 + latency, rel=1e-12)
    assert large.bound[0] == Bound.MEMORY


def test_fixed_kernel_times_are_cycles_at_the_platforms_clock(tmp_path: Path) -> None:
    # the toy at 1 GHz; the same chip at 0.5 GHz pays twice the time for the same cycles
    fast = toy(tmp_path)
    slow_path = tmp_path / "slow.toml"
    slow_path.write_text(
        (GPU_TOML % 1e9)
        .replace('"toygpu"', '"slowgpu"')
        .replace("boost_clock_ghz = { value = 1,", "boost_clock_ghz = { value = 0.5,"),
        encoding="utf-8",
    )
    slow = load_platform(slow_path)
    assert fast.gpu is not None and slow.gpu is not None
    transfer, library = GPU.latencies(fast.gpu)
    assert transfer == pytest.approx(gpu_model.TRANSFER_LATENCY_CYCLES / 1e9)  # 1.5 µs × 1.83 GHz = 2745 cycles
    assert transfer == pytest.approx(1.5e-6 * 1.83e9 / 1e9)
    assert library == pytest.approx(3.9e-6 * 1.83e9 / 1e9)  # ampere: the H200 kernels' figure
    assert GPU.latencies(slow.gpu) == pytest.approx((2 * transfer, 2 * library))
    # on the H200 the cycles give back the fitted seconds
    h200 = load_platform("h200").gpu
    assert h200 is not None and GPU.latencies(h200) == pytest.approx((1.5e-6, 3.9e-6))
    # a generation with its own fitted cycles (Volta) pays them; given seconds are taken as given
    volta = load_platform("xavier").gpu
    assert volta is not None and volta.tensor_cores == "volta"
    assert GPU.latencies(volta)[1] == pytest.approx(gpu_model.LIBRARY_CYCLES_BY_GENERATION["volta"] / 1.377e9)
    assert GpuTime(library_cycles=(("ampere", 1000.0),)).latencies(fast.gpu)[1] == pytest.approx(1e-6)
    assert hash(GpuTime(library_cycles=(("ampere", 1000.0),))) is not None  # a model may key a cache
    assert NO_LATENCY.latencies(slow.gpu) == (0.0, 0.0)
    assert "library_latency_cycles_volta" in GPU.constants()


def test_launches_are_the_runtimes_else_the_platforms(tmp_path: Path) -> None:
    platform = toy(tmp_path)
    rows = work([(None, 0.0)], bytes_=1.0, launches=2)
    assert place(rows, platform, GPU).t_overhead_s[0] == pytest.approx(2 * 5e-6)  # no runtime: the platform's
    runtime = load_runtime("tensorrt-cudagraph")
    per_launch = runtime.kernel_launch_s(platform.launch_overhead_s)
    assert place(rows, platform, GPU, runtime).t_overhead_s[0] == pytest.approx(2 * per_launch)
    assert per_launch != 5e-6


def test_a_gpu_without_a_gpu_table_is_placed_by_the_roofline(tmp_path: Path) -> None:
    path = tmp_path / "bare.toml"
    path.write_text((GPU_TOML % 1e9).split("[gpu]")[0].replace("toygpu", "bare"), encoding="utf-8")
    bare = load_platform(path)
    assert time_model_for(None, bare) is ROOFLINE
    rows = work([(gemm_row(100, 100, 64), 2 * 100 * 100 * 64)])
    assert place(rows, bare, GPU).latency_s.tolist() == place(rows, bare, ROOFLINE).latency_s.tolist()


def test_a_million_rows_are_placed_in_columns(tmp_path: Path) -> None:
    platform = toy(tmp_path)
    kinds = [(gemm_row(100, 100, 64), 1.28e6), (gemm_row(256, 256, 64), 8.4e6), (None, 0.0)]
    rows = work(kinds * 333_334, bytes_=1e5, launches=1)
    start = time.perf_counter()
    figures = place(rows, platform, GPU)
    assert time.perf_counter() - start < 30  # generous: a per-row Python model takes minutes
    assert (
        figures.latency_s[:3].tolist() == place(work(kinds, bytes_=1e5, launches=1), platform, GPU).latency_s.tolist()
    )


def test_the_gpu_model_is_the_default_on_gpu_platforms_only() -> None:
    xavier, xeon = load_platform("xavier"), load_platform("xeon-8380")
    assert time_model_for(None, xavier) is GPU and time_model_for(None, xeon) is ROOFLINE
    assert time_model_for("roofline", xavier) is ROOFLINE and time_model_for("gpu", xeon) is GPU
    dims = {"batch": 1}
    assert onnxroof.analyze(SAMPLES / "tiny_cnn.onnx", "xavier", dims).time_model == "gpu"
    assert onnxroof.analyze(SAMPLES / "tiny_cnn.onnx", "xeon-8380", dims).time_model == "roofline"
    plan = onnxroof.WhatIf(time_model="roofline")
    assert onnxroof.analyze(SAMPLES / "tiny_cnn.onnx", "xavier", dims, whatif=plan).time_model == "roofline"


def test_the_roofline_is_a_lower_bound_of_the_gpu_model() -> None:
    # same launches, and every gpu row is at least its roofline time (tiles pad, latency adds)
    dims = {"batch": 1}
    gpu = onnxroof.analyze(SAMPLES / "tiny_cnn.onnx", "a100", dims)
    roof = onnxroof.analyze(SAMPLES / "tiny_cnn.onnx", "a100", dims, whatif=onnxroof.WhatIf(time_model="roofline"))
    assert gpu.totals.overhead_time_s == roof.totals.overhead_time_s
    over = gpu.kernels.figures.latency_s - roof.kernels.figures.latency_s
    # L2 can beat the DRAM roof on memory rows; compute rows never beat the roof
    compute = roof.kernels.figures.bound == Bound.COMPUTE
    assert (over[compute] >= -1e-18).all()


def test_every_bundled_gpu_has_a_sourced_gpu_table() -> None:
    nvidia = {"h100", "h200", "a100", "a100-80gb", "l4", "t4", "v100", "rtx3080", "rtx4090", "gtx1080ti"}
    nvidia |= {"xavier", "xavier-nx", "agx-orin", "orin-nx", "orin-nano", "orin-nano-super", "jetson-nano"}
    gpus = [p for p in bundled_platforms() if p.name in nvidia]
    assert {p.name for p in gpus} == nvidia
    for p in gpus:
        assert p.gpu is not None, p.name
        for key in ("sm_count", "boost_clock_ghz", "l2_mb", "tensor_cores"):
            assert p.sources[f"gpu.{key}"].strip(), (p.name, key)
        # the tensor peak never exceeds what the SMs can do at the boost clock: 2048 FP16 FMA/clk/SM (Hopper)
        if "fp16" in p.peak_flops:
            assert p.peak_flops["fp16"] <= p.gpu.sm_count * 2048 * 2 * p.gpu.clock_hz * 1.01, p.name


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ('sm_count = { value = 4.5, source = "t" }', "gpu.sm_count: value must be a whole number"),
        ('tensor_cores = { value = "kepler", source = "t" }', "gpu.tensor_cores.value: must be one of"),
        ('tensor_cores = { value = "volta" }', "gpu.tensor_cores.source: missing required key"),
        ('warp_size = { value = 32, source = "t" }', "gpu.warp_size: unknown key"),
        ('l2_mb = { value = 0, source = "t" }', "gpu.l2_mb: value must be a positive number"),
    ],
)
def test_a_bad_gpu_table_is_one_line_naming_the_key(tmp_path: Path, table: str, message: str) -> None:
    key = table.split(" ")[0]
    text = "\n".join(line for line in (GPU_TOML % 1e9).splitlines() if not line.startswith(f"{key} "))
    path = tmp_path / "toygpu.toml"
    path.write_text(text + "\n" + table + "\n", encoding="utf-8")
    with pytest.raises(PlatformError) as info:
        load_platform(path)
    assert message in str(info.value) and "toygpu.toml" in str(info.value)
    assert "\n" not in str(info.value)


def test_only_a_gpu_platform_has_a_gpu_table(tmp_path: Path) -> None:
    path = tmp_path / "toygpu.toml"
    path.write_text((GPU_TOML % 1e9).replace('kind = "gpu"', 'kind = "cpu"'), encoding="utf-8")
    with pytest.raises(PlatformError, match=r'gpu: only a kind = "gpu" platform'):
        load_platform(path)


def test_descriptors_carry_convolution_geometry_and_dtypes() -> None:
    from helpers import W, make_op

    from onnxroof.core.descriptor import conv_geometry
    from onnxroof.fusion.descriptor import describe

    conv = make_op(
        "Conv",
        [([2, 32, 28, 28], "float16"), ([64, 8, 3, 3], "float16", W), ([64], "float16", W)],
        [([2, 64, 14, 14], "float16")],
        group=4,
        strides=[2, 2],
        pads=[1, 1, 1, 1],
        dilations=[1, 1],
    )
    assert conv_geometry(conv) == ConvGeometry(2, 4, 8, 16, (3, 3), (2, 2), (1, 1))
    d = describe([conv], (), ("Conv",))
    assert d.gemm == GemmShape(4, 2 * 14 * 14, 16, 8 * 9, 8, 16)
    assert d.conv is not None and d.conv.window == 9
    assert d.input_dtypes == ("float16", "float16", "float16") and d.weight_inputs == (1, 2)
    assert d.weight_dtype == "float16" and d.accumulation == "float32"
    assert accumulation_dtype("int8") == "int32" and accumulation_dtype("float64") == "float64"


def test_reports_say_which_time_model_launch_mode_and_constants(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["report", str(SAMPLES / "tiny_cnn.onnx"), "-p", "xavier", "--dim", "batch=1"]
    table = runner.invoke(app, [*base, "-o", str(tmp_path / "r.txt")])
    assert table.exit_code == 0, table.output
    text = (tmp_path / "r.txt").read_text(encoding="utf-8")
    assert "Time model" in text and "gpu" in text and "per-kernel 10 µs" in text
    assert runner.invoke(app, [*base, "-f", "json", "-o", str(tmp_path / "r.json")]).exit_code == 0
    doc = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert doc["time_model"]["name"] == "gpu" and doc["time_model"]["launch_mode"] == "per-kernel"
    assert doc["time_model"]["constants"]["per_kernel_launch_s"] == "1e-05"
    assert "NVIDIA" in doc["time_model"]["constants"]["tiles"]
    assert doc["platform"]["gpu"]["sm_count"] == 8
    assert (
        runner.invoke(app, [*base, "--time-model", "roofline", "-f", "json", "-o", str(tmp_path / "f.json")]).exit_code
        == 0
    )
    roof = json.loads((tmp_path / "f.json").read_text(encoding="utf-8"))
    assert roof["time_model"]["name"] == "roofline" and "lower bound" in roof["time_model"]["constants"]["bound"]
    assert roof["whatif"]["time_model"] == "roofline"
    graph = runner.invoke(app, [*base, "--fusion", "tensorrt-llm", "-f", "json", "-o", str(tmp_path / "g.json")])
    assert graph.exit_code == 0, graph.output
    assert json.loads((tmp_path / "g.json").read_text(encoding="utf-8"))["time_model"]["launch_mode"] == "cuda-graph"
    assert runner.invoke(app, [*base, "-f", "html", "-o", str(tmp_path / "r.html")]).exit_code == 0
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert "Time model</dt>" in html and "transfer_latency_cycles" in html


def test_a_bad_time_model_is_refused_with_one_line() -> None:
    result = CliRunner().invoke(app, ["report", str(SAMPLES / "tiny_cnn.onnx"), "--time-model", "magic"])
    assert result.exit_code == 2 and "magic" in result.output


def test_an_empty_product_takes_one_tile_not_nan(tmp_path: Path) -> None:
    # a zero dim (a mutated or degenerate model) must give a finite time: one 8×8 tile's K-steps, no NaN
    platform = toy(tmp_path)
    figures = place(work([(gemm_row(0, 64, 64), 0.0), (gemm_row(64, 0, 0), 0.0)]), platform, NO_LATENCY)
    assert np.isfinite(figures.latency_s).all()
    assert figures.t_compute_s[0] == pytest.approx(2 * (2 * 8 * 64 * 32 / 2e12), rel=1e-12)
