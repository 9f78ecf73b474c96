"""Symbolic input dims: find them, parse ``NAME=VALUE`` and ``INPUT=AxBxC`` bindings, bind them on a model in place.

A dim is *named* when its ``dim_param`` is a real name (``batch``, ``seq``); converters also write ``?``
(Paddle2ONNX, spox), an empty name or a negative ``dim_value`` (-1) for "unknown": those are anonymous, one per
axis and possibly of different sizes, so each is named ``INPUT:AXIS`` (bind it with ``--dim INPUT:AXIS=N`` or
with the whole input's shape, ``--shape INPUT=1x3x48x192``, the convention of trtexec's ``--shapes`` and
onnxsim's ``--overwrite-input-shape``).

A dim value is a non-negative integer: 0 is valid (``--dim past_sequence_length=0`` is a prefill with an empty
KV cache; a zero-size tensor costs nothing). A ``dim_param`` that is an arithmetic expression of other dims
(``past_sequence_length + sequence_length``, as Optimum writes it; ``+ - * //``, parentheses and integer
literals) is computed from its bound parts by :func:`parse_dim_expression` (a tiny parser, never ``eval``) and
needs no binding of its own; binding its literal text is accepted and must agree with the computed value.

A scalar boolean input (one element, e.g. Optimum's ``use_cache_branch``) can be bound to a VALUE with the same
``--dim NAME=0|1``: the loader then treats it as a constant, so an ``If`` on it costs the branch that runs
(see :mod:`onnxroof.costing.control_flow`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

import numpy as np
import onnx

from onnxroof.core.errors import DimsError, ModelError
from onnxroof.core.frozen import frozen_dataclass

_INT64_MAX = 2**63 - 1


#: dim_param values that mean "unknown" rather than naming a dim shared between axes.
ANONYMOUS_NAMES = frozenset({"", "?"})


# ------------------------------------------------------------------------------------- dim expressions

#: A parsed dim expression: an int, a name, or ``(op, left, right)``.
_Tree = int | str | tuple[str, "_Tree", "_Tree"]

_TOKEN = re.compile(r"\s*(?:(?P<int>\d+)|(?P<name>[A-Za-z_][A-Za-z0-9_.]*)|(?P<op>//|[-+*()]))")


@frozen_dataclass
class DimExpr:
    """A parsed dim expression: ``tree`` is an int, a name, or ``(op, left, right)`` with op in ``+ - * //``."""

    text: str
    tree: _Tree
    names: tuple[str, ...]

    def evaluate(self, values: Mapping[str, int]) -> int:
        """The expression's value; raises :class:`DimsError` on a negative result or a division by zero."""
        result = _evaluate(self.tree, values, self.text)
        if result < 0:
            raise DimsError(f"dim '{self.text}' evaluates to {result} with the bound dims; a dim cannot be negative")
        return result


def _evaluate(tree: _Tree, values: Mapping[str, int], text: str) -> int:
    if isinstance(tree, int):
        return tree
    if isinstance(tree, str):
        return values[tree]
    op, left, right = tree
    a, b = _evaluate(left, values, text), _evaluate(right, values, text)
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        raise DimsError(f"dim '{text}': division by zero with the bound dims")
    return a // b


def parse_dim_expression(text: str) -> DimExpr | None:
    """``"past_sequence_length + sequence_length"`` -> a :class:`DimExpr`; None when ``text`` is a plain name
    or not an expression of names and integers with ``+ - * //`` and parentheses (precedence as in Python).

    Grammar: ``expr := term (("+" | "-") term)*``, ``term := atom (("*" | "//") atom)*``,
    ``atom := INT | NAME | "(" expr ")"``. Never evaluates code.
    """
    tokens: list[tuple[str, str]] = []
    position, stripped = 0, text.rstrip()
    while position < len(stripped):
        match = _TOKEN.match(stripped, position)
        if match is None or match.end() == position:
            return None
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        position = match.end()
    if not any(kind == "op" and value not in "()" for kind, value in tokens):
        return None
    names: list[str] = []

    def atom(i: int) -> tuple[_Tree, int]:
        if i >= len(tokens):
            raise ValueError
        kind, value = tokens[i]
        if kind == "int":
            return int(value), i + 1
        if kind == "name":
            names.append(value)
            return value, i + 1
        if value == "(":
            tree, j = expr(i + 1)
            if j >= len(tokens) or tokens[j][1] != ")":
                raise ValueError
            return tree, j + 1
        raise ValueError

    def binary(i: int, ops: tuple[str, ...], operand: Callable[[int], tuple[_Tree, int]]) -> tuple[_Tree, int]:
        tree: _Tree
        tree, i = operand(i)
        while i < len(tokens) and tokens[i] in (("op", op) for op in ops):
            op = tokens[i][1]
            right, i = operand(i + 1)
            tree = (op, tree, right)
        return tree, i

    def term(i: int) -> tuple[_Tree, int]:
        return binary(i, ("*", "//"), atom)

    def expr(i: int) -> tuple[_Tree, int]:
        return binary(i, ("+", "-"), term)

    try:
        tree, end = expr(0)
    except ValueError:
        return None
    if end != len(tokens):
        return None
    return DimExpr(text, tree, tuple(dict.fromkeys(names)))


# ------------------------------------------------------------------------------------------ symbols


def _dim_key(value: onnx.ValueInfoProto, axis: int, dim: onnx.TensorShapeProto.Dimension) -> str | None:
    """The symbol of an input axis, or None when its size is a known (non-negative) number."""
    if dim.HasField("dim_value") and dim.dim_value >= 0:
        return None
    param = dim.dim_param if dim.HasField("dim_param") else ""
    if not isinstance(param, str):  # protobuf hands over a string that is not valid UTF-8 as bytes
        raise ModelError(f"input '{value.name}' axis {axis}: the dim's name is not valid UTF-8 ({param!r})")
    name = param.strip()
    return f"{value.name}:{axis}" if name in ANONYMOUS_NAMES else name


def symbolic_dims(model: onnx.ModelProto) -> dict[str, list[str]]:
    """Symbol -> places ("input 'x' axis 0") over the model's user inputs. Unnamed dims get 'INPUT:AXIS'; a
    dim expression contributes the names it is computed from, not its own text."""
    initializers = {t.name for t in model.graph.initializer}
    found: dict[str, list[str]] = {}
    for value in model.graph.input:
        if value.name in initializers or not value.type.HasField("tensor_type"):
            continue
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            key = _dim_key(value, axis, dim)
            if key is None:
                continue
            expression = parse_dim_expression(key)
            for part in expression.names if expression else (key,):
                found.setdefault(part, []).append(f"input '{value.name}' axis {axis}")
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
        dims[name] = _dim_int(name, value.strip())
    return dims


def parse_shape_bindings(items: list[str] | tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """``["image=1x3x48x192"]`` -> ``{"image": (1, 3, 48, 192)}`` (``x`` or ``,`` between dims; the input name
    is what precedes the LAST ``=``). An item without ``=`` is read as trtexec's ``--shapes``:
    ``image:1x3x48x192`` or a comma-separated list ``ids:1x128,mask:1x128`` (the name is what precedes the
    LAST ``:``, so ``input:0:1x3`` names ``input:0``; quotes around a name are dropped). Errors name the bad
    item."""
    shapes: dict[str, tuple[int, ...]] = {}
    for item in items:
        pairs = [item.rpartition("=")] if "=" in item else [part.rpartition(":") for part in item.split(",")]
        for name, sep, text in pairs:
            name = name.strip().strip("'\"")
            parts = [p.strip() for p in re.split(r"[x,]", text.strip().lower())] if text.strip() else []
            if not sep or not name or not parts or any(not p for p in parts):
                raise DimsError(
                    f"--shape {item!r}: expected INPUT=DIMxDIMx... or trtexec's INPUT:DIMxDIM...[,INPUT:...], "
                    "e.g. --shape image=1x3x224x224"
                )
            if name in shapes:
                raise DimsError(f"--shape {item!r}: input '{name}' is given twice")
            shapes[name] = tuple(_dim_int(f"{name}:{axis}", part) for axis, part in enumerate(parts))
    return shapes


def shape_bindings(
    model: onnx.ModelProto, shapes: Mapping[str, tuple[int, ...]], dims: Mapping[str, object] | None = None
) -> dict[str, int]:
    """The dim bindings that whole-input ``shapes`` imply, merged with ``dims``: one symbol per symbolic axis.

    Raises :class:`DimsError` naming the input for an unknown input, a rank that differs from the model's, a size
    that contradicts a fixed dim, or a symbol that two bindings (two inputs, or ``--shape`` and ``--dim``) give
    different values.
    """
    merged = {name: _dim_int(name, value) for name, value in (dims or {}).items()}
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


def _dim_int(name: str, value: object) -> int:
    """A dim value: a non-negative integer below 2**63 (0 is a valid size: an empty KV cache)."""
    if isinstance(value, bool):
        raise DimsError(f"dim '{name}': value must be a non-negative integer, got {value!r}")
    if isinstance(value, int | np.integer) or (isinstance(value, str) and re.fullmatch(r"\+?\d+", value)):
        number = int(value)
    else:
        raise DimsError(f"dim '{name}': value must be a non-negative integer, got {value!r}")
    if not 0 <= number <= _INT64_MAX:
        raise DimsError(f"dim '{name}': value must be a non-negative integer below 2**63, got {value!r}")
    return number


def _scalar_bool_inputs(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    """User inputs of type bool with exactly one element (rank 0, or every dim 1)."""
    initializers = {t.name for t in model.graph.initializer}
    found = {}
    for value in model.graph.input:
        if value.name in initializers or not value.type.HasField("tensor_type"):
            continue
        tensor_type = value.type.tensor_type
        if tensor_type.elem_type != onnx.TensorProto.BOOL or not tensor_type.HasField("shape"):
            continue
        if all(d.HasField("dim_value") and d.dim_value == 1 for d in tensor_type.shape.dim):
            found[value.name] = value
    return found


def _bind_values(model: onnx.ModelProto, values: Mapping[str, int]) -> None:
    """Turn each bound scalar bool input into an initializer holding its value (in place)."""
    inputs = _scalar_bool_inputs(model)
    for name, number in values.items():
        if number not in (0, 1):
            raise DimsError(f"--dim {name}={number}: '{name}' is a boolean input: bind it to 0 or 1")
        shape = [d.dim_value for d in inputs[name].type.tensor_type.shape.dim]
        model.graph.initializer.append(onnx.helper.make_tensor(name, onnx.TensorProto.BOOL, shape, [bool(number)]))
        if model.ir_version >= 4:  # initializers need not be inputs since IR 4: the input goes away
            kept = [v for v in model.graph.input if v.name != name]
            del model.graph.input[:]
            model.graph.input.extend(kept)


def bind_dims(model: onnx.ModelProto, dims: Mapping[str, object]) -> tuple[dict[str, int], list[str]]:
    """Replace bound symbols by values on inputs, outputs and value_info (in place).

    Dim expressions (:func:`parse_dim_expression`) are computed from their bound parts. A name that is no
    symbol but a scalar bool input binds that input's value (0 or 1; it becomes a constant). Returns the
    validated bindings and warnings for bindings the model does not use. Raises :class:`DimsError` listing
    every unbound symbol of the user inputs.
    """
    bound = {name: _dim_int(name, value) for name, value in dims.items()}
    symbols = symbolic_dims(model)
    expressions, literal = _input_expressions(model, bound)
    _require_bound(symbols, bound, expressions, literal)
    bool_inputs = _scalar_bool_inputs(model)
    values = {name: number for name, number in bound.items() if name not in symbols and name in bool_inputs}
    warnings = [
        f"--dim {name}: the model's inputs have no symbolic dim of that name"
        for name in bound
        if name not in symbols and name not in values and name not in literal
    ]
    _write_sizes(model, bound, expressions)
    _bind_values(model, values)
    return bound, warnings


def _input_expressions(
    model: onnx.ModelProto, bound: Mapping[str, int]
) -> tuple[dict[str, DimExpr | None], dict[str, int]]:
    """The dim keys of the graph's inputs, each with its parsed expression (None for a plain name), and the
    expression texts the user bound as names (checked later against their computed value)."""
    expressions: dict[str, DimExpr | None] = {}
    literal = {}
    for value in model.graph.input:
        if not value.type.HasField("tensor_type"):
            continue
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            key = _dim_key(value, axis, dim)
            if key is not None and key not in expressions:
                expressions[key] = parse_dim_expression(key)
                if expressions[key] is not None and key in bound:
                    literal[key] = bound[key]
    return expressions, literal


def _require_bound(
    symbols: Mapping[str, list[str]],
    bound: Mapping[str, int],
    expressions: Mapping[str, DimExpr | None],
    literal: Mapping[str, int],
) -> None:
    """Raise :class:`DimsError` listing every symbol of the user inputs that has no binding; a part used only
    inside expressions bound by their text needs none."""
    unbound = {s: places for s, places in symbols.items() if s not in bound}
    for part in list(unbound):
        users = [k for k, e in expressions.items() if e is not None and part in e.names]
        if part not in expressions and users and all(k in literal for k in users):
            del unbound[part]
    if unbound:
        listed = "; ".join(f"{s} ({_places(p)})" for s, p in unbound.items())
        example = " ".join(f"--dim {s}=N" for s in unbound)
        raise DimsError(f"unbound symbolic dims: {listed}. Bind them with {example} (or dims={{...}} in the API)")


#: How many inputs an unbound dim's error names before "and N more" (a decoder's past length is on 64 inputs).
PLACES_SHOWN = 3


def _places(places: list[str]) -> str:
    """The first :data:`PLACES_SHOWN` of ``places``, then how many more there are."""
    shown = ", ".join(places[:PLACES_SHOWN])
    more = len(places) - PLACES_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def _write_sizes(model: onnx.ModelProto, bound: Mapping[str, int], expressions: Mapping[str, DimExpr | None]) -> None:
    """Write the size of every dim that has one (:func:`_size_of`) as its ``dim_value`` on the model's
    non-initializer inputs, outputs and value_info (in place)."""
    resolved: dict[str, int | None] = {}
    initializers = {t.name for t in model.graph.initializer}
    for value in [*model.graph.input, *model.graph.output, *model.graph.value_info]:
        if value.name in initializers or not value.type.HasField("tensor_type"):
            continue
        for axis, dim in enumerate(value.type.tensor_type.shape.dim):
            key = _dim_key(value, axis, dim)
            size = None if key is None else _size_of(key, bound, expressions, resolved)
            if size is not None:
                dim.Clear()
                dim.dim_value = size


def _size_of(
    key: str,
    bound: Mapping[str, int],
    expressions: Mapping[str, DimExpr | None],
    resolved: dict[str, int | None],
) -> int | None:
    """The size of dim ``key``: its binding (which must equal its expression's value when every part is bound),
    else its expression computed from the bound dims (memoized in ``resolved``), else None (left symbolic)."""
    if key in bound:
        size = bound[key]
        expression = expressions[key] if key in expressions else parse_dim_expression(key)
        if expression is not None and all(p in bound for p in expression.names):
            computed = expression.evaluate(bound)
            if computed != size:
                raise DimsError(f"--dim '{key}'={size} contradicts its parts: {key} = {computed} with the bound dims")
        return size
    if key not in resolved:
        expression = expressions[key] if key in expressions else parse_dim_expression(key)
        known = expression is not None and all(p in bound for p in expression.names)
        resolved[key] = expression.evaluate(bound) if expression is not None and known else None
    return resolved[key]
