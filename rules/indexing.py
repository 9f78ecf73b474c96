"""Cost rules: indexing. Gathers read only what they gather; scatters copy data and write updates in;
selection ops (Compress, NonZero, Unique, NonMaxSuppression) have data-dependent outputs.
"""

from __future__ import annotations

import math

from onnxroof.core.cost import Cost
from onnxroof.core.ir import OpView
from onnxroof.core.registry import Family
from onnxroof.core.states import OpClass, RuleStatus
from onnxroof.rules._common import (
    inputs_bytes,
    nbytes,
    normalize_axis,
    out_numel,
    outputs_bytes,
    required_input,
    shape_of,
    streaming,
)

FAMILY = Family("indexing", OpClass.INDEXING)
rule = FAMILY.rule

IOU_FLOPS = 13
"""FLOPs of one IoU test between two corner boxes whose areas are known: 2 max + 2 min for the
intersection's corners, 2 subtractions for its width and height, 2 max to clamp them at 0, 1 multiply
for its area, 1 add + 1 subtract for the union, 1 divide, 1 compare with the IoU threshold."""

BOX_AREA_FLOPS = 3
"""FLOPs of one box's area: 2 subtractions (width, height) and 1 multiply."""


def _written_if_static(op: OpView) -> float:
    """Σ bytes of the outputs whose shapes are static; data-dependent (unknown) outputs count 0."""
    return nbytes(t for t in op.outputs if t is not None and t.is_static_shape)


@rule("Gather", "GatherElements", "GatherND")
def gather(op: OpView) -> Cost:
    """Copy the elements of ``data`` addressed by ``indices`` into the output.

    Formula: 0 FLOPs.
    Bytes: read = bytes of indices + out_numel · itemsize(data): only the gathered elements (an
    embedding lookup reads the B·S rows it needs, not the whole [V, D] table; GatherElements reads
    indices-shaped data; GatherND the gathered slices); written = bytes of the output.
    Assumptions: every gathered element is read once, even if indices repeat (repeats come from cache
    in practice, so this is an upper bound on distinct reads); index arithmetic is not counted.
    """
    data, indices = required_input(op, 0), required_input(op, 1)
    return Cost(bytes_read=indices.nbytes + out_numel(op) * data.itemsize, bytes_written=outputs_bytes(op))


@rule("Scatter", "ScatterElements", "ScatterND")
def scatter(op: OpView) -> Cost:
    """The output is a copy of ``data`` with ``updates`` written (or reduced) in at ``indices``.

    Formula: reduction none (and the deprecated Scatter): 0 FLOPs; reduction add/mul/max/min: 1 FLOP
    per update element (updates_numel).
    Bytes: read = bytes of data + indices + updates; written = bytes of the output.
    Assumptions: the op is not done in place (data is copied into a fresh output).
    """
    updates = required_input(op, 2)
    flops = 0 if op.attrs.get("reduction", "none") == "none" else updates.numel
    return streaming(op, flops)


@rule("Compress")
def compress(op: OpView) -> Cost:
    """Copy the slices of ``input`` along ``axis`` (or of the flattened input) where ``condition`` is true.

    Formula: 0 FLOPs.
    Bytes: read = bytes of input + condition (the condition is scanned and the input read once);
    written = bytes of the output.
    Assumptions: the output's size depends on the data: when shape inference cannot give it, the
    node is reported with an unknown shape rather than guessed.
    """
    return streaming(op, 0)


@rule("NonZero")
def nonzero(op: OpView) -> Cost:
    """Indices of the non-zero elements of ``X``, as an int64 [rank, nnz] tensor.

    Formula: N compares with zero, N = X's element count.
    Bytes: read = bytes of X; written = bytes of the output.
    Assumptions: nnz depends on the data: when the output shape is unknown the node is reported with
    an unknown shape rather than guessed.
    """
    return streaming(op, required_input(op, 0).numel)


@rule("OneHot", config_inputs=(1, 2))
def one_hot(op: OpView) -> Cost:
    """A dense tensor holding on_value at each index and off_value elsewhere.

    Formula: 0 FLOPs (a fill and a scatter).
    Bytes: read = bytes of indices; written = bytes of the output. depth (a scalar) and values (the
    [off, on] pair) are config inputs: two scalars held in registers, not traffic or parameters.
    Assumptions: none beyond the fill.
    """
    return Cost(bytes_read=required_input(op, 0).nbytes, bytes_written=outputs_bytes(op))


@rule("Unique", status=RuleStatus.APPROXIMATE)
def unique(op: OpView) -> Cost:
    """Sorted unique elements (or slices along ``axis``) of ``X``, with indices and counts.

    Formula: N · log2(n) compares, N = X's element count and n the items sorted (n = N without
    axis; n = X.shape[axis] slices of N / n elements each, each slice compare costing up to N / n
    element compares). 0 when n ≤ 1.
    Bytes: read = bytes of X; written = Σ bytes of the outputs whose shapes are static. The unique
    count depends on the data, so outputs of unknown shape (usually Y, indices and counts) are not
    counted: written bytes are a lower bound.
    Assumptions: a comparison sort (approximate: the constant factor and the linear scan that
    finds duplicates are not counted).
    """
    x = required_input(op, 0)
    axis = op.attrs.get("axis")
    n = x.numel if axis is None else shape_of(x)[normalize_axis(axis, len(shape_of(x)))]
    return Cost(
        flops=x.numel * math.log2(n) if n > 1 else 0.0, bytes_read=x.nbytes, bytes_written=_written_if_static(op)
    )


@rule("NonMaxSuppression", status=RuleStatus.APPROXIMATE, config_inputs=(2, 3, 4))
def non_max_suppression(op: OpView) -> Cost:
    """Greedy per-class NMS: boxes [B, N, 4], scores [B, C, N] -> selected [num_selected, 3] int64.

    Formula: B·N·BOX_AREA_FLOPS (3: each box's area) + B·C·(N·log2 N + IOU_FLOPS·N·(N − 1)/2), with
    IOU_FLOPS = 13: per batch and class, a sort of the N scores and at most one IoU test per pair of
    boxes. An upper bound: suppressed boxes are not tested again and max_output_boxes_per_class stops
    early.
    Bytes: read = bytes of boxes + scores; written = bytes of the output when its shape is static,
    else 0: the number of selected boxes depends on the data and is not counted.
    Assumptions: center_point_box's conversion to corners and the score-threshold filter are not
    counted. max_output_boxes_per_class, iou_threshold and score_threshold are config scalars.
    Reference: ONNX NonMaxSuppression; torchvision's nms kernel (pairwise IoU over sorted boxes).
    """
    boxes, scores = shape_of(required_input(op, 0)), shape_of(required_input(op, 1))
    batch, n_boxes, classes = boxes[0], boxes[1], scores[1]
    sort = n_boxes * math.log2(n_boxes) if n_boxes > 1 else 0.0
    pairs = n_boxes * (n_boxes - 1) / 2
    flops = batch * n_boxes * BOX_AREA_FLOPS + batch * classes * (sort + IOU_FLOPS * pairs)
    return Cost(flops=flops, bytes_read=inputs_bytes(op, skip=(2, 3, 4)), bytes_written=_written_if_static(op))
