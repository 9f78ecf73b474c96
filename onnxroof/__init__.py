"""onnxroof: where an ONNX model's time goes on a given chip, and why.

>>> import onnxroof
>>> analysis = onnxroof.analyze("model.onnx", platform="xavier", dims={"batch": 1})  # doctest: +SKIP
>>> analysis.totals.latency_s, analysis.to_dataframe()                              # doctest: +SKIP

The stages, for studies that reuse them (one model bound and costed once, placed on many platforms):

>>> fused = onnxroof.fuse(onnxroof.cost(onnxroof.bind("model.onnx", {"batch": 1})), "tensorrt")  # doctest: +SKIP
>>> [onnxroof.place(fused, onnxroof.load_platform(p)) for p in ("xavier", "a100")]         # doctest: +SKIP

The public names are imported lazily at run time, so ``import onnxroof.core.cost`` (as rules do) stays light;
type checkers read them from the imports under ``TYPE_CHECKING`` (the package ships ``py.typed``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from onnxroof.core.version import __version__ as __version__

if TYPE_CHECKING:
    from onnxroof.analysis.analyze import Analysis, analyze, place
    from onnxroof.analysis.results import NodeResult
    from onnxroof.analysis.stages import BoundModel, CostedModel, FusedModel, bind, cost, fuse, read
    from onnxroof.analysis.totals import Totals
    from onnxroof.analysis.whatif import WhatIf
    from onnxroof.core.cost import FLOPS_PER_MAC, Cost
    from onnxroof.core.errors import OnnxroofError
    from onnxroof.core.registry import rule
    from onnxroof.fleet.audit import AuditOptions, audit
    from onnxroof.platform.lookup import load_platform
    from onnxroof.platform.model import Platform
    from onnxroof.roofline.kernels import KernelResult
    from onnxroof.runtime.lookup import load_runtime
    from onnxroof.runtime.model import Runtime
    from onnxroof.studies.llm import LLMResult, llm

_PUBLIC = {
    "analyze": "onnxroof.analysis.analyze",
    "audit": "onnxroof.fleet.audit",
    "AuditOptions": "onnxroof.fleet.audit",
    "Analysis": "onnxroof.analysis.analyze",
    "NodeResult": "onnxroof.analysis.results",
    "read": "onnxroof.analysis.stages",
    "bind": "onnxroof.analysis.stages",
    "cost": "onnxroof.analysis.stages",
    "fuse": "onnxroof.analysis.stages",
    "place": "onnxroof.analysis.analyze",
    "BoundModel": "onnxroof.analysis.stages",
    "CostedModel": "onnxroof.analysis.stages",
    "FusedModel": "onnxroof.analysis.stages",
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
    "Runtime": "onnxroof.runtime.model",
    "load_runtime": "onnxroof.runtime.lookup",
    "WhatIf": "onnxroof.analysis.whatif",
}
"""Public name -> the module that defines it, imported on first use (:func:`__getattr__`)."""

__all__ = [
    "FLOPS_PER_MAC",
    "Analysis",
    "AuditOptions",
    "BoundModel",
    "Cost",
    "CostedModel",
    "FusedModel",
    "KernelResult",
    "LLMResult",
    "NodeResult",
    "OnnxroofError",
    "Platform",
    "Runtime",
    "Totals",
    "WhatIf",
    "analyze",
    "audit",
    "bind",
    "cost",
    "fuse",
    "llm",
    "load_platform",
    "load_runtime",
    "place",
    "read",
    "rule",
]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'onnxroof' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])
