"""Small helpers shared by the rule families: byte counts and element counts of an op's tensors.

Every helper raises :class:`onnxroof.core.errors.ShapeUnknown` (through ``TensorInfo.numel``) when a tensor it
needs has no static shape, so a rule never guesses.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from onnxroof.core.cost import Cost
from onnxroof.core.errors import MalformedNode, ShapeUnknown
from onnxroof.core.gemm import GemmShape, gemm_shape
from onnxroof.core.ir import OpView, TensorInfo


def nbytes(tensors: Iterable[TensorInfo | None]) -> float:
    """Σ bytes of the given tensors, skipping absent ones."""
    return float(sum([t.nbytes for t in tensors if t is not None]))  # a list: cheaper than a generator


def inputs_bytes(op: OpView, skip: Sequence[int] = ()) -> float:
    """Bytes of every present input except those at the indices in ``skip``."""
    if not skip:
        return nbytes(op.inputs)
    return nbytes([t for i, t in enumerate(op.inputs) if i not in skip])


def outputs_bytes(op: OpView) -> float:
    """Bytes of every present output."""
    return nbytes(op.outputs)


def required_input(op: OpView, i: int) -> TensorInfo:
    t = op.input(i)
    if t is None:
        raise ShapeUnknown(f"{op.op_type} input {i}")
    return t


def required_attr(op: OpView, name: str) -> int:
    """The integer attribute ``name``, which the op's definition requires here (ONNX Attention's head counts with
    3D inputs): missing, it is :class:`~onnxroof.core.errors.MalformedNode` naming the node and the attribute.
    Attributes required in every case are declared on the rule instead (``@rule(..., required_attrs=...)``)."""
    if name not in op.attrs:
        key = f"{op.domain}::{op.op_type}" if op.domain else op.op_type
        raise MalformedNode(f"node {op.id} ({key}): required attribute '{name}' is missing")
    return int(op.attrs[name])


def required_output(op: OpView, i: int = 0) -> TensorInfo:
    t = op.output(i)
    if t is None:
        raise ShapeUnknown(f"{op.op_type} output {i}")
    return t


def out_numel(op: OpView, i: int = 0) -> int:
    """Elements of output ``i``."""
    return required_output(op, i).numel


def shape_of(t: TensorInfo) -> tuple[int, ...]:
    """The fully static shape of ``t`` (raises ShapeUnknown otherwise)."""
    if not t.is_static_shape:
        raise ShapeUnknown(t.name)
    return tuple(t.shape)  # type: ignore[arg-type]


def shape_with_rank(op: OpView, t: TensorInfo, rank: int, what: str) -> tuple[int, ...]:
    """:func:`shape_of` ``t``, which the op's definition says has ``rank`` dims; a tensor of another rank is
    :class:`~onnxroof.core.errors.MalformedNode` naming the node (a model whose declarations lie)."""
    shape = shape_of(t)
    if len(shape) != rank:
        raise MalformedNode(
            f"node {op.id} ({op.op_type}): {what} '{t.name}' has rank {len(shape)} {list(shape)}, "
            f"the operator needs rank {rank}"
        )
    return shape


def checked_gemm_shape(op: OpView, need: tuple[str, ...] = ("m", "n", "k")) -> GemmShape:
    """:func:`gemm_shape` of ``op`` with every dim known; operands of a rank the product cannot have (a rank-0
    A or Y, an unknown dim left by such a declaration) are :class:`MalformedNode` naming the node."""
    shape = gemm_shape(op)
    if shape is None or any(getattr(shape, dim) is None for dim in need):
        ranks = ", ".join(
            f"{t.name} rank {len(t.shape)}" for t in (*op.inputs, *op.outputs) if t and t.shape is not None
        )
        raise MalformedNode(f"node {op.id} ({op.op_type}): operand ranks do not form a matrix product ({ranks})")
    return shape


def streaming(op: OpView, flops: float, skip: Sequence[int] = ()) -> Cost:
    """Cost of an op that reads each data input once and writes each output once.

    bytes_read = Σ input bytes (inputs in ``skip`` excluded); bytes_written = Σ output bytes.
    """
    return Cost(flops=float(flops), bytes_read=inputs_bytes(op, skip), bytes_written=outputs_bytes(op))


def normalize_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis
