"""The fuzzer's real-model seeds and the mutation kinds of issue 25 (used by ``tests/fuzz.py``).

Seeds: the LLM and transformer files from real exporters in samples/llm (GenAI int4 Llama and Qwen2, with their
external weights carried beside the mutant; the Optimum merged decoder; the opset-23 decoder layer; the
ORT-optimized BERT) and Silero VAD as shipped (nested ``If``s around an LSTM).

Kinds, each a function ``(model, rng) -> description`` that changes ``model`` in place:

* ``attr_removal``  one attribute of a node removed (the ops' required ones among them: ``MatMulNBits.K``,
  com.microsoft ``Attention.num_heads``, ``Einsum.equation``, ``Cast.to``);
* ``contrib_ops``   a node's op type swapped for an ONNX Runtime contrib op (com.microsoft ``Attention``,
  ``GroupQueryAttention``, ``MatMulNBits``...) or ONNX's ``Attention``, keeping its inputs and attributes;
* ``huge_attrs``    an int or ints attribute set to 2**31, 2**40, 2**62 or 2**63-1 (``Cast.to``, ``LRN.size``,
  ``num_heads``, axes...);
* ``huge_dims``     an initializer's or a graph input's dim set to 2**31, 2**40 or 2**62, or a symbolic dim
  bound to such a value with ``--dim``.
"""

from __future__ import annotations

import random
from pathlib import Path

import onnx
from onnx import helper

ROOT = Path(__file__).resolve().parent.parent
LLM = ROOT / "samples" / "llm"
SILERO = ROOT / "tests" / "data" / "silero"
LLM_SEEDS = {
    "genai_llama_int4": LLM / "genai_llama_int4" / "model.onnx",
    "genai_qwen2_int4": LLM / "genai_qwen2_int4" / "model.onnx",
    "optimum_merged": LLM / "optimum_llama" / "decoder_model_merged.onnx",
    "decoder_opset23": LLM / "onnx_decoder_layer_opset23.onnx",
    "ort_bert": LLM / "ort_bert_optimized.onnx",
    "silero_vad_half": SILERO / "silero_vad_half.onnx",
}
HUGE_VALUES = (2**31, 2**40, 2**62, 2**63 - 1)
HUGE_DIMS = (2**31, 2**40, 2**62)
CONTRIB_OPS = (
    ("com.microsoft", "Attention"),
    ("com.microsoft", "GroupQueryAttention"),
    ("com.microsoft", "MultiHeadAttention"),
    ("com.microsoft", "MatMulNBits"),
    ("com.microsoft", "SkipLayerNormalization"),
    ("com.microsoft", "SkipSimplifiedLayerNormalization"),
    ("com.microsoft", "RotaryEmbedding"),
    ("com.microsoft", "GatherBlockQuantized"),
    ("com.microsoft", "FusedMatMul"),
    ("com.microsoft", "BiasGelu"),
    ("", "SimplifiedLayerNormalization"),
    ("", "Attention"),
    ("", "Einsum"),
)
KINDS = ("attr_removal", "contrib_ops", "huge_attrs", "huge_dims")


def llm_seeds() -> dict[str, tuple[onnx.ModelProto, dict[str, bytes]]]:
    """Name -> (model without its external weights, the files to write beside it: its external data)."""
    seeds: dict[str, tuple[onnx.ModelProto, dict[str, bytes]]] = {}
    for name, path in LLM_SEEDS.items():
        model = onnx.load(str(path), load_external_data=False)
        locations = {
            entry.value
            for tensor in model.graph.initializer
            for entry in tensor.external_data
            if entry.key == "location"
        }
        seeds[name] = (model, {location: (path.parent / location).read_bytes() for location in sorted(locations)})
    return seeds


def all_nodes(graph: onnx.GraphProto) -> list[onnx.NodeProto]:
    """Every node of ``graph`` and of its bodies, recursively."""
    nodes = []
    for node in graph.node:
        nodes.append(node)
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                nodes.extend(all_nodes(attr.g))
    return nodes


def attr_removal(model: onnx.ModelProto, rng: random.Random) -> str:
    """Remove one attribute of a node that has some (a contrib or attention node when there is one)."""
    nodes = [n for n in all_nodes(model.graph) if n.attribute and n.op_type != "Constant"]
    if not nodes:
        return "no attribute to remove"
    preferred = [n for n in nodes if n.domain == "com.microsoft" or n.op_type in ("Attention", "Einsum", "Cast")]
    node = rng.choice(preferred if preferred and rng.random() < 0.6 else nodes)
    attr = rng.choice([a for a in node.attribute if a.type != onnx.AttributeProto.GRAPH] or list(node.attribute))
    node.attribute.remove(attr)
    return f"{node.domain}::{node.op_type}.{attr.name} removed"


def contrib_ops(model: onnx.ModelProto, rng: random.Random) -> str:
    """Swap one node's op type for a contrib op (or ONNX Attention / Einsum); inputs and attributes kept."""
    node = rng.choice([n for n in all_nodes(model.graph) if n.op_type != "Constant"] or list(model.graph.node))
    domain, op_type = rng.choice(CONTRIB_OPS)
    old = f"{node.domain}::{node.op_type}"
    node.op_type, node.domain = op_type, domain
    if domain and all(o.domain != domain for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(domain, 1))
    return f"{old} ({len(node.input)} inputs) -> {domain}::{op_type}"


def huge_attrs(model: onnx.ModelProto, rng: random.Random) -> str:
    """Set an int or ints attribute to a huge value (or add ``size``/``to``/``num_heads`` to a node without one)."""
    value = rng.choice(HUGE_VALUES)
    nodes = all_nodes(model.graph)
    ints = [
        (n, a)
        for n in nodes
        for a in n.attribute
        if a.type in (onnx.AttributeProto.INT, onnx.AttributeProto.INTS) and n.op_type != "Constant"
    ]
    if not ints:
        node = rng.choice(nodes)
        name = {"LRN": "size", "Cast": "to"}.get(node.op_type, "num_heads")
        node.attribute.append(helper.make_attribute(name, value))
        return f"{node.op_type}.{name}={value} added"
    node, attr = rng.choice(ints)
    if attr.type == onnx.AttributeProto.INT:
        attr.i = value
    else:
        values = list(attr.ints) or [0]
        values[rng.randrange(len(values))] = value
        del attr.ints[:]
        attr.ints.extend(values)
    return f"{node.domain}::{node.op_type}.{attr.name} holds {value}"


def huge_dims(model: onnx.ModelProto, rng: random.Random, dims: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """A huge dim on an initializer or a graph input, or a symbolic dim bound huge: (description, --dim items)."""
    size = rng.choice(HUGE_DIMS)
    choice = rng.randrange(3)
    if choice == 0 and dims:
        index = rng.randrange(len(dims))
        name = dims[index].split("=", 1)[0]
        bound = (*dims[:index], f"{name}={size}", *dims[index + 1 :])
        return f"--dim {name}={size}", bound
    initializers = [t for t in model.graph.initializer if t.dims]
    if choice == 1 and initializers:
        tensor = rng.choice(initializers)
        tensor.dims[rng.randrange(len(tensor.dims))] = size
        return f"initializer {tensor.name} dims {list(tensor.dims)}", dims
    inputs = [v for v in model.graph.input if v.type.tensor_type.shape.dim]
    if not inputs:
        return "no dim to change", dims
    value = rng.choice(inputs)
    dim = rng.choice(list(value.type.tensor_type.shape.dim))
    dim.Clear()
    dim.dim_value = size
    kept = {d.dim_param for v in model.graph.input for d in v.type.tensor_type.shape.dim if d.dim_param}
    return f"input {value.name} dim {size}", tuple(d for d in dims if d.split("=", 1)[0] in kept or ":" in d)
