"""The fusion profiles: the target runtimes whose kernels the fusion pass mirrors, named once.

A runtime file names its profile (``runtimes/*.toml``, :mod:`onnxroof.runtime`), as does a platform file
(``fusion_profile``, :mod:`onnxroof.platform.parse`, whose default runtime follows it); ``--fusion`` overrides
it (:mod:`onnxroof.cli.common`), and :data:`onnxroof.fusion.patterns.PROFILES` maps each to the patterns it
performs (its keys are checked against this enum when the module loads). It lives in core because
``platform`` sits below ``fusion``.
"""

from __future__ import annotations

from enum import StrEnum


class FusionProfile(StrEnum):
    """A target runtime's fusion profile (a member is also its string value: ``"ort-cpu"``)."""

    TENSORRT = "tensorrt"
    TENSORRT_LLM = "tensorrt-llm"
    """TensorRT's fusions; the ``tensorrt-llm`` runtime (``runtimes/tensorrt-llm.toml``) replays them as a CUDA graph,
    and ``--fusion tensorrt-llm`` without ``--runtime`` picks that runtime (:func:`onnxroof.runtime.runtime_for`)."""
    ORT_CPU = "ort-cpu"
    """ONNX Runtime's CPU execution provider at ``ORT_ENABLE_EXTENDED``."""
    NONE = "none"
    """No fusion: one kernel per costed node."""


__all__ = ["FusionProfile"]
