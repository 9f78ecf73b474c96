"""Per-op cost rules, one module per op family. This list is the index: every family is imported here.

Importing this package registers every rule with :mod:`onnxroof.core.registry`.
"""

from onnxroof.rules import (  # noqa: F401
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
