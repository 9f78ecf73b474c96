"""What-if knobs with closed-form expectations: precision re-costing, sparsity (compress_mem, skip_compute with
2:4 and unstructured hardware), processing-element arrays with padding loss, the energy floorline."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers import write_platform
from hypothesis import given
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

import onnxroof
from onnxroof.analysis.whatif import Densities, WhatIf, WhatIfError, compressed_itemsize, load_layer_densities
from onnxroof.cli.commands import app
from onnxroof.core.errors import PlatformError
from onnxroof.core.gemm import GemmShape
from onnxroof.platform.lookup import load_platform
from onnxroof.platform.model import PEArray
from onnxroof.roofline.energy import energy_ridge, floorline
from onnxroof.roofline.pe_array import utilization

PJ = 1e-12


def gemm_model(path: Path, m: int, k: int, n: int, elem: int = TensorProto.FLOAT) -> Path:
    """Y[m, n] = X[m, k] · W[k, n], W an initializer; the node is named "mm"."""
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    weight = numpy_helper.from_array(np.zeros((k, n), dtype=dtype), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["Y"], name="mm")],
        "gemm",
        [helper.make_tensor_value_info("X", elem, [m, k])],
        [helper.make_tensor_value_info("Y", elem, [m, n])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)
    return path


def conv_model(path: Path, channels: int, out_channels: int, group: int, size: int = 8) -> Path:
    weight = numpy_helper.from_array(np.zeros((out_channels, channels // group, 3, 3), np.float32), "W")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["X", "W"], ["Y"], name="conv", group=group, pads=[1, 1, 1, 1])],
        "conv",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, channels, size, size])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, out_channels, size, size])],
        [weight],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def platform_file(path: Path, extra: str = "", sparsity: str | None = None) -> Path:
    """A platform with round figures: 100 TFLOP/s fp32, 200 fp16, 1000 GB/s DRAM, no launch overhead."""
    peaks = {"fp32": 100, "fp16": 200}
    return write_platform(path, peaks=peaks, bandwidth_gbps=1000, launch_us=0.000001, extra=extra, sparsity=sparsity)


ENERGY = """
[energy_pj_per_op]
fp32 = { value = 2, source = "test" }
fp16 = { value = 0.5, source = "test" }

[energy_pj_per_byte]
dram = { value = 10, source = "test" }
onchip = { value = 1, source = "test" }
"""


ONCHIP = '[memory]\nonchip_mb = { value = 1, source = "t" }\nonchip_bandwidth_gbps = { value = 8000, source = "t" }\n'


def with_onchip(path: Path) -> Path:
    """The platform file with a 1 MB on-chip level at 8000 GB/s."""
    path.write_text(path.read_text().replace("[memory]\n", ONCHIP))
    return path


def only_kernel(analysis: onnxroof.Analysis):
    (kernel,) = analysis.kernels
    return kernel


# --------------------------------------------------------------------------------------------- precision


@pytest.mark.parametrize(("precision", "size"), [("fp32", 4), ("fp16", 2), ("bf16", 2), ("int8", 1)])
def test_precision_restates_every_float_tensor_of_a_gemm(tmp_path: Path, precision: str, size: int) -> None:
    m, k, n = 64, 96, 32
    model = gemm_model(tmp_path / "g.onnx", m, k, n)
    analysis = onnxroof.analyze(model, "h100", whatif=WhatIf(precision=precision))
    kernel = only_kernel(analysis)
    assert kernel.bytes == size * (m * k + k * n + m * n)
    assert kernel.flops == 2 * m * k * n
    assert kernel.precision == precision
    assert analysis.totals.weight_bytes == size * k * n
    assert analysis.whatif.precision == precision


def test_int8_halves_the_bytes_of_an_fp16_gemm(tmp_path: Path) -> None:
    model = gemm_model(tmp_path / "g.onnx", 128, 128, 128, TensorProto.FLOAT16)
    as_is = only_kernel(onnxroof.analyze(model, "agx-orin"))
    int8 = only_kernel(onnxroof.analyze(model, "agx-orin", whatif=WhatIf(precision="int8")))
    assert as_is.precision == "fp16"
    assert int8.bytes == as_is.bytes / 2
    assert int8.peak_flops == load_platform("agx-orin").peak("int8")


def test_integer_tensors_keep_their_element_size(tmp_path: Path) -> None:
    table = numpy_helper.from_array(np.zeros((1000, 64), np.float32), "E")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["E", "ids"], ["Y"])],
        "gather",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [16])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [16, 64])],
        [table],
    )
    path = tmp_path / "gather.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    fp32 = onnxroof.analyze(path, "h100").totals.bytes
    fp16 = onnxroof.analyze(path, "h100", whatif=WhatIf(precision="fp16")).totals.bytes
    index_bytes = 8 * 16
    assert fp16 - index_bytes == pytest.approx((fp32 - index_bytes) / 2)


def test_a_precision_the_platform_lacks_is_an_error_naming_what_it_has(tmp_path: Path) -> None:
    model = gemm_model(tmp_path / "g.onnx", 8, 8, 8)
    with pytest.raises(PlatformError, match="fp32, fp16, int8"):
        onnxroof.analyze(model, "xavier", whatif=WhatIf(precision="bf16"))


# ---------------------------------------------------------------------------------------------- sparsity


def test_two_four_skip_compute_halves_flops_only_where_the_platform_supports_it(tmp_path: Path) -> None:
    m, k, n = 64, 64, 64
    model = gemm_model(tmp_path / "g.onnx", m, k, n)
    dense = 2 * m * k * n
    knobs = {"precision": "fp16", "densities": {"weight": 0.5}, "skip_compute": True}
    sparse_gpu = onnxroof.analyze(model, "a100", whatif=WhatIf.of(**knobs))  # has 2:4 sparse fp16 peaks
    assert only_kernel(sparse_gpu).flops == dense / 2
    assert sparse_gpu.nodes[0].compute_density == 0.5
    no_sparse = onnxroof.analyze(model, "xavier", whatif=WhatIf.of(**knobs))  # Volta: no structured sparsity
    assert only_kernel(no_sparse).flops == dense
    assert any("cannot skip zeros" in w for w in no_sparse.warnings)
    too_dense = onnxroof.analyze(model, "a100", whatif=WhatIf.of(**{**knobs, "densities": {"weight": 0.6}}))
    assert only_kernel(too_dense).flops == dense
    sparser = onnxroof.analyze(model, "a100", whatif=WhatIf.of(**{**knobs, "densities": {"weight": 0.2}}))
    assert only_kernel(sparser).flops == dense / 2  # 2:4 runs at density 1/2, never lower
    off = onnxroof.analyze(model, "a100", whatif=WhatIf.of(precision="fp16", densities={"weight": 0.5}))
    assert only_kernel(off).flops == dense
    assert any("change nothing" in w for w in off.warnings)


def test_unstructured_hardware_skips_every_zero_pair(tmp_path: Path) -> None:
    m, k, n = 32, 64, 16
    model = gemm_model(tmp_path / "g.onnx", m, k, n)
    platform = platform_file(tmp_path / "sparse.toml", sparsity="unstructured")
    analysis = onnxroof.analyze(
        model, platform, whatif=WhatIf.of(densities={"weight": 0.5, "input": 0.8}, skip_compute=True)
    )
    kernel = only_kernel(analysis)
    assert kernel.flops == pytest.approx(2 * m * k * n * 0.5 * 0.8)
    assert kernel.bytes == 4 * (m * k + k * n + m * n)  # skip_compute alone moves the same bytes


def test_whatif_is_the_one_way_to_pass_the_knobs(tmp_path: Path) -> None:
    model = gemm_model(tmp_path / "g.onnx", 32, 64, 16)
    knobs = WhatIf(precision="fp16", densities=Densities(weight=0.25, input=0.5), compress_mem=True)
    given_once = onnxroof.analyze(model, "h100", whatif=knobs)
    assert given_once.whatif == knobs
    assert WhatIf.of(precision="fp16", densities={"weight": 0.25, "input": 0.5}, compress_mem=True) == knobs
    for loose in ({"precision": "fp16"}, {"compress_mem": True}, {"densities": {"weight": 0.5}}, {"peak": True}):
        with pytest.raises(TypeError, match="unexpected keyword"):
            onnxroof.analyze(model, "h100", **loose)


def test_compress_mem_stores_nonzeros_plus_a_bitmap(tmp_path: Path) -> None:
    m, k, n = 32, 64, 16
    model = gemm_model(tmp_path / "g.onnx", m, k, n)
    analysis = onnxroof.analyze(
        model, "h100", whatif=WhatIf.of(densities={"weight": 0.25, "input": 0.5}, compress_mem=True)
    )
    kernel = only_kernel(analysis)
    assert analysis.totals.weight_bytes == k * n * (4 * 0.25 + 1 / 8)
    assert kernel.bytes_read == k * n * (4 * 0.25 + 1 / 8) + m * k * (4 * 0.5 + 1 / 8)
    assert kernel.bytes_written == 4 * m * n  # the output stays dense
    assert kernel.flops == 2 * m * k * n  # compress_mem alone computes the same


@given(st.sampled_from([0.5, 1, 2, 4, 8]), st.floats(min_value=1e-3, max_value=1.0))
def test_compressed_size_never_exceeds_dense(itemsize: float, density: float) -> None:
    compressed = compressed_itemsize(itemsize, density)
    assert compressed <= itemsize
    assert compressed == min(itemsize, itemsize * density + 1 / 8)


def test_layer_densities_from_a_file(tmp_path: Path) -> None:
    m, k, n = 16, 32, 8
    model = gemm_model(tmp_path / "g.onnx", m, k, n)
    toml = tmp_path / "d.toml"
    toml.write_text("[layers.mm]\nweight = 0.5\n", encoding="utf-8")
    layers = load_layer_densities(toml)
    analysis = onnxroof.analyze(model, "h100", whatif=WhatIf(layers=layers, compress_mem=True))
    assert analysis.totals.weight_bytes == k * n * (4 * 0.5 + 1 / 8)
    as_json = tmp_path / "d.json"
    as_json.write_text(json.dumps({"layers": {"0:mm": {"weight": 0.5}}}), encoding="utf-8")
    assert load_layer_densities(as_json)["0:mm"].weight == 0.5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[layers.mm]\nweight = 1.5\n", "layers.mm.weight: density must be a number in (0, 1]"),
        ("[layers.mm]\nbias = 0.5\n", "layers.mm.bias: unknown kind"),
        ("[other]\nx = 1\n", 'expected one table "layers"'),
        ("not toml [", "not valid TOML"),
    ],
)
def test_bad_density_files_name_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "d.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(WhatIfError, match=re.escape(message)):
        load_layer_densities(path)


def test_a_density_file_naming_no_node_is_an_error(tmp_path: Path) -> None:
    model = gemm_model(tmp_path / "g.onnx", 4, 4, 4)
    with pytest.raises(WhatIfError, match=re.escape("layers.nope: no node")):
        onnxroof.analyze(model, "h100", whatif=WhatIf.of(layer_densities={"nope": {"weight": 0.5}}, compress_mem=True))


@pytest.mark.parametrize("option", ["weight=0", "weight=2", "bias=0.5", "weight", "weight=x"])
def test_cli_rejects_bad_densities_in_one_line(tmp_path: Path, option: str) -> None:
    model = gemm_model(tmp_path / "g.onnx", 4, 4, 4)
    result = CliRunner().invoke(app, ["report", str(model), "--density", option, "--compress-mem"])
    assert result.exit_code == 2
    assert "--density" in result.output and "Traceback" not in result.output


def test_cli_whatif_options_reach_the_json(tmp_path: Path) -> None:
    model = gemm_model(tmp_path / "g.onnx", 32, 64, 16)
    out = tmp_path / "r.json"
    args = ["report", str(model), "-p", "a100", "--precision", "fp16", "--density", "weight=0.5"]
    result = CliRunner().invoke(app, [*args, "--skip-compute", "--compress-mem", "-o", str(out)])
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["whatif"] == {
        "precision": "fp16",
        "densities": {"weight": 0.5},
        "layer_densities": {},
        "compress_mem": True,
        "skip_compute": True,
    }
    assert doc["kernels"][0]["flops"] == 32 * 64 * 16  # 2·m·k·n at 2:4 density 1/2
    assert doc["nodes"][0]["compute_density"] == 0.5
    assert doc["platform"]["sparsity"] == "2:4"


# ---------------------------------------------------------------------------------------------- PE array

ARRAY = """
[array]
height = { value = 128, source = "test" }
width = { value = 128, source = "test" }
instances = { value = 1, source = "test" }
clock_ghz = { value = 1, source = "test" }
"""


def test_a_100_by_100_gemm_on_a_128_by_128_array_uses_100_over_128_squared(tmp_path: Path) -> None:
    m, k, n = 512, 100, 100
    model = gemm_model(tmp_path / "g.onnx", m, k, n)
    platform = platform_file(tmp_path / "array.toml", ARRAY)
    kernel = only_kernel(onnxroof.analyze(model, platform))
    assert kernel.utilization == pytest.approx((100 / 128) ** 2)
    assert kernel.t_compute_s == pytest.approx(2 * m * k * n / (100e12 * (100 / 128) ** 2))
    assert kernel.attainable_flops <= 100e12 * kernel.utilization
    analysis = onnxroof.analyze(model, platform)
    assert analysis.totals.array_utilization == pytest.approx((100 / 128) ** 2)
    assert onnxroof.analyze(model, "h100").totals.array_utilization is None


def test_a_depthwise_convolution_uses_one_column_of_the_array(tmp_path: Path) -> None:
    platform = platform_file(tmp_path / "array.toml", ARRAY)
    depthwise = only_kernel(onnxroof.analyze(conv_model(tmp_path / "dw.onnx", 32, 32, 32), platform))
    assert depthwise.utilization == pytest.approx((9 / 128) * (1 / 128))
    dense = only_kernel(onnxroof.analyze(conv_model(tmp_path / "c.onnx", 128, 128, 1), platform))
    assert dense.utilization == pytest.approx((128 * 9 / (9 * 128)) * 1.0)


def test_array_instances_lose_the_last_wave() -> None:
    array = PEArray(128, 128, 4, 1e9)
    assert utilization(GemmShape(groups=1, m=1, k=128, n=128), array) == pytest.approx(1 / 4)  # one row, four arrays
    assert utilization(GemmShape(groups=1, m=6, k=128, n=128), array) == pytest.approx(6 / 8)
    assert utilization(GemmShape(groups=1, m=8, k=128, n=128), array) == 1.0
    assert array.peak_flops == 2 * 128 * 128 * 4 * 1e9


def test_utilization_refuses_a_gemm_with_an_unknown_dim() -> None:
    with pytest.raises(ValueError, match="complete GEMM shape"):
        utilization(GemmShape(groups=1, m=None, k=128, n=128), PEArray(128, 128, 1, 1e9))


@given(st.integers(1, 64), st.integers(1, 4096), st.integers(1, 4096), st.integers(1, 4096), st.integers(1, 8))
def test_utilization_is_a_share_and_exact_when_dims_divide(batch: int, m: int, k: int, n: int, instances: int) -> None:
    array = PEArray(32, 16, instances, 1e9)
    share = utilization(GemmShape(groups=batch, m=m, k=k, n=n), array)
    assert 0 < share <= 1
    fitted = utilization(GemmShape(groups=batch, m=m * instances, k=32 * k, n=16 * n), array)
    assert fitted == pytest.approx(1.0)


# ------------------------------------------------------------------------------------------------ energy


def test_kernel_energy_is_ops_times_e_op_plus_bytes_times_e_mem(tmp_path: Path) -> None:
    m, k, n = 64, 64, 64
    model = gemm_model(tmp_path / "g.onnx", m, k, n)
    platform = platform_file(tmp_path / "energy.toml", ENERGY)
    analysis = onnxroof.analyze(model, platform)
    kernel = only_kernel(analysis)
    flops, moved = 2 * m * k * n, 4 * (m * k + k * n + m * n)
    assert kernel.energy_compute_j == pytest.approx(flops * 2 * PJ)
    assert kernel.energy_memory_j == pytest.approx(moved * 10 * PJ)
    assert kernel.energy_j == pytest.approx(flops * 2 * PJ + moved * 10 * PJ)
    assert kernel.energy_bound == ("compute" if flops * 2 > moved * 10 else "memory")
    totals = analysis.totals
    assert totals.energy_j == pytest.approx(kernel.energy_j)
    assert totals.energy_delay_js == pytest.approx(kernel.energy_j * totals.latency_s)
    assert totals.energy_memory_share == pytest.approx(moved * 10 / (flops * 2 + moved * 10))
    half = only_kernel(onnxroof.analyze(model, platform, whatif=WhatIf(precision="fp16")))
    assert half.energy_j == pytest.approx(flops * 0.5 * PJ + moved / 2 * 10 * PJ)


def test_a_working_set_that_fits_on_chip_uses_the_onchip_roof_and_energy(tmp_path: Path) -> None:
    m, k, n = 16, 16, 16
    model = gemm_model(tmp_path / "g.onnx", m, k, n)
    platform = with_onchip(platform_file(tmp_path / "onchip.toml", ENERGY))
    kernel = only_kernel(onnxroof.analyze(model, platform))
    moved = 4 * (m * k + k * n + m * n)
    assert kernel.t_memory_s == pytest.approx(moved / 8000e9)
    assert kernel.energy_memory_j == pytest.approx(moved * 1 * PJ)
    assert load_platform(platform).cache_levels[0].name == "onchip"


def test_without_energy_figures_energy_is_absent(tmp_path: Path) -> None:
    analysis = onnxroof.analyze(gemm_model(tmp_path / "g.onnx", 8, 8, 8), platform_file(tmp_path / "p.toml"))
    assert analysis.totals.energy_j is None
    assert only_kernel(analysis).energy_j is None and only_kernel(analysis).energy_bound == "none"


def test_floorline_falls_to_the_energy_per_op(tmp_path: Path) -> None:
    platform = load_platform(platform_file(tmp_path / "e.toml", ENERGY))
    assert floorline(platform, "fp32", 1.0) == pytest.approx(12 * PJ)
    assert floorline(platform, "fp32", 1e9) == pytest.approx(2 * PJ, rel=1e-6)
    assert energy_ridge(platform, "fp32") == pytest.approx(5.0)
    assert floorline(platform, "int8", 5.0) == pytest.approx(4 * PJ)  # int8 -> fp32 fallback: 2 + 10/5


# ------------------------------------------------------------------------------------- platform validation


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('[energy_pj_per_op]\nfp32 = { value = 1, source = "t" }\n', "energy_pj_per_byte: missing required table"),
        (
            '[energy_pj_per_op]\nfp32 = { value = 1, source = "t" }\n[energy_pj_per_byte]\nonchip = { value = 1, '
            'source = "t" }\n',
            "energy_pj_per_byte.dram: missing required key",
        ),
        (
            '[array]\nheight = { value = 1.5, source = "t" }\nwidth = { value = 2, source = "t" }\n'
            'clock_ghz = { value = 1, source = "t" }\n',
            "array.height: value must be a whole number",
        ),
        ('[array]\nheight = { value = 2, source = "t" }\n', "array.width: missing required key"),
    ],
)
def test_bad_whatif_platform_figures_name_the_key(tmp_path: Path, extra: str, message: str) -> None:
    with pytest.raises(PlatformError, match=re.escape(message)):
        load_platform(platform_file(tmp_path / "bad.toml", extra))


def test_bad_sparsity_kind_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(PlatformError, match="sparsity: must be one of 2:4, unstructured, none"):
        load_platform(platform_file(tmp_path / "bad.toml", sparsity="4:8"))


def test_onchip_bandwidth_needs_a_size(tmp_path: Path) -> None:
    path = platform_file(tmp_path / "bad.toml")
    path.write_text(
        path.read_text().replace("[memory]\n", '[memory]\nonchip_bandwidth_gbps = { value = 1, source = "t" }\n')
    )
    with pytest.raises(PlatformError, match=re.escape("memory.onchip_mb: missing required key")):
        load_platform(path)


def test_platforms_with_sparse_peaks_default_to_two_four() -> None:
    assert load_platform("a100").sparsity == "2:4"
    assert load_platform("xavier").sparsity == "none"
    assert math.isclose(load_platform("a100").sparse_peak_flops["fp16"], 2 * load_platform("a100").peak_flops["fp16"])


def test_the_roofline_plot_draws_the_onchip_roof(tmp_path: Path) -> None:
    from onnxroof.report.plot import figure

    model = gemm_model(tmp_path / "g.onnx", 16, 16, 16)
    platform = with_onchip(platform_file(tmp_path / "onchip.toml"))

    def dotted(path: Path) -> int:
        axes = figure([onnxroof.analyze(model, path)]).axes[0]
        return sum(1 for line in axes.get_lines() if line.get_linestyle() == ":")

    assert dotted(platform) == 1
    assert dotted(platform_file(tmp_path / "flat.toml")) == 0


def test_reports_show_the_array_utilization(tmp_path: Path) -> None:
    from rich.console import Console

    from onnxroof.report.console import render_console
    from onnxroof.report.html import explain, render_html

    model = gemm_model(tmp_path / "g.onnx", 512, 100, 100)
    analysis = onnxroof.analyze(model, platform_file(tmp_path / "array.toml", ARRAY))
    console = Console(width=140, record=True, color_system=None)
    render_console(analysis, console)
    text = console.export_text()
    assert "PE util" in text and "61.0%" in text  # (100/128)² = 0.6104
    assert "61.0% of the PE array busy" in explain(only_kernel(analysis))
    assert "PE array" in render_html(analysis)
    console = Console(width=140, record=True, color_system=None)
    render_console(onnxroof.analyze(model, "h100"), console)
    assert "PE util" not in console.export_text()


# ------------------------------------------------------------------------------- sustained roofs and --peak

SUSTAINED = (
    '[sustained]\ndram_bandwidth = { value = 0.8, source = "test" }\ntensor = { value = 0.5, source = "test" }\n'
)


def test_sustained_roofs_by_default_and_the_datasheet_roofline_with_peak(tmp_path: Path) -> None:
    """A memory-bound GEMM takes B / (f_bw · W); a compute-bound one F / (f_tensor · P); --peak gives B / W, F / P."""
    platform = write_platform(tmp_path / "sus.toml", bandwidth_gbps=100, launch_us=1e-9, extra=SUSTAINED)
    thin = gemm_model(tmp_path / "thin.onnx", 1, 256, 256)  # intensity < 1: memory-bound
    fat = gemm_model(tmp_path / "fat.onnx", 2048, 2048, 2048)
    for model, seconds_of in (
        (thin, lambda t, f, w, p: t.fused.bytes / w),
        (fat, lambda t, f, w, p: t.flops / p),
    ):
        sustained = onnxroof.analyze(model, platform)
        datasheet = onnxroof.analyze(model, platform, whatif=WhatIf(peak=True))
        assert (
            onnxroof.analyze(model, platform, whatif=WhatIf(peak=True)).totals.latency_s == datasheet.totals.latency_s
        )
        t = sustained.totals
        assert t.latency_s == pytest.approx(seconds_of(t, t.flops, 0.8 * 100e9, 0.5 * 10e12), rel=1e-9)
        assert datasheet.totals.latency_s == pytest.approx(seconds_of(t, t.flops, 100e9, 10e12), rel=1e-9)
    from onnxroof.analysis.document import to_dict

    doc = to_dict(sustained)
    assert doc["platform"]["dram_bandwidth"] == 100e9  # the datasheet figure stays
    assert doc["platform"]["sustained"]["dram_bandwidth"] == {"value": 0.8, "source": "test"}
    assert doc["platform"]["sustained"]["applied"] is True
    assert doc["platform"]["sustained"]["roofs"]["dram_bandwidth"] == pytest.approx(80e9)
    assert to_dict(datasheet)["platform"]["sustained"]["applied"] is False


def test_peak_option_on_the_cli(tmp_path: Path) -> None:
    platform = write_platform(tmp_path / "sus.toml", bandwidth_gbps=100, launch_us=1e-9, extra=SUSTAINED)
    model = gemm_model(tmp_path / "thin.onnx", 1, 256, 256)
    runner = CliRunner()
    latencies = []
    for extra in ([], ["--peak"]):
        result = runner.invoke(app, ["report", str(model), "-p", str(platform), "-f", "json", *extra])
        assert result.exit_code == 0, result.output
        latencies.append(json.loads(result.stdout)["totals"]["latency_s"])
    assert latencies[0] == pytest.approx(latencies[1] / 0.8, rel=1e-9)
    table = runner.invoke(app, ["report", str(model), "-p", str(platform)])
    assert "Sustained BW" in table.output and "80% of 100 GB/s" in table.output


def test_graph_capture_pays_the_launch_overhead_once_per_run(tmp_path: Path) -> None:
    """A cuda-graph runtime (tensorrt's fusions replayed): Σ (max(t_c, t_m) + t_node) + t_launch instead of
    Σ (max + t_launch), with t_node its per_kernel_us (0.5 µs) and t_launch the platform's launch (per_run_us
    absent)."""
    platform = write_platform(tmp_path / "launch.toml", launch_us=5)
    graph = tmp_path / "graph.toml"
    graph.write_text(
        'schema = 1\nname = "graph"\ntitle = "replayed"\ntargets = ["accelerator"]\nfusion_profile = "tensorrt"\n'
        '[launch]\nmode = "cuda-graph"\nper_kernel_us = { value = 0.5, source = "test" }\n'
    )
    model = conv_model(tmp_path / "conv.onnx", 8, 8, 1)
    path = tmp_path / "two.onnx"
    proto = onnx.load(model)
    proto.graph.node.append(helper.make_node("Relu", ["Y"], ["Z"], name="relu"))
    proto.graph.node.append(helper.make_node("Neg", ["Z"], ["Q"], name="neg"))
    proto.graph.output[0].name = "Q"
    onnx.save(proto, path)
    eager = onnxroof.analyze(path, platform, fusion="tensorrt")
    captured = onnxroof.analyze(path, platform, runtime=graph)
    assert [k.node_ids for k in captured.kernels] == [k.node_ids for k in eager.kernels]  # same fusions
    assert all(k.t_overhead_s == pytest.approx(0.5e-6) for k in captured.kernels)
    assert captured.totals.overhead_time_s == pytest.approx(5e-6 + 0.5e-6 * len(captured.kernels))
    assert eager.totals.overhead_time_s == pytest.approx(5e-6 * len(eager.kernels))
    saved = 5e-6 * (len(eager.kernels) - 1) - 0.5e-6 * len(eager.kernels)
    assert captured.totals.latency_s == pytest.approx(eager.totals.latency_s - saved, rel=1e-9)
