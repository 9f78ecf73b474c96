"""Tied weights stored twice count once (onnxroof.load.tied): a copy or transposed copy of an initializer is
found by sampling values, never by reading whole weights; distinct or all-zero weights are never tied."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxroof.load.tied import tied_copies

RNG = np.random.default_rng(7)
EMBED = RNG.standard_normal((100, 64)).astype(np.float32)


def _model(**weights: np.ndarray) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(value, name) for name, value in weights.items()]
    graph = helper.make_graph(
        [], "g", [], [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in weights], inits
    )
    return helper.make_model(graph)


def test_a_transposed_copy_is_tied_to_the_original() -> None:
    model = _model(wte=EMBED, lm_head=EMBED.T.copy(), other=RNG.standard_normal((64, 100)).astype(np.float32))
    assert tied_copies(model, None) == {"lm_head": "wte"}


def test_a_plain_copy_is_tied() -> None:
    assert tied_copies(_model(a=EMBED, b=EMBED.copy()), None) == {"b": "a"}


@pytest.mark.parametrize("other", [RNG.standard_normal((64, 100)).astype(np.float32), np.zeros((64, 100), np.float32)])
def test_distinct_or_zero_weights_are_not_tied(other: np.ndarray) -> None:
    zero = np.zeros_like(EMBED)
    assert tied_copies(_model(wte=EMBED, lm_head=other), None) == {}
    assert tied_copies(_model(a=zero, b=other), None) == {}


def test_one_differing_value_at_a_sampled_position_unties(tmp_path: Path) -> None:
    """The samples are the evidence: a copy differing at any sampled position is not tied."""
    from onnxroof.load.tied import _positions

    changed = EMBED.T.copy()
    i, j = _positions(100, 64)[-1]
    changed[j, i] += 1.0
    assert tied_copies(_model(wte=EMBED, lm_head=changed), None) == {}


def test_external_data_is_sampled_in_place(tmp_path: Path) -> None:
    model = _model(wte=EMBED, lm_head=EMBED.T.copy())
    path = tmp_path / "m.onnx"
    onnx.save(model, path, save_as_external_data=True, location="m.data", size_threshold=0)
    loaded = onnx.load(path, load_external_data=False)
    assert tied_copies(loaded, tmp_path) == {"lm_head": "wte"}
    assert tied_copies(loaded, None) == {}  # no folder to read from: nothing is claimed
