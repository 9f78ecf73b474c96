"""Tied weights stored twice count once (onnxroof.load.tied): a copy or transposed copy of an initializer is
found by sampling values, never by reading whole weights; distinct or all-zero weights are never tied."""

from __future__ import annotations

import errno
import os
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


def _sparse_external(tmp_path: Path, holes: bool) -> onnx.ModelProto:
    """wte and its transposed copy as external data, in a file whose weight bytes are a hole (written by
    truncating to size, as a sparse weight file is) or the real values."""
    model = _model(wte=EMBED, lm_head=EMBED.T.copy())
    path = tmp_path / "m.onnx"
    onnx.save(model, path, save_as_external_data=True, location="m.data", size_threshold=0)
    if holes:
        data = tmp_path / "m.data"
        size = data.stat().st_size
        data.unlink()
        with open(data, "wb") as handle:
            handle.truncate(size)
    return onnx.load(path, load_external_data=False)


def _reports_holes(path: Path) -> bool:
    """Whether ``path``, which starts with a hole, is reported so by ``lseek(SEEK_DATA)``."""
    if not hasattr(os, "SEEK_DATA"):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_DATA) > 0
    except OSError as exc:
        return exc.errno == errno.ENXIO
    finally:
        os.close(fd)


def test_weights_in_a_hole_of_a_sparse_file_are_inconclusive_without_being_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hole reads as zeros (inconclusive, never tied); where the file system reports holes, no element is read."""
    import io

    from onnxroof.load import tied

    model = _sparse_external(tmp_path, holes=True)
    if not _reports_holes(tmp_path / "m.data"):
        pytest.skip("this file system does not report holes")
    reads: list[int] = []
    original = io.FileIO.read

    class Counting(io.FileIO):
        def read(self, size: int = -1) -> bytes:
            reads.append(size)
            return original(self, size)

    def counting_open(path: Path, mode: str, buffering: int) -> io.FileIO:
        assert buffering == 0
        return Counting(path, mode)

    monkeypatch.setattr(tied, "open", counting_open, raising=False)
    assert tied_copies(model, tmp_path) == {}
    assert reads == []
    assert tied_copies(_sparse_external(tmp_path, holes=False), tmp_path) == {"lm_head": "wte"}
    assert len(reads) == 2 * tied.SAMPLES  # each of the pair sampled at every position: data, not a hole


def test_holds_data_tells_a_hole_from_data_and_the_end_of_the_file(tmp_path: Path) -> None:
    from onnxroof.load.tied import _holds_data

    path = tmp_path / "f"
    with open(path, "wb") as handle:
        handle.truncate(1 << 20)  # a 1 MiB hole
        handle.seek(1 << 20)
        handle.write(b"\x01" * 4096)  # then 4 KiB of data
    if not _reports_holes(path):
        pytest.skip("this file system does not report holes")
    with open(path, "rb", buffering=0) as handle:
        assert not _holds_data(handle, 0, 1 << 19)
        assert _holds_data(handle, 0, (1 << 20) + 1)  # reaches the data
        assert _holds_data(handle, 1 << 20, 16)
        assert not _holds_data(handle, (1 << 20) + 8192, 16)  # past the end: nothing to read
        assert _holds_data(handle, 1 << 64, 16)  # an offset lseek cannot take: left to the reads, no error
