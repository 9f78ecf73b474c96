"""The unit of work of an audit, run on a worker: one model on one platform, analyzed as ``report`` does.

:func:`analyze_task` never raises for a bad model: it returns plain, JSON-able *figures* — the ``totals`` of
:func:`onnxroof.analysis.document.to_dict` (the very object ``report --format json`` writes), the unsupported
node count and the findings — or an error with its kind. The client turns figures into a table row and a
budget verdict, and keeps them in the cache.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from onnxroof.core.errors import OnnxroofError, one_line


class ErrorKind(StrEnum):
    input = "input"  # the model (or an option) is bad: the same content always fails the same way; cached
    unreadable = "unreadable"  # the worker cannot read the file: not cached
    internal = "internal"  # a bug or a lost worker: not cached


def analyze_task(
    path: str,
    platform: str,
    dims: Mapping[str, int],
    precision: str | None,
    fusion: str | None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    peak: bool = False,
    time_model: str | None = None,
    runtime: str | None = None,
) -> dict[str, Any]:
    """Analyze ``path`` on ``platform`` with ``dims`` (and whole-input ``shapes``); the figures, or
    ``{"error", "error_kind"}``."""
    from onnxroof.analysis.analyze import analyze
    from onnxroof.analysis.document import to_dict

    start = time.perf_counter()
    if not os.access(path, os.R_OK):
        return error_figures(
            f"worker {socket.gethostname()} cannot read {path}: Dask workers need the model files at the same "
            "paths as the client (e.g. a shared filesystem)",
            ErrorKind.unreadable,
        )
    from onnxroof.analysis.whatif import WhatIf

    try:
        analysis = analyze(
            path,
            platform=platform,
            dims=dict(dims),
            shapes=dict(shapes or {}),
            whatif=WhatIf.of(precision=precision, peak=peak, time_model=time_model),
            fusion=fusion,
            runtime=runtime,
        )
        doc = to_dict(analysis)
    except OnnxroofError as exc:
        return error_figures(one_line(str(exc)), ErrorKind.input, time.perf_counter() - start)
    except Exception as exc:  # a bug: reported on this model's row, the others still run
        message = f"internal error: {type(exc).__name__}: {one_line(str(exc))}"
        return error_figures(message, ErrorKind.internal, time.perf_counter() - start)
    return {
        "error": None,
        "error_kind": None,
        "platform": analysis.platform.name,
        "totals": doc["totals"],
        "unsupported_count": sum(len(ids) for ids in analysis.unsupported.values()),
        "findings": doc["findings"],
        "warnings": doc["warnings"],
        "analysis_s": time.perf_counter() - start,
    }


def error_figures(message: str, kind: ErrorKind, seconds: float = 0.0) -> dict[str, Any]:
    return {"error": message, "error_kind": kind.value, "analysis_s": seconds}


def cacheable(figures: Mapping[str, Any]) -> bool:
    """Whether these figures depend only on the cache key (success, or a bad model): not on the worker."""
    return figures.get("error_kind") in (None, ErrorKind.input.value)
