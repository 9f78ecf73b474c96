"""Transformer and LLM ops (attention family, low-bit weights, MoE, fused ops) against closed-form formulas."""

from __future__ import annotations

import onnx
from helpers import W, cost_of, make_op
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import onnxroof

F32, U8, I64 = "float32", "uint8", "int64"
MS = "com.microsoft"


def core_flops(b, hq, s, t, d, dv, per_score) -> int:
    """2·MACs of QKᵀ and AV + per-score operations (scale, mask, softmax...)."""
    return 2 * b * hq * s * t * (d + dv) + per_score * b * hq * s * t


def gqa(b, s, p, hq, hkv, d, rotary=True, max_pos=64):
    rot = d // 2
    return make_op(
        "GroupQueryAttention",
        [
            ([b, s, hq * d], F32),
            ([b, s, hkv * d], F32),
            ([b, s, hkv * d], F32),
            ([b, hkv, p, d], F32),
            ([b, hkv, p, d], F32),
            ([b], "int32"),
            ([1], "int32"),
            ([max_pos, rot], F32, W) if rotary else None,
            ([max_pos, rot], F32, W) if rotary else None,
        ],
        [([b, s, hq * d], F32), ([b, hkv, p + s, d], F32), ([b, hkv, p + s, d], F32)],
        domain=MS,
        num_heads=hq,
        kv_num_heads=hkv,
        do_rotary=int(rotary),
    )


@settings(max_examples=25, deadline=None)
@given(
    b=st.integers(1, 3),
    s=st.integers(1, 16),
    p=st.integers(0, 64),
    hkv=st.integers(1, 4),
    group=st.integers(1, 4),
    d=st.sampled_from([8, 16, 64]),
)
def test_group_query_attention_formula(b, s, p, hkv, group, d) -> None:
    hq, t = hkv * group, p + s
    c = cost_of(gqa(b, s, p, hq, hkv, d))
    assert c.macs == b * hq * s * t * 2 * d
    rotary = 3 * b * s * (hq + hkv) * d
    assert c.flops == core_flops(b, hq, s, t, d, d, 1 + 1 + 5) + rotary
    kv = 4 * b * hkv * d
    q = 4 * b * s * hq * d
    cache_rows = 2 * 4 * b * s * (d // 2)  # the gathered cos and sin rows
    assert c.bytes_read == q + 2 * kv * s + 2 * kv * p + cache_rows
    assert c.bytes_written == q + 2 * kv * t
    assert c.params == 0  # the cos/sin caches are tables, not parameters


def test_gqa_decode_bytes_grow_with_past() -> None:
    short, long = cost_of(gqa(1, 1, 127, 8, 2, 64)), cost_of(gqa(1, 1, 1023, 8, 2, 64))
    assert long.bytes_read - short.bytes_read == 2 * 4 * 2 * 64 * (1023 - 127)  # K and V of 896 more positions
    assert long.macs / short.macs == 1024 / 128


def test_gqa_shared_buffer_writes_only_new_rows() -> None:
    b, s, hq, hkv, d, buf = 1, 1, 4, 2, 16, 256
    op = make_op(
        "GroupQueryAttention",
        [([b, s, hq * d], F32), ([b, s, hkv * d], F32), ([b, s, hkv * d], F32), ([b, hkv, buf, d], F32)] * 1
        + [([b, hkv, buf, d], F32)],
        [([b, s, hq * d], F32), ([b, hkv, buf, d], F32), ([b, hkv, buf, d], F32)],
        domain=MS,
        num_heads=hq,
        kv_num_heads=hkv,
    )
    c = cost_of(op)
    assert c.macs == b * hq * s * buf * 2 * d  # T = the buffer's length
    assert c.bytes_written == 4 * b * s * hq * d + 2 * 4 * b * hkv * s * d


def test_onnx_attention_gqa_3d_with_past_and_softcap() -> None:
    b, s, p, hq, hkv, d = 2, 4, 12, 8, 2, 16
    t = p + s
    op = make_op(
        "Attention",
        [
            ([b, s, hq * d], F32),
            ([b, s, hkv * d], F32),
            ([b, s, hkv * d], F32),
            None,
            ([b, hkv, p, d], F32),
            ([b, hkv, p, d], F32),
        ],
        [([b, s, hq * d], F32), ([b, hkv, t, d], F32), ([b, hkv, t, d], F32)],
        opset=23,
        q_num_heads=hq,
        kv_num_heads=hkv,
        is_causal=1,
        softcap=30.0,
    )
    c = cost_of(op)
    assert c.macs == 2 * b * hq * s * t * d
    assert c.flops == core_flops(b, hq, s, t, d, d, 1 + 1 + 3 + 5)
    assert c.bytes_read == 4 * (b * s * hq * d + 2 * b * s * hkv * d + 2 * b * hkv * p * d)
    assert c.bytes_written == 4 * (b * s * hq * d + 2 * b * hkv * t * d)


def test_onnx_attention_4d_unmasked() -> None:
    b, h, s, d, dv = 1, 4, 8, 16, 32
    op = make_op(
        "Attention", [([b, h, s, d], F32), ([b, h, s, d], F32), ([b, h, s, dv], F32)], [([b, h, s, dv], F32)], opset=23
    )
    assert cost_of(op).flops == core_flops(b, h, s, s, d, dv, 1 + 5)


def test_contrib_attention_includes_projection() -> None:
    b, s, hidden, n, p = 2, 8, 64, 4, 5
    d, t = hidden // n, p + s
    op = make_op(
        "Attention",
        [
            ([b, s, hidden], F32),
            ([hidden, 3 * hidden], F32, W),
            ([3 * hidden], F32, W),
            ([b, t], "int32"),
            ([2, b, n, p, d], F32),
        ],
        [([b, s, hidden], F32), ([2, b, n, t, d], F32)],
        domain=MS,
        num_heads=n,
        unidirectional=1,
    )
    c = cost_of(op)
    projection = b * s * hidden * 3 * hidden
    assert c.macs == projection + 2 * b * n * s * t * d
    assert c.flops == 2 * projection + b * s * 3 * hidden + core_flops(b, n, s, t, d, d, 1 + 1 + 5)
    assert c.params == hidden * 3 * hidden + 3 * hidden


def test_multi_head_attention_cross_and_self() -> None:
    b, s, kv_len, n, d = 2, 6, 10, 4, 8
    cross = make_op(
        "MultiHeadAttention",
        [([b, s, n * d], F32), ([b, kv_len, n * d], F32), ([b, kv_len, n * d], F32)],
        [([b, s, n * d], F32)],
        domain=MS,
        num_heads=n,
    )
    assert cost_of(cross).flops == core_flops(b, n, s, kv_len, d, d, 1 + 5)
    packed = make_op(
        "MultiHeadAttention", [([b, s, n, 3, d], F32)], [([b, s, n * d], F32)], domain=MS, num_heads=n, unidirectional=1
    )
    assert cost_of(packed).macs == 2 * b * n * s * s * d


def test_decoder_masked_mha_reads_the_buffer() -> None:
    b, n, d, buf = 2, 4, 16, 128
    op = make_op(
        "DecoderMaskedMultiHeadAttention",
        [
            ([b, 1, n * d], F32),
            ([b, 1, n * d], F32),
            ([b, 1, n * d], F32),
            None,
            None,
            ([b, n, buf, d], F32),
            ([b, n, buf, d], F32),
        ],
        [([b, 1, n * d], F32), ([b, n, buf, d], F32), ([b, n, buf, d], F32)],
        domain=MS,
        num_heads=n,
    )
    c = cost_of(op)
    assert c.macs == 2 * b * n * buf * d
    assert c.bytes_read >= 2 * 4 * b * n * buf * d


def test_packed_attention_ops() -> None:
    tokens, hidden, n, b, s = 10, 32, 4, 2, 8
    d = hidden // n
    op = make_op(
        "PackedAttention",
        [([tokens, hidden], F32), ([hidden, 3 * hidden], F32, W), None, ([b, s], "int32"), ([b + 1], "int32")],
        [([tokens, hidden], F32)],
        domain=MS,
        num_heads=n,
    )
    assert cost_of(op).macs == tokens * hidden * 3 * hidden + 2 * b * n * s * s * d
    pmha = make_op(
        "PackedMultiHeadAttention",
        [([tokens, n, 3, d], F32), None, None, None, ([b, s], "int32"), ([b + 1], "int32")],
        [([tokens, hidden], F32)],
        domain=MS,
        num_heads=n,
    )
    assert cost_of(pmha).flops == core_flops(b, n, s, s, d, d, 1 + 5)


def test_sparse_attention_scales_by_layout_density() -> None:
    b, s, hq, hkv, d, buf, rows, nnz = 1, 16, 4, 2, 16, 64, 4, 10
    op = make_op(
        "SparseAttention",
        [
            ([b, s, hq * d], F32),
            ([b, s, hkv * d], F32),
            ([b, s, hkv * d], F32),
            ([b, hkv, buf, d], F32),
            ([b, hkv, buf, d], F32),
            ([1, rows + 1], "int32"),
            ([1, nnz], "int32"),
        ],
        [([b, s, hq * d], F32), ([b, hkv, buf, d], F32), ([b, hkv, buf, d], F32)],
        domain=MS,
        num_heads=hq,
        kv_num_heads=hkv,
    )
    assert cost_of(op).macs == b * hq * s * buf * 2 * d * nnz / rows**2


# ------------------------------------------------------------------------------------------- low-bit weights
@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(1, 64),
    n=st.integers(1, 64),
    blocks=st.integers(1, 8),
    bits=st.sampled_from([2, 4, 8]),
    block=st.sampled_from([16, 32, 128]),
    zp=st.booleans(),
)
def test_matmul_nbits_formula(m, n, blocks, bits, block, zp) -> None:
    k = blocks * block
    blob = block * bits // 8
    zp_bytes = n * ((blocks * bits + 7) // 8)
    op = make_op(
        "MatMulNBits",
        [([m, k], F32), ([n, blocks, blob], U8, W), ([n * blocks], F32, W), ([zp_bytes], U8, W) if zp else None],
        [([m, n], F32)],
        domain=MS,
        K=k,
        N=n,
        bits=bits,
        block_size=block,
    )
    c = cost_of(op)
    assert c.macs == m * n * k
    assert c.flops == 2 * m * n * k + 2 * n * k
    stored = n * blocks * blob + 4 * n * blocks + (zp_bytes if zp else 0)
    assert c.bytes_read == 4 * m * k + stored  # the stored size: packed data + scales + zero points
    assert c.params == n * k  # the logical weight elements, not the packed bytes


def test_packed_products_have_the_gemm_view_of_their_attributes() -> None:
    """MatMulNBits / MatMulBnb4 store B packed: the GEMM view (kernel descriptors, runtime kernel classes) takes K
    and N from the attributes, M from A and Y with the batch folded into it (B is one weight every batch entry
    shares: one ``b·m × n × k`` GEMM)."""
    from onnxroof.core.gemm import GemmShape, array_gemm

    b, m, n, k, block = 2, 1, 48, 256, 32
    nbits = make_op(
        "MatMulNBits",
        [([b, m, k], F32), ([n, k // block, block // 2], U8, W), ([n * k // block], F32, W)],
        [([b, m, n], F32)],
        domain=MS,
        K=k,
        N=n,
        bits=4,
        block_size=block,
    )
    assert array_gemm(nbits) == GemmShape(groups=1, m=b * m, n=n, k=k, in_channels=k, out_channels=n)
    bnb4 = make_op(
        "MatMulBnb4",
        [([5, k], F32), ([n * k // 2], U8, W), ([n * k // 64], F32, W)],
        [([5, n], F32)],
        domain=MS,
        K=k,
        N=n,
        block_size=64,
    )
    assert array_gemm(bnb4) == GemmShape(groups=1, m=5, n=n, k=k, in_channels=k, out_channels=n)


def test_matmul_bnb4() -> None:
    m, n, k, block = 3, 16, 64, 64
    op = make_op(
        "MatMulBnb4",
        [([m, k], F32), ([n * k // 2], U8, W), ([n * k // block], F32, W)],
        [([m, n], F32)],
        domain=MS,
        K=k,
        N=n,
        block_size=block,
    )
    c = cost_of(op)
    assert (c.macs, c.params) == (m * n * k, n * k)


def test_gather_block_quantized_reads_only_gathered_rows() -> None:
    vocab, hidden, block, tokens = 1000, 256, 32, 7
    op = make_op(
        "GatherBlockQuantized",
        [([vocab, hidden // 2], U8, W), ([1, tokens], I64), ([vocab, hidden // block], F32, W)],
        [([1, tokens, hidden], F32)],
        domain=MS,
        bits=4,
        block_size=block,
    )
    c = cost_of(op)
    assert c.bytes_read == tokens * (hidden // 2 + 4 * hidden // block) + 8 * tokens
    assert c.params == vocab * hidden
    assert c.flops == 2 * tokens * hidden


def test_moe_and_qmoe() -> None:
    rows, hidden, inner, experts, k = 4, 32, 64, 8, 2
    inputs = [([rows, hidden], F32), ([rows, experts], F32), ([experts, inner, hidden], F32, W), None]
    inputs += [([experts, hidden, inner], F32, W)]
    c = cost_of(make_op("MoE", inputs, [([rows, hidden], F32)], domain=MS, k=k, activation_type="relu"))
    assert c.macs == rows * k * 2 * inner * hidden
    assert c.params == 2 * experts * inner * hidden  # every expert
    weight_bytes = 4 * 2 * experts * inner * hidden
    assert c.bytes_read == 4 * (rows * hidden + rows * experts) + min(1, rows * k / experts) * weight_bytes
    q_inputs = [([rows, hidden], F32), ([rows, experts], F32)]
    q_inputs += [([experts, inner, hidden // 2], U8, W), ([experts, inner], F32, W), None]
    q_inputs += [([experts, hidden, inner // 2], U8, W), ([experts, hidden], F32, W)]
    q = cost_of(make_op("QMoE", q_inputs, [([rows, hidden], F32)], domain=MS, k=k, expert_weight_bits=4))
    assert q.macs == c.macs
    assert q.params == 2 * experts * inner * hidden


# ---------------------------------------------------------------------------------------------- fused ops
def test_fused_elementwise_ops() -> None:
    n, hw, d = 2, 16, 64
    split = cost_of(make_op("BiasSplitGelu", [([n, hw, d], F32), ([d], F32, W)], [([n, hw, d // 2], F32)], domain=MS))
    assert split.flops == n * hw * d + 6 * n * hw * d // 2
    add = cost_of(
        make_op("BiasAdd", [([n, hw, d], F32), ([d], F32), ([n, hw, d], F32)], [([n, hw, d], F32)], domain=MS)
    )
    assert add.flops == 2 * n * hw * d
    swiglu = cost_of(make_op("SwiGLU", [([n, d], F32), ([n, d], F32)], [([n, d], F32)], opset=28))
    assert swiglu.flops == 7 * n * d


def test_gemm_fast_gelu() -> None:
    m, k, n = 6, 32, 48
    c = cost_of(
        make_op("GemmFastGelu", [([2, 3, k], F32), ([k, n], F32, W), ([n], F32, W)], [([2, 3, n], F32)], domain=MS)
    )
    assert c.macs == m * n * k
    assert c.flops == 2 * m * n * k + 10 * m * n


def test_rotary_embedding_contrib_and_onnx() -> None:
    b, s, heads, head, rot, max_pos = 2, 8, 4, 32, 16, 128
    x = ([b, s, heads * head], F32)
    cache = ([max_pos, rot // 2], F32, W)
    contrib = make_op(
        "RotaryEmbedding",
        [x, ([b, s], I64), cache, cache],
        [x],
        domain=MS,
        num_heads=heads,
        rotary_embedding_dim=rot,
    )
    c = cost_of(contrib)
    assert c.flops == 3 * b * s * heads * rot
    assert c.bytes_read == 4 * b * s * heads * head + 8 * b * s + 2 * 4 * b * s * rot // 2
    assert c.params == 0
    onnx_op = make_op("RotaryEmbedding", [([b, heads, s, head], F32), cache, cache, ([b, s], I64)], [x], opset=23)
    assert cost_of(onnx_op).flops == 3 * b * s * heads * 2 * (rot // 2)


def test_embed_layer_normalization() -> None:
    b, s, h, vocab, pos = 2, 16, 32, 100, 64
    op = make_op(
        "EmbedLayerNormalization",
        [
            ([b, s], "int32"),
            ([b, s], "int32"),
            ([vocab, h], F32, W),
            ([pos, h], F32, W),
            ([2, h], F32, W),
            ([h], F32, W),
            ([h], F32, W),
            ([b, s], "int32"),
        ],
        [([b, s, h], F32), ([b], "int32")],
        domain=MS,
    )
    c = cost_of(op)
    n, r = b * s * h, b * s
    assert c.flops == 2 * n + 7 * n + 5 * r + r
    assert c.params == (vocab + pos + 2 + 2) * h
    gathered = 4 * h * (r + min(r, pos) + 2)  # word rows, position rows, the 2-row segment table
    assert c.bytes_read == 4 * 3 * r + 2 * 4 * h + gathered


def test_tensor_scatter_charges_the_slice() -> None:
    b, heads, buf, s, d = 1, 4, 1024, 1, 64
    op = make_op(
        "TensorScatter",
        [([b, heads, buf, d], F32), ([b, heads, s, d], F32), ([b], I64)],
        [([b, heads, buf, d], F32)],
        opset=24,
    )
    c = cost_of(op)
    assert c.bytes_written == 4 * b * heads * s * d
    assert c.bytes_read == 4 * b * heads * s * d + 8 * b


# ------------------------------------------------------------------------------------------ function bodies
def _single_op_model(node: onnx.NodeProto, shape, opset: int) -> onnx.ModelProto:
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_function_op_without_rule_costed_through_its_body() -> None:
    shape = [2, 3, 4, 5]
    model = _single_op_model(helper.make_node("MeanVarianceNormalization", ["x"], ["y"]), shape, 18)
    analysis = onnxroof.analyze(model, "xavier")
    (node,) = analysis.nodes
    assert node.state == "costed"
    assert "function body" in node.note
    # the body: ReduceMean(x), Pow(mean,2), Pow(x,2), ReduceMean(x²), Sub, Sqrt, Sub(x − mean), Add ε, Div
    n, stats = 2 * 3 * 4 * 5, 3  # statistics over axes (0, 2, 3): one per channel
    assert node.flops >= 4 * n
    assert analysis.totals.params == 0
    assert node.flops < 12 * n + 10 * stats


def test_a_shared_weight_folds_the_batch_into_the_rows() -> None:
    """``[B, 1, K] · [K, N]`` (a decode step's projection at batch B) is one ``B × N × K`` GEMM reading the weight
    once; ``[B, M, K] · [B, K, N]`` (attention's per-head products) stays B independent GEMMs."""
    from onnxroof.core.gemm import GemmShape, array_gemm

    b, k, n = 32, 2048, 4096
    shared = make_op("MatMul", [([b, 1, k], F32), ([k, n], F32, W)], [([b, 1, n], F32)])
    assert array_gemm(shared) == GemmShape(groups=1, m=b, n=n, k=k, in_channels=k, out_channels=n)
    batched = make_op("MatMul", [([b, 7, k], F32), ([b, k, n], F32)], [([b, 7, n], F32)])
    assert array_gemm(batched) == GemmShape(groups=b, m=7, n=n, k=k, in_channels=k, out_channels=n)
