"""Fusion patterns as data, and the per-target profiles that enable them.

A pattern names the operators a target runtime runs as ONE kernel, says which of them fold away (their
FLOPs and parameters vanish into the anchor's weights), and lists the checks that must hold; every check,
when it fails, yields a readable reason (onnxscript's rewriter: pattern + check + effect). The engine that
applies them is :mod:`onnxroof.fusion.fuse`; this module holds no logic beyond parsing the tiny template syntax.

Three kinds of pattern:

* :class:`FunctionPattern` — a decomposed function (GELU, SiLU, LayerNorm, RMSNorm) written as a small
  program, one step per line::

      m  = ReduceMean($x, ?c)          # $x: a value (bound on first use), c: a constant, ?c: absent or constant
      p  = Pow($d, c) | Mul($d, $d)    # alternatives
      g? = Mul($n, c)                  # optional step: when absent, g is n

  Add and Mul match their two inputs in either order. The recognised subgraph becomes one kernel whose op
  type is ``produces``; every value inside it must feed only the pattern (its last value is the output).
* :class:`EdgePattern` — an anchor kernel absorbs ONE neighbour: the consumer of its output (``consumer``:
  BatchNorm folding, a bias, a residual Add, an activation epilogue) or the producer of one of its inputs
  (``producer``: a Transpose read as a transposed operand) or (``operand``) the producer of any member's input
  read through views (the K transpose and the GQA Expand a flash-attention kernel reads in place). Applied
  repeatedly, edge patterns build chains such as Conv → BN → Mul → Add → Relu. ``produces`` renames the merged
  kernel (Conv + Relu → FusedConv) so later patterns see what the runtime would see.
* :class:`PointwisePattern` — chains of elementwise kernels (and decomposed activations) fused into one
  (GPU compilers' pointwise fusion).

Check kinds (``Check(kind, args)``; implemented by :data:`onnxroof.fusion.fuse.CHECKS`):

* ``sole_consumer(note?)`` — the value passed between the two kernels feeds nothing else and is not a graph
  output (``note``, when given, is added to the reason);
* ``constant_inputs(side, indices)`` — those inputs of the anchor's / joined op (when present) are constants;
* ``inference_mode`` — the BatchNormalization computes no batch statistics (no training outputs);
* ``channel_params(indices)`` — those inputs of the joined op are 1-D vectors with one value per output channel;
* ``channel_operand(allow_scalar)`` — the joined Mul/Add takes the conv output as input 0 and, as input 1, a
  constant with one value per output channel ([M,1,..] or [1,M,1,..]; a scalar when allowed);
* ``bias_operand`` — the joined Add's other operand is a constant that varies only along the last axis;
* ``residual_operand`` — the joined Add/Sum's other operand is a run-time tensor of the same shape;
* ``skip_operands`` — both operands of the anchor Add are run-time tensors of one 3-D shape (no broadcast);
* ``scalar_operand`` — the joined Mul/Div scales by a constant scalar (a Div's divisor);
* ``ops_in(op_types, kernel)`` — the joined op is one the target fuses into ``kernel``;
* ``clip_constant`` — a Clip's bounds are constants;
* ``dtype_in(dtypes)`` — the anchor computes in one of ``dtypes``;
* ``matmul_add_shapes`` — ONNX Runtime's MatMul+Add→Gemm conditions (B 2-D, bias [N] or a 2-D C for a 2-D A);
* ``gemm_2d`` — the Gemm is 2-D (ORT rewrites an N-D MatMul+Add as Reshape→Gemm→Reshape, which hides the
  activation that follows);
* ``swaps_last_two_axes`` — the joined Transpose only swaps its last two axes;
* ``sole_reader`` — the joined producer's output (through views) is read by the anchor kernel alone and is not a
  graph output;
* ``strided_operand`` — the joined op is a view a flash-attention kernel reads (or writes) through strides: a
  Transpose that keeps the head dimension (the last axis) among the two innermost axes (the last axis, for the
  output's), or an Expand that repeats one size-1 axis only (GQA's repeat_kv: each KV head read once);
* ``dequantized_operands(kernel, bias, same_type, constants)`` — every input of the anchor comes from a
  DequantizeLinear (a weight's folded at load time) of an 8-bit tensor (the input at index ``bias``: int32; all
  of one type when ``same_type``), and the joined QuantizeLinear writes input 0's type (ONNX Runtime's QDQ
  node-unit conditions); with ``constants``, a float constant weight or 1-D bias counts too (ORT quantizes it
  itself at load time when input 0 is dequantized with one scale).

Profiles map a target name to the patterns it performs (applied in :data:`PATTERNS` order):

* ``none`` — no fusion: every costed node is its own kernel.
* ``ort-cpu`` — ONNX Runtime's CPU execution provider at ORT_ENABLE_EXTENDED, as checked against
  onnxruntime 1.31 (its optimized-model output) and its optimizer sources: Conv(Transpose)+BatchNorm, Conv+Mul,
  Conv+Add(per-channel constant) folds; MatMul+Add → Gemm; Transpose(last two axes) → MatMul/Gemm
  (FusedMatMul / transA-transB); MatMul+scalar scale → FusedMatMul; Conv + {Relu, Sigmoid, Tanh, LeakyRelu,
  HardSigmoid, Clip with constant bounds} → FusedConv (float32/16 only); Gemm + {Relu, Sigmoid, Tanh, LeakyRelu,
  HardSigmoid, Elu, Selu, Softplus, Softsign, ThresholdedRelu} → FusedGemm (not after an N-D MatMul+Add, which
  ORT wraps in Reshapes); erf-GELU → Gelu; x·sigmoid(x) → QuickGelu; decomposed LayerNorm → LayerNormalization;
  decomposed RMSNorm → SimplifiedLayerNormalization (ORT's narrower matchers: ``ort_gelu``, ``ort_layernorm``,
  ``ort_rmsnorm``; e.g. a Reciprocal in the norm defeats them); (bias Add +) residual Add + LayerNorm →
  SkipLayerNormalization (3-D, same shapes); bias Add + Gelu → BiasGelu. Not fused: Conv → Add → Relu (the
  residual is not absorbed on CPU), tanh-GELU (FastGelu is not a CPU fusion), generic elementwise chains, and
  explicit attention: ORT's AttentionFusion (onnxruntime/core/optimizer/attention_fusion.cc) matches only the
  BERT subgraph rooted at a LayerNormalization with Q/K/V MatMul+Add and its mask path, never the raw chain, so
  the CPU provider runs QKᵀ with its scale (and a Kᵀ transpose of the last two axes) as one FusedMatMul
  (MatMulScaleFusion, onnxruntime/core/optimizer/matmul_scale_fusion.h; MatMulTransposeFusion), then the mask
  Add, the Softmax and the product with V as separate kernels, the scores written and read in DRAM (checked:
  onnxruntime 1.32 on samples/tiny_transformer.onnx and a small llama_shaped float32 decoder). The
  profile models float32 graphs: for float16, ORT's CPU provider runs many ops through Casts to float32 and
  several of these fusions (FusedMatMul, QuickGelu) do not fire.
  QDQ models (quantize_static's QuantFormat.QDQ): ORT's QDQSelectorActionTransformer turns each node unit
  DequantizeLinear(s) → op → QuantizeLinear into one quantized op: Conv → QLinearConv, MatMul → QLinearMatMul,
  Gemm → com.microsoft.QGemm (``qdq_conv``, ``qdq_matmul``, ``qdq_gemm``: integer products, computing at the
  platform's int8 peak), Add/Mul → QLinearAdd/QLinearMul, GlobalAveragePool, Sigmoid, LeakyRelu → their
  com.microsoft QLinear* ops (``qdq_add``...), when every input is dequantized (weights through a
  DequantizeLinear ORT does not constant-fold; a bias from int32), the output is read only by the
  QuantizeLinear, and input and output share one 8-bit type. ORT 1.20+ quantizes a Conv/Gemm's float weight
  and bias initializers itself when the input is dequantized per tensor (onnxroof still charges them at their
  float size). The kernel moves the int8 tensors crossing its boundary; the activation's DequantizeLinear
  joins it (``qdq_input``) when the kernel is its only reader — ORT duplicates a shared one per consumer,
  onnxroof runs it once (a miss says so) and the kernels read its float output. Checked against onnxruntime
  1.32 with ``session.qdqisint8allowed=1`` (the default on ARM): on x86-64 without it ORT converts
  int8-activation units only after rewriting their Q/DQ pairs to uint8 (QDQS8ToU8Transformer), which skips a
  QuantizeLinear read by several DequantizeLinear (4 or 5 of int8 tiny_cnn's 8 Convs convert); uint8 activations
  convert either way. Not modelled: QLinearSoftmax, Q/DQ pairs dropped around Transpose/Reshape/Flatten/
  MaxPool (the view between them blocks a direct match), a Relu/Clip made redundant by the QuantizeLinear's
  range, MatMulIntegerToFloat and float-output QGemm (no QuantizeLinear after): those ops stay float here.
* ``tensorrt`` — a GPU compiler (TensorRT-like): Conv+BN+bias+residual Add+activation, MatMul/Gemm + bias +
  activation (GELU, SiLU ... included), transposed operands absorbed, decomposed norms/GELU/SiLU/HardSwish,
  residual Add + LayerNorm/RMSNorm, generic pointwise fusion of elementwise chains, and the QDQ kernels of
  ``ort-cpu`` (TensorRT's explicit quantization runs DQ → Conv/MatMul → Q as one int8 kernel; its fusion of
  a residual Add or an activation between the Conv and the QuantizeLinear is not modelled), and explicit
  attention as one flash-attention kernel (``attention``: MatMul QKᵀ → [Div/Mul by a constant] → [Add of a mask,
  or Where filling a constant] → [Cast] → Softmax → [IsNaN + Where] → [Cast] → MatMul V, every intermediate used
  only inside; ``attention_operand``: a Transpose that keeps the head dimension innermost and GQA's Expand before
  Q, K or V, read in place; ``attention_output``: the Transpose after it). Its bytes are what crosses its
  boundary: Q, K and V read once (K and V at [batch, kv_heads, seq, head_dim], before the GQA expand, since a
  grouped-query kernel reads each KV head once for its group of query heads), the mask read when it is a
  tensor (a causal kernel computing it in place would not; the mask is a graph tensor here, so it is counted),
  the output written; the S×T scores stay on chip. Its FLOPs are its members' sum (the softmax's exp included).
  Not matched: a scale applied to Q and K before the product (PyTorch SDPA's export, Optimum: those Muls stay
  elementwise kernels outside), the Softmax axis (not checked; exports use the last).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple

from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.profiles import FusionProfile
from onnxroof.core.states import OpClass

# ------------------------------------------------------------------------------------------- the data types


class Check(NamedTuple):
    """One condition of a pattern: a check kind (see the module docstring) and its arguments."""

    kind: str
    args: tuple[object, ...] = ()


def check(kind: str, *args: object) -> Check:
    return Check(kind, tuple(args))


class Step(NamedTuple):
    """One line of a function template: ``out = op(inputs) | op2(inputs2)``; ``optional`` when marked ``?``."""

    out: str
    alternatives: tuple[tuple[str, tuple[str, ...]], ...]
    optional: bool = False


@frozen_dataclass(slots=True)
class FunctionPattern:
    """A decomposed function recognised as one kernel of op type ``produces``, of efficiency class ``op_class``."""

    name: str
    produces: str
    variants: tuple[tuple[Step, ...], ...]
    description: str
    op_class: OpClass
    """The efficiency class of the kernel the runtime runs (``produces``'s)."""


@frozen_dataclass(slots=True)
class EdgePattern:
    """An anchor kernel (op type in ``anchor``) absorbs one neighbour whose op type is in ``joins``.

    ``direction``: ``consumer`` (the neighbour reads the anchor's output) or ``producer`` (the neighbour
    produces one of the anchor node's inputs). ``fold``: the neighbour's FLOPs and parameters vanish (folded
    into the anchor's weights at load time). ``produces``: the merged kernel's op type (None keeps the
    anchor's) and ``op_class`` its efficiency class (given exactly when ``produces`` is). ``orphans``: op types that,
    when left unfused, are explained by this pattern.
    """

    name: str
    anchor: frozenset[str]
    joins: frozenset[str]
    direction: str
    checks: tuple[Check, ...]
    description: str
    fold: bool = False
    produces: str | None = None
    orphans: frozenset[str] = frozenset()
    op_class: OpClass | None = None


@frozen_dataclass(slots=True)
class PointwisePattern:
    """Neighbouring elementwise-only kernels of equal element count fused into one."""

    name: str
    description: str


Pattern = FunctionPattern | EdgePattern | PointwisePattern

CONSUMER = "consumer"
PRODUCER = "producer"
OPERAND = "operand"

# ------------------------------------------------------------------------------------ the template syntax

_LINE = re.compile(r"^\s*(\w+)(\?)?\s*=\s*(.+?)\s*$")
_CALL = re.compile(r"^\s*(\w+)\(([^()]*)\)\s*$")


def parse_template(text: str) -> tuple[Step, ...]:
    """Parse a template (one ``out = Op(args) | Op2(args)`` per line, ``#`` comments) into steps."""
    steps = []
    for raw in text.strip().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        match = _LINE.match(line)
        if match is None:
            raise ValueError(f"bad template line: {raw!r}")
        out, optional, rhs = match.groups()
        alternatives = []
        for call in rhs.split("|"):
            found = _CALL.match(call)
            if found is None:
                raise ValueError(f"bad template call {call!r} in {raw!r}")
            op_type, args = found.groups()
            alternatives.append((op_type, tuple(a.strip() for a in args.split(",") if a.strip())))
        steps.append(Step(out, tuple(alternatives), optional == "?"))
    return tuple(steps)


def _variants(*texts: str) -> tuple[tuple[Step, ...], ...]:
    return tuple(parse_template(text) for text in texts)


# --------------------------------------------------------------------------------- decomposed functions

# The three ways exporters finish a GELU from a = 1 + erf(...) (or 1 + tanh(...)): (x·a)·½, (x·½)·a, x·(a·½).
_HALF = (
    "m = Mul($x, $a)\ny = Mul($m, c)",
    "h = Mul($x, c)\ny = Mul($h, $a)",
    "w = Mul($a, c)\ny = Mul($x, $w)",
)
_GELU_ERF = "s = Div($x, c) | Mul($x, c)\ne = Erf($s)\na = Add($e, c)\n"
_CUBES = ("p = Pow($x, c)", "p2 = Mul($x, $x)\np = Mul($p2, $x)")
_GELU_TANH = "q = Mul($p, c)\nr = Add($x, $q)\nt = Mul($r, c)\nu = Tanh($t)\na = Add($u, c)\n"

_LN_STATS = """
m = ReduceMean($x, ?c)
d = Sub($x, $m)
p = Pow($d, c) | Mul($d, $d)
v = ReduceMean($p, ?c)
e = Add($v, c)
s = Sqrt($e)
"""
_LN_NORM = ("n = Div($d, $s)", "r = Reciprocal($s) | Div(c, $s)\nn = Mul($d, $r)")
_LN_AFFINE = "\ng? = Mul($n, c)\ny? = Add($g, c)"

_RMS_STATS = """
xf? = Cast($x)
p = Pow($xf, c) | Mul($xf, $xf)
v = ReduceMean($p, ?c)
e = Add($v, c)
s = Sqrt($e)
"""
_RMS_NORM = ("n = Div($xf, $s)", "r = Reciprocal($s) | Div(c, $s)\nn = Mul($xf, $r)")
_RMS_AFFINE = "\nnc? = Cast($n)\ny? = Mul($nc, c)"

GELU_ERF = FunctionPattern(
    "gelu_erf",
    "Gelu",
    _variants(*(_GELU_ERF + half for half in _HALF)),
    "0.5·x·(1 + erf(x/√2)) as exported (Div or Mul by a constant, Erf, Add 1, two Muls) → one Gelu kernel",
    op_class=OpClass.ACTIVATION,
)
GELU_TANH = FunctionPattern(
    "gelu_tanh",
    "GeluTanh",
    _variants(*(cube + "\n" + _GELU_TANH + half for cube in _CUBES for half in _HALF)),
    "0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (x³ as Pow or two Muls) → one tanh-GELU kernel",
    op_class=OpClass.ACTIVATION,
)
SILU = FunctionPattern(
    "silu",
    "SiLU",
    _variants("s = Sigmoid($x)\ny = Mul($x, $s)"),
    "x·sigmoid(x) → one SiLU kernel (ORT: QuickGelu)",
    op_class=OpClass.ACTIVATION,
)
HARDSWISH = FunctionPattern(
    "hardswish",
    "HardSwish",
    _variants("s = HardSigmoid($x)\ny = Mul($x, $s)"),
    "x·HardSigmoid(x) → one HardSwish",
    op_class=OpClass.ACTIVATION,
)
LAYERNORM = FunctionPattern(
    "layernorm",
    "LayerNormalization",
    _variants(*(_LN_STATS + norm + _LN_AFFINE for norm in _LN_NORM)),
    "ReduceMean, Sub, Pow/Mul, ReduceMean, Add ε, Sqrt, Div (or Reciprocal·Mul), [·γ], [+β] → one LayerNorm",
    op_class=OpClass.NORMALIZATION,
)
RMSNORM = FunctionPattern(
    "rmsnorm",
    "RMSNormalization",
    _variants(*(_RMS_STATS + norm + _RMS_AFFINE for norm in _RMS_NORM)),
    "[Cast], Pow/Mul, ReduceMean, Add ε, Sqrt, Div (or Reciprocal·Mul), [Cast], [·γ] → one RMSNorm",
    op_class=OpClass.NORMALIZATION,
)

# ONNX Runtime's own matchers (GeluFusion, LayerNormFusion, SimplifiedLayerNormFusion) are narrower, as checked
# against onnxruntime 1.31: x/√2 only as a Div; (x·a)·½ or (x·½)·a only; the square only as Pow; 1/σ only as
# Div (a Reciprocal is not recognised); γ (and β for LayerNorm) required.
_ORT_LN_STATS = _LN_STATS.replace("Pow($d, c) | Mul($d, $d)", "Pow($d, c)")
_ORT_LN_NORM = ("n = Div($d, $s)", "r = Div(c, $s)\nn = Mul($d, $r)")
_ORT_RMS_STATS = _RMS_STATS.replace("Pow($xf, c) | Mul($xf, $xf)", "Pow($xf, c)")
_ORT_RMS_NORM = ("n = Div($xf, $s)", "r = Div(c, $s)\nn = Mul($xf, $r)")
ORT_GELU = FunctionPattern(
    "ort_gelu",
    "Gelu",
    _variants(*("s = Div($x, c)\ne = Erf($s)\na = Add($e, c)\n" + half for half in _HALF[:2])),
    "erf-GELU as ONNX Runtime's GeluFusion recognises it → com.microsoft.Gelu",
    op_class=OpClass.ACTIVATION,
)
ORT_LAYERNORM = FunctionPattern(
    "ort_layernorm",
    "LayerNormalization",
    _variants(*(_ORT_LN_STATS + norm + "\ng = Mul($n, c)\ny = Add($g, c)" for norm in _ORT_LN_NORM)),
    "decomposed LayerNorm as ONNX Runtime's LayerNormFusion recognises it → LayerNormalization",
    op_class=OpClass.NORMALIZATION,
)
ORT_RMSNORM = FunctionPattern(
    "ort_rmsnorm",
    "RMSNormalization",
    _variants(*(_ORT_RMS_STATS + norm + "\nnc? = Cast($n)\ny = Mul($nc, c)" for norm in _ORT_RMS_NORM)),
    "decomposed RMSNorm as ONNX Runtime's SimplifiedLayerNormFusion recognises it → SimplifiedLayerNormalization",
    op_class=OpClass.NORMALIZATION,
)

# The attention chain as eager exports write it: QKᵀ, a scale (Div or Mul by a constant), a mask (Add of a mask
# tensor, or Where filling a constant), the Softmax (in float32 between Casts in float16 models), Optimum's NaN
# guard (IsNaN + Where) and the product with V.
_ATTENTION = """
s = MatMul($q, $k)
d? = Div($s, c) | Mul($s, c)
m? = Add($d, $mask) | Where($cond, $d, c) | Where($cond, c, $d)
f? = Cast($m)
p = Softmax($f)
n? = IsNaN($p)
z? = Where($n, c, $p)
h? = Cast($z)
y = MatMul($h, $v)
"""
ATTENTION = FunctionPattern(
    "attention",
    "Attention",
    _variants(_ATTENTION),
    "MatMul QKᵀ → [scale] → [mask] → [Cast] → Softmax → [Cast] → MatMul V → one flash-attention kernel (the S×T "
    "scores stay on chip)",
    op_class=OpClass.OTHER,
)

# ------------------------------------------------------------------------------------------- activations

#: Activations ONNX Runtime's CPU provider fuses into Conv (ConvActivationFusion) → com.microsoft.FusedConv.
ORT_CONV_ACTIVATIONS = frozenset({"Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "Clip"})
#: Activations ONNX Runtime fuses into Gemm (GemmActivationFusion) → com.microsoft.FusedGemm.
ORT_GEMM_ACTIVATIONS = frozenset(
    {"Relu", "Sigmoid", "Tanh", "LeakyRelu", "HardSigmoid", "Elu", "Selu", "Softplus", "Softsign", "ThresholdedRelu"}
)
#: Activations a GPU compiler runs as a GEMM/convolution epilogue (also the candidates ORT's refusals name).
ACTIVATIONS = frozenset(
    {
        "Relu",
        "Clip",
        "LeakyRelu",
        "PRelu",
        "Sigmoid",
        "HardSigmoid",
        "HardSwish",
        "Tanh",
        "Gelu",
        "GeluTanh",
        "FastGelu",
        "QuickGelu",
        "SiLU",
        "Swish",
        "Mish",
        "Elu",
        "Selu",
        "Celu",
        "Softplus",
        "Softsign",
        "ThresholdedRelu",
    }
)

_CONVS = frozenset({"Conv", "ConvTranspose"})
_SOLE = check("sole_consumer")
_CONV_WEIGHTS = check("constant_inputs", "anchor", (1, 2))

# --------------------------------------------------------------------------------------------- edges

CONV_BN = EdgePattern(
    "conv_bn",
    _CONVS,
    frozenset({"BatchNormalization"}),
    CONSUMER,
    (
        _SOLE,
        _CONV_WEIGHTS,
        check("constant_inputs", "joined", (1, 2, 3, 4)),
        check("inference_mode"),
        check("channel_params", (1, 2, 3, 4)),
    ),
    "BatchNormalization directly after a Conv/ConvTranspose folds into its weights and bias",
    fold=True,
    orphans=frozenset({"BatchNormalization"}),
)
CONV_MUL = EdgePattern(
    "conv_mul",
    frozenset({"Conv"}),
    frozenset({"Mul"}),
    CONSUMER,
    (check("channel_operand", True), _SOLE, _CONV_WEIGHTS),
    "Conv → Mul by a per-channel (or scalar) constant folds into the weights (ORT ConvMulFusion)",
    fold=True,
)
CONV_ADD = EdgePattern(
    "conv_add",
    frozenset({"Conv"}),
    frozenset({"Add"}),
    CONSUMER,
    (check("channel_operand", False), _SOLE, _CONV_WEIGHTS),
    "Conv → Add of a per-channel constant becomes the conv's bias (ORT ConvAddFusion); the add stays as bias work",
)
CONV_RESIDUAL = EdgePattern(
    "conv_residual",
    _CONVS,
    frozenset({"Add", "Sum"}),
    CONSUMER,
    (_SOLE, check("residual_operand")),
    "Conv → Add of a same-shape run-time tensor (a residual) in the convolution's epilogue",
    produces="ConvResidual",
    op_class=OpClass.CONV,
)
CONV_ACTIVATION = EdgePattern(
    "conv_activation",
    _CONVS | {"ConvResidual"},
    ACTIVATIONS,
    CONSUMER,
    (_SOLE, check("clip_constant")),
    "Conv (+ residual) → activation in the convolution's epilogue",
    produces="FusedConv",
    op_class=OpClass.CONV,
)
ORT_CONV_ACTIVATION = EdgePattern(
    "ort_conv_activation",
    frozenset({"Conv"}),
    ACTIVATIONS,
    CONSUMER,
    (
        _SOLE,
        check("ops_in", ORT_CONV_ACTIVATIONS, "FusedConv"),
        check("clip_constant"),
        check("dtype_in", ("float32", "float16")),
    ),
    "Conv → Relu/Sigmoid/Tanh/LeakyRelu/HardSigmoid/Clip → com.microsoft.FusedConv (ORT ConvActivationFusion)",
    produces="FusedConv",
    op_class=OpClass.CONV,
)
MATMUL_ADD = EdgePattern(
    "matmul_add",
    frozenset({"MatMul"}),
    frozenset({"Add"}),
    CONSUMER,
    (_SOLE, check("matmul_add_shapes")),
    "MatMul → Add → one Gemm (ORT MatMulAddFusion; an N-D A is reshaped to 2-D around the Gemm)",
    produces="Gemm",
    op_class=OpClass.MATMUL,
)
MATMUL_BIAS = EdgePattern(
    "matmul_bias",
    frozenset({"MatMul", "Gemm"}),
    frozenset({"Add"}),
    CONSUMER,
    (_SOLE, check("bias_operand")),
    "MatMul/Gemm → Add of a bias along the last axis in the GEMM epilogue",
)
TRANSPOSE_MATMUL = EdgePattern(
    "transpose_matmul",
    frozenset({"MatMul", "Gemm"}),
    frozenset({"Transpose"}),
    PRODUCER,
    (_SOLE, check("swaps_last_two_axes")),
    "a Transpose of the last two axes read by MatMul/Gemm as a transposed operand (ORT FusedMatMul / transA)",
)
MATMUL_SCALE = EdgePattern(
    "matmul_scale",
    frozenset({"MatMul"}),
    frozenset({"Mul", "Div"}),
    CONSUMER,
    (check("scalar_operand"), _SOLE, check("dtype_in", ("float32", "float16", "bfloat16"))),
    "MatMul → Mul/Div by a constant scalar becomes the GEMM's alpha (ORT MatMulScaleFusion → FusedMatMul)",
)
ORT_GEMM_ACTIVATION = EdgePattern(
    "ort_gemm_activation",
    frozenset({"Gemm"}),
    ACTIVATIONS,
    CONSUMER,
    (_SOLE, check("ops_in", ORT_GEMM_ACTIVATIONS, "FusedGemm"), check("gemm_2d")),
    "Gemm (or a 2-D MatMul+Add) → activation → com.microsoft.FusedGemm (ORT GemmActivationFusion)",
    produces="FusedGemm",
    op_class=OpClass.MATMUL,
)
GEMM_ACTIVATION = EdgePattern(
    "gemm_activation",
    frozenset({"MatMul", "Gemm"}),
    ACTIVATIONS,
    CONSUMER,
    (_SOLE, check("clip_constant")),
    "MatMul/Gemm (+ bias) → activation in the GEMM epilogue",
    produces="FusedGemm",
    op_class=OpClass.MATMUL,
)
BIAS_GELU = EdgePattern(
    "bias_gelu",
    frozenset({"Add"}),
    frozenset({"Gelu"}),
    CONSUMER,
    (_SOLE, check("bias_operand")),
    "Add of a bias → Gelu → com.microsoft.BiasGelu (ORT BiasGeluFusion)",
    produces="BiasGelu",
    op_class=OpClass.ACTIVATION,
)
SKIP_LAYERNORM = EdgePattern(
    "skip_layernorm",
    frozenset({"Add"}),
    frozenset({"LayerNormalization"}),
    CONSUMER,
    (_SOLE, check("skip_operands")),
    "residual Add → LayerNorm → one SkipLayerNormalization (ORT SkipLayerNormFusion)",
    produces="SkipLayerNormalization",
    op_class=OpClass.SKIP_NORMALIZATION,
)
SKIP_RMSNORM = EdgePattern(
    "skip_rmsnorm",
    frozenset({"Add"}),
    frozenset({"RMSNormalization", "SimplifiedLayerNormalization"}),
    CONSUMER,
    (_SOLE, check("skip_operands")),
    "residual Add → RMSNorm → one SkipSimplifiedLayerNormalization",
    produces="SkipLayerNormalization",
    op_class=OpClass.SKIP_NORMALIZATION,
)
SKIP_LAYERNORM_BIAS = EdgePattern(
    "skip_layernorm_bias",
    frozenset({"SkipLayerNormalization"}),
    frozenset({"Add"}),
    PRODUCER,
    (_SOLE, check("bias_operand")),
    "the bias Add before a SkipLayerNormalization's residual Add joins it (its optional bias input)",
)
ATTENTION_OPERAND = EdgePattern(
    "attention_operand",
    frozenset({"Attention"}),
    frozenset({"Transpose", "Expand"}),
    OPERAND,
    (check("sole_reader"), check("strided_operand")),
    "a Transpose (head dimension kept innermost) or GQA's Expand (repeat_kv) before Q, K or V, read in place by the "
    "flash-attention kernel (K/V once per KV head)",
)
ATTENTION_OUTPUT = EdgePattern(
    "attention_output",
    frozenset({"Attention"}),
    frozenset({"Transpose"}),
    CONSUMER,
    (_SOLE, check("strided_operand")),
    "the Transpose of the attention output back to [batch, seq, heads, head_dim], written so by the kernel",
)
#: A QDQ node unit's anchor → the quantized op ONNX Runtime runs for it, the anchor's bias input (int32; None:
#: none) and whether all its quantized operands must share one type (elementwise ops) or not (uint8 activations
#: with int8 weights are the usual convolution/GEMM pairing).
_QDQ_OPS: dict[str, tuple[str, int | None, bool, OpClass]] = {
    "Conv": ("QLinearConv", 2, False, OpClass.CONV),
    "MatMul": ("QLinearMatMul", None, False, OpClass.MATMUL),
    "Gemm": ("QGemm", 2, False, OpClass.MATMUL),
    "Add": ("QLinearAdd", None, True, OpClass.OTHER),
    "Mul": ("QLinearMul", None, True, OpClass.OTHER),
    "GlobalAveragePool": ("QLinearGlobalAveragePool", None, True, OpClass.OTHER),
    "Sigmoid": ("QLinearSigmoid", None, True, OpClass.OTHER),
    "LeakyRelu": ("QLinearLeakyRelu", None, True, OpClass.OTHER),
}
#: The anchors whose quantized op is an integer product, computing at the platform's int8 peak.
_INTEGER_PRODUCTS = ("Conv", "MatMul", "Gemm")


def _qdq(anchor: str) -> EdgePattern:
    produces, bias, same_type, op_class = _QDQ_OPS[anchor]
    at = " computing at int8" if anchor in _INTEGER_PRODUCTS else ""
    weights = " (weights through a folded DequantizeLinear)" if anchor in _INTEGER_PRODUCTS else ""
    return EdgePattern(
        f"qdq_{anchor.lower()}",
        frozenset({anchor}),
        frozenset({"QuantizeLinear"}),
        CONSUMER,
        (check("dequantized_operands", produces, bias, same_type, bias is not None), _SOLE),
        f"DequantizeLinear → {anchor}{weights} → QuantizeLinear → one {produces}{at} (ORT's QDQ selector-actions)",
        produces=produces,
        op_class=op_class,
    )


QDQ_OPS = tuple(_qdq(anchor) for anchor in _QDQ_OPS)
QDQ_INPUT = EdgePattern(
    "qdq_input",
    frozenset(produces for produces, *_ in _QDQ_OPS.values()),
    frozenset({"DequantizeLinear"}),
    PRODUCER,
    (check("sole_consumer", "ONNX Runtime gives each consumer its own copy; onnxroof runs it once, in float"),),
    "the DequantizeLinear of an activation read only by a QDQ kernel runs inside it (the kernel reads the int8 tensor)",
)
#: The patterns whose kernel runs as an integer product (QLinearConv, QLinearMatMul, QGemm) at the int8 peak.
QDQ_PATTERNS = frozenset(f"qdq_{anchor.lower()}" for anchor in _INTEGER_PRODUCTS)
_QDQ_NAMES = (*(p.name for p in QDQ_OPS), QDQ_INPUT.name)

POINTWISE = PointwisePattern(
    "pointwise",
    "neighbouring elementwise kernels of equal element count (views between them are free) fused into one",
)

#: Every pattern, in the order they are applied: functions first, then edges, then pointwise fusion.
PATTERNS: tuple[Pattern, ...] = (
    ORT_GELU,
    ORT_LAYERNORM,
    ORT_RMSNORM,
    GELU_ERF,
    GELU_TANH,
    SILU,
    HARDSWISH,
    LAYERNORM,
    RMSNORM,
    ATTENTION,
    *QDQ_OPS,
    QDQ_INPUT,
    CONV_BN,
    CONV_MUL,
    CONV_ADD,
    CONV_RESIDUAL,
    MATMUL_ADD,
    MATMUL_BIAS,
    TRANSPOSE_MATMUL,
    MATMUL_SCALE,
    ORT_CONV_ACTIVATION,
    CONV_ACTIVATION,
    ORT_GEMM_ACTIVATION,
    GEMM_ACTIVATION,
    BIAS_GELU,
    SKIP_LAYERNORM,
    SKIP_RMSNORM,
    SKIP_LAYERNORM_BIAS,
    ATTENTION_OPERAND,
    ATTENTION_OUTPUT,
    POINTWISE,
)
PATTERNS_BY_NAME: Mapping[str, Pattern] = MappingProxyType({p.name: p for p in PATTERNS})

#: Target runtime → the patterns it performs.
PROFILES: Mapping[FusionProfile, tuple[str, ...]] = MappingProxyType(
    {
        FusionProfile.NONE: (),
        FusionProfile.ORT_CPU: (
            "ort_gelu",
            "silu",
            "ort_layernorm",
            "ort_rmsnorm",
            "conv_bn",
            "conv_mul",
            "conv_add",
            "matmul_add",
            "transpose_matmul",
            "matmul_scale",
            "ort_conv_activation",
            "ort_gemm_activation",
            "bias_gelu",
            "skip_layernorm",
            "skip_layernorm_bias",
            *_QDQ_NAMES,
        ),
        FusionProfile.TENSORRT: (
            "gelu_erf",
            "gelu_tanh",
            "silu",
            "hardswish",
            "layernorm",
            "rmsnorm",
            "attention",
            "conv_bn",
            "conv_mul",
            "conv_add",
            "conv_residual",
            "conv_activation",
            "matmul_bias",
            "transpose_matmul",
            "matmul_scale",
            "gemm_activation",
            "skip_layernorm",
            "skip_rmsnorm",
            "skip_layernorm_bias",
            "attention_operand",
            "attention_output",
            *_QDQ_NAMES,
            "pointwise",
        ),
    }
)
PROFILES = MappingProxyType({**PROFILES, FusionProfile.TENSORRT_LLM: PROFILES[FusionProfile.TENSORRT]})
assert set(PROFILES) == set(FusionProfile), "every fusion profile has its patterns, and only those"

__all__ = [
    "ACTIVATIONS",
    "CONSUMER",
    "OPERAND",
    "ORT_CONV_ACTIVATIONS",
    "ORT_GEMM_ACTIVATIONS",
    "PATTERNS",
    "PATTERNS_BY_NAME",
    "PRODUCER",
    "PROFILES",
    "QDQ_PATTERNS",
    "Check",
    "EdgePattern",
    "FunctionPattern",
    "Pattern",
    "PointwisePattern",
    "Step",
    "check",
    "parse_template",
]
