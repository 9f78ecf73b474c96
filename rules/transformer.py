"""Cost rules: the fused transformer ops exporters and ONNX Runtime's optimizer write (com.microsoft
EmbedLayerNormalization, RotaryEmbedding, GemmFastGelu, BiasSplitGelu, BiasAdd; ONNX RotaryEmbedding-23,
TensorScatter-24, SwiGLU-28).

Counting rules are those of :mod:`onnxroof.rules.elementwise` (each +, −, ·, /, transcendental = 1 operation)
and :mod:`onnxroof.rules.normalization` (LayerNorm = 5 per element + 5 per row, plus the affine terms).
Rotary embedding: 3 FLOPs per rotated element (a pair (x1, x2) becomes (x1·cos − x2·sin, x2·cos + x1·sin):
4 multiplies + 2 adds); the cos/sin caches are precomputed tables: only their gathered rows are read, and
they count as no parameters.
"""

from __future__ import annotations

from onnxroof.core.cost import FLOPS_PER_MAC, Cost
from onnxroof.core.errors import MalformedNode
from onnxroof.core.ir import OpView, TensorInfo
from onnxroof.core.registry import Family
from onnxroof.core.states import OpClass, RuleKind
from onnxroof.rules._common import (
    inputs_bytes,
    nbytes,
    out_numel,
    outputs_bytes,
    required_input,
    shape_of,
    shape_with_rank,
    streaming,
)
from onnxroof.rules.attention import ROTARY_PER_ELEMENT, cache_rows_bytes, table_params

FAMILY = Family("elementwise", OpClass.ELEMENTWISE)
rule = FAMILY.rule

MS = "com.microsoft"
GELU_ERF = 5  # 0.5·x·(1 + erf(x/√2)), as ai.onnx::Gelu
GELU_TANH = 9  # FastGelu's tanh form, as ai.onnx::Gelu approximate="tanh"
SWISH = 6  # a · sigmoid(α·a): α·a 1, sigmoid 4, · a 1
LN_PER_ELEMENT = 5  # Σx, x − mean, (x − mean)², Σ(x − mean)², · rstd
LN_PER_ROW = 5  # 2 divides, + ε, sqrt, reciprocal


@rule("BiasSplitGelu", domain=MS)
def bias_split_gelu(op: OpView) -> Cost:
    """com.microsoft::BiasSplitGelu: (left, right) = split(X + bias, 2, last axis); Y = left · Gelu(right).

    Formula: FLOPs = N_X + 6·N_Y (X [N, HW, D], Y [N, HW, D/2]): 1 bias add per input element; per output
      element Gelu's 5 (erf form) + 1 multiply.
    Bytes: read X and bias; write Y.
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.BiasSplitGelu.
    """
    return streaming(op, required_input(op, 0).numel + (GELU_ERF + 1) * out_numel(op))


@rule("BiasAdd", domain=MS)
def bias_add(op: OpView) -> Cost:
    """com.microsoft::BiasAdd: Y = X + bias + skip.

    Formula: FLOPs = 2·N_out (2 adds per output element).
    Bytes: read X, bias and skip; write Y.
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.BiasAdd.
    """
    return streaming(op, 2 * out_numel(op))


@rule("SwiGLU")
def swiglu(op: OpView) -> Cost:
    """ai.onnx::SwiGLU (opset 28): Y = Swish_α(A) · B = A · sigmoid(α·A) · B, A and B of one shape.

    Formula: FLOPs = 7·N_out: Swish's 6 (α·a, sigmoid 4, · a) + 1 multiply by B.
    Bytes: read A and B; write Y.
    Reference: ONNX SwiGLU-28 spec (function body).
    """
    return streaming(op, (SWISH + 1) * out_numel(op))


@rule("GemmFastGelu", domain=MS, family="matmul", op_class=OpClass.MATMUL)
def gemm_fast_gelu(op: OpView) -> Cost:
    """com.microsoft::GemmFastGelu: Y = FastGelu(X · W + bias).

    Formula: MACs = M·N·K (X [..., K], W [K, N], M = elements of X / K); FLOPs = 2·MACs + (9 + b)·M·N,
      9 = FastGelu's tanh form, b = 1 with ``bias`` (1 add per output element).
    Bytes: read X, W and bias; write Y.
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.GemmFastGelu.
    """
    x = required_input(op, 0)
    k, n = shape_of(x)[-1], shape_of(required_input(op, 1))[-1]
    m = x.numel // k if k else 0
    macs = m * n * k
    flops = FLOPS_PER_MAC * macs + (GELU_TANH + (1 if op.input(2) is not None else 0)) * m * n
    return Cost(flops=float(flops), macs=float(macs), bytes_read=inputs_bytes(op), bytes_written=outputs_bytes(op))


# ------------------------------------------------------------------------------------------------- rotary
def _rotary(op: OpView, cos: TensorInfo, sin: TensorInfo | None, positions: TensorInfo | None) -> Cost:
    x = required_input(op, 0)
    shape = shape_of(x)
    if len(shape) not in (3, 4) or not shape_of(cos):
        raise MalformedNode(
            f"node {op.id} ({op.op_type}): input '{x.name}' has rank {len(shape)} {list(shape)} and the cos cache "
            f"rank {len(shape_of(cos))}; rotary embedding needs a rank-3 or rank-4 input and a cache with a last dim"
        )
    rot = int(op.attrs.get("rotary_embedding_dim", 0) or 0) or 2 * shape_of(cos)[-1]
    heads = int(op.attrs.get("num_heads", 0) or 0)
    head = shape[-1] if len(shape) == 4 else (shape[-1] // heads if heads else rot)
    rotated = x.numel // head * rot if head else 0
    tokens = shape[0] * (shape[2] if len(shape) == 4 else shape[1])
    if positions is not None and positions.numel > 1:
        tokens = positions.numel
    read = x.nbytes + nbytes((positions,)) + cache_rows_bytes(cos, tokens) + cache_rows_bytes(sin, tokens)
    return Cost(flops=float(ROTARY_PER_ELEMENT * rotated), bytes_read=read, bytes_written=outputs_bytes(op))


_ROTARY_DOC = """

    Formula: FLOPs = 3·E_rot, E_rot = elements of X / head_size · rotary_dim (rotary_dim =
      ``rotary_embedding_dim``, else 2·cos_cache's last dim; head_size = X's last dim for 4-D X, hidden /
      ``num_heads`` for 3-D X): 6 FLOPs per rotated pair, the rest of each head copied.
    Bytes: read X and position_ids, the B·S gathered rows of cos_cache and sin_cache ([max_position,
      rotary_dim/2]; a cache already [B, S, rotary_dim/2] is read whole); write Y.
    Params: none (the caches are precomputed tables).
    Reference: {ref}.
    """


@rule("RotaryEmbedding", domain=MS, params=table_params(2, 3))
def rotary_embedding_contrib(op: OpView) -> Cost:
    return _rotary(op, required_input(op, 2), op.input(3), op.input(1))


@rule("RotaryEmbedding", params=table_params(1, 2))
def rotary_embedding(op: OpView) -> Cost:
    return _rotary(op, required_input(op, 1), op.input(2), op.input(3))


rotary_embedding_contrib.__doc__ = "com.microsoft::RotaryEmbedding: rotary position embedding of X." + (
    _ROTARY_DOC.format(ref="ONNX Runtime ContribOperators.md, com.microsoft.RotaryEmbedding")
)
rotary_embedding.__doc__ = "ai.onnx::RotaryEmbedding (opset 23): rotary position embedding of X." + (
    _ROTARY_DOC.format(ref="ONNX RotaryEmbedding-23 spec")
)


# --------------------------------------------------------------------------------------------- embeddings
def _gathered(op: OpView, table: TensorInfo | None, rows: int) -> float:
    """Bytes of ``rows`` gathered rows of an embedding table [V, H] (at most the whole table); a table of
    another rank is :class:`MalformedNode` naming the node (ONNX Runtime requires 2-D tables)."""
    if table is None:
        return 0.0
    extent = shape_with_rank(op, table, 2, "embedding table")[0]
    return min(rows, extent) * table.nbytes / extent if extent else 0.0


@rule("EmbedLayerNormalization", domain=MS, family="normalization", op_class=OpClass.NORMALIZATION)
def embed_layer_normalization(op: OpView) -> Cost:
    """com.microsoft::EmbedLayerNormalization: LayerNorm(word[ids] + position[pos] (+ segment[seg])) and a
    mask index.

    Formula: FLOPs = (1 + s)·N + 7·N + 5·R + m·R, N = B·S·H elements of the output, R = B·S tokens,
      s = 1 with segment embeddings: the embedding adds; LayerNorm's 5 per element + gamma multiply + beta
      add, 5 per row (as ai.onnx::LayerNormalization); m = 1 with ``mask``: 1 add per token for the mask index.
    Bytes: read input_ids, segment_ids, mask, position_ids, gamma, beta and only the R gathered rows of each
      embedding table (at most the table); write output, mask_index and embedding_sum when present.
    Params: the three embedding tables, gamma and beta in full.
    Reference: ONNX Runtime ContribOperators.md, com.microsoft.EmbedLayerNormalization.
    """
    tokens = required_input(op, 0).numel
    n = out_numel(op)
    segment = 1 if op.input(4) is not None else 0
    mask = 1 if op.input(7) is not None else 0
    flops = (1 + segment) * n + (LN_PER_ELEMENT + 2) * n + LN_PER_ROW * tokens + mask * tokens
    tables = sum(_gathered(op, op.input(i), tokens) for i in (2, 3, 4))
    read = nbytes(op.input(i) for i in (0, 1, 5, 6, 7, 8)) + tables
    return Cost(flops=float(flops), bytes_read=read, bytes_written=outputs_bytes(op))


# ------------------------------------------------------------------------------------------ cache updates
@rule("TensorScatter", kind=RuleKind.LAYOUT, family="movement", op_class=OpClass.MOVEMENT)
def tensor_scatter(op: OpView) -> Cost:
    """ai.onnx::TensorScatter (opset 24): write ``update`` into the KV-cache buffer at ``write_indices``.

    Formula: FLOPs = 0 (a copy).
    Bytes: read update and write_indices; write the updated slice only (update's size): the op models an
      in-place update, past_cache and present_cache are one buffer.
    Assumptions: the runtime aliases present_cache to past_cache (the op's stated intent).
    Reference: ONNX TensorScatter-24 spec.
    """
    update = required_input(op, 1)
    return Cost(bytes_read=update.nbytes + nbytes((op.input(2),)), bytes_written=update.nbytes)
