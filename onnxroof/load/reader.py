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
from dataclasses import field, replace
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

import onnx
import onnx.inliner

from onnxroof.core.errors import ModelError, one_line
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.protos import topological_order
from onnxroof.load.checks import (
    MASK_DOMAIN,
    MainGraphFacts,
    check_external_paths,
    check_model,
    check_opsets,
    masked,
    scan_model,
    unmask,
    unregistered_nodes,
)
from onnxroof.load.dims import bind_dims, parse_dim_bindings, shape_bindings, symbolic_dims
from onnxroof.load.lean import copy_without_payloads, parse_without_payloads
from onnxroof.load.ranges import seed_range_lengths
from onnxroof.load.shapes import (
    DATA_PROP_ELEMENTS,
    every_output_static,
    fold_small_constants,
    infer,
    is_static,
    large_integer_input,
    missing_outputs,
    propagate_fallback,
    small_constant_values,
    static_types,
    value_types,
)
from onnxroof.load.tied import tied_copies

__all__ = [
    "LoadedModel",
    "ModelFile",
    "bind_dims",
    "bind_model",
    "load_model",
    "parse_dim_bindings",
    "read_file",
    "read_model",
    "symbolic_dims",
]

MAX_MODEL_BYTES = 4 * 2**30
"""The largest model file read: a protobuf cannot exceed 2 GiB, so anything over twice that is not one."""


@frozen_dataclass
class LoadedModel:
    """A shape-inferred model whose weights were never loaded. The inferred types are ``value_types``: ``model``
    is the bound graph without its main graph's ``value_info`` (:func:`_without_value_info`; bodies keep theirs).

    ``order``: the main graph's :func:`~onnxroof.core.protos.topological_order`, computed once here and handed
    to the shape fallbacks and to ``build_ir(order=...)``; a ``range`` when it is the file's order (a tuple of
    a million ints would hold 36 MB).
    """

    model: onnx.ModelProto = field(repr=False)
    path: Path | None
    value_types: Mapping[str, onnx.TypeProto] = field(repr=False)
    dims: Mapping[str, int]
    opset: int
    warnings: tuple[str, ...]
    order: Sequence[int] = field(repr=False)
    tied: Mapping[str, str] = field(default_factory=dict)
    """Initializers the exporter stored twice (copy -> original, :func:`onnxroof.load.tied.tied_copies`)."""
    stored_weight_bytes: float = 0.0
    """The weights as the file stores them (``ModelScan.stored_weight_bytes``,
    :func:`~onnxroof.load.checks.scan_model`), before any folding or binding."""
    attributes: bool = True
    """Whether a main-graph node may hold an attribute: False when the read stage's scan found none
    (:attr:`~onnxroof.load.checks.MainGraphFacts.attributes`; binding, inference and unmasking add none)."""


# ---------------------------------------------------------------------------------------------- reading


def read_model(
    source: str | os.PathLike[str] | onnx.ModelProto, weights: bool = True
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
        copy = onnx.ModelProto()
        copy.CopyFrom(source)
        return copy, None
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
    model: onnx.ModelProto | None = None
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


# ------------------------------------------------------------------------------------------- entry point


def _infer(
    model: onnx.ModelProto, unknown: Sequence[onnx.NodeProto] | None = None
) -> tuple[onnx.ModelProto, list[str]]:
    """:func:`~onnxroof.load.shapes.infer` with unregistered default-domain nodes masked (strict inference
    would refuse them; their outputs are shaped by the contrib shape functions afterwards). ``unknown``: the
    model's :func:`unregistered_nodes`, when already found."""
    unknown = unregistered_nodes(model) if unknown is None else unknown
    data_prop = large_integer_input(model) is None
    return _infer_serialized(_masked_bytes(model, unknown), masked=bool(unknown), data_prop=data_prop)


def _masked_bytes(model: onnx.ModelProto, unknown: Sequence[onnx.NodeProto]) -> bytes:
    """The model serialized with ``unknown`` masked (:func:`masked`); the model itself is left as it was."""
    with masked(model, list(unknown)):
        data: bytes = model.SerializeToString()
    return data


def _infer_serialized(data: bytes, masked: bool, data_prop: bool = True) -> tuple[onnx.ModelProto, list[str]]:
    """Infer shapes from a serialized model (:func:`_masked_bytes`): the caller may drop its ModelProto first,
    so that it and shape inference's copies are not alive at once. The result is unmasked (when the model
    was masked, or already imported :data:`MASK_DOMAIN` as :func:`unmask` always handled)."""
    inferred, warnings = infer(data, data_prop)
    if masked or any(o.domain == MASK_DOMAIN for o in inferred.opset_import):
        inferred = unmask(inferred)
    return inferred, warnings


@frozen_dataclass
class ModelFile:
    """A model read and checked once (no weight bytes read): what every binding of its dims starts from.

    The read stage: parsed (:func:`read_model`), opsets, external paths and ONNX's checker applied, local
    functions inlined, tied weights found. ``model`` is never changed after reading: :func:`bind_model` binds a
    copy, so one file serves any number of bindings (a sweep's points, an LLM's phases).
    """

    model: onnx.ModelProto = field(repr=False)
    path: Path | None
    opset: int
    warnings: tuple[str, ...]
    inlined: bool
    tied: Mapping[str, str] = field(repr=False)
    unregistered: tuple[onnx.NodeProto, ...] = field(repr=False, default=())
    """Default-domain nodes ONNX does not register (:func:`unregistered_nodes`), messages of ``model``."""
    stored_weight_bytes: float = 0.0
    """The weights as the file stores them (``ModelScan.stored_weight_bytes``, summed by
    :func:`~onnxroof.load.checks.scan_model`): a fact of the file, found once here rather than per binding
    (binding changes graph inputs only)."""
    main: MainGraphFacts | None = None
    """What the scan found of the main graph's nodes (:class:`~onnxroof.load.checks.MainGraphFacts`), sparing each
    binding a walk over them; None: not known, each binding walks."""


def read_file(source: str | os.PathLike[str] | onnx.ModelProto | ModelFile) -> ModelFile:
    """Read and check ``source`` once (:class:`ModelFile`); a :class:`ModelFile` is returned as it is."""
    if isinstance(source, ModelFile):
        return source
    model, path = read_model(source, weights=False)
    check_opsets(model, path)  # before anything asks ONNX for a schema at those versions
    scan = scan_model(model)
    check_external_paths(model, path, scan)
    warnings: list[str] = []
    opset = check_model(model, path, warnings, scan)
    unknown, stored, main = scan.unregistered, scan.stored_weight_bytes, scan.main
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
            rescan = scan_model(model)
            unknown, stored, main = rescan.unregistered, rescan.stored_weight_bytes, rescan.main
    tied = MappingProxyType(tied_copies(model, path.parent if path is not None else None))
    return ModelFile(model, path, opset, tuple(warnings), inlined, tied, tuple(unknown), stored, main)


def bind_model(
    file: ModelFile,
    dims: Mapping[str, object] | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> LoadedModel:
    """The bind stage's load half: ``file``'s model with dims and shapes bound and shapes inferred, the file
    left as it was (a copy is bound). ``shapes`` binds whole inputs (``{"image": (1, 3, 48, 192)}``,
    :func:`~onnxroof.load.dims.shape_bindings`); a symbol it gives a value other than ``dims`` does is a
    :class:`~onnxroof.core.errors.DimsError`."""
    model = onnx.ModelProto()
    model.CopyFrom(file.model)
    unknown = unregistered_nodes(model) if file.unregistered else ()
    prepared = _prepare(file, model, unknown, dims, shapes)
    del model, unknown  # the serialized copy is all shape inference needs
    return _infer_bound(file, prepared)


def load_model(
    source: str | os.PathLike[str] | onnx.ModelProto | ModelFile,
    dims: Mapping[str, object] | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> LoadedModel:
    """Read, check, bind dims, inline local functions and infer shapes; never reads weight bytes.

    :func:`read_file` then :func:`bind_model`; a file read here for one binding is bound in place (nobody
    else holds it), saving the copy, and its ModelProto is dropped once serialized: it and shape inference's
    copies are never alive at once (a million-node chain: ~300 MB less at the peak).
    """
    if isinstance(source, ModelFile):
        return bind_model(source, dims, shapes)
    file = read_file(source)
    prepared = _prepare(file, file.model, file.unregistered, dims, shapes)
    file = replace(file, model=onnx.ModelProto(), unregistered=())  # the only reference to the parsed model
    return _infer_bound(file, prepared)


class _Prepared(NamedTuple):
    """A model with its dims bound, serialized for shape inference (:func:`_prepare`). Private, made once per
    binding and read field by field: a named tuple, cheaper to define at import than a frozen dataclass."""

    data: bytes
    masked: bool
    dims: dict[str, int]
    warnings: tuple[str, ...]
    node_count: int
    data_prop: bool


def _prepare(
    file: ModelFile,
    model: onnx.ModelProto,
    unknown: Sequence[onnx.NodeProto],
    dims: Mapping[str, object] | None,
    shapes: Mapping[str, tuple[int, ...]] | None,
) -> _Prepared:
    """Bind ``model``'s dims (``file``'s model or a copy of it, changed in place) and serialize it with
    ``unknown`` masked; nothing returned refers to ``model``."""
    warnings = list(file.warnings)
    if shapes:
        dims = shape_bindings(model, shapes, dims)
    bound, bind_warnings = bind_dims(model, dims or {})
    warnings += bind_warnings
    if file.main is None or file.main.ranges:  # one inference where a Range's length is known from the bound dims
        seed_range_lengths(model, None if file.main is None else file.main.ranges)
    large = large_integer_input(model)
    if large is not None:
        warnings.append(
            f"input '{large[0]}' holds {large[1]:,} integer elements (over {DATA_PROP_ELEMENTS:,}): shape inference "
            "runs without data propagation, whose memory grows with them; shapes computed from values come from "
            "the fallbacks"
        )
    data = _masked_bytes(model, unknown)
    return _Prepared(
        data,
        bool(unknown),
        bound,
        tuple(warnings),
        len(model.graph.node),
        large is None,
    )


def _infer_bound(file: ModelFile, prepared: _Prepared) -> LoadedModel:
    """Infer the shapes of a :func:`_prepare`-d model; ``file`` gives its path, opsets, inlining and tied weights."""
    path = file.path
    inferred, infer_warnings = _infer_serialized(prepared.data, prepared.masked, data_prop=prepared.data_prop)
    warnings = [*prepared.warnings, *infer_warnings]
    bound, count = prepared.dims, prepared.node_count
    types = value_types(inferred)
    order = topological_order(list(inferred.graph.node)) if file.inlined else range(count)
    main = file.main
    if main is not None and main.countable and every_output_static(inferred.graph, types, main.output_slots):
        missing: list[str] = []  # nothing for the fallbacks: the count says so without walking the nodes
        bodies = False
    else:
        missing, bodies = missing_outputs(inferred, types)
    if missing:
        base = path.parent.resolve() if path else None
        folded_model, folded = fold_small_constants(inferred, base, types, order)
        if folded:
            # folding only removes nodes: a file without unregistered nodes has none to mask here either
            refolded = _infer(folded_model, None if prepared.masked else ())[0]
            for name, found in static_types(refolded.graph, missing).items():  # every other output has one
                if not is_static(types.get(name)):
                    types[name] = found
        # Without an output left unshaped or a node with bodies (it always shapes them), the fallback would fill
        # nothing: walking the graph to find that out cost 56 ms a binding of the 7B-shaped decoder.
        if bodies or not all(is_static(types.get(name)) for name in missing):
            propagate_fallback(inferred, types, order, small_constant_values(folded_model, base))
    return LoadedModel(
        _without_value_info(inferred),
        path,
        MappingProxyType(types),
        MappingProxyType(bound),
        file.opset,
        tuple(warnings),
        order,
        file.tied,
        file.stored_weight_bytes,
        main is None or main.attributes,
    )


def _without_value_info(inferred: onnx.ModelProto) -> onnx.ModelProto:
    """``inferred`` made anew without its main graph's ``value_info`` (a body keeps its own: its IR is built from
    it). The main graph's types are in ``value_types`` (messages of their own, :func:`value_types`), and a
    ValueInfoProto per tensor doubles the protobuf a bound graph is built from: on a chain of a million
    elementwise ops, 975 MB with them, 440 MB without (RSS), alive beside the IR as it is built. Clearing the
    field alone frees nothing (the messages stay in the protobuf's arena): the copy, parsed from its
    serialization, has an arena of its own, and the inferred one is freed when the caller drops it."""
    inferred.graph.ClearField("value_info")
    lean = onnx.ModelProto()
    lean.ParseFromString(inferred.SerializeToString())
    return lean
