"""Tied weights stored twice: an exporter that folds ``Transpose(embedding)`` for a tied lm_head writes a second
initializer holding the same values (ORT's transformer optimizer on GPT-2: ``wte`` [V, H] for the Gather and
``onnx::MatMul_591`` [H, V] for the lm_head). PyTorch counts a tied weight once; so does onnxroof.

Only the values can tell a tied copy from an untied lm_head of the same shape (Llama-2 has one), and the whole
weights are never read. So a pair of float initializers whose dims are equal or transposed (2-D, at least
:data:`MIN_ELEMENTS` elements, the same dtype) is compared at :data:`SAMPLES` positions spread over it (a fixed
pseudo-random sample): ``a[i, j]`` against ``b[i, j]`` (a copy) or ``b[j, i]`` (a transposed copy), a few bytes
each, read from the inline ``raw_data`` or from the external-data file (inside the model's folder, checked by the
loader). The pair is tied when every sample is equal; a weight whose first :data:`ZERO_PROBE` samples are all zero
is never called tied (an absent or sparse weight file reads as zeros: inconclusive). An external weight whose bytes
the file system reports as a hole (:func:`_holds_data`: a sparse weight file, as benchmarks and tests write) reads
as zeros too, and is found so by one ``lseek`` instead of :data:`ZERO_PROBE` reads. The chance that two independent
weights of a trained model agree bit for bit at 64 positions is nil; a weight that is all zeros is never called
tied.
"""

from __future__ import annotations

import errno
import math
import os
import random
from collections.abc import Callable
from io import FileIO
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

MIN_ELEMENTS = 4096
SAMPLES = 64
ZERO_PROBE = 8
MAX_ELEMENTS = int(np.iinfo(np.int64).max)  # the sample positions are int64 offsets
_FLOATS = frozenset({TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE})


def tied_copies(model: onnx.ModelProto, base: Path | None) -> dict[str, str]:
    """``{copy: original}`` for every initializer that repeats another's values (as is, or transposed).

    The original is the earlier initializer of the pair in file order. ``base`` is the model's folder (for
    external data); without it, only inline values are compared. Each candidate is sampled once (its values at
    the sample positions of the pair's row-major shape): linear in the number of candidates.
    """
    groups: dict[tuple[int, tuple[int, ...]], list[TensorProto]] = {}
    for tensor in model.graph.initializer:
        if _is_candidate(tensor):
            groups.setdefault((tensor.data_type, tuple(sorted(tensor.dims))), []).append(tensor)
    tied: dict[str, str] = {}
    with _Reader(base) as reader:
        for members in groups.values():
            if len(members) < 2:
                continue
            rows, cols = members[0].dims
            positions = _positions(rows, cols)
            seen: dict[bytes, str] = {}
            for tensor in members:
                signature = _signature(tensor, rows, positions, reader)
                if signature is None:
                    continue
                if signature in seen:
                    tied[tensor.name] = seen[signature]
                else:
                    seen[signature] = tensor.name
    return tied


def _is_candidate(tensor: TensorProto) -> bool:
    """A 2-D float initializer of :data:`MIN_ELEMENTS` to :data:`MAX_ELEMENTS` elements: more than int64 can
    count cannot be stored (a mutated dim, 2^62 × 32), and its sample positions could not be drawn."""
    return (
        tensor.data_type in _FLOATS
        and len(tensor.dims) == 2
        and MIN_ELEMENTS <= math.prod(tensor.dims) <= MAX_ELEMENTS
        and min(tensor.dims) > 0
    )


def _signature(tensor: TensorProto, rows: int, positions: list[tuple[int, int]], reader: _Reader) -> bytes | None:
    """The tensor's values at the sample ``positions`` of a [rows, cols] matrix (read transposed when the tensor
    is [cols, rows]); None when a value cannot be read, or when the first :data:`ZERO_PROBE` samples are all zero
    (an absent or sparse weight file: inconclusive)."""
    size = helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
    transposed = tensor.dims[0] != rows
    read = reader.elements(tensor, size)
    if read is None:
        return None
    parts = []
    for n, (i, j) in enumerate(positions):
        flat = j * rows + i if transposed else i * tensor.dims[1] + j
        value = read(flat * size, size)
        if value is None:
            return None
        parts.append(value)
        if n + 1 == ZERO_PROBE and not any(b"".join(parts)):
            return None
    return b"".join(parts)


def _positions(rows: int, cols: int) -> list[tuple[int, int]]:
    """:data:`SAMPLES` positions of a [rows, cols] matrix, drawn by Python's ``random`` seeded with the shape (the
    same every run). Not numpy's generator: importing ``numpy.random`` cost 20-40 ms a process."""
    draw = random.Random(rows * 1_000_003 + cols)
    return [divmod(draw.randrange(rows * cols), cols) for _ in range(SAMPLES)]


class _Reader:
    """Reads single elements of initializers: inline ``raw_data`` or external data (files opened once)."""

    def __init__(self, base: Path | None) -> None:
        self.base = base
        self.files: dict[str, FileIO | None] = {}

    def __enter__(self) -> _Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self.files.values():
            if handle is not None:
                handle.close()

    def elements(self, tensor: TensorProto, size: int) -> Callable[[int, int], bytes | None] | None:
        """A reader of ``tensor``'s elements (``size`` bytes each), ``read(offset, size)`` → the bytes or None:
        from its inline ``raw_data``, or from its external-data file, located once per tensor (a candidate is
        read 8 times on a sparse weight file, 64 on a trained one). None when its external bytes lie in a hole
        of the file (:func:`_holds_data`): they read as zeros, which the zero probe would find inconclusive."""
        if tensor.data_location != TensorProto.EXTERNAL:
            data = tensor.raw_data

            def inline(offset: int, size: int) -> bytes | None:
                return bytes(data[offset : offset + size]) if offset + size <= len(data) else None

            return inline
        entries = {e.key: e.value for e in tensor.external_data}
        start, length = int(entries.get("offset", 0) or 0), entries.get("length")
        handle = self._open(self.base, entries["location"]) if self.base is not None and "location" in entries else None
        if handle is not None:
            extent = int(length) if length else math.prod(tensor.dims) * size
            if not _holds_data(handle, start, extent):
                return None

        def external(offset: int, size: int) -> bytes | None:
            if handle is None or (length and offset + size > int(length)):
                return None
            handle.seek(start + offset)
            chunk = handle.read(size)
            return chunk if len(chunk) == size else None

        return external

    def _open(self, base: Path, location: str) -> FileIO | None:
        if location not in self.files:
            try:
                # unbuffered: each read asks for its few bytes, not a buffer's 8 KiB
                self.files[location] = open(base / location, "rb", buffering=0)  # noqa: SIM115  (closed in __exit__)
            except OSError:
                self.files[location] = None
        return self.files[location]


def _holds_data(handle: FileIO, start: int, length: int) -> bool:
    """Whether bytes ``start`` .. ``start + length`` of the open file may hold anything but zeros: False only when
    the file system reports no data in that range (``lseek(fd, start, SEEK_DATA)`` finds the next data at or
    beyond its end, or none after ``start``: a hole, or past the end of the file, both read as zeros or not at
    all). True wherever it cannot tell: no ``SEEK_DATA`` on this system, or a file system that does not report
    holes (it answers ``start`` itself)."""
    seek_data = getattr(os, "SEEK_DATA", None)
    if seek_data is None or length <= 0:
        return True
    try:
        return handle.seek(start, seek_data) < start + length
    except OSError as exc:  # ENXIO: no data at or after start
        return exc.errno != errno.ENXIO
    except OverflowError:  # an offset past what lseek takes: the reads will say
        return True
