"""Ops without a cost rule that ONNX defines as a function: costed through their function body.

When no rule is registered for an op and ``onnx.defs`` holds a schema for it with a function body (a fixed
``FunctionProto``, or a context-dependent one built from the node and its input types), the body is
expanded into nodes with the op's own inputs and outputs (:func:`onnx.inliner.inline_local_functions`
binds the attributes), the intermediate tensors get their shapes from ONNX shape inference on a tiny model of
the body (the op's input types as its inputs), and each body node is costed with the registered rules,
recursively (a body op may itself be a function). The op's cost is the sum; each costed body node is one
kernel launch. Body nodes without a rule or a shape are reported in the note, as for control-flow bodies.
"""

from __future__ import annotations

from typing import Protocol, cast

import onnx
import onnx.inliner  # a submodule `import onnx` does not load
from onnx import helper

from onnxroof.core.dtypes import elem_type_of
from onnxroof.core.ir import ModelIR, OpView, TensorInfo

_LOCAL_DOMAIN = "onnxroof.function"


class _FunctionSchema(Protocol):
    """What :func:`function_proto` reads of an ``onnx.defs.OpSchema``: its function accessors, which onnx's type
    stubs leave out."""

    has_function: bool
    has_context_dependent_function: bool
    function_body: onnx.FunctionProto

    def get_function_with_opset_version(self, opset: int) -> bytes: ...

    def get_context_dependent_function_with_opset_version(
        self, opset: int, node: bytes, types: list[bytes]
    ) -> bytes: ...


def _value_info(t: TensorInfo) -> onnx.ValueInfoProto:
    shape = None if t.shape is None else [d if d is not None else f"{t.name}_d{i}" for i, d in enumerate(t.shape)]
    return helper.make_tensor_value_info(t.name, elem_type_of(t.dtype), shape)


def _node(op: OpView) -> onnx.NodeProto:
    attrs = {k: v for k, v in op.attrs.items() if v is not None and v != []}
    inputs = [t.name if t is not None else "" for t in op.inputs]
    outputs = [t.name if t is not None else "" for t in op.outputs]
    return helper.make_node(op.op_type, inputs, outputs, domain=op.domain, **attrs)


def function_proto(op: OpView) -> onnx.FunctionProto | None:
    """The op's function body from its ONNX schema at the op's opset, or None when ONNX defines none."""
    try:
        schema = cast(_FunctionSchema, onnx.defs.get_schema(op.op_type, op.opset, op.domain))
    except onnx.defs.SchemaError:
        return None
    body: bytes | None = None
    if schema.has_function:
        body = schema.get_function_with_opset_version(op.opset) or schema.function_body.SerializeToString()
    elif schema.has_context_dependent_function:
        types = [
            _value_info(t).type.SerializeToString() if t is not None else onnx.TypeProto().SerializeToString()
            for t in op.inputs
        ]
        try:
            body = schema.get_context_dependent_function_with_opset_version(
                op.opset, _node(op).SerializeToString(), types
            )
        except Exception:
            return None
    if not body:
        return None
    function = onnx.FunctionProto()
    function.ParseFromString(body)
    return function if function.node else None


def expand_function(op: OpView, scope: ModelIR) -> onnx.GraphProto | None:
    """The op's function body as a graph of nodes over the op's own inputs and outputs, shapes inferred;
    None when ONNX defines no body for the op. The graph declares no inputs: they are ``scope``'s tensors."""
    function = function_proto(op)
    if function is None:
        return None
    local = onnx.FunctionProto()
    local.CopyFrom(function)
    local.domain, local.name = _LOCAL_DOMAIN, op.op_type
    call = _node(op)
    call.domain = _LOCAL_DOMAIN
    opsets = {d or "": v for d, v in scope.opsets.items()}
    opsets.update({imp.domain: imp.version for imp in function.opset_import})
    opsets.setdefault("", op.opset)
    graph = helper.make_graph(
        [call],
        "function_body",
        [_value_info(t) for t in op.inputs if t is not None and t.name],
        [onnx.ValueInfoProto(name=t.name) for t in op.outputs if t is not None and t.name],
    )
    imports = [helper.make_opsetid(d, v) for d, v in opsets.items()] + [helper.make_opsetid(_LOCAL_DOMAIN, 1)]
    model = helper.make_model(graph, opset_imports=imports, functions=[local])
    model = onnx.inliner.inline_local_functions(model)
    model = onnx.shape_inference.infer_shapes(model)
    body = onnx.GraphProto()
    body.CopyFrom(model.graph)
    del body.input[:]
    return body
