"""The precision a node computes in: the platform precision of an element type (:func:`precision_of`), and the
precision whose peak it uses on a platform, through the fallback chain (:func:`resolve_precision`).

Kept apart from :mod:`onnxroof.roofline.classify` (one cost placed on one platform, for calibration and
profiling), which an analysis does not import."""

from __future__ import annotations

from onnxroof.core.errors import PlatformError
from onnxroof.platform.model import PRECISION_FALLBACK, Platform

#: The platform precision an element type computes in. Integer and boolean ops that are not int8 run on
#: the vector units at roughly the fp32 rate, so they use the fp32 peak.
PRECISION_OF_DTYPE = {
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float64": "fp64",
    "int8": "int8",
    "uint8": "int8",
    "int4": "int4",
    "uint4": "int4",
    "float8e4m3fn": "fp8",
    "float8e4m3fnuz": "fp8",
    "float8e5m2": "fp8",
    "float8e5m2fnuz": "fp8",
}


def precision_of(dtype: str) -> str:
    return PRECISION_OF_DTYPE.get(dtype, "fp32")


def resolve_precision(platform: Platform, wanted: str) -> str:
    """The precision whose peak a node of precision ``wanted`` uses on ``platform`` (the fallback chain
    :data:`onnxroof.platform.model.PRECISION_FALLBACK`)."""
    available = platform.precisions()
    current: str | None = wanted
    while current is not None:
        if current in available:
            return current
        current = PRECISION_FALLBACK.get(current)
    if not available:
        raise PlatformError(f"{platform.path}: no peak figures")
    return available[0]
