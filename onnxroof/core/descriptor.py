"""What a time model needs to know of a kernel beyond its FLOPs and bytes: built once, by the fusion stage."""

from __future__ import annotations

from dataclasses import dataclass

from onnxroof.core.gemm import GemmShape


@dataclass(frozen=True, slots=True)
class KernelDescriptor:
    """A kernel as a time model sees it.

    ``op_class``: the efficiency class of the op the runtime runs for it (a key of a platform's ``[efficiency]``:
    ``matmul``, ``conv``, ``depthwise``, ``elementwise``...); ``gemm``: the GEMM view of its first GEMM-like member
    (M, N, K, groups; a convolution as its implicit GEMM: :mod:`onnxroof.core.gemm`), None for other kernels;
    ``dtype``: the anchor's element type; ``weights``: the weight tensors its members read.
    """

    op_class: str
    gemm: GemmShape | None
    dtype: str
    weights: tuple[str, ...] = ()
