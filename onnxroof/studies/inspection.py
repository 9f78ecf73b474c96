"""A quick look at a model file before analyzing it: what to bind, what it holds, what its cache looks like.

:func:`inspect_model` reads the file without its weight payloads (:func:`~onnxroof.load.reader.read_model`),
checks its opsets, and reports what a user needs before ``report``: the inputs and outputs with their dtypes
and dims (symbols named as ``--dim NAME=VALUE`` binds them), the opsets, op-type counts, the parameter count
and weight size, the external data files, the custom domains, and a decoder's KV cache. No shape inference,
no costing and no checker run: the work is one walk over the graph's nodes and initializers.

Counts, as stated in :class:`Inspection`:

* ``parameters = Σ numel(t)`` over the initializers and ``Constant`` node tensors of the main graph (a
  tensor's logical element count: an int4 tensor of N elements counts N); buffers (a rotary cache) count too,
  since a file does not say which stored tensors are trained;
* ``weight_bytes = Σ numel(t) · itemsize(t)`` over the same tensors (int4: ½ byte an element);
* ``packed``: initializers holding low-bit weights packed into bytes (the weight input of ONNX Runtime's
  ``MatMulNBits``, ``MatMulBnb4``, ``GatherBlockQuantized``): their stored elements are bytes, not weights, so
  ``parameters`` undercounts them; ``report`` counts their logical weights through the rules (this look reads
  no rule: importing them would cost more than the whole inspection);
* external data: per file named by an initializer's ``location``, the tensors pointing into it and
  ``Σ length`` (``numel · itemsize`` where a tensor gives no length); a file named but absent is listed as
  missing.
"""

from __future__ import annotations

import math
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import onnx

from onnxroof.core.dtypes import dtype_info
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.load.checks import check_opsets
from onnxroof.load.dims import symbolic_dims
from onnxroof.load.reader import read_model
from onnxroof.studies.kv_cache import KVCache, KVCacheError, find_cache

_STANDARD_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")
#: (domain, op type) -> the inputs holding packed low-bit weights.
_PACKED_INPUTS = {
    ("com.microsoft", "MatMulNBits"): (1,),
    ("com.microsoft", "MatMulBnb4"): (1,),
    ("com.microsoft", "GatherBlockQuantized"): (0,),
}
_NO_CACHE = "none: no past_key_values.N.key/value (or past_key/past_value) input, no attention op's past input"

__all__ = ["ExternalFile", "Inspection", "TensorSpec", "inspect_model"]


@frozen_dataclass(slots=True)
class TensorSpec:
    """A graph input or output: its dtype and dims (an int, a symbol's name, or None for an unnamed dim)."""

    name: str
    dtype: str
    shape: tuple[int | str | None, ...] | None
    """None: the file gives no shape (rank unknown)."""

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "dtype": self.dtype, "shape": None if self.shape is None else list(self.shape)}


@frozen_dataclass(slots=True)
class ExternalFile:
    """An external-data file the weights point into."""

    location: str
    tensors: int
    bytes: int
    """``Σ length`` of the tensors pointing into it."""
    exists: bool
    """Whether the file is present beside the model (False: named but missing)."""

    def to_dict(self) -> dict[str, object]:
        return {"location": self.location, "tensors": self.tensors, "bytes": self.bytes, "exists": self.exists}


@frozen_dataclass(slots=True)
class Inspection:
    """What a model file holds, read without its weights (module docstring for each count)."""

    path: str | None
    producer: str
    ir_version: int
    graph_name: str
    opsets: dict[str, int]
    """Domain (``""`` is ONNX's default) -> opset version."""
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    symbols: dict[str, tuple[str, ...]]
    """Each symbolic dim of the inputs -> where it appears ("input 'x' axis 0"): what ``--dim`` binds."""
    op_types: tuple[tuple[str, str, int], ...]
    """(domain, op type, count) over the main graph's nodes, most frequent first, then by name."""
    nodes: int
    subgraph_nodes: int
    """Nodes inside If/Loop/Scan bodies (not in ``op_types``)."""
    parameters: int
    weight_bytes: float
    initializers: int
    packed: int
    """Initializers holding packed low-bit weights (counted as stored bytes in ``parameters``)."""
    external: tuple[ExternalFile, ...]
    custom_domains: dict[str, tuple[str, ...]]
    """Non-standard node domains (``com.microsoft``...) -> the op types used from each."""
    functions: int
    """Model-local functions."""
    kv_cache: KVCache | None
    kv_cache_note: str
    """Why no cache was found (or what stopped its reading); empty when one was found."""

    def to_dict(self) -> dict[str, object]:
        """The inspection as plain JSON-ready values (SI units: bytes)."""
        cache = self.kv_cache
        return {
            "path": self.path,
            "producer": self.producer,
            "ir_version": self.ir_version,
            "graph_name": self.graph_name,
            "opsets": dict(self.opsets),
            "inputs": [t.to_dict() for t in self.inputs],
            "outputs": [t.to_dict() for t in self.outputs],
            "symbols": {name: list(places) for name, places in self.symbols.items()},
            "op_types": [{"domain": d, "op_type": o, "count": c} for d, o, c in self.op_types],
            "nodes": self.nodes,
            "subgraph_nodes": self.subgraph_nodes,
            "parameters": self.parameters,
            "weight_bytes": self.weight_bytes,
            "initializers": self.initializers,
            "packed_initializers": self.packed,
            "external_data": [f.to_dict() for f in self.external],
            "custom_domains": {domain: list(ops) for domain, ops in self.custom_domains.items()},
            "functions": self.functions,
            "kv_cache": None if cache is None else kv_cache_dict(cache),
            "kv_cache_note": self.kv_cache_note,
        }


def kv_cache_dict(cache: KVCache) -> dict[str, object]:
    """A found cache as plain values: names, layers, heads, head size, dtype, bytes per token, dim roles."""
    return {
        "past": list(cache.past),
        "present": list(cache.present),
        "layers": cache.layers,
        "kv_heads": cache.kv_heads,
        "head_dim": cache.head_dim,
        "dtype": cache.dtype,
        "bytes_per_token": cache.bytes_per_token,
        "roles": dict(cache.roles),
        "branch": cache.branch,
    }


def _spec(value: onnx.ValueInfoProto) -> TensorSpec:
    if not value.type.HasField("tensor_type"):
        kind = value.type.WhichOneof("value") or "unknown"
        return TensorSpec(value.name, kind.removesuffix("_type"), None)
    tensor = value.type.tensor_type
    dtype, _ = dtype_info(tensor.elem_type)
    if not tensor.HasField("shape"):
        return TensorSpec(value.name, dtype, None)
    dims: list[int | str | None] = []
    for dim in tensor.shape.dim:
        if dim.HasField("dim_value") and dim.dim_value >= 0:
            dims.append(int(dim.dim_value))
        else:
            param = dim.dim_param if dim.HasField("dim_param") and isinstance(dim.dim_param, str) else ""
            dims.append(param.strip() or None)
    return TensorSpec(value.name, dtype, tuple(dims))


def _stored_tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    yield from graph.initializer
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in _STANDARD_DOMAINS:
            for attribute in node.attribute:
                if attribute.name == "value" and attribute.HasField("t"):
                    yield attribute.t


def _external(model: onnx.ModelProto, path: Path | None) -> tuple[ExternalFile, ...]:
    """Files named by the initializers' external data (the model file itself, where the lean reader pointed
    large inline payloads, is not external)."""
    own = path.name if path is not None else None
    files: dict[str, list[int]] = {}
    for tensor in model.graph.initializer:
        if tensor.data_location != onnx.TensorProto.EXTERNAL:
            continue
        entries = {entry.key: entry.value for entry in tensor.external_data}
        location = entries.get("location", "")
        if not location or location == own:
            continue
        _, itemsize = dtype_info(tensor.data_type)
        length = entries.get("length", "")
        size = int(length) if length.isdigit() else math.ceil(math.prod(tensor.dims) * itemsize)
        counts = files.setdefault(location, [0, 0])
        counts[0] += 1
        counts[1] += size
    folder = path.parent if path is not None else None
    return tuple(
        ExternalFile(name, tensors, size, folder is not None and os.path.isfile(folder / name))
        for name, (tensors, size) in sorted(files.items())
    )


def _packed(graph: onnx.GraphProto, initializers: set[str]) -> set[str]:
    """Initializers read as packed low-bit weights (:data:`_PACKED_INPUTS`)."""
    found: set[str] = set()
    for node in graph.node:
        for i in _PACKED_INPUTS.get((node.domain, node.op_type), ()):
            if i < len(node.input) and node.input[i] in initializers:
                found.add(node.input[i])
    return found


def _subgraph_nodes(graph: onnx.GraphProto) -> int:
    count = 0
    for node in graph.node:
        for attribute in node.attribute:
            bodies = [attribute.g] if attribute.HasField("g") else list(attribute.graphs)
            for body in bodies:
                count += len(body.node) + _subgraph_nodes(body)
    return count


def inspect_model(source: str | os.PathLike[str] | onnx.ModelProto) -> Inspection:
    """What ``source`` holds (module docstring), read without its weight payloads; an unreadable file or an
    opset out of range is a :class:`~onnxroof.core.errors.ModelError` naming the file."""
    model, path = read_model(source, weights=False)
    check_opsets(model, path)
    graph = model.graph
    counts = Counter((n.domain if n.domain != "ai.onnx" else "", n.op_type) for n in graph.node)
    custom: dict[str, set[str]] = {}
    for domain, op_type in counts:
        if domain not in _STANDARD_DOMAINS:
            custom.setdefault(domain, set()).add(op_type)
    parameters, weight_bytes = 0, 0.0
    for tensor in _stored_tensors(graph):
        numel = math.prod(tensor.dims)
        parameters += numel
        weight_bytes += numel * dtype_info(tensor.data_type)[1]
    initializers = {t.name for t in graph.initializer}
    try:
        cache: KVCache | None = find_cache(model)
        note = ""
    except KVCacheError as exc:
        cache, note = None, _NO_CACHE if str(exc).startswith("no KV cache found") else str(exc)
    return Inspection(
        path=str(path) if path is not None else None,
        producer=" ".join(p for p in (model.producer_name, model.producer_version) if p),
        ir_version=model.ir_version,
        graph_name=graph.name,
        opsets={(o.domain if o.domain != "ai.onnx" else ""): o.version for o in model.opset_import},
        inputs=tuple(_spec(v) for v in graph.input if v.name not in initializers),
        outputs=tuple(_spec(v) for v in graph.output),
        symbols={name: tuple(places) for name, places in symbolic_dims(model).items()},
        op_types=tuple(
            (domain, op_type, count)
            for (domain, op_type), count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        ),
        nodes=len(graph.node),
        subgraph_nodes=_subgraph_nodes(graph),
        parameters=parameters,
        weight_bytes=weight_bytes,
        initializers=len(graph.initializer),
        packed=len(_packed(graph, initializers)),
        external=_external(model, path),
        custom_domains={domain: tuple(sorted(ops)) for domain, ops in sorted(custom.items())},
        functions=len(model.functions),
        kv_cache=cache,
        kv_cache_note=note,
    )
