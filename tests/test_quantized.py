"""Quantized models costed as they are: the float samples quantized by onnxruntime's ``quantize_static``
(QuantFormat.QDQ, calibrated on seeded random inputs) and analysed next to their float originals.

tiny_cnn is first put through ``quant_pre_process`` (onnxruntime's recommended step: BatchNorm folded into the
Convs, shapes inferred), so the float model it is compared with is that pre-processed one; tiny_transformer is
quantized as it is (its symbolic-shape pre-processing fails on the position-embedding Slice).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
from onnxruntime.quantization.shape_inference import quant_pre_process

import onnxroof
from onnxroof.analysis.analyze import Analysis
from onnxroof.analysis.whatif import WhatIf
from onnxroof.core.dtypes import dtype_info
from onnxroof.fusion.opclass import kernel_op_class
from onnxroof.fusion.patterns import QDQ_PATTERNS

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
CNN_DIMS = {"batch": 1}
TRANSFORMER_DIMS = {"batch": 1, "seq": 16}
PLATFORM = "xavier"


class RandomInputs(CalibrationDataReader):
    """A few seeded random feeds for calibration (image batches, or token ids below 1000)."""

    def __init__(self, sample: str, count: int = 4, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        if sample == "tiny_cnn":
            feeds = [{"image": rng.standard_normal((1, 3, 64, 64)).astype(np.float32)} for _ in range(count)]
        else:
            feeds = [{"input_ids": rng.integers(0, 1000, (1, 16), dtype=np.int64)} for _ in range(count)]
        self._feeds: Iterator[dict[str, np.ndarray]] = iter(feeds)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._feeds, None)


def quantize_sample(sample: str, out: Path, activations: QuantType = QuantType.QInt8, preprocess: bool = True):
    """``(float model, its QDQ model)`` paths under ``out``: ``sample`` (pre-processed when asked) and its static
    QDQ quantization with ``activations`` (weights int8, per tensor)."""
    out.mkdir(parents=True, exist_ok=True)
    source = SAMPLES / f"{sample}.onnx"
    float_model = source
    if preprocess:
        float_model = out / f"{sample}_pre.onnx"
        quant_pre_process(str(source), str(float_model))
    qdq = out / f"{sample}_{'pre_' if preprocess else ''}{activations.name.lower()}_qdq.onnx"
    quantize_static(
        str(float_model), str(qdq), RandomInputs(sample), quant_format=QuantFormat.QDQ, activation_type=activations
    )
    return float_model, qdq


@pytest.fixture(scope="module")
def cnn(tmp_path_factory) -> tuple[Path, Path]:
    return quantize_sample("tiny_cnn", tmp_path_factory.mktemp("cnn"))


@pytest.fixture(scope="module")
def transformer(tmp_path_factory) -> tuple[Path, Path]:
    return quantize_sample("tiny_transformer", tmp_path_factory.mktemp("transformer"), preprocess=False)


def analyze(path: Path, dims: dict[str, int], fusion: str | None = None, **kwargs) -> Analysis:
    return onnxroof.analyze(path, platform=PLATFORM, dims=dims, fusion=fusion, **kwargs)


def qdq_kernels(analysis: Analysis, op_type: str) -> list:
    return [k for k in analysis.kernels if op_type in k.op_types]


def patterns(kernel) -> set[str]:
    return set(kernel.pattern.split("+"))


# ------------------------------------------------------------------------------------- closed-form figures


def _initializers(model: onnx.ModelProto) -> dict[str, onnx.TensorProto]:
    return {t.name: t for t in model.graph.initializer}


def _nbytes(tensor: onnx.TensorProto) -> float:
    return float(np.prod(tensor.dims, dtype=np.int64)) * dtype_info(tensor.data_type)[1]


def stored_weights(path: Path) -> tuple[float, float, float]:
    """From the QDQ file itself: (bytes of the quantized weights as stored — int8 filters, int32 biases — and of
    every other initializer a run-time node reads; bytes of the activations' scales and zero points; their
    element count). A weight's own scale and zero point are read only at load time, when it is dequantized."""
    model = onnx.load(str(path))
    inits = _initializers(model)
    weights: set[str] = set()
    activation_qparams: set[str] = set()
    for node in model.graph.node:
        if node.op_type == "DequantizeLinear" and node.input[0] in inits:
            weights.add(node.input[0])
        elif node.op_type in ("QuantizeLinear", "DequantizeLinear"):
            activation_qparams.update(name for name in node.input[1:] if name in inits)
        else:
            weights.update(name for name in node.input if name in inits)
    qparam_elements = sum(float(np.prod(inits[n].dims, dtype=np.int64)) for n in activation_qparams)
    return sum(_nbytes(inits[n]) for n in weights), sum(_nbytes(inits[n]) for n in activation_qparams), qparam_elements


# ----------------------------------------------------------------------------------------------- tiny_cnn


@pytest.mark.parametrize("fusion", ["tensorrt", "ort-cpu"])
def test_every_conv_runs_as_an_int8_qdq_kernel(cnn, fusion) -> None:
    _, qdq = cnn
    analysis = analyze(qdq, CNN_DIMS, fusion)
    convs = qdq_kernels(analysis, "Conv")
    assert len(convs) == 8
    for kernel in convs:
        assert "qdq_conv" in patterns(kernel) and kernel.precision == "int8"
        assert {"Conv", "QuantizeLinear"} <= set(kernel.op_types)
        assert kernel_op_class(kernel.op_types, kernel.patterns) == "conv"  # runs as QLinearConv
    gemm = qdq_kernels(analysis, "Gemm")
    assert [k.precision for k in gemm] == ["int8"] and "qdq_gemm" in patterns(gemm[0])
    assert {k.precision for k in analysis.kernels if QDQ_PATTERNS.isdisjoint(patterns(k))} == {"fp32"}


def test_a_qdq_conv_kernel_moves_its_int8_tensors(cnn) -> None:
    """The stem: Q(image) → [DQ → Conv(DQ(int8 W), DQ(int32 B)) → Q] reads the int8 image, 1 byte per weight,
    4 per bias element and two scale/zero-point pairs, and writes the int8 feature map."""
    _, qdq = cnn
    analysis = analyze(qdq, CNN_DIMS)
    stem = next(k for k in analysis.kernels if "Conv" in k.op_types)
    assert stem.op_types == ("Conv", "DequantizeLinear", "QuantizeLinear")
    image, weights, bias, out = 3 * 64 * 64, 16 * 3 * 3 * 3, 16, 16 * 32 * 32
    qparams = 4 + 1
    assert stem.bytes_read == image + weights * 1 + bias * 4 + 2 * qparams
    assert stem.bytes_written == out
    macs = out * 3 * 3 * 3
    assert stem.macs == macs
    assert stem.flops == 2 * image + (2 * macs + out) + 5 * out  # DQ, Conv with bias, Q with a zero point


def test_weight_bytes_are_the_stored_int8_weights(cnn) -> None:
    float_model, qdq = cnn
    quantized = analyze(qdq, CNN_DIMS)
    original = analyze(float_model, CNN_DIMS)
    weights, qparams, _ = stored_weights(qdq)
    assert quantized.totals.weight_bytes == weights + qparams
    assert original.totals.weight_bytes == 4 * original.totals.params
    assert quantized.totals.weight_bytes < 0.3 * original.totals.weight_bytes


def clip_bounds(path: Path) -> int:
    """Elements of the Clip bounds in ``path``: the quantizer removes a Clip (ReLU6) whose range the following
    QuantizeLinear's range covers, and its two scalar bounds with it."""
    return sum(2 for node in onnx.load(str(path)).graph.node if node.op_type == "Clip")


def test_params_are_the_float_models_plus_the_activation_scales(cnn) -> None:
    float_model, qdq = cnn
    _, _, qparam_elements = stored_weights(qdq)
    assert clip_bounds(qdq) == 0
    expected = analyze(float_model, CNN_DIMS).totals.params - clip_bounds(float_model) + qparam_elements
    assert analyze(qdq, CNN_DIMS).totals.params == expected


@pytest.mark.parametrize("fusion", ["tensorrt", "ort-cpu"])
def test_the_qdq_model_moves_fewer_bytes(cnn, fusion) -> None:
    """Fused, as every runtime runs it (unfused, each QuantizeLinear/DequantizeLinear is a kernel of its own that
    writes or reads float32, and the QDQ model moves more than the float one: 2.54 MB against 1.98)."""
    float_model, qdq = cnn
    quantized = analyze(qdq, CNN_DIMS, fusion).totals
    original = analyze(float_model, CNN_DIMS, fusion).totals
    sample = analyze(SAMPLES / "tiny_cnn.onnx", CNN_DIMS, fusion).totals
    assert quantized.fused.bytes < original.fused.bytes
    assert quantized.fused.bytes < sample.fused.bytes
    assert quantized.weight_bytes < original.weight_bytes


def test_a_what_if_float_precision_leaves_the_integer_kernels_at_int8(cnn) -> None:
    _, qdq = cnn
    fp16 = analyze(qdq, CNN_DIMS, whatif=WhatIf(precision="fp16"))
    assert {k.precision for k in fp16.kernels if not QDQ_PATTERNS.isdisjoint(patterns(k))} == {"int8"}
    assert {k.precision for k in fp16.kernels if QDQ_PATTERNS.isdisjoint(patterns(k))} == {"fp16"}


def test_without_preprocessing_the_batchnorms_stay_float_between_qdq_convs(tmp_path) -> None:
    float_model, qdq = quantize_sample("tiny_cnn", tmp_path, preprocess=False)
    analysis = analyze(qdq, CNN_DIMS)
    assert [k.precision for k in qdq_kernels(analysis, "Conv")] == ["int8"] * 8
    assert {k.precision for k in qdq_kernels(analysis, "BatchNormalization")} == {"fp32"}
    weights, qparams, qparam_elements = stored_weights(qdq)
    assert analysis.totals.weight_bytes == weights + qparams
    expected = analyze(float_model, CNN_DIMS).totals.params - clip_bounds(float_model) + qparam_elements
    assert analysis.totals.params == expected  # the BatchNorm scales are int8 weights now, the same count


def test_a_pointwise_kernel_around_a_qdq_unit_is_anchored_at_its_first_node(tmp_path) -> None:
    """Without pre-processing, a residual Add's QDQ unit (DequantizeLinear, DequantizeLinear, Add,
    QuantizeLinear) has DequantizeLinears that alone read a lone QuantizeLinear's output. Pointwise fusion joins
    such a unit as a unit, never as one node of a run: the kernel holds each node once and is anchored at its
    first node, like every pointwise kernel (it was anchored at the second branch's QuantizeLinear, the first
    branch's group merged into that one's)."""
    _, qdq = quantize_sample("tiny_cnn", tmp_path, preprocess=False)
    fused = onnxroof.fuse(onnxroof.cost(onnxroof.bind(onnxroof.read(qdq), CNN_DIMS)), "tensorrt")
    position = {op.id: i for i, op in enumerate(fused.costed.bound.ir.ops)}
    pointwise = [k for k in fused.kernels if "pointwise" in k.patterns]
    assert len(pointwise) >= 3
    for kernel in pointwise:
        at = [position[node] for node in kernel.node_ids]
        assert at[0] == min(at) and len(set(at)) == len(at)
    (residual,) = [k for k in pointwise if "qdq_add" in k.patterns and "layer2" in k.node_ids[0]]
    assert residual.node_ids[0].endswith("/layer2/layer2.downsample/BatchNormalization_output_0_QuantizeLinear")


# --------------------------------------------------------------------------------------- tiny_transformer


def test_transformer_matmuls_run_as_int8_qdq_kernels(transformer) -> None:
    float_model, qdq = transformer
    analysis = analyze(qdq, TRANSFORMER_DIMS)
    matmuls = qdq_kernels(analysis, "MatMul")
    assert len(matmuls) == 16  # the 12 projections and the 4 attention products (both operands dequantized)
    assert all("qdq_matmul" in patterns(k) and k.precision == "int8" for k in matmuls)
    assert {kernel_op_class(k.op_types, k.patterns) for k in matmuls} == {"matmul"}  # runs as QLinearMatMul
    original = analyze(float_model, TRANSFORMER_DIMS)
    assert analysis.totals.weight_bytes < 0.3 * original.totals.weight_bytes
    assert 0 < analysis.totals.params - original.totals.params <= stored_weights(qdq)[2]


def test_a_gpu_compiler_fuses_leftover_q_and_dq_so_the_qdq_transformer_moves_fewer_bytes(transformer) -> None:
    """TensorRT-like pointwise fusion takes the Q/DQ left around views and residual Adds into their elementwise
    neighbours; ort-cpu runs them as kernels of their own (and the QDQ transformer then moves more)."""
    float_model, qdq = transformer
    assert analyze(qdq, TRANSFORMER_DIMS, "tensorrt").totals.fused.bytes < (
        analyze(float_model, TRANSFORMER_DIMS, "tensorrt").totals.fused.bytes
    )
    fused_qdq = [
        k
        for k in analyze(qdq, TRANSFORMER_DIMS, "tensorrt").kernels
        if "pointwise" in k.pattern and {"QuantizeLinear", "DequantizeLinear"} & set(k.op_types)
    ]
    assert fused_qdq, "no Q/DQ joined a pointwise kernel"
