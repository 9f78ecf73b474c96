"""Findings: every rule has a tiny model that triggers it and one that does not; the record's shape is fixed."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import write_platform
from onnx import TensorProto, helper, numpy_helper

from onnxroof.analysis.analyze import analyze
from onnxroof.analysis.findings import RULES, SEVERITIES, Finding, find, has_tensor_cores
from onnxroof.analysis.whatif import WhatIf
from onnxroof.platform.lookup import load_platform
from onnxroof.report.data import render_json

ROOT = Path(__file__).resolve().parents[1]
CNN = ROOT / "samples" / "tiny_cnn.onnx"


# --------------------------------------------------------------------------------------------- model builders


def build(nodes, inputs, weights=None, elem=TensorProto.FLOAT, outputs=("y",)) -> onnx.ModelProto:
    """A checked opset-17 model: ``inputs`` name -> shape, ``weights`` name -> shape (zeros) or array."""
    np_type = helper.tensor_dtype_to_np_dtype(elem)
    initializers = [
        numpy_helper.from_array(v if isinstance(v, np.ndarray) else np.zeros(v, np_type), n)
        for n, v in (weights or {}).items()
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, elem, list(s)) for n, s in inputs.items()],
        [helper.make_empty_tensor_value_info(n) for n in outputs],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    model = onnx.shape_inference.infer_shapes(model, strict_mode=True)  # types the outputs
    onnx.checker.check_model(model)
    return model


def bn_weights(channels: int) -> dict:
    return {f"bn_{k}": (channels,) for k in ("scale", "bias", "mean")} | {"bn_var": np.ones(channels, np.float32)}


def _bn(x: str, y: str, name: str = "bn") -> onnx.NodeProto:
    return helper.make_node("BatchNormalization", [x, "bn_scale", "bn_bias", "bn_mean", "bn_var"], [y], name=name)


def conv_relu_bn() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        _bn("r", "y"),
    ]
    return build(nodes, {"x": (1, 16, 16, 16)}, {"w": (16, 16, 3, 3)} | bn_weights(16))


def conv_bn_relu() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        _bn("c", "b"),
        helper.make_node("Relu", ["b"], ["y"], name="relu"),
    ]
    return build(nodes, {"x": (1, 16, 16, 16)}, {"w": (16, 16, 3, 3)} | bn_weights(16))


def conv_output_shared() -> onnx.ModelProto:
    """Conv → BN, but the Conv's output is also a residual input: BN cannot fold into the Conv."""
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        _bn("c", "b"),
        helper.make_node("Add", ["b", "c"], ["y"], name="add"),
    ]
    return build(nodes, {"x": (1, 16, 16, 16)}, {"w": (16, 16, 3, 3)} | bn_weights(16))


def conv(cin: int, cout: int, size: int = 32, kernel: int = 3, group: int = 1, elem=TensorProto.FLOAT):
    pad = kernel // 2
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv", pads=[pad] * 4, group=group)
    return build([node], {"x": (1, cin, size, size)}, {"w": (cout, cin // group, kernel, kernel)}, elem=elem)


def depthwise_then_dense() -> onnx.ModelProto:
    """A depthwise conv (memory-bound) next to a dense conv that takes most of the time."""
    nodes = [
        helper.make_node("Conv", ["x", "dw"], ["d"], name="dw", pads=[1, 1, 1, 1], group=64),
        helper.make_node("Conv", ["d", "w"], ["y"], name="dense", pads=[1, 1, 1, 1]),
    ]
    # 256 output channels: the dense conv's time dwarfs the depthwise one's fixed kernel cost on every GPU
    return build(nodes, {"x": (1, 64, 56, 56)}, {"dw": (64, 1, 3, 3), "w": (256, 64, 3, 3)})


def layout_chain() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], name="to_nhwc", perm=[0, 2, 3, 1]),
        helper.make_node("Reshape", ["t", "shape"], ["r"], name="flatten_hw"),
        helper.make_node("Transpose", ["r"], ["y"], name="to_nc", perm=[0, 2, 1]),
    ]
    return build(nodes, {"x": (1, 64, 56, 56)}, {"shape": np.array([1, 3136, 64], np.int64)})


def single_transpose() -> onnx.ModelProto:
    node = helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[0, 2, 3, 1])
    return build([node], {"x": (1, 64, 56, 56)})


def matmul(elem=TensorProto.FLOAT) -> onnx.ModelProto:
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")
    return build([node], {"x": (1, 64)}, {"w": (64, 64)}, elem=elem)


def tiny_relu() -> onnx.ModelProto:
    return build([helper.make_node("Relu", ["x"], ["y"], name="relu")], {"x": (1, 8)})


def big_matmul() -> onnx.ModelProto:
    node = helper.make_node("MatMul", ["x", "b"], ["y"], name="mm")
    return build([node], {"x": (1024, 1024), "b": (1024, 1024)})


def tiny_memory(name: str = "xavier"):
    """A platform with 1 kB of memory (for OR007)."""
    return dataclasses.replace(load_platform(name), memory_capacity=1e3)


def ids(model, platform="xavier", dims=None, **knobs) -> dict[str, Finding]:
    found = find(analyze(model, platform=platform, dims=dims, whatif=WhatIf(**knobs)))
    return {f.id: f for f in found}


# --------------------------------------------------------------------------------------------- the record


def test_finding_record_is_frozen_with_the_agreed_fields() -> None:
    assert [f.name for f in dataclasses.fields(Finding)] == [
        "id",
        "severity",
        "title",
        "node_ids",
        "message",
        "suggestion",
    ]
    finding = Finding("OR001", "warning", "t", ("0:n",), "m", "s")
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.id = "OR002"  # type: ignore[misc]
    assert Finding.from_dict(json.loads(json.dumps(finding.to_dict()))) == finding


def test_rule_ids_are_stable_and_documented() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert list(RULES) == [f"OR{i:03d}" for i in range(1, len(RULES) + 1)]
    for rule in RULES.values():
        assert re.fullmatch(r"OR\d{3}", rule.id)
        assert rule.severity in SEVERITIES
        assert rule.id in readme, f"{rule.id} is not in the README"


def test_tensor_core_platforms() -> None:
    with_cores = {"xavier", "agx-orin", "orin-nano", "t4", "v100", "a100", "h100", "l4", "rtx3080", "rtx4090"}
    without = {"jetson-nano", "gtx1080ti", "apple-m1", "i9-10980xe", "raspberry-pi-5", "coral-edgetpu"}
    for name in with_cores:
        assert has_tensor_cores(load_platform(name)), name
    for name in without:
        assert not has_tensor_cores(load_platform(name)), name


# --------------------------------------------------------------------------------------------- each rule


def test_or001_bn_after_relu_cannot_fold() -> None:
    found = ids(conv_relu_bn())
    assert "OR001" in found
    finding = found["OR001"]
    assert finding.node_ids == ("2:bn",)
    assert "relu" in finding.message.lower()  # from the fusion pass's reason or from the graph structure
    assert "Conv→BN→ReLU" in finding.suggestion


def test_or001_bn_whose_conv_output_is_shared() -> None:
    assert ids(conv_output_shared())["OR001"].node_ids == ("1:bn",)


def test_or001_conv_bn_relu_folds() -> None:
    assert "OR001" not in ids(conv_bn_relu())
    assert "OR001" not in ids(CNN, dims={"batch": 1})  # every BN of the sample follows its Conv


def test_or002_misaligned_channels_on_tensor_cores() -> None:
    finding = ids(conv(12, 20))["OR002"]
    assert finding.node_ids == ("0:conv",)
    # padded 12→16 and 20→24: 1 − (12·20)/(16·24) of the MACs are padding
    assert f"{1 - 240 / 384:.1%} of its MACs" in finding.message
    assert "multiple of 8" in finding.message


def test_or002_int8_needs_multiples_of_16() -> None:
    assert "OR002" in ids(conv(16, 24), precision="int8")
    assert "OR002" not in ids(conv(16, 24), precision="fp16")


def test_or002_not_for_aligned_channels_nor_without_tensor_cores() -> None:
    assert "OR002" not in ids(conv(16, 32))
    assert "OR002" not in ids(conv(12, 20), platform="i9-10980xe")
    assert "OR002" not in ids(conv(64, 64, kernel=3, group=64))  # depthwise: see OR003


def test_or003_depthwise_conv_dominating_time() -> None:
    finding = ids(conv(64, 64, size=56, group=64))["OR003"]
    assert finding.node_ids == ("0:conv",)
    assert "1 depthwise/grouped" in finding.message and "100.0%" in finding.message


def test_or003_not_for_dense_convs_nor_a_small_share() -> None:
    assert "OR003" not in ids(conv(64, 64, size=56))
    analysis = analyze(depthwise_then_dense(), platform="xavier")
    dw = analysis.kernel_of("0:dw")
    assert dw.bound == "memory" and dw.latency_s / analysis.totals.latency_s < 0.15
    assert "OR003" not in {f.id for f in find(analysis)}


def test_or004_transpose_reshape_transpose_chain() -> None:
    finding = ids(layout_chain())["OR004"]
    assert finding.node_ids == ("0:to_nhwc", "1:flatten_hw", "2:to_nc")
    assert "1 chain(s)" in finding.message and "Transpose→Reshape→Transpose" in finding.message


def test_or004_not_for_a_lone_transpose() -> None:
    assert "OR004" not in ids(single_transpose())
    assert "OR004" not in ids(conv_bn_relu())


def test_or005_fp32_matmul_on_a_tensor_core_platform() -> None:
    finding = ids(matmul())["OR005"]
    assert finding.node_ids == ("0:mm",)
    assert "fp16 8.01×" in finding.message and "int8 16×" in finding.message


def test_or005_not_for_fp16_models_nor_fp32_platforms() -> None:
    assert "OR005" not in ids(matmul(TensorProto.FLOAT16))
    assert "OR005" not in ids(matmul(), precision="fp16")
    assert "OR005" not in ids(matmul(), platform="apple-m1")  # fp16 peak = fp32 peak


def test_or006_launch_overhead_dominates() -> None:
    finding = ids(tiny_relu())["OR006"]
    assert finding.node_ids == ("0:relu",)
    assert "1 of 1 kernels" in finding.message and "10 µs each" in finding.message


def test_or006_not_for_a_large_kernel() -> None:
    assert "OR006" not in ids(big_matmul())


def test_or007_exceeds_memory_capacity() -> None:
    found = ids(matmul(), platform=tiny_memory())
    assert found["OR007"].severity == "error"
    assert "16.4 kB" in found["OR007"].message  # 64×64 fp32 weights


def test_or007_not_when_it_fits_or_capacity_is_unknown() -> None:
    assert "OR007" not in ids(matmul())
    assert load_platform("coral-edgetpu").memory_capacity is None
    assert "OR007" not in ids(matmul(), platform="coral-edgetpu")


# --------------------------------------------------------------------------------------------- outputs


def test_findings_in_the_json_and_the_terminal_view() -> None:
    from io import StringIO

    from rich.console import Console

    from onnxroof.report.console import render_console

    analysis = analyze(conv_relu_bn(), platform="xavier")
    data = json.loads(render_json(analysis))
    assert [f["id"] for f in data["findings"]] == [f.id for f in find(analysis)]
    assert set(data["findings"][0]) == {"id", "severity", "title", "node_ids", "message", "suggestion"}
    buffer = StringIO()
    render_console(analysis, Console(file=buffer, width=120, color_system=None))
    text = buffer.getvalue()
    assert text.index("Unsupported ops") < text.index("Findings (") < text.index("OR001")


def test_no_findings_says_so() -> None:
    from io import StringIO

    from rich.console import Console

    from onnxroof.report.console import findings_view

    buffer = StringIO()
    Console(file=buffer, width=80, color_system=None).print(findings_view(()))
    assert buffer.getvalue().strip() == "Findings: none"


def _array_platform(tmp_path: Path, side: int) -> Path:
    """A platform with one side×side PE array (fp32 100 TFLOP/s, 1000 GB/s, no launch overhead)."""
    array = "".join(
        f'{key} = {{ value = {value}, source = "t" }}\n'
        for key, value in (("height", side), ("width", side), ("clock_ghz", 1))
    )
    return write_platform(
        tmp_path / f"array{side}.toml",
        peaks={"fp32": 100},
        bandwidth_gbps=1000,
        launch_us=0.000001,
        extra="[array]\n" + array,
    )


def _matmul(tmp_path: Path, m: int, k: int, n: int) -> Path:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")],
        "mm",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [m, n])],
        [numpy_helper.from_array(np.zeros((k, n), np.float32), "W")],
    )
    path = tmp_path / "mm.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_or008_gemm_dims_just_above_the_array_leave_it_idle(tmp_path: Path) -> None:
    # K = N = 129 on a 128×128 array: 2×2 tiles, utilization (129/256)² ≈ 25 %, and the GEMM is all the time.
    found = find(analyze(_matmul(tmp_path, 4096, 129, 129), _array_platform(tmp_path, 128)))
    (finding,) = [f for f in found if f.id == "OR008"]
    assert finding.node_ids == ("0:mm",) and "25.4%" in finding.message


def test_or008_not_when_dims_divide_the_array_nor_without_one(tmp_path: Path) -> None:
    model = _matmul(tmp_path, 4096, 256, 256)
    assert "OR008" not in {f.id for f in find(analyze(model, _array_platform(tmp_path, 128)))}
    assert "OR008" not in {f.id for f in find(analyze(_matmul(tmp_path, 4096, 129, 129), "h100"))}


def test_or006_names_the_launch_cost_the_runtime_charged() -> None:
    """The per-launch figure OR006 quotes is the one placement charged: the runtime's (eager PyTorch's 5.5 µs per
    op under ``torch-cuda``), not the platform's default (5 µs on a100)."""
    analysis = analyze(CNN, "a100", {"batch": 1}, fusion="none", runtime="torch-cuda")
    assert analysis.runtime is not None and analysis.runtime.per_kernel_s == pytest.approx(5.5e-6)
    (finding,) = [f for f in find(analysis) if f.id == "OR006"]
    assert "5.5 µs each under torch-cuda on a100" in finding.message
