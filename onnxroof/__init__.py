"""onnxroof: where an ONNX model's time goes on a given chip, and why.

>>> import onnxroof
>>> analysis = onnxroof.analyze("model.onnx", platform="xavier", dims={"batch": 1})  # doctest: +SKIP
>>> analysis.totals.latency_s, analysis.to_dataframe()                              # doctest: +SKIP

The public names are imported lazily, so ``import onnxroof.core.cost`` (as rules do) stays light.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    "analyze": "onnxroof.analysis.analyze",
    "audit": "onnxroof.fleet.audit",
    "AuditOptions": "onnxroof.fleet.audit",
    "Analysis": "onnxroof.analysis.analyze",
    "NodeResult": "onnxroof.analysis.analyze",
    "Totals": "onnxroof.analysis.totals",
    "KernelResult": "onnxroof.roofline.kernels",
    "llm": "onnxroof.studies.llm",
    "LLMResult": "onnxroof.studies.llm",
    "Cost": "onnxroof.core.cost",
    "FLOPS_PER_MAC": "onnxroof.core.cost",
    "OnnxroofError": "onnxroof.core.errors",
    "Platform": "onnxroof.platform.model",
    "load_platform": "onnxroof.platform.lookup",
    "rule": "onnxroof.core.registry",
}
__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'onnxroof' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
