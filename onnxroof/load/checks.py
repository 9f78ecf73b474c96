"""The loader's checks of a parsed model, before anything is inferred: the opsets it imports, where its external
data points (inside the model's folder, regular files only), and ONNX's checker with the default-domain ops ONNX
Runtime registers itself (``SimplifiedLayerNormalization``...) masked as custom ops. One walk over every graph
(:func:`scan_model`) feeds them all.
"""

from __future__ import annotations

import stat
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import onnx
from onnx import TensorProto, helper

from onnxroof.core.dtypes import dtype_info
from onnxroof.core.errors import ModelError, one_line
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.protos import all_graphs, normalize_domain

MIN_OPSET = 7


def _external_tensors(model: onnx.ModelProto):
    for graph in all_graphs(model.graph):
        for tensor in graph.initializer:
            if tensor.data_location == TensorProto.EXTERNAL:
                yield tensor
        for node in graph.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.TENSOR and attr.t.data_location == TensorProto.EXTERNAL:
                    yield attr.t


class ModelScan(NamedTuple):
    """What the loader's checks need from every graph of a model, found in one walk (:func:`scan_model`). A named
    tuple: made once per read, only its fields are read (never compared, hashed or printed), and it is cheaper to
    define at import than a frozen dataclass.

    ``external``: the tensors holding external data (initializers and ``Constant``-style tensor attributes), in the
    order :func:`_external_tensors` yields them; ``unregistered``: :func:`unregistered_nodes`, in the same order.
    Both hold the model's own messages: drop the scan with the model. ``undecodable``: the nodes whose ``op_type``
    or ``domain`` is not valid UTF-8 (protobuf hands such a string over as ``bytes``), described. ``out_of_range``:
    the default-domain nodes whose window attribute (:data:`WINDOW_ATTRIBUTES`) holds a value outside 1 ..
    :data:`MAX_WINDOW` - 1, described. ``stored_weight_bytes``: the bytes the file stores as weights, summed in the
    same walk: Σ numel × element size over every initializer (external data included: its dims say its size) and
    every default-domain ``Constant`` node's tensor, in every graph; each stored copy counted (tied copies too);
    read from dims and data types, never from the payloads; packed 4-bit types count half a byte an element
    (:func:`~onnxroof.core.dtypes.dtype_info`). Every term is a whole number of half bytes, so the sum is exact in
    any order. This is what the model occupies, not what a run reads: the totals' ``weight_bytes`` counts the
    distinct weights the bound graph's nodes read, at the size a what-if precision gives them, after small constants
    are folded. ``main``: what binding wants to know of the main graph.
    """

    external: tuple[TensorProto, ...]
    unregistered: tuple[onnx.NodeProto, ...]
    main: MainGraphFacts
    undecodable: tuple[str, ...] = ()
    out_of_range: tuple[str, ...] = ()
    stored_weight_bytes: float = 0.0


@frozen_dataclass
class MainGraphFacts:
    """What :func:`scan_model` finds of the main graph's nodes that spares each binding a walk over them.

    ``output_slots``: Σ ``len(node.output)`` (empty names included); ``bodies``: whether a node holds a body (If,
    Loop...); ``value_info``: whether the file gives the graph ``value_info`` of its own; ``ranges``: the positions
    of the default-domain ``Range`` nodes, in file order (empty: :func:`~onnxroof.load.ranges.seed_range_lengths`
    has no work; otherwise it looks at them only, without walking the nodes to find them);
    ``attributes``: whether a node holds an attribute (binding changes none: when none does, the IR is built
    without reading them, :func:`~onnxroof.core.ir.build_ir`)."""

    output_slots: int
    bodies: bool
    value_info: bool
    ranges: tuple[int, ...]
    attributes: bool

    @property
    def countable(self) -> bool:
        """Whether counting typed values tells if inference typed every node output
        (:func:`~onnxroof.load.shapes.every_output_static`): no body, no ``value_info`` of the file's own."""
        return not self.bodies and not self.value_info


WINDOW_ATTRIBUTES = frozenset({"kernel_shape", "strides", "dilations"})
"""Attributes that size a sliding window (Conv, ConvTranspose, the pools, Col2Im...): each value at least 1."""
MAX_WINDOW = 2**31
"""A window value of 2**31 or more is refused before shape inference. ONNX's inference turns a kernel larger
than its input into a negative output dim, and a Slice (or another op that clamps indices to a dim) downstream
then trips a C++ assertion in onnx's shape inference that aborts the whole process (fuzz_campaign seed 11,
mutant 366: silero's stft Conv with kernel_shape 2**63 - 1). No input dim ONNX Runtime can allocate along one
axis reaches 2**31 with a kernel that large, so no model it runs is refused."""


def scan_model(model: onnx.ModelProto) -> ModelScan:
    """One walk over every graph (pre-order, as :func:`~onnxroof.core.protos.all_graphs`): external tensors,
    unregistered nodes, the stored weight bytes.

    Each check used to walk every graph itself (ten walks of a 200k-node chain: 0.8 s); a node's fields are
    read once here, and ``onnx.defs.has`` is asked once per op type.
    """
    opsets = {normalize_domain(o.domain): o.version for o in model.opset_import}
    version = opsets.get("")
    registered: dict[str, bool] = {}
    external: list[TensorProto] = []
    unregistered: list[onnx.NodeProto] = []
    undecodable: list[str] = []
    out_of_range: list[str] = []
    weight_bytes = 0.0
    main: MainGraphFacts | None = None
    tensor_kind, graph_kind, graphs_kind, ints_kind = (
        onnx.AttributeProto.TENSOR,
        onnx.AttributeProto.GRAPH,
        onnx.AttributeProto.GRAPHS,
        onnx.AttributeProto.INTS,
    )

    def attributes(node: onnx.NodeProto, op_type: str, domain: str, bodies: list[onnx.GraphProto]) -> float:
        """Scan ``node``'s attributes (external tensors, bodies into ``bodies``, window values); the bytes of the
        weight it stores when it is a ``Constant``."""
        stored = 0.0
        for attr in node.attribute:
            kind = attr.type
            if kind == tensor_kind:
                if attr.t.data_location == TensorProto.EXTERNAL:
                    external.append(attr.t)
                if op_type == "Constant" and domain in ("", "ai.onnx"):
                    stored += _stored_bytes(attr.t)
            elif kind == graph_kind:
                bodies.append(attr.g)
            elif kind == graphs_kind:
                bodies.extend(attr.graphs)
            elif kind == ints_kind and attr.name in WINDOW_ATTRIBUTES and domain in ("", "ai.onnx"):
                bad = [v for v in attr.ints if not 0 < v < MAX_WINDOW]
                if bad:
                    out_of_range.append(
                        f"node '{_text(node.name)}' ({op_type}): attribute '{attr.name}' holds {bad[0]}, "
                        f"must lie in 1..{MAX_WINDOW - 1}"
                    )
        return stored

    def visit(graph: onnx.GraphProto, is_main: bool) -> None:
        nonlocal weight_bytes, main
        external.extend(t for t in graph.initializer if t.data_location == TensorProto.EXTERNAL)
        weight_bytes += sum(_stored_bytes(t) for t in graph.initializer)
        bodies: list[onnx.GraphProto] = []
        slots, attributed = 0, False
        ranges: list[int] = []
        for position, node in enumerate(graph.node):
            slots += len(node.output)
            op_type, domain = node.op_type, node.domain
            if not isinstance(op_type, str) or not isinstance(domain, str):  # not valid UTF-8 in the file
                undecodable.append(f"node '{_text(node.name)}' ({_text(op_type)}, graph '{_text(graph.name)}')")
                continue
            if op_type == "Range" and domain in ("", "ai.onnx"):
                ranges.append(position)
            if version is not None and domain in ("", "ai.onnx"):
                known = registered.get(op_type)
                if known is None:
                    known = registered[op_type] = onnx.defs.has(op_type, version, "")
                if not known:
                    unregistered.append(node)
            if len(node.attribute):  # most nodes have none: len() is the cheap test
                attributed = True
                weight_bytes += attributes(node, op_type, domain, bodies)
        if is_main:
            main = MainGraphFacts(slots, bool(bodies), len(graph.value_info) > 0, tuple(ranges), attributed)
        for body in bodies:  # after the graph's own nodes, as all_graphs yields them
            visit(body, False)

    visit(model.graph, True)
    assert main is not None  # the first visit is the main graph's
    return ModelScan(
        tuple(external),
        tuple(unregistered),
        main,
        tuple(undecodable),
        tuple(out_of_range),
        weight_bytes,
    )


def _stored_bytes(tensor: TensorProto) -> float:
    """numel × element size of ``tensor``, from its dims and data type."""
    numel = 1
    for d in tensor.dims:
        numel *= d
    return numel * dtype_info(tensor.data_type)[1]


def _text(value: str | bytes) -> str:
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


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
    :func:`scan_model`; without external tensors the model itself is returned (no copy), and when the main
    graph's initializers are all of them (``scan.external`` counts every graph's), no other graph is walked.
    """
    if not scan.external:
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    external = [t for t in copy.graph.initializer if t.data_location == TensorProto.EXTERNAL]
    names = {t.name for t in external}
    kept = [t for t in copy.graph.initializer if t.name not in names]
    listed = {v.name for v in copy.graph.input}
    del copy.graph.initializer[:]
    copy.graph.initializer.extend(kept)
    types: dict[tuple[int, tuple[int, ...]], onnx.TypeProto] = {}  # one per (dtype, dims): layers repeat shapes
    for tensor in external:
        if tensor.name in listed:
            continue
        key = (tensor.data_type, tuple(tensor.dims))
        type_proto = types.get(key)
        if type_proto is None:
            type_proto = types[key] = helper.make_tensor_type_proto(key[0], list(key[1]))
        value = copy.graph.input.add()
        value.name = tensor.name
        value.type.CopyFrom(type_proto)
    if len(external) < len(scan.external):  # some remain, in subgraphs and Constant attributes: walk to them
        for tensor in _external_tensors(copy):
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
        for graph in all_graphs(model.graph)
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
    for graph in all_graphs(model.graph):
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
    if scan.undecodable:
        raise ModelError(f"{where}: {scan.undecodable[0]}: op_type or domain is not valid UTF-8")
    if scan.out_of_range:
        raise ModelError(f"{where}: {scan.out_of_range[0]}")
    checked = _without_external_initializers(model, scan)
    # the copy holds the model's nodes: found again in it (its own messages) only when there are some to find
    unknown = list(scan.unregistered) if checked is model or not scan.unregistered else unregistered_nodes(checked)
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
