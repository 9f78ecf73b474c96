"""Whole-model accuracy: onnxroof on the onnx wheel's "light" models vs independent PyTorch counts.

The light models (``onnx/backend/test/data/light``) make their weights with ``ConstantOfShape`` from int64
``*__SHAPE`` initializers, so the file holds shapes but no weight values. ``reference_architectures`` re-writes
seven of them in PyTorch from their papers; PyTorch's parameter count and ``FlopCounterMode`` give numbers
that onnxroof's totals must reproduce.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

try:  # the PyTorch references need torch (CI installs it); the other checks here run without it
    from reference_architectures import REFERENCES, reference_counts
except ModuleNotFoundError:
    REFERENCES, reference_counts = {}, None

import onnxroof

LIGHT_DIR = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"
ALL_LIGHT = (
    "light_bvlc_alexnet",
    "light_densenet121",
    "light_inception_v1",
    "light_inception_v2",
    "light_resnet50",
    "light_shufflenet",
    "light_squeezenet",
    "light_vgg19",
    "light_zfnet512",
)
WITH_REFERENCE = tuple(REFERENCES)  # the seven with a PyTorch definition
MATMUL_OPS = ("Conv", "Gemm", "MatMul")
PARAMS_RTOL = 0.005
MACS_RTOL = 0.01


def light_path(name: str) -> Path:
    path = LIGHT_DIR / f"{name}.onnx"
    if not path.exists():
        pytest.skip(f"{path} not shipped with this onnx wheel")
    return path


@cache
def analysis_of(name: str) -> onnxroof.Analysis:
    return onnxroof.analyze(light_path(name), platform="xavier")


@pytest.mark.parametrize("name", WITH_REFERENCE)
def test_params_match_pytorch(name: str) -> None:
    ref = reference_counts(name)
    # ONNX stores BatchNorm running mean/var as initializers (PyTorch: buffers), and a non-affine (Caffe)
    # BatchNorm gets an identity scale/bias because ONNX BatchNormalization requires them.
    expected = ref.torch_params + ref.bn_running_stat_elements + ref.bn_onnx_affine_fill_elements
    measured = analysis_of(name).totals.params
    err = abs(measured - expected) / expected
    assert err <= PARAMS_RTOL, (
        f"{name}: onnxroof params {measured:,.0f} vs expected {expected:,} "
        f"(torch params {ref.torch_params:,} + BN running stats {ref.bn_running_stat_elements:,} "
        f"+ BN identity scale/bias {ref.bn_onnx_affine_fill_elements:,}); relative error {err:.4%}"
    )


@pytest.mark.parametrize("name", WITH_REFERENCE)
def test_conv_gemm_matmul_macs_match_flop_counter(name: str) -> None:
    expected = reference_counts(name).conv_linear_macs  # FlopCounterMode FLOPs / 2
    measured = sum(node.macs for node in analysis_of(name).nodes if node.op_type in MATMUL_OPS)
    err = abs(measured - expected) / expected
    assert err <= MACS_RTOL, (
        f"{name}: onnxroof Conv+Gemm+MatMul MACs {measured:,.0f} vs torch FlopCounterMode {expected:,}; "
        f"relative error {err:.4%}"
    )


@pytest.mark.parametrize("name", ALL_LIGHT)
def test_every_node_is_accounted_for(name: str) -> None:
    analysis = analysis_of(name)
    bad = [(n.id, n.op_type, n.state, n.note) for n in analysis.nodes if n.state not in ("costed", "zero", "folded")]
    assert not bad, f"{name}: nodes not costed/zero/folded: {bad[:10]}"
    assert not analysis.unsupported, f"{name}: unsupported ops {dict(analysis.unsupported)}"
    assert analysis.totals.states.get("unsupported", 0) == 0
    assert analysis.totals.states.get("unknown_shape", 0) == 0

    makers = [n for n in analysis.nodes if n.op_type == "ConstantOfShape"]
    assert makers, f"{name}: expected ConstantOfShape weight makers"
    for node in makers:  # weights made from constants cost nothing at run time
        assert node.state == "folded", f"{name}: {node.id} is {node.state}"
        assert node.flops == 0 and node.macs == 0 and node.latency_s == 0, node


def _weight_elements(model: onnx.ModelProto) -> tuple[int, int, int]:
    """(elements of float tensors a node consumes as weights, elements of ``__SHAPE`` vectors, elements of
    all initializers) — counted from the ONNX file alone."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    consumed = {name for node in model.graph.node for name in node.input}
    made = sum(int(np.prod(inits[n.input[0]])) for n in model.graph.node if n.op_type == "ConstantOfShape")
    stored = sum(a.size for k, a in inits.items() if k in consumed and np.issubdtype(a.dtype, np.floating))
    shapes = sum(a.size for k, a in inits.items() if k.endswith("__SHAPE"))
    return made + stored, shapes, sum(a.size for a in inits.values())


def test_resnet50_params_exclude_shape_vectors() -> None:
    path = light_path("light_resnet50")
    model = onnx.load(path)
    weights, shape_vectors, all_initializers = _weight_elements(model)
    assert shape_vectors > 0
    params = analysis_of("light_resnet50").totals.params
    # Counting initializers (what peers report) gives ~2k: the int64 shape vectors plus the few float
    # initializers, and none of the ConstantOfShape-made weights.
    assert params != all_initializers
    assert params == weights, (
        f"onnxroof params {params:,.0f} vs float weights {weights:,} "
        f"(shape vectors {shape_vectors:,}, all initializers {all_initializers:,})"
    )
    assert params != weights + shape_vectors
    for node in analysis_of("light_resnet50").nodes:
        if node.op_type == "ConstantOfShape":  # its only input is an int64 __SHAPE vector
            assert node.params == 0, node


@pytest.mark.parametrize("name", ALL_LIGHT)
def test_params_are_materialised_weights(name: str) -> None:
    weights, _, _ = _weight_elements(onnx.load(light_path(name)))
    assert analysis_of(name).totals.params == weights
