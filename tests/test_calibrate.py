"""``onnxroof calibrate``: a quick calibration writes a valid, plausible, fully sourced measured platform; the
hierarchy and efficiency derivations and the roofline's new factors follow their documented formulas."""

from __future__ import annotations

import math
import tomllib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from onnxroof.cli.commands import app
from onnxroof.core.cost import Cost
from onnxroof.costing.opclass import refine_conv
from onnxroof.fusion.opclass import kernel_op_class
from onnxroof.measure.calibrate.calibrator import Figure, Timing, stream_probe, tiny_probe
from onnxroof.measure.calibrate.fit import hierarchy
from onnxroof.measure.calibrate.probes import efficiency_probes
from onnxroof.platform.lookup import load_platform
from onnxroof.platform.model import EFFICIENCY_CLASSES
from onnxroof.roofline.classify import classify
from onnxroof.rules import REGISTRY


@pytest.fixture(scope="module")
def quick_file(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    path = tmp_path_factory.mktemp("calibrate") / "host.toml"
    result = CliRunner().invoke(app, ["calibrate", "--quick", "-o", str(path)])
    assert result.exit_code == 0, result.output
    return path, result.output


def test_quick_calibration_writes_a_valid_measured_platform(quick_file: tuple[Path, str]) -> None:
    path, output = quick_file
    platform = load_platform(path)
    assert platform.measured and platform.kind == "cpu" and platform.fusion_profile == "ort-cpu"
    assert platform.peak("fp32") > 0 and platform.dram_bandwidth > 0
    ridge = platform.ridge("fp32")
    assert math.isfinite(ridge) and ridge > 0
    assert 0 < platform.launch_overhead_s < 1e-3
    assert 0 < platform.run_overhead_s < 1e-2
    for key in ("date", "onnxruntime", "threads", "cpu", "quick"):
        assert key in platform.measurement, key
    assert platform.measurement["quick"] is True
    assert platform.measurement["threads"] >= 1
    assert "calibrated figures" in output.lower() or "peak fp32" in output


def test_plausible_figures(quick_file: tuple[Path, str]) -> None:
    platform = load_platform(quick_file[0])
    assert 1e8 < platform.peak("fp32") < 1e15  # between 0.1 GFLOP/s and 1 PFLOP/s
    assert 1e8 < platform.dram_bandwidth < 1e13
    sizes = [level.size for level in platform.cache_levels]
    assert sizes == sorted(sizes) and len(sizes) <= 3
    for level in platform.cache_levels:
        assert level.bandwidth > platform.dram_bandwidth
    assert platform.efficiency
    for cls, value in platform.efficiency.items():
        assert cls in EFFICIENCY_CLASSES and 0 < value <= 1


def test_every_figure_says_how_it_was_measured(quick_file: tuple[Path, str]) -> None:
    path = quick_file[0]
    platform = load_platform(path)
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    figures = {f"{t}.{k}" for t, body in doc.items() if t != "measurement" and isinstance(body, dict) for k in body}
    figures.discard("memory.cache_levels")
    figures |= {f"memory.cache_levels[{i}]" for i in range(len(platform.cache_levels))}
    assert set(platform.sources) == figures
    for key, source in platform.sources.items():
        assert source.startswith("measured"), key
        assert "\n" not in source


def test_stdout_without_output_file() -> None:
    from onnxroof.measure.calibrate.calibrator import Calibration

    fake = _fake_calibration()
    text = fake.to_toml()
    assert text.startswith("# Written by `onnxroof calibrate`")
    assert isinstance(fake, Calibration)


def test_toml_round_trip(tmp_path: Path) -> None:
    fake = _fake_calibration()
    path = tmp_path / "fake.toml"
    path.write_text(fake.to_toml(), encoding="utf-8")
    platform = load_platform(path)
    assert platform.peak("fp32") == pytest.approx(2e11, rel=1e-5)
    assert platform.dram_bandwidth == pytest.approx(30e9, rel=1e-5)
    assert [(lv.size, lv.bandwidth) for lv in platform.cache_levels] == [
        (pytest.approx(2e6, rel=1e-5), pytest.approx(150e9, rel=1e-5))
    ]
    assert platform.efficiency["conv"] == pytest.approx(0.5)
    assert platform.launch_overhead_s == pytest.approx(0.25e-6, rel=1e-5)
    assert platform.run_overhead_s == pytest.approx(4e-6, rel=1e-5)
    assert platform.measurement["cpu"] == 'A "quoted" CPU'


def _fake_calibration():
    from onnxroof.measure.calibrate.calibrator import Calibration

    timing = Timing(1e-3, 1e-3, 1e-3, 10, 1)
    return Calibration(
        name="fake",
        cpu='A "quoted" CPU',
        threads=2,
        onnxruntime="1.31.1",
        date="2025-01-01T00:00:00+00:00",
        quick=True,
        duration_s=1.0,
        peaks={"fp32": Figure(2e11, "measured: test")},
        dram_bandwidth=Figure(30e9, "measured: test"),
        cache_levels=((2e6, Figure(150e9, "measured: test")),),
        launch_overhead=Figure(0.25e-6, "measured: test"),
        run_overhead=Figure(4e-6, "measured: test"),
        efficiency={"conv": Figure(0.5, "measured: test")},
        sweep=((2e6, 150e9, timing), (64e6, 30e9, timing)),
        probes=(),
    )


# --- derivations -------------------------------------------------------------------------------------------


def _sweep(points: list[tuple[float, float]]):
    timing = Timing(1e-3, 1e-3, 1e-3, 10, 1)
    return [(ws, bw * 1e9, timing) for ws, bw in points]


def test_hierarchy_finds_plateaus_above_dram() -> None:
    points = [(64e3, 60), (256e3, 110), (1e6, 105), (4e6, 100), (16e6, 60), (32e6, 55), (64e6, 20), (256e6, 18)]
    dram, levels = hierarchy(_sweep(points), "2 threads")
    assert dram.value == pytest.approx(19e9)
    assert [(size, round(f.value / 1e9)) for size, f in levels] == [(4e6, 105), (32e6, 58)]
    for _, figure in levels:
        assert figure.source.startswith("measured")


def test_hierarchy_without_cache_effects_is_dram_only() -> None:
    dram, levels = hierarchy(_sweep([(1e6, 20), (16e6, 21), (64e6, 20), (256e6, 19)]), "1 thread")
    assert levels == () and dram.value == pytest.approx(19.5e9)


def test_hierarchy_keeps_at_most_three_levels() -> None:
    points = [(64e3, 800), (256e3, 400), (1e6, 200), (4e6, 100), (16e6, 50), (256e6, 10), (512e6, 10)]
    _, levels = hierarchy(_sweep(points), "1 thread")
    assert len(levels) == 3
    assert [size for size, _ in levels] == sorted(size for size, _ in levels)


def test_probes_cover_the_classes_and_build_valid_models() -> None:
    import onnx

    probes = efficiency_probes(quick=False)
    assert {p.op_class for p in probes} <= set(EFFICIENCY_CLASSES)
    assert {p.op_class for p in probes} >= {"matmul", "conv", "elementwise", "normalization", "softmax"}
    quick = efficiency_probes(quick=True)
    assert len({p.op_class for p in quick}) == len(quick)
    for probe in (*quick, stream_probe(1024), tiny_probe()):
        for copies in (1, 3):
            onnx.checker.check_model(probe.build(copies), full_check=True)


# --- the roofline's measured factors --------------------------------------------------------------------


def test_classify_applies_efficiency_and_cache_levels(tmp_path: Path) -> None:
    platform = load_platform(_fake_file(tmp_path))
    small = Cost(flops=1e6, bytes_read=0.5e6, bytes_written=0.5e6)  # 1 MB: fits the 2 MB level
    point = classify(small, platform, "fp32", op_class="conv")
    assert point.level == "L1" and point.bandwidth == pytest.approx(150e9, rel=1e-5)
    assert point.efficiency == pytest.approx(0.5)
    assert point.t_memory == pytest.approx(1e6 / (0.5 * 150e9), rel=1e-5)
    assert point.t_compute == pytest.approx(1e6 / (0.5 * 2e11), rel=1e-5)
    assert point.latency == pytest.approx(max(point.t_memory, point.t_compute) + 0.25e-6, rel=1e-5)
    assert point.ridge == pytest.approx(2e11 / 150e9, rel=1e-5)
    assert point.attainable_flops == pytest.approx(0.5 * min(2e11, 1.0 * 150e9), rel=1e-5)
    big = Cost(flops=1e6, bytes_read=32e6, bytes_written=32e6)
    assert classify(big, platform, "fp32").level == "dram"
    plain = classify(small, platform, "fp32", hierarchy=False)
    assert plain.level == "dram" and plain.efficiency == 1.0
    assert plain.t_memory == pytest.approx(1e6 / 30e9, rel=1e-5)
    assert classify(small, platform, "fp32", op_class="matmul").efficiency == 1.0  # no figure: no derating


def test_efficiency_is_charged_once_when_bytes_stream_from_dram(tmp_path: Path) -> None:
    """A memory-bound kernel whose working set leaves the cache levels pays DRAM's streaming time plus the
    per-byte work its class showed in the first level: ``B / W_dram + (1/e − 1) · B / W_1``, not
    ``B / (e · W_dram)`` (which charged the class's work again at DRAM's pace)."""
    from onnxroof.roofline.place import memory_efficiency

    platform = load_platform(_fake_file(tmp_path))  # conv e = 0.5; L1 ≤ 2 MB at 150 GB/s; DRAM 30 GB/s
    moved = 64e6
    big = Cost(flops=1e3, bytes_read=moved / 2, bytes_written=moved / 2)
    point = classify(big, platform, "fp32", op_class="conv")
    assert point.level == "dram" and point.efficiency == pytest.approx(0.5)
    assert point.t_memory == pytest.approx(moved / 30e9 + (1 / 0.5 - 1) * moved / 150e9, rel=1e-5)
    assert point.attainable_flops == pytest.approx(1e3 / point.t_memory, rel=1e-5)
    # the same class in the first level: e as measured there, unchanged
    small = Cost(flops=1e3, bytes_read=0.5e6, bytes_written=0.5e6)
    assert classify(small, platform, "fp32", op_class="conv").t_memory == pytest.approx(1e6 / (0.5 * 150e9), rel=1e-5)
    # e_mem: e at the first level's bandwidth, toward 1 as the level slows, never below e
    e_mem = memory_efficiency(np.array([0.5, 0.5, 0.5, 1.0]), np.array([150e9, 30e9, 300e9, 30e9]), platform)
    assert e_mem.tolist() == pytest.approx([0.5, 1 / (1 + 1 * 30 / 150), 0.5, 1.0])
    # without cache levels nothing changes
    datasheet = load_platform("xeon-8380")
    assert memory_efficiency(np.array([0.3]), np.array([1e9]), datasheet).tolist() == [0.3]


def test_skip_normalization_falls_back_to_normalization(tmp_path: Path) -> None:
    """A file calibrated before ``skip_normalization`` existed derates a fused Add + LayerNorm by its
    ``normalization`` figure; a file that has the class uses its own; neither: no derating."""
    base = _fake_calibration()
    old = replace(base, efficiency={"normalization": Figure(0.2, "measured: test")})
    new = replace(base, efficiency={"normalization": Figure(0.2, "m"), "skip_normalization": Figure(0.05, "m")})
    for calibration, expected in ((old, 0.2), (new, 0.05), (base, 1.0)):
        path = tmp_path / f"{expected}.toml"
        path.write_text(replace(calibration, name=f"p{int(expected * 100)}").to_toml(), encoding="utf-8")
        platform = load_platform(path)
        assert platform.class_efficiency("skip_normalization") == pytest.approx(expected)
        point = classify(
            Cost(flops=1e3, bytes_read=5e3, bytes_written=5e3), platform, "fp32", op_class="skip_normalization"
        )
        assert point.efficiency == pytest.approx(expected)


def _fake_file(tmp_path: Path) -> Path:
    path = tmp_path / "fake.toml"
    path.write_text(_fake_calibration().to_toml(), encoding="utf-8")
    return path


def test_op_classes() -> None:
    def op_class(op_type: str, attrs: dict | None = None, channels: int | None = None) -> str:
        return refine_conv(REGISTRY.op_class("", op_type), attrs, channels)

    assert op_class("MatMul") == "matmul" and op_class("Gemm") == "matmul"
    assert op_class("Conv", attrs={"group": 1}) == "conv"
    assert op_class("Conv", attrs={"group": 32}, channels=32) == "depthwise"
    assert op_class("Conv", attrs={"group": 4}, channels=32) == "conv"
    assert op_class("Add") == "elementwise" and op_class("Relu") == "elementwise"
    assert op_class("Erf") == "activation" and op_class("Sigmoid") == "activation"
    assert op_class("LayerNormalization") == "normalization" and op_class("BatchNormalization") == "elementwise"
    assert op_class("LRN") == "lrn"
    assert op_class("Softmax") == "softmax"
    assert op_class("MaxPool") == "pooling" and op_class("ReduceMean") == "reduction"
    assert op_class("Transpose") == "movement" and op_class("Gather") == "indexing"
    assert op_class("LSTM") == "recurrent" and op_class("NoSuchOp") == "other"
    for cls in ("matmul", "conv", "depthwise", "elementwise", "activation", "normalization", "softmax"):
        assert cls in EFFICIENCY_CLASSES


def test_kernel_classes_follow_what_the_runtime_runs() -> None:
    assert kernel_op_class(("Add", "LayerNormalization"), ("skip_layernorm",)) == "skip_normalization"
    assert kernel_op_class(("LayerNormalization",)) == "normalization"
    assert kernel_op_class(("Div", "Erf", "Add", "Mul", "Mul"), ("ort_gelu",)) == "activation"
    assert kernel_op_class(("Conv", "BatchNormalization", "Relu"), ("conv_bn", "ort_conv_activation")) == "conv"
    assert kernel_op_class(("MatMul", "Add"), ("matmul_add",)) == "matmul"
    assert kernel_op_class(("MatMul", "Div"), ("matmul_scale",)) == "matmul"
    assert kernel_op_class(("Softmax",)) == "softmax"
    assert kernel_op_class(("Add", "Mul"), ("pointwise",)) == "elementwise"
    assert kernel_op_class(("Add", "Tanh"), ("pointwise",)) == "activation"


def test_a_chain_difference_lost_in_noise_is_bounded_by_the_chain_share() -> None:
    """When load slows the chain of 1 as much as the longer chain, ``(t(1+K) − t(1)) / K`` collapses towards 0;
    the estimate stays at least a quarter of the op's share of the longer chain, ``t(1+K) / (1+K)``."""
    from onnxroof.measure.calibrate.timing import CHAIN_FLOOR, OpTimer

    timer = OpTimer.__new__(OpTimer)  # the estimate only reads the chain length
    timer.chain = 4
    assert timer._estimate([1e-3], [1e-3], 0.0) == pytest.approx(CHAIN_FLOOR * 1e-3 / 5)
    assert timer._estimate([1e-3], [5e-3], 0.0) == pytest.approx(1e-3)  # a clean difference is kept as it is
