"""Measured GPU kernels against the gpu time model (onnxroof/measure/gpu_kernels.py): the CSV schema on a
hand-made fixture, and the model's per-kernel and per-kind median error on the committed H200 measurements
(benchmarks/data/gpu/kernels.csv), skipped with the reason when they are absent."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

from onnxroof.core.descriptor import ConvGeometry
from onnxroof.core.gemm import GemmShape
from onnxroof.measure.gpu_kernels import KernelDataError, predict, read_kernels, row_work, summarize
from onnxroof.platform.lookup import load_platform
from onnxroof.roofline.gpu import GPU
from onnxroof.roofline.place import ROOFLINE, place
from onnxroof.runtime.lookup import load_runtime

ROOT = Path(__file__).parent.parent
FIXTURE = Path(__file__).parent / "data" / "gpu" / "kernels_fixture.csv"
MEASURED = ROOT / "benchmarks" / "data" / "gpu" / "kernels.csv"
RUN2 = ROOT / "benchmarks" / "data" / "gpu" / "run2" / "kernels.csv"


def test_the_fixture_rows_become_descriptors() -> None:
    kernels = read_kernels(FIXTURE)
    assert [k.kind for k in kernels] == ["gemm", "gemv", "conv", "conv", "elementwise", "softmax"]
    gemm, gemv, stem, depthwise = (k.descriptor for k in kernels[:4])
    assert gemm.gemm == GemmShape(1, 256, 256, 64, 64, 256) and gemm.op_class == "matmul"
    assert gemv.gemm is not None and gemv.gemm.m == 1 and gemv.dtype == "bfloat16"
    # 224 × 224, 7×7 stride 2 pad 3: ⌊(224 + 6 − 6 − 1) / 2⌋ + 1 = 112 outputs a side
    assert stem.gemm == GemmShape(1, 112 * 112, 64, 3 * 49) and stem.op_class == "conv"
    assert stem.conv == ConvGeometry(1, 1, 3, 64, (7, 7), (2, 2), (1, 1))
    assert depthwise.op_class == "depthwise" and depthwise.gemm == GemmShape(32, 56 * 56, 1, 9)
    assert kernels[4].descriptor.op_class == "elementwise" and kernels[5].descriptor.op_class == "softmax"
    work = row_work(kernels)
    assert work.launches.tolist() == [0.0] * 6 and work.cold_bytes.tolist() == work.bytes.tolist()


def test_attention_rows_are_decode_at_one_query_token_else_prefill(tmp_path: Path) -> None:
    header = FIXTURE.read_text(encoding="utf-8").splitlines()[0]
    columns = header.split(",")

    def sdpa(q_len: int) -> str:
        cells = dict.fromkeys(columns, "")
        cells |= {"kind": "sdpa", "op": "sdpa", "dtype": "bf16", "batch": "1", "heads": "32", "kv_heads": "8"}
        cells |= {"q_len": str(q_len), "kv_len": "512", "head_dim": "64", "flops": "1e9", "bytes": "1e6"}
        cells["time_s"] = "1e-05"
        return ",".join(cells[column] for column in columns)

    path = tmp_path / "kernels.csv"
    path.write_text("\n".join([header, sdpa(1), sdpa(512)]) + "\n", encoding="utf-8")
    decode, prefill = read_kernels(path)
    assert (decode.queries, prefill.queries) == (1, 512)
    classes = row_work((decode, prefill)).runtime_class
    assert classes is not None and classes.tolist() == ["decode_attention", "prefill_attention"]
    # torch-cuda's prefill_attention factor (fitted on run 1's even prefill rows) slows the prefill row only
    h200, torch_cuda = load_platform("h200"), load_runtime("torch-cuda")
    plain, scaled = predict((decode, prefill), h200, GPU), predict((decode, prefill), h200, GPU, torch_cuda)
    assert scaled[0] == plain[0] and scaled[1] > plain[1]


def test_predictions_are_placement_on_h200() -> None:
    kernels = read_kernels(FIXTURE)
    h200 = load_platform("h200")
    assert predict(kernels, h200, GPU).tolist() == place(row_work(kernels), h200, GPU).latency_s.tolist()
    # the 256×256×64 fp16 GEMM fills no wave of 132 SMs: far from its roofline time, never below it
    gpu, roof = predict(kernels[:1], h200, GPU)[0], predict(kernels[:1], h200, ROOFLINE)[0]
    assert gpu > 2 * roof


def test_the_summary_is_the_median_absolute_error_per_kind() -> None:
    kernels = read_kernels(FIXTURE)
    measured = [k.time_s for k in kernels]
    factors = [1.1, 0.5, 2.0, 1.0, 0.8, 1.3]  # errors +10%, −50%, +100%, 0, −20%, +30%
    summary = summarize(kernels, [t * f for t, f in zip(measured, factors, strict=True)])
    assert summary.rows == 6
    assert summary.median == pytest.approx(statistics.median([0.1, 0.5, 1.0, 0.0, 0.2, 0.3]))
    by_kind = {kind: (error, rows) for kind, error, rows in summary.by_kind}
    assert by_kind["conv"] == (pytest.approx(0.5), 2) and by_kind["gemv"] == (pytest.approx(0.5), 1)
    assert summary.by_kind[0][1] == max(error for _, error, _ in summary.by_kind)  # worst kind first


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("kind", "fft", "column 'kind' must be one of"),
        ("dtype", "fp64", "column 'dtype' must be one of"),
        ("time_s", "fast", "column 'time_s' is not a number: 'fast'"),
        ("time_s", "0", "column 'time_s' must be positive"),
    ],
)
def test_a_bad_row_is_one_line_naming_file_row_and_column(tmp_path: Path, column, value, message) -> None:
    header, first, *_ = FIXTURE.read_text(encoding="utf-8").splitlines()
    cells = dict(zip(header.split(","), first.split(","), strict=True))
    cells[column] = value
    path = tmp_path / "kernels.csv"
    path.write_text(header + "\n" + ",".join(cells.values()) + "\n", encoding="utf-8")
    with pytest.raises(KernelDataError) as info:
        read_kernels(path)
    assert f"{path}: row 2: {message}" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.skipif(not MEASURED.exists(), reason=f"{MEASURED.relative_to(ROOT)} absent: no GPU measurements yet")
def test_the_gpu_model_on_the_measured_h200_kernels(capsys) -> None:
    # the fixed kernel times, MAX_SPLIT_K and torch-cuda's normalization and softmax factors were fitted on run 1's
    # even rows (benchmarks/fit_gpu_kernels.py): the odd rows are the held-out check; docs/accuracy.md has the table
    kernels = read_kernels(MEASURED)
    h200 = load_platform("h200")
    held_out = kernels[1::2]
    gpu = summarize(held_out, predict(held_out, h200, GPU, load_runtime("torch-cuda")))
    roof = summarize(held_out, predict(held_out, h200, ROOFLINE))
    with capsys.disabled():
        print(f"\nH200 kernels, held-out rows: gpu median |error| {gpu.median:.1%}, roofline {roof.median:.1%}")
        for kind, error, rows in gpu.by_kind:
            print(f"  {kind:12} {error:6.1%}  ({rows} rows)")
    assert gpu.median < roof.median / 2
    assert gpu.median <= 0.19  # measured 17.9% (22.5% before split-K was bounded; target 15%: docs/accuracy.md)


@pytest.mark.skipif(not RUN2.exists(), reason=f"{RUN2.relative_to(ROOT)} absent: no second GPU run")
def test_the_gpu_model_on_run_2_which_no_fit_saw() -> None:
    # run 2 (the same H200 an hour later) played no part in any fit: every row is held out
    kernels = read_kernels(RUN2)
    torch_cuda = load_runtime("torch-cuda")
    gpu = summarize(kernels, predict(kernels, load_platform("h200"), GPU, torch_cuda))
    assert gpu.median <= 0.155  # measured 14.1% (19.2% before the kernel re-fit, 14.7% before the grouped share)
    by_kind = {kind: error for kind, error, _ in gpu.by_kind}
    assert by_kind["softmax"] <= 0.30  # 24%: torch-cuda's softmax factor, fitted on run 1 (54% without it)
    # the calibrated platform (onnxroof calibrate --device cuda on that H200), no runtime factors: 14.6%
    calibrated = load_platform(RUN2.parent / "h200-calibrated.toml")
    assert summarize(kernels, predict(kernels, calibrated, GPU)).median <= 0.155


RUN3 = ROOT / "benchmarks" / "data" / "gpu" / "run3"


@pytest.mark.skipif(not (RUN3 / "models.csv").exists(), reason="no whole-model GPU measurements")
def test_the_gpu_model_on_whole_models_replayed(capsys) -> None:
    # benchmarks/bench_gpu_models.py: 10 torchvision models at batch 1 and 32, BatchNorm folded, replayed as one
    # CUDA graph on the H200; nothing was fitted on these rows
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_gpu_models as bench

    rows = bench.predict_rows(RUN3, "cuda-graph-folded", RUN3.parent / "run2" / "onnx.tar.gz", bench.DEFAULT_RUNTIME)
    errors = bench.median_errors(rows)
    with capsys.disabled():
        print(f"\nH200 whole models: gpu median |error| {errors['gpu']:.1%}, roofline {errors['roofline']:.1%}")
    assert sum("predicted" in row for row in rows) == 20
    assert errors["gpu"] <= 0.30  # measured 29.3% (40.3% before the bias pass of PyTorch's convolutions)
    assert errors["gpu"] < errors["roofline"] / 2
