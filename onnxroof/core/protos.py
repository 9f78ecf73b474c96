"""What onnxroof reads off ONNX protobuf messages, never their weights: normalized domains, node ids,
attributes completed with the schema's defaults, tensor types, subgraph bodies and the outer-scope names they
read, and a graph's topological order. :mod:`onnxroof.core.ir` builds the IR from these facts.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

import onnx
from onnx import helper

from onnxroof.core.dtypes import dtype_info
from onnxroof.core.errors import ModelError

if TYPE_CHECKING:
    import networkx as nx


def normalize_domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


@functools.lru_cache(maxsize=4096)
def _schema_defaults(op_type: str, opset: int, domain: str) -> tuple[tuple[str, Any], ...]:
    try:
        schema = onnx.defs.get_schema(op_type, max_inclusive_version=opset, domain=domain)
    except onnx.defs.SchemaError:
        return ()
    defaults = []
    for name, attr in schema.attributes.items():
        if attr.default_value.type:
            defaults.append((name, _attr_value(attr.default_value)))
    return tuple(defaults)


def _attr_value(attr: onnx.AttributeProto) -> Any:
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8", "replace") for v in value]
    return value


def node_attributes(node: onnx.NodeProto, opset: int) -> dict[str, Any]:
    """The node's attributes with the schema's defaults filled in (as the reference evaluator does): those of
    :func:`attributes_and_bodies`."""
    defaults = default_attributes(node.op_type, opset, normalize_domain(node.domain))
    return attributes_and_bodies(node, defaults)[0]


def attributes_and_bodies(
    node: onnx.NodeProto, defaults: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, onnx.GraphProto]]:
    """:func:`node_attributes` and :func:`subgraphs_of` of ``node`` in one pass over its attributes; ``defaults``:
    its schema's (:func:`default_attributes` of its op type, opset and normalized domain)."""
    attrs = dict(defaults)
    bodies: dict[str, onnx.GraphProto] = {}
    for attr in node.attribute:
        kind = attr.type
        if kind == _GRAPH:
            bodies[attr.name] = attr.g
        elif kind == _GRAPHS:
            for k, g in enumerate(attr.graphs):
                bodies[f"{attr.name}[{k}]"] = g
        elif attr.ref_attr_name:  # a function body's reference: _attr_value refuses it
            attrs[attr.name] = _attr_value(attr)
        elif kind == _INT:  # the common kinds read as _attr_value reads them, without its chain of tests
            attrs[attr.name] = attr.i
        elif kind == _TENSOR:
            attrs[attr.name] = attr.t
        elif kind == _INTS:
            attrs[attr.name] = list(attr.ints)
        elif kind == _FLOAT:
            attrs[attr.name] = attr.f
        else:
            attrs[attr.name] = _attr_value(attr)
    return attrs, bodies


_GRAPH, _GRAPHS = onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS
_INT, _INTS, _FLOAT, _TENSOR = (
    onnx.AttributeProto.INT,
    onnx.AttributeProto.INTS,
    onnx.AttributeProto.FLOAT,
    onnx.AttributeProto.TENSOR,
)


@functools.lru_cache(maxsize=4096)
def default_attributes(op_type: str, opset: int, domain: str) -> Mapping[str, Any]:
    """The schema's default attributes of an op without attributes of its own, as one shared read-only view."""
    return MappingProxyType(dict(_schema_defaults(op_type, opset, domain)))


def node_id(index: int, node: onnx.NodeProto) -> str:
    return f"{index}:{node.name or node.op_type}"


#: What a TypeProto says of a tensor: ``(shape, dtype, itemsize)`` (see :class:`TensorInfo`).
TypeFacts = tuple[tuple[int | None, ...] | None, str, float]


_NO_TYPE: TypeFacts = (None, "unknown", 0.0)


def type_facts(type_proto: onnx.TypeProto | None) -> TypeFacts:
    """``(shape, dtype, itemsize)`` of a tensor type; no shape and dtype ``unknown`` for a non-tensor type."""
    if type_proto is None or not type_proto.HasField("tensor_type"):
        return _NO_TYPE
    tensor_type = type_proto.tensor_type
    dtype, itemsize = dtype_info(tensor_type.elem_type)
    shape: tuple[int | None, ...] | None = None
    if tensor_type.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim)
    return shape, dtype, itemsize


TypesSeen = dict[int, tuple[onnx.TypeProto | None, TypeFacts]]
"""The types met so far (:func:`known_type_facts`): id of a type -> the type (kept, so that its id is not reused
while the mapping lives) and its facts."""


def known_type_facts(type_proto: onnx.TypeProto | None, seen: TypesSeen) -> TypeFacts:
    """:func:`type_facts` of ``type_proto``, decoded once per type object: ``seen`` holds those met before."""
    known = seen.get(id(type_proto))
    if known is None:
        known = seen[id(type_proto)] = (type_proto, type_facts(type_proto))
    return known[1]


def subgraph_outer_inputs(graph: onnx.GraphProto) -> list[str]:
    """Names a subgraph (recursively) reads from enclosing scopes, in the order first read."""
    defined = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    needed: dict[str, None] = {}  # ordered, with O(1) membership (a list made large bodies quadratic)
    for node in graph.node:
        names = list(node.input)
        if len(node.attribute):
            for attr in node.attribute:
                for sub in [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs):
                    names.extend(subgraph_outer_inputs(sub))
        for name in names:
            if name and name not in defined and name not in needed:
                needed[name] = None
        defined.update(node.output)
    return list(needed)


def subgraphs_of(node: onnx.NodeProto) -> dict[str, onnx.GraphProto]:
    """The node's subgraph bodies by attribute name (``body``; ``name[k]`` for a list of graphs)."""
    found: dict[str, onnx.GraphProto] = {}
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            found[attr.name] = attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            for k, g in enumerate(attr.graphs):
                found[f"{attr.name}[{k}]"] = g
    return found


def has_bodies(node: onnx.NodeProto) -> bool:
    """Whether the node carries a subgraph body (an If, Loop, Scan...); ``len`` first, as most nodes have no
    attribute at all."""
    return len(node.attribute) > 0 and any(a.type in _BODY_KINDS for a in node.attribute)


_BODY_KINDS = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


def all_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every body inside it, at any depth, in pre-order (a body right after the node holding it is
    reached, before the graph's later nodes)."""
    yield graph
    for node in graph.node:
        if len(node.attribute) and has_bodies(node):  # the length inline: most nodes have no attribute
            for body in subgraphs_of(node).values():
                yield from all_graphs(body)


def _node_reads(node: onnx.NodeProto) -> list[str]:
    """Names ``node`` reads: its inputs, and the outer-scope values its subgraph bodies read."""
    names = list(node.input)
    if len(node.attribute):  # most nodes carry no subgraph: skip the attribute walk for them
        for sub in subgraphs_of(node).values():
            names.extend(subgraph_outer_inputs(sub))
    return names


def _already_ordered(producer: Mapping[str, int], first_read: Mapping[str, int]) -> bool:
    """True when every value read is produced (by its last producer) before the first node reading it, or
    comes from outside the graph: ``producer`` maps a value to its last producing node, ``first_read`` to the
    first node that reads it."""
    return all(producer.get(name, -1) < reader for name, reader in first_read.items())


def topological_order(nodes: Sequence[onnx.NodeProto]) -> tuple[int, ...]:
    """Indices of ``nodes`` in an order where producers come first (ONNX requires it; not all files obey).

    O(n) when the file is already ordered (the usual case): ``range(len(nodes))``, found in one pass over the
    nodes that builds no list per node. Otherwise the lexicographically smallest topological order of the
    producer -> consumer DAG. The loader computes it once per graph and hands it on
    (:attr:`onnxroof.load.reader.LoadedModel.order`, ``build_ir(order=...)``).
    """
    producer: dict[str, int] = {}
    first_read: dict[str, int] = {}
    for i, node in enumerate(nodes):
        for name in _node_reads(node) if len(node.attribute) else node.input:
            if name and name not in first_read:
                first_read[name] = i
        for out in node.output:
            if out:
                producer[out] = i
    if _already_ordered(producer, first_read):
        return tuple(range(len(nodes)))
    import networkx as nx  # only a graph that inlining reordered needs sorting

    dag: nx.DiGraph[int] = nx.DiGraph()
    dag.add_nodes_from(range(len(nodes)))
    for i, node in enumerate(nodes):
        for name in _node_reads(node):
            j = producer.get(name)
            if j is not None and j != i:
                dag.add_edge(j, i)
    try:
        return tuple(nx.lexicographical_topological_sort(dag))
    except nx.NetworkXUnfeasible as exc:
        raise ModelError("the graph has a cycle; ONNX graphs must be acyclic") from exc


def graph_value_types(graph: onnx.GraphProto) -> dict[str, onnx.TypeProto]:
    """Types ONNX inference recorded in one (sub)graph: value_info, inputs, outputs, initializers.

    Values with equal types (every ``[1, 16]`` float tensor) map to ONE TypeProto, equal to the first one met: a
    Python wrapper per tensor costs ~150 B, and readers may cache what they derive from a type by identity. The
    types are read, never changed. Each is a message of its own, parsed from its serialization, not a part of
    ``graph``: the mapping does not keep ``graph``'s protobuf alive (the loader frees the inferred one)."""
    shared: dict[bytes, onnx.TypeProto | None] = {}
    types: dict[str, onnx.TypeProto] = {}
    last: onnx.TypeProto | None = None  # the previous value's type, and its canonical one
    canonical: onnx.TypeProto | None = None
    for values in (graph.value_info, graph.input, graph.output):
        for value in values:
            type_proto = value.type
            if last is None or type_proto != last:  # a value usually has the type of the one before
                key = type_proto.SerializeToString()
                found: onnx.TypeProto | Literal[False] | None = shared.get(key, False)
                if found is False:
                    tensor = type_proto.HasField("tensor_type")
                    found = shared[key] = onnx.TypeProto.FromString(key) if tensor else None
                canonical, last = found, type_proto
            if canonical is not None:
                types[value.name] = canonical
    made: dict[tuple[int, tuple[int, ...]], onnx.TypeProto] = {}
    for tensor in graph.initializer:
        key = (tensor.data_type, tuple(tensor.dims))
        if key not in made:
            made[key] = helper.make_tensor_type_proto(key[0], list(key[1]))
        types[tensor.name] = made[key]
    return types
