"""The fusion profiles: the target runtimes whose kernels the fusion pass mirrors, named once.

A platform file names its runtime's profile (``fusion_profile``, :mod:`onnxroof.platform.parse`), ``--fusion``
overrides it (:mod:`onnxroof.cli.common`), and :data:`onnxroof.fusion.patterns.PROFILES` maps each to the patterns
it performs (its keys are checked against this enum when the module loads). It lives in core because
``platform`` sits below ``fusion``.
"""

from __future__ import annotations

from enum import StrEnum


class FusionProfile(StrEnum):
    """A target runtime's fusion profile (a member is also its string value: ``"ort-cpu"``)."""

    TENSORRT = "tensorrt"
    TENSORRT_LLM = "tensorrt-llm"
    """TensorRT's fusions, run graph-captured (one launch per run: :data:`onnxroof.fusion.patterns.GRAPH_CAPTURE`)."""
    ORT_CPU = "ort-cpu"
    """ONNX Runtime's CPU execution provider at ``ORT_ENABLE_EXTENDED``."""
    NONE = "none"
    """No fusion: one kernel per costed node."""


__all__ = ["FusionProfile"]
