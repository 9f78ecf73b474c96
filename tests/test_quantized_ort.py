"""The QDQ kernels of the ``ort-cpu`` profile against ONNX Runtime itself.

ONNX Runtime's CPU provider at ORT_ENABLE_EXTENDED turns each QDQ node unit (DequantizeLinear → Conv / MatMul /
Gemm / Add / Mul / GlobalAveragePool / Sigmoid / LeakyRelu → QuantizeLinear) into one QLinearConv, QLinearMatMul,
com.microsoft.QGemm, QLinearAdd... node. Each model is optimized by onnxruntime (``optimized_model_filepath``) and
the quantized ops counted in the optimized graph; onnxroof must predict one QDQ kernel per such node, op type by op
type. Models: tiny_cnn and tiny_transformer quantized by ``quantize_static`` (int8 and uint8 activations) and
small graphs written for one condition each.

Sessions with int8 activations set ``session.qdqisint8allowed=1`` (ORT's default on ARM): on x86-64 ORT otherwise
converts int8-activation units only after rewriting their Q/DQ pairs to uint8, which skips a QuantizeLinear read
by several DequantizeLinear (of the int8 tiny_cnn's 8 Convs, 4 convert after quant_pre_process, 5 without). uint8
activations convert either way and run with the default settings.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import onnx
import onnxruntime as ort
import pytest
from helpers import parse_model
from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
from test_quantized import CNN_DIMS, TRANSFORMER_DIMS, RandomInputs, quantize_sample

import onnxroof
from onnxroof.core.ir import build_ir
from onnxroof.costing.node import cost_node
from onnxroof.fusion.fuse import fuse
from onnxroof.fusion.patterns import PATTERNS_BY_NAME, EdgePattern
from onnxroof.load.reader import load_model
from onnxroof.rules import REGISTRY

#: The QDQ patterns and the quantized op ONNX Runtime makes of each.
MAKES = {
    p.name: p.produces
    for p in PATTERNS_BY_NAME.values()
    if isinstance(p, EdgePattern) and p.name.startswith("qdq_") and p.produces is not None
}
TRACKED = frozenset(MAKES.values())


def ort_optimized(path: Path, tmp: Path, dims: dict[str, int], int8_allowed: bool) -> onnx.ModelProto:
    """ONNX Runtime's optimized graph of ``path`` (CPU provider, ORT_ENABLE_EXTENDED, CSE off)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(tmp / "optimized.onnx")
    options.log_severity_level = 3
    if int8_allowed:
        options.add_session_config_entry("session.qdqisint8allowed", "1")
    for name, value in dims.items():
        options.add_free_dimension_override_by_name(name, value)
    ort.InferenceSession(
        str(path), options, providers=["CPUExecutionProvider"], disabled_optimizers=["CommonSubexpressionElimination"]
    )
    return onnx.load(str(tmp / "optimized.onnx"))


def ort_counts(path: Path, tmp: Path, dims: dict[str, int], int8_allowed: bool = True) -> Counter[str]:
    """The quantized ops in ONNX Runtime's optimized graph."""
    optimized = ort_optimized(path, tmp, dims, int8_allowed)
    return Counter(node.op_type for node in optimized.graph.node if node.op_type in TRACKED)


def predicted_counts(path: Path, dims: dict[str, int] | None = None) -> Counter[str]:
    """The quantized ops onnxroof's ``ort-cpu`` kernels predict: one per QDQ kernel."""
    loaded = load_model(path, dims)
    ir = build_ir(loaded.model, loaded.value_types, view_ops=REGISTRY.view_ops)
    costs = {op.id: cost_node(op, ir, loaded.model.graph) for op in ir.ops}
    counts: Counter[str] = Counter()
    for kernel in fuse(ir, costs, "ort-cpu").kernels:
        counts.update(MAKES[name] for name in kernel.patterns if name in MAKES)
    return counts


# ------------------------------------------------------------------------------------ quantized samples

SAMPLE_CASES = {
    "tiny_cnn(int8)": ("tiny_cnn", QuantType.QInt8, True, CNN_DIMS),
    "tiny_cnn(uint8)": ("tiny_cnn", QuantType.QUInt8, True, CNN_DIMS),
    "tiny_cnn(int8, BatchNorm kept)": ("tiny_cnn", QuantType.QInt8, False, CNN_DIMS),
    "tiny_transformer(int8)": ("tiny_transformer", QuantType.QInt8, False, TRANSFORMER_DIMS),
    "tiny_transformer(uint8)": ("tiny_transformer", QuantType.QUInt8, False, TRANSFORMER_DIMS),
}
#: ONNX Runtime's counts on these models (onnxruntime 1.32), so that a drift on either side shows.
SAMPLE_EXPECTED = {
    "tiny_cnn": {"QLinearConv": 8, "QLinearAdd": 2, "QLinearGlobalAveragePool": 1, "QGemm": 1},
    "tiny_transformer": {"QLinearMatMul": 16, "QLinearAdd": 19, "QLinearMul": 4},
}


@pytest.mark.parametrize("case", list(SAMPLE_CASES))
def test_qdq_kernels_predict_onnxruntime_on_quantized_samples(case, tmp_path) -> None:
    sample, activations, preprocess, dims = SAMPLE_CASES[case]
    _, qdq = quantize_sample(sample, tmp_path / "model", activations, preprocess)
    expected = ort_counts(qdq, tmp_path, dims, int8_allowed=activations == QuantType.QInt8)
    assert predicted_counts(qdq, dims) == expected
    assert dict(expected) == SAMPLE_EXPECTED[sample]


def test_a_qoperator_model_is_costed_at_int8_like_the_float_one(tmp_path) -> None:
    """The same quantization in QOperator format (QLinearConv nodes; the com.microsoft ops ONNX's shape inference
    cannot follow left out): each QLinearConv is costed at int8 with the MACs of the float Conv it replaced."""
    float_model, _ = quantize_sample("tiny_cnn", tmp_path, QuantType.QUInt8)
    qoperator = tmp_path / "qoperator.onnx"
    quantize_static(
        str(float_model),
        str(qoperator),
        RandomInputs("tiny_cnn"),
        quant_format=QuantFormat.QOperator,
        activation_type=QuantType.QUInt8,
        op_types_to_quantize=["Conv"],
    )
    quantized = onnxroof.analyze(qoperator, platform="xavier", dims=CNN_DIMS)
    original = onnxroof.analyze(float_model, platform="xavier", dims=CNN_DIMS)
    convs = {n.name: n for n in original.nodes if n.op_type == "Conv"}
    integer = [n for n in quantized.nodes if n.op_type == "QLinearConv"]
    assert len(integer) == len(convs) == 8
    for node in integer:
        assert (node.state, node.dtype, node.precision) == ("costed", "uint8", "int8")
        assert node.macs == convs[node.name.removesuffix("_quant")].macs


# ------------------------------------------------------------------------------------ one condition each

S8 = "float s = {0.05}, int8 z = {0}"
U8 = "float su = {0.05}, uint8 zu = {128}"
CONV_W = (
    f"int8[8,8,3,3] Wq = {{{','.join(['1'] * 576)}}}, int8[8,1,3,3] Wdq = {{{','.join(['1'] * 72)}}}, "
    f"float ws = {{0.01}}, int8 wz = {{0}}, float[8,8,3,3] Wf = {{{','.join(['0.01'] * 576)}}}"
)
CONV_B = "int32[8] Bq = {1,2,3,4,5,6,7,8}, float bs = {0.0005}, float[8] Bf = {1,2,3,4,5,6,7,8}"
MM_W = (
    f"int8[16,16] Mq = {{{','.join(['2'] * 256)}}}, float ms = {{0.02}}, int8 mz = {{0}}, "
    f"float[16,16] Mf = {{{','.join(['0.02'] * 256)}}}"
)
MM_B = f"int32[16] Gq = {{{','.join(['3'] * 16)}}}, float gs = {{0.001}}"
X = "float[1,8,16,16]"
A = "float[4,16]"
CONV = "c = Conv<pads=[1,1,1,1]>(xd, w)"


def _model(body: str, inputs: str, outputs: str) -> str:
    inits = ", ".join((S8, U8, CONV_W, CONV_B, MM_W, MM_B))
    return f'<ir_version: 8, opset_import: ["" : 17]>\ng ({inputs}) => ({outputs})\n<{inits}>\n{{\n{body}\n}}'


def quantized(name: str, value: str, s: str = "s", z: str = "z") -> str:
    """``name`` = DequantizeLinear(QuantizeLinear(``value``)): a quantized activation."""
    return f"{name}q = QuantizeLinear({value}, {s}, {z})\n{name} = DequantizeLinear({name}q, {s}, {z})\n"


def requantized(value: str = "c", s: str = "s", z: str = "z") -> str:
    """The graph output ``y``: ``value`` quantized and dequantized."""
    return f"cq = QuantizeLinear({value}, {s}, {z})\ny = DequantizeLinear(cq, {s}, {z})"


def conv(op: str = CONV, after: str = "", s: str = "s", z: str = "z", out: tuple[str, str] = ("s", "z")) -> str:
    weights = "w = DequantizeLinear(Wq, ws, wz)\nwd = DequantizeLinear(Wdq, ws, wz)\nb = DequantizeLinear(Bq, bs)\n"
    body = quantized("xd", "x", s, z) + weights + op + "\n" + (after or requantized("c", *out))
    return _model(body, f"{X} x", f"{X} y")


def matmul(op: str, inputs: str = f"{A} x") -> str:
    weights = "w = DequantizeLinear(Mq, ms, mz)\nb = DequantizeLinear(Gq, gs)\n"
    return _model(quantized("xd", "x") + weights + op + "\n" + requantized(), inputs, "float[4,16] y")


def elementwise(op: str, b: str = "b", s: str = "s", z: str = "z", out: str = "float[2,8,4,4] y") -> str:
    body = quantized("ad", "a") + quantized("bd", b, s, z) + f"c = {op}\n" + requantized()
    return _model(body, "float[2,8,4,4] a, float[2,8,4,4] b", out)


MICRO: dict[str, str] = {
    "conv": conv(),
    "conv+int32 bias": conv("c = Conv<pads=[1,1,1,1]>(xd, w, b)"),
    "conv+float bias (ORT quantizes it)": conv("c = Conv<pads=[1,1,1,1]>(xd, w, Bf)"),
    "conv(float weight, ORT quantizes it)": conv("c = Conv<pads=[1,1,1,1]>(xd, Wf, Bf)"),
    "conv(depthwise)": conv("c = Conv<pads=[1,1,1,1], group=8>(xd, wd)"),
    "conv(no QuantizeLinear after)": conv(after="y = Relu(c)"),
    "conv+relu+QuantizeLinear": conv(after="r = Relu(c)\n" + requantized("r")),
    "conv(output also read by a Relu)": conv(after=quantized("d", "c") + "r = Relu(c)\ny = Add(d, r)"),
    "conv(shared input DequantizeLinear)": conv(
        CONV + "\nc2 = Conv<pads=[1,1,1,1]>(xd, w)",
        after=quantized("d1", "c") + quantized("d2", "c2") + "y = Add(d1, d2)",
    ),
    "conv(uint8)": conv(s="su", z="zu", out=("su", "zu")),
    "conv(uint8 in, int8 out)": conv(s="su", z="zu"),
    "matmul": matmul("c = MatMul(xd, w)"),
    "matmul(float weight)": matmul("c = MatMul(xd, Mf)"),
    "matmul(two activations)": matmul(quantized("x2d", "x2") + "c = MatMul(xd, x2d)", f"{A} x, float[16,16] x2"),
    "matmul+add(int32 bias)": matmul("m = MatMul(xd, w)\n" + quantized("md", "m") + "c = Add(md, b)"),
    "gemm+bias": matmul("c = Gemm<transB=1>(xd, w, b)"),
    "gemm(beta=0.5)+bias": matmul("c = Gemm<transB=1, beta=0.5>(xd, w, b)"),
    "gemm(no bias)": matmul("c = Gemm(xd, w)"),
    "add": elementwise("Add(ad, bd)"),
    "add(mixed int8 and uint8)": elementwise("Add(ad, bd)", s="su", z="zu"),
    "add(one float operand)": elementwise("Add(ad, b)"),
    "mul": elementwise("Mul(ad, bd)"),
    "sigmoid": elementwise("Sigmoid(ad)"),
    "leakyrelu": elementwise("LeakyRelu<alpha=0.1>(ad)"),
    "globalaveragepool": elementwise("GlobalAveragePool(ad)", out="float[2,8,1,1] y"),
}


def _write(name: str, tmp: Path) -> Path:
    model = parse_model(MICRO[name])
    for i, node in enumerate(model.graph.node):  # ORT keeps the names of the nodes it does not touch
        node.name = node.name or f"n{i}"
    path = tmp / f"{name}.onnx"
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("name", list(MICRO))
def test_qdq_kernels_predict_onnxruntime_condition_by_condition(name, tmp_path) -> None:
    path = _write(name, tmp_path)
    assert predicted_counts(path) == ort_counts(path, tmp_path, {})


def test_the_micro_graphs_exercise_every_qdq_pattern_and_its_refusals(tmp_path) -> None:
    made: Counter[str] = Counter()
    refused = []
    for name in MICRO:
        counts = predicted_counts(_write(name, tmp_path))
        made.update(counts)
        if not counts:
            refused.append(name)
    assert set(made) == TRACKED
    assert len(refused) == 8, refused


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("matmul(float weight)", "input 'B' ('Mf') is a float weight, not dequantized: QLinearMatMul needs every"),
        ("conv(uint8 in, int8 out)", "'s input is uint8: QLinearConv takes one type for both"),
        ("gemm(beta=0.5)+bias", "scales its bias by beta=0.5; QGemm takes beta = 1 only"),
        ("add(mixed int8 and uint8)", "mixes int8 and uint8 operands; QLinearAdd takes one type"),
        ("conv(output also read by a Relu)", "feeds 2 nodes (QuantizeLinear"),
        ("conv(shared input DequantizeLinear)", "ONNX Runtime gives each consumer its own copy"),
    ],
)
def test_a_refused_qdq_kernel_says_why(name, reason, tmp_path) -> None:
    analysis = onnxroof.analyze(_write(name, tmp_path), platform="xavier", fusion="ort-cpu")
    reasons = [m.reason for m in analysis.fusion_misses if m.pattern.startswith("qdq_")]
    assert any(reason in r for r in reasons), reasons
