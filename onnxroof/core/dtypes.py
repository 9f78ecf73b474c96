"""ONNX element types: a readable name and a size in bytes for each ``TensorProto.DataType``."""

from __future__ import annotations

from onnx import TensorProto

# (name, bytes per element). Sub-byte types use fractional sizes: 4-bit = 0.5 B.
_DTYPES: dict[int, tuple[str, float]] = {
    TensorProto.FLOAT: ("float32", 4),
    TensorProto.UINT8: ("uint8", 1),
    TensorProto.INT8: ("int8", 1),
    TensorProto.UINT16: ("uint16", 2),
    TensorProto.INT16: ("int16", 2),
    TensorProto.INT32: ("int32", 4),
    TensorProto.INT64: ("int64", 8),
    TensorProto.STRING: ("string", 0),
    TensorProto.BOOL: ("bool", 1),
    TensorProto.FLOAT16: ("float16", 2),
    TensorProto.DOUBLE: ("float64", 8),
    TensorProto.UINT32: ("uint32", 4),
    TensorProto.UINT64: ("uint64", 8),
    TensorProto.COMPLEX64: ("complex64", 8),
    TensorProto.COMPLEX128: ("complex128", 16),
    TensorProto.BFLOAT16: ("bfloat16", 2),
    17: ("float8e4m3fn", 1),
    18: ("float8e4m3fnuz", 1),
    19: ("float8e5m2", 1),
    20: ("float8e5m2fnuz", 1),
    21: ("uint4", 0.5),
    22: ("int4", 0.5),
    23: ("float4e2m1", 0.5),
    24: ("float8e8m0", 1),
    25: ("uint2", 0.25),
    26: ("int2", 0.25),
}

UNKNOWN_DTYPE = ("unknown", 0.0)


def dtype_info(elem_type: int) -> tuple[str, float]:
    """``(name, itemsize)`` for an ONNX element type; ``("unknown", 0)`` when it is not set."""
    return _DTYPES.get(elem_type, UNKNOWN_DTYPE)


def itemsize_of(name: str) -> float:
    """Bytes per element for a dtype name from :func:`dtype_info`."""
    for dtype_name, size in _DTYPES.values():
        if dtype_name == name:
            return size
    raise KeyError(name)


def elem_type_of(name: str) -> int:
    """The ONNX element type of a dtype name from :func:`dtype_info`; 0 (undefined) for an unknown name."""
    for elem_type, (dtype_name, _) in _DTYPES.items():
        if dtype_name == name:
            return elem_type
    return 0
