"""Runtime profiles: the bundled files load, every figure has a source, bad files are one line naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from onnxroof.core.errors import RuntimeProfileError
from onnxroof.core.profiles import FusionProfile
from onnxroof.platform.lookup import bundled_platforms, load_platform
from onnxroof.runtime import (
    ConvBias,
    KvWrite,
    LaunchMode,
    RuntimeKernelClass,
    bundled_runtimes,
    default_runtime_name,
    load_runtime,
    runtime_for,
    runtime_names,
)

REQUIRED = (
    "ort-cpu",
    "ort-cuda",
    "ort-genai-cuda",
    "tensorrt",
    "tensorrt-cudagraph",
    "tensorrt-llm",
    "vllm",
    "llama.cpp-cuda",
    "llama.cpp-metal",
    "mlc",
    "torch-cuda",
    "none",
)

GOOD = """
schema = 1
name = "mine"
title = "My runtime"
targets = ["gpu"]
fusion_profile = "tensorrt"
[launch]
mode = "cuda-graph"
per_kernel_us = { value = 1.5, source = "measured" }
per_run_us = { value = 12, source = "measured" }
per_request_us = { value = 800, source = "fitted" }
[kv_cache]
write = { value = "in-place", source = "paged" }
[kernels]
conv_bias = { value = "separate", source = "the framework's conv" }
[efficiency]
gemv_w4 = { value = 0.7, source = "microbenchmark" }
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mine.toml"
    path.write_text(text)
    return path


def test_the_bundled_runtimes_are_the_required_ones_and_more() -> None:
    assert set(REQUIRED) <= set(runtime_names())
    assert len(bundled_runtimes()) >= 12


@pytest.mark.parametrize("runtime", bundled_runtimes(), ids=lambda r: r.name)
def test_every_bundled_figure_has_a_source(runtime: object) -> None:
    from onnxroof.runtime import Runtime

    assert isinstance(runtime, Runtime)
    expected = {f"efficiency.{cls}" for cls in runtime.efficiency}
    if runtime.per_kernel_s is not None:
        expected.add("launch.per_kernel_us")
    if runtime.per_run_s is not None:
        expected.add("launch.per_run_us")
    if runtime.per_request_s:
        expected.add("launch.per_request_us")
    assert expected <= set(runtime.sources)
    assert all(text.strip() for text in runtime.sources.values())
    assert runtime.path == f"bundled:{runtime.name}"


def test_launch_modes_of_the_bundled_runtimes() -> None:
    """Per-kernel launches (ORT CUDA, TensorRT without graphs) vs replayed graphs (TensorRT with graphs, LLMs)."""
    mode = {r.name: r.launch_mode for r in bundled_runtimes()}
    assert mode["ort-cuda"] == mode["tensorrt"] == mode["torch-cuda"] == LaunchMode.PER_KERNEL
    assert mode["tensorrt-cudagraph"] == mode["tensorrt-llm"] == mode["vllm"] == LaunchMode.CUDA_GRAPH
    kv = {r.name: r.kv_write for r in bundled_runtimes()}
    assert kv["ort-genai-cuda"] == kv["tensorrt-llm"] == kv["vllm"] == KvWrite.IN_PLACE
    assert kv["ort-cpu"] == kv["tensorrt"] == kv["none"] == KvWrite.COPY


def test_a_user_file_in_si_units(tmp_path: Path) -> None:
    runtime = load_runtime(write(tmp_path, GOOD))
    assert runtime.name == "mine" and runtime.fusion_profile == FusionProfile.TENSORRT
    assert runtime.per_kernel_s == pytest.approx(1.5e-6) and runtime.per_run_s == pytest.approx(12e-6)
    assert runtime.per_request_s == pytest.approx(800e-6) and runtime.sources["launch.per_request_us"] == "fitted"
    assert runtime.kv_write == KvWrite.IN_PLACE
    assert runtime.conv_bias == ConvBias.SEPARATE and runtime.sources["kernels.conv_bias"] == "the framework's conv"
    assert load_runtime("tensorrt").conv_bias == ConvBias.FUSED  # absent: the convolution adds its bias
    assert load_runtime("torch-cuda").conv_bias == ConvBias.SEPARATE  # PyTorch's cuDNN path: a second add
    assert runtime.factor(RuntimeKernelClass.GEMV_W4) == 0.7 and runtime.factor(RuntimeKernelClass.GEMM) == 1.0
    assert runtime.sources["efficiency.gemv_w4"] == "microbenchmark"


def test_launch_defaults_follow_the_mode() -> None:
    """per-kernel: the host's launch per kernel, nothing per run; cuda-graph: one host launch per run, 0 per node."""
    host = 7e-6
    eager, graph = load_runtime("none"), load_runtime("tensorrt-llm")
    assert (eager.kernel_launch_s(host), eager.run_launch_s(host)) == (host, 0.0)
    assert graph.kernel_launch_s(host) == pytest.approx(0.5e-6) and graph.run_launch_s(host) == host
    assert eager.per_request_s == graph.per_request_s == 0.0  # absent: no per-request cost


@pytest.mark.parametrize(
    ("edit", "where"),
    [
        (("[launch]", "colour = 1\n[launch]"), "colour: unknown key"),
        (('source = "paged"', 'sauce = "paged"'), "kv_cache.write.sauce: unknown key"),
        (('{ value = 0.7, source = "microbenchmark" }', "0.7"), "efficiency.gemv_w4: must be a table"),
        (('source = "microbenchmark"', 'source = " "'), "efficiency.gemv_w4.source: must be a non-empty string"),
        (("gemv_w4 =", "gemv_w3 ="), "efficiency.gemv_w3: unknown key"),
        (("value = 0.7", "value = 2.5"), "efficiency.gemv_w4: value must lie in (0, 2]"),
        (('"cuda-graph"', '"graph"'), "launch.mode: must be one of per-kernel, cuda-graph"),
        (("value = 1.5", "value = -1"), "launch.per_kernel_us: value must be a number ≥ 0"),
        (("value = 800", 'value = "1 ms"'), "launch.per_request_us: value must be a number ≥ 0"),
        (('"in-place"', '"inplace"'), "kv_cache.write.value: must be one of in-place, copy"),
        (('"separate"', '"apart"'), "kernels.conv_bias.value: must be one of fused, separate"),
        (("conv_bias =", "bias ="), "kernels.bias: unknown key"),
        (('["gpu"]', '["tpu"]'), "targets[0]: must be one of gpu, cpu, accelerator"),
        (('"tensorrt"', '"tvm"'), "fusion_profile: must be one of"),
        (("schema = 1", "schema = 2"), "schema: must be 1"),
    ],
)
def test_a_bad_file_is_one_line_naming_the_field(tmp_path: Path, edit: tuple[str, str], where: str) -> None:
    path = write(tmp_path, GOOD.replace(*edit))
    with pytest.raises(RuntimeProfileError) as error:
        load_runtime(path)
    message = str(error.value)
    assert message.startswith(f"{path}: ") and where in message and "\n" not in message


def test_a_missing_source_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace(', source = "measured" }', " }", 1))
    with pytest.raises(RuntimeProfileError, match=r"launch\.per_kernel_us\.source: missing required key"):
        load_runtime(path)


def test_an_unknown_name_lists_the_bundled_ones() -> None:
    with pytest.raises(RuntimeProfileError, match=r"unknown runtime 'tensorflow'; bundled runtimes: .*tensorrt"):
        load_runtime("tensorflow")


def test_a_runtime_for_another_kind_of_platform_is_refused() -> None:
    with pytest.raises(RuntimeProfileError, match=r"runtime 'ort-cpu' runs on cpu platforms, not on 'a100' \(gpu\)"):
        runtime_for(load_platform("a100"), "ort-cpu")


def test_every_bundled_platform_has_a_default_runtime_that_runs_on_it() -> None:
    for platform in bundled_platforms():
        runtime = runtime_for(platform)
        assert runtime.runs_on(platform.kind)
        assert runtime.name == default_runtime_name(platform)
        assert runtime.fusion_profile == platform.fusion_profile  # today's fusion and launches, unchanged


def test_fusion_names_a_runtime_when_none_is_given() -> None:
    """``--fusion tensorrt-llm`` alone keeps its meaning: TensorRT's fusions replayed as a CUDA graph."""
    a100 = load_platform("a100")
    assert runtime_for(a100, fusion="tensorrt-llm").launch_mode == LaunchMode.CUDA_GRAPH
    assert runtime_for(a100, fusion="ort-cpu").name == "tensorrt"  # ort-cpu runs on CPUs: the default stays
    assert runtime_for(a100, "vllm", fusion="tensorrt-llm").name == "vllm"  # an explicit runtime wins


def test_a_per_request_cost_is_listed_in_the_table_and_the_json() -> None:
    """``per_request_us`` appears in the runtime's JSON (µs, 0 when absent) and beside its per-run figure."""
    import io

    from rich.console import Console

    from onnxroof.report.runtimes import render_runtimes_table, runtime_dict

    profile = load_runtime(Path(__file__).resolve().parents[1] / "benchmarks" / "runtimes" / "tensorrt-llm-v0.5.toml")
    assert profile.per_request_s > 0
    assert runtime_dict(profile)["per_request_us"] == pytest.approx(profile.per_request_s * 1e6)
    assert runtime_dict(load_runtime("tensorrt-llm"))["per_request_us"] == 0.0
    out = io.StringIO()
    render_runtimes_table((profile, load_runtime("tensorrt-llm")), Console(file=out, width=300))
    rows = out.getvalue().splitlines()
    assert f"{profile.per_request_s * 1e6:g} µs per request" in next(r for r in rows if "tensorrt-llm-v0.5" in r)
    assert "per request" not in next(r for r in rows if r.split() and r.split()[0] == "tensorrt-llm")
