"""What a model file is, for the cache: its content sha256, its symbolic input dims and the identity of its
external data files — without reading a weight byte beyond the .onnx file itself.

The .onnx file is read once per change (its size or mtime): hashed, and parsed without external data for its
symbols and external locations; :class:`~onnxroof.fleet.cache.ResultCache` remembers the answer. External data
files are identified by (location, size, mtime_ns) from ``stat``; a missing one is (location, -1, -1).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

import onnx

from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.protos import all_graphs
from onnxroof.fleet.cache import ResultCache
from onnxroof.load.dims import symbolic_dims
from onnxroof.load.reader import MAX_MODEL_BYTES


@frozen_dataclass(slots=True)
class ModelIdentity:
    """A model file as the cache sees it. ``readable`` is False when the file does not parse as ONNX (the
    analysis then reports why)."""

    path: str
    sha256: str
    symbols: tuple[str, ...]
    external: tuple[tuple[str, int, int], ...]
    readable: bool = True


def identify(path: str, cache: ResultCache) -> ModelIdentity:
    """The identity of the model at ``path``; :class:`OSError` when it cannot be read here."""
    status = os.stat(path)
    if not stat.S_ISREG(status.st_mode):  # a FIFO would block, /dev/zero never end
        raise OSError(errno.EINVAL, "not a regular file", path)
    if status.st_size > MAX_MODEL_BYTES:
        raise OSError(errno.EFBIG, "larger than any ONNX protobuf can be", path)
    known = cache.file_facts(os.path.abspath(path), status.st_size, status.st_mtime_ns)
    if known is None:
        data = Path(path).read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        facts = _facts(data)
        cache.remember_file(os.path.abspath(path), status.st_size, status.st_mtime_ns, sha, facts)
    else:
        sha, facts = known
    base = Path(path).parent
    external = tuple((location, *_stat(base / location)) for location in facts["external"])
    return ModelIdentity(path, sha, tuple(facts["symbols"]), external, facts["readable"])


def _facts(data: bytes) -> dict:
    try:
        model = onnx.load_model_from_string(data)
    except Exception:  # protobuf raises DecodeError and others on bad bytes: the analysis says why
        return {"symbols": [], "external": [], "readable": False}
    return {"symbols": sorted(symbolic_dims(model)), "external": _external_locations(model), "readable": True}


def _external_locations(model: onnx.ModelProto) -> list[str]:
    found: set[str] = set()
    for graph in all_graphs(model.graph):
        tensors = list(graph.initializer)
        tensors += [a.t for node in graph.node for a in node.attribute if a.type == onnx.AttributeProto.TENSOR]
        for tensor in tensors:
            if tensor.data_location == onnx.TensorProto.EXTERNAL:
                found.update(e.value for e in tensor.external_data if e.key == "location")
    return sorted(found)


def _stat(path: Path) -> tuple[int, int]:
    try:
        status = path.stat()
    except (OSError, ValueError):  # ValueError: a NUL byte in the location (the analysis names it)
        return (-1, -1)
    return (status.st_size, status.st_mtime_ns)
