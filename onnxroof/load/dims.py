"""Symbolic input dims: find them, parse ``NAME=VALUE`` and ``INPUT=AxBxC`` bindings, bind them on a model in place.

A dim is *named* when its ``dim_param`` is a real name (``batch``, ``seq``); converters also write ``?``
(Paddle2ONNX, spox), an empty name or a negative ``dim_value`` (-1) for "unknown": those are anonymous, one per
axis and possibly of different sizes, so each is named ``INPUT:AXIS`` (bind it with ``--dim INPUT:AXIS=N`` or
with the whole input's shape, ``--shape INPUT=1x3x48x192``, the convention of trtexec's ``--shapes`` and
onnxsim's ``--overwrite-input-shape``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import onnx

from onnxroof.core.errors import DimsError

_INT64_MAX = 2**63 - 1


#: dim_param values that mean "unknown" rather than naming a dim shared between axes.
ANONYMOUS_NAMES = frozenset({"", "?"})


def _dim_key(value: onnx.ValueInfoProto, axis: int, dim: onnx.TensorShapeProto.Dimension) -> str | None:
    """The symbol of an input axis, or None when its size is a known (non-negative) number."""
    if dim.HasField("dim_value") and dim.dim_value >= 0:
        return None
    name = dim.dim_param.strip() if dim.HasField("dim_param") else ""
    return f"{value.name}:{axis}" if name in ANONYMOUS_NAMES else name


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
    """``["batch=1", "seq=128"]`` -> ``{"batch": 1, "seq": 128}``; errors name the bad item.

    The value follows the LAST ``=``, so a dim whose name holds ``=`` binds too (``a=b=2`` binds ``a=b``).
    """
    dims: dict[str, int] = {}
    for item in items:
        name, sep, value = item.rpartition("=")
        name = name.strip()
        if not sep or not name:
            raise DimsError(f"--dim {item!r}: expected NAME=VALUE, e.g. --dim batch=1")
        dims[name] = _positive_int(name, value.strip())
    return dims


def parse_shape_bindings(items: list[str] | tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """``["image=1x3x48x192"]`` -> ``{"image": (1, 3, 48, 192)}`` (``x`` or ``,`` between dims; the input name
    is what precedes the LAST ``=``); errors name the bad item."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, sep, text = item.rpartition("=")
        name = name.strip()
        parts = [p.strip() for p in re.split(r"[x,]", text.strip().lower())] if text.strip() else []
        if not sep or not name or not parts or any(not p for p in parts):
            raise DimsError(f"--shape {item!r}: expected INPUT=DIMxDIMx..., e.g. --shape image=1x3x224x224")
        if name in shapes:
            raise DimsError(f"--shape {item!r}: input '{name}' is given twice")
        shapes[name] = tuple(_positive_int(f"{name}:{axis}", part) for axis, part in enumerate(parts))
    return shapes


def shape_bindings(
    model: onnx.ModelProto, shapes: Mapping[str, tuple[int, ...]], dims: Mapping[str, int] | None = None
) -> dict[str, int]:
    """The dim bindings that whole-input ``shapes`` imply, merged with ``dims``: one symbol per symbolic axis.

    Raises :class:`DimsError` naming the input for an unknown input, a rank that differs from the model's, a size
    that contradicts a fixed dim, or a symbol that two bindings (two inputs, or ``--shape`` and ``--dim``) give
    different values.
    """
    merged = {name: _positive_int(name, value) for name, value in (dims or {}).items()}
    origin = {name: f"--dim {name}={value}" for name, value in merged.items()}
    inputs = {v.name: v for v in model.graph.input if v.type.HasField("tensor_type")}
    for name, shape in shapes.items():
        value = inputs.get(name)
        if value is None:
            raise DimsError(f"--shape {name}=...: the model has no input '{name}' (inputs: {', '.join(inputs)})")
        declared = value.type.tensor_type.shape.dim
        if value.type.tensor_type.HasField("shape") and len(declared) != len(shape):
            raise DimsError(f"--shape {name}=...: {len(shape)} dims given, input '{name}' has rank {len(declared)}")
        for axis, (dim, size) in enumerate(zip(declared, shape, strict=False)):
            key = _dim_key(value, axis, dim)
            if key is None:
                if dim.dim_value != size:
                    raise DimsError(
                        f"--shape {name}=...: axis {axis} is fixed at {dim.dim_value} in the model, not {size}"
                    )
                continue
            if key in merged and merged[key] != size:
                raise DimsError(f"--shape {name}=...: axis {axis} ('{key}') = {size} conflicts with {origin[key]}")
            merged[key], origin[key] = size, f"--shape {name}=... (axis {axis})"
    return merged


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
