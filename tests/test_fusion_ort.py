"""The ``ort-cpu`` fusion profile against ONNX Runtime itself.

Each model is optimized by onnxruntime (CPUExecutionProvider, ORT_ENABLE_EXTENDED, ``optimized_model_filepath``)
and the fusions it made are counted in the optimized graph; onnxroof's ``ort-cpu`` kernels must predict the same
counts. Models: the nine light models in the onnx wheel, ``samples/*.onnx`` (batch=1, seq=16) and small graphs
written for one fusion each.

ONNX Runtime's common-subexpression elimination is disabled: the light models' weights are all
``ConstantOfShape`` fills, so parallel branches with equal shapes have equal weights and CSE merges them (9 of
inception_v2's 69 Conv+BN pairs vanish that way), which is not fusion. Large initializers go to an external file
so that writing the optimized model stays fast.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import onnx
import onnx.parser
import onnxruntime as ort
import pytest

from onnxroof.core.ir import build_ir
from onnxroof.costing.node import cost_node
from onnxroof.fusion.fuse import FusionResult, fuse
from onnxroof.load.reader import load_model
from onnxroof.rules import REGISTRY

LIGHT = Path(onnx.__file__).resolve().parent / "backend" / "test" / "data" / "light"
SAMPLES = Path(__file__).resolve().parents[1] / "samples"
DIMS = {"batch": 1, "seq": 16}
#: Op types whose count fusion changes: the fused ops ORT makes and the ops they replace.
TRACKED = (
    "BatchNormalization",
    "Conv",
    "FusedConv",
    "MatMul",
    "Gemm",
    "FusedGemm",
    "FusedMatMul",
    "Gelu",
    "BiasGelu",
    "QuickGelu",
    "LayerNormalization",
    "SimplifiedLayerNormalization",
    "SkipLayerNormalization",
    "Softmax",
    "Attention",
    "MultiHeadAttention",
)
#: What ORT turns a kernel into, by the outermost pattern applied (first match wins).
MAKES = (
    ("ort_conv_activation", "FusedConv"),
    ("ort_gemm_activation", "FusedGemm"),
    ("skip_layernorm", "SkipLayerNormalization"),
    ("bias_gelu", "BiasGelu"),
    ("matmul_add", "Gemm"),
    ("ort_layernorm", "LayerNormalization"),
    ("ort_rmsnorm", "SimplifiedLayerNormalization"),
    ("ort_gelu", "Gelu"),
    ("silu", "QuickGelu"),
)

# ------------------------------------------------------------------------------------- both sides' counts


def ort_optimized(path: Path, tmp: Path) -> onnx.ModelProto:
    """ONNX Runtime's optimized graph of ``path`` (CPU provider, ORT_ENABLE_EXTENDED, CSE off)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    options.optimized_model_filepath = str(tmp / "optimized.onnx")
    options.log_severity_level = 3
    options.add_session_config_entry("session.optimized_model_external_initializers_file_name", "optimized.bin")
    options.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "4096")
    for name, value in DIMS.items():
        options.add_free_dimension_override_by_name(name, value)
    ort.InferenceSession(
        str(path), options, providers=["CPUExecutionProvider"], disabled_optimizers=["CommonSubexpressionElimination"]
    )
    return onnx.load(str(tmp / "optimized.onnx"), load_external_data=False)


def changes(counts: Counter[str]) -> dict[str, int]:
    """The tracked op-count changes, plus the three headline figures."""
    delta = {op: counts[op] for op in TRACKED if counts[op]}
    delta["bn_folds"] = -counts["BatchNormalization"]
    delta["FusedConv"] = counts["FusedConv"]
    delta["FusedGemm"] = counts["FusedGemm"]
    return delta


def ort_changes(path: Path, tmp: Path) -> dict[str, int]:
    """How ONNX Runtime's optimized graph differs from the original, in op counts."""
    original = onnx.load(str(path), load_external_data=False)
    optimized = ort_optimized(path, tmp)
    counts = Counter(n.op_type for n in optimized.graph.node)
    counts.subtract(Counter(n.op_type for n in original.graph.node))
    return changes(counts)


def fused(path: Path) -> tuple[FusionResult, dict[str, str]]:
    loaded = load_model(path, DIMS)
    ir = build_ir(loaded.model, loaded.value_types, view_ops=REGISTRY.view_ops)
    costs = {op.id: cost_node(op, ir, loaded.model.graph) for op in ir.ops}
    return fuse(ir, costs, "ort-cpu"), {op.id: op.op_type for op in ir.ops}


def made_by_ort(patterns: tuple[str, ...], anchor: str) -> str:
    for pattern, op_type in MAKES:
        if pattern in patterns:
            return op_type
    if anchor == "MatMul" and ("transpose_matmul" in patterns or "matmul_scale" in patterns):
        return "FusedMatMul"
    return anchor  # a fold keeps the Conv; a Transpose absorbed by a Gemm keeps the Gemm


def onnxroof_changes(path: Path) -> dict[str, int]:
    """The same op-count changes as onnxroof's ``ort-cpu`` kernels predict them: each multi-node kernel
    replaces its members by the one op ORT makes of them."""
    result, op_type = fused(path)
    counts: Counter[str] = Counter()
    for kernel in result.kernels:
        if len(kernel.node_ids) > 1:
            counts.subtract(op_type[n] for n in kernel.node_ids)
            counts[made_by_ort(kernel.patterns, op_type[kernel.node_ids[0]])] += 1
    return changes(counts)


# -------------------------------------------------------------------------------------- real models

MODELS = sorted(LIGHT.glob("light_*.onnx")) + sorted(SAMPLES.glob("*.onnx"))


@pytest.mark.parametrize("path", MODELS, ids=[p.stem for p in MODELS])
def test_ort_cpu_profile_predicts_onnxruntime_on_real_models(path, tmp_path):
    expected = ort_changes(path, tmp_path)
    predicted = onnxroof_changes(path)
    headline = ("bn_folds", "FusedConv", "FusedGemm")
    assert {k: predicted[k] for k in headline} == {k: expected[k] for k in headline}
    assert predicted == expected


def test_the_real_models_exercise_the_three_counted_fusions():
    seen: Counter[str] = Counter()
    for path in MODELS:
        seen.update(onnxroof_changes(path))
    assert seen["bn_folds"] > 0 and seen["FusedConv"] > 0 and seen["FusedGemm"] > 0


# --------------------------------------------------------------------------------- one fusion per graph

C = 8
X = f"float[1,{C},16,16]"
S = "float[2,16,64]"


def _values(n: int, v: float = 0.1) -> str:
    return ",".join([str(v)] * n)


def _model(body: str, inputs: str, outputs: str, inits: str = "", opset: int = 17) -> str:
    init_block = f"<{inits}>\n" if inits else ""
    return f'<ir_version: 8, opset_import: ["" : {opset}]>\ng ({inputs}) => ({outputs})\n{init_block}{{\n{body}\n}}'


CONV_INITS = (
    f"float[{C},{C},3,3] Wc = {{{_values(C * C * 9)}}}, "
    + ", ".join(f"float[{C}] {n} = {{{_values(C, 1.0)}}}" for n in ("s", "b", "mu", "var"))
    + f", float[{C},1,1] sc = {{{_values(C, 2.0)}}}, float sk = {{2.0}}, float lo = {{0.0}}, float hi = {{6.0}}"
)
CONV = "c = Conv<pads=[1,1,1,1]>(x, Wc)\n"


def conv(body: str, inputs: str = f"{X} x", outputs: str = f"{X} y") -> str:
    return _model(CONV + body, inputs, outputs, CONV_INITS)


GEMM_INITS = f"float[8,8] W = {{{_values(64)}}}, float[8] B = {{{_values(8)}}}, float lo = {{0.0}}, float hi = {{6.0}}"


def gemm(act: str, extra: str = "") -> str:
    return _model(f"c = Gemm(x, W, B)\ny = {act}(c{extra})", "float[4,8] x", "float[4,8] y", GEMM_INITS)


def matmul_add(a: str = "4,8", bias: str = "float[8] B2 = {" + _values(8) + "}", add: str = "c, B2") -> str:
    return _model(
        f"c = MatMul(x, W)\nd = Add({add})\ny = Relu(d)",
        f"float[{a}] x",
        f"float[{a}] y",
        f"float[8,8] W = {{{_values(64)}}}, {bias}",
    )


SCALARS = "float two = {2.0}, float eps = {1e-5}, float one = {1.0}, float half = {0.5}, float k = {1.4142135}"
NORM_INITS = f"{SCALARS}, float[64] gamma = {{{_values(64, 1.0)}}}, float[64] beta = {{{_values(64, 0.0)}}}"
WEIGHTS_64 = f"float[64,64] W = {{{_values(4096, 0.01)}}}, float[64] B = {{{_values(64)}}}"


def fn(body: str, inputs: str = f"{S} x", outputs: str = f"{S} y", inits: str = NORM_INITS, opset: int = 17) -> str:
    return _model(body, inputs, outputs, inits, opset)


def on(value: str, text: str) -> str:
    """``text`` with its input ``x`` renamed to ``value``."""
    return text.replace("(x,", f"({value},").replace("(x)", f"({value})").replace(", x)", f", {value})")


GELU = "sd = Div(x, k)\ne = Erf(sd)\na = Add(e, one)\nm = Mul(x, a)\ny = Mul(m, half)"
LN = (
    "m = ReduceMean<axes=[-1]>(x)\nd = Sub(x, m)\np = Pow(d, two)\nv = ReduceMean<axes=[-1]>(p)\ne = Add(v, eps)\n"
    "sd = Sqrt(e)\nn = Div(d, sd)\ng = Mul(n, gamma)\ny = Add(g, beta)"
)
RMS = "p = Pow(x, two)\nv = ReduceMean<axes=[-1]>(p)\ne = Add(v, eps)\nsd = Sqrt(e)\nn = Div(x, sd)\ny = Mul(n, gamma)"

MICRO: dict[str, str] = {
    **{f"conv+{a}": conv(f"y = {a}(c)") for a in ("Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "Elu")},
    "conv+Clip(const)": conv("y = Clip(c, lo, hi)"),
    "conv+Clip(run-time)": conv("y = Clip(c, l2)", inputs=f"{X} x, float l2"),
    "conv+bn+relu": conv("n = BatchNormalization(c, s, b, mu, var)\ny = Relu(n)"),
    "conv(bias)+bn": conv("y = BatchNormalization(c, s, b, mu, var)").replace("(x, Wc)", "(x, Wc, b)"),
    "convtranspose+bn": conv("y = BatchNormalization(c, s, b, mu, var)").replace("Conv<", "ConvTranspose<"),
    "conv+relu+bn": conv("r = Relu(c)\ny = BatchNormalization(r, s, b, mu, var)"),
    "conv+bn(run-time scale)": conv("y = BatchNormalization(c, s2, b, mu, var)", inputs=f"{X} x, float[{C}] s2"),
    "conv(run-time W)+bn": conv(
        "y = BatchNormalization(c, s, b, mu, var)", inputs=f"{X} x, float[{C},{C},3,3] W2"
    ).replace("(x, Wc)", "(x, W2)"),
    "conv(2 consumers)+bn": conv("n = BatchNormalization(c, s, b, mu, var)\ny = Add(n, c)"),
    "conv+bn(graph output)+relu": conv(
        "n = BatchNormalization(c, s, b, mu, var)\ny = Relu(n)", outputs=f"{X} y, {X} n"
    ),
    "conv(graph output)+bn": conv("y = BatchNormalization(c, s, b, mu, var)", outputs=f"{X} y, {X} c"),
    "conv+residual+relu": conv("a = Add(c, x)\ny = Relu(a)"),
    "conv+mul+add+relu": conv("m = Mul(c, sc)\na = Add(m, sc)\ny = Relu(a)"),
    "conv+mul(constant first)+relu": conv("m = Mul(sc, c)\ny = Relu(m)"),
    "conv+mul(scalar)+relu": conv("m = Mul(c, sk)\ny = Relu(m)"),
    "conv+add(scalar)+relu": conv("m = Add(c, sk)\ny = Relu(m)"),
    **{
        f"gemm+{a}": gemm(a)
        for a in (
            "Relu",
            "Sigmoid",
            "Tanh",
            "LeakyRelu",
            "HardSigmoid",
            "Elu",
            "Selu",
            "Softplus",
            "Softsign",
            "ThresholdedRelu",
            "HardSwish",
        )
    },
    "gemm+Clip": gemm("Clip", ", lo, hi"),
    "matmul2d+add+relu": matmul_add(),
    "matmul2d+add(bias first)+relu": matmul_add(add="B2, c"),
    "matmul3d+add+relu": matmul_add(a="2,4,8"),
    "matmul2d+add[M,N]": matmul_add(bias=f"float[4,8] B2 = {{{_values(32)}}}"),
    "matmul2d+add[1,N]": matmul_add(bias=f"float[1,8] B2 = {{{_values(8)}}}"),
    "matmul2d+add(scalar)": matmul_add(bias="float B2 = {0.5}"),
    "matmul2d+add(residual)": _model(
        "c = MatMul(x, W)\ny = Add(c, r)", "float[4,8] x, float[4,8] r", "float[4,8] y"
    ).replace("=> (float[4,8] y)", f"=> (float[4,8] y)\n<float[8,8] W = {{{_values(64)}}}>"),
    "gelu(erf)": fn(GELU),
    "gelu(erf, half first)": fn("h = Mul(x, half)\nsd = Div(x, k)\ne = Erf(sd)\na = Add(e, one)\ny = Mul(h, a)"),
    "gelu(erf, Mul by 1/√2)": fn(GELU.replace("Div(x, k)", "Mul(x, k)")),
    "gelu(erf, x·(a·½))": fn("sd = Div(x, k)\ne = Erf(sd)\na = Add(e, one)\nw = Mul(a, half)\ny = Mul(x, w)"),
    "gelu(tanh)": fn(
        "p = Pow(x, two)\nq = Mul(p, k)\nr = Add(x, q)\nt = Mul(r, k)\nu = Tanh(t)\nv = Add(u, one)\n"
        "w = Mul(x, v)\ny = Mul(w, half)"
    ),
    "silu": fn("sg = Sigmoid(x)\ny = Mul(x, sg)"),
    "silu(reversed)": fn("sg = Sigmoid(x)\ny = Mul(sg, x)"),
    "layernorm": fn(LN),
    "layernorm(Mul square)": fn(LN.replace("Pow(d, two)", "Mul(d, d)")),
    "layernorm(Reciprocal)": fn(LN.replace("n = Div(d, sd)", "rc = Reciprocal(sd)\nn = Mul(d, rc)")),
    "layernorm(1/σ as Div)": fn(LN.replace("n = Div(d, sd)", "rc = Div(one, sd)\nn = Mul(d, rc)")),
    "layernorm(no β)": fn(LN.replace("y = Add(g, beta)", "y = Identity(g)")),
    "rmsnorm": fn(RMS),
    "rmsnorm(Reciprocal)": fn(RMS.replace("n = Div(x, sd)", "rc = Reciprocal(sd)\nn = Mul(x, rc)")),
    "rmsnorm(Mul square)": fn(RMS.replace("Pow(x, two)", "Mul(x, x)")),
    "rmsnorm(no γ)": fn(RMS.replace("y = Mul(n, gamma)", "y = Identity(n)")),
    "residual+layernorm": fn("r = Add(x, res)\n" + on("r", LN), inputs=f"{S} x, {S} res"),
    "residual(broadcast)+layernorm": fn("r = Add(x, res)\n" + on("r", LN), inputs=f"{S} x, float[1,16,64] res"),
    "residual(used twice)+layernorm": fn(
        "r = Add(x, res)\n" + on("r", LN) + "\nz = Add(r, y)", inputs=f"{S} x, {S} res", outputs=f"{S} z"
    ),
    "bias+residual+layernorm": fn(
        "xb = Add(x, B)\nr = Add(xb, res)\n" + on("r", LN),
        inputs=f"{S} x, {S} res",
        inits=f"{NORM_INITS}, {WEIGHTS_64}",
    ),
    "residual+rmsnorm": fn("r = Add(x, res)\n" + on("r", RMS), inputs=f"{S} x, {S} res"),
    "matmul3d+bias+residual+layernorm": fn(
        "c = MatMul(x, W)\nxb = Add(c, B)\nr = Add(xb, x)\n" + on("r", LN), inits=f"{NORM_INITS}, {WEIGHTS_64}"
    ),
    "matmul2d+bias+residual+layernorm": fn(
        "c = MatMul(x, W)\nxb = Add(c, B)\nr = Add(xb, x)\n" + on("r", LN),
        inputs="float[16,64] x",
        outputs="float[16,64] y",
        inits=f"{NORM_INITS}, {WEIGHTS_64}",
    ),
    "bias+gelu(decomposed)": fn("xb = Add(x, B)\n" + on("xb", GELU), inits=f"{NORM_INITS}, {WEIGHTS_64}"),
    "bias+Gelu-20": fn("xb = Add(x, B)\ny = Gelu(xb)", inits=WEIGHTS_64, opset=20),
    "matmul2d+bias+gelu": fn(
        "c = MatMul(x, W)\nxb = Add(c, B)\n" + on("xb", GELU),
        inputs="float[16,64] x",
        outputs="float[16,64] y",
        inits=f"{NORM_INITS}, {WEIGHTS_64}",
    ),
    "matmul2d+bias+silu": fn(
        "c = MatMul(x, W)\nxb = Add(c, B)\nsg = Sigmoid(xb)\ny = Mul(xb, sg)",
        inputs="float[16,64] x",
        outputs="float[16,64] y",
        inits=WEIGHTS_64,
    ),
    "transpose(last two)+matmul": fn(
        "t = Transpose<perm=[0,2,1]>(x)\ny = MatMul(t, x)", outputs="float[2,64,64] y", inits=""
    ),
    "transpose(other)+matmul": fn(
        "t = Transpose<perm=[1,0,2]>(x)\ny = MatMul(t, W)", outputs="float[16,2,64] y", inits=WEIGHTS_64
    ),
    "matmul+scale": fn(
        "q = MatMul(x, x2)\nsc = Div(q, k)\ny = Softmax(sc)",
        inputs=f"{S} x, float[2,64,16] x2",
        outputs="float[2,16,16] y",
        inits=SCALARS,
    ),
    # explicit attention: ORT's CPU provider folds Kᵀ and the scale into one FusedMatMul and keeps the mask Add,
    # the Softmax and the product with V (no Attention/MultiHeadAttention from the raw chain)
    "explicit attention": fn(
        "kt = Transpose<perm=[0,1,3,2]>(k)\nqk = MatMul(q, kt)\nsc = Div(qk, k2)\nm = Add(sc, mask)\n"
        "p = Softmax<axis=-1>(m)\ny = MatMul(p, v)",
        inputs="float[1,4,16,8] q, float[1,4,16,8] k, float[1,1,16,16] mask, float[1,4,16,8] v",
        outputs="float[1,4,16,8] y",
        inits="float k2 = {2.8284271}",
    ),
}


@pytest.mark.parametrize("name", list(MICRO))
def test_ort_cpu_profile_predicts_onnxruntime_fusion_by_fusion(name, tmp_path):
    model = onnx.parser.parse_model(MICRO[name])
    onnx.checker.check_model(model)
    for i, node in enumerate(model.graph.node):  # ORT keeps the names of the nodes it does not touch
        node.name = node.name or f"n{i}"
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    assert onnxroof_changes(path) == ort_changes(path, tmp_path)
