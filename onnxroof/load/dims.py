"""Symbolic input dims: find them, parse ``NAME=VALUE`` bindings, and bind them on a model in place."""

from __future__ import annotations

import re
from collections.abc import Mapping

import numpy as np
import onnx

from onnxroof.core.errors import DimsError

_INT64_MAX = 2**63 - 1


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
