"""A kernel's descriptor (:class:`~onnxroof.core.descriptor.KernelDescriptor`), built once by the fusion stage
from the kernel's members and the patterns that fused them."""

from __future__ import annotations

from collections.abc import Sequence

from onnxroof.core.descriptor import KernelDescriptor
from onnxroof.core.gemm import first_gemm_shape
from onnxroof.core.ir import OpView
from onnxroof.core.states import Role
from onnxroof.costing.opclass import input_channels
from onnxroof.fusion.opclass import kernel_op_class


def describe(ops: Sequence[OpView], patterns: tuple[str, ...], op_types: tuple[str, ...]) -> KernelDescriptor:
    """The descriptor of a kernel of ``ops`` (the anchor first) fused by ``patterns``: the efficiency class of the
    op the runtime runs for it (:func:`~onnxroof.fusion.opclass.kernel_op_class`), the GEMM view of its first
    GEMM-like member (:func:`~onnxroof.core.gemm.first_gemm_shape`), the anchor's element type and the weights
    its members read (each once, in member order)."""
    anchor = ops[0]
    weights = dict.fromkeys(t.name for op in ops for t in op.inputs if t is not None and t.role == Role.WEIGHT)
    return KernelDescriptor(
        op_class=kernel_op_class(op_types, patterns, anchor.domain, anchor.attrs, input_channels(anchor)),
        gemm=first_gemm_shape(ops),
        dtype=anchor.dtype,
        weights=tuple(weights),
    )
