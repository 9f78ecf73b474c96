"""Parse an ONNX file without its weight payloads: peak memory a fraction of the file, not a multiple.

``onnx.load`` reads the whole file and parses every byte, so a model with 438 MB of weights inside costs
the file twice before anything else runs, and every later copy (the checker, shape inference) costs it
again. :func:`parse_without_payloads` instead maps the file and walks the protobuf wire format: every field
is copied as is except the ``raw_data`` of a large top-level initializer (more than
:data:`PAYLOAD_THRESHOLD` bytes), which is never touched; that initializer becomes an *external* tensor
pointing at its own bytes in the model file (``location`` = the file's name, ``offset``/``length`` = where
its ``raw_data`` lies). Dims, dtype and name are kept, so every stage that needs only those (the checker,
shape inference, the rules) works unchanged, and a stage that needs a small tensor's values finds them
where external data always is.

Wire format (protobuf): a message is a sequence of ``key`` varints (``field << 3 | wire type``) each
followed by a varint (type 0), 8 bytes (1), a length-delimited run (2) or 4 bytes (5). ModelProto.graph
is field 7, GraphProto.initializer field 5, TensorProto.raw_data field 9, TensorProto.data_location field
14, TensorProto.external_data field 13. Any other wire type, or a length running past its parent, raises
:class:`ValueError`; the caller then falls back to ``onnx.load`` (which names the damage).
"""

from __future__ import annotations

import mmap
import re
from pathlib import Path

import onnx

PAYLOAD_THRESHOLD = 64 * 1024
"""Initializers whose message exceeds this many bytes lose their ``raw_data`` (64 KiB: every shape vector
and small constant that folding reads stays inline)."""

_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_RAW_DATA = 7, 5, 9
_TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION = 13, 14


def _varint(buf, pos: int, end: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= end or shift > 63:
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _fields(buf, start: int, end: int):
    """``(field, wire type, field start, payload start, field end)`` of each field in ``buf[start:end]``."""
    pos = start
    while pos < end:
        key, body = _varint(buf, pos, end)
        field, wire = key >> 3, key & 7
        if wire == 0:
            _, stop = _varint(buf, body, end)
        elif wire == 1:
            stop = body + 8
        elif wire == 5:
            stop = body + 4
        elif wire == 2:
            length, body = _varint(buf, body, end)
            stop = body + length
        else:
            raise ValueError(f"unsupported wire type {wire}")
        if stop > end:
            raise ValueError("field runs past its message")
        yield field, wire, pos, body, stop
        pos = stop


def _length_delimited(field: int, payload: bytes) -> bytes:
    return _encode_varint(field << 3 | 2) + _encode_varint(len(payload)) + payload


def _tensor(buf, start: int, end: int, location: str) -> bytes:
    """The initializer ``buf[start:end]`` without its raw_data, external data pointing at it instead."""
    out = bytearray()
    raw: tuple[int, int] | None = None
    for field, wire, first, body, stop in _fields(buf, start, end):
        if field == _TENSOR_RAW_DATA and wire == 2:
            raw = (body, stop - body)
            continue
        if field in (_TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION):
            return bytes(buf[start:end])  # already external (or odd): kept as it is
        out += buf[first:stop]
    if raw is None:  # typed fields (float_data...): kept inline
        return bytes(buf[start:end])
    offset, length = raw
    for key, value in (("location", location), ("offset", str(offset)), ("length", str(length))):
        entry = _length_delimited(1, key.encode()) + _length_delimited(2, value.encode())
        out += _length_delimited(_TENSOR_EXTERNAL_DATA, entry)
    out += _encode_varint(_TENSOR_DATA_LOCATION << 3 | 0) + _encode_varint(onnx.TensorProto.EXTERNAL)
    return bytes(out)


def _candidates(length_bytes: int) -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """Bytes that can start a GraphProto.initializer field whose length takes ``length_bytes`` varint bytes or
    more: the key (field 5, wire type 2: ``0x2a``, or a padded varint of it: ``0xaa 0x80* 0x00``) then
    ``length_bytes - 1`` bytes with the continuation bit set. Two patterns, each starting with one literal byte,
    which the regex engine finds by a fast scan for that byte (an alternation of the two starts at every byte)."""
    tail = rb"[\x80-\xff]{%d}" % (length_bytes - 1)
    return re.compile(rb"\x2a" + tail), re.compile(rb"\xaa\x80*\x00" + tail)


_LARGE_INITIALIZER = _candidates(len(_encode_varint(PAYLOAD_THRESHOLD + 1)))
"""A graph without a match of either anywhere in its bytes has no initializer over the threshold (the converse need
not hold: the bytes may sit inside another field). One C-speed scan spares walking a 200k-node graph in Python."""


def _graph(buf, start: int, end: int, location: str) -> bytes | None:
    """The graph ``buf[start:end]`` with its large initializers' raw_data left out; None when it has none (the
    graph is kept as it is). Pieces are copied out of ``buf`` as they are cut (no slice of the map outlives a
    ValueError)."""
    if all(pattern.search(buf, start, end) is None for pattern in _LARGE_INITIALIZER):
        return None
    parts: list = []
    copied = start
    for field, wire, first, body, stop in _fields(buf, start, end):
        if field == _GRAPH_INITIALIZER and wire == 2 and stop - body > PAYLOAD_THRESHOLD:
            parts += (bytes(buf[copied:first]), _length_delimited(field, _tensor(buf, body, stop, location)))
            copied = stop
    if not parts:
        return None
    parts.append(bytes(buf[copied:end]))
    return b"".join(parts)


def lean_bytes(buf, location: str) -> bytes:
    """The serialized model ``buf`` with the payloads of its large initializers left out (module docstring);
    ``buf`` copied as it is when no initializer is large."""
    parts: list = []
    copied = 0
    for field, wire, first, body, stop in _fields(buf, 0, len(buf)):
        if field == _MODEL_GRAPH and wire == 2:
            graph = _graph(buf, body, stop, location)
            if graph is not None:
                parts += (bytes(buf[copied:first]), _length_delimited(field, graph))
                copied = stop
    if not parts:
        return bytes(buf)
    parts.append(buf[copied:])
    return b"".join(parts)


def parse_without_payloads(path: Path) -> onnx.ModelProto:
    """The model at ``path``, its large initializers' data left in the file (module docstring).

    Raises :class:`ValueError` on bytes that are not a protobuf message (the caller falls back to ``onnx.load``).
    """
    with open(path, "rb") as handle:
        if handle.seek(0, 2) == 0:
            return onnx.ModelProto()
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            view = memoryview(mapped)
            try:
                data = lean_bytes(view, path.name)
            finally:
                view.release()
    model = onnx.ModelProto()
    model.ParseFromString(data)
    return model


IN_MEMORY = "<in-memory model>"
"""The external-data location of a large initializer left out of a copy of an in-memory model."""


def _repeated(descriptor) -> bool:
    flag = getattr(descriptor, "is_repeated", None)  # protobuf ≥ 6 dropped FieldDescriptor.label
    return bool(flag) if flag is not None else descriptor.label == descriptor.LABEL_REPEATED


def _copy_fields(target, source, skip: str = "") -> None:
    """Copy every set field of ``source`` but ``skip`` into ``target`` (the skipped one is never read)."""
    for descriptor in source.DESCRIPTOR.fields:
        name = descriptor.name
        if name == skip:
            continue
        if _repeated(descriptor):
            values = getattr(source, name)
            if len(values):
                getattr(target, name).extend(values)
        elif source.HasField(name):
            if descriptor.message_type is not None:
                getattr(target, name).CopyFrom(getattr(source, name))
            else:
                setattr(target, name, getattr(source, name))


def copy_without_payloads(source: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``source`` whose large top-level initializers (``raw_data`` over :data:`PAYLOAD_THRESHOLD`
    bytes) keep name, dims and dtype but not their bytes, which are never read: they become external data
    at :data:`IN_MEMORY` (the caller's model is not changed)."""
    copy = onnx.ModelProto()
    _copy_fields(copy, source, skip="graph")
    if not source.HasField("graph"):
        return copy
    _copy_fields(copy.graph, source.graph, skip="initializer")
    for tensor in source.graph.initializer:
        if tensor.HasField("raw_data") and tensor.ByteSize() > PAYLOAD_THRESHOLD:
            lean = copy.graph.initializer.add()
            _copy_fields(lean, tensor, skip="raw_data")
            if lean.data_location != onnx.TensorProto.EXTERNAL:
                lean.data_location = onnx.TensorProto.EXTERNAL
                entry = lean.external_data.add()
                entry.key, entry.value = "location", IN_MEMORY
        else:
            copy.graph.initializer.add().CopyFrom(tensor)
    return copy
