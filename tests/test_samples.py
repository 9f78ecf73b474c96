"""The bundled samples and the Llama-shaped benchmark builder produce valid, executable models."""

from __future__ import annotations

import importlib.util
import itertools
import math
import os
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper, shape_inference

ROOT = Path(__file__).resolve().parent.parent

ort = pytest.importorskip("onnxruntime")


def _load_module(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


build_samples = _load_module("onnxroof_build_samples", ROOT / "samples" / "build_samples.py")
llama = _load_module("onnxroof_llama_shaped", ROOT / "benchmarks" / "llama_shaped.py")

EXPECTED_OUTPUT = {
    "tiny_cnn.onnx": (2, 10),
    "tiny_transformer.onnx": (2, 16, 64),
    "tiny_lstm.onnx": (2, 4),
}


# ------------------------------------------------------------------------------------------------- samples


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return build_samples.build_all(tmp_path_factory.mktemp("samples"), check=False)


@pytest.mark.parametrize("name", sorted(build_samples.SAMPLES))
def test_sample_is_deterministic_and_matches_checked_in(name: str, built: dict[str, Path]) -> None:
    assert built[name].read_bytes() == (ROOT / "samples" / name).read_bytes(), (
        f"samples/{name} is stale: run `python samples/build_samples.py`"
    )
    assert build_samples.SAMPLES[name]().SerializeToString() == built[name].read_bytes()


@pytest.mark.parametrize("name", sorted(build_samples.SAMPLES))
def test_sample_checks_and_runs(name: str) -> None:
    model = onnx.load(ROOT / "samples" / name)
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version <= 10
    assert {o.domain: o.version for o in model.opset_import} == {"": 17}
    outputs = build_samples.run_once(model, batch=2, seq=16)
    assert outputs[0].shape == EXPECTED_OUTPUT[name]
    assert np.isfinite(outputs[0]).all()


def test_samples_have_symbolic_inputs_and_are_small() -> None:
    dims = {}
    for name in build_samples.SAMPLES:
        model = onnx.load(ROOT / "samples" / name)
        (value,) = model.graph.input
        dims[name] = [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
    assert dims == {
        "tiny_cnn.onnx": ["batch", 3, 64, 64],
        "tiny_transformer.onnx": ["batch", "seq"],
        "tiny_lstm.onnx": ["seq", "batch", 16],
    }
    assert sum((ROOT / "samples" / n).stat().st_size for n in build_samples.SAMPLES) < 2_000_000


def test_transformer_reshapes_get_symbolic_shapes() -> None:
    """The Shape/Gather/Unsqueeze/Concat shape tensors propagate: the head-split Reshape is [batch, ?, 4, 16]."""
    model = shape_inference.infer_shapes(onnx.load(ROOT / "samples" / "tiny_transformer.onnx"), data_prop=True)
    shapes = {
        v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.value_info
    }
    reshape = shapes["/encoder.layer.0/attention/Reshape_output_0"]
    assert reshape[0] == "batch" and reshape[2:] == [4, 16]


# ------------------------------------------------------------------------------------------- llama-shaped

SMALL = {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "intermediate": 176, "vocab": 100}


def _bind(model: onnx.ModelProto, **dims: int) -> onnx.ModelProto:
    for value in model.graph.input:
        for d in value.type.tensor_type.shape.dim:
            if d.dim_param in dims:
                d.dim_value = dims[d.dim_param]
    return model


@pytest.fixture(scope="module")
def small_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return llama.build_llama_shaped(tmp_path_factory.mktemp("llama") / "llama_small.onnx", **SMALL)


def test_7b_parameter_count() -> None:
    assert llama.expected_parameter_count() == 6_738_415_616
    assert llama.expected_buffer_elements() == 2 * 4096 * 128


def test_7b_proto_is_built_without_allocating_weights() -> None:
    model, total = llama.build_llama_model("llama.weights")
    assert model.ByteSize() < 2_000_000
    inits = list(model.graph.initializer)
    assert all(t.data_location == TensorProto.EXTERNAL and not t.raw_data for t in inits)
    numel = sum(math.prod(t.dims) for t in inits)
    assert numel == llama.expected_parameter_count() + llama.expected_buffer_elements()
    assert total == 2 * numel  # float16, every tensor size a multiple of 4096 bytes: no padding
    assert sum(n.op_type == "MatMul" for n in model.graph.node) == 32 * 9 + 1


def test_small_llama_structure(small_llama: Path) -> None:
    model = onnx.load(small_llama, load_external_data=False)
    inits = list(model.graph.initializer)
    numel = sum(math.prod(t.dims) for t in inits)
    buffers = llama.expected_buffer_elements(hidden=64, heads=4)
    assert numel == llama.expected_parameter_count(**SMALL) + buffers
    offsets = []
    for t in inits:
        info = {e.key: e.value for e in t.external_data}
        assert info["location"] == "llama_small.weights"
        assert int(info["offset"]) % 4096 == 0
        assert int(info["length"]) == math.prod(t.dims) * 2
        offsets.append((int(info["offset"]), int(info["offset"]) + int(info["length"])))
    offsets.sort()
    assert all(end <= start for (_, end), (start, _) in itertools.pairwise(offsets))
    data = small_llama.with_suffix(".weights")
    assert data.stat().st_size == offsets[-1][1]
    ops = {n.op_type for n in model.graph.node}
    assert {"Expand", "Range", "Sigmoid", "Neg", "ReduceMean", "Where", "Softmax"} <= ops


def test_small_llama_weight_file_is_sparse(small_llama: Path, tmp_path: Path) -> None:
    st = os.stat(small_llama.with_suffix(".weights"))
    assert st.st_size > 0
    if st.st_blocks * 512 >= st.st_size // 4:
        probe = tmp_path / "probe"
        with open(probe, "wb") as f:
            f.truncate(1 << 24)
        if os.stat(probe).st_blocks * 512 >= 1 << 22:
            pytest.skip("this filesystem does not support sparse files")
    assert st.st_blocks * 512 < st.st_size // 4


def test_small_llama_checks_and_infers(small_llama: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = onnx.load(small_llama, load_external_data=False)
    # The checker resolves external-data locations of an in-memory proto against the working directory.
    monkeypatch.chdir(small_llama.parent)
    onnx.checker.check_model(model)
    inferred = shape_inference.infer_shapes(_bind(model, batch=1, seq=8), strict_mode=True, data_prop=True)
    (logits,) = inferred.graph.output
    assert [d.dim_value for d in logits.type.tensor_type.shape.dim] == [1, 8, 100]


def _reference_llama(weights: dict[str, np.ndarray], ids: np.ndarray, cfg: dict[str, int]) -> np.ndarray:
    """HuggingFace Llama forward (no cache) in NumPy float32."""
    heads, kv_heads, hidden = cfg["heads"], cfg["kv_heads"], cfg["hidden"]
    d = hidden // heads
    batch, seq = ids.shape

    def rms(x: np.ndarray, w: np.ndarray) -> np.ndarray:
        return w * (x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5))

    def rot(x: np.ndarray) -> np.ndarray:
        return np.concatenate([-x[..., d // 2 :], x[..., : d // 2]], axis=-1)

    cos = weights["model.rotary_emb.cos_cached"][:seq]
    sin = weights["model.rotary_emb.sin_cached"][:seq]
    mask = np.triu(np.full((seq, seq), np.finfo(np.float32).min, np.float32), 1)
    x = weights["model.embed_tokens.weight"][ids]
    for i in range(cfg["layers"]):
        p = f"model.layers.{i}."
        h = rms(x, weights[p + "input_layernorm.weight"])
        q = (h @ weights[p + "self_attn.q_proj.weight"]).reshape(batch, seq, heads, d).transpose(0, 2, 1, 3)
        k = (h @ weights[p + "self_attn.k_proj.weight"]).reshape(batch, seq, kv_heads, d).transpose(0, 2, 1, 3)
        v = (h @ weights[p + "self_attn.v_proj.weight"]).reshape(batch, seq, kv_heads, d).transpose(0, 2, 1, 3)
        q, k = q * cos + rot(q) * sin, k * cos + rot(k) * sin
        k, v = np.repeat(k, heads // kv_heads, axis=1), np.repeat(v, heads // kv_heads, axis=1)
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d) + mask
        e = np.exp(s - s.max(-1, keepdims=True))
        ctx = (e / e.sum(-1, keepdims=True)) @ v
        x = x + ctx.transpose(0, 2, 1, 3).reshape(batch, seq, hidden) @ weights[p + "self_attn.o_proj.weight"]
        h = rms(x, weights[p + "post_attention_layernorm.weight"])
        gate = h @ weights[p + "mlp.gate_proj.weight"]
        act = gate / (1 + np.exp(-gate)) * (h @ weights[p + "mlp.up_proj.weight"])
        x = x + act @ weights[p + "mlp.down_proj.weight"]
    return rms(x, weights["model.norm.weight"]) @ weights["lm_head.weight"]


@pytest.mark.parametrize("dtype", [TensorProto.FLOAT16, TensorProto.FLOAT], ids=["float16", "float32"])
def test_small_llama_runs_with_real_weights(tmp_path: Path, dtype: int) -> None:
    path = llama.build_llama_shaped(tmp_path / "llama_real.onnx", **SMALL, dtype=dtype)
    llama.fill_weights(path, seed=0, std=0.1)
    data = path.with_suffix(".weights")
    assert data.stat().st_blocks * 512 >= data.stat().st_size // 2  # really written
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ids = np.random.default_rng(1).integers(0, SMALL["vocab"], (2, 16), dtype=np.int64)
    (logits,) = session.run(None, {"input_ids": ids})
    assert logits.shape == (2, 16, SMALL["vocab"])
    assert np.isfinite(logits).all()
    if dtype == TensorProto.FLOAT:
        model = onnx.load(path)
        weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        expected = _reference_llama(weights, ids, SMALL)
        np.testing.assert_allclose(logits, expected, rtol=1e-3, atol=1e-4)
        # causal: changing the last token does not change earlier positions
        ids2 = ids.copy()
        ids2[:, -1] = (ids2[:, -1] + 1) % SMALL["vocab"]
        (logits2,) = session.run(None, {"input_ids": ids2})
        np.testing.assert_allclose(logits2[:, :-1], logits[:, :-1], rtol=1e-5, atol=1e-6)


def test_llama_command_line(tmp_path: Path) -> None:
    assert llama.main([str(tmp_path), "--layers", "1"]) == 0
    model = onnx.load(tmp_path / "llama_shaped.onnx", load_external_data=False)
    numel = sum(math.prod(t.dims) for t in model.graph.initializer)
    assert numel == llama.expected_parameter_count(layers=1) + llama.expected_buffer_elements()
    assert (tmp_path / "llama_shaped.weights").stat().st_size == 2 * numel
