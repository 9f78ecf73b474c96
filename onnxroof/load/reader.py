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

import os
import stat
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import onnx
import onnx.inliner
from onnx import TensorProto, helper

from onnxroof.core.errors import ModelError, one_line
from onnxroof.core.protos import normalize_domain, topological_order
from onnxroof.load.dims import bind_dims, parse_dim_bindings, shape_bindings, symbolic_dims
from onnxroof.load.lean import copy_without_payloads, parse_without_payloads
from onnxroof.load.shapes import (
    fold_small_constants,
    infer,
    is_static,
    missing_outputs,
    propagate_fallback,
    small_constant_values,
    value_types,
)
from onnxroof.load.tied import tied_copies

__all__ = [
    "LoadedModel",
    "bind_dims",
    "check_external_paths",
    "check_model",
    "check_opsets",
    "load_model",
    "parse_dim_bindings",
    "read_model",
    "scan_model",
    "symbolic_dims",
]

MIN_OPSET = 7
MAX_MODEL_BYTES = 4 * 2**30
"""The largest model file read: a protobuf cannot exceed 2 GiB, so anything over twice that is not one."""


@dataclass(frozen=True)
class LoadedModel:
    """A shape-inferred model whose weights were never loaded.

    ``order``: the main graph's :func:`~onnxroof.core.protos.topological_order`, computed once here and handed
    to the shape fallbacks and to ``build_ir(order=...)``.
    """

    model: onnx.ModelProto = field(repr=False)
    path: Path | None
    value_types: Mapping[str, onnx.TypeProto] = field(repr=False)
    dims: Mapping[str, int]
    opset: int
    warnings: tuple[str, ...]
    order: tuple[int, ...] = field(repr=False)
    tied: Mapping[str, str] = field(default_factory=dict)
    """Initializers the exporter stored twice (copy -> original, :func:`onnxroof.load.tied.tied_copies`)."""


# ---------------------------------------------------------------------------------------------- reading


def read_model(
    source: str | os.PathLike | onnx.ModelProto, weights: bool = True
) -> tuple[onnx.ModelProto, Path | None]:
    """Parse ``source`` (a path or a ModelProto) without external data; errors name the file.

    ``weights=False`` leaves the payloads of large initializers inside the file
    (:func:`~onnxroof.load.lean.parse_without_payloads`: they become external data pointing into the model
    file itself; for an in-memory model, :func:`~onnxroof.load.lean.copy_without_payloads`), so that a model
    with 438 MB of weights inside costs megabytes, not gigabytes.
    """
    if isinstance(source, onnx.ModelProto):
        if not weights:
            return copy_without_payloads(source), None
        model = onnx.ModelProto()
        model.CopyFrom(source)
        return model, None
    path = Path(source)
    if "\0" in str(path):
        raise ModelError(f"{str(path)!r}: a path cannot hold a NUL byte")
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ModelError(f"{path}: no such file") from None
    except OSError as exc:  # a symlink loop, a name too long, no permission
        raise ModelError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ModelError(f"{path}: is a folder, not an ONNX file")
    if not stat.S_ISREG(info.st_mode):  # a FIFO would block forever, /dev/zero never ends
        raise ModelError(f"{path}: not a regular file (a device, FIFO or socket); give an ONNX file")
    if info.st_size > MAX_MODEL_BYTES:
        raise ModelError(
            f"{path}: {info.st_size / 2**30:.1f} GiB is larger than any ONNX protobuf can be (2 GiB); "
            f"weights over 2 GiB belong in external data files"
        )
    model = None
    if not weights:
        try:
            model = parse_without_payloads(path)
        except Exception:  # not a protobuf message: onnx.load below says why
            model = None
    try:
        if model is None:
            model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf raises DecodeError and others on bad bytes
        raise ModelError(f"{path}: not a readable ONNX model ({one_line(str(exc))})") from exc
    if model.ir_version == 0 or not model.HasField("graph"):
        raise ModelError(f"{path}: not an ONNX model (no IR version or no graph; is the file truncated?)")
    return model, path


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


@dataclass(frozen=True)
class ModelScan:
    """What the loader's checks need from every graph of a model, found in one walk (:func:`scan_model`).

    ``external``: the tensors holding external data (initializers and ``Constant``-style tensor attributes), in
    the order :func:`_external_tensors` yields them; ``unregistered``: :func:`unregistered_nodes`, in the same
    order. Both hold the model's own messages: drop the scan with the model.
    """

    external: tuple[TensorProto, ...]
    unregistered: tuple[onnx.NodeProto, ...]


def scan_model(model: onnx.ModelProto) -> ModelScan:
    """One walk over every graph (pre-order, as :func:`_all_graphs`): external tensors and unregistered nodes.

    Each check used to walk every graph itself (ten walks of a 200k-node chain: 0.8 s); a node's fields are
    read once here, and ``onnx.defs.has`` is asked once per op type.
    """
    opsets = {normalize_domain(o.domain): o.version for o in model.opset_import}
    version = opsets.get("")
    registered: dict[str, bool] = {}
    external: list[TensorProto] = []
    unregistered: list[onnx.NodeProto] = []
    tensor_kind, graph_kind, graphs_kind = (
        onnx.AttributeProto.TENSOR,
        onnx.AttributeProto.GRAPH,
        onnx.AttributeProto.GRAPHS,
    )

    def visit(graph: onnx.GraphProto) -> None:
        external.extend(t for t in graph.initializer if t.data_location == TensorProto.EXTERNAL)
        bodies: list[onnx.GraphProto] = []
        for node in graph.node:
            if version is not None and node.domain in ("", "ai.onnx"):
                op_type = node.op_type
                known = registered.get(op_type)
                if known is None:
                    known = registered[op_type] = onnx.defs.has(op_type, version, "")
                if not known:
                    unregistered.append(node)
            if len(node.attribute):  # most nodes have none: len() is the cheap test
                for attr in node.attribute:
                    kind = attr.type
                    if kind == tensor_kind:
                        if attr.t.data_location == TensorProto.EXTERNAL:
                            external.append(attr.t)
                    elif kind == graph_kind:
                        bodies.append(attr.g)
                    elif kind == graphs_kind:
                        bodies.extend(attr.graphs)
        for body in bodies:  # after the graph's own nodes, as _all_graphs yields them
            visit(body)

    visit(model.graph)
    return ModelScan(tuple(external), tuple(unregistered))


def _external_location(tensor: TensorProto) -> str:
    for entry in tensor.external_data:
        if entry.key == "location":
            return entry.value
    return ""


def check_external_paths(model: onnx.ModelProto, path: Path | None, scan: ModelScan | None = None) -> None:
    """Every external-data location must be a relative path inside the model's folder, without a NUL byte or a
    symlink loop, naming a regular file when it exists (stat'ed, never read: an absent weight file analyzes).

    The folder is resolved once and each distinct location once (a 7B model names one file ~300 times).
    ``scan``: the model's :func:`scan_model`, when already made.
    """
    base = (path.parent if path else Path.cwd()).resolve()
    where = str(path) if path else "<model>"
    inside: dict[str, bool] = {}
    for tensor in (scan or scan_model(model)).external:
        location = _external_location(tensor)
        if not location:
            raise ModelError(f"{where}: tensor '{tensor.name}': external data has no 'location'")
        if location not in inside:
            # the model's own file: large inline weights left in place by read_model(weights=False)
            own = path is not None and location == path.name
            inside[location] = own or _inside(base, location, where, tensor.name)
        if not inside[location]:
            raise ModelError(
                f"{where}: tensor '{tensor.name}': external data location '{location}' points outside "
                f"the model's folder"
            )


def _inside(base: Path, location: str, where: str, tensor: str) -> bool:
    """Whether ``location`` stays inside ``base``; a location that cannot be a weight file is a ModelError."""
    if "\0" in location:
        raise ModelError(f"{where}: tensor '{tensor}': external data location {location!r} holds a NUL byte")
    if Path(location).is_absolute():
        return False
    try:
        target = (base / location).resolve(strict=False)
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop (Python < 3.13)
        raise ModelError(f"{where}: tensor '{tensor}': external data location '{location}': {exc}") from None
    if not target.is_relative_to(base):
        return False
    try:
        info = target.stat()
    except FileNotFoundError:
        return True
    except OSError as exc:
        raise ModelError(
            f"{where}: tensor '{tensor}': external data location '{location}': {exc.strerror or exc}"
        ) from None
    if not stat.S_ISREG(info.st_mode):
        raise ModelError(f"{where}: tensor '{tensor}': external data location '{location}' is not a regular file")
    return True


def _without_external_initializers(model: onnx.ModelProto, scan: ModelScan) -> onnx.ModelProto:
    """A copy for the checker in which no tensor refers to external data.

    The checker insists that external-data files exist (relative to the working directory); onnxroof never
    reads them, and an absent or sparse weight file must still analyze. Top-level external initializers
    become typed graph inputs (their dims kept); external tensors elsewhere (subgraph initializers,
    ``Constant`` values) become empty inline tensors of the same name and type — the checker does not infer
    shapes, so nothing else changes. Everything else is checked as is. ``scan``: the model's
    :func:`scan_model`; without external tensors the model itself is returned (no copy).
    """
    if not scan.external:
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


#: The private domain unregistered default-domain nodes are moved to while ONNX's checker and shape inference
#: run (see :func:`check_model`); they are moved back before the model is handed on.
MASK_DOMAIN = "onnxroof.unregistered"


def unregistered_nodes(model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """Default-domain nodes (in every graph) for which ONNX has no schema at the model's opset.

    ONNX Runtime registers ops of its own in the default domain (``SimplifiedLayerNormalization``, written by
    the GenAI model builder) and runs such files; ONNX's checker and strict shape inference refuse them. These
    are the only checker complaints onnxroof does not share: an op ONNX *does* define, used against its schema,
    is refused by ONNX Runtime too.
    """
    opsets = {normalize_domain(o.domain): o.version for o in model.opset_import}
    version = opsets.get("")
    if version is None:
        return []
    return [
        node
        for graph in _all_graphs(model.graph)
        for node in graph.node
        if not normalize_domain(node.domain) and not onnx.defs.has(node.op_type, version, "")
    ]


@contextmanager
def masked(model: onnx.ModelProto, nodes: list[onnx.NodeProto]):
    """Move ``nodes`` to :data:`MASK_DOMAIN` (and import it) for the duration; restore them afterwards."""
    if not nodes:
        yield model
        return
    originals = [node.domain for node in nodes]
    for node in nodes:
        node.domain = MASK_DOMAIN
    model.opset_import.append(helper.make_opsetid(MASK_DOMAIN, 1))
    try:
        yield model
    finally:
        for node, domain in zip(nodes, originals, strict=True):
            node.domain = domain
        del model.opset_import[len(model.opset_import) - 1]


def unmask(model: onnx.ModelProto) -> onnx.ModelProto:
    """Undo :func:`masked` on a copy made while it was in force (e.g. shape inference's output), in place."""
    for graph in _all_graphs(model.graph):
        for node in graph.node:
            if node.domain == MASK_DOMAIN:
                node.domain = ""
    kept = [o for o in model.opset_import if o.domain != MASK_DOMAIN]
    del model.opset_import[:]
    model.opset_import.extend(kept)
    return model


#: The largest opset version ONNX's schema lookups take (a C ``int``); a larger one is a damaged file.
MAX_OPSET_VERSION = 2**31 - 1


def check_opsets(model: onnx.ModelProto, path: Path | None) -> int | None:
    """The default-domain opset (None when none is imported), after checking every ``opset_import``: at least
    one is imported, the default one is no older than :data:`MIN_OPSET`, and each version is within
    0..:data:`MAX_OPSET_VERSION`; otherwise a :class:`ModelError` naming the file and the domain."""
    where = str(path) if path else "<model>"
    opsets = {normalize_domain(o.domain): o.version for o in model.opset_import}
    for domain, version in opsets.items():
        if not 0 <= version <= MAX_OPSET_VERSION:
            raise ModelError(
                f"{where}: opset_import version {version} of domain '{domain or 'ai.onnx'}' is out of range"
            )
    opset = opsets.get("")
    if opset is None and not opsets:
        raise ModelError(f"{where}: opset_import names no opset")
    if opset is not None and opset < MIN_OPSET:
        raise ModelError(f"{where}: opset {opset} is older than the oldest supported ({MIN_OPSET})")
    return opset


def check_model(
    model: onnx.ModelProto, path: Path | None, warnings: list[str] | None = None, scan: ModelScan | None = None
) -> int:
    """Run the ONNX checker and the opset floor; return the default-domain opset (0 when none is imported).

    A model ONNX Runtime runs is a model onnxroof analyzes: default-domain ops ONNX has no schema for
    (:func:`unregistered_nodes`) are checked as custom ops and each becomes a warning in ``warnings``
    naming the node; a model importing no default opset (only ``ai.onnx.ml`` or training-domain ops) is
    checked as it is. Every other checker error (structure, an ONNX op against its schema) stays a
    :class:`ModelError` (exit 2). ``scan``: the model's :func:`scan_model`, when already made.
    """
    where = str(path) if path else "<model>"
    opset = check_opsets(model, path)
    scan = scan or scan_model(model)
    checked = _without_external_initializers(model, scan)
    unknown = list(scan.unregistered) if checked is model else unregistered_nodes(checked)
    with masked(checked, unknown):
        try:
            onnx.checker.check_model(checked)
        except (onnx.checker.ValidationError, ValueError) as exc:
            raise ModelError(f"{where}: fails the ONNX checker: {one_line(str(exc))}") from exc
    if warnings is not None:
        for op_type, labels in _group_by_op(unknown).items():
            shown = ", ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")
            warnings.append(
                f"{op_type}: ONNX defines no such op at opset {opset} (ONNX Runtime registers it in the default "
                f"domain); checked as a custom op: node(s) {shown}"
            )
    return opset or 0


def _group_by_op(nodes: list[onnx.NodeProto]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for node in nodes:
        grouped.setdefault(node.op_type, []).append(f"'{node.name}'" if node.name else "(unnamed)")
    return grouped


# ------------------------------------------------------------------------------------------- entry point


def _infer(
    model: onnx.ModelProto, unknown: Sequence[onnx.NodeProto] | None = None
) -> tuple[onnx.ModelProto, list[str]]:
    """:func:`~onnxroof.load.shapes.infer` with unregistered default-domain nodes masked (strict inference
    would refuse them; their outputs are shaped by the contrib shape functions afterwards). ``unknown``: the
    model's :func:`unregistered_nodes`, when already found."""
    unknown = unregistered_nodes(model) if unknown is None else unknown
    return _infer_serialized(_masked_bytes(model, unknown), masked=bool(unknown))


def _masked_bytes(model: onnx.ModelProto, unknown: Sequence[onnx.NodeProto]) -> bytes:
    """The model serialized with ``unknown`` masked (:func:`masked`); the model itself is left as it was."""
    with masked(model, list(unknown)):
        return model.SerializeToString()


def _infer_serialized(data: bytes, masked: bool) -> tuple[onnx.ModelProto, list[str]]:
    """Infer shapes from a serialized model (:func:`_masked_bytes`): the caller may drop its ModelProto first,
    so that it and shape inference's copies are not alive at once. The result is unmasked (when the model
    was masked, or already imported :data:`MASK_DOMAIN` as :func:`unmask` always handled)."""
    inferred, warnings = infer(data)
    if masked or any(o.domain == MASK_DOMAIN for o in inferred.opset_import):
        inferred = unmask(inferred)
    return inferred, warnings


def load_model(
    source: str | os.PathLike | onnx.ModelProto,
    dims: Mapping[str, object] | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> LoadedModel:
    """Read, check, bind dims, inline local functions and infer shapes; never reads weight bytes.

    ``shapes`` binds whole inputs (``{"image": (1, 3, 48, 192)}``, :func:`~onnxroof.load.dims.shape_bindings`);
    a symbol it gives a value other than ``dims`` does is a :class:`~onnxroof.core.errors.DimsError`.
    """
    model, path = read_model(source, weights=False)
    check_opsets(model, path)  # before anything asks ONNX for a schema at those versions
    scan = scan_model(model)
    check_external_paths(model, path, scan)
    warnings: list[str] = []
    opset = check_model(model, path, warnings, scan)
    unknown = scan.unregistered
    del scan  # it holds the model's own messages
    # The checker refuses a graph out of topological order ("Nodes in a graph must be topologically sorted"):
    # a checked graph's order is its file order, unless inlining changed the nodes.
    inlined = False
    if model.functions:
        try:
            model = onnx.inliner.inline_local_functions(model)
            inlined = True
        except Exception as exc:
            warnings.append(
                f"could not inline model-local functions ({one_line(str(exc))}); their calls are "
                f"reported as unsupported"
            )
        else:
            unknown = scan_model(model).unregistered
    if shapes:
        dims = shape_bindings(model, shapes, dims)
    bound, bind_warnings = bind_dims(model, dims or {})
    warnings += bind_warnings
    tied = MappingProxyType(tied_copies(model, path.parent if path is not None else None))
    count = len(model.graph.node)
    data = _masked_bytes(model, unknown)
    masked_nodes = bool(unknown)
    del model, unknown  # shape inference makes its own copies: the ModelProto is not needed beside them
    inferred, infer_warnings = _infer_serialized(data, masked_nodes)
    del data
    warnings += infer_warnings
    types = value_types(inferred)
    order = topological_order(list(inferred.graph.node)) if inlined else tuple(range(count))
    if missing_outputs(inferred, types):
        base = path.parent.resolve() if path else None
        folded_model, folded = fold_small_constants(inferred, base, types, order)
        if folded:
            refolded, _ = _infer(folded_model)
            refolded_types = value_types(refolded)
            for name, type_proto in refolded_types.items():
                if not is_static(types.get(name)) and is_static(type_proto):
                    types[name] = type_proto
        propagate_fallback(inferred, types, order, small_constant_values(folded_model, base))
    return LoadedModel(
        inferred, path, MappingProxyType(types), MappingProxyType(bound), opset, tuple(warnings), order, tied
    )
