"""The shipped LLM / transformer artifacts (samples/llm) are intact and match their reference.json.

These files come from real exporters (ONNX Runtime GenAI builder, ONNX Runtime's transformer optimizer,
Optimum, onnx.helper at opset 23/24), rebuilt by samples/llm/build_llm_samples.py in its own virtual
environments. This test needs neither torch nor the exporters: it checks the files against the facts the
build script recorded (op types and counts, inputs, stored initializer bytes, the dims each case binds).
It asserts no onnxroof costs: those are for the rules that cost these ops.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType

import onnx
import pytest
from onnx import TensorProto, numpy_helper

LLM = Path(__file__).resolve().parent.parent / "samples" / "llm"
REFERENCE = json.loads((LLM / "reference.json").read_text())
ARTIFACTS = REFERENCE["artifacts"]


def _build_module() -> ModuleType:
    name = "build_llm_samples"
    spec = importlib.util.spec_from_file_location(name, LLM / "build_llm_samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _model(art: str) -> onnx.ModelProto:
    return onnx.load(LLM / ARTIFACTS[art]["files"][0], load_external_data=False)


def _graphs(graph: onnx.GraphProto):
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _graphs(attr.g)
            for sub in attr.graphs:
                yield from _graphs(sub)


def _key(node: onnx.NodeProto) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"


def _stored_bytes(t: TensorProto) -> int:
    if t.data_location == TensorProto.EXTERNAL:
        return int({e.key: e.value for e in t.external_data}["length"])
    return len(t.raw_data) if t.raw_data else int(numpy_helper.to_array(t).nbytes)


def _value_info(v: onnx.ValueInfoProto) -> dict:
    t = v.type.tensor_type
    dims = [d.dim_param if d.HasField("dim_param") else d.dim_value for d in t.shape.dim]
    return {"name": v.name, "dtype": TensorProto.DataType.Name(t.elem_type), "shape": dims}


def test_reference_lists_every_exporter():
    exporters = " ".join(a["exporter"] for a in ARTIFACTS.values())
    for needle in ("onnxruntime-genai", "onnxruntime.transformers.optimizer", "optimum", "onnx.helper"):
        assert needle in exporters
    assert set(ARTIFACTS) == set(_build_module().ARTIFACTS)


@pytest.mark.parametrize("art", sorted(ARTIFACTS))
def test_files_exist_and_load(art):
    for f in ARTIFACTS[art]["files"]:
        assert (LLM / f).is_file(), f
    model = _model(art)
    assert model.ir_version == ARTIFACTS[art]["ir_version"]
    assert {(o.domain or "ai.onnx"): o.version for o in model.opset_import} == ARTIFACTS[art]["opset_import"]


@pytest.mark.parametrize("art", sorted(ARTIFACTS))
def test_ops_match_reference(art):
    model = _model(art)
    ref = ARTIFACTS[art]
    assert dict(Counter(_key(n) for n in model.graph.node)) == ref["ops"]
    assert dict(Counter(_key(n) for g in _graphs(model.graph) for n in g.node)) == ref["ops_with_subgraphs"]
    assert len(model.graph.node) == ref["node_count"]


@pytest.mark.parametrize("art", sorted(ARTIFACTS))
def test_inputs_outputs_match_reference(art):
    model = _model(art)
    assert [_value_info(v) for v in model.graph.input] == ARTIFACTS[art]["inputs"]
    assert [_value_info(v) for v in model.graph.output] == ARTIFACTS[art]["outputs"]


@pytest.mark.parametrize("art", sorted(ARTIFACTS))
def test_initializer_bytes_match_reference_and_data_files(art):
    model = _model(art)
    ref = ARTIFACTS[art]
    inits = [t for g in _graphs(model.graph) for t in g.initializer]
    assert sum(_stored_bytes(t) for t in inits) == ref["initializer_bytes"]
    assert sum(math.prod(t.dims) for t in inits) == ref["initializer_elements"]
    # External data lies within the .data file shipped beside the model.
    ends: dict[str, int] = {}
    for t in inits:
        if t.data_location == TensorProto.EXTERNAL:
            ext = {e.key: e.value for e in t.external_data}
            end = int(ext.get("offset", 0)) + int(ext["length"])
            ends[ext["location"]] = max(ends.get(ext["location"], 0), end)
    model_dir = (LLM / ref["files"][0]).parent
    for location, end in ends.items():
        assert (model_dir / location).stat().st_size >= end


@pytest.mark.parametrize("art", sorted(a for a, r in ARTIFACTS.items() if "com.microsoft::MatMulNBits" in r["ops"]))
def test_int4_stored_bytes_follow_the_block_layout(art):
    """Each MatMulNBits stores N·⌈K/bs⌉·bs·bits/8 packed bytes, N·⌈K/bs⌉ fp32 scales, zero points if any;
    the quantized weights recorded in reference.json are those bytes (plus GatherBlockQuantized's)."""
    model = _model(art)
    inits = {t.name: t for t in model.graph.initializer}
    quantized: set[str] = set()
    for node in model.graph.node:
        if node.op_type not in ("MatMulNBits", "GatherBlockQuantized"):
            continue
        quantized.update(i for i in node.input if i in inits)
        if node.op_type == "MatMulNBits":
            a = {x.name: onnx.helper.get_attribute_value(x) for x in node.attribute}
            blocks = -(-a["K"] // a["block_size"])
            assert a["bits"] == 4
            assert _stored_bytes(inits[node.input[1]]) == a["N"] * blocks * a["block_size"] * a["bits"] // 8
            assert _stored_bytes(inits[node.input[2]]) == a["N"] * blocks * 4
    assert sum(_stored_bytes(inits[i]) for i in quantized) == ARTIFACTS[art]["quantized_weight_bytes"] > 0


@pytest.mark.parametrize("art", sorted(ARTIFACTS))
def test_cases_bind_every_declared_dim(art):
    ref = ARTIFACTS[art]
    model = _model(art)
    declared = {d for v in model.graph.input for d in _value_info(v)["shape"] if isinstance(d, str)}
    assert set(ref["cases"]) == ({"prefill"} if art.startswith("ort_") else {"prefill", "decode"})
    for name, case in ref["cases"].items():
        assert declared <= set(case["dims"]), (name, declared - set(case["dims"]))
        assert set(case["dims"]) <= set(ref["dim_params"])
        for inp in ref["inputs"]:
            bound = [case["dims"][d] if isinstance(d, str) else d for d in inp["shape"]]
            shape = case["input_shapes"][inp["name"]]
            if bound != shape:  # the merged Optimum decoder's attention_mask (declared sequence_length)
                assert (art, inp["name"], name) == ("optimum_llama_merged", "attention_mask", "decode")
                assert shape == [1, case["case"]["past"] + case["case"]["seq"]]
        assert case["onnxruntime_run"] == "ok"
        macs = case.get("hf_macs") or case.get("formula_macs")
        assert macs["total"] > 0


def test_expected_exporter_ops_are_present():
    ops = {a: set(r["ops_with_subgraphs"]) for a, r in ARTIFACTS.items()}
    for art in ("genai_llama_int4", "genai_qwen2_int4", "genai_phi3_int4", "genai_llama_fp32"):
        assert {"com.microsoft::GroupQueryAttention", "SimplifiedLayerNormalization"} <= ops[art]
        assert "com.microsoft::SkipSimplifiedLayerNormalization" in ops[art]
    for art in ("genai_llama_int4", "genai_qwen2_int4", "genai_phi3_int4"):
        assert "com.microsoft::MatMulNBits" in ops[art]
    assert "com.microsoft::GatherBlockQuantized" in ops["genai_qwen2_int4"]  # tied int4 embedding
    assert {"com.microsoft::Attention", "com.microsoft::EmbedLayerNormalization"} <= ops["ort_bert_optimized"]
    assert "com.microsoft::SkipLayerNormalization" in ops["ort_bert_optimized"]
    assert {"com.microsoft::SkipLayerNormalization", "com.microsoft::FastGelu"} <= ops["ort_gpt2_optimized"]
    assert set(ARTIFACTS["optimum_llama_merged"]["ops"]) == {"If"}
    assert {"RMSNormalization", "RotaryEmbedding", "Attention"} <= ops["onnx_decoder_layer_opset23"]
    assert "TensorScatter" in ops["onnx_decoder_layer_opset24_tensorscatter"]


def test_optimum_mask_dims_and_merged_branch_input():
    with_past = {i["name"]: i for i in ARTIFACTS["optimum_llama_with_past"]["inputs"]}
    assert with_past["attention_mask"]["shape"] == ["batch_size", "past_sequence_length + sequence_length"]
    merged = {i["name"]: i for i in ARTIFACTS["optimum_llama_merged"]["inputs"]}
    assert merged["use_cache_branch"]["dtype"] == "BOOL"
    cases = ARTIFACTS["optimum_llama_merged"]["cases"]
    assert cases["prefill"]["input_values"] == {"use_cache_branch": False}
    assert cases["decode"]["input_values"] == {"use_cache_branch": True}


@pytest.mark.parametrize("art", sorted(ARTIFACTS))
def test_onnx_checker_verdict_is_as_recorded(art):
    """GenAI files use SimplifiedLayerNormalization in the default domain: ORT runs them, the checker
    rejects them. Every other file passes the checker."""
    path = LLM / ARTIFACTS[art]["files"][0]
    try:
        onnx.checker.check_model(str(path))
        verdict = "ok"
    except onnx.checker.ValidationError as exc:
        verdict = str(exc)
    assert (verdict == "ok") == (ARTIFACTS[art]["onnx_checker"] == "ok")
    assert (verdict == "ok") == (not art.startswith("genai_"))
    if art.startswith("genai_"):
        assert "SimplifiedLayerNormalization" in verdict


def test_decoder_layers_rebuild_byte_for_byte(tmp_path):
    """The two onnx.helper files need only onnx and numpy: rebuilt here, they match the shipped bytes."""
    build = _build_module()
    build.stage_onnx(tmp_path, out=tmp_path)
    for art in ("onnx_decoder_layer_opset23", "onnx_decoder_layer_opset24_tensorscatter"):
        name = ARTIFACTS[art]["files"][0]
        assert (tmp_path / name).read_bytes() == (LLM / name).read_bytes(), name


@pytest.mark.parametrize("art", ["onnx_decoder_layer_opset23", "onnx_decoder_layer_opset24_tensorscatter"])
def test_decoder_layer_params_formula_matches_its_weights(art):
    """Formula params = every float initializer but the cos/sin caches (constants, not parameters)."""
    model = _model(art)
    weights = [
        t
        for t in model.graph.initializer
        if t.data_type == TensorProto.FLOAT and t.name not in ("cos_cache", "sin_cache")
    ]
    assert sum(math.prod(t.dims) for t in weights) == ARTIFACTS[art]["formula_params"]


def test_total_size_stays_small():
    total = sum(f.stat().st_size for f in LLM.rglob("*") if f.is_file() and f.suffix in (".onnx", ".data"))
    assert total < 20 * 1024 * 1024
