"""Load an ONNX model without its weights, bind symbolic dims, and infer every tensor's shape.

Never reads weight bytes: the file is parsed with ``load_external_data=False`` (shapes and dtypes sit in
each TensorProto). The only external bytes ever read are small integer tensors (≤ ``SMALL_CONSTANT_LIMIT``
elements, shape vectors and the like) when shape inference needs their values, and only from files inside
the model's own folder.

Shape inference is ONNX's own (strict mode, data propagation). Where it leaves outputs without a static
shape, two fallbacks run: (1) small constant-only subgraphs are folded with the ONNX reference evaluator and
inference is re-run; (2) shape-preserving and broadcasting ops propagate shapes directly. What is still
unknown is reported by name with the node that produced it.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import numpy as np
import onnx
import onnx.inliner
from onnx import TensorProto, helper, numpy_helper

from onnxroof.errors import DimsError, ModelError
from onnxroof.ir import NONDETERMINISTIC_OPS, graph_value_types, normalize_domain, topological_order

SMALL_CONSTANT_LIMIT = 4096
"""Largest constant (in elements) the loader will materialise to help shape inference."""

MIN_OPSET = 7
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class LoadedModel:
    """A shape-inferred model whose weights were never loaded."""

    model: onnx.ModelProto = field(repr=False)
    path: Path | None
    value_types: Mapping[str, onnx.TypeProto] = field(repr=False)
    dims: Mapping[str, int]
    opset: int
    warnings: tuple[str, ...]


# ---------------------------------------------------------------------------------------------- reading


def read_model(source: str | os.PathLike | onnx.ModelProto) -> tuple[onnx.ModelProto, Path | None]:
    """Parse ``source`` (a path or a ModelProto) without external data; errors name the file."""
    if isinstance(source, onnx.ModelProto):
        model = onnx.ModelProto()
        model.CopyFrom(source)
        return model, None
    path = Path(source)
    if not path.exists():
        raise ModelError(f"{path}: no such file")
    if path.is_dir():
        raise ModelError(f"{path}: is a folder, not an ONNX file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf raises DecodeError and others on bad bytes
        raise ModelError(f"{path}: not a readable ONNX model ({_one_line(str(exc))})") from exc
    if model.ir_version == 0 or not model.HasField("graph"):
        raise ModelError(f"{path}: not an ONNX model (no IR version or no graph; is the file truncated?)")
    return model, path


def _one_line(text: str) -> str:
    text = re.sub(r"==> Context: Bad node spec for node\. Name: (.*?) OpType: (\S+)", r"(node '\1', \2)", text)
    return " ".join(text.split())


def _all_graphs(graph: onnx.GraphProto):
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _all_graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    yield from _all_graphs(sub)


def _external_tensors(model: onnx.ModelProto):
    for graph in _all_graphs(model.graph):
        for tensor in graph.initializer:
            if tensor.data_location == TensorProto.EXTERNAL:
                yield tensor
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_location == TensorProto.EXTERNAL:
                    yield attr.t


def _external_location(tensor: TensorProto) -> str:
    for entry in tensor.external_data:
        if entry.key == "location":
            return entry.value
    return ""


def check_external_paths(model: onnx.ModelProto, path: Path | None) -> None:
    """Every external-data location must be a relative path inside the model's folder."""
    base = (path.parent if path else Path.cwd()).resolve()
    where = str(path) if path else "<model>"
    for tensor in _external_tensors(model):
        location = _external_location(tensor)
        if not location:
            raise ModelError(f"{where}: tensor '{tensor.name}': external data has no 'location'")
        target = (base / location).resolve()
        if Path(location).is_absolute() or not target.is_relative_to(base):
            raise ModelError(
                f"{where}: tensor '{tensor.name}': external data location '{location}' points outside "
                f"the model's folder"
            )


def _without_external_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy for the checker in which no tensor refers to external data.

    The checker insists that external-data files exist (relative to the working directory); onnxroof never
    reads them, and an absent or sparse weight file must still analyze. Top-level external initializers
    become typed graph inputs (their dims kept); external tensors elsewhere (subgraph initializers,
    ``Constant`` values) become empty inline tensors of the same name and type — the checker does not infer
    shapes, so nothing else changes. Everything else is checked as is.
    """
    if next(_external_tensors(model), None) is None:
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    external = [t for t in copy.graph.initializer if t.data_location == TensorProto.EXTERNAL]
    names = {t.name for t in external}
    kept = [t for t in copy.graph.initializer if t.name not in names]
    listed = {v.name for v in copy.graph.input}
    new_inputs = [
        helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in external if t.name not in listed
    ]
    del copy.graph.initializer[:]
    copy.graph.initializer.extend(kept)
    copy.graph.input.extend(new_inputs)
    for tensor in _external_tensors(copy):  # the remaining ones: in subgraphs and Constant attributes
        tensor.CopyFrom(helper.make_tensor(tensor.name, tensor.data_type, [0], []))
    if copy.ir_version < 4:
        copy.ir_version = 4
    return copy


def check_model(model: onnx.ModelProto, path: Path | None) -> int:
    """Run the ONNX checker and the opset floor; return the default-domain opset."""
    where = str(path) if path else "<model>"
    opsets = {normalize_domain(o.domain): o.version for o in model.opset_import}
    opset = opsets.get("")
    if opset is None:
        raise ModelError(f"{where}: opset_import names no default ('ai.onnx') opset")
    if opset < MIN_OPSET:
        raise ModelError(f"{where}: opset {opset} is older than the oldest supported ({MIN_OPSET})")
    try:
        onnx.checker.check_model(_without_external_initializers(model))
    except (onnx.checker.ValidationError, ValueError) as exc:
        raise ModelError(f"{where}: fails the ONNX checker: {_one_line(str(exc))}") from exc
    return opset


# ----------------------------------------------------------------------------------------- symbolic dims


def _dim_key(value: onnx.ValueInfoProto, axis: int, dim: onnx.TensorShapeProto.Dimension) -> str | None:
    if dim.HasField("dim_value"):
        return None
    return dim.dim_param if dim.dim_param else f"{value.name}:{axis}"


def symbolic_dims(model: onnx.ModelProto) -> dict[str, list[str]]:
    """Symbol -> places ("input 'x' axis 0") over the model's user inputs. Unnamed dims get 'INPUT:AXIS'."""
    initializers = {t.name for t in model.graph.initializer}
    found: dict[str, list[str]] = {}
    for value in model.graph.input:
        if value.name in initializers or not value.type.HasField("tensor_type"):
            continue
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            key = _dim_key(value, axis, dim)
            if key is not None:
                found.setdefault(key, []).append(f"input '{value.name}' axis {axis}")
    return found


def parse_dim_bindings(items: list[str] | tuple[str, ...]) -> dict[str, int]:
    """``["batch=1", "seq=128"]`` -> ``{"batch": 1, "seq": 128}``; errors name the bad item."""
    dims: dict[str, int] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise DimsError(f"--dim {item!r}: expected NAME=VALUE, e.g. --dim batch=1")
        dims[name] = _positive_int(name, value.strip())
    return dims


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool):
        raise DimsError(f"dim '{name}': value must be a positive integer, got {value!r}")
    if isinstance(value, int | np.integer) or (isinstance(value, str) and re.fullmatch(r"\+?\d+", value)):
        number = int(value)
    else:
        raise DimsError(f"dim '{name}': value must be a positive integer, got {value!r}")
    if not 0 < number <= _INT64_MAX:
        raise DimsError(f"dim '{name}': value must be a positive integer below 2**63, got {value!r}")
    return number


def bind_dims(model: onnx.ModelProto, dims: Mapping[str, object]) -> tuple[dict[str, int], list[str]]:
    """Replace bound symbols by values on inputs, outputs and value_info (in place).

    Returns the validated bindings and warnings for bindings the model does not use. Raises
    :class:`DimsError` listing every unbound symbol of the user inputs.
    """
    bound = {name: _positive_int(name, value) for name, value in dims.items()}
    symbols = symbolic_dims(model)
    unbound = {s: places for s, places in symbols.items() if s not in bound}
    if unbound:
        listed = "; ".join(f"{s} ({', '.join(p)})" for s, p in unbound.items())
        example = " ".join(f"--dim {s}=N" for s in unbound)
        raise DimsError(f"unbound symbolic dims: {listed}. Bind them with {example} (or dims={{...}} in the API)")
    warnings = [
        f"--dim {name}: the model's inputs have no symbolic dim of that name" for name in bound if name not in symbols
    ]
    initializers = {t.name for t in model.graph.initializer}
    for value in [*model.graph.input, *model.graph.output, *model.graph.value_info]:
        if value.name in initializers or not value.type.HasField("tensor_type"):
            continue
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            key = _dim_key(value, axis, dim)
            if key in bound:
                dim.Clear()
                dim.dim_value = bound[key]
    return bound, warnings


# ------------------------------------------------------------------------------------------ inference


def infer(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """ONNX shape inference, strict with data propagation; on failure, warn and retry leniently."""
    warnings: list[str] = []
    try:
        return onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True), warnings
    except Exception as exc:  # InferenceError, or a checker error raised from inside inference
        warnings.append(f"strict shape inference failed ({_one_line(str(exc))}); continuing without strict mode")
    try:
        return onnx.shape_inference.infer_shapes(model, data_prop=True), warnings
    except Exception as exc:
        warnings.append(f"shape inference failed ({_one_line(str(exc))}); shapes come from fallbacks only")
        return model, warnings


def value_types(model: onnx.ModelProto) -> dict[str, onnx.TypeProto]:
    return graph_value_types(model.graph)


def _is_static(type_proto: onnx.TypeProto | None) -> bool:
    if type_proto is None or not type_proto.HasField("tensor_type"):
        return False
    tensor_type = type_proto.tensor_type
    return (
        tensor_type.elem_type != 0
        and tensor_type.HasField("shape")
        and all(d.HasField("dim_value") for d in tensor_type.shape.dim)
    )


def missing_outputs(model: onnx.ModelProto, types: Mapping[str, onnx.TypeProto]) -> list[str]:
    return [o for n in model.graph.node for o in n.output if o and not _is_static(types.get(o))]


# -- fallback 1: fold small constant-only subgraphs, then re-infer


def _small_constant_values(model: onnx.ModelProto, base: Path | None) -> dict[str, np.ndarray]:
    values: dict[str, np.ndarray] = {}
    for tensor in model.graph.initializer:
        numel = math.prod(tensor.dims)
        if numel > SMALL_CONSTANT_LIMIT:
            continue
        if tensor.data_location == TensorProto.EXTERNAL:
            if base is None or tensor.data_type not in (TensorProto.INT64, TensorProto.INT32):
                continue
            array = _read_small_external(tensor, base)
            if array is not None:
                values[tensor.name] = array
            continue
        values[tensor.name] = numpy_helper.to_array(tensor)
    return values


def _read_small_external(tensor: TensorProto, base: Path) -> np.ndarray | None:
    """Read one small integer external tensor (within the model's folder; checked before)."""
    info = {e.key: e.value for e in tensor.external_data}
    target = (base / info.get("location", "")).resolve()
    dtype = np.int64 if tensor.data_type == TensorProto.INT64 else np.int32
    count = math.prod(tensor.dims)
    try:
        with open(target, "rb") as handle:
            handle.seek(int(info.get("offset", 0)))
            raw = handle.read(count * np.dtype(dtype).itemsize)
    except OSError:
        return None
    if len(raw) != count * np.dtype(dtype).itemsize:
        return None
    return np.frombuffer(raw, dtype=dtype).reshape(tuple(tensor.dims))


_MAY_GROW = frozenset({"Expand", "Tile", "Range", "Resize", "Upsample", "Pad", "OneHot", "EyeLike"})


def _shape_values(model: onnx.ModelProto, types: Mapping[str, onnx.TypeProto]) -> dict[str, np.ndarray]:
    """Values of ``Shape``/``Size`` nodes whose input has a static shape (known at load time)."""
    values: dict[str, np.ndarray] = {}
    for node in model.graph.node:
        if node.op_type not in ("Shape", "Size") or normalize_domain(node.domain) or not node.input:
            continue
        source = types.get(node.input[0])
        if not _is_static(source):
            continue
        dims = [d.dim_value for d in source.tensor_type.shape.dim]
        if node.op_type == "Size":
            values[node.output[0]] = np.array(math.prod(dims), dtype=np.int64)
            continue
        attrs = {a.name: a.i for a in node.attribute}
        values[node.output[0]] = np.array(
            dims[attrs.get("start", 0) : attrs.get("end", len(dims))]
            if "end" in attrs
            else dims[attrs.get("start", 0) :],
            dtype=np.int64,
        )
    return values


def fold_small_constants(
    model: onnx.ModelProto, base: Path | None, types: Mapping[str, onnx.TypeProto]
) -> tuple[onnx.ModelProto, int]:
    """Evaluate constant-only nodes whose outputs are small; return a copy with them as initializers.

    Seeds: small initializers, and ``Shape``/``Size`` of statically shaped tensors.
    """
    from onnx.reference import ReferenceEvaluator

    values = _small_constant_values(model, base)
    shape_values = _shape_values(model, types)
    values.update(shape_values)
    opsets = list(model.opset_import)
    nodes = list(model.graph.node)
    folded: dict[str, np.ndarray] = {}
    for index in topological_order(nodes, set(values)):
        node = nodes[index]
        if (
            node.op_type in NONDETERMINISTIC_OPS
            or node.op_type in _MAY_GROW
            or any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)
        ):
            continue
        inputs = [n for n in node.input if n]
        if node.output[0] in shape_values or not all(n in values for n in inputs) or normalize_domain(node.domain):
            continue
        if node.op_type == "ConstantOfShape" and math.prod(values[inputs[0]].tolist()) > SMALL_CONSTANT_LIMIT:
            continue
        try:
            graph = helper.make_graph(
                [node],
                "fold",
                [
                    helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(values[n].dtype), None)
                    for n in dict.fromkeys(inputs)
                ],
                [helper.make_tensor_value_info(o, 0, None) for o in node.output if o],
            )
            single = helper.make_model(graph, opset_imports=opsets, ir_version=model.ir_version)
            results = ReferenceEvaluator(single).run(None, {n: values[n] for n in dict.fromkeys(inputs)})
        except Exception:
            continue
        for name, result in zip([o for o in node.output if o], results, strict=False):
            array = np.asarray(result)
            if array.size <= SMALL_CONSTANT_LIMIT:
                values[name] = array
                folded[name] = array
    folded.update(shape_values)
    if not folded:
        return model, 0
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    kept = [n for n in copy.graph.node if not (set(n.output) & set(folded))]
    del copy.graph.node[:]
    copy.graph.node.extend(kept)
    copy.graph.initializer.extend(numpy_helper.from_array(a, name) for name, a in folded.items())
    return copy, len(folded)


# -- fallback 2: propagate shapes through shape-preserving and broadcasting ops

_SAME_SHAPE = frozenset(
    {
        "Abs",
        "Acos",
        "Acosh",
        "Asin",
        "Asinh",
        "Atan",
        "Atanh",
        "BatchNormalization",
        "Cast",
        "Ceil",
        "Celu",
        "Clip",
        "Cos",
        "Cosh",
        "Dropout",
        "Elu",
        "Erf",
        "Exp",
        "Floor",
        "Gelu",
        "HardSigmoid",
        "HardSwish",
        "Hardmax",
        "Identity",
        "InstanceNormalization",
        "IsInf",
        "IsNaN",
        "LRN",
        "LayerNormalization",
        "LeakyRelu",
        "Log",
        "LogSoftmax",
        "Mish",
        "Neg",
        "Not",
        "Reciprocal",
        "Relu",
        "Round",
        "Selu",
        "Shrink",
        "Sigmoid",
        "Sign",
        "Sin",
        "Sinh",
        "Softmax",
        "Softplus",
        "Softsign",
        "Sqrt",
        "Tan",
        "Tanh",
        "ThresholdedRelu",
        "Trilu",
        "CumSum",
        "GroupNormalization",
    }
)
_BROADCAST = frozenset(
    {
        "Add",
        "Sub",
        "Mul",
        "Div",
        "Pow",
        "Mod",
        "PRelu",
        "Max",
        "Min",
        "Sum",
        "Mean",
        "Where",
        "Equal",
        "Less",
        "LessOrEqual",
        "Greater",
        "GreaterOrEqual",
        "And",
        "Or",
        "Xor",
        "BitShift",
    }
)
_BOOL_OUT = frozenset(
    {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Not", "IsNaN", "IsInf"}
)


def propagate_fallback(model: onnx.ModelProto, types: dict[str, onnx.TypeProto]) -> int:
    """Fill missing output types from input shapes for simple ops; returns how many were filled."""
    filled = 0
    nodes = list(model.graph.node)
    for index in topological_order(nodes, set(types)):
        node = nodes[index]
        if normalize_domain(node.domain) or all(_is_static(types.get(o)) for o in node.output if o):
            continue
        ins = [types.get(n) if n else None for n in node.input]
        shape, elem = _fallback_shape(node, ins)
        if shape is None:
            continue
        for k, out in enumerate(node.output):
            if not out or _is_static(types.get(out)):
                continue
            out_elem = elem
            if node.op_type in _BOOL_OUT or (node.op_type == "Dropout" and k == 1):
                out_elem = TensorProto.BOOL
            elif node.op_type == "Cast":
                out_elem = next((a.i for a in node.attribute if a.name == "to"), elem)
            if k > 0 and node.op_type not in ("Dropout",):
                continue
            types[out] = helper.make_tensor_type_proto(out_elem, list(shape))
            filled += 1
    return filled


def _fallback_shape(node: onnx.NodeProto, ins: list) -> tuple[tuple[int, ...] | None, int]:
    present = [t for t in ins if t is not None]
    if not present or not all(_is_static(t) for t in present):
        return None, 0
    shapes = [tuple(d.dim_value for d in t.tensor_type.shape.dim) for t in present]
    elem = present[0].tensor_type.elem_type if node.op_type != "Where" else present[-1].tensor_type.elem_type
    if node.op_type in _SAME_SHAPE:
        return shapes[0], elem
    if node.op_type in _BROADCAST:
        try:
            return tuple(np.broadcast_shapes(*shapes)), elem
        except ValueError:
            return None, 0
    return None, 0


# ------------------------------------------------------------------------------------------- entry point


def load_model(source: str | os.PathLike | onnx.ModelProto, dims: Mapping[str, object] | None = None) -> LoadedModel:
    """Read, check, bind dims, inline local functions and infer shapes; never reads weight bytes."""
    model, path = read_model(source)
    check_external_paths(model, path)
    opset = check_model(model, path)
    warnings: list[str] = []
    if model.functions:
        try:
            model = onnx.inliner.inline_local_functions(model)
        except Exception as exc:
            warnings.append(
                f"could not inline model-local functions ({_one_line(str(exc))}); their calls are "
                f"reported as unsupported"
            )
    bound, bind_warnings = bind_dims(model, dims or {})
    warnings += bind_warnings
    inferred, infer_warnings = infer(model)
    warnings += infer_warnings
    types = value_types(inferred)
    if missing_outputs(inferred, types):
        folded_model, count = fold_small_constants(inferred, path.parent.resolve() if path else None, types)
        if count:
            refolded, _ = infer(folded_model)
            refolded_types = value_types(refolded)
            for name, type_proto in refolded_types.items():
                if not _is_static(types.get(name)) and _is_static(type_proto):
                    types[name] = type_proto
        propagate_fallback(inferred, types)
    return LoadedModel(inferred, path, MappingProxyType(types), MappingProxyType(bound), opset, tuple(warnings))
