"""Cost rules: scaled dot-product attention with a KV cache (ONNX Attention, ONNX Runtime's GroupQueryAttention,
MultiHeadAttention, DecoderMaskedMultiHeadAttention, SparseAttention); the fused forms with their own input
projection or packed tokens are in :mod:`onnxroof.rules.attention_fused`.

Every rule counts the same core (:func:`attention_core`) over B batches, Hq query heads, S new tokens and the
attended length T = past + new (or the KV buffer's length when past and present share one buffer):

* QKᵀ: MACs = B·Hq·S·T·D, AV: MACs = B·Hq·S·T·Dv (D, Dv: head sizes of keys and values); grouped-query
  attention (Hkv < Hq) reads each KV head for Hq/Hkv query heads and computes as much;
* per score (B·Hq·S·T of them): 1 multiply by the scale, 1 mask operation when a mask applies (causal,
  additive bias or padding), 3 when a softcap applies (divide, tanh, multiply), 5 for the softmax (max,
  subtract, exp, sum, divide, as ai.onnx::Softmax).

**A causal mask is counted in full**: the S×T scores are all computed and masked, as an eager graph and a
runtime without block skipping do (so the counts match ``torch.utils.flop_counter`` on the eager model). A
flash kernel that skips masked blocks does about half of a prefill's score work; this rule does not assume it.

Traffic: Q, K, V and the whole past KV cache are read (a decode step's bytes grow with the past length), the
output and the present KV are written; the scores never reach memory (the fused kernel keeps them on chip).
"""

from __future__ import annotations

from typing import NamedTuple

from onnxroof.core.cost import FLOPS_PER_MAC, Cost
from onnxroof.core.errors import ShapeUnknown
from onnxroof.core.ir import OpView, TensorInfo
from onnxroof.core.registry import Family
from onnxroof.core.states import OpClass, RuleStatus
from onnxroof.rules._common import (
    inputs_bytes,
    nbytes,
    outputs_bytes,
    required_attr,
    required_input,
    shape_of,
    shape_with_rank,
)

FAMILY = Family("attention", OpClass.OTHER)
rule = FAMILY.rule

MS = "com.microsoft"
SOFTMAX_PER_SCORE = 5  # max, subtract, exp, sum, divide
SOFTCAP_PER_SCORE = 3  # c · tanh(x / c): divide, tanh, multiply
ROTARY_PER_ELEMENT = 3  # per rotated pair (x1·cos − x2·sin, x2·cos + x1·sin): 4 multiplies + 2 adds


class Heads(NamedTuple):
    """The attention problem: batch, new tokens, attended length, query and KV heads, head sizes."""

    b: int
    s: int
    t: int
    hq: int
    hkv: int
    d: int
    dv: int

    @property
    def scores(self) -> int:
        return self.b * self.hq * self.s * self.t


def attention_core(h: Heads, *, masked: bool, softcap: bool = False) -> Cost:
    """MACs = B·Hq·S·T·(D + Dv); FLOPs = 2·MACs + (1 + m + 3·c + 5)·B·Hq·S·T (module docstring). No bytes."""
    macs = h.scores * (h.d + h.dv)
    per_score = 1 + (1 if masked else 0) + (SOFTCAP_PER_SCORE if softcap else 0) + SOFTMAX_PER_SCORE
    return Cost(flops=float(FLOPS_PER_MAC * macs + per_score * h.scores), macs=float(macs))


def dim(t: TensorInfo, axis: int) -> int:
    """One static dim of ``t`` (raises ShapeUnknown naming ``t`` otherwise)."""
    shape = t.shape
    size = shape[axis] if shape is not None and -len(shape) <= axis < len(shape) else None
    if size is None:
        raise ShapeUnknown(t.name)
    return int(size)


def static_dim(t: TensorInfo | None, axis: int) -> int | None:
    """One dim of ``t`` if static, else None."""
    if t is None or t.shape is None or not -len(t.shape) <= axis < len(t.shape):
        return None
    return t.shape[axis]


def with_bytes(core: Cost, read: float, written: float, extra_flops: float = 0.0) -> Cost:
    return Cost(flops=core.flops + extra_flops, macs=core.macs, bytes_read=read, bytes_written=written)


def rotary_flops(b: int, s: int, heads: int, rotary_dim: int) -> int:
    """3 FLOPs per rotated element (6 per pair) over B·S·heads·rotary_dim elements."""
    return ROTARY_PER_ELEMENT * b * s * heads * rotary_dim


def cache_rows_bytes(cache: TensorInfo | None, rows: int) -> float:
    """Bytes of ``rows`` rows of a [max_position, width] cos or sin cache (the gathered rows, not the table)."""
    if cache is None or not cache.is_static_shape or not cache.shape:
        return 0.0
    return rows * (cache.nbytes / max(dim(cache, 0), 1)) if len(cache.shape) == 2 else cache.nbytes


def table_params(*indices: int):
    """A ``params`` function: the inputs at ``indices`` are precomputed tables (cos/sin caches), not parameters."""

    def params(op: OpView) -> dict[int, float]:
        return {i: 0.0 for i in indices}

    return params


# ------------------------------------------------------------------------------------------ ONNX Attention
def _onnx_heads(op: OpView) -> Heads:
    q, k, v = required_input(op, 0), required_input(op, 1), required_input(op, 2)
    if len(shape_of(q)) == 4:  # [B, Hq, S, D], [B, Hkv, L, D], [B, Hkv, L, Dv]
        b, hq, s, d = shape_of(q)
        hkv, new, dv = dim(k, 1), dim(k, 2), dim(v, 3)
    else:  # [B, S, Hq·D], [B, L, Hkv·D], [B, L, Hkv·Dv]: the head counts are required for 3D inputs
        hq, hkv = required_attr(op, "q_num_heads"), required_attr(op, "kv_num_heads")
        b, s, width = shape_with_rank(op, q, 3, "input Q")
        d, new, dv = width // hq, dim(k, 1), dim(v, 2) // hkv
    present = op.output(1)
    past = op.input(4)
    t = static_dim(present, 2)
    if t is None:
        t = new + (dim(past, 2) if past is not None else 0)
    return Heads(b, s, t, hq, hkv, d, dv)


@rule("Attention", params=table_params(), positive_attrs=("q_num_heads", "kv_num_heads"))
def onnx_attention(op: OpView) -> Cost:
    """ai.onnx::Attention (opsets 23, 24): softmax(Q·Kᵀ·scale [softcap] + mask)·V with an optional KV cache.

    Formula: MACs = B·Hq·S·T·(D + Dv); FLOPs = 2·MACs + (1 + m + 3·c + 5)·B·Hq·S·T (module docstring),
      Q [B, S, Hq·D] (``q_num_heads``) or [B, Hq, S, D], K [.., L, ..], T = present_key's length, else
      past + L; m = 1 when ``attn_mask`` is given or ``is_causal`` = 1, c = 1 when ``softcap`` > 0.
      Hkv = ``kv_num_heads`` < Hq is grouped-query attention (same arithmetic per query head).
    Bytes: read Q, K, V, attn_mask, past_key, past_value (the whole cache); write Y, present_key,
      present_value and qk_matmul_output when present.
    Assumptions: a causal mask is counted in full (module docstring); the scores stay on chip.
    Reference: ONNX Attention-23/24 spec.
    """
    h = _onnx_heads(op)
    masked = op.input(3) is not None or bool(op.attrs.get("is_causal", 0))
    core = attention_core(h, masked=masked, softcap=float(op.attrs.get("softcap", 0.0) or 0.0) > 0)
    return with_bytes(core, inputs_bytes(op), outputs_bytes(op))


# ------------------------------------------------------------------------------------ GroupQueryAttention
def _gqa_heads(op: OpView) -> tuple[Heads, bool]:
    """Heads of GroupQueryAttention / SparseAttention and whether past and present share one buffer."""
    q = required_input(op, 0)
    hq, hkv = int(op.attrs["num_heads"]), int(op.attrs["kv_num_heads"])
    b, s, width = shape_with_rank(op, q, 3, "input query")
    packed = op.input(1) is None  # query holds Q, K and V: [B, S, (Hq + 2·Hkv)·D]
    d = width // (hq + 2 * hkv) if packed else width // hq
    past, present = op.input(3), op.output(1)
    p, t = static_dim(past, 2), static_dim(present, 2)
    shared = p is not None and p > 0 and t == p
    if t is None:
        if p is None and past is not None:
            raise ShapeUnknown(past.name)
        t = s + (p or 0)
    return Heads(b, s, t, hq, hkv, d, d), shared


def _kv_cache_io(op: OpView, h: Heads, shared: bool, cache_inputs: tuple[int, int] = (3, 4)) -> tuple[float, float]:
    """(bytes read, bytes written) of the KV cache: the whole past read; the present written in full, or only its
    S new rows when past and present share one buffer (then the buffer is read, as the kernel may attend all)."""
    read = nbytes(op.input(i) for i in cache_inputs)
    if not shared:
        return read, nbytes(op.outputs[1:3])
    present = [t for t in op.outputs[1:3] if t is not None]
    return read, sum(t.nbytes * h.s / h.t for t in present)


@rule(
    "GroupQueryAttention",
    domain=MS,
    params=table_params(7, 8),
    required_attrs=("num_heads", "kv_num_heads"),
    inputs=(1, None),
    positive_attrs=("num_heads", "kv_num_heads"),
)
def group_query_attention(op: OpView) -> Cost:
    """com.microsoft::GroupQueryAttention: causal grouped-query attention with a KV cache, rotary inside.

    Formula: MACs = B·Hq·S·T·2·D; FLOPs = 2·MACs + (1 + 1 + 3·c + 5)·B·Hq·S·T (module docstring; the causal
      mask always applies, c = 1 when ``softcap`` > 0) + 3·B·S·(Hq + Hkv)·R when ``do_rotary`` = 1
      (R = rotated dims = 2·cos_cache's last dim: 6 FLOPs per rotated pair of Q and K).
      query [B, S, Hq·D] (or packed [B, S, (Hq + 2·Hkv)·D] without key/value), past [B, Hkv, P, D],
      present [B, Hkv, T, D]; T = present's length: P + S, or the buffer's length when past and present
      share one buffer (present's length = past's > 0).
    Bytes: read query, key, value, the whole past_key/past_value, the S gathered rows of cos/sin; write
      output, present_key/value in full (or only the S new rows into a shared buffer), output_qk if present.
    Assumptions: causal mask counted in full; seqlens_k / total_sequence_length are a few bytes (ignored);
      the cos/sin caches are precomputed tables, not parameters.
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.GroupQueryAttention.
    """
    h, shared = _gqa_heads(op)
    core = attention_core(h, masked=True, softcap=float(op.attrs.get("softcap", 0.0) or 0.0) > 0)
    rotary = 0
    read = nbytes(op.inputs[:3])
    if int(op.attrs.get("do_rotary", 0)) and op.input(7) is not None:
        rotary = rotary_flops(h.b, h.s, h.hq + h.hkv, 2 * dim(required_input(op, 7), -1))
        read += cache_rows_bytes(op.input(7), h.b * h.s) + cache_rows_bytes(op.input(8), h.b * h.s)
    read += nbytes(op.inputs[10:11])  # attention_bias
    cache_read, cache_written = _kv_cache_io(op, h, shared)
    written = nbytes(op.outputs[:1]) + cache_written + nbytes(op.outputs[3:4])
    return with_bytes(core, read + cache_read, written, rotary)


@rule(
    "SparseAttention",
    domain=MS,
    status=RuleStatus.APPROXIMATE,
    params=table_params(9, 10),
    required_attrs=("num_heads", "kv_num_heads"),
    inputs=(7, None),
    positive_attrs=("num_heads", "kv_num_heads"),
)
def sparse_attention(op: OpView) -> Cost:
    """com.microsoft::SparseAttention: block-sparse causal grouped-query attention with a shared KV buffer.

    Formula: as GroupQueryAttention with the score work scaled by the layout's density
      ρ = min(1, nnz / R²): MACs = ρ·B·Hq·S·T·2·D, score FLOPs ρ·(1 + 1 + 5)·B·Hq·S·T, plus
      3·B·S·(Hq + Hkv)·R_rot for rotary when ``do_rotary`` = 1; R = block rows of the layout
      (block_row_indices' last dim − 1), nnz = block_col_indices' last dim (the most nonzero blocks of any
      layout). The sparse layout is the mask: blocks outside it are skipped by design.
    Bytes: read query, key, value, the whole past_key/past_value buffers, the gathered cos/sin rows and the
      layout; write output and the S new rows of present_key/value (shared buffer).
    Assumptions: every head uses the densest layout; T = the KV buffer's length (present's length).
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.SparseAttention.
    """
    h, _ = _gqa_heads(op)
    rows = max(dim(required_input(op, 5), -1) - 1, 1)
    density = min(1.0, dim(required_input(op, 6), -1) / (rows * rows))
    core = attention_core(h, masked=True).scaled(density)
    rotary = 0
    read = nbytes(op.inputs[:3]) + nbytes(op.inputs[5:7])
    if int(op.attrs.get("do_rotary", 0)) and op.input(9) is not None:
        rotary = rotary_flops(h.b, h.s, h.hq + h.hkv, 2 * dim(required_input(op, 9), -1))
        read += cache_rows_bytes(op.input(9), h.b * h.s) + cache_rows_bytes(op.input(10), h.b * h.s)
    cache_read, cache_written = _kv_cache_io(op, h, static_dim(op.input(3), 2) == static_dim(op.output(1), 2))
    return with_bytes(core, read + cache_read, nbytes(op.outputs[:1]) + cache_written, rotary)
