"""A Llama-2-7B-shaped decoder as an ONNX graph whose weights live in a sparse external file.

``build_llama_shaped(path)`` writes ``path`` (the graph, a few hundred KB) and ``<stem>.weights`` next to it:
ONE external-data file that every weight points into (offsets aligned to 4096), created as a *sparse* file
of the right size -- no weight array is ever allocated and no weight byte is written, so building the 7B
shape takes a fraction of a second and almost no disk. Tools that read the model without loading weights
(onnxroof) see exactly what they would see for the real export.

The graph follows what ``torch.onnx.export`` of HuggingFace ``LlamaForCausalLM`` (no KV cache) produces:
RMSNorm decomposed (Cast to float32 when the model is float16, Pow 2, ReduceMean over the last axis, Add eps,
Sqrt, Reciprocal, Mul, Cast back, Mul weight), q/k/v projections as MatMul, rotary embeddings from
``cos``/``sin`` caches Gather'ed by ``Range`` position ids with ``rotate_half`` as Slice + Neg + Concat,
grouped-query attention by Unsqueeze + Expand + Reshape of K/V, a causal mask from a ``Range`` comparison
(LessOrEqual + Where, the dtype's lowest value where masked), softmax in float32, SwiGLU MLP with SiLU as
``x * Sigmoid(x)``, and an lm_head MatMul.

Command line: ``python benchmarks/llama_shaped.py OUT_DIR [--layers N]`` writes ``OUT_DIR/llama_shaped.onnx``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 18
#: IR version 8 (onnx 1.13, the first with opset 18) so that older onnxruntime releases load the file.
IR_VERSION = 8
ALIGNMENT = 4096
MAX_POSITION = 4096
ROPE_THETA = 10000.0
RMS_EPS = 1e-5
#: Names of the initializers that are buffers (not parameters): the rotary caches.
BUFFER_NAMES = ("model.rotary_emb.cos_cached", "model.rotary_emb.sin_cached")


def expected_parameter_count(
    layers: int = 32,
    hidden: int = 4096,
    heads: int = 32,
    kv_heads: int = 32,
    intermediate: int = 11008,
    vocab: int = 32000,
) -> int:
    """Trainable parameters: embedding, per-layer q/k/v/o, gate/up/down and two RMSNorm weights, final norm,
    lm_head (untied). The rotary cos/sin caches are buffers and are not counted (see
    :func:`expected_buffer_elements`)."""
    h = hidden
    kv = kv_heads * (hidden // heads)
    per_layer = h * h + 2 * h * kv + h * h + 3 * h * intermediate + 2 * h
    return vocab * h + layers * per_layer + h + h * vocab


def expected_buffer_elements(hidden: int = 4096, heads: int = 32, max_position: int = MAX_POSITION) -> int:
    """Elements of the non-parameter initializers: the rotary cos and sin caches, each [max_position, head_dim]."""
    return 2 * max_position * (hidden // heads)


class _Builder:
    """Nodes named as the PyTorch exporter names them; weights as hand-made external-data TensorProtos."""

    def __init__(self, location: str) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self.location = location
        self.offset = 0  # end of the last weight in the data file
        self._scope: list[str] = []
        self._used: Counter[str] = Counter()

    def push(self, name: str) -> None:
        self._scope.append(name)

    def pop(self) -> None:
        self._scope.pop()

    def _node_name(self, op_type: str) -> str:
        base = "/" + "/".join([*self._scope, op_type])
        n = self._used[base]
        self._used[base] += 1
        return base if n == 0 else f"{base}_{n}"

    def op(self, op_type: str, inputs: Sequence[str], output: str | None = None, **attrs: object) -> str:
        name = self._node_name(op_type)
        out = output or f"{name}_output_0"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=name, **attrs))
        return out

    def const(self, value: object, dtype: type = np.int64) -> str:
        """A small inline ``Constant`` (scalars, shape vectors)."""
        array = np.asarray(value, dtype=dtype)
        name = self._node_name("Constant")
        out = f"{name}_output_0"
        self.nodes.append(helper.make_node("Constant", [], [out], name=name, value=numpy_helper.from_array(array, out)))
        return out

    def weight(self, name: str, dims: Sequence[int], data_type: int) -> str:
        """An initializer whose data lives at the next 4096-aligned offset of the external file (never allocated)."""
        tensor = TensorProto()
        tensor.name = name
        tensor.dims.extend(dims)
        tensor.data_type = data_type
        tensor.data_location = TensorProto.EXTERNAL
        length = math.prod(dims) * np.dtype(helper.tensor_dtype_to_np_dtype(data_type)).itemsize
        offset = -(-self.offset // ALIGNMENT) * ALIGNMENT
        for key, value in (("location", self.location), ("offset", str(offset)), ("length", str(length))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        self.offset = offset + length
        self.initializers.append(tensor)
        return name


def _rms_norm(b: _Builder, x: str, weight: str, dtype: int) -> str:
    """HF LlamaRMSNorm: ``weight * (x.float() * rsqrt(mean(x.float()**2, -1) + eps)).to(dtype)``."""
    if dtype != TensorProto.FLOAT:
        x = b.op("Cast", [x], to=TensorProto.FLOAT)
    var = b.op("ReduceMean", [b.op("Pow", [x, b.const(2.0, np.float32)]), b.const([-1])], keepdims=1)
    inv = b.op("Reciprocal", [b.op("Sqrt", [b.op("Add", [var, b.const(RMS_EPS, np.float32)])])])
    y = b.op("Mul", [x, inv])
    if dtype != TensorProto.FLOAT:
        y = b.op("Cast", [y], to=dtype)
    return b.op("Mul", [weight, y])


def _rotate_half(b: _Builder, x: str, head_dim: int) -> str:
    half = head_dim // 2
    x1 = b.op("Slice", [x, b.const([0]), b.const([half]), b.const([-1]), b.const([1])])
    x2 = b.op("Slice", [x, b.const([half]), b.const([sys.maxsize]), b.const([-1]), b.const([1])])
    return b.op("Concat", [b.op("Neg", [x2]), x1], axis=-1)


def _apply_rotary(b: _Builder, x: str, cos: str, sin: str, head_dim: int) -> str:
    """``x * cos + rotate_half(x) * sin``."""
    return b.op("Add", [b.op("Mul", [x, cos]), b.op("Mul", [_rotate_half(b, x, head_dim), sin])])


_TOTAL = "total_sequence_length"


def _cache_values(layers: int, kv_heads: int, head_dim: int, dtype: int, prefix: str, length: str) -> list:
    """``{prefix}.{i}.key`` and ``.value`` for every layer: ``[batch, kv_heads, length, head_dim]``."""
    shape = ["batch", kv_heads, length, head_dim]
    return [
        helper.make_tensor_value_info(f"{prefix}.{i}.{kind}", dtype, shape)
        for i in range(layers)
        for kind in ("key", "value")
    ]


def build_llama_model(
    location: str,
    *,
    layers: int = 32,
    hidden: int = 4096,
    heads: int = 32,
    kv_heads: int = 32,
    intermediate: int = 11008,
    vocab: int = 32000,
    dtype: int = TensorProto.FLOAT16,
    max_position: int = MAX_POSITION,
    kv_cache: bool = False,
) -> tuple[onnx.ModelProto, int]:
    """The model proto (weights external, pointing into ``location``) and the data file's total size in bytes.

    ``kv_cache=True`` adds the cache as Optimum and GenAI export it: ``past_key_values.{i}.key/value`` inputs
    ``[batch, kv_heads, past_sequence_length, head_dim]`` concatenated with the new K/V on axis 2 into
    ``present.{i}.key/value`` outputs ``[batch, kv_heads, total_sequence_length, head_dim]``, an ``attention_mask``
    ``[batch, total_sequence_length]``, positions ``Range(past, past + seq)`` and the causal mask over the total.
    """
    if hidden % heads or heads % kv_heads:
        raise ValueError("hidden must be a multiple of heads, and heads a multiple of kv_heads")
    head_dim = hidden // heads
    if head_dim % 2:
        raise ValueError("head_dim must be even for rotary embeddings")
    n_rep = heads // kv_heads
    float_dtype = np.float32 if dtype == TensorProto.FLOAT else helper.tensor_dtype_to_np_dtype(dtype)
    b = _Builder(location)

    # Shapes and positions, computed once from input_ids as the exporter does.
    embed = b.weight("model.embed_tokens.weight", (vocab, hidden), dtype)
    cos_cache = b.weight(BUFFER_NAMES[0], (max_position, head_dim), dtype)
    sin_cache = b.weight(BUFFER_NAMES[1], (max_position, head_dim), dtype)
    b.push("model")
    ids_shape = b.op("Shape", ["input_ids"])
    batch = b.op("Unsqueeze", [b.op("Gather", [ids_shape, b.const(0)], axis=0), b.const([0])])
    seq_scalar = b.op("Gather", [ids_shape, b.const(1)], axis=0)
    seq = b.op("Unsqueeze", [seq_scalar, b.const([0])])
    x = b.op("Gather", [embed, "input_ids"], axis=0)  # [b, s, hidden]

    if kv_cache:
        past_scalar = b.op("Gather", [b.op("Shape", ["past_key_values.0.key"]), b.const(2)], axis=0)
    else:
        past_scalar = b.const(0)
    total_scalar = b.op("Add", [past_scalar, seq_scalar]) if kv_cache else seq_scalar
    total = b.op("Unsqueeze", [total_scalar, b.const([0])]) if kv_cache else seq
    position_ids = b.op("Range", [past_scalar, total_scalar, b.const(1)])  # [s]
    b.push("rotary_emb")
    pos_2d = b.op("Unsqueeze", [position_ids, b.const([0])])  # [1, s]
    cos = b.op("Unsqueeze", [b.op("Gather", [cos_cache, pos_2d], axis=0), b.const([1])])  # [1, 1, s, d]
    sin = b.op("Unsqueeze", [b.op("Gather", [sin_cache, pos_2d], axis=0), b.const([1])])
    b.pop()

    # Causal mask: 0 where key position <= query position, the dtype's lowest value elsewhere. [1, 1, s, s]
    rows = b.op("Unsqueeze", [position_ids, b.const([1])])  # [s, 1]
    key_ids = b.op("Range", [b.const(0), total_scalar, b.const(1)]) if kv_cache else position_ids  # [t]
    cols = b.op("Unsqueeze", [key_ids, b.const([0])])  # [1, t]
    allowed = b.op("LessOrEqual", [cols, rows])  # [s, t]
    if kv_cache:  # and the padding mask: [b, 1, 1, t]
        padding = b.op("Unsqueeze", [b.op("Cast", ["attention_mask"], to=TensorProto.BOOL), b.const([1, 2])])
        allowed = b.op("And", [b.op("Unsqueeze", [allowed, b.const([0, 1])]), padding])  # [b, 1, s, t]
    mask = b.op("Where", [allowed, b.const(0.0, float_dtype), b.const(np.finfo(float_dtype).min, float_dtype)])
    if not kv_cache:
        mask = b.op("Unsqueeze", [mask, b.const([0, 1])])

    q_shape = b.op("Concat", [batch, seq, b.const([heads, head_dim])], axis=0)
    kv_shape = b.op("Concat", [batch, seq, b.const([kv_heads, head_dim])], axis=0)
    expand_shape = b.op("Concat", [batch, b.const([kv_heads, n_rep]), total, b.const([head_dim])], axis=0)
    rep_shape = b.op("Concat", [batch, b.const([heads]), total, b.const([head_dim])], axis=0)
    merge_shape = b.op("Concat", [batch, seq, b.const([hidden])], axis=0)
    sqrt_head_dim = b.const(math.sqrt(head_dim), float_dtype)
    b.pop()

    for i in range(layers):
        p = f"model.layers.{i}"
        b.push(f"model/layers.{i}")
        residual = x
        b.push("input_layernorm")
        h = _rms_norm(b, x, b.weight(f"{p}.input_layernorm.weight", (hidden,), dtype), dtype)
        b.pop()

        b.push("self_attn")
        q = b.op("MatMul", [h, b.weight(f"{p}.self_attn.q_proj.weight", (hidden, heads * head_dim), dtype)])
        k = b.op("MatMul", [h, b.weight(f"{p}.self_attn.k_proj.weight", (hidden, kv_heads * head_dim), dtype)])
        v = b.op("MatMul", [h, b.weight(f"{p}.self_attn.v_proj.weight", (hidden, kv_heads * head_dim), dtype)])
        q = b.op("Transpose", [b.op("Reshape", [q, q_shape])], perm=[0, 2, 1, 3])  # [b, H, s, d]
        k = b.op("Transpose", [b.op("Reshape", [k, kv_shape])], perm=[0, 2, 1, 3])  # [b, KV, s, d]
        v = b.op("Transpose", [b.op("Reshape", [v, kv_shape])], perm=[0, 2, 1, 3])
        q = _apply_rotary(b, q, cos, sin, head_dim)
        k = _apply_rotary(b, k, cos, sin, head_dim)
        if kv_cache:  # [b, KV, past + s, d]
            k = b.op("Concat", [f"past_key_values.{i}.key", k], f"present.{i}.key", axis=2)
            v = b.op("Concat", [f"past_key_values.{i}.value", v], f"present.{i}.value", axis=2)
        if n_rep > 1:  # repeat_kv: x[:, :, None].expand(b, KV, n_rep, s, d).reshape(b, H, s, d)
            k = b.op("Reshape", [b.op("Expand", [b.op("Unsqueeze", [k, b.const([2])]), expand_shape]), rep_shape])
            v = b.op("Reshape", [b.op("Expand", [b.op("Unsqueeze", [v, b.const([2])]), expand_shape]), rep_shape])
        scores = b.op("MatMul", [q, b.op("Transpose", [k], perm=[0, 1, 3, 2])])  # [b, H, s, s]
        scores = b.op("Add", [b.op("Div", [scores, sqrt_head_dim]), mask])
        if dtype != TensorProto.FLOAT:
            scores = b.op("Cast", [scores], to=TensorProto.FLOAT)
        probs = b.op("Softmax", [scores], axis=-1)
        if dtype != TensorProto.FLOAT:
            probs = b.op("Cast", [probs], to=dtype)
        ctx = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])  # [b, s, H, d]
        ctx = b.op("Reshape", [ctx, merge_shape])  # [b, s, hidden]
        out = b.op("MatMul", [ctx, b.weight(f"{p}.self_attn.o_proj.weight", (heads * head_dim, hidden), dtype)])
        b.pop()
        x = b.op("Add", [residual, out])

        residual = x
        b.push("post_attention_layernorm")
        h = _rms_norm(b, x, b.weight(f"{p}.post_attention_layernorm.weight", (hidden,), dtype), dtype)
        b.pop()
        b.push("mlp")
        gate = b.op("MatMul", [h, b.weight(f"{p}.mlp.gate_proj.weight", (hidden, intermediate), dtype)])
        up = b.op("MatMul", [h, b.weight(f"{p}.mlp.up_proj.weight", (hidden, intermediate), dtype)])
        act = b.op("Mul", [gate, b.op("Sigmoid", [gate])])  # SiLU
        down = b.op(
            "MatMul", [b.op("Mul", [act, up]), b.weight(f"{p}.mlp.down_proj.weight", (intermediate, hidden), dtype)]
        )
        b.pop()
        x = b.op("Add", [residual, down])
        b.pop()

    b.push("model/norm")
    x = _rms_norm(b, x, b.weight("model.norm.weight", (hidden,), dtype), dtype)
    b.pop()
    b.push("lm_head")
    b.op("MatMul", [x, b.weight("lm_head.weight", (hidden, vocab), dtype)], output="logits")
    b.pop()

    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])]
    outputs = [helper.make_tensor_value_info("logits", dtype, ["batch", "seq", vocab])]
    if kv_cache:
        inputs += _cache_values(layers, kv_heads, head_dim, dtype, "past_key_values", "past_sequence_length")
        inputs.insert(1, helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", _TOTAL]))
        outputs += _cache_values(layers, kv_heads, head_dim, dtype, "present", _TOTAL)
    graph = helper.make_graph(b.nodes, "llama_shaped", inputs, outputs, b.initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="onnxroof/benchmarks/llama_shaped",
        producer_version="0.1.0",
        doc_string=(
            f"Llama-shaped decoder: {layers} layers, hidden {hidden}, {heads} heads ({kv_heads} KV heads), "
            f"intermediate {intermediate}, vocabulary {vocab}, {TensorProto.DataType.Name(dtype)}; "
            "weights in a sparse external file (contents undefined)."
        ),
    )
    model.ir_version = IR_VERSION
    return model, b.offset


def build_llama_shaped(
    path: str | os.PathLike[str],
    *,
    layers: int = 32,
    hidden: int = 4096,
    heads: int = 32,
    kv_heads: int = 32,
    intermediate: int = 11008,
    vocab: int = 32000,
    dtype: int = TensorProto.FLOAT16,
    external_data: bool = True,
    kv_cache: bool = False,
) -> Path:
    """Write the model to ``path`` and a sparse ``<stem>.weights`` file next to it; return ``path``.

    ``external_data=False`` embeds zero-filled weights instead (allocates them: small configs only).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data_path = path.with_suffix(".weights")
    model, total = build_llama_model(
        data_path.name,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        intermediate=intermediate,
        vocab=vocab,
        dtype=dtype,
        kv_cache=kv_cache,
    )
    if external_data:
        with open(data_path, "wb") as f:
            f.truncate(total)  # sparse: nothing written, the filesystem allocates no blocks
    else:
        for tensor in model.graph.initializer:
            np_dtype = helper.tensor_dtype_to_np_dtype(tensor.data_type)
            tensor.raw_data = bytes(math.prod(tensor.dims) * np.dtype(np_dtype).itemsize)
            del tensor.external_data[:]
            tensor.data_location = TensorProto.DEFAULT
    onnx.save(model, path)
    # Checked by path: the checker resolves external-data locations against the model's folder (an in-memory
    # proto's against the current directory) and requires the data file to exist.
    onnx.checker.check_model(path, full_check=True)
    return path


def fill_weights(path: str | os.PathLike[str], seed: int = 0, std: float = 0.02) -> None:
    """Write real values into the external data file of a (small) model built by :func:`build_llama_shaped`:
    normal(0, std) for projections and embeddings, ones for RMSNorm weights, true cos/sin for the rotary
    caches. Allocates each weight in turn: for small configs (tests), not for the 7B shape."""
    path = Path(path)
    model = onnx.load(path, load_external_data=False)
    rng = np.random.default_rng(seed)
    with open(path.parent / model.graph.initializer[0].external_data[0].value, "r+b") as f:
        for tensor in model.graph.initializer:
            info = {e.key: e.value for e in tensor.external_data}
            np_dtype = helper.tensor_dtype_to_np_dtype(tensor.data_type)
            dims = tuple(tensor.dims)
            if tensor.name in BUFFER_NAMES:
                max_pos, head_dim = dims
                inv_freq = 1.0 / ROPE_THETA ** (np.arange(0, head_dim, 2) / head_dim)
                freqs = np.outer(np.arange(max_pos), inv_freq)
                emb = np.concatenate([freqs, freqs], axis=-1)
                values = np.cos(emb) if tensor.name.endswith("cos_cached") else np.sin(emb)
            elif tensor.name.endswith("norm.weight"):
                values = np.ones(dims)
            else:
                values = rng.standard_normal(dims) * std
            data = values.astype(np_dtype).tobytes()
            assert len(data) == int(info["length"])
            f.seek(int(info["offset"]))
            f.write(data)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write a Llama-2-7B-shaped decoder with sparse external weights.")
    parser.add_argument("out_dir", help="folder to write llama_shaped.onnx and llama_shaped.weights into")
    parser.add_argument("--layers", type=int, default=32)
    parser.add_argument("--name", default="llama_shaped", help="file stem (default: llama_shaped)")
    parser.add_argument("--kv-cache", action="store_true", help="with past_key_values inputs and present outputs")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    path = build_llama_shaped(Path(args.out_dir) / f"{args.name}.onnx", layers=args.layers, kv_cache=args.kv_cache)
    elapsed = time.perf_counter() - start
    data = path.with_suffix(".weights").stat()
    params = expected_parameter_count(layers=args.layers)
    print(
        f"{path}: {path.stat().st_size} bytes, built in {elapsed:.2f} s; {path.with_suffix('.weights').name}: "
        f"{data.st_size} bytes apparent, {data.st_blocks * 512} allocated; {params} parameters "
        f"(+ {expected_buffer_elements()} buffer elements)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
