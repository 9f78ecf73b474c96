"""The fusion pass: each pattern's kernel against a closed-form cost, each refusal's reason, the profiles, and
properties over random graphs (fusion never adds FLOPs or bytes; every costed node is in exactly one kernel)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import parse_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onnxroof.analysis.analyze import analyze
from onnxroof.core.cost import Cost
from onnxroof.core.errors import OnnxroofError
from onnxroof.core.ir import build_ir
from onnxroof.core.kernel import SINGLE, Kernel
from onnxroof.costing.node import cost_node
from onnxroof.fusion.fuse import FusionResult, fuse
from onnxroof.fusion.patterns import PATTERNS, PATTERNS_BY_NAME, PROFILES, parse_template
from onnxroof.load.reader import load_model
from onnxroof.rules import REGISTRY

F32 = 4  # bytes per float32 element

# ------------------------------------------------------------------------------------------------ helpers


def analysed(text: str, dims: dict[str, int] | None = None):
    """IR and node costs built the way ``analyze`` builds them."""
    loaded = load_model(parse_model(text), dims)
    ir = build_ir(loaded.model, loaded.value_types, view_ops=REGISTRY.view_ops)
    costs = {op.id: cost_node(op, ir, loaded.model.graph) for op in ir.ops}
    return ir, costs


def run(text: str, profile: str) -> tuple[FusionResult, dict]:
    ir, costs = analysed(text)
    return fuse(ir, costs, profile), costs


def values(n: int, v: float = 0.5) -> str:
    return ",".join([str(v)] * n)


def model(body: str, inputs: str, outputs: str, inits: str = "", opset: int = 17) -> str:
    init_block = f"<{inits}>\n" if inits else ""
    return f'<ir_version: 8, opset_import: ["" : {opset}]>\ng ({inputs}) => ({outputs})\n{init_block}{{\n{body}\n}}'


def kernel_with(result: FusionResult, node_id: str) -> Kernel:
    kernel = result.kernel_of(node_id)
    assert kernel is not None, f"{node_id} is in no kernel"
    return kernel


def costed(costs) -> set[str]:
    return {node for node, c in costs.items() if c.state == "costed"}


def assert_partition(result: FusionResult, costs) -> None:
    members = [n for k in result.kernels for n in k.node_ids]
    assert len(members) == len(set(members)), "a node is in two kernels"
    assert set(members) == costed(costs)


# Conv + BatchNorm models on x[1, C, H, W], a 3×3 conv with padding 1 (the output has x's shape).
C, H, W = 4, 8, 8
N = C * H * W  # elements of x and of every activation
X = f"float[1,{C},{H},{W}]"
WEIGHT = f"float[{C},{C},3,3] Wc = {{{values(C * C * 9, 0.1)}}}"
BN_PARAMS = ", ".join(f"float[{C}] {name} = {{{values(C, 1.0)}}}" for name in ("s", "b", "mu", "var"))
CONV_INITS = f"{WEIGHT}, {BN_PARAMS}"
CONV_MACS = N * C * 9
CONV_FLOPS = 2 * CONV_MACS


def conv_model(body: str, inputs: str = f"{X} x", outputs: str = f"{X} y", inits: str = CONV_INITS) -> str:
    return model(body, inputs, outputs, inits)


# ------------------------------------------------------------------------------------- Conv + BN folding


@pytest.mark.parametrize("profile", ["ort-cpu", "tensorrt"])
def test_conv_bn_relu_is_one_kernel_without_the_batchnorm(profile):
    text = conv_model(
        "[conv] c = Conv<pads=[1,1,1,1]>(x, Wc)\n[bn] n = BatchNormalization(c, s, b, mu, var)\n[relu] y = Relu(n)"
    )
    result, costs = run(text, profile)
    kernel = kernel_with(result, "0:conv")
    assert kernel.node_ids == ("0:conv", "1:bn", "2:relu")
    assert kernel.folded_nodes == ("1:bn",)
    assert kernel.patterns[0] == "conv_bn" and kernel.pattern.endswith("conv_activation")
    # FLOPs: the conv's and the Relu's; the BatchNorm's 4·N + 2·C are gone.
    assert kernel.cost.flops == CONV_FLOPS + N
    assert kernel.cost.macs == CONV_MACS
    # Bytes: x and W read, y written; nothing of the BatchNorm (its input, output and parameters) moves.
    assert kernel.cost.bytes_read == N * F32 + C * C * 9 * F32
    assert kernel.cost.bytes_written == N * F32
    assert kernel.cost.params == C * C * 9
    assert costs["1:bn"].cost.flops == 4 * N + 2 * C  # what vanished
    assert len(result.kernels) == 1
    assert result.misses == ()


def test_conv_with_bias_bn_keeps_the_bias_read():
    text = conv_model(
        "[conv] c = Conv<pads=[1,1,1,1]>(x, Wc, b)\n[bn] y = BatchNormalization(c, s, b, mu, var)",
    )
    result, _ = run(text, "ort-cpu")
    kernel = kernel_with(result, "0:conv")
    assert kernel.pattern == "conv_bn"
    assert kernel.cost.flops == CONV_FLOPS + N  # the conv's bias add stays
    assert kernel.cost.bytes_read == (N + C * C * 9 + C) * F32  # x, W, the conv bias b
    assert kernel.cost.bytes_written == N * F32


def test_conv_transpose_bn_folds():
    text = conv_model(
        "[conv] c = ConvTranspose<pads=[1,1,1,1]>(x, Wc)\n[bn] y = BatchNormalization(c, s, b, mu, var)",
    )
    result, _ = run(text, "ort-cpu")
    assert kernel_with(result, "0:conv").folded_nodes == ("1:bn",)


def test_conv_relu_bn_does_not_fold_and_says_why():
    text = conv_model(
        "[conv] c = Conv<pads=[1,1,1,1]>(x, Wc)\n[relu] r = Relu(c)\n[bn] y = BatchNormalization(r, s, b, mu, var)"
    )
    for profile in ("ort-cpu", "tensorrt"):
        result, _ = run(text, profile)
        assert kernel_with(result, "2:bn").node_ids == ("2:bn",)
        assert kernel_with(result, "0:conv").node_ids == ("0:conv", "1:relu")
        (miss,) = [m for m in result.misses if m.pattern == "conv_bn"]
        assert miss.node_ids == ("1:relu", "2:bn")
        assert "BatchNormalization 2:bn does not directly follow a Conv" in miss.reason
        assert "its input comes from Relu 1:relu" in miss.reason
        assert "(Conv→Relu→BatchNormalization does not fold)" in miss.reason


def test_a_second_batchnorm_after_a_fused_conv_is_explained():
    text = conv_model(
        "[conv] c = Conv<pads=[1,1,1,1]>(x, Wc)\n[bn] n = BatchNormalization(c, s, b, mu, var)\n[relu] r = Relu(n)\n"
        "[bn2] y = BatchNormalization(r, s, b, mu, var)"
    )
    result, _ = run(text, "ort-cpu")
    assert [k.node_ids for k in result.kernels] == [("0:conv", "1:bn", "2:relu"), ("3:bn2",)]
    (miss,) = result.misses
    assert miss.node_ids == ("2:relu", "3:bn2")
    assert miss.reason.endswith("(Conv→Relu→BatchNormalization does not fold)")


def test_conv_output_with_two_consumers_does_not_fold():
    text = conv_model(
        "[conv] c = Conv<pads=[1,1,1,1]>(x, Wc)\n[bn] n = BatchNormalization(c, s, b, mu, var)\n[add] y = Add(n, c)"
    )
    result, _ = run(text, "ort-cpu")
    assert kernel_with(result, "1:bn").node_ids == ("1:bn",)
    (miss,) = [m for m in result.misses if m.pattern == "conv_bn"]
    assert miss.node_ids == ("0:conv", "1:bn")
    assert miss.reason.startswith("Conv output 0:conv feeds 2 nodes")


def test_conv_output_that_is_a_graph_output_does_not_fold():
    text = conv_model(
        "[conv] c = Conv<pads=[1,1,1,1]>(x, Wc)\n[bn] y = BatchNormalization(c, s, b, mu, var)",
        outputs=f"{X} y, {X} c",
    )
    result, _ = run(text, "ort-cpu")
    (miss,) = [m for m in result.misses if m.pattern == "conv_bn"]
    assert miss.reason == "Conv output 0:conv is a graph output"


def test_non_constant_conv_weight_does_not_fold():
    text = conv_model(
        "[conv] c = Conv<pads=[1,1,1,1]>(x, Wd)\n[bn] y = BatchNormalization(c, s, b, mu, var)",
        inputs=f"{X} x, float[{C},{C},3,3] Wd",
        inits=BN_PARAMS,
    )
    result, _ = run(text, "ort-cpu")
    assert len(result.kernels) == 2
    (miss,) = [m for m in result.misses if m.pattern == "conv_bn"]
    assert miss.reason == "Conv 0:conv input 'W' ('Wd') is a graph input, not a constant"


def test_batchnorm_with_non_constant_scale_does_not_fold():
    text = conv_model(
        "[conv] c = Conv<pads=[1,1,1,1]>(x, Wc)\n[bn] y = BatchNormalization(c, sd, b, mu, var)",
        inputs=f"{X} x, float[{C}] sd",
    )
    result, _ = run(text, "tensorrt")
    (miss,) = [m for m in result.misses if m.pattern == "conv_bn"]
    assert miss.reason == "BatchNormalization 1:bn input 'scale' ('sd') is a graph input, not a constant"


def test_batchnorm_after_a_pool_is_explained():
    text = conv_model(
        "[pool] p = MaxPool<kernel_shape=[3,3], pads=[1,1,1,1]>(x)\n[bn] y = BatchNormalization(p, s, b, mu, var)",
    )
    result, _ = run(text, "ort-cpu")
    (miss,) = result.misses
    assert miss.reason == (
        "BatchNormalization 1:bn does not directly follow a Conv/ConvTranspose: its input comes from MaxPool 0:pool"
    )


def test_conv_mul_add_relu_fold_into_one_conv_like_densenet():
    channel = f"float[{C},1,1] sc = {{{values(C, 2.0)}}}, float[{C},1,1] bc = {{{values(C, 0.1)}}}"
    text = conv_model(
        "[conv] c = Conv<pads=[1,1,1,1]>(x, Wc)\n[bn] n = BatchNormalization(c, s, b, mu, var)\n"
        "[mul] m = Mul(n, sc)\n[add] a = Add(m, bc)\n[relu] y = Relu(a)",
        inits=f"{CONV_INITS}, {channel}",
    )
    result, _ = run(text, "ort-cpu")
    (kernel,) = result.kernels
    assert kernel.pattern == "conv_bn+conv_mul+conv_add+ort_conv_activation"
    assert kernel.folded_nodes == ("1:bn", "2:mul")
    # The per-channel Add becomes the conv's bias: its N additions stay, its constant (C values) is read.
    assert kernel.cost.flops == CONV_FLOPS + N + N
    assert kernel.cost.bytes_read == (N + C * C * 9 + C) * F32
    assert kernel.cost.params == C * C * 9 + C


# ------------------------------------------------------------------------ residual and activation epilogue


RESIDUAL = (
    "[conv] c = Conv<pads=[1,1,1,1]>(x, Wc)\n[bn] n = BatchNormalization(c, s, b, mu, var)\n"
    "[add] a = Add(n, x)\n[relu] y = Relu(a)"
)


def test_tensorrt_absorbs_the_residual_add_and_relu():
    result, _ = run(conv_model(RESIDUAL), "tensorrt")
    (kernel,) = result.kernels
    assert kernel.pattern == "conv_bn+conv_residual+conv_activation"
    assert kernel.cost.flops == CONV_FLOPS + N + N  # conv, the residual add, the Relu
    assert kernel.cost.bytes_read == (N + C * C * 9) * F32  # x (read once: conv input and residual) and W
    assert kernel.cost.bytes_written == N * F32


def test_ort_cpu_leaves_conv_add_relu_unfused():
    result, _ = run(conv_model(RESIDUAL), "ort-cpu")
    assert [k.pattern for k in result.kernels] == ["conv_bn", SINGLE, SINGLE]
    (miss,) = [m for m in result.misses if m.pattern == "conv_add"]
    assert miss.reason == "Add 2:add adds 'x', a graph input (a residual), not a constant"


@pytest.mark.parametrize("activation", ["Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "Elu", "HardSwish"])
def test_which_activations_fuse_into_conv(activation):
    text = conv_model(f"[conv] c = Conv<pads=[1,1,1,1]>(x, Wc)\n[act] y = {activation}(c)")
    ort, _ = run(text, "ort-cpu")
    trt, _ = run(text, "tensorrt")
    assert len(trt.kernels) == 1
    if activation in ("Elu", "HardSwish"):  # not in ORT's ConvActivationFusion list
        assert len(ort.kernels) == 2
        (miss,) = ort.misses
        assert miss.reason.startswith("FusedConv takes only Clip, HardSigmoid, LeakyRelu, Relu, Sigmoid, Tanh")
    else:
        assert [k.pattern for k in ort.kernels] == ["ort_conv_activation"]


def test_clip_with_run_time_bounds_does_not_fuse():
    text = conv_model("[conv] c = Conv<pads=[1,1,1,1]>(x, Wc)\n[clip] y = Clip(c, lo)", inputs=f"{X} x, float lo")
    result, _ = run(text, "ort-cpu")
    assert len(result.kernels) == 2
    assert result.misses[0].reason == "Clip 1:clip bound 'lo' is a graph input, not a constant"


def test_conv_silu_epilogue_on_tensorrt():
    text = conv_model("[conv] c = Conv<pads=[1,1,1,1]>(x, Wc)\n[sig] sg = Sigmoid(c)\n[mul] y = Mul(c, sg)")
    trt, _ = run(text, "tensorrt")
    assert [k.pattern for k in trt.kernels] == ["silu+conv_activation"]
    ort, _ = run(text, "ort-cpu")
    assert [k.pattern for k in ort.kernels] == [SINGLE, "silu"]  # ORT: Conv, QuickGelu


# ------------------------------------------------------------------------------- decomposed functions

Y = "float[2,16,64]"
GAMMA_BETA = f"float[64] gamma = {{{values(64, 1.0)}}}, float[64] beta = {{{values(64, 0.0)}}}"
SCALARS = ", ".join(
    f"float {name} = {{{value}}}"
    for name, value in (("two", 2.0), ("three", 3.0), ("eps", 1e-5), ("one", 1.0), ("half", 0.5), ("k", 0.7))
)
ELEMENTS = 2 * 16 * 64
ROWS = 2 * 16


def function_model(body: str, inits: str = SCALARS, inputs: str = f"{Y} x") -> str:
    return model(body, inputs, f"{Y} y", inits)


GELU_ERF = {
    "(x·a)·½": "d = Div(x, k)\ne = Erf(d)\na = Add(e, one)\nm = Mul(x, a)\ny = Mul(m, half)",
    "(x·½)·a": "h = Mul(x, half)\nd = Div(x, k)\ne = Erf(d)\na = Add(e, one)\ny = Mul(h, a)",
    "x·(a·½)": "d = Mul(x, k)\ne = Erf(d)\na = Add(e, one)\nw = Mul(a, half)\ny = Mul(x, w)",
}


@pytest.mark.parametrize("form", list(GELU_ERF))
def test_decomposed_erf_gelu_is_one_kernel(form):
    result, costs = run(function_model(GELU_ERF[form]), "tensorrt")
    (kernel,) = result.kernels
    assert kernel.pattern == "gelu_erf"
    assert kernel.cost.flops == 5 * ELEMENTS  # divide, erf, add, two multiplies: the Gelu rule's 5 per element
    assert kernel.cost.bytes_read == ELEMENTS * F32 + 3 * F32  # x and the three scalar constants
    assert kernel.cost.bytes_written == ELEMENTS * F32
    assert kernel.ideal.bytes == 0  # elementwise only
    assert kernel.cost.bytes < sum(c.cost.bytes for c in costs.values())


def test_ort_cpu_recognises_only_the_gelu_forms_ort_does():
    assert [k.pattern for k in run(function_model(GELU_ERF["(x·a)·½"]), "ort-cpu")[0].kernels] == ["ort_gelu"]
    assert [k.pattern for k in run(function_model(GELU_ERF["(x·½)·a"]), "ort-cpu")[0].kernels] == ["ort_gelu"]
    assert len(run(function_model(GELU_ERF["x·(a·½)"]), "ort-cpu")[0].kernels) == 5


@pytest.mark.parametrize(
    "cube",
    ["p = Pow(x, three)", "p2 = Mul(x, x)\np = Mul(p2, x)"],
)
def test_decomposed_tanh_gelu_is_one_kernel_on_tensorrt(cube):
    body = cube + "\nq = Mul(p, k)\nr = Add(x, q)\nt = Mul(r, k)\nu = Tanh(t)\nv = Add(u, one)"
    body += "\nw = Mul(x, v)\ny = Mul(w, half)"
    trt, costs = run(function_model(body), "tensorrt")
    (kernel,) = trt.kernels
    assert kernel.pattern == "gelu_tanh"
    assert kernel.cost.flops == sum(c.cost.flops for c in costs.values())
    assert kernel.cost.bytes_written == ELEMENTS * F32
    ort, _ = run(function_model(body), "ort-cpu")  # FastGelu is not a CPU fusion
    assert all(k.pattern == SINGLE for k in ort.kernels)


def test_decomposed_silu_is_one_kernel():
    for body in ("s = Sigmoid(x)\ny = Mul(x, s)", "s = Sigmoid(x)\ny = Mul(s, x)"):
        for profile in ("ort-cpu", "tensorrt"):
            (kernel,) = run(function_model(body, inits=""), profile)[0].kernels
            assert kernel.pattern == "silu"
            assert kernel.cost.flops == 4 * ELEMENTS + ELEMENTS  # Sigmoid's 4 + the multiply
            assert kernel.cost.bytes_read == ELEMENTS * F32
            assert kernel.cost.bytes_written == ELEMENTS * F32


LAYERNORM = """
m = ReduceMean<axes=[-1]>(x)
d = Sub(x, m)
p = Pow(d, two)
v = ReduceMean<axes=[-1]>(p)
e = Add(v, eps)
sd = Sqrt(e)
n = Div(d, sd)
g = Mul(n, gamma)
y = Add(g, beta)
"""


@pytest.mark.parametrize("profile", ["ort-cpu", "tensorrt"])
def test_decomposed_layernorm_is_one_kernel(profile):
    result, costs = run(function_model(LAYERNORM, inits=f"{SCALARS}, {GAMMA_BETA}"), profile)
    (kernel,) = result.kernels
    assert kernel.pattern in ("layernorm", "ort_layernorm")
    assert kernel.cost.flops == sum(c.cost.flops for c in costs.values())
    # x once (two ReduceMeans and a Sub read it), γ and β, the scalars 2 and ε; y written.
    assert kernel.cost.bytes_read == (ELEMENTS + 64 + 64 + 2) * F32
    assert kernel.cost.bytes_written == ELEMENTS * F32
    assert kernel.cost.params == 64 + 64 + 2
    assert kernel.ideal == kernel.cost  # not elementwise-only (two reductions)


def test_layernorm_whose_intermediate_escapes_is_refused():
    text = model(LAYERNORM, f"{Y} x", f"{Y} y, {Y} d", f"{SCALARS}, {GAMMA_BETA}")
    result, _ = run(text, "tensorrt")
    assert not any("layernorm" in k.pattern for k in result.kernels)
    assert any(m.pattern == "layernorm" and "'d' is a graph output" in m.reason for m in result.misses)


RMSNORM = """
xf = Cast<to=1>(x)
p = Pow(xf, two)
v = ReduceMean<axes=[-1]>(p)
e = Add(v, eps)
sd = Sqrt(e)
r = RECIPROCAL
n = Mul(xf, r)
nc = Cast<to=1>(n)
y = Mul(gamma, nc)
"""


def test_decomposed_rmsnorm_is_one_kernel():
    text = function_model(RMSNORM.replace("RECIPROCAL", "Reciprocal(sd)"), inits=f"{SCALARS}, {GAMMA_BETA}")
    result, costs = run(text, "tensorrt")
    (kernel,) = result.kernels
    assert kernel.pattern == "rmsnorm"
    assert len(kernel.node_ids) == 9
    assert kernel.cost.flops == sum(c.cost.flops for c in costs.values())
    assert kernel.cost.bytes_read == (ELEMENTS + 64 + 2) * F32
    assert kernel.cost.bytes_written == ELEMENTS * F32
    # ONNX Runtime's SimplifiedLayerNormFusion does not recognise a Reciprocal, only 1/σ as a Div.
    ort, _ = run(text, "ort-cpu")
    assert all(k.pattern == SINGLE for k in ort.kernels)
    divided = function_model(RMSNORM.replace("RECIPROCAL", "Div(one, sd)"), inits=f"{SCALARS}, {GAMMA_BETA}")
    assert [k.pattern for k in run(divided, "ort-cpu")[0].kernels] == ["ort_rmsnorm"]


def test_residual_add_and_layernorm_become_skip_layernorm():
    body = "r = Add(x, res)\n" + LAYERNORM.replace("(x", "(r").replace("Sub(x", "Sub(r")
    text = function_model(body, inits=f"{SCALARS}, {GAMMA_BETA}", inputs=f"{Y} x, {Y} res")
    for profile in ("ort-cpu", "tensorrt"):
        (kernel,) = run(text, profile)[0].kernels
        assert kernel.pattern.endswith("layernorm+skip_layernorm")
        assert kernel.cost.bytes_read == (2 * ELEMENTS + 64 + 64 + 2) * F32


# ---------------------------------------------------------------------------------- matrix products


def test_matmul_add_becomes_gemm():
    m, k, n = 8, 16, 32
    text = model(
        "[mm] c = MatMul(a, w)\n[add] y = Add(c, bias)",
        f"float[{m},{k}] a",
        f"float[{m},{n}] y",
        f"float[{k},{n}] w = {{{values(k * n)}}}, float[{n}] bias = {{{values(n)}}}",
    )
    result, _ = run(text, "ort-cpu")
    (kernel,) = result.kernels
    assert kernel.pattern == "matmul_add"
    assert kernel.cost.flops == 2 * m * k * n + m * n  # as the Gemm rule counts a C input
    assert kernel.cost.bytes_read == (m * k + k * n + n) * F32
    assert kernel.cost.bytes_written == m * n * F32
    assert kernel.cost.params == k * n + n


def test_matmul_add_relu_is_fused_gemm_on_ort_only_when_2d():
    two_d = model(
        "c = MatMul(a, w)\nd = Add(c, bias)\ny = Relu(d)",
        "float[8,16] a",
        "float[8,16] y",
        f"float[16,16] w = {{{values(256)}}}, float[16] bias = {{{values(16)}}}",
    )
    assert [k.pattern for k in run(two_d, "ort-cpu")[0].kernels] == ["matmul_add+ort_gemm_activation"]
    three_d = two_d.replace("float[8,16] a", "float[2,8,16] a").replace("float[8,16] y", "float[2,8,16] y")
    result, _ = run(three_d, "ort-cpu")
    assert [k.pattern for k in result.kernels] == ["matmul_add", SINGLE]
    assert "Reshape → Gemm → Reshape" in result.misses[0].reason
    assert [k.pattern for k in run(three_d, "tensorrt")[0].kernels] == ["matmul_bias+gemm_activation"]


def test_transpose_of_the_last_two_axes_is_absorbed_into_matmul():
    text = model(
        "[t] t = Transpose<perm=[0,2,1]>(a)\n[mm] y = MatMul(t, b)",
        "float[2,16,8] a, float[2,16,32] b",
        "float[2,8,32] y",
    )
    for profile in ("ort-cpu", "tensorrt"):
        (kernel,) = run(text, profile)[0].kernels
        assert kernel.pattern == "transpose_matmul"
        assert kernel.node_ids == ("1:mm", "0:t")  # the anchor first
        assert kernel.cost.bytes_read == (2 * 16 * 8 + 2 * 16 * 32) * F32  # a itself, not its transposed copy
        assert kernel.cost.bytes_written == 2 * 8 * 32 * F32
        assert not kernel.layout


def test_a_transpose_of_other_axes_stays_a_layout_kernel():
    text = model(
        "[t] t = Transpose<perm=[1,0,2]>(a)\n[mm] y = MatMul(t, b)",
        "float[8,2,16] a, float[2,16,32] b",
        "float[2,8,32] y",
    )
    result, costs = run(text, "tensorrt")
    transpose = kernel_with(result, "0:t")
    assert transpose.node_ids == ("0:t",) and transpose.layout and transpose.pattern == SINGLE
    assert transpose.cost == costs["0:t"].cost
    assert transpose.ideal.bytes == 0
    (miss,) = result.misses
    assert miss.reason == "Transpose 0:t has perm [1, 0, 2], not a swap of the last two axes: it stays a layout copy"


def test_view_between_matmul_and_add_blocks_gemm():
    text = model(
        "c = MatMul(a, w)\nr = Reshape(c, shape)\ny = Add(r, bias)",
        "float[8,16] a",
        "float[2,4,16] y",
        f"float[16,16] w = {{{values(256)}}}, float[16] bias = {{{values(16)}}}, int64[3] shape = {{2,4,16}}",
    )
    result, costs = run(text, "ort-cpu")
    assert len(result.kernels) == 2 and len(costed(costs)) == 2


# ------------------------------------------------------------------------ pointwise and layout traffic


def test_tensorrt_fuses_an_elementwise_chain_through_views():
    text = model(
        "a = Relu(x)\nr = Reshape(a, shape)\nb = Mul(r, z)\nc = Tanh(b)\ny = Sub(c, z)",
        "float[4,8] x, float[2,16] z",
        "float[2,16] y",
        "int64[2] shape = {2,16}",
    )
    result, costs = run(text, "tensorrt")
    (kernel,) = result.kernels
    assert kernel.pattern == "pointwise"
    assert kernel.cost.flops == sum(c.cost.flops for c in costs.values())
    assert kernel.cost.bytes_read == 2 * 32 * F32  # x and z, each once
    assert kernel.cost.bytes_written == 32 * F32
    assert kernel.ideal.bytes == 0
    assert len(run(text, "ort-cpu")[0].kernels) == 4  # no generic chain fusion on ORT's CPU provider


def test_pointwise_writes_an_intermediate_used_outside():
    text = model("a = Relu(x)\nb = Exp(a)\ny = Neg(b)\nt = Transpose(a)", "float[4,8] x", "float[4,8] y, float[8,4] t")
    result, _ = run(text, "tensorrt")
    chain = kernel_with(result, "0:Relu")
    assert chain.node_ids == ("0:Relu", "1:Exp", "2:Neg")
    assert chain.cost.bytes_read == 32 * F32
    assert chain.cost.bytes_written == 2 * 32 * F32  # y and a (read by the Transpose)
    assert kernel_with(result, "3:Transpose").layout


def test_pointwise_never_creates_a_cycle():
    # a feeds a Softmax whose result comes back into the chain: {a, c} cannot be one kernel.
    text = model("a = Relu(x)\ns = Softmax(a)\nc = Add(a, s)\ny = Neg(c)", "float[4,8] x", "float[4,8] y")
    result, costs = run(text, "tensorrt")
    assert_partition(result, costs)
    assert kernel_with(result, "0:Relu") is not kernel_with(result, "2:Add")
    assert kernel_with(result, "2:Add") is kernel_with(result, "3:Neg")


def test_pointwise_joins_the_producer_visited_first():
    # Add could join Relu's or Sigmoid's group; the blocks are visited last-ready-first, so it joins the
    # Sigmoid's, and the Relu (which feeds only the Add) follows: one kernel. Visiting in node order instead
    # would join the Relu's and leave {Sigmoid, Neg} apart (the Sigmoid also feeds the Neg).
    text = model("a = Relu(x)\nc = Sigmoid(x)\ny = Add(a, c)\nz = Neg(c)", "float[4,8] x", "float[4,8] y, float[4,8] z")
    result, _ = run(text, "tensorrt")
    assert [k.node_ids for k in result.kernels] == [("0:Relu", "1:Sigmoid", "2:Add", "3:Neg")]


def test_a_sum_of_10000_inputs_fuses_into_one_kernel():
    """The fan-in case that was quadratic (issue 16); its speed is measured by benchmarks/bench_passes.py."""
    inputs = ", ".join(f"r{i}" for i in range(10_000))
    body = "\n".join(f"r{i} = Relu(x)" for i in range(10_000)) + f"\ny = Sum({inputs})"
    ir, costs = analysed(model(body, "float[4,8] x", "float[4,8] y"))
    assert len(fuse(ir, costs, "none").kernels) == 10_001
    assert len(fuse(ir, costs, "tensorrt").kernels) == 1


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_costed_node_is_in_exactly_one_kernel(profile):
    text = conv_model(RESIDUAL)
    result, costs = run(text, profile)
    assert_partition(result, costs)


def test_three_totals():
    """The analysis' unfused / fused / ideal totals, from this pass's kernels."""
    model = parse_model(conv_model(RESIDUAL))
    none = analyze(model, fusion="none").totals
    trt = analyze(model, fusion="tensorrt").totals
    _, costs = analysed(conv_model(RESIDUAL))
    unfused_bytes = sum(c.cost.bytes for c in costs.values() if c.state == "costed")
    assert none.unfused == none.fused == trt.unfused
    assert none.fused.bytes == unfused_bytes
    assert trt.fused.flops == trt.unfused.flops - costs["1:bn"].cost.flops
    assert trt.fused.bytes == (N + C * C * 9 + N) * F32
    assert none.ideal.bytes == costs["0:conv"].cost.bytes + costs["1:bn"].cost.bytes  # the Add and Relu are free
    assert trt.ideal == trt.fused  # one kernel, not elementwise-only


def test_none_profile_is_the_unfused_graph():
    ir, costs = analysed(conv_model(RESIDUAL))
    result = fuse(ir, costs, "none")
    assert [k.node_ids for k in result.kernels] == [(op.id,) for op in ir.ops if op.id in costed(costs)]
    for kernel in result.kernels:
        assert kernel.pattern == SINGLE and kernel.folded_nodes == ()
        assert kernel.cost == costs[kernel.node_ids[0]].cost
    assert result.misses == ()


def test_non_costed_nodes_are_in_no_kernel():
    text = model("s = Shape(x)\nr = Reshape(x, s)\ny = Relu(r)", "float[4,8] x", "float[4,8] y")
    result, costs = run(text, "tensorrt")
    assert result.kernel_of("0:Shape") is None and result.kernel_of("1:Reshape") is None
    assert kernel_with(result, "2:Relu").cost == costs["2:Relu"].cost


def test_unknown_profile_names_the_known_ones():
    ir, costs = analysed(model("y = Relu(x)", "float[2] x", "float[2] y"))
    with pytest.raises(OnnxroofError, match="unknown fusion profile 'gpu'; known profiles: none, ort-cpu, tensorrt"):
        fuse(ir, costs, "gpu")


def test_patterns_are_data():
    assert all(name in PATTERNS_BY_NAME for names in PROFILES.values() for name in names)
    assert len(PATTERNS_BY_NAME) == len(PATTERNS)
    steps = parse_template("a = Pow($x, c) | Mul($x, $x)\nb? = Cast($a)")
    assert steps[0].alternatives == (("Pow", ("$x", "c")), ("Mul", ("$x", "$x")))
    assert steps[1].optional and not steps[0].optional
    with pytest.raises(ValueError, match="bad template line"):
        parse_template("nonsense")


# --------------------------------------------------------------------------------------- properties

UNARY = ("Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Sqrt")
BINARY = ("Add", "Mul", "Sub", "Div", "Max")


@st.composite
def elementwise_chains(draw):
    """A chain of random unary/binary elementwise ops on x[4,8]; binary operands are x, an earlier value, a
    constant or a broadcast row; some intermediates also feed a Transpose or are graph outputs."""
    length = draw(st.integers(1, 8))
    lines, names = [], ["x"]
    outputs = []
    for i in range(length):
        out = f"v{i}"
        if draw(st.booleans()):
            lines.append(f"{out} = {draw(st.sampled_from(UNARY))}({names[-1]})")
        else:
            other = draw(st.sampled_from([*names, "k", "row"]))
            first, second = (names[-1], other) if draw(st.booleans()) else (other, names[-1])
            lines.append(f"{out} = {draw(st.sampled_from(BINARY))}({first}, {second})")
        names.append(out)
        extra = draw(st.sampled_from(["", "", "", "transpose", "output"]))
        if extra == "transpose" and i < length - 1:
            lines.append(f"t{i} = Transpose({out})")
            outputs.append(f"float[8,4] t{i}")
        elif extra == "output" and i < length - 1:
            outputs.append(f"float[4,8] {out}")
    lines.append(f"y = Identity({names[-1]})")
    outputs.insert(0, "float[4,8] y")
    return model(
        "\n".join(lines), "float[4,8] x", ", ".join(outputs), f"float k = {{2.0}}, float[8] row = {{{values(8)}}}"
    )


@st.composite
def conv_stacks(draw):
    """Random Conv / BN / activation / residual / per-channel Mul stacks on x[1,4,8,8]."""
    lines, names = [], ["x"]
    for i in range(draw(st.integers(1, 6))):
        layer = draw(st.sampled_from(["conv", "conv", "bn", "act", "residual", "mul"]))
        out = f"h{i}"
        prev = names[-1]
        if layer == "conv":
            weight = "Wc" if draw(st.booleans()) else "Wd"
            bias = ", b" if draw(st.booleans()) else ""
            lines.append(f"{out} = Conv<pads=[1,1,1,1]>({prev}, {weight}{bias})")
        elif layer == "bn":
            scale = "s" if draw(st.booleans()) else "sd"
            lines.append(f"{out} = BatchNormalization({prev}, {scale}, b, mu, var)")
        elif layer == "act":
            lines.append(f"{out} = {draw(st.sampled_from(['Relu', 'Sigmoid', 'LeakyRelu', 'Elu']))}({prev})")
        elif layer == "residual":
            lines.append(f"{out} = Add({prev}, {draw(st.sampled_from(names))})")
        else:
            lines.append(f"{out} = Mul({prev}, sc)")
        names.append(out)
        if draw(st.integers(0, 4)) == 0 and i > 0:  # an extra consumer of an intermediate
            lines.append(f"e{i} = Relu({names[-2]})")
            names.append(f"e{i}")
    lines.append(f"y = Identity({names[-1]})")
    extra_outputs = [f"{X} {n}" for n in names[1:-1] if n.startswith("e")]
    return model(
        "\n".join(lines),
        f"{X} x, float[{C},{C},3,3] Wd, float[{C}] sd",
        ", ".join([f"{X} y", *extra_outputs]),
        f"{CONV_INITS}, float[{C},1,1] sc = {{{values(C, 2.0)}}}",
    )


def check_fusion_properties(text: str) -> None:
    ir, costs = analysed(text)
    unfused = sum((c.cost for c in costs.values() if c.state == "costed"), Cost())
    for profile in PROFILES:
        result = fuse(ir, costs, profile)
        assert_partition(result, costs)
        fused = sum((k.cost for k in result.kernels), Cost())
        ideal = sum((k.ideal for k in result.kernels), Cost())
        assert fused.flops <= unfused.flops + 1e-9
        assert fused.bytes_read <= unfused.bytes_read + 1e-9
        assert fused.bytes_written <= unfused.bytes_written + 1e-9
        assert ideal.bytes <= fused.bytes + 1e-9
        for kernel in result.kernels:
            members = sum((costs[n].cost for n in kernel.node_ids), Cost())
            assert kernel.cost.bytes_read <= members.bytes_read + 1e-9
            assert kernel.cost.bytes_written <= members.bytes_written + 1e-9
            assert set(kernel.folded_nodes) <= set(kernel.node_ids)
        if profile == "none":
            assert fused == unfused


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(elementwise_chains())
def test_property_fusing_elementwise_chains_never_costs_more(text):
    check_fusion_properties(text)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conv_stacks())
def test_property_fusing_conv_stacks_never_costs_more(text):
    check_fusion_properties(text)


# -------------------------------------------------------------------------------------- a large graph
# How fast each profile fuses this graph is measured by benchmarks/bench_passes.py (median of repeats), not
# asserted here: wall-clock limits are flaky on a shared machine.


def test_fusing_a_2700_node_llama_graph_partitions_it(tmp_path):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from llama_shaped import build_llama_shaped

    path = build_llama_shaped(tmp_path / "llama.onnx")
    loaded = load_model(path, {"batch": 1, "seq": 128})
    ir = build_ir(loaded.model, loaded.value_types, view_ops=REGISTRY.view_ops)
    costs = {op.id: cost_node(op, ir, loaded.model.graph) for op in ir.ops}
    assert len(ir.ops) > 2600
    for profile in PROFILES:
        assert_partition(fuse(ir, costs, profile), costs)


# ------------------------------------------------------------------------------------------ attention

_B, _H, _KV, _S, _D = 1, 4, 2, 8, 16
_QKV = _B * _H * _S * _D  # elements of Q (and of V, and of the output) per expanded head set
_SCORES = _B * _H * _S * _S


def attention_model(dtype: str = "float", *, export_scores: bool = False, casts: bool = False) -> str:
    """QKᵀ → Div → Add mask → [Cast] Softmax [Cast] → MatMul V, K given transposed ([b, H, d, s])."""
    soft = "[c1] f = Cast<to=1>(m)\n[sm] p = Softmax<axis=-1>(f)\n[c2] h = Cast<to=10>(p)" if casts else ""
    soft = soft or "[sm] h = Softmax<axis=-1>(m)"
    outputs = f"{dtype}[{_B},{_H},{_S},{_D}] y" + (f", {dtype}[{_B},{_H},{_S},{_S}] d" if export_scores else "")
    return model(
        f"[qk] s = MatMul(q, kt)\n[sc] d = Div(s, scale)\n[mk] m = Add(d, mask)\n{soft}\n[av] y = MatMul(h, v)",
        f"{dtype}[{_B},{_H},{_S},{_D}] q, {dtype}[{_B},{_H},{_D},{_S}] kt, {dtype}[1,1,{_S},{_S}] mask, "
        f"{dtype}[{_B},{_H},{_S},{_D}] v",
        outputs,
        f"{dtype} scale = {{{17408 if dtype == 'float16' else 4.0}}}",  # 4.0 (float16: its bits, as the parser wants)
    )


def test_explicit_attention_is_one_flash_kernel_under_tensorrt():
    result, costs = run(attention_model(), "tensorrt")
    (kernel,) = result.kernels
    assert kernel.pattern == "attention"
    assert kernel.node_ids == ("0:qk", "1:sc", "2:mk", "3:sm", "4:av")
    # Q, Kᵀ, V and the mask read once (and the scalar scale); the output written; the S×T scores never leave
    assert kernel.cost.bytes_read == (3 * _QKV + _S * _S + 1) * F32
    assert kernel.cost.bytes_written == _QKV * F32
    assert kernel.cost.flops == sum(c.cost.flops for c in costs.values())
    assert kernel.cost.bytes < sum(c.cost.bytes for c in costs.values()) - 2 * _SCORES * F32
    assert len(run(attention_model(), "none")[0].kernels) == 5


def test_ort_cpu_folds_only_the_scale_of_explicit_attention():
    result, _ = run(attention_model(), "ort-cpu")
    assert [k.pattern for k in result.kernels] == ["matmul_scale", SINGLE, SINGLE, SINGLE]


def test_attention_is_refused_when_the_scores_escape():
    result, _ = run(attention_model(export_scores=True), "tensorrt")
    assert all("attention" not in k.patterns for k in result.kernels)
    (miss,) = [m for m in result.misses if m.pattern == "attention"]
    assert miss.reason == "attention: Div 1:sc's output 'd' is a graph output"


def test_attention_reads_grouped_kv_once_per_kv_head():
    kv = f"{_B},{_KV},{_S},{_D}"
    expand = "[{n}u] {n}u = Unsqueeze({n}, two)\n[{n}e] {n}e = Expand({n}u, wide)\n[{n}r] {n}r = Reshape({n}e, heads)\n"
    text = model(
        expand.format(n="k")
        + expand.format(n="v")
        + "[kt] kt = Transpose<perm=[0,1,3,2]>(kr)\n[qk] s = MatMul(q, kt)\n[sc] d = Mul(s, scale)\n"
        "[sm] p = Softmax<axis=-1>(d)\n[av] y = MatMul(p, vr)",
        f"float[{_B},{_H},{_S},{_D}] q, float[{kv}] k, float[{kv}] v",
        f"float[{_B},{_H},{_S},{_D}] y",
        f"float scale = {{0.25}}, int64[1] two = {{2}}, int64[5] wide = {{{_B},{_KV},{_H // _KV},{_S},{_D}}}, "
        f"int64[4] heads = {{{_B},{_H},{_S},{_D}}}",
    )
    result, _ = run(text, "tensorrt")
    (kernel,) = [k for k in result.kernels if "attention" in k.patterns]
    assert kernel.pattern == "attention+attention_operand"
    assert {"1:ke", "4:ve", "6:kt"} <= set(kernel.node_ids)
    # K and V read at [b, KV, s, d] (once per KV head), not after the expand to H heads
    assert kernel.cost.bytes_read == (_QKV + 2 * _B * _KV * _S * _D + 1) * F32
    assert kernel.cost.bytes_written == _QKV * F32
    assert len(result.kernels) == 1


def test_attention_keeps_a_transpose_that_moves_the_head_dimension():
    text = model(
        "[vt] vt = Transpose<perm=[0,3,1,2]>(v)\n[qk] s = MatMul(q, kt)\n[sm] p = Softmax<axis=-1>(s)\n"
        "[av] y = MatMul(p, vt)",
        f"float[{_B},{_H},{_S},{_D}] q, float[{_B},{_H},{_D},{_S}] kt, float[{_B},{_S},{_D},{_H}] v",
        f"float[{_B},{_H},{_S},{_D}] y",
    )
    result, _ = run(text, "tensorrt")
    assert [k.pattern for k in result.kernels] == [SINGLE, "attention"]
    (miss,) = result.misses
    assert miss.pattern == "attention_operand"
    assert "has perm [0, 3, 1, 2]: the head dimension (last axis) leaves the innermost axes" in miss.reason


def test_float16_attention_fuses_through_the_casts_around_softmax():
    result, _ = run(attention_model("float16", casts=True), "tensorrt")
    (kernel,) = result.kernels
    assert kernel.node_ids == ("0:qk", "1:sc", "2:mk", "3:c1", "4:sm", "5:c2", "6:av")
    assert kernel.cost.bytes_read == (3 * _QKV + _S * _S + 1) * 2
    assert kernel.cost.bytes_written == _QKV * 2


def test_a_7b_prefill_moves_far_fewer_bytes_with_flash_attention(tmp_path, monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from llama_shaped import build_llama_shaped

    import onnxroof.fusion.fuse as fuse_module

    path = build_llama_shaped(tmp_path / "llama.onnx")
    dims = {"batch": 1, "seq": 2048}
    after = analyze(path, "a100", dims, fusion="tensorrt")
    kernels = [k for k in after.kernels if "attention" in k.patterns]
    assert len(kernels) == 32
    scores = 32 * 2048 * 2048 * 2  # one layer's fp16 scores [1, 32, 2048, 2048]
    assert all(k.bytes_read + k.bytes_written < scores / 3 for k in kernels)  # Q, K, V, mask, output: ~80 MB
    without = {**PROFILES, "tensorrt": tuple(p for p in PROFILES["tensorrt"] if not p.startswith("attention"))}
    monkeypatch.setattr(fuse_module, "PROFILES", without)
    before = analyze(path, "a100", dims, fusion="tensorrt")
    # totals.bytes sums the nodes (unfused), totals.fused the kernels: the scores' write and read leave each layer
    assert before.totals.fused.bytes - after.totals.fused.bytes > 32 * 2 * scores
    assert after.totals.latency_s < before.totals.latency_s
    assert after.totals.flops == before.totals.flops
