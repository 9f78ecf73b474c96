"""Placement under a runtime: launch cost per kernel and per run, efficiency factors per kernel class, the KV cache
written in place, genai_config.json, and --runtime on every command that predicts time."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import onnx
import pytest
from helpers import parse_model, write_platform
from test_cli import REGISTERED, invoke

import onnxroof
from onnxroof.analysis.document import to_dict
from onnxroof.report.runtimes import runtime_lines
from onnxroof.runtime import KvWrite, RuntimeKernelClass
from onnxroof.runtime.classes import kernel_class
from onnxroof.studies.compare import compare

SAMPLES = Path(__file__).resolve().parents[1] / "samples" / "llm"
GENAI = sorted(p.name for p in SAMPLES.iterdir() if (p / "genai_config.json").is_file())

CHAIN = """
<ir_version: 8, opset_import: ["" : 17]>
chain (float[1, 4096] x) => (float[1, 4096] y) {
    a = Relu(x)
    b = Neg(a)
    y = Exp(b)
}
"""


def runtime_file(path: Path, mode: str, extra: str = "", targets: str = '["accelerator"]') -> Path:
    path.write_text(
        f'schema = 1\nname = "{path.stem}"\ntitle = "test runtime"\ntargets = {targets}\nfusion_profile = "none"\n'
        f'[launch]\nmode = "{mode}"\n{extra}',
        encoding="utf-8",
    )
    return path


@pytest.fixture
def chain(tmp_path: Path) -> Path:
    path = tmp_path / "chain.onnx"
    onnx.save(parse_model(CHAIN), path)
    return path


def test_per_kernel_launch_and_per_run_figures(chain: Path, tmp_path: Path) -> None:
    """overhead = per_kernel · kernels + per_run: 3 kernels × 3 µs + 7 µs = 16 µs, whatever the platform's 5 µs."""
    platform = write_platform(tmp_path / "p.toml", launch_us=5)
    extra = 'per_kernel_us = { value = 3, source = "t" }\nper_run_us = { value = 7, source = "t" }\n'
    runtime = runtime_file(tmp_path / "eager.toml", "per-kernel", extra)
    analysis = onnxroof.analyze(chain, platform, runtime=runtime)
    assert len(analysis.kernels) == 3
    assert [k.t_overhead_s for k in analysis.kernels] == pytest.approx([3e-6] * 3)
    assert analysis.totals.overhead_time_s == pytest.approx(16e-6)
    default = onnxroof.analyze(chain, platform)  # the platform's `none`: 5 µs per kernel, nothing per run
    assert default.totals.overhead_time_s == pytest.approx(15e-6)
    assert analysis.runtime is not None and analysis.runtime.per_run_s == pytest.approx(7e-6)


def test_a_replayed_graph_pays_one_platform_launch_when_the_file_gives_none(chain: Path, tmp_path: Path) -> None:
    platform = write_platform(tmp_path / "p.toml", launch_us=5)
    analysis = onnxroof.analyze(chain, platform, runtime=runtime_file(tmp_path / "graph.toml", "cuda-graph"))
    assert all(k.t_overhead_s == 0 for k in analysis.kernels)
    assert analysis.totals.overhead_time_s == pytest.approx(5e-6)


def test_an_efficiency_factor_scales_its_class_only(chain: Path, tmp_path: Path) -> None:
    """elementwise × 0.5: each kernel's memory time B / (e·W) doubles; a factor for another class changes nothing."""
    platform = write_platform(tmp_path / "p.toml", launch_us=5)
    half = runtime_file(
        tmp_path / "half.toml", "per-kernel", '[efficiency]\nelementwise = { value = 0.5, source = "t" }\n'
    )
    other = runtime_file(tmp_path / "gemm.toml", "per-kernel", '[efficiency]\ngemm = { value = 0.5, source = "t" }\n')
    base = onnxroof.analyze(chain, platform)
    slow = onnxroof.analyze(chain, platform, runtime=half)
    same = onnxroof.analyze(chain, platform, runtime=other)
    assert [k.t_memory_s for k in slow.kernels] == pytest.approx([2 * k.t_memory_s for k in base.kernels])
    assert [k.latency_s for k in same.kernels] == [k.latency_s for k in base.kernels]
    assert slow.runtime is not None and slow.runtime.factors == {"elementwise": (0.5, 3)}
    assert to_dict(slow)["runtime"]["factors"]["elementwise"] == {"value": 0.5, "kernels": 3, "source": "t"}
    # the report says what a factor touched, and names once those that touched nothing here
    assert "efficiency elementwise × 0.5 on 3 kernel(s)" in runtime_lines(slow.runtime)
    assert (
        same.runtime is not None
        and runtime_lines(same.runtime)[-1] == "efficiency gemm × 0.5: no kernel of their class here"
    )


def test_the_default_runtime_reproduces_the_platform_figures(chain: Path) -> None:
    implicit = onnxroof.analyze(chain, "xavier")
    explicit = onnxroof.analyze(chain, "xavier", runtime="tensorrt")
    assert implicit.runtime is not None and implicit.runtime.runtime.name == "tensorrt"
    assert implicit.totals.latency_s == explicit.totals.latency_s
    assert implicit.runtime.per_kernel_s == implicit.platform.launch_overhead_s


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("gemm", 1, 4, False, None), RuntimeKernelClass.GEMV_W4),
        (("matmul", 1, 4, False, None), RuntimeKernelClass.GEMV_W4),
        (("matmul", 1, 8, False, None), RuntimeKernelClass.GEMV_W8),
        (("matmul", 1, 16, False, None), RuntimeKernelClass.GEMV_W16),
        (("matmul", 8, 4, False, None), RuntimeKernelClass.GEMM_SMALL_M),
        (("matmul", 16, 16, False, None), RuntimeKernelClass.GEMM),
        (("matmul", None, 16, False, None), RuntimeKernelClass.GEMM),
        (("matmul", 1, None, False, None), RuntimeKernelClass.GEMM_SMALL_M),
        (("other", None, None, True, 1), RuntimeKernelClass.DECODE_ATTENTION),
        (("other", None, None, True, 128), RuntimeKernelClass.PREFILL_ATTENTION),
        (("activation", None, None, False, None), RuntimeKernelClass.ELEMENTWISE),
        (("lrn", None, None, False, None), RuntimeKernelClass.NORMALIZATION),
        (("depthwise", None, None, False, None), RuntimeKernelClass.DEPTHWISE),
        (("softmax", None, None, False, None), RuntimeKernelClass.SOFTMAX),
        (("reduction", None, None, False, None), RuntimeKernelClass.REDUCTION),
        (("pooling", None, None, False, None), RuntimeKernelClass.OTHER),
    ],
)
def test_kernel_classes(args: tuple, expected: RuntimeKernelClass) -> None:
    op_class = "matmul" if args[0] == "gemm" else args[0]
    assert kernel_class(op_class, *args[1:]) == expected


def test_kernel_classes_on_a_genai_decode_step() -> None:
    """A 4-bit GenAI decode step: its MatMulNBits are gemv_w4, its GroupQueryAttention decode attention."""
    from onnxroof.analysis.runtime_use import kernel_classes
    from onnxroof.analysis.stages import bind, cost, fuse

    dims = {"batch_size": 1, "sequence_length": 1, "past_sequence_length": 16, "total_sequence_length": 17}
    dims["kv_cache_dim"] = json.loads((SAMPLES / "genai_llama_int4" / "genai_config.json").read_text())["model"][
        "decoder"
    ]["head_size"]
    bound = bind(SAMPLES / "genai_llama_int4" / "model.onnx", dims)
    fused = fuse(cost(bound), "tensorrt")
    classes = dict(zip((k.id for k in fused.kernels), kernel_classes(fused), strict=True))
    by_type = {fused.op_types[i][0]: classes[k.id] for i, k in enumerate(fused.kernels)}
    assert by_type["MatMulNBits"] == RuntimeKernelClass.GEMV_W4
    assert by_type["GroupQueryAttention"] == RuntimeKernelClass.DECODE_ATTENTION


# ------------------------------------------------------------------------------------------ the KV cache


def _decode_bytes(path: Path, past: int, runtime: str) -> tuple[float, float, onnxroof.Analysis]:
    dims = {"batch_size": 1, "sequence_length": 1, "past_sequence_length": past, "total_sequence_length": past + 1}
    config = json.loads((SAMPLES / "genai_llama_fp32" / "genai_config.json").read_text())
    if (path.parent / "genai_config.json").is_file():
        config = json.loads((path.parent / "genai_config.json").read_text())
    elif (SAMPLES / path.parent.name / "genai_config.json").is_file():
        config = json.loads((SAMPLES / path.parent.name / "genai_config.json").read_text())
    dims["kv_cache_dim"] = config["model"]["decoder"]["head_size"]
    analysis = onnxroof.analyze(path, "a100", dims, runtime=runtime)
    return analysis.totals.fused.bytes, analysis.totals.unfused.bytes, analysis


def _cache_bytes_per_token(path: Path, head_size: int) -> float:
    """Σ over the past inputs of kv_heads · head_size · itemsize (closed form from the graph's inputs)."""
    model = onnx.load(str(path), load_external_data=False)
    total = 0.0
    for value in model.graph.input:
        if value.name.startswith("past_key_values."):
            kind = value.type.tensor_type
            itemsize = onnx.helper.tensor_dtype_to_np_dtype(kind.elem_type).itemsize
            total += kind.shape.dim[1].dim_value * head_size * itemsize
    return total


@pytest.mark.parametrize("sample", GENAI)
def test_decode_bytes_grow_by_one_or_two_times_the_cache(sample: str, tmp_path: Path) -> None:
    """A decode step's bytes grow with the past by 1.0× the cache's growth in place, 2.0× under copy.

    The shipped folder's genai_config.json (past_present_share_buffer: true) makes every runtime write in place;
    a copy of the model without it follows the runtime: ``tensorrt`` copies, ``ort-genai-cuda`` shares."""
    shipped = SAMPLES / sample / "model.onnx"
    bare = tmp_path / sample / "model.onnx"
    bare.parent.mkdir()
    for part in (SAMPLES / sample).glob("model.onnx*"):
        shutil.copy(part, bare.parent / part.name)
    (tmp_path / sample / "genai_config.json").unlink(missing_ok=True)
    config = json.loads((SAMPLES / sample / "genai_config.json").read_text())
    growth = _cache_bytes_per_token(shipped, config["model"]["decoder"]["head_size"]) * 64  # past 64 → 128
    ratios = {}
    for label, path, runtime in (
        ("shipped", shipped, "tensorrt"),
        ("copy", bare, "tensorrt"),
        ("in-place", bare, "ort-genai-cuda"),
    ):
        low, low_unfused, first = _decode_bytes(path, 64, runtime)
        high, high_unfused, _ = _decode_bytes(path, 128, runtime)
        ratios[label] = ((high - low) / growth, (high_unfused - low_unfused) / growth, first)
    for label, expected in (("shipped", 1.0), ("copy", 2.0), ("in-place", 1.0)):
        fused, unfused, _ = ratios[label]
        assert fused == pytest.approx(expected, abs=0.02) and unfused == pytest.approx(expected, abs=0.02), label
    # the two only differ by the present copy: exactly the cache's growth
    assert ratios["copy"][0] - ratios["in-place"][0] == pytest.approx(1.0, abs=1e-9)
    shipped_use = ratios["shipped"][2].runtime
    assert shipped_use.kv_write == KvWrite.IN_PLACE and shipped_use.kv_from.endswith("genai_config.json")
    assert ("search.past_present_share_buffer", "true") in shipped_use.genai
    assert ratios["copy"][2].runtime.kv_write == KvWrite.COPY and ratios["copy"][2].runtime.kv_saved_bytes == 0


def test_a_genai_config_that_does_not_share_the_buffer_makes_a_copy(tmp_path: Path) -> None:
    folder = tmp_path / "m"
    shutil.copytree(SAMPLES / "genai_llama_fp32", folder)
    config = json.loads((folder / "genai_config.json").read_text())
    config["search"]["past_present_share_buffer"] = False
    (folder / "genai_config.json").write_text(json.dumps(config))
    _, _, analysis = _decode_bytes(folder / "model.onnx", 64, "ort-genai-cuda")
    assert analysis.runtime.kv_write == KvWrite.COPY and analysis.runtime.kv_from.endswith("genai_config.json")


def test_a_broken_genai_config_is_set_aside_with_one_line_naming_the_field(tmp_path: Path) -> None:
    """ONNX Runtime runs the model whatever its genai_config.json holds: a malformed file is ignored, and said."""
    folder = tmp_path / "m"
    shutil.copytree(SAMPLES / "genai_llama_fp32", folder)
    config = json.loads((folder / "genai_config.json").read_text())
    config["search"]["past_present_share_buffer"] = "yes"
    (folder / "genai_config.json").write_text(json.dumps(config))
    dims = {"batch_size": 1, "sequence_length": 1, "past_sequence_length": 4, "total_sequence_length": 5}
    dims["kv_cache_dim"] = config["model"]["decoder"]["head_size"]
    analysis = onnxroof.analyze(folder / "model.onnx", "a100", dims)
    assert analysis.runtime is not None and analysis.runtime.genai_path == ""
    assert "genai_config.json: search.past_present_share_buffer: must be a bool" in analysis.runtime.genai_error
    assert analysis.runtime.kv_from == "runtime"  # the runtime's own policy, the file set aside
    (folder / "genai_config.json").write_text("{not json")
    bindings = [a for k, v in dims.items() for a in ("-d", f"{k}={v}")]
    result = invoke("report", folder / "model.onnx", "-p", "a100", *bindings)
    assert result.exit_code == 0 and "genai_config.json: not a readable JSON file" in result.stdout
    assert "ignored" in result.stdout


# ------------------------------------------------------------------------------------------ studies and CLI


def test_compare_places_each_platform_under_the_runtime(chain: Path) -> None:
    eager = compare(chain, ["a100", "h100"])
    replayed = compare(chain, ["a100", "h100"], runtime="tensorrt-cudagraph")
    for before, after in zip(eager.rows, replayed.rows, strict=True):
        kernels = after.kernels
        # 3 unfused elementwise ops fuse into 1 kernel under tensorrt: one launch either way, 5 µs → 0.5 + 5 µs
        assert after.latency_s - before.latency_s == pytest.approx(0.5e-6 * kernels, abs=1e-12)


def test_every_command_with_a_platform_takes_a_runtime() -> None:
    for name, command in REGISTERED.items():
        options = {p for param in command.callback.__annotations__ for p in [param]}
        if "platform" in options and name not in {"platforms"}:
            assert "runtime" in options, f"`onnxroof {name}` takes --platform but not --runtime"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('colour = "red"\n', "colour: unknown key"),
        ('[kv_cache]\nwrite = { value = "copy" }\n', "kv_cache.write.source: missing required key"),
    ],
)
def test_a_bad_runtime_file_exits_2_with_one_line(chain: Path, tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        'schema = 1\nname = "bad"\ntitle = "t"\ntargets = ["gpu"]\nfusion_profile = "none"\n'
        + (text if not text.startswith("[") else "")
        + '[launch]\nmode = "per-kernel"\n'
        + (text if text.startswith("[") else "")
    )
    result = invoke("report", chain, "-p", "a100", "--runtime", path)
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr and str(path) in result.stderr


@pytest.mark.parametrize(
    ("command", "runtime", "message"),
    [
        ("report", "tensorflow", "unknown runtime 'tensorflow'"),
        ("report", "ort-cpu", "runtime 'ort-cpu' runs on cpu platforms, not on 'a100' (gpu)"),
        ("compare", "ort-cpu", "runtime 'ort-cpu' runs on cpu platforms, not on 'a100' (gpu)"),
        ("sweep", "nope", "unknown runtime 'nope'"),
        ("check", "ort-cpu", "runtime 'ort-cpu' runs on cpu platforms, not on 'a100' (gpu)"),
        ("graph", "nope", "unknown runtime 'nope'"),
    ],
)
def test_a_bad_runtime_name_exits_2(chain: Path, command: str, runtime: str, message: str) -> None:
    extra = {"sweep": ["--dim", "batch=1,2"], "graph": ["-f", "dot"]}.get(command, [])
    result = invoke(command, chain, "-p", "a100", "--runtime", runtime, *extra)
    assert result.exit_code == 2 and message in result.stderr and result.stderr.count("\n") == 1


def test_runtimes_lists_every_bundled_runtime_with_sources() -> None:
    listing = json.loads(invoke("runtimes", "--format", "json").stdout)
    names = {r["name"] for r in listing}
    assert {"ort-cpu", "tensorrt", "tensorrt-llm", "vllm", "llama.cpp-metal", "torch-cuda", "none"} <= names
    vllm = next(r for r in listing if r["name"] == "vllm")
    assert vllm["launch_mode"] == "cuda-graph" and vllm["kv_write"] == "in-place" and vllm["sources"]
    table = invoke("runtimes", "--verbose").stdout
    assert "tensorrt-cudagraph" in table and "kv_cache.write:" in table


def test_the_report_json_says_which_runtime(chain: Path) -> None:
    doc = json.loads(invoke("report", chain, "-p", "a100", "--runtime", "tensorrt-cudagraph", "-f", "json").stdout)
    runtime = doc["runtime"]
    assert runtime["name"] == "tensorrt-cudagraph" and runtime["launch_mode"] == "cuda-graph"
    assert runtime["per_kernel_launch_s"] == pytest.approx(0.5e-6) and runtime["per_run_s"] == pytest.approx(5e-6)
    assert runtime["sources"]["launch.per_kernel_us"].startswith("[derived]")


def test_a_genai_config_that_enables_cuda_graphs_replays_the_run(tmp_path: Path) -> None:
    """enable_cuda_graph "1" in the CUDA provider's options: a per-kernel runtime runs one replay per step (one
    platform launch per run, 0 per node), and the report says the file did it."""
    folder = tmp_path / "m"
    shutil.copytree(SAMPLES / "genai_llama_fp32", folder)
    config = json.loads((folder / "genai_config.json").read_text())
    config["model"]["decoder"]["session_options"]["provider_options"] = [{"cuda": {"enable_cuda_graph": "1"}}]
    (folder / "genai_config.json").write_text(json.dumps(config))
    _, _, eager = _decode_bytes(SAMPLES / "genai_llama_fp32" / "model.onnx", 64, "ort-genai-cuda")
    _, _, replayed = _decode_bytes(folder / "model.onnx", 64, "ort-genai-cuda")
    assert replayed.runtime.runtime.captured and replayed.runtime.runtime.path.endswith("genai_config.json")
    assert all(k.t_overhead_s == 0 for k in replayed.kernels)
    launch = replayed.platform.launch_overhead_s
    assert replayed.totals.overhead_time_s == pytest.approx(launch)
    assert eager.totals.overhead_time_s == pytest.approx(launch * len(eager.kernels))


def test_a_per_request_cost_is_added_to_the_first_token_only(tmp_path: Path) -> None:
    """``launch.per_request_us = r``: ``ttft = t_prefill + r``, TPOT unchanged, per-sequence tokens/s =
    ``M / (ttft + Σ decode)`` with the new TTFT; it also survives a genai_config.json that turns on CUDA graphs."""
    from dataclasses import replace

    from onnxroof.runtime import load_runtime
    from onnxroof.studies.llm import llm

    model = SAMPLES / "genai_llama_fp32" / "model.onnx"
    base = load_runtime("ort-genai-cuda")
    r = 3e-3
    costly = replace(base, launch=replace(base.launch, per_request_s=r))
    plain = llm(model, "a100-80gb", prompt=16, generate=8, runtime=base)
    loaded = llm(model, "a100-80gb", prompt=16, generate=8, runtime=costly)
    assert plain.request_s == 0.0 and loaded.request_s == r
    assert loaded.ttft_s == pytest.approx(plain.ttft_s + r, rel=1e-12)
    assert loaded.prefill.latency_s == pytest.approx(plain.prefill.latency_s, rel=1e-12)
    assert loaded.tpot_s == pytest.approx(plain.tpot_s, rel=1e-12)
    assert loaded.tokens_per_s == pytest.approx(8 / (plain.ttft_s + r + plain.decode_total_s), rel=1e-12)
    folder = tmp_path / "m"
    shutil.copytree(SAMPLES / "genai_llama_fp32", folder)
    config = json.loads((folder / "genai_config.json").read_text())
    config["model"]["decoder"]["session_options"]["provider_options"] = [{"cuda": {"enable_cuda_graph": "1"}}]
    (folder / "genai_config.json").write_text(json.dumps(config))
    replayed = llm(folder / "model.onnx", "a100-80gb", prompt=16, generate=8, runtime=costly)
    assert replayed.analyses[0].runtime.runtime.captured and replayed.request_s == r


def test_llm_output_says_what_the_per_request_cost_added(tmp_path: Path) -> None:
    """The table's first-token figure names the per-request share; the JSON carries ``request_s`` (0 without one)."""
    model = SAMPLES / "genai_llama_fp32" / "model.onnx"
    profile = Path(__file__).resolve().parents[1] / "benchmarks" / "runtimes" / "tensorrt-llm-v0.5.toml"
    args = ("llm", model, "-p", "a100-80gb", "--prompt", "16", "--generate", "8")
    from onnxroof.core.units import seconds
    from onnxroof.runtime import load_runtime

    r = load_runtime(profile).per_request_s
    table = invoke(*args, "--runtime", profile)
    assert table.exit_code == 0, table.stderr
    assert r > 0 and f"(incl. {seconds(r)} per request)" in table.stdout
    costly = json.loads(invoke(*args, "--runtime", profile, "-f", "json").stdout)
    plain = json.loads(invoke(*args, "--runtime", "tensorrt-llm", "-f", "json").stdout)
    assert costly["request_s"] == pytest.approx(r, rel=1e-12) and plain["request_s"] == 0.0
    assert "per request" not in invoke(*args, "--runtime", "tensorrt-llm").stdout


CONVS = """
<ir_version: 8, opset_import: ["" : 17]>
convs (float[1, 8, 16, 16] x, float[16, 8, 3, 3] w, float[16] b) => (float[1, 16, 16, 16] y, float[1, 16, 16, 16] z)
{
    y = Conv <pads = [1, 1, 1, 1]> (x, w, b)
    z = Conv <pads = [1, 1, 1, 1]> (x, w)
}
"""


def test_a_separate_conv_bias_is_a_second_pass_of_the_convolution_with_a_bias(tmp_path: Path) -> None:
    """PyTorch adds a convolution's bias with its own kernel: the Conv with a bias gains 2·W + W·b/E bytes (read its
    output and the bias, write the output: W = 16·16·16·4 B, E = 4,096 outputs, b = 16), E FLOPs and one launch;
    the Conv without a bias is untouched; the JSON says how many passes."""
    path = tmp_path / "convs.onnx"
    onnx.save(parse_model(CONVS), path)
    platform = write_platform(tmp_path / "p.toml", launch_us=5)
    extra = 'per_kernel_us = { value = 3, source = "t" }\n'
    fused = runtime_file(tmp_path / "fused.toml", "per-kernel", extra)
    bias = '[kernels]\nconv_bias = { value = "separate", source = "t" }\n'
    separate = runtime_file(tmp_path / "separate.toml", "per-kernel", extra + bias)
    before, after = (onnxroof.analyze(path, platform, runtime=r) for r in (fused, separate))
    written = 16 * 16 * 16 * 4
    pass_bytes = 2 * written + written * 16 / 4096
    with_bias, without = after.kernels
    assert with_bias.bytes == pytest.approx(before.kernels[0].bytes + pass_bytes, rel=1e-12)
    assert with_bias.flops == before.kernels[0].flops + 4096
    assert with_bias.t_overhead_s == pytest.approx(2 * 3e-6) and without.t_overhead_s == pytest.approx(3e-6)
    assert without.bytes == before.kernels[1].bytes and without.latency_s == before.kernels[1].latency_s
    assert after.runtime is not None and after.runtime.bias_passes == 1 and before.runtime.bias_passes == 0
    section = to_dict(after)["runtime"]
    assert section["conv_bias"] == "separate" and section["bias_passes"] == 1
    assert to_dict(before)["runtime"]["conv_bias"] == "fused"
