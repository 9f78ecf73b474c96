"""One node evaluated on known small values: the shape arithmetic that constant folding runs.

The ops exported graphs compute shapes with (``Shape``, ``Gather``, ``Unsqueeze``, ``Concat``, ``Slice``,
``Reshape``, ``Cast``, integer arithmetic and comparisons...) are evaluated here in numpy, each by the same
numpy call the ONNX reference evaluator makes (``onnx/reference/ops/op_*.py``); every other op, and every case
outside what a function below takes (float arithmetic, a dtype mismatch, an error), goes to the reference
evaluator itself. Why: the reference evaluator costs ~0.14 s on its first call in a process (importing its
op classes) and ~0.1 ms a node after, numpy a few µs; the 7B-shaped decoders fold 12 such nodes per binding.
tests/test_evaluate.py checks that both agree on every op taken over.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from onnxroof.core.protos import normalize_domain

Arrays = list[np.ndarray]
Attrs = Mapping[str, Any]
Evaluator = Callable[[Arrays, Attrs, int], Arrays | None]
"""(inputs, attributes, default-domain opset) -> outputs, or None where the reference evaluator must decide."""


def evaluate_node(
    node: onnx.NodeProto, values: Mapping[str, np.ndarray], opsets: Sequence[onnx.OperatorSetIdProto], ir_version: int
) -> dict[str, np.ndarray]:
    """``node``'s outputs from its inputs' ``values`` (every named input must be there): numpy for the ops in
    :data:`NUMPY_OPS`, the ONNX reference evaluator for the rest; ``{}`` when neither can evaluate it."""
    evaluator = NUMPY_OPS.get(node.op_type) if not normalize_domain(node.domain) else None
    if evaluator is not None:
        opset = next((o.version for o in opsets if not normalize_domain(o.domain)), 1)
        try:
            inputs = [values[n] if n else None for n in node.input]
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            results = evaluator(inputs, attrs, opset)  # type: ignore[arg-type]  # an omitted input: None
        except Exception:  # anything numpy refuses: the reference evaluator says what it makes of it
            results = None
        if results is not None:
            return {name: np.asarray(r) for name, r in zip(node.output, results, strict=False) if name}
    return reference_evaluate(node, values, opsets, ir_version)


def reference_evaluate(
    node: onnx.NodeProto, values: Mapping[str, np.ndarray], opsets: Sequence[onnx.OperatorSetIdProto], ir_version: int
) -> dict[str, np.ndarray]:
    """Run one node with the ONNX reference evaluator (a one-node model); ``{}`` when it fails."""
    from onnx.reference import ReferenceEvaluator

    inputs = list(dict.fromkeys(n for n in node.input if n))
    try:
        graph = helper.make_graph(
            [node],
            "fold",
            [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(values[n].dtype), None) for n in inputs],
            [helper.make_tensor_value_info(o, 0, None) for o in node.output if o],
        )
        single = helper.make_model(graph, opset_imports=opsets, ir_version=ir_version)
        results = ReferenceEvaluator(single).run(None, {n: values[n] for n in inputs})
    except Exception:
        return {}
    return {name: np.asarray(r) for name, r in zip([o for o in node.output if o], results, strict=False)}


# -- the ops taken over: each returns None where the reference evaluator must decide


def _integers(*arrays: np.ndarray | None) -> bool:
    """Every array present is of one integer or bool dtype (what shape arithmetic computes on)."""
    present = [a for a in arrays if a is not None]
    return bool(present) and all(a.dtype.kind in "biu" and a.dtype == present[0].dtype for a in present)


def _axes(inputs: Arrays) -> list[int] | None:
    """``axes`` of Squeeze/Unsqueeze from opset 13: the optional second input (before 13 an attribute, applied
    one axis at a time by the reference: left to it)."""
    axes = inputs[1] if len(inputs) > 1 and inputs[1] is not None else None
    return None if axes is None else [int(a) for a in axes.reshape(-1)]


def _shape(inputs: Arrays, attrs: Attrs, opset: int) -> Arrays:
    """``Shape``: the dims ``[start:end]`` (negative ones count from the rank; ``end`` absent: to the end)."""
    dims = inputs[0].shape
    start, end = attrs.get("start", 0), attrs.get("end")
    return [np.array(dims[start:end] if end is not None else dims[start:], dtype=np.int64)]


def _size(inputs: Arrays, attrs: Attrs, opset: int) -> Arrays:
    return [np.array(inputs[0].size, dtype=np.int64)]


def _identity(inputs: Arrays, attrs: Attrs, opset: int) -> Arrays:
    return [inputs[0]]


def _concat(inputs: Arrays, attrs: Attrs, opset: int) -> Arrays | None:
    if any(a.ndim == 0 for a in inputs):  # the reference refuses a scalar input
        return None
    return [np.concatenate(inputs, attrs["axis"])]


def _gather(inputs: Arrays, attrs: Attrs, opset: int) -> Arrays:
    return [np.take(inputs[0], inputs[1], axis=attrs.get("axis", 0))]


def _unsqueeze(inputs: Arrays, attrs: Attrs, opset: int) -> Arrays | None:
    """``Unsqueeze`` from opset 13 (axes as an input, negative ones counted in the output's rank)."""
    axes = _axes(inputs) if opset >= 13 else None
    return [np.expand_dims(inputs[0], axis=tuple(axes))] if axes else None


def _squeeze(inputs: Arrays, attrs: Attrs, opset: int) -> Arrays | None:
    """``Squeeze`` from opset 13 (axes an optional input; none: every dim of 1)."""
    if opset < 13:
        return None
    axes = _axes(inputs)
    return [np.squeeze(inputs[0]) if axes is None else np.squeeze(inputs[0], axis=tuple(axes))]


def _slice(inputs: Arrays, attrs: Attrs, opset: int) -> Arrays | None:
    """``Slice`` (opset ≥ 10: starts, ends, axes, steps as inputs): Python's slice per axis, which clamps
    out-of-range starts and ends as ONNX does."""
    if opset < 10:
        return None
    data, starts, ends = inputs[0], inputs[1].reshape(-1), inputs[2].reshape(-1)
    axes = inputs[3] if len(inputs) > 3 and inputs[3] is not None else np.arange(len(starts))
    steps = inputs[4] if len(inputs) > 4 and inputs[4] is not None else np.ones(len(starts), dtype=np.int64)
    slices = [slice(0, n) for n in data.shape]
    for start, end, axis, step in zip(starts, ends, axes.reshape(-1), steps.reshape(-1), strict=True):
        slices[int(axis)] = slice(int(start), int(end), int(step))
    return [data[tuple(slices)]]


def _reshape(inputs: Arrays, attrs: Attrs, opset: int) -> Arrays:
    """``Reshape``: a 0 in the shape copies the input's dim there (unless ``allowzero``), -1 is inferred."""
    shape = np.copy(inputs[1])
    if not attrs.get("allowzero", 0):
        zeros = np.where(shape == 0)
        shape[zeros] = np.array(inputs[0].shape)[zeros]
    return [np.reshape(inputs[0], shape)]


_CAST_TARGETS = frozenset(
    {TensorProto.INT64, TensorProto.INT32, TensorProto.INT16, TensorProto.INT8, TensorProto.UINT8, TensorProto.BOOL}
    | {TensorProto.FLOAT, TensorProto.DOUBLE}
)


def _cast(inputs: Arrays, attrs: Attrs, opset: int) -> Arrays | None:
    to = attrs["to"]
    if to not in _CAST_TARGETS or not _integers(inputs[0]):
        return None
    return [inputs[0].astype(helper.tensor_dtype_to_np_dtype(to))]


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer ``Div`` truncates toward zero (C++): ``⌊a / b⌋ + 1`` where the remainder is non-zero and the
    signs differ."""
    with np.errstate(divide="ignore"):
        quotient, remainder = np.floor_divide(a, b), np.remainder(a, b)
    return quotient + ((remainder != 0) & ((a < 0) ^ (b < 0))).astype(quotient.dtype)


def _binary(function: Callable[[np.ndarray, np.ndarray], np.ndarray], logical: bool = False) -> Evaluator:
    """A broadcasting binary op on two integer arrays of one dtype (bool ones for ``logical``)."""

    def evaluate(inputs: Arrays, attrs: Attrs, opset: int) -> Arrays | None:
        a, b = inputs
        if not _integers(a, b) or (a.dtype.kind == "b") != logical:
            return None
        return [function(a, b)]

    return evaluate


def _variadic(function: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Evaluator:
    """``Min``/``Max`` over any number of integer arrays of one dtype."""

    def evaluate(inputs: Arrays, attrs: Attrs, opset: int) -> Arrays | None:
        if not _integers(*inputs) or inputs[0].dtype.kind == "b":
            return None
        result = inputs[0]
        for other in inputs[1:]:
            result = function(result, other)
        return [result]

    return evaluate


def _neg(inputs: Arrays, attrs: Attrs, opset: int) -> Arrays | None:
    return [np.negative(inputs[0])] if _integers(inputs[0]) and inputs[0].dtype.kind == "i" else None


def _not(inputs: Arrays, attrs: Attrs, opset: int) -> Arrays | None:
    return [np.logical_not(inputs[0])] if inputs[0].dtype.kind == "b" else None


def _where(inputs: Arrays, attrs: Attrs, opset: int) -> Arrays | None:
    condition, x, y = inputs
    if condition.dtype.kind != "b" or not _integers(x, y):
        return None
    return [np.where(condition, x, y).astype(x.dtype)]


NUMPY_OPS: Mapping[str, Evaluator] = {
    "Shape": _shape,
    "Size": _size,
    "Identity": _identity,
    "Concat": _concat,
    "Gather": _gather,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Slice": _slice,
    "Reshape": _reshape,
    "Cast": _cast,
    "Add": _binary(np.add),
    "Sub": _binary(np.subtract),
    "Mul": _binary(np.multiply),
    "Div": _binary(_div),
    "Equal": _binary(np.equal),
    "Less": _binary(np.less),
    "Greater": _binary(np.greater),
    "LessOrEqual": _binary(np.less_equal),
    "GreaterOrEqual": _binary(np.greater_equal),
    "And": _binary(np.logical_and, logical=True),
    "Or": _binary(np.logical_or, logical=True),
    "Min": _variadic(np.minimum),
    "Max": _variadic(np.maximum),
    "Neg": _neg,
    "Not": _not,
    "Where": _where,
}
"""The ops evaluated in numpy (default domain), each mirroring the reference evaluator's numpy call."""
