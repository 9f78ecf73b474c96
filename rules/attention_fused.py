"""Cost rules: ONNX Runtime's attention ops with their own input projection, bias or packed tokens
(com.microsoft Attention, MultiHeadAttention, DecoderMaskedMultiHeadAttention, PackedAttention,
PackedMultiHeadAttention).

The attention core, its per-score counts and the causal-mask convention (counted in full) are those of
:mod:`onnxroof.rules.attention` (see :func:`onnxroof.rules.attention.attention_core`); these rules add the QKV
projection GEMM (Attention, PackedAttention) and the bias add (1 FLOP per element of Q, K and V when ``bias``
is given). Traffic: every input read once (the whole past KV cache included), every output written once.
"""

from __future__ import annotations

from onnxroof.core.cost import FLOPS_PER_MAC, Cost
from onnxroof.core.errors import MalformedNode
from onnxroof.core.ir import OpView
from onnxroof.core.registry import Family
from onnxroof.core.states import OpClass, RuleStatus
from onnxroof.rules._common import inputs_bytes, outputs_bytes, required_input, shape_of, shape_with_rank
from onnxroof.rules.attention import Heads, attention_core, dim, static_dim, with_bytes

FAMILY = Family("attention", OpClass.OTHER)
rule = FAMILY.rule

MS = "com.microsoft"
#: Every op here needs its head count (ONNX Runtime's ContribOperators.md: ``num_heads``, required) and divides by it.
HEADS = ("num_heads",)


def _masked(op: OpView, *mask_inputs: int) -> bool:
    return bool(op.attrs.get("unidirectional", 0)) or any(op.input(i) is not None for i in mask_inputs)


def _streamed(op: OpView, core: Cost, extra_flops: float = 0.0) -> Cost:
    return with_bytes(core, inputs_bytes(op), outputs_bytes(op), extra_flops)


# ------------------------------------------------------------------------------------- MultiHeadAttention
def _mha_heads(op: OpView, past_index: int) -> Heads:
    """Heads of MultiHeadAttention-like inputs: query [B, S, N·D] or packed QKV [B, S, N, 3, D]; key
    [B, L, N·D], [B, N, L, D] or packed KV [B, L, N, 2, D]; value [B, L, N·Dv] or [B, N, L, Dv]."""
    n = int(op.attrs["num_heads"])
    q = shape_of(required_input(op, 0))
    if len(q) not in (3, 5):
        raise MalformedNode(f"node {op.id} ({MS}::{op.op_type}): query has rank {len(q)} {list(q)}, needs 3 or 5")
    b, s = q[0], q[1]
    key, value = op.input(1), op.input(2)
    if len(q) == 5:
        d = q[-1]
    elif key is None:  # DecoderMaskedMultiHeadAttention's packed QKV: [B, S, 3·N·D]
        d = q[2] // (3 * n)
    else:
        d = q[2] // n
    if key is None:
        new, dv = s, d
    elif len(shape_of(key)) == 5:
        new, dv = dim(key, 1), dim(key, -1)
    elif len(shape_of(key)) == 4:
        new, dv = dim(key, 2), dim(required_input(op, 2), -1)
    else:
        new = dim(key, 1)
        dv = d if value is None else dim(value, 3) if len(shape_of(value)) == 4 else dim(value, 2) // n
    t = static_dim(op.output(1), 2)
    if t is None:
        past = op.input(past_index)
        t = new + (dim(past, 2) if past is not None else 0)
    return Heads(b, s, t, n, n, d, dv)


def _bias_flops(op: OpView, h: Heads, bias_index: int) -> int:
    """1 add per element of Q [B, S, N·D], K [B, L, N·D], V [B, L, N·Dv] when a bias is given (L = T − past)."""
    if op.input(bias_index) is None:
        return 0
    width = int(shape_of(required_input(op, bias_index))[-1])
    return h.b * h.s * width


@rule("MultiHeadAttention", domain=MS, required_attrs=HEADS, inputs=(1, None), positive_attrs=HEADS)
def multi_head_attention(op: OpView) -> Cost:
    """com.microsoft::MultiHeadAttention: attention of given Q, K, V (self or cross) with an optional KV cache.

    Formula: MACs = B·N·S·T·(D + Dv); FLOPs = 2·MACs + (1 + m + 5)·B·N·S·T (see
      :func:`onnxroof.rules.attention.attention_core`) + B·S·W when ``bias`` [W] is given (1 add per element
      of the packed Q, K, V bias, charged per query token). T = present_key's length, else past + L;
      m = 1 with ``unidirectional``, ``key_padding_mask`` or ``attention_bias``.
    Bytes: read every input (query, key, value, bias, masks, the whole past KV cache); write output,
      present_key/value and qk when present.
    Assumptions: causal mask counted in full; the bias add is charged per query token (K and V have as many
      rows in self-attention).
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.MultiHeadAttention.
    """
    h = _mha_heads(op, 6)
    return _streamed(op, attention_core(h, masked=_masked(op, 4, 5)), _bias_flops(op, h, 3))


@rule("DecoderMaskedMultiHeadAttention", domain=MS, required_attrs=HEADS, inputs=(1, None), positive_attrs=HEADS)
def decoder_masked_multi_head_attention(op: OpView) -> Cost:
    """com.microsoft::DecoderMaskedMultiHeadAttention: one decode step of attention over a KV buffer.

    Formula: MACs = B·N·S·T·(D + Dv); FLOPs = 2·MACs + (1 + 1 + 5)·B·N·S·T (causal mask) + B·S·W with
      ``bias`` [W]. query [B, 1, N·D] or packed [B, 1, 3·N·D]; T = present_key's length (the buffer's
      length with ``past_present_share_buffer``: an upper bound, the valid length is a runtime value), else
      past + 1.
    Bytes: read every input (the whole past KV buffer); write output, present_key/value and qk when present.
    Assumptions: the whole buffer is attended when past and present share it.
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.DecoderMaskedMultiHeadAttention.
    """
    h = _mha_heads(op, 5)
    return _streamed(op, attention_core(h, masked=True), _bias_flops(op, h, 10))


# ------------------------------------------------------------------------------------ Attention (contrib)
def _qkv_sizes(op: OpView, weights_width: int) -> tuple[int, int, int]:
    sizes = list(op.attrs.get("qkv_hidden_sizes", []) or [])
    if len(sizes) == 3:
        return int(sizes[0]), int(sizes[1]), int(sizes[2])
    return (weights_width // 3,) * 3


@rule("Attention", domain=MS, required_attrs=HEADS, inputs=(2, None), positive_attrs=HEADS)
def contrib_attention(op: OpView) -> Cost:
    """com.microsoft::Attention: QKV projection + bias + multi-head self-attention with an optional past.

    Formula: MACs = B·S·I·(Wq + Wk + Wv) (the projection, input [B, S, I] × weights [I, Wq + Wk + Wv];
      ``qkv_hidden_sizes``, else 3 equal parts) + B·N·S·T·(D + Dv) (D = Wq/N, Dv = Wv/N);
      FLOPs = 2·MACs + B·S·(Wq + Wk + Wv) (bias add) + (1 + m + 5)·B·N·S·T (attention_core);
      T = present's length (present [2, B, N, T, D]), else past + S; m = 1 with ``unidirectional``,
      ``mask_index`` or ``attention_bias``.
    Bytes: read input, weights, bias, masks and the whole past; write output and present.
    Assumptions: causal mask counted in full; ``do_rotary`` adds 3 FLOPs per rotated element of Q and K.
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.Attention.
    """
    b, s, width = shape_with_rank(op, required_input(op, 0), 3, "input")
    n = int(op.attrs["num_heads"])
    wq, wk, wv = _qkv_sizes(op, dim(required_input(op, 1), -1))
    t = static_dim(op.output(1), 3)
    if t is None:
        past = op.input(4)
        t = s + (dim(past, 3) if past is not None else 0)
    h = Heads(b, s, t, n, n, wq // n, wv // n)
    projection = b * s * width * (wq + wk + wv)
    core = attention_core(h, masked=_masked(op, 3, 5))
    extra = FLOPS_PER_MAC * projection + (b * s * (wq + wk + wv) if op.input(2) is not None else 0)
    if int(op.attrs.get("do_rotary", 0)):
        rotary = int(op.attrs.get("rotary_embedding_dim", 0) or 0) or wq // n
        extra += 3 * b * s * 2 * n * rotary
    return _streamed(op, Cost(flops=core.flops, macs=core.macs + projection), extra)


# --------------------------------------------------------------------------------------- packed (no padding)
@rule(
    "PackedAttention",
    domain=MS,
    status=RuleStatus.APPROXIMATE,
    required_attrs=HEADS,
    inputs=(4, None),
    positive_attrs=HEADS,
)
def packed_attention(op: OpView) -> Cost:
    """com.microsoft::PackedAttention: Attention on padding-free tokens ([token_count, I]).

    Formula: MACs = C·I·(Wq + Wk + Wv) (projection of the C = token_count real tokens) + B·N·S·S·(D + Dv)
      (attention of each sequence, bounded by the padded B × S of ``token_offset`` [B, S]);
      FLOPs = 2·MACs + C·(Wq + Wk + Wv) with ``bias`` + (1 + m + 5)·B·N·S·S.
    Bytes: read every input; write the output.
    Assumptions: the per-sequence lengths are runtime values: attention is bounded by the padded length S.
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.PackedAttention.
    """
    c, width = shape_with_rank(op, required_input(op, 0), 2, "input")
    b, s = shape_with_rank(op, required_input(op, 3), 2, "token_offset")
    n = int(op.attrs["num_heads"])
    wq, wk, wv = _qkv_sizes(op, dim(required_input(op, 1), -1))
    core = attention_core(Heads(b, s, s, n, n, wq // n, wv // n), masked=op.input(5) is not None)
    projection = c * width * (wq + wk + wv)
    extra = FLOPS_PER_MAC * projection + (c * (wq + wk + wv) if op.input(2) is not None else 0)
    return _streamed(op, Cost(flops=core.flops, macs=core.macs + projection), extra)


@rule(
    "PackedMultiHeadAttention",
    domain=MS,
    status=RuleStatus.APPROXIMATE,
    required_attrs=HEADS,
    inputs=(5, None),
    positive_attrs=HEADS,
)
def packed_multi_head_attention(op: OpView) -> Cost:
    """com.microsoft::PackedMultiHeadAttention: MultiHeadAttention on padding-free tokens.

    Formula: MACs = B·N·S·S·(D + Dv), FLOPs = 2·MACs + (1 + m + 5)·B·N·S·S + C·W with ``bias`` [W];
      query [C, N·D] or packed QKV [C, N, 3, D] (C = token_count), value [C, N·Dv], ``token_offset`` [B, S].
    Bytes: read every input; write the output.
    Assumptions: attention is bounded by the padded length S (per-sequence lengths are runtime values).
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.PackedMultiHeadAttention.
    """
    q = shape_of(required_input(op, 0))
    if len(q) not in (2, 4):
        raise MalformedNode(f"node {op.id} ({MS}::{op.op_type}): query has rank {len(q)} {list(q)}, needs 2 or 4")
    n = int(op.attrs["num_heads"])
    d = q[-1] if len(q) == 4 else q[1] // n
    value = op.input(2)
    dv = dim(value, -1) // n if value is not None else d
    b, s = shape_with_rank(op, required_input(op, 4), 2, "token_offset")
    core = attention_core(Heads(b, s, s, n, n, d, dv), masked=op.input(6) is not None)
    bias = q[0] * dim(op.input(3), -1) if op.input(3) is not None else 0  # type: ignore[arg-type]
    return _streamed(op, core, bias)
