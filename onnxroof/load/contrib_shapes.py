"""Output shapes of ONNX Runtime's contrib ops (and its default-domain extras), one small function per op.

**Why per-op functions, not ONNX Runtime's symbolic shape inference.** ONNX Runtime ships
``onnxruntime.tools.symbolic_shape_infer``, but onnxroof imports onnxruntime only in ``measure`` (an import-linter
contract: analyzing a model never loads it), and that tool re-infers the whole graph in Python with sympy, which
takes minutes on a 7B decoder. The loader only needs the outputs of the few nodes ONNX's own inference skips,
with every dim already bound to a number: a function per op, called once per such node by
:func:`onnxroof.load.shapes.propagate_fallback`, costs microseconds.

A function takes the node's inputs as :class:`Arg` (static shape or None, element type, small constant value
or None) and its attributes, and returns one ``(shape, elem_type)`` per output (None where it cannot tell).
Shapes follow the op definitions in ONNX Runtime's ``docs/ContribOperators.md`` (com.microsoft) and
``onnxruntime/core/graph/contrib_ops/*.cc``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from onnx import TensorProto

from onnxroof.core.frozen import frozen_dataclass

MS = "com.microsoft"

Shape = tuple[int, ...]
Out = tuple[Shape, int] | None
#: A node's attributes as ``onnx.helper.get_attribute_value`` reads them (int, float, bytes, lists, protos), as in
#: ``OpView.attrs``; each shape function converts what it reads.
Attrs = Mapping[str, Any]


@frozen_dataclass
class Arg:
    """One input of the node: static shape (None when unknown or absent), element type (0 unknown), value."""

    shape: Shape | None
    elem: int = 0
    value: np.ndarray | None = None


ShapeFn = Callable[[Sequence[Arg], Attrs], list[Out]]

#: (domain, op_type) -> shape function. Domain "" for ops ONNX Runtime registers in the default domain.
CONTRIB_SHAPES: dict[tuple[str, str], ShapeFn] = {}


def shape_fn(*keys: tuple[str, str]) -> Callable[[ShapeFn], ShapeFn]:
    def register(fn: ShapeFn) -> ShapeFn:
        for key in keys:
            CONTRIB_SHAPES[key] = fn
        return fn

    return register


def _arg(args: Sequence[Arg], i: int) -> Arg:
    return args[i] if i < len(args) else Arg(None)


def _scalar(arg: Arg) -> int | None:
    return int(np.asarray(arg.value).reshape(-1)[0]) if arg.value is not None and np.asarray(arg.value).size else None


# ------------------------------------------------------------------------------------------ elementwise


@shape_fn(
    *(
        (MS, op)
        for op in ("BiasGelu", "FastGelu", "QuickGelu", "Gelu", "BiasAdd", "BiasDropout", "RotaryEmbedding", "MoE")
    ),
    (MS, "QMoE"),
    (MS, "GroupNorm"),
    (MS, "SkipGroupNorm"),
    (MS, "BiasSoftmax"),
)
def same_as_first(args: Sequence[Arg], attrs: Attrs) -> list[Out]:
    """Output 0 = input 0 (activations with a bias, rotary embedding, MoE: ``[..., hidden]`` in and out)."""
    x = _arg(args, 0)
    return [(x.shape, x.elem) if x.shape is not None else None]


@shape_fn((MS, "BiasSplitGelu"))
def bias_split_gelu(args: Sequence[Arg], attrs: Attrs) -> list[Out]:
    """``X [N, HW, D]`` -> ``[N, HW, D/2]`` (the second half gates the first)."""
    x = _arg(args, 0)
    return [((*x.shape[:-1], x.shape[-1] // 2), x.elem) if x.shape else None]


# -------------------------------------------------------------------------------------------- norms


def _stats_shape(shape: Shape, axis: int) -> Shape:
    axis = axis % len(shape) if shape else 0
    return tuple(d if i < axis else 1 for i, d in enumerate(shape))


@shape_fn(("", "SimplifiedLayerNormalization"), (MS, "SimplifiedLayerNormalization"))
def simplified_layer_norm(args: Sequence[Arg], attrs: Attrs) -> list[Out]:
    """``Y`` = ``X``; ``inv_std_var``: ``X`` with the normalized axes (from ``axis``, default -1) set to 1."""
    x = _arg(args, 0)
    if x.shape is None:
        return [None, None]
    return [(x.shape, x.elem), (_stats_shape(x.shape, int(attrs.get("axis", -1))), TensorProto.FLOAT)]


@shape_fn((MS, "SkipLayerNormalization"), (MS, "SkipSimplifiedLayerNormalization"))
def skip_layer_norm(args: Sequence[Arg], attrs: Attrs) -> list[Out]:
    """``output`` and ``input_skip_bias_sum`` = ``input``; ``mean``, ``inv_std_var``: ``[..., 1]``."""
    x = _arg(args, 0)
    if x.shape is None:
        return [None] * 4
    stats = ((*x.shape[:-1], 1), TensorProto.FLOAT)
    return [(x.shape, x.elem), stats, stats, (x.shape, x.elem)]


@shape_fn((MS, "EmbedLayerNormalization"))
def embed_layer_norm(args: Sequence[Arg], attrs: Attrs) -> list[Out]:
    """``input_ids [B, S]``, ``word_embedding [V, H]`` -> ``output [B, S, H]``, ``mask_index [B]`` (int32),
    ``embedding_sum [B, S, H]``."""
    ids, table = _arg(args, 0), _arg(args, 2)
    if ids.shape is None or table.shape is None or len(ids.shape) != 2:
        return [None] * 3
    out = ((*ids.shape, table.shape[-1]), table.elem)
    return [out, ((ids.shape[0],), TensorProto.INT32), out]


# ---------------------------------------------------------------------------------------- matmul-like


@shape_fn((MS, "MatMulNBits"), (MS, "MatMulBnb4"))
def matmul_n_bits(args: Sequence[Arg], attrs: Attrs) -> list[Out]:
    """``A [..., K]`` times a packed low-bit ``[K, N]`` (attribute ``N``) -> ``[..., N]``."""
    a = _arg(args, 0)
    if a.shape is None or "N" not in attrs:
        return [None]
    return [((*a.shape[:-1], int(attrs["N"])), a.elem)]


@shape_fn((MS, "GemmFastGelu"))
def gemm_fast_gelu(args: Sequence[Arg], attrs: Attrs) -> list[Out]:
    """``X [..., K]``, ``W [K, N]`` -> ``[..., N]``."""
    x, w = _arg(args, 0), _arg(args, 1)
    if x.shape is None or w.shape is None:
        return [None]
    return [((*x.shape[:-1], w.shape[-1]), x.elem)]


@shape_fn((MS, "FusedMatMul"))
def fused_matmul(args: Sequence[Arg], attrs: Attrs) -> list[Out]:
    """``MatMul`` with optional transposes of the last two axes of A and B (``transA``, ``transB``)."""
    a, b = _arg(args, 0), _arg(args, 1)
    if a.shape is None or b.shape is None or len(a.shape) < 2 or len(b.shape) < 2:
        return [None]
    sa = a.shape[:-2] + a.shape[-2:][:: -1 if attrs.get("transA") else 1]
    sb = b.shape[:-2] + b.shape[-2:][:: -1 if attrs.get("transB") else 1]
    try:
        batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        return [None]
    return [((*batch, sa[-2], sb[-1]), a.elem)]


@shape_fn((MS, "GatherBlockQuantized"))
def gather_block_quantized(args: Sequence[Arg], attrs: Attrs) -> list[Out]:
    """``data`` (packed: ``8 / bits`` values per uint8 along its last axis), ``indices``, ``scales`` ->
    ``data.shape[:gather_axis] + indices.shape + data.shape[gather_axis+1:]`` (last axis unpacked), in the
    scales' type."""
    data, indices, scales = _arg(args, 0), _arg(args, 1), _arg(args, 2)
    if data.shape is None or indices.shape is None:
        return [None]
    axis = int(attrs.get("gather_axis", 0)) % len(data.shape)
    bits = int(attrs.get("bits", 4))
    logical = list(data.shape)
    if data.elem == TensorProto.UINT8:
        logical[-1] *= 8 // bits
    return [((*logical[:axis], *indices.shape, *logical[axis + 1 :]), scales.elem or TensorProto.FLOAT)]


# ------------------------------------------------------------------------------------------- attention


def _hidden(shape: Shape | None) -> int | None:
    """Hidden width of a ``[B, L, D]`` tensor, or ``N·H`` of a ``[B, N, L, H]`` one."""
    if shape is None:
        return None
    return shape[2] if len(shape) == 3 else shape[1] * shape[3] if len(shape) == 4 else None


@shape_fn((MS, "GroupQueryAttention"))
def group_query_attention(args: Sequence[Arg], attrs: Attrs) -> list[Out]:
    """``query [B, S, Hq·D]`` (or packed qkv ``[B, S, (Hq + 2·Hkv)·D]`` when ``key`` is absent), ``past_key
    [B, Hkv, P, D]`` -> ``output [B, S, Hq·D]``, ``present_key``/``present_value [B, Hkv, T, D]`` with ``T`` =
    max(P, total_sequence_length) when that input's value is known, else ``P + S``."""
    q, k, past, total = _arg(args, 0), _arg(args, 1), _arg(args, 3), _arg(args, 6)
    hq, hkv = int(attrs.get("num_heads", 0)), int(attrs.get("kv_num_heads", 0))
    if q.shape is None or len(q.shape) != 3 or not hq or not hkv:
        return [None] * 3
    b, s, width = q.shape
    if past.shape is not None and len(past.shape) == 4:
        d = past.shape[3]
    elif k.shape is None:
        d = width // (hq + 2 * hkv)
    else:
        d = width // hq
    p = past.shape[2] if past.shape is not None and len(past.shape) == 4 else 0
    known_total = _scalar(total)
    t = max(p, known_total) if known_total is not None else p + s
    present = ((b, hkv, t, d), q.elem)
    return [((b, s, hq * d), q.elem), present, present]


@shape_fn((MS, "MultiHeadAttention"))
def multi_head_attention(args: Sequence[Arg], attrs: Attrs) -> list[Out]:
    """``query [B, S, D]`` (or packed qkv ``[B, S, N, 3, H]``), ``key [B, L, D]`` / ``[B, N, L, H]`` (or
    packed kv ``[B, L, N, 2, H]``), ``value``, ``past_key [B, N, P, H]`` (inputs 6, 7) -> ``output [B, S, Dv]``,
    ``present_key``/``present_value [B, N, P + L, H]`` (= ``key`` when it is already ``[B, N, L, H]``)."""
    q, k, v, past = _arg(args, 0), _arg(args, 1), _arg(args, 2), _arg(args, 6)
    n = int(attrs.get("num_heads", 0))
    if q.shape is None or not n:
        return [None] * 3
    b, s = q.shape[0], q.shape[1]
    if len(q.shape) == 5:  # packed qkv
        dv, h, length = q.shape[2] * q.shape[4], q.shape[4], s
    elif k.shape is not None and len(k.shape) == 5:  # packed kv
        dv, h, length = k.shape[2] * k.shape[4], k.shape[4], k.shape[1]
    else:
        dv = _hidden(v.shape) or q.shape[2]
        h = k.shape[3] if k.shape is not None and len(k.shape) == 4 else q.shape[2] // n
        length = k.shape[2] if k.shape is not None and len(k.shape) == 4 else k.shape[1] if k.shape else s
    out = ((b, s, dv), q.elem)
    if k.shape is not None and len(k.shape) == 4:  # cross attention: key/value are already per head
        return [out, (k.shape, q.elem), (v.shape, q.elem) if v.shape else None]
    p = past.shape[2] if past.shape is not None and len(past.shape) == 4 else 0
    present = ((b, n, p + length, h), q.elem)
    return [out, present, ((b, n, p + length, dv // n), q.elem)]


@shape_fn((MS, "Attention"))
def attention(args: Sequence[Arg], attrs: Attrs) -> list[Out]:
    """``input [B, S, hidden]``, ``weights [hidden, Dq + Dk + Dv]`` (``qkv_hidden_sizes``, else thirds), ``past
    [2, B, N, P, H]`` (input 4) -> ``output [B, S, Dv]``, ``present [2, B, N, P + S, Dk/N]``."""
    x, w, past = _arg(args, 0), _arg(args, 1), _arg(args, 4)
    n = int(attrs.get("num_heads", 0))
    if x.shape is None or w.shape is None or len(x.shape) != 3 or not n:
        return [None, None]
    sizes = list(attrs.get("qkv_hidden_sizes") or []) or [w.shape[-1] // 3] * 3
    b, s = x.shape[0], x.shape[1]
    p = past.shape[3] if past.shape is not None and len(past.shape) == 5 else 0
    return [((b, s, sizes[2]), x.elem), ((2, b, n, p + s, sizes[1] // n), x.elem)]


@shape_fn((MS, "PackedAttention"))
def packed_attention(args: Sequence[Arg], attrs: Attrs) -> list[Out]:
    """``input [T, hidden]`` (T tokens, padding removed), ``weights [hidden, Dq + Dk + Dv]`` -> ``[T, Dv]``."""
    x, w = _arg(args, 0), _arg(args, 1)
    if x.shape is None or w.shape is None:
        return [None]
    sizes = list(attrs.get("qkv_hidden_sizes") or []) or [w.shape[-1] // 3] * 3
    return [((x.shape[0], sizes[2]), x.elem)]


@shape_fn((MS, "PackedMultiHeadAttention"))
def packed_multi_head_attention(args: Sequence[Arg], attrs: Attrs) -> list[Out]:
    """``query [T, D]`` (or packed qkv ``[T, N, 3, H]``), ``value [T, Dv]`` -> ``[T, Dv]``."""
    q, v = _arg(args, 0), _arg(args, 2)
    if q.shape is None:
        return [None]
    if len(q.shape) == 4:
        return [((q.shape[0], q.shape[1] * q.shape[3]), q.elem)]
    return [((q.shape[0], v.shape[-1] if v.shape else q.shape[-1]), q.elem)]


@shape_fn((MS, "DecoderMaskedMultiHeadAttention"))
def decoder_masked_mha(args: Sequence[Arg], attrs: Attrs) -> list[Out]:
    """``query [B, 1, D]`` (packed qkv ``[B, 1, 3·D]`` when ``key`` is absent), ``past_key [B, N, M, H]``
    (inputs 5, 6; a buffer of M positions shared with the present) -> ``output [B, 1, Dv]``, ``present`` =
    ``past``."""
    q, k, v, past_k, past_v = (_arg(args, i) for i in (0, 1, 2, 5, 6))
    if q.shape is None or len(q.shape) != 3:
        return [None] * 3
    dv = (
        v.shape[-1] if v.shape is not None and len(v.shape) == 3 else q.shape[2] // 3 if k.shape is None else q.shape[2]
    )
    return [
        ((q.shape[0], q.shape[1], dv), q.elem),
        (past_k.shape, q.elem) if past_k.shape else None,
        (past_v.shape, q.elem) if past_v.shape else None,
    ]


@shape_fn((MS, "SparseAttention"))
def sparse_attention(args: Sequence[Arg], attrs: Attrs) -> list[Out]:
    """``query [B, S, N·H]`` (packed qkv ``[B, S, (N + 2·Nkv)·H]`` when ``key`` is absent), ``past_key [B, Nkv,
    M, H]`` (inputs 3, 4; shared buffer) -> ``output [B, S, N·H]``, ``present`` = ``past``."""
    q, k, past_k, past_v = _arg(args, 0), _arg(args, 1), _arg(args, 3), _arg(args, 4)
    n, nkv = int(attrs.get("num_heads", 0)), int(attrs.get("kv_num_heads", 0))
    if q.shape is None or len(q.shape) != 3 or not n:
        return [None] * 3
    width = q.shape[2] if k.shape is not None else q.shape[2] * n // (n + 2 * nkv)
    return [
        ((q.shape[0], q.shape[1], width), q.elem),
        (past_k.shape, q.elem) if past_k.shape else None,
        (past_v.shape, q.elem) if past_v.shape else None,
    ]


def contrib_output_shapes(domain: str, op_type: str, args: Sequence[Arg], attrs: Attrs) -> list[Out] | None:
    """The outputs' ``(shape, elem_type)`` from the registered function, None when no function exists."""
    fn = CONTRIB_SHAPES.get((domain, op_type))
    if fn is None:
        return None
    try:
        return fn(args, attrs)
    except (IndexError, ZeroDivisionError, TypeError, ValueError):
        return None


__all__ = ["CONTRIB_SHAPES", "MS", "Arg", "contrib_output_shapes", "shape_fn"]
