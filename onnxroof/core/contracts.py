"""What a node must hold before its cost rule reads it: required attributes, an input count, attributes a rule
divides by or loops over (≥ 1) and attributes holding a ``TensorProto.DataType``.

A node's contract is ONNX's schema where ONNX has one (:func:`schema_contract`: the attributes it marks
``required``, ``min_input``..``max_input``, its data-type attributes), joined with what the op's rule declares
beside it (``@rule(..., required_attrs=, inputs=, positive_attrs=)``: ONNX Runtime's contrib ops have no schema
in ONNX). :func:`check_node` holds a node to it once, where the cost stage calls the rule
(:func:`onnxroof.core.registry.evaluate_with_weights`), and raises :class:`~onnxroof.core.errors.MalformedNode`
with one line naming the node and the attribute: ``node 12:attn (com.microsoft::Attention): required attribute
'num_heads' is missing``.

Only what ONNX Runtime also requires is required (its ContribOperators.md marks an attribute ``required``): a
model it runs is never refused. An input count's upper bound is ONNX's only: ONNX Runtime grows its contrib ops
by appending optional inputs in place, so a newer file may legally carry more.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import onnx
import onnx.defs

from onnxroof.core.errors import MalformedNode
from onnxroof.core.frozen import frozen_dataclass

#: Attribute names that hold a ``TensorProto.DataType`` in ONNX's schemas (Cast ``to``, RandomNormal ``dtype``,
#: QuantizeLinear ``output_dtype``, HannWindow ``output_datatype``...).
DTYPE_ATTRIBUTES = frozenset({"to", "dtype", "output_dtype", "output_datatype"})
#: Every value of the ``TensorProto.DataType`` enum (0, UNDEFINED, is the "infer it" default of some of them).
DATA_TYPES = frozenset(onnx.TensorProto.DataType.values())


@frozen_dataclass(slots=True)
class NodeContract:
    """What a node must hold (module docstring). ``inputs``: (min, max) count of inputs, absent optional ones
    written as "" included; max None: no upper bound."""

    required: tuple[str, ...] = ()
    inputs: tuple[int, int | None] = (0, None)
    positive: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()

    def join(self, other: NodeContract) -> NodeContract:
        """Both contracts at once: every attribute either requires, the tighter input bounds."""
        highs = [m for m in (self.inputs[1], other.inputs[1]) if m is not None]
        return NodeContract(
            tuple(dict.fromkeys((*self.required, *other.required))),
            (max(self.inputs[0], other.inputs[0]), min(highs) if highs else None),
            tuple(dict.fromkeys((*self.positive, *other.positive))),
            tuple(dict.fromkeys((*self.dtypes, *other.dtypes))),
        )


NO_CONTRACT = NodeContract()


@functools.lru_cache(maxsize=4096)
def schema_contract(op_type: str, opset: int, domain: str) -> NodeContract:
    """The contract ONNX's schema of ``op_type`` at ``opset`` states (none when ONNX has no schema): its
    ``required`` attributes, ``min_input``..``max_input`` (no bound for a variadic op) and its data-type
    attributes (:data:`DTYPE_ATTRIBUTES`)."""
    try:
        schema = onnx.defs.get_schema(op_type, max_inclusive_version=opset, domain=domain)
    except onnx.defs.SchemaError:
        return NO_CONTRACT
    required = tuple(name for name, attr in schema.attributes.items() if attr.required)
    dtypes = tuple(
        name
        for name, attr in schema.attributes.items()
        if name in DTYPE_ATTRIBUTES and attr.type == onnx.defs.OpSchema.AttrType.INT
    )
    high = schema.max_input if schema.max_input < 2**31 - 1 else None
    return NodeContract(required, (schema.min_input, high), (), dtypes)


def check_node(node: str, op_type: str, n_inputs: int, attrs: Mapping[str, Any], contract: NodeContract) -> None:
    """Raise :class:`MalformedNode` naming ``node`` (its id, ``op_type`` as ``domain::type``) and the attribute
    or input count at fault when the node breaks ``contract``; attribute defaults are in ``attrs`` already."""
    where = f"node {node} ({op_type})"
    for name in contract.required:
        if name not in attrs:
            raise MalformedNode(f"{where}: required attribute '{name}' is missing")
    low, high = contract.inputs
    if n_inputs < low or (high is not None and n_inputs > high):
        bounds = f"{low}" if low == high else f"at least {low}" if high is None else f"{low} to {high}"
        raise MalformedNode(f"{where}: has {n_inputs} input(s), the operator takes {bounds}")
    for name in contract.positive:
        value = attrs.get(name)
        if value is not None and (type(value) is not int or value < 1):
            raise MalformedNode(f"{where}: attribute '{name}' = {value!r}, must be a positive integer")
    for name in contract.dtypes:
        value = attrs.get(name)
        if value is not None and (type(value) is not int or value not in DATA_TYPES):
            raise MalformedNode(f"{where}: attribute '{name}' = {value!r} is not a TensorProto data type")
