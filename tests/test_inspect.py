"""``onnxroof inspect``: what a model file holds, read without its weights, checked against counts taken
independently from the file (onnx.load with the weights, numpy)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_cli import _assert_one_error_line, invoke

from onnxroof.studies.inspection import inspect_model

ROOT = Path(__file__).resolve().parents[1]
CNN = ROOT / "samples" / "tiny_cnn.onnx"
GENAI = ROOT / "samples" / "llm" / "genai_llama_fp32" / "model.onnx"
BERT = ROOT / "samples" / "llm" / "ort_bert_optimized.onnx"


def test_inputs_dims_and_stored_tensors_of_a_cnn() -> None:
    found = inspect_model(CNN)
    assert [(t.name, t.dtype, t.shape) for t in found.inputs] == [("image", "float32", ("batch", 3, 64, 64))]
    assert [(t.name, t.shape) for t in found.outputs] == [("probs", ("batch", 10))]
    assert found.symbols == {"batch": ("input 'image' axis 0",)}
    full = onnx.load(str(CNN))
    stored = [numpy_helper.to_array(t) for t in full.graph.initializer]
    constants = [n for n in full.graph.node if n.op_type == "Constant"]
    stored += [numpy_helper.to_array(a.t) for n in constants for a in n.attribute if a.name == "value"]
    assert found.parameters == sum(a.size for a in stored)
    assert found.weight_bytes == sum(a.nbytes for a in stored)
    assert sum(count for _, _, count in found.op_types) == found.nodes == len(full.graph.node)
    counts = [count for _, _, count in found.op_types]
    assert counts == sorted(counts, reverse=True)
    assert found.external == () and found.custom_domains == {} and found.kv_cache is None
    assert found.opsets == {"": 17}


def test_genai_decoder_cache_external_data_and_custom_domain() -> None:
    found = inspect_model(GENAI)
    cache = found.kv_cache
    assert cache is not None
    # 2 layers, GQA with 2 kv heads, head size 32, float32: 2 (k, v) · 2 layers · 2 heads · 32 · 4 B per token
    assert (cache.layers, cache.kv_heads, cache.head_dim, cache.dtype) == (2, 2, 32, "float32")
    assert cache.bytes_per_token == 2 * 2 * 2 * 32 * 4
    assert cache.past[0] == "past_key_values.0.key" and cache.present[0] == "present.0.key"
    assert cache.roles["past"] == "past_sequence_length" and cache.roles["new"] == "sequence_length"
    assert "GroupQueryAttention" in found.custom_domains["com.microsoft"]
    assert found.opsets["com.microsoft"] == 1
    model = onnx.load(str(GENAI), load_external_data=False)
    external = [t for t in model.graph.initializer if t.data_location == TensorProto.EXTERNAL]
    [data] = found.external
    assert (data.location, data.tensors, data.exists) == ("model.onnx.data", len(external), True)
    lengths = [int(next(e.value for e in t.external_data if e.key == "length")) for t in external]
    assert data.bytes == sum(lengths)


def _external_model(folder: Path) -> Path:
    """A MatMul whose 16×8 float32 weight lies in ``w.bin`` beside the model; an If with a one-node body."""
    weight = numpy_helper.from_array(np.ones((16, 8), np.float32), "w")
    body = helper.make_graph([helper.make_node("Identity", ["y"], ["z"])], "body", [], [_vi("z", (1, 8))])
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "w"], ["y"]),
            helper.make_node("If", ["c"], ["out"], then_branch=body, else_branch=body),
        ],
        "g",
        [_vi("x", ("n", 16)), helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [_vi("out", (1, 8))],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = folder / "ext.onnx"
    onnx.save(model, str(path), save_as_external_data=True, location="w.bin", size_threshold=0)
    return path


def _vi(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))


def test_external_file_listed_and_a_missing_one_said(tmp_path: Path) -> None:
    path = _external_model(tmp_path)
    found = inspect_model(path)
    [data] = found.external
    assert (data.location, data.tensors, data.bytes, data.exists) == ("w.bin", 1, 16 * 8 * 4, True)
    assert found.parameters == 16 * 8 and found.weight_bytes == 16 * 8 * 4
    assert found.subgraph_nodes == 2  # the If's two one-node bodies
    assert found.symbols == {"n": ("input 'x' axis 0",)}
    (tmp_path / "w.bin").unlink()
    assert inspect_model(path).external[0].exists is False
    result = invoke("inspect", path)
    assert result.exit_code == 0, result.output
    assert "w.bin (1 tensors, 512 B, MISSING)" in result.stdout


def test_cli_table_names_what_to_bind_and_the_cache() -> None:
    result = invoke("inspect", GENAI)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Dims to bind (--dim NAME=VALUE)" in out and "past_sequence_length" in out
    assert "2 layers × key and value, 2 kv heads × head size 32, float32: 1.02 kB/token" in out
    assert "com.microsoft::GroupQueryAttention" in out
    assert "model.onnx.data (" in out


def test_cli_json_is_the_inspection() -> None:
    result = invoke("inspect", BERT, "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document == json.loads(json.dumps(inspect_model(BERT).to_dict()))
    assert document["kv_cache"] is None and document["kv_cache_note"].startswith("none")
    assert {"batch_size", "sequence_length"} <= set(document["symbols"])
    assert "EmbedLayerNormalization" in document["custom_domains"]["com.microsoft"]
    assert document["inputs"][0]["shape"] == ["batch_size", "sequence_length"]


@pytest.mark.parametrize("kind", ["missing", "folder", "garbage"])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "bad.onnx"
    if kind == "folder":
        path.mkdir()
    elif kind == "garbage":
        path.write_bytes(b"\xff" * 64)
    _assert_one_error_line(invoke("inspect", path), ("bad.onnx",))


def test_cli_table_gives_a_binding_to_copy() -> None:
    result = invoke("inspect", CNN)
    assert result.exit_code == 0, result.output
    assert "batch  image[0]" in result.stdout
    assert "e.g. --dim batch=1, or a whole input: --shape image=1x3x64x64" in result.stdout
    # what it suggests is accepted by report
    assert invoke("report", CNN, "--shape", "image=1x3x64x64", "-f", "json").exit_code == 0


def test_packed_low_bit_weights_are_said() -> None:
    int4 = ROOT / "samples" / "llm" / "genai_llama_int4" / "model.onnx"
    found = inspect_model(int4)
    model = onnx.load(str(int4), load_external_data=False)
    nbits = [n for n in model.graph.node if n.op_type == "MatMulNBits"]
    assert found.packed == len({n.input[1] for n in nbits}) > 0
    assert inspect_model(GENAI).packed == 0
    result = invoke("inspect", int4)
    assert f"({found.packed} hold packed low-bit weights" in result.stdout
