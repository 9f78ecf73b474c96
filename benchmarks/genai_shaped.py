"""A 7–8 B decoder in the layout ONNX Runtime GenAI's model builder writes, with sparse external weights.

``build_genai_shaped(path, shape, bits=None | 4 | 8, block_size=...)`` writes ``path`` (the graph), a sparse
``<stem>.weights`` file (no weight byte written, as :mod:`llama_shaped` does) and ``genai_config.json`` beside
it. The graph follows what ``python -m onnxruntime_genai.models.builder`` writes for a Llama-family model
(the layout of ``samples/llm/genai_llama_int4/model.onnx``, read node by node):

* ``Gather`` on the embedding, then per layer ``SimplifiedLayerNormalization`` (first layer) or
  ``com.microsoft::SkipSimplifiedLayerNormalization`` (residual add + RMSNorm), one packed ``qkv_proj``
  product, ``com.microsoft::GroupQueryAttention`` (rotary inside, ``do_rotary=1``, cos/sin caches; the KV cache
  as ``past_key_values.{i}.key/value`` inputs and ``present.{i}.key/value`` outputs), ``o_proj``, SwiGLU MLP
  with SiLU as ``x * Sigmoid(x)``, the final norm and ``lm_head``;
* the attention-mask subgraph the builder writes (``ReduceSum(attention_mask) - 1`` as ``seqlens_k`` and the
  mask's length as ``total_sequence_length``, both int32);
* every product is ``MatMul`` with fp16 weights ``[K, N]`` (``bits=None``, the builder's ``-p fp16``), or
  ``com.microsoft::MatMulNBits`` (``-p int4``; 8 bits as its ``int8`` weight-only path) with ``B`` packed
  ``[N, ⌈K/block⌉, block·bits/8]`` uint8 and fp16 ``scales [N, ⌈K/block⌉]``, symmetric (no zero points), the
  builder's default.

Two deviations, both for the benchmark's convenience: the KV head size is the number (the builder writes
the symbol ``kv_cache_dim`` and gives its value in ``genai_config.json``), and the scales are fp16 for every
execution provider (the CPU builder writes fp32 ones).

``genai_config.json`` carries what ``onnxroof llm`` may read beside a GenAI model: ``context_length``,
``head_size``, the layer and head counts, and ``search.past_present_share_buffer`` (true: ``present`` aliases
``past`` on CUDA).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from llama_shaped import IR_VERSION, _Builder
from onnx import TensorProto, helper

MS = "com.microsoft"
RMS_EPS = 1e-5


@dataclass(frozen=True)
class Shape:
    """A decoder's shape, as its Hugging Face ``config.json`` gives it."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    context: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


#: The shapes the LLM benchmark rows name (Hugging Face config.json of each model).
SHAPES: dict[str, Shape] = {
    "llama2-7b": Shape(layers=32, hidden=4096, heads=32, kv_heads=32, intermediate=11008, vocab=32000, context=4096),
    "llama3-8b": Shape(layers=32, hidden=4096, heads=32, kv_heads=8, intermediate=14336, vocab=128256, context=8192),
    "mistral-7b": Shape(layers=32, hidden=4096, heads=32, kv_heads=8, intermediate=14336, vocab=32000, context=32768),
    # Phi-2 (2.7 B: 32 layers, hidden 2560, 32 heads, GELU MLP 2560 → 10240 → 2560, vocab 51200) in the Llama layout:
    # a SwiGLU MLP of intermediate 6848 has its weights and MACs within 0.3 % (3 × 6848 = 20,544 ≈ 2 × 10240; 6848 is
    # 6827, the exact equivalent, rounded to a multiple of 64 as real models' dims are, so that the `gpu` time model
    # does not charge the misaligned-row penalty real Phi-2 never pays); LayerNorm, partial rotary
    # and the parallel attention/MLP block are not reproduced (elementwise work, < 1 % of a step's bytes).
    "phi2-equivalent": Shape(
        layers=32, hidden=2560, heads=32, kv_heads=32, intermediate=6848, vocab=51200, context=2048
    ),
    # GPT-J 6B (28 layers, hidden 4096, 16 heads of 256, GELU MLP 4096 → 16384 → 4096, vocab 50400, 2,048
    # positions; TensorRT-LLM's build command on its performance page: --n_layer 28 --n_head 16 --n_embd 4096) in the
    # Llama layout: a SwiGLU MLP of intermediate 10944 has its weights and MACs within 0.2 % (3 × 10944 = 32,832 ≈
    # 2 × 16384; 10923 rounded to a multiple of 64, as for Phi-2 above); its
    # parallel attention/MLP block, LayerNorm and partial rotary are not reproduced (elementwise work).
    "gptj-6b-equivalent": Shape(
        layers=28, hidden=4096, heads=16, kv_heads=16, intermediate=10944, vocab=50400, context=2048
    ),
}


def expected_weight_bytes(shape: Shape, bits: int | None = None, block_size: int = 128) -> int:
    """Stored bytes of the products' weights (fp16 = 2 B per weight; ``bits`` packed + one fp16 scale per
    ``block_size`` weights along K), the embedding (fp16) and the norms (fp16), without the rotary caches."""
    kv = shape.kv_heads * shape.head_dim
    products = [(shape.hidden, shape.hidden + 2 * kv), (shape.hidden, shape.hidden)]
    products += [(shape.hidden, shape.intermediate)] * 2 + [(shape.intermediate, shape.hidden)]

    def stored(k: int, n: int) -> int:
        if bits is None:
            return 2 * k * n
        blocks = -(-k // block_size)
        return n * blocks * block_size * bits // 8 + 2 * n * blocks

    per_layer = sum(stored(k, n) for k, n in products) + 2 * 2 * shape.hidden
    return (
        2 * shape.vocab * shape.hidden + shape.layers * per_layer + 2 * shape.hidden + stored(shape.hidden, shape.vocab)
    )


def _product(
    b: _Builder, x: str, name: str, k: int, n: int, bits: int | None, block_size: int, output: str | None = None
) -> str:
    """``x @ W`` as the builder writes it: MatMul with fp16 ``W[K, N]`` or MatMulNBits with packed ``W``."""
    if bits is None:
        return b.op("MatMul", [x, b.weight(f"{name}.MatMul.weight", (k, n), TensorProto.FLOAT16)], output)
    blocks = -(-k // block_size)
    packed = b.weight(f"{name}.MatMul.weight_Q{bits}", (n, blocks, block_size * bits // 8), TensorProto.UINT8)
    scales = b.weight(f"{name}.MatMul.weight_scales", (n, blocks), TensorProto.FLOAT16)
    node = helper.make_node(
        "MatMulNBits",
        [x, packed, scales],
        [output or f"/{name.replace('.', '/')}/MatMul/output_0"],
        name=f"/{name.replace('.', '/')}/MatMul_Q{bits}",
        domain=MS,
        K=k,
        N=n,
        bits=bits,
        block_size=block_size,
        accuracy_level=4,
    )
    b.nodes.append(node)
    return node.output[0]


def _skip_norm(b: _Builder, x: str, residual: str | None, weight: str, name: str) -> tuple[str, str]:
    """RMSNorm of ``x`` (+ ``residual``): (normalized, the sum that is the next residual)."""
    if residual is None:
        out = b.op("SimplifiedLayerNormalization", [x, weight], epsilon=RMS_EPS, axis=-1, stash_type=1)
        return out, x
    outs = [f"/{name}/output_0", "", "", f"/{name}/output_3"]
    b.nodes.append(
        helper.make_node(
            "SkipSimplifiedLayerNormalization", [residual, x, weight], outs, name=f"/{name}", domain=MS, epsilon=RMS_EPS
        )
    )
    return outs[0], outs[3]


def build_genai_model(
    location: str, shape: Shape, bits: int | None = None, block_size: int = 128
) -> tuple[onnx.ModelProto, int]:
    """The GenAI-layout model proto (weights external, pointing into ``location``) and the data file's size."""
    if bits not in (None, 4, 8):
        raise ValueError(f"bits must be None (fp16), 4 or 8, got {bits!r}")
    fp16 = TensorProto.FLOAT16
    h, d, kv = shape.hidden, shape.head_dim, shape.kv_heads * shape.head_dim
    b = _Builder(location)
    embed = b.weight("model.embed_tokens.weight", (shape.vocab, h), fp16)
    cos = b.weight("cos_cache", (shape.context, d // 2), fp16)
    sin = b.weight("sin_cache", (shape.context, d // 2), fp16)
    b.push("model/attn_mask_reformat/attn_mask_subgraph")
    one = b.const([1])
    seqlens = b.op("Sub", [b.op("ReduceSum", ["attention_mask", one], keepdims=0), b.const(1)])
    seqlens_k = b.op("Cast", [seqlens], to=TensorProto.INT32)
    total = b.op("Gather", [b.op("Shape", ["attention_mask"]), b.const(1)], axis=0)
    total_len = b.op("Cast", [total], to=TensorProto.INT32)
    b.pop()
    x = b.op("Gather", [embed, "input_ids"])
    residual: str | None = None
    for i in range(shape.layers):
        p = f"model.layers.{i}"
        b.push(f"model/layers.{i}")
        normed, residual = _skip_norm(
            b, x, residual, b.weight(f"{p}.input_layernorm.weight", (h,), fp16), f"model/layers.{i}/input_layernorm"
        )
        qkv = _product(b, normed, f"{p}.attn.qkv_proj", h, h + 2 * kv, bits, block_size)
        attn = [f"/model/layers.{i}/attn/GroupQueryAttention/output_0", f"present.{i}.key", f"present.{i}.value"]
        b.nodes.append(
            helper.make_node(
                "GroupQueryAttention",
                [qkv, "", "", f"past_key_values.{i}.key", f"past_key_values.{i}.value", seqlens_k, total_len, cos, sin],
                attn,
                name=f"/model/layers.{i}/attn/GroupQueryAttention",
                domain=MS,
                num_heads=shape.heads,
                kv_num_heads=shape.kv_heads,
                scale=1 / math.sqrt(d),
                do_rotary=1,
                rotary_interleaved=0,
                local_window_size=-1,
            )
        )
        out = _product(b, attn[0], f"{p}.attn.o_proj", h, h, bits, block_size)
        normed, residual = _skip_norm(
            b, out, residual, b.weight(f"{p}.post_attention_layernorm.weight", (h,), fp16), f"{p}/post_attention_ln"
        )
        gate = _product(b, normed, f"{p}.mlp.gate_proj", h, shape.intermediate, bits, block_size)
        up = _product(b, normed, f"{p}.mlp.up_proj", h, shape.intermediate, bits, block_size)
        act = b.op("Mul", [gate, b.op("Sigmoid", [gate])])
        x = _product(b, b.op("Mul", [act, up]), f"{p}.mlp.down_proj", shape.intermediate, h, bits, block_size)
        b.pop()
    final = b.weight(f"model.layers.{shape.layers}.final_norm_layernorm.weight", (h,), fp16)
    normed, _ = _skip_norm(b, x, residual, final, f"model/layers.{shape.layers}/final_norm_layernorm")
    _product(b, normed, "lm_head", h, shape.vocab, bits, block_size, output="logits")

    cache = ["batch_size", shape.kv_heads, "past_sequence_length", d]
    present = ["batch_size", shape.kv_heads, "total_sequence_length", d]
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch_size", "total_sequence_length"]),
    ] + [
        helper.make_tensor_value_info(f"past_key_values.{i}.{kind}", fp16, cache)
        for i in range(shape.layers)
        for kind in ("key", "value")
    ]
    outputs = [helper.make_tensor_value_info("logits", fp16, ["batch_size", "sequence_length", shape.vocab])] + [
        helper.make_tensor_value_info(f"present.{i}.{kind}", fp16, present)
        for i in range(shape.layers)
        for kind in ("key", "value")
    ]
    graph = helper.make_graph(b.nodes, "genai_shaped", inputs, outputs, b.initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)],
        producer_name="onnxroof/benchmarks/genai_shaped",
        doc_string=f"GenAI-builder layout, {shape}, weights {'fp16' if bits is None else f'int{bits} g{block_size}'}",
    )
    model.ir_version = IR_VERSION
    return model, b.offset


def genai_config(shape: Shape) -> dict[str, object]:
    """The ``genai_config.json`` the builder writes beside the model (the fields onnxroof may read)."""
    return {
        "model": {
            "context_length": shape.context,
            "decoder": {
                "filename": "model.onnx",
                "head_size": shape.head_dim,
                "hidden_size": shape.hidden,
                "num_attention_heads": shape.heads,
                "num_hidden_layers": shape.layers,
                "num_key_value_heads": shape.kv_heads,
            },
            "type": "llama",
            "vocab_size": shape.vocab,
        },
        "search": {"max_length": shape.context, "past_present_share_buffer": True},
    }


def build_genai_shaped(
    path: str | os.PathLike[str],
    shape: Shape | str,
    bits: int | None = None,
    block_size: int = 128,
    config: bool = True,
) -> Path:
    """Write the model to ``path``, a sparse ``<stem>.weights`` beside it and (``config``) ``genai_config.json``;
    return path."""
    shape = SHAPES[shape] if isinstance(shape, str) else shape
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data_path = path.with_suffix(".weights")
    model, total = build_genai_model(data_path.name, shape, bits, block_size)
    with open(data_path, "wb") as f:
        f.truncate(total)  # sparse: nothing written
    onnx.save(model, path)
    if config:
        (path.parent / "genai_config.json").write_text(json.dumps(genai_config(shape), indent=2))
    return path


__all__ = ["SHAPES", "Shape", "build_genai_model", "build_genai_shaped", "expected_weight_bytes", "genai_config"]

if __name__ == "__main__":  # pragma: no cover - a quick look at one file
    import sys

    out = build_genai_shaped(Path(sys.argv[1]) / "model.onnx", sys.argv[2] if len(sys.argv) > 2 else "llama2-7b")
    print(out, out.stat().st_size, np.int64(out.with_suffix(".weights").stat().st_size))
