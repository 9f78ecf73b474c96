"""A kernel's descriptor (:class:`~onnxroof.core.descriptor.KernelDescriptor`), built once by the fusion stage
from the kernel's members and the patterns that fused them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from itertools import chain
from operator import attrgetter

from onnxroof.core.descriptor import KernelDescriptor, accumulation_dtype, conv_geometry
from onnxroof.core.gemm import ARRAY_OPS, array_gemm
from onnxroof.core.ir import OpView
from onnxroof.core.states import OpClass, Role
from onnxroof.costing.opclass import input_channels
from onnxroof.fusion.opclass import kernel_op_class


def describe(
    ops: Sequence[OpView],
    patterns: tuple[str, ...],
    op_types: tuple[str, ...],
    op_class: OpClass | None = None,
    dtype: str | None = None,
) -> KernelDescriptor:
    """The descriptor of a kernel of ``ops`` (the anchor first, their op types ``op_types``) fused by ``patterns``:
    the efficiency class of the op the runtime runs for it (:func:`~onnxroof.fusion.opclass.kernel_op_class`), the
    GEMM view and convolution geometry of its first GEMM-like member (:func:`~onnxroof.core.gemm.array_gemm`,
    :func:`~onnxroof.core.descriptor.conv_geometry`), the anchor's element type, the weights its members read
    (each once, in member order), and the input dtypes and weight positions of the GEMM member (else the
    anchor). ``op_class`` and ``dtype``: the kernel's class and the anchor's dtype when the caller knows them (a
    node alone: the cost stage's class and descriptor of the node)."""
    anchor = ops[0]
    read = chain.from_iterable(map(attrgetter("inputs"), ops))
    weights = dict.fromkeys([t.name for t in read if t is not None and t.role == Role.WEIGHT])
    member, gemm = anchor, None
    if not ARRAY_OPS.isdisjoint(op_types):  # most kernels have no GEMM-like member
        for op in ops:
            shape = array_gemm(op) if op.op_type in ARRAY_OPS else None
            if shape is not None:
                member, gemm = op, shape
                break
    inputs = member.inputs
    weight_inputs = tuple(i for i, t in enumerate(inputs) if t is not None and t.role == Role.WEIGHT)
    if op_class is None:
        op_class = kernel_op_class(op_types, patterns, anchor.domain, anchor.attrs, input_channels(anchor))
    if dtype is None:
        dtype = anchor.dtype
    return KernelDescriptor(
        op_class=op_class,
        gemm=gemm,
        dtype=dtype,
        weights=tuple(weights),
        conv=conv_geometry(member) if gemm is not None else None,
        input_dtypes=tuple("" if t is None else t.dtype for t in inputs),
        weight_inputs=weight_inputs,
        weight_dtype=inputs[weight_inputs[0]].dtype if weight_inputs else "",  # type: ignore[union-attr]
        accumulation=accumulation_dtype(dtype),
    )


def describe_like(template: KernelDescriptor, op: OpView) -> KernelDescriptor:
    """The descriptor of a kernel of ``op`` alone, ``template`` that of a kernel of a node of ``op``'s signature
    (:func:`~onnxroof.costing.node.cost_signature`: op type, attributes, its tensors' shapes, dtypes and roles):
    :func:`describe` reads nothing else of the node but its weights' names, taken here from ``op``."""
    weights = tuple(dict.fromkeys([t.name for t in op.inputs if t is not None and t.role == Role.WEIGHT]))
    return replace(template, weights=weights)
