"""Cost rules: products with low-bit packed weights (com.microsoft MatMulNBits, MatMulBnb4, GatherBlockQuantized)
and mixtures of experts (MoE, QMoE), as ONNX Runtime GenAI and its quantizers write them.

**Packed weights are weights**: their parameters are the LOGICAL elements they hold (N·K for an N × K
matrix of 4-bit values, whatever the packing), their bytes the STORED size (packed data + scales + zero
points), through the registry's ``params`` functions (:mod:`onnxroof.core.registry`). Scales, zero points,
``g_idx`` and absmax are quantization metadata: bytes, no parameters.

Counting: a MAC is 2 FLOPs; dequantizing one weight ``(q − zp)·scale`` is 2 operations, done once per call
for every weight the call reads (a GEMV at decode and a GEMM at prefill both dequantize each weight once).
"""

from __future__ import annotations

from collections.abc import Sequence

from onnxroof.core.cost import FLOPS_PER_MAC, Cost
from onnxroof.core.errors import MalformedNode
from onnxroof.core.ir import OpView, TensorInfo
from onnxroof.core.registry import Family
from onnxroof.core.states import OpClass, RuleStatus
from onnxroof.rules._common import inputs_bytes, nbytes, out_numel, outputs_bytes, required_input, shape_of

FAMILY = Family("matmul", OpClass.MATMUL)
rule = FAMILY.rule

MS = "com.microsoft"
DEQUANTIZE = 2  # (q − zp) · scale


def logical_elements(t: TensorInfo, bits: int) -> float:
    """Elements a packed tensor holds: stored bits / bits per element."""
    return t.nbytes * 8 / bits


def _rows(op: OpView, k: int) -> int:
    """M: the rows of A [..., K]."""
    return required_input(op, 0).numel // k if k else 0


def _nbits_params(op: OpView) -> dict[int, float]:
    return {1: float(int(op.attrs["N"]) * int(op.attrs["K"])), 2: 0.0, 3: 0.0, 4: 0.0}


@rule(
    "MatMulNBits",
    domain=MS,
    params=_nbits_params,
    required_attrs=("K", "N"),
    inputs=(3, None),
    positive_attrs=("K", "N"),
)
def matmul_nbits(op: OpView) -> Cost:
    """com.microsoft::MatMulNBits: Y[M, N] = A[M, K] · dequantize(B)ᵀ (+ bias), B of ``bits`` = 2, 4 or 8.

    Formula: MACs = M·N·K (M = elements of A / K, attributes K and N); FLOPs = 2·MACs + 2·N·K (each
      weight dequantized once: subtract zero point, multiply by its block's scale) + M·N with ``bias``.
    Bytes: read A, B packed [N, ⌈K/block_size⌉, block_size·bits/8], scales, zero_points, g_idx, bias at
      their stored sizes; write Y.
    Params: N·K (the logical weight elements); scales, zero points and g_idx count none.
    Assumptions: ``accuracy_level`` (int8 compute of A) does not change the count.
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.MatMulNBits.
    """
    n, k = int(op.attrs["N"]), int(op.attrs["K"])
    m = _rows(op, k)
    macs = m * n * k
    flops = FLOPS_PER_MAC * macs + DEQUANTIZE * n * k + (m * n if op.input(5) is not None else 0)
    return Cost(flops=float(flops), macs=float(macs), bytes_read=inputs_bytes(op), bytes_written=outputs_bytes(op))


def _bnb4_params(op: OpView) -> dict[int, float]:
    return {1: float(int(op.attrs["N"]) * int(op.attrs["K"])), 2: 0.0}


@rule(
    "MatMulBnb4", domain=MS, params=_bnb4_params, required_attrs=("K", "N"), inputs=(3, None), positive_attrs=("K", "N")
)
def matmul_bnb4(op: OpView) -> Cost:
    """com.microsoft::MatMulBnb4: Y = A[M, K] · dequantize(B) with bitsandbytes FP4/NF4 weights.

    Formula: MACs = M·N·K; FLOPs = 2·MACs + 2·N·K (each weight dequantized once: table lookup counted as
      1, multiply by its block's absmax 1).
    Bytes: read A, B packed [⌈N·K/2⌉] uint8 and absmax [⌈N·K/block_size⌉]; write Y.
    Params: N·K; absmax counts none.
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.MatMulBnb4.
    """
    n, k = int(op.attrs["N"]), int(op.attrs["K"])
    macs = _rows(op, k) * n * k
    flops = FLOPS_PER_MAC * macs + DEQUANTIZE * n * k
    return Cost(flops=float(flops), macs=float(macs), bytes_read=inputs_bytes(op), bytes_written=outputs_bytes(op))


def _gbq_params(op: OpView) -> dict[int, float]:
    return {0: logical_elements(required_input(op, 0), int(op.attrs.get("bits", 4))), 2: 0.0, 3: 0.0}


@rule(
    "GatherBlockQuantized",
    domain=MS,
    family="indexing",
    op_class=OpClass.INDEXING,
    params=_gbq_params,
    inputs=(3, None),
    positive_attrs=("bits",),
)
def gather_block_quantized(op: OpView) -> Cost:
    """com.microsoft::GatherBlockQuantized: gather slices of a block-quantized table and dequantize them.

    Formula: FLOPs = 2·N_out (each gathered element dequantized: subtract zero point, multiply by scale).
    Bytes: read indices and only the gathered slices of data, scales and zero_points: (G / R)·(their stored
      bytes), G = elements of indices, R = data's extent along ``gather_axis``; write the output.
    Params: data's logical elements (stored bits / ``bits``); scales and zero points count none.
    Assumptions: each index is gathered once (repeated ids are re-read).
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.GatherBlockQuantized.
    """
    data = required_input(op, 0)
    if not shape_of(data):
        raise MalformedNode(f"node {op.id} ({op.op_type}): data '{data.name}' is a scalar; it gathers along an axis")
    extent = shape_of(data)[int(op.attrs.get("gather_axis", 0)) % len(shape_of(data))]
    fraction = required_input(op, 1).numel / extent if extent else 0.0
    read = fraction * nbytes((data, op.input(2), op.input(3))) + required_input(op, 1).nbytes
    return Cost(flops=float(DEQUANTIZE * out_numel(op)), bytes_read=read, bytes_written=outputs_bytes(op))


# ----------------------------------------------------------------------------------------- mixtures of experts
#: FLOPs per element of the activation between fc1 and fc2, as rules/elementwise.py counts them.
ACTIVATION_FLOPS = {"identity": 0, "relu": 1, "gelu": 5, "silu": 5, "swiglu": 8}
MOE_WEIGHTS = (2, 4, 6)  # fc1, fc2, fc3 experts' weights
QMOE_WEIGHTS = (2, 5, 8)
QMOE_METADATA = (3, 6, 9, 11, 12, 13, 15, 16, 17, 18, 19, 20)  # scales, zero points, global and act scales


def _weight_bits(op: OpView, fc: int) -> int:
    return int(op.attrs.get(f"fc{fc}_expert_weight_bits", 0) or op.attrs.get("expert_weight_bits", 4) or 4)


def _qmoe_params(op: OpView) -> dict[int, float]:
    packed = {fc: op.input(i) for fc, i in enumerate(QMOE_WEIGHTS, 1)}
    logical = {QMOE_WEIGHTS[fc - 1]: logical_elements(t, _weight_bits(op, fc)) for fc, t in packed.items() if t}
    return {**logical, **dict.fromkeys(QMOE_METADATA, 0.0)}


def _moe(op: OpView, weights: Sequence[int], biases: Sequence[int], logical: dict[int, float]) -> Cost:
    x = shape_of(required_input(op, 0))
    hidden = x[-1]
    rows = required_input(op, 0).numel // hidden
    experts = shape_of(required_input(op, 1))[-1]
    k = int(op.attrs.get("k", 1))
    per_expert = [logical.get(i, t.numel) / experts if (t := op.input(i)) is not None else 0.0 for i in weights]
    macs = rows * k * sum(per_expert)
    inner = per_expert[1] / hidden  # fc2 maps the inner width to hidden
    activation = str(op.attrs.get("activation_type", "relu"))
    act = ACTIVATION_FLOPS.get(activation, 1) + (1 if op.input(weights[2]) is not None else 0)
    bias = sum(t.numel / experts for i in biases if (t := op.input(i)) is not None)
    flops = FLOPS_PER_MAC * macs + rows * k * (act * inner + bias) + rows * experts * k + 2 * rows * k * hidden
    touched = min(1.0, rows * k / experts)
    activations = nbytes((op.input(0), op.input(1), op.input(14)))
    expert_bytes = inputs_bytes(op) - activations
    read = activations + touched * expert_bytes
    return Cost(flops=flops, macs=macs, bytes_read=read, bytes_written=outputs_bytes(op))


_MOE_DOC = """

    Formula: MACs = R·k·(W1 + W2 + W3) / E (R = tokens = elements of input / hidden, E = experts = router_probs'
      last dim, k = attribute ``k``, Wi = logical elements of the fc_i experts' weights, all E experts);
      FLOPs = 2·MACs + R·k·(a·I + b) + R·E·k (top-k selection, k passes of E compares) + 2·R·k·hidden
      (scale each expert's output by its routing weight and sum), I = W2 / (E·hidden) the inner width,
      a = activation FLOPs per inner element (identity 0, relu 1, gelu 5, silu 5, swiglu 8) + 1 with fc3
      (gate multiply), b = bias elements per expert.
    Bytes: read input and router_probs; of the experts' weights, biases (and scales) the share
      min(1, R·k / E) (the experts a step can touch: a decode step reads k experts, a long prefill all);
      write output.
    Params: every expert's weights (all E), logical elements; scales and zero points count none.
    Assumptions: routing is uniform enough that R·k token-expert pairs touch min(E, R·k) experts.
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.{op}.
    """


@rule("MoE", domain=MS, status=RuleStatus.APPROXIMATE)
def moe(op: OpView) -> Cost:
    return _moe(op, MOE_WEIGHTS, (3, 5, 7), {})


@rule("QMoE", domain=MS, status=RuleStatus.APPROXIMATE, params=_qmoe_params)
def qmoe(op: OpView) -> Cost:
    return _moe(op, QMOE_WEIGHTS, (4, 7, 10), _qmoe_params(op))


moe.__doc__ = "com.microsoft::MoE: a mixture of float experts' FFNs with top-k routing." + _MOE_DOC.format(op="MoE")
qmoe.__doc__ = "com.microsoft::QMoE: MoE with 4- or 8-bit packed expert weights." + _MOE_DOC.format(op="QMoE")
