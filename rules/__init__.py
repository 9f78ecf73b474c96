"""Per-op cost rules, one module per op family. This list is the index: every family is named here.

:data:`REGISTRY` is the one registry of the bundled rules, built once from the families' declarations
(:meth:`onnxroof.core.registry.Registry.from_families`); importing a family module registers nothing anywhere.
"""

from onnxroof.core.registry import Registry
from onnxroof.rules import (
    attention,
    attention_fused,
    conv,
    elementwise,
    generators,
    indexing,
    lowbit,
    matmul,
    movement,
    normalization,
    pooling,
    quantized,
    recurrent,
    reduction,
    transformer,
)

FAMILIES = (
    attention.FAMILY,
    attention_fused.FAMILY,
    conv.FAMILY,
    elementwise.FAMILY,
    generators.FAMILY,
    indexing.FAMILY,
    lowbit.FAMILY,
    matmul.FAMILY,
    movement.FAMILY,
    normalization.FAMILY,
    pooling.FAMILY,
    quantized.FAMILY,
    recurrent.FAMILY,
    reduction.FAMILY,
    transformer.FAMILY,
)
"""Every bundled family, in the order its rules enter the registry."""

REGISTRY: Registry = Registry.from_families(*FAMILIES)
"""The bundled rules (add a user's own with :meth:`~onnxroof.core.registry.Registry.with_rules`)."""
