"""Runtimes as data: how a runtime launches kernels, writes the KV cache, and how fast its kernels run per class.

One TOML file per runtime (the bundled ones live in ``runtimes/``, installed as the package ``onnxroof.runtimes``),
validated as strictly as a platform file (:mod:`onnxroof.runtime.parse`). Imports only :mod:`onnxroof.core`.
"""

from onnxroof.runtime.lookup import (
    bundled_runtimes,
    default_runtime_name,
    load_runtime,
    runtime_for,
    runtime_names,
)
from onnxroof.runtime.model import (
    ConvBias,
    KvWrite,
    LaunchMode,
    Runtime,
    RuntimeKernelClass,
    RuntimeLaunch,
)

__all__ = [
    "ConvBias",
    "KvWrite",
    "LaunchMode",
    "Runtime",
    "RuntimeKernelClass",
    "RuntimeLaunch",
    "bundled_runtimes",
    "default_runtime_name",
    "load_runtime",
    "runtime_for",
    "runtime_names",
]
