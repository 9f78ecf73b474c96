"""Huge values in a model or a binding: no hang, no memory that grows with an attribute's or a dim's value.

Each test is one mutation the fuzz campaign of issue 25 found (a bit flipped in a dim or an attribute), built
here from the seed model: the run ends in seconds with a result or one clear line.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import numpy_helper

import onnxroof
from onnxroof.load.dims import bind_dims
from onnxroof.load.shapes import DATA_PROP_ELEMENTS, large_integer_input
from onnxroof.load.tied import _is_candidate, tied_copies

ROOT = Path(__file__).resolve().parent.parent
GENAI_DIMS = {
    "batch_size": 1,
    "sequence_length": 16,
    "past_sequence_length": 0,
    "total_sequence_length": 16,
    "kv_cache_dim": 64,
}
LIGHT_DIR = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"


# ------------------------------------------------------------------------- LRN over a huge channel count
def test_lrn_after_a_conv_with_a_huge_channel_count_ends(tmp_path: Path) -> None:
    # One flipped bit in the shape vector of light_inception_v1's first weight (64 → 2^40 + 64 filters): the
    # LRN behind it has 2^40 + 64 channels, which its rule once summed one channel at a time.
    model = onnx.load(LIGHT_DIR / "light_inception_v1.onnx")
    shape = next(t for t in model.graph.initializer if t.name == "conv1/7x7_s2_w_0__SHAPE")
    dims = numpy_helper.to_array(shape).copy()
    dims[0] += 2**40
    shape.CopyFrom(numpy_helper.from_array(dims, shape.name))
    path = tmp_path / "inception_flipped.onnx"
    onnx.save(model, path)
    analysis = onnxroof.analyze(path)
    lrn = next(n for n in analysis.nodes if n.op_type == "LRN")
    assert lrn.flops > 2 * 5 * 2**40  # 2 FLOPs per window element, windows of 5 channels


# ------------------------------------------------------------------- an initializer with dims of 2^62
def _external(name: str, dims: list[int]) -> onnx.TensorProto:
    tensor = onnx.TensorProto(name=name, data_type=onnx.TensorProto.FLOAT, dims=dims)
    tensor.data_location = onnx.TensorProto.EXTERNAL
    for key, value in (("location", "model.onnx.data"), ("offset", "0"), ("length", "65536")):
        tensor.external_data.add(key=key, value=value)
    return tensor


@pytest.mark.parametrize("dims", [[2**62, 32], [512, 2**62], [2**62, 2**62]])
def test_initializers_too_large_for_int64_are_never_tied_candidates(dims: list[int]) -> None:
    # GenAI's rotary sin_cache and cos_cache [512, 32] with one dim flipped to 2^62: their element count passes
    # int64, so no sample position can be drawn ("high is out of bounds for int64" before).
    graph = onnx.helper.make_graph([], "g", [], [], [_external("cos_cache", dims), _external("sin_cache", dims)])
    assert tied_copies(onnx.helper.make_model(graph), None) == {}
    assert not _is_candidate(_external("sin_cache", dims))
    assert _is_candidate(_external("sin_cache", [2**31, 2**31]))  # huge but countable: still sampled


def test_genai_rotary_caches_with_dims_of_2_to_the_62_analyze(tmp_path: Path) -> None:
    source = ROOT / "samples" / "llm" / "genai_llama_int4"
    model = onnx.load(source / "model.onnx", load_external_data=False)
    for tensor in model.graph.initializer:
        if tensor.name in ("sin_cache", "cos_cache"):
            tensor.dims[0] = 2**62
    onnx.save(model, tmp_path / "model.onnx")
    shutil.copy(source / "model.onnx.data", tmp_path)
    analysis = onnxroof.analyze(tmp_path / "model.onnx", dims=GENAI_DIMS)
    assert analysis.totals.unfused.flops > 0


# ------------------------------------------------------------------------- a dim bound to a huge value
_BOUNDED_RUN = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1536 * 2**20, 1536 * 2**20))
import onnxroof
dims = dict(batch_size=2**40, sequence_length=16, past_sequence_length=0, total_sequence_length=16, kv_cache_dim=64)
analysis = onnxroof.analyze(sys.argv[1], dims=dims)
print(analysis.totals.unfused.flops)
print(next(w for w in analysis.warnings if "without data propagation" in w))
"""


def test_a_dim_bound_to_2_to_the_40_needs_no_memory_that_grows_with_it() -> None:
    # ONNX's data propagation keeps an int64 input's values as shape dims: attention_mask [2^40, 16] grew
    # inference to gigabytes. Without it the run fits well under 1.5 GB of address space.
    model = ROOT / "samples" / "llm" / "genai_llama_int4" / "model.onnx"
    done = subprocess.run(
        [sys.executable, "-c", _BOUNDED_RUN, str(model)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    flops, warning = done.stdout.splitlines()
    assert float(flops) > 2**40 * 4e7  # ≈ 4.7e7 FLOPs per sequence of 16 tokens
    assert "input 'input_ids' holds 17,592,186,044,416 integer elements" in warning


def test_small_integer_inputs_keep_data_propagation() -> None:
    model = onnx.load(ROOT / "samples" / "llm" / "genai_llama_int4" / "model.onnx", load_external_data=False)
    bind_dims(model, {**GENAI_DIMS, "batch_size": DATA_PROP_ELEMENTS // 16})
    assert large_integer_input(model) is None
    model = onnx.load(ROOT / "samples" / "llm" / "genai_llama_int4" / "model.onnx", load_external_data=False)
    bind_dims(model, {**GENAI_DIMS, "batch_size": DATA_PROP_ELEMENTS // 16 + 1})
    assert large_integer_input(model) == ("input_ids", DATA_PROP_ELEMENTS + 16)
