"""Build the LLM and transformer ONNX artifacts in this folder, and their reference figures, offline.

Each artifact is a file as a real exporter ships it, made from a small random-init Hugging Face model
(no hub access: configs are built in code, weights drawn after ``torch.manual_seed``; a tiny WordLevel
tokenizer is made with the ``tokenizers`` library because the GenAI builder wants one in the HF folder).
``reference.json`` holds, per artifact, the figures the suite checks onnxroof against: the Hugging Face
parameter count, matmul-like MACs from ``torch.utils.flop_counter.FlopCounterMode`` on the eager model
for a prefill and a decode step, the dims to bind for those two cases, the file's inputs/outputs, its op
types with counts, and the bytes it stores for initializers.

Two virtual environments (optimum-onnx pins an older transformers), never the project's own venv::

    python3 -m venv /work/llmvenv
    /work/llmvenv/bin/pip install torch==2.13.0 transformers==5.24.0 onnxruntime-genai==0.18.0 \\
        onnxruntime==1.32.0 onnx==1.23.2 onnxscript==0.7.2 accelerate==1.15.0 tokenizers==0.23.3 numpy==2.4.6
    python3 -m venv /work/optimumvenv
    /work/optimumvenv/bin/pip install torch==2.13.0 optimum-onnx==0.1.0 "transformers==4.57.6" \\
        onnxruntime==1.32.0 onnx==1.23.2 accelerate==1.15.0 tokenizers==0.22.2 numpy==2.4.6   # optimum 2.1.0

(torch 2.13.0 is the CPU wheel; pin it explicitly so no other requirement pulls a newer build.)

Run it with the first venv's Python; it calls the second one for the Optimum stage::

    /work/llmvenv/bin/python samples/llm/build_llm_samples.py [--optimum-python /work/optimumvenv/bin/python]

Stages (``--stage``): ``all`` (default) = ``hf`` (random-init HF folders into a temp dir), ``genai``
(``python -m onnxruntime_genai.models.builder``), ``ort`` (torch.onnx.export of eager BERT/GPT-2, then
``onnxruntime.transformers.optimizer.optimize_model``), ``optimum`` (run in the optimum venv), ``onnx``
(opset-23/24 decoder layers from ``onnx.helper``), ``reference`` (reference.json). Seeds are fixed and the
tools run with ``PYTHONHASHSEED=0``: with the versions above, two full runs write the same bytes. The tests
rebuild only the ``onnx.helper`` files (they need just onnx and numpy) and compare bytes; the exporters'
files are checked against reference.json instead.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 0

#: Hugging Face models (name -> (family, config kwargs)). Hidden 256 for the int4 GenAI files; the fp32
#: files use a hidden-128 Llama (shared by GenAI fp32 and Optimum, so the two exporters see the same
#: weights) and hidden-64 BERT/GPT-2, to keep fp32 weights (4 bytes each) to ~1-2 MB a file.
HF_MODELS: dict[str, tuple[str, dict]] = {
    "llama": (
        "llama",
        dict(
            hidden_size=256,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=512,
            vocab_size=1000,
            max_position_embeddings=512,
            tie_word_embeddings=False,
        ),
    ),
    "llama_small": (
        "llama",
        dict(
            hidden_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=256,
            vocab_size=1000,
            max_position_embeddings=512,
            tie_word_embeddings=False,
        ),
    ),
    "qwen2": (
        "qwen2",
        dict(
            hidden_size=256,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=512,
            vocab_size=1000,
            max_position_embeddings=512,
            tie_word_embeddings=True,
        ),
    ),
    "phi3": (
        "phi3",
        dict(
            hidden_size=256,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=512,
            vocab_size=1000,
            max_position_embeddings=512,
            original_max_position_embeddings=512,
            tie_word_embeddings=False,
            pad_token_id=0,
            bos_token_id=1,
            eos_token_id=2,
        ),
    ),
    "bert": (
        "bert",
        dict(
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=256,
            vocab_size=1000,
            max_position_embeddings=512,
        ),
    ),
    "gpt2": (
        "gpt2",
        dict(n_embd=64, n_layer=2, n_head=4, vocab_size=1000, n_positions=512, bos_token_id=1, eos_token_id=2),
    ),
}

#: artifact -> (files relative to this folder (the first is the model), HF model, exporter, how)
ARTIFACTS: dict[str, dict] = {
    "genai_llama_int4": dict(
        files=["genai_llama_int4/model.onnx", "genai_llama_int4/model.onnx.data", "genai_llama_int4/genai_config.json"],
        hf="llama",
        exporter="onnxruntime-genai builder -p int4 -e cpu",
    ),
    "genai_llama_fp32": dict(
        files=["genai_llama_fp32/model.onnx", "genai_llama_fp32/model.onnx.data", "genai_llama_fp32/genai_config.json"],
        hf="llama_small",
        exporter="onnxruntime-genai builder -p fp32 -e cpu",
    ),
    "genai_qwen2_int4": dict(
        files=["genai_qwen2_int4/model.onnx", "genai_qwen2_int4/model.onnx.data", "genai_qwen2_int4/genai_config.json"],
        hf="qwen2",
        exporter="onnxruntime-genai builder -p int4 -e cpu",
    ),
    "genai_phi3_int4": dict(
        files=["genai_phi3_int4/model.onnx", "genai_phi3_int4/model.onnx.data", "genai_phi3_int4/genai_config.json"],
        hf="phi3",
        exporter="onnxruntime-genai builder -p int4 -e cpu",
    ),
    "ort_bert_optimized": dict(
        files=["ort_bert_optimized.onnx"],
        hf="bert",
        exporter="torch.onnx.export(dynamo=False) + onnxruntime.transformers.optimizer (bert)",
    ),
    "ort_gpt2_optimized": dict(
        files=["ort_gpt2_optimized.onnx"],
        hf="gpt2",
        exporter="torch.onnx.export(dynamo=False) + onnxruntime.transformers.optimizer (gpt2)",
    ),
    "optimum_llama_with_past": dict(
        files=["optimum_llama/model.onnx"],
        hf="llama_small",
        exporter="optimum-cli export onnx --task text-generation-with-past",
    ),
    "optimum_llama_merged": dict(
        files=["optimum_llama/decoder_model_merged.onnx"],
        hf="llama_small",
        exporter="optimum.onnx.merge_decoders(decoder_model, model)",
    ),
    "onnx_decoder_layer_opset23": dict(
        files=["onnx_decoder_layer_opset23.onnx"], hf=None, exporter="onnx.helper (this script)"
    ),
    "onnx_decoder_layer_opset24_tensorscatter": dict(
        files=["onnx_decoder_layer_opset24_tensorscatter.onnx"], hf=None, exporter="onnx.helper (this script)"
    ),
}

PREFILL = dict(batch=1, seq=128, past=0)
DECODE = dict(batch=1, seq=1, past=127)


def run(cmd: list[str]) -> None:
    """Run a tool; PYTHONHASHSEED=0 so that set iteration (optimum's initializer dedup names) is stable."""
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, env={**os.environ, "PYTHONHASHSEED": "0"})


# --------------------------------------------------------------------------- stage hf (llm venv)


def make_tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update({f"t{i}": i for i in range(3, vocab_size)})
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")


def hf_model(name: str):
    """The random-init eager Hugging Face model ``name`` (same weights every call: seeded)."""
    import torch
    import transformers as tf

    family, kwargs = HF_MODELS[name]
    cls_cfg, cls_model = {
        "llama": (tf.LlamaConfig, tf.LlamaForCausalLM),
        "qwen2": (tf.Qwen2Config, tf.Qwen2ForCausalLM),
        "phi3": (tf.Phi3Config, tf.Phi3ForCausalLM),
        "bert": (tf.BertConfig, tf.BertModel),
        "gpt2": (tf.GPT2Config, tf.GPT2LMHeadModel),
    }[family]
    config = cls_cfg(**kwargs, attn_implementation="eager")
    torch.manual_seed(SEED)
    model = cls_model(config, add_pooling_layer=False) if family == "bert" else cls_model(config)
    # Norm scales (ones) and biases (zeros) are constant at init; exporters would then merge identical
    # tensors into one initializer, which a trained model never allows. Jitter them.
    with torch.no_grad():
        for p in model.parameters():
            flat = p.flatten()
            if p.numel() > 1 and bool((flat == flat[0]).all()):
                p.add_(torch.randn_like(p) * 0.02)
    return model.eval()


def stage_hf(work: Path) -> None:
    for name, (_family, kwargs) in HF_MODELS.items():
        out = work / "hf" / name
        hf_model(name).save_pretrained(out)
        make_tokenizer(kwargs["vocab_size"]).save_pretrained(out)


# --------------------------------------------------------------------------- stage genai (llm venv)


def stage_genai(work: Path) -> None:
    for art in ("genai_llama_int4", "genai_llama_fp32", "genai_qwen2_int4", "genai_phi3_int4"):
        spec = ARTIFACTS[art]
        precision = "int4" if art.endswith("int4") else "fp32"
        out = work / "genai" / art
        run(
            [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", work / "hf" / spec["hf"], "-o", out,
             "-p", precision, "-e", "cpu", "-c", work / "genai_cache"]
        )  # fmt: skip
        dest = HERE / art
        shutil.rmtree(dest, ignore_errors=True)
        dest.mkdir()
        for f in spec["files"]:
            shutil.copy(out / Path(f).name, HERE / f)


# --------------------------------------------------------------------------- stage ort (llm venv)


class _Wrap:
    """torch.nn.Module wrappers with positional inputs (transformers 5 forward signatures take keywords)."""

    @staticmethod
    def bert(model):
        import torch

        class W(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.m = model

            def forward(self, input_ids, attention_mask, token_type_ids):
                out = self.m(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
                return out.last_hidden_state

        return W().eval()

    @staticmethod
    def gpt2(model):
        import torch

        class W(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.m = model

            def forward(self, input_ids, attention_mask):
                return self.m(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).logits

        return W().eval()


def stage_ort(work: Path) -> None:
    import torch
    from onnxruntime.transformers.optimizer import optimize_model

    torch.manual_seed(SEED)
    ids = torch.randint(3, 1000, (1, 16))
    mask = torch.ones(1, 16, dtype=torch.int64)
    dyn = {0: "batch_size", 1: "sequence_length"}
    # The legacy (TorchScript) exporter: the dynamo exporter's BERT keeps attention unfused, and its GPT-2
    # crashes the gpt2 optimizer (IndexError in onnx_model_gpt2.postprocess).
    for name, wrap, inputs, names, out_name in (
        ("bert", _Wrap.bert, (ids, mask, torch.zeros_like(ids)), ["input_ids", "attention_mask", "token_type_ids"],
         "last_hidden_state"),
        ("gpt2", _Wrap.gpt2, (ids, mask), ["input_ids", "attention_mask"], "logits"),
    ):  # fmt: skip
        _family, cfg = HF_MODELS[name]
        raw = work / f"{name}_raw.onnx"
        torch.onnx.export(
            wrap(hf_model(name)), inputs, raw, dynamo=False, opset_version=17, input_names=names,
            output_names=[out_name], dynamic_axes={n: dyn for n in [*names, out_name]},
        )  # fmt: skip
        heads = cfg.get("num_attention_heads", cfg.get("n_head"))
        hidden = cfg.get("hidden_size", cfg.get("n_embd"))
        opt = optimize_model(str(raw), model_type=name, num_heads=heads, hidden_size=hidden)
        opt.save_model_to_file(str(HERE / ARTIFACTS[f"ort_{name}_optimized"]["files"][0]))


# --------------------------------------------------------------------------- stage optimum (optimum venv)


def stage_optimum(work: Path) -> None:
    """Run inside the optimum venv: ``model.onnx`` from optimum-cli, then the no-past decoder (presents
    out, no past in) through optimum's own exporter, merged with ``model.onnx`` into the ``If`` model."""
    from optimum.exporters.onnx import export
    from optimum.exporters.onnx.model_configs import LlamaOnnxConfig
    from optimum.onnx import merge_decoders
    from transformers import AutoModelForCausalLM

    hf = work / "hf" / ARTIFACTS["optimum_llama_with_past"]["hf"]
    out = work / "optimum"
    run([Path(sys.executable).parent / "optimum-cli", "export", "onnx", "--model", hf, "--task",
         "text-generation-with-past", out])  # fmt: skip
    model = AutoModelForCausalLM.from_pretrained(hf)
    cfg = LlamaOnnxConfig(model.config, task="text-generation", use_past=True, use_past_in_inputs=False)
    export(model, cfg, out / "decoder_model.onnx")
    dest = HERE / "optimum_llama"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir()
    shutil.copy(out / "model.onnx", dest / "model.onnx")
    merge_decoders(out / "decoder_model.onnx", out / "model.onnx", save_path=dest / "decoder_model_merged.onnx")


# --------------------------------------------------------------------------- stage onnx (any venv with onnx)

#: the opset-23/24 decoder layers: one Llama layer, GQA.
LAYER = dict(hidden=128, q_heads=4, kv_heads=2, head_dim=32, intermediate=256, max_positions=512, eps=1e-5)


def stage_onnx(work: Path, out: Path = HERE) -> None:
    """Write the two decoder-layer files into ``out`` (needs only onnx and numpy)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    L = LAYER
    H, nq, nkv, hd, inter = L["hidden"], L["q_heads"], L["kv_heads"], L["head_dim"], L["intermediate"]
    rng = np.random.RandomState(SEED)

    def weights() -> list:
        w = {
            "ln1.weight": np.ones(H),
            "q_proj.weight": rng.randn(H, nq * hd) * 0.02,
            "k_proj.weight": rng.randn(H, nkv * hd) * 0.02,
            "v_proj.weight": rng.randn(H, nkv * hd) * 0.02,
            "o_proj.weight": rng.randn(nq * hd, H) * 0.02,
            "ln2.weight": np.ones(H),
            "gate_proj.weight": rng.randn(H, inter) * 0.02,
            "up_proj.weight": rng.randn(H, inter) * 0.02,
            "down_proj.weight": rng.randn(inter, H) * 0.02,
        }
        inv = 1.0 / (10000.0 ** (np.arange(0, hd, 2) / hd))
        ang = np.outer(np.arange(L["max_positions"]), inv)
        w["cos_cache"], w["sin_cache"] = np.cos(ang), np.sin(ang)
        return [numpy_helper.from_array(v.astype(np.float32), k) for k, v in w.items()]

    def mlp_tail(nodes: list, attn_out: str) -> None:
        nodes += [
            helper.make_node("MatMul", [attn_out, "o_proj.weight"], ["o"], name="o_proj"),
            helper.make_node("Add", ["hidden_states", "o"], ["h"], name="residual1"),
            helper.make_node("RMSNormalization", ["h", "ln2.weight"], ["n2"], name="ln2", axis=-1, epsilon=L["eps"]),
            helper.make_node("MatMul", ["n2", "gate_proj.weight"], ["gate"], name="gate_proj"),
            helper.make_node("MatMul", ["n2", "up_proj.weight"], ["up"], name="up_proj"),
            helper.make_node("Sigmoid", ["gate"], ["gate_sig"], name="silu_sigmoid"),
            helper.make_node("Mul", ["gate", "gate_sig"], ["gate_act"], name="silu_mul"),
            helper.make_node("Mul", ["gate_act", "up"], ["act"], name="glu_mul"),
            helper.make_node("MatMul", ["act", "down_proj.weight"], ["down"], name="down_proj"),
            helper.make_node("Add", ["h", "down"], ["output"], name="residual2"),
        ]

    head = [
        helper.make_node("RMSNormalization", ["hidden_states", "ln1.weight"], ["n1"], name="ln1", axis=-1,
                         epsilon=L["eps"]),
        helper.make_node("MatMul", ["n1", "q_proj.weight"], ["q"], name="q_proj"),
        helper.make_node("MatMul", ["n1", "k_proj.weight"], ["k"], name="k_proj"),
        helper.make_node("MatMul", ["n1", "v_proj.weight"], ["v"], name="v_proj"),
    ]  # fmt: skip
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    hs_in = helper.make_tensor_value_info("hidden_states", f32, ["batch_size", "sequence_length", H])
    pos_in = helper.make_tensor_value_info("position_ids", i64, ["batch_size", "sequence_length"])
    out_vi = helper.make_tensor_value_info("output", f32, ["batch_size", "sequence_length", H])

    # Opset 23: 3D q/k/v, RotaryEmbedding with num_heads, Attention with its own past/present KV.
    nodes = [
        *head,
        helper.make_node("RotaryEmbedding", ["q", "cos_cache", "sin_cache", "position_ids"], ["q_rot"],
                         name="rotary_q", num_heads=nq),
        helper.make_node("RotaryEmbedding", ["k", "cos_cache", "sin_cache", "position_ids"], ["k_rot"],
                         name="rotary_k", num_heads=nkv),
        helper.make_node("Attention", ["q_rot", "k_rot", "v", "", "past_key", "past_value"],
                         ["attn", "present_key", "present_value"], name="attention", q_num_heads=nq,
                         kv_num_heads=nkv, is_causal=1),
    ]  # fmt: skip
    mlp_tail(nodes, "attn")
    kv = lambda n, d: helper.make_tensor_value_info(n, f32, ["batch_size", nkv, d, hd])  # noqa: E731
    graph = helper.make_graph(
        nodes, "decoder_layer_opset23",
        [hs_in, pos_in, kv("past_key", "past_sequence_length"), kv("past_value", "past_sequence_length")],
        [out_vi, kv("present_key", "total_sequence_length"), kv("present_value", "total_sequence_length")],
        weights(),
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], producer_name="onnxroof/samples")
    model.ir_version = 11
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, out / ARTIFACTS["onnx_decoder_layer_opset23"]["files"][0])

    # Opset 24: 4D heads, a fixed-size KV cache updated in place by TensorScatter at write_indices,
    # Attention over the whole cache buffer with nonpad_kv_seqlen telling how much of it is valid.
    rng = np.random.RandomState(SEED)
    shp = lambda n, v: numpy_helper.from_array(np.array(v, dtype=np.int64), n)  # noqa: E731
    nodes = list(head)
    for x in ("q", "k", "v"):
        nodes += [
            helper.make_node("Reshape", [x, f"{x}_shape"], [f"{x}_4d"], name=f"{x}_reshape"),
            helper.make_node("Transpose", [f"{x}_4d"], [f"{x}_bhsd"], name=f"{x}_transpose", perm=[0, 2, 1, 3]),
        ]
    nodes += [
        helper.make_node("RotaryEmbedding", ["q_bhsd", "cos_cache", "sin_cache", "position_ids"], ["q_rot"],
                         name="rotary_q"),
        helper.make_node("RotaryEmbedding", ["k_bhsd", "cos_cache", "sin_cache", "position_ids"], ["k_rot"],
                         name="rotary_k"),
        helper.make_node("TensorScatter", ["key_cache", "k_rot", "write_indices"], ["present_key"],
                         name="key_cache_update", axis=2),
        helper.make_node("TensorScatter", ["value_cache", "v_bhsd", "write_indices"], ["present_value"],
                         name="value_cache_update", axis=2),
        helper.make_node("Attention", ["q_rot", "present_key", "present_value", "", "", "", "nonpad_kv_seqlen"],
                         ["attn_bhsd"], name="attention", q_num_heads=nq, kv_num_heads=nkv, is_causal=1),
        helper.make_node("Transpose", ["attn_bhsd"], ["attn_bshd"], name="attn_transpose", perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["attn_bshd", "attn_shape"], ["attn"], name="attn_reshape"),
    ]  # fmt: skip
    mlp_tail(nodes, "attn")
    cache = lambda n: helper.make_tensor_value_info(n, f32, ["batch_size", nkv, "max_sequence_length", hd])  # noqa: E731
    inits = [
        *weights(),
        shp("q_shape", [0, 0, nq, hd]), shp("k_shape", [0, 0, nkv, hd]), shp("v_shape", [0, 0, nkv, hd]),
        shp("attn_shape", [0, 0, nq * hd]),
    ]  # fmt: skip
    graph = helper.make_graph(
        nodes, "decoder_layer_opset24_tensorscatter",
        [hs_in, pos_in, cache("key_cache"), cache("value_cache"),
         helper.make_tensor_value_info("write_indices", i64, ["batch_size"]),
         helper.make_tensor_value_info("nonpad_kv_seqlen", i64, ["batch_size"])],
        [out_vi, cache("present_key"), cache("present_value")],
        inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)], producer_name="onnxroof/samples")
    model.ir_version = 11
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, out / ARTIFACTS["onnx_decoder_layer_opset24_tensorscatter"]["files"][0])


def layer_formula(case: dict, tensorscatter: bool) -> dict:
    """Params and matmul-like MACs of the opset-23/24 decoder layer, by formula.

    params = 2·H (two RMSNorm scales) + H·(nq + 2·nkv)·hd (q/k/v) + nq·hd·H (o) + 3·H·I (gate/up/down);
    the cos/sin caches (max_positions × hd/2 each) are constants, not parameters.
    MACs(S new tokens, attended length T) = S·[H·(nq + 2·nkv)·hd + nq·hd·H + 3·H·I] (projections)
    + nq·S·T·hd (QKᵀ) + nq·S·T·hd (AV), causal mask not discounted (as the eager HF model computes it).
    T = past + S for the opset-23 file; for the TensorScatter file T = max_sequence_length, the whole cache
    buffer the Attention reads (bound to 128 in both cases, = past + S).
    """
    L = LAYER
    H, nq, nkv, hd, inter = L["hidden"], L["q_heads"], L["kv_heads"], L["head_dim"], L["intermediate"]
    S = case["seq"]
    T = case["past"] + S
    proj = S * (H * (nq + 2 * nkv) * hd + nq * hd * H + 3 * H * inter)
    attn = nq * S * T * hd
    return {"params": 2 * H + H * (nq + 2 * nkv) * hd + nq * hd * H + 3 * H * inter,
            "macs": {"projections": proj, "qk": attn, "av": attn, "total": proj + 2 * attn}}  # fmt: skip


# --------------------------------------------------------------------------- stage reference (llm venv)


def hf_reference(name: str) -> dict:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    model = hf_model(name)
    family = HF_MODELS[name][0]
    params = sum(p.numel() for p in model.parameters())  # parameters() yields a tied weight once

    def count(fn) -> dict:
        with FlopCounterMode(display=False) as fc, torch.no_grad():
            fn()
        by_op = {str(op).split(".")[1]: int(v) // 2 for op, v in fc.get_flop_counts()["Global"].items()}
        return {"total": sum(by_op.values()), "by_op": dict(sorted(by_op.items()))}

    torch.manual_seed(SEED)
    ids = torch.randint(3, 1000, (1, 128))
    out: dict = {"params": params, "config": HF_MODELS[name][1], "class": type(model).__name__}
    if family == "bert":
        out["macs_prefill"] = count(lambda: model(input_ids=ids))
        return out
    if family == "gpt2":  # its ONNX file has no past inputs: prefill only
        out["macs_prefill"] = count(lambda: model(input_ids=ids, use_cache=False))
        return out
    out["macs_prefill"] = count(lambda: model(input_ids=ids, use_cache=False))
    with torch.no_grad():
        past = model(input_ids=ids[:, :127], use_cache=True).past_key_values
    out["macs_decode"] = count(lambda: model(input_ids=ids[:, 127:], past_key_values=past, use_cache=True))
    return out


def dims_for(dim_params: set[str], case: dict, head_dim: int | None = None) -> dict:
    """The value of each dim the file declares, for ``case``. ``kv_cache_dim`` (GenAI) is the KV head dim."""
    S, P, B = case["seq"], case["past"], case["batch"]
    known = {
        "batch_size": B, "batch": B, "sequence_length": S, "past_sequence_length": P,
        "total_sequence_length": P + S, "past_sequence_length + sequence_length": P + S,
        "max_sequence_length": P + S, "kv_cache_dim": head_dim,
    }  # fmt: skip
    return {d: known[d] for d in sorted(dim_params) if d in known}


def onnx_facts(path: Path) -> dict:
    import onnx
    from onnx import TensorProto, numpy_helper

    model = onnx.load(path, load_external_data=False)

    def vi(v) -> dict:
        t = v.type.tensor_type
        dims = [d.dim_param if d.HasField("dim_param") else d.dim_value for d in t.shape.dim]
        return {"name": v.name, "dtype": TensorProto.DataType.Name(t.elem_type), "shape": dims}

    def graphs(g):
        yield g
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    yield from graphs(a.g)
                for sub in a.graphs:
                    yield from graphs(sub)

    def key(n) -> str:
        return n.op_type if n.domain in ("", "ai.onnx") else f"{n.domain}::{n.op_type}"

    def nbytes(t) -> int:
        if t.data_location == TensorProto.EXTERNAL:
            return int({e.key: e.value for e in t.external_data}["length"])
        if t.raw_data:
            return len(t.raw_data)
        return int(numpy_helper.to_array(t).nbytes)

    all_graphs = list(graphs(model.graph))
    inits = [t for g in all_graphs for t in g.initializer]
    quant = set()  # every initializer a MatMulNBits / GatherBlockQuantized reads (a shared one once)
    init_names = {t.name for t in inits}
    for g in all_graphs:
        for n in g.node:
            if n.op_type in ("MatMulNBits", "GatherBlockQuantized"):
                quant.update(i for i in n.input if i in init_names)
    dim_params = {
        d.dim_param for v in [*model.graph.input, *model.graph.output] for d in v.type.tensor_type.shape.dim
        if d.HasField("dim_param")
    }  # fmt: skip
    try:
        onnx.checker.check_model(str(path))  # by path: external data is resolved beside the file
        checker = "ok"
    except Exception as exc:
        checker = str(exc).strip().splitlines()[0][:300]
    return {
        "opset_import": {(o.domain or "ai.onnx"): o.version for o in model.opset_import},
        "ir_version": model.ir_version,
        "producer": f"{model.producer_name} {model.producer_version}".strip(),
        "inputs": [vi(v) for v in model.graph.input],
        "outputs": [vi(v) for v in model.graph.output],
        "dim_params": sorted(dim_params),
        "ops": dict(sorted(Counter(key(n) for n in model.graph.node).items())),
        "ops_with_subgraphs": dict(sorted(Counter(key(n) for g in all_graphs for n in g.node).items())),
        "node_count": len(model.graph.node),
        "initializer_elements": sum(math.prod(t.dims) for t in inits),
        "initializer_bytes": sum(nbytes(t) for t in inits),
        "quantized_weight_bytes": sum(nbytes(t) for t in inits if t.name in quant),
        "onnx_checker": checker,
    }


def input_shapes(facts: dict, dims: dict, overrides: dict) -> dict:
    """Concrete shape of each input for a case: declared dims bound, ``overrides`` where the declared dim
    names cannot say it (the merged Optimum decoder's attention_mask declares ``sequence_length``, yet with
    past it must span past + new tokens)."""
    return {
        i["name"]: overrides.get(i["name"], [dims[d] if isinstance(d, str) else d for d in i["shape"]])
        for i in facts["inputs"]
    }


def ort_feed(facts: dict, shapes: dict, case: dict, values: dict, ids=None) -> dict:
    """Inputs for one run: ``ids`` (or random ids) as input_ids, ones for masks, zeros for token types,
    positions past..past+seq-1, ``values`` for named inputs, random floats for past KV / hidden states."""
    import numpy as np

    dtypes = {"FLOAT": np.float32, "INT64": np.int64, "INT32": np.int32, "BOOL": np.bool_}
    rng = np.random.RandomState(SEED)
    feed = {}
    for inp in facts["inputs"]:
        name, shape, dt = inp["name"], shapes[inp["name"]], dtypes[inp["dtype"]]
        if name in values:
            feed[name] = np.full(shape, values[name], dtype=dt)
        elif name == "input_ids" and ids is not None:
            feed[name] = ids.astype(dt)
        elif name == "position_ids":
            feed[name] = np.broadcast_to(np.arange(case["past"], case["past"] + case["seq"]), shape).astype(dt)
        elif "mask" in name or "token_type" in name:
            feed[name] = (np.ones if "mask" in name else np.zeros)(shape, dtype=dt)
        elif dt is np.float32:
            feed[name] = rng.randn(*shape).astype(dt)
        else:
            feed[name] = rng.randint(3, 100, size=shape).astype(dt)
    return feed


def ort_smoke(path: Path, facts: dict, shapes: dict, case: dict, values: dict) -> str:
    """Run the file once in onnxruntime (CPU) with the case's input shapes; 'ok' or the error's first line."""
    import onnxruntime as ort

    try:
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
            None, ort_feed(facts, shapes, case, values)
        )
        return "ok"
    except Exception as exc:
        return str(exc).strip().splitlines()[0][:300]


def diff_vs_hf(path: Path, facts: dict, head_dim: int | None, hf_name: str, values: dict) -> float:
    """Max |ONNX first output - HF eager output| for a 16-token prefill (logits or last_hidden_state)."""
    import numpy as np
    import onnxruntime as ort
    import torch

    case = dict(batch=1, seq=16, past=0)
    overrides = {"attention_mask": [1, 16]} if "use_cache_branch" in values else {}
    shapes = input_shapes(facts, dims_for(set(facts["dim_params"]), case, head_dim), overrides)
    ids = np.random.RandomState(SEED).randint(3, 1000, size=(1, 16))
    got = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
        None, ort_feed(facts, shapes, case, values, ids)
    )[0]
    with torch.no_grad():
        out = hf_model(hf_name)(input_ids=torch.from_numpy(ids))
    want = (out.logits if hasattr(out, "logits") else out.last_hidden_state).numpy()
    return float(np.abs(got - want).max())


def stage_reference(work: Path) -> None:
    import onnx
    import onnxruntime
    import torch
    import transformers

    hf_cache: dict[str, dict] = {}
    artifacts = {}
    for art, spec in ARTIFACTS.items():
        path = HERE / spec["files"][0]
        facts = onnx_facts(path)
        entry: dict = {"files": spec["files"], "exporter": spec["exporter"]}
        entry["bytes_on_disk"] = sum((HERE / f).stat().st_size for f in spec["files"] if f.endswith((".onnx", ".data")))
        entry.update(facts)
        cases = {"prefill": PREFILL} if art.startswith("ort_") else {"prefill": PREFILL, "decode": DECODE}
        entry["cases"] = {}
        cfg = HF_MODELS[spec["hf"]][1] if spec["hf"] else {}
        head_dim = cfg.get("hidden_size", 0) // cfg.get("num_attention_heads", 1) or None
        for cname, case in cases.items():
            dims = dims_for(set(facts["dim_params"]), case, head_dim)
            values, overrides = {}, {}
            if art == "optimum_llama_merged":
                values["use_cache_branch"] = cname == "decode"
                overrides["attention_mask"] = [case["batch"], case["past"] + case["seq"]]
            if art.endswith("tensorscatter"):
                values = {"write_indices": case["past"], "nonpad_kv_seqlen": case["past"] + case["seq"]}
            entry["cases"][cname] = {
                "case": case,
                "dims": dims,
                "input_values": values,
                "input_shapes": (shapes := input_shapes(facts, dims, overrides)),
                "onnxruntime_run": ort_smoke(path, facts, shapes, case, values),
            }
        if spec["hf"]:
            if spec["hf"] not in hf_cache:
                hf_cache[spec["hf"]] = hf_reference(spec["hf"])
            ref = hf_cache[spec["hf"]]
            entry["hf_model"] = spec["hf"]
            entry["hf"] = {"class": ref["class"], "config": ref["config"], "params": ref["params"]}
            prefill_values = entry["cases"]["prefill"]["input_values"]
            entry["max_abs_diff_vs_hf_16_tokens"] = diff_vs_hf(path, facts, head_dim, spec["hf"], prefill_values)
            for cname in entry["cases"]:
                entry["cases"][cname]["hf_macs"] = ref[f"macs_{cname}"]
        else:
            ts = art.endswith("tensorscatter")
            entry["layer_config"] = LAYER
            entry["formula"] = layer_formula.__doc__.strip()
            entry["formula_params"] = layer_formula(PREFILL, ts)["params"]
            for cname, case in cases.items():
                entry["cases"][cname]["formula_macs"] = layer_formula(case, ts)["macs"]
        artifacts[art] = entry
    import onnxruntime_genai

    doc = {
        "about": "Built by build_llm_samples.py. MACs are multiply-accumulates (FlopCounterMode flops / 2) of "
        "matmul-like ops on the eager Hugging Face model; 'prefill' = batch 1, 128 tokens, no past; 'decode' = "
        "1 token after a 127-token prefill with use_cache=True (only the 1-token step counted). Params count a "
        "tied weight once. initializer_bytes = stored bytes of all initializers (external data included).",
        "versions": {
            "torch": torch.__version__, "transformers": transformers.__version__, "onnx": onnx.__version__,
            "onnxruntime": onnxruntime.__version__, "onnxruntime_genai": onnxruntime_genai.__version__,
            "optimum": _optimum_versions(),
        },
        "artifacts": artifacts,
    }  # fmt: skip
    (HERE / "reference.json").write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")


def _optimum_versions() -> str:
    return os.environ.get("ONNXROOF_OPTIMUM_VERSIONS", "optimum-onnx 0.1.0, optimum 2.1.0, transformers 4.57.6")


# --------------------------------------------------------------------------- driver


STAGES = {"hf": stage_hf, "genai": stage_genai, "ort": stage_ort, "optimum": stage_optimum, "onnx": stage_onnx,
          "reference": stage_reference}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stage", default="all", choices=["all", *STAGES])
    ap.add_argument("--work", type=Path, help="temp folder for HF models and raw exports (default: a new one)")
    ap.add_argument("--optimum-python", default="/work/optimumvenv/bin/python")
    args = ap.parse_args(argv)
    if args.stage in ("onnx", "reference"):  # they read and write only this folder
        STAGES[args.stage](args.work or HERE)
        return 0
    work = args.work or Path(tempfile.mkdtemp(prefix="onnxroof_llm_"))
    if args.stage != "all":
        STAGES[args.stage](work)
        return 0
    for stage in ("hf", "genai", "ort", "onnx"):
        STAGES[stage](work)
    run([args.optimum_python, __file__, "--stage", "optimum", "--work", work])
    stage_reference(work)
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
