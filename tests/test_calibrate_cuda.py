"""``onnxroof calibrate --device cuda`` on a machine without a CUDA GPU: the one-line refusal, and the platform
file written from a fake measurement (onnxroof/measure/calibrate/cuda.py)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from onnxroof.cli.commands import app
from onnxroof.measure.calibrate.cuda import CudaCalibration, CudaUnavailable, require_cuda
from onnxroof.measure.calibrate.write import Figure
from onnxroof.platform.lookup import load_platform
from onnxroof.report.measure_view import render_cuda_calibration
from onnxroof.roofline.gpu import GPU, time_model_for
from onnxroof.roofline.place import ROOFLINE


def fake(clock_hz: float | None = 1.98e9, capability: tuple[int, int] = (9, 0)) -> CudaCalibration:
    return CudaCalibration(
        name="myh200",
        gpu="NVIDIA H200",
        capability=capability,
        sm_count=132,
        l2_bytes=62_914_560,
        clock_hz=clock_hz,
        torch="2.11.0+cu130",
        cuda="13.0",
        date="2026-11-26T09:00:00Z",
        quick=True,
        duration_s=42.0,
        peaks={
            "fp32": Figure(51e12, "measured: fp32 GEMM"),
            "fp16": Figure(700e12, "measured: fp16 GEMM"),
            "int8": Figure(1200e12, "measured: int8 GEMM"),
        },
        dram_bandwidth=Figure(4.2e12, "measured: device copy"),
        launch_overhead=Figure(6.5e-6, "measured: back-to-back add_"),
        efficiency={"softmax": Figure(0.5, "measured: softmax"), "conv": Figure(0.75, "measured: conv")},
    )


def test_the_cuda_option_refuses_in_one_line_without_a_cuda_device(monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    result = CliRunner().invoke(app, ["calibrate", "--device", "cuda"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "calibrate --device cuda" in lines[0] and "sees no CUDA device" in lines[0]


def test_the_cuda_option_refuses_without_pytorch(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch raises ImportError
    with pytest.raises(CudaUnavailable, match=r"PyTorch is not installed \(pip install 'onnxroof\[torch\]'\)"):
        require_cuda()


def test_the_written_file_is_a_measured_gpu_platform(tmp_path: Path) -> None:
    path = tmp_path / "myh200.toml"
    path.write_text(fake().to_toml(), encoding="utf-8")
    p = load_platform(path)
    assert p.kind == "gpu" and p.measured and not p.sustained
    assert p.peak("fp16") == pytest.approx(700e12) and p.peak("fp32") == pytest.approx(51e12)
    assert p.dram_bandwidth == pytest.approx(4.2e12) and p.launch_overhead_s == pytest.approx(6.5e-6)
    assert p.efficiency == {"softmax": 0.5, "conv": 0.75}
    assert p.gpu is not None and p.gpu.sm_count == 132 and p.gpu.tensor_cores == "hopper"
    assert p.gpu.clock_hz == pytest.approx(1.98e9) and p.gpu.l2_size == pytest.approx(62_914_560)
    assert p.measurement["gpu"] == "NVIDIA H200" and p.measurement["torch"] == "2.11.0+cu130"
    assert "multi_processor_count" in p.sources["gpu.sm_count"]
    assert time_model_for(None, p) is GPU


def test_without_a_clock_the_file_has_no_gpu_table(tmp_path: Path) -> None:
    path = tmp_path / "noclock.toml"
    path.write_text(fake(clock_hz=None).to_toml().replace('"myh200"', '"noclock"'), encoding="utf-8")
    p = load_platform(path)
    assert p.gpu is None and "no [gpu] table" in p.notes
    assert time_model_for(None, p) is ROOFLINE


@pytest.mark.parametrize(
    ("capability", "generation"),
    [((7, 0), "volta"), ((7, 2), "volta"), ((7, 5), "turing"), ((8, 6), "ampere"), ((8, 9), "ada"), ((6, 1), "none")],
)
def test_the_tensor_core_generation_follows_the_compute_capability(capability, generation) -> None:
    assert fake(capability=capability).tensor_cores == generation


def test_the_summary_shows_every_figure(tmp_path: Path) -> None:
    buffer = io.StringIO()
    render_cuda_calibration(fake(), Console(file=buffer, width=120), tmp_path / "x.toml")
    text = buffer.getvalue()
    assert "NVIDIA H200" in text and "peak fp16" in text and "700 TFLOP/s" in text
    assert "efficiency softmax" in text and "6.5 µs" in text and "--quick" in text


@pytest.mark.parametrize(("options", "written"), [([], "cuda"), (["--name", "lab-h200"], "lab-h200")])
def test_a_cuda_calibration_is_named_cuda_unless_told(monkeypatch, tmp_path: Path, options, written) -> None:
    """The platform a GPU calibration writes is not called `host` (the CPU calibration's name)."""
    import onnxroof.measure.calibrate.cuda as cuda

    names = []

    def measure(name: str, quick: bool) -> CudaCalibration:
        names.append(name)
        return fake()

    monkeypatch.setattr(cuda, "require_cuda", lambda: None)
    monkeypatch.setattr(cuda, "measure_cuda", measure)
    out = tmp_path / "gpu.toml"
    result = CliRunner().invoke(app, ["calibrate", "--device", "cuda", "-o", str(out), *options])
    assert result.exit_code == 0, result.output
    assert names == [written]
