"""Find a decoder's KV cache in its graph and the roles of its symbolic dims, without reading a weight.

Past inputs, as the exporters write them:

* by name: ``past_key_values.N.key|value`` (ONNX Runtime GenAI, Optimum), ``past_key`` / ``past_value`` and
  other names holding ``past`` and ``key`` or ``value``;
* by position: inputs 4 and 5 of an opset-23 ``Attention`` (outputs 1 and 2 are the present), inputs 3 and 4 of
  ``com.microsoft::GroupQueryAttention``, 6 and 7 of ``MultiHeadAttention`` (outputs 1 and 2).

Each past input is ``[batch, kv_heads, past, head_dim]``; its present output ``[batch, kv_heads, total,
head_dim]`` (``present.N.key`` for ``past_key_values.N.key``, or the attention op's outputs). The roles:

* ``batch``: axis 0's symbol; ``past``: axis 2's; ``total``: the present's axis 2 (a symbol, or an expression
  such as ``past_sequence_length + sequence_length`` that the loader computes);
* ``new``: the one remaining symbol of the user inputs (``sequence_length``); when several remain, the one on
  ``input_ids`` axis 1;
* a symbolic head dim (GenAI's ``kv_cache_dim``) is bound from the present output, else from the attention
  op: ``width / (num_heads + 2 · kv_num_heads)`` of GroupQueryAttention's packed QKV input (its producer's
  weight width, MatMulNBits' ``N``);
* ``branch``: a scalar bool input (Optimum merged's ``use_cache_branch``): 0 for the prefill, 1 for a decode step.

Per-token cache bytes: ``Σ over past tensors of kv_heads · head_dim · itemsize`` = ``2 · layers · kv_heads ·
head_dim · itemsize``. When a role cannot be told, :class:`KVCacheError` names what was found and the option that
maps it: ``kv_dims={"new": NAME}`` (``--kv-dims new=NAME``) or ``dims={NAME: VALUE}`` (``--dim NAME=VALUE``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

import onnx

from onnxroof.core.dtypes import dtype_info
from onnxroof.core.errors import DimsError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.load.dims import parse_dim_expression, symbolic_dims

ROLES = ("batch", "new", "past", "total")
_PAST_NAME = re.compile(r"past.*(key|value)", re.IGNORECASE)
_POSITIONS = {  # (domain, op_type) -> (past input indices, present output indices)
    ("", "Attention"): ((4, 5), (1, 2)),
    ("com.microsoft", "GroupQueryAttention"): ((3, 4), (1, 2)),
    ("com.microsoft", "MultiHeadAttention"): ((6, 7), (1, 2)),
}


class KVCacheError(DimsError):
    """The KV cache or the role of one of its dims cannot be told from the graph."""


@frozen_dataclass(slots=True)
class KVCache:
    """The cache tensors found and the dims each phase binds."""

    past: tuple[str, ...]
    """Past inputs, in graph order."""
    present: tuple[str | None, ...]
    """Each past input's present output (None: not found)."""
    roles: Mapping[str, str | None]
    """``batch``, ``new``, ``past``, ``total`` to the symbol (None: no such symbol among the inputs)."""
    branch: str | None
    """The scalar bool input choosing the cache branch (Optimum merged), or None."""
    fixed: Mapping[str, int]
    """Other symbols bound once (a symbolic head dim)."""
    kv_heads: int
    head_dim: int
    itemsize: float
    dtype: str
    bytes_per_token: float
    """Cache bytes per token of context per sequence: ``Σ kv_heads · head_dim · itemsize`` over past tensors."""
    symbols: frozenset[str] = frozenset()
    """The user inputs' symbols: only these are bound (an expression or an output-only total is computed)."""

    @property
    def layers(self) -> int:
        """``len(past) / 2`` (a key and a value per layer)."""
        return len(self.past) // 2

    def dims(self, batch: int, new: int, past: int) -> dict[str, int]:
        """The bindings of one phase: ``total = past + new``; the branch is ``past > 0``."""
        values = {"batch": batch, "new": new, "past": past, "total": past + new}
        dims = dict(self.fixed)
        dims.update({s: values[role] for role, s in self.roles.items() if s and s in self.symbols})
        if self.branch:
            dims[self.branch] = int(past > 0)
        return dims


def _shape(value: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_param if d.HasField("dim_param") else d.dim_value for d in value.type.tensor_type.shape.dim]


def _pairs(model: onnx.ModelProto) -> dict[str, str | None]:
    """Past input name -> present output name (None when no present is found)."""
    graph = model.graph
    inputs = {v.name for v in graph.input}
    outputs = {v.name for v in graph.output}
    pairs: dict[str, str | None] = {}
    for node in graph.node:
        spec = _POSITIONS.get((node.domain if node.domain != "ai.onnx" else "", node.op_type))
        if spec is None:
            continue
        for i, o in zip(*spec, strict=True):
            name = node.input[i] if i < len(node.input) else ""
            if name in inputs:
                present = node.output[o] if o < len(node.output) else ""
                pairs[name] = present if present in outputs else None
    for value in graph.input:
        if value.name not in pairs and _PAST_NAME.search(value.name) and len(_shape(value)) == 4:
            guess = re.sub(r"past_key_values|past", "present", value.name, count=1)
            pairs[value.name] = guess if guess in outputs else None
    order = [v.name for v in graph.input]
    return {name: pairs[name] for name in sorted(pairs, key=order.index)}


def _symbol(shapes: list[list[int | str]], axis: int, role: str, found: str) -> str | None:
    symbols = {symbol for s in shapes if len(s) > axis and isinstance(symbol := s[axis], str) and symbol}
    if len(symbols) > 1:
        raise KVCacheError(
            f"the KV cache tensors ({found}) disagree on axis {axis} ({', '.join(sorted(symbols))}); "
            f"map the {role} dim with --kv-dims {role}=NAME"
        )
    return symbols.pop() if symbols else None


def _attention_width(model: onnx.ModelProto, name: str) -> int | None:
    """Packed-QKV head dim of the GroupQueryAttention reading past ``name``: ``width / (H + 2·KVH)``."""
    producers = {out: node for node in model.graph.node for out in node.output}
    initializers = {t.name: list(t.dims) for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type != "GroupQueryAttention" or name not in node.input:
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        packed = len(node.input) < 2 or not node.input[1]
        heads = attrs.get("num_heads", 0) + (2 * attrs.get("kv_num_heads", 0) if packed else 0)
        width = _width(node.input[0], producers, initializers)
        if width and heads and width % heads == 0:
            return width // heads
    return None


def _width(tensor: str, producers: Mapping[str, onnx.NodeProto], initializers: Mapping[str, list[int]]) -> int:
    """The last dim of a projection's output: MatMulNBits' ``N``, a MatMul weight's last dim (through a bias Add)."""
    for _ in range(4):
        node = producers.get(tensor)
        if node is None:
            return 0
        if node.op_type == "MatMulNBits":
            return next((a.i for a in node.attribute if a.name == "N"), 0)
        weights = [initializers[i] for i in node.input if i in initializers]
        if node.op_type in ("MatMul", "Gemm") and weights and weights[-1]:
            return weights[-1][-1]
        if node.op_type != "Add":
            return 0
        tensor = next((i for i in node.input if i not in initializers), "")
    return 0


def _axis_value(
    model: onnx.ModelProto, shapes: list[list[int | str]], axis: int, what: str, dims: Mapping[str, int]
) -> tuple[int, dict[str, int]]:
    """A cache tensor's kv-heads (axis 1) or head dim (axis 3): a number, a bound symbol, or one told by the graph."""
    values = {s[axis] for s in shapes}
    if len(values) != 1:
        raise KVCacheError(f"the KV cache tensors differ in their {what} ({sorted(map(str, values))})")
    value = values.pop()
    if isinstance(value, int) and value > 0:
        return value, {}
    if isinstance(value, str) and value in dims:
        return int(dims[value]), {}
    outputs = [_shape(v) for v in model.graph.output if v.name in _pairs(model).values()]
    told = {size for s in outputs if len(s) == 4 and isinstance(size := s[axis], int) and size > 0}
    if len(told) == 1:
        number = told.pop()
        return number, {str(value): number}
    width = _attention_width(model, next(iter(_pairs(model)))) if axis == 3 else None
    if width:
        return width, {str(value): width}
    raise KVCacheError(f"cannot tell the KV cache's {what} '{value}' from the graph; bind it with --dim {value}=N")


def find_cache(
    model: onnx.ModelProto, kv_dims: Mapping[str, str] | None = None, dims: Mapping[str, int] | None = None
) -> KVCache:
    """The KV cache of ``model`` (a ModelProto read without weights); ``kv_dims`` maps roles to symbols
    explicitly (``{"new": "seq"}``), ``dims`` are the user's bindings (a symbolic head dim given there is used)."""
    kv_dims, dims = dict(kv_dims or {}), dict(dims or {})
    unknown = set(kv_dims) - set(ROLES)
    if unknown:
        raise KVCacheError(f"--kv-dims: unknown role(s) {', '.join(sorted(unknown))}; use {', '.join(ROLES)}")
    pairs = _pairs(model)
    if not pairs:
        names = ", ".join(v.name for v in model.graph.input) or "none"
        raise KVCacheError(
            f"no KV cache found: no input is named past_key_values.N.key/value or past_key/past_value, or feeds an "
            f"attention op's past inputs (inputs: {names}); onnxroof llm needs a decoder exported with its cache"
        )
    values = {v.name: v for v in model.graph.input}
    shapes = [_shape(values[name]) for name in pairs]
    found = f"{len(pairs)} inputs like '{next(iter(pairs))}'"
    if any(len(s) != 4 for s in shapes):
        raise KVCacheError(f"KV cache inputs ({found}) are not [batch, kv_heads, past, head_dim]")
    roles: dict[str, str | None] = {
        "batch": _symbol(shapes, 0, "batch", found),
        "past": _symbol(shapes, 2, "past", found),
    }
    presents = [_shape(v) for v in model.graph.output if v.name in pairs.values()]
    roles["total"] = _symbol(presents, 2, "total", found) if presents else None
    roles.update(kv_dims)
    if roles["past"] is None:
        raise KVCacheError(f"the KV cache ({found}) has no symbolic past length on axis 2; map it with --kv-dims past=")
    kv_heads, fixed = _axis_value(model, shapes, 1, "kv heads", dims)
    head_dim, fixed_head = _axis_value(model, shapes, 3, "head dim", dims)
    fixed.update(fixed_head)
    branch = _branch(model)
    roles["new"] = kv_dims.get("new") or _new_symbol(model, roles, set(fixed) | set(dims), found)
    dtype, itemsize = dtype_info(values[next(iter(pairs))].type.tensor_type.elem_type)
    return KVCache(
        past=tuple(pairs),
        present=tuple(pairs.values()),
        roles=roles,
        branch=branch,
        fixed=fixed,
        kv_heads=kv_heads,
        head_dim=head_dim,
        itemsize=itemsize,
        dtype=dtype,
        bytes_per_token=float(len(pairs) * kv_heads * head_dim * itemsize),
        symbols=frozenset(symbolic_dims(model)),
    )


def _branch(model: onnx.ModelProto) -> str | None:
    for value in model.graph.input:
        tensor = value.type.tensor_type
        if tensor.elem_type == onnx.TensorProto.BOOL and math.prod(d.dim_value for d in tensor.shape.dim) == 1:
            return value.name
    return None


def _new_symbol(model: onnx.ModelProto, roles: Mapping[str, str | None], bound: set[str], found: str) -> str:
    """The new-token symbol: the one input symbol no other role (or binding) claims; else input_ids' axis 1."""
    claimed = {s for s in roles.values() if s} | bound
    for symbol in list(claimed):
        expression = parse_dim_expression(symbol)
        claimed |= set(expression.names) - {symbol} if expression and len(expression.names) == 1 else set()
    left = [s for s in symbolic_dims(model) if s not in claimed]
    if len(left) == 1:
        return left[0]
    ids = next((v for v in model.graph.input if v.name == "input_ids"), None)
    if ids is not None and len(_shape(ids)) == 2 and _shape(ids)[1] in left:
        return str(_shape(ids)[1])
    roles_text = ", ".join(f"{r}={s}" for r, s in roles.items() if s)
    raise KVCacheError(
        f"found a KV cache ({found}; {roles_text}) but cannot tell the new-token dim among "
        f"{', '.join(left) or 'no symbol'}: map it with --kv-dims new=NAME (other dims: --dim NAME=VALUE)"
    )
