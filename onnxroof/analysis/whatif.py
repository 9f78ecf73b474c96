"""What-if knobs: re-cost a model as if it ran in another precision, or with sparse tensors (FRAME's knobs).

Precision (``--precision P``): every floating-point tensor (weights, inputs, activations) is restated at the
element size of ``P`` (:data:`ELEMENT_SIZE`: fp32/tf32 4 B, fp16/bf16 2 B, fp8/int8 1 B, int4 ½ B, fp64 8 B);
integer and boolean tensors (indices, shapes, masks, already-quantized weights) keep theirs. Every node then
computes at the platform's ``P`` peak (the analysis forces it).

Sparsity: a *density* ``d`` in (0, 1] is the share of non-zero elements. Densities are given for ``weight``,
``input`` and ``output`` tensors, uniformly (``--density weight=0.5``) or per layer (a density file keyed by
node name or node id, :func:`load_layer_densities`). One tensor has one density:

* a weight (an initializer, a Constant, or computed from those) takes the weight density of the layers that
  read it (the largest, when several do);
* a run-time tensor takes the output density of the layer that writes it when one is given (per layer, else
  uniform), else the input density of the layers that read it (the largest); graph inputs the latter;
* anything else, and load-time values such as shapes, is dense (1). The bodies of If/Loop/Scan are dense too
  (per-layer keys name main-graph nodes; precision restatement does reach the bodies).

Two switches, separate as in FRAME:

* ``compress_mem``: a tensor of density ``d`` and element size ``s`` is stored compressed with a one-bit
  occupancy bitmap per element: ``s' = min(s, s·d + 1/8)`` bytes per element (never larger than dense);
  every rule and the fusion pass then charge the compressed bytes. For 2:4 storage the overhead is the same
  (a 2-bit index per kept element at d = ½ is ⅛ B per element).
* ``skip_compute``: the FLOPs and MACs of multiply-accumulate ops (Conv, MatMul, Gemm, recurrent cells...:
  rules that report MACs) scale by the compute density the platform can exploit (:func:`compute_density`):
  ``2:4`` hardware (a sparse peak for the node's precision) runs a layer whose weight density is ≤ ½ at
  density ½ exactly and cannot use any other sparsity; ``unstructured`` hardware skips every zero operand
  pair: ``d_weight · d_input``; ``none`` skips nothing. Other ops are unchanged.
"""

from __future__ import annotations

import json
import math
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import field, replace
from pathlib import Path
from types import MappingProxyType

import onnx

from onnxroof.core.cost import Cost
from onnxroof.core.errors import OnnxroofError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.ir import Restate, TensorInfo
from onnxroof.core.protos import node_id
from onnxroof.core.states import Role, TimeModelKind
from onnxroof.core.strict_toml import parse_failure
from onnxroof.costing.node import BUFFER_NAME
from onnxroof.platform.model import Platform

ELEMENT_SIZE: Mapping[str, float] = MappingProxyType(
    {"fp64": 8, "fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
)
"""Bytes per element a tensor of each precision occupies in memory (tf32 is stored as fp32)."""
DTYPE_OF_PRECISION: Mapping[str, str] = MappingProxyType(
    {
        "fp64": "float64",
        "fp32": "float32",
        "tf32": "float32",
        "fp16": "float16",
        "bf16": "bfloat16",
        "fp8": "float8e4m3fn",
        "int8": "int8",
        "int4": "int4",
    }
)
DENSITY_KINDS: tuple[str, ...] = ("weight", "input", "output")
BITMAP_BYTES_PER_ELEMENT = 1 / 8
"""Index overhead of a compressed tensor: one occupancy bit per element."""
STRUCTURED_DENSITY = 0.5
"""The only density 2:4 structured sparsity can run at: two non-zeros in every four."""


class WhatIfError(OnnxroofError):
    """A what-if option or density file is malformed (names the option, file or key)."""


@frozen_dataclass(slots=True)
class Densities:
    """Densities of a layer's weights, inputs and outputs; None: not given."""

    weight: float | None = None
    input: float | None = None
    output: float | None = None

    def to_dict(self) -> dict[str, float]:
        return {kind: value for kind in DENSITY_KINDS if (value := getattr(self, kind)) is not None}


@frozen_dataclass
class WhatIf:
    """The what-if knobs of one analysis (all off by default): one frozen object passed from the CLI through
    :func:`onnxroof.analyze`, :func:`onnxroof.studies.compare.compare` and :func:`onnxroof.studies.sweep.sweep`."""

    precision: str | None = None
    densities: Densities = field(default_factory=Densities)
    layers: Mapping[str, Densities] = field(default_factory=lambda: MappingProxyType({}))
    """Per-layer densities, keyed by node name or node id."""
    compress_mem: bool = False
    skip_compute: bool = False
    peak: bool = False
    """Draw the roofline from the datasheet figures as given (``--peak``) rather than the platform's
    ``[sustained]`` shares of them (:mod:`onnxroof.platform.model`)."""
    kv_precision: str | None = None
    """The KV cache's own precision (``llm --kv-precision``): the tensors named in ``kv_tensors`` are restated at
    it, after ``precision`` (see :func:`make_restate`)."""
    kv_tensors: frozenset[str] = frozenset()
    """The KV cache's tensors (past inputs, present outputs) ``kv_precision`` restates."""
    weights: str | None = None
    """Weight-only quantization of a float graph (``llm --weights int4|int8``): see :func:`weight_only_itemsize`."""
    time_model: TimeModelKind | None = None
    """The time model placement uses (``--time-model``); None: the platform's default (``gpu`` on GPUs with a
    ``[gpu]`` table, else ``roofline``)."""

    @classmethod
    def of(
        cls,
        precision: str | None = None,
        densities: Mapping[str, float] | None = None,
        layer_densities: Mapping[str, Mapping[str, float]] | None = None,
        compress_mem: bool = False,
        skip_compute: bool = False,
        peak: bool = False,
        time_model: TimeModelKind | str | None = None,
    ) -> WhatIf:
        """The knobs from plain keywords (``densities={"weight": 0.5}``, ``layer_densities={node: {...}}``)."""
        return cls(
            precision=precision,
            densities=Densities(**(densities or {})),
            layers=MappingProxyType({k: Densities(**v) for k, v in (layer_densities or {}).items()}),
            compress_mem=compress_mem,
            skip_compute=skip_compute,
            peak=peak,
            time_model=None if time_model is None else TimeModelKind(time_model),
        )

    @property
    def has_densities(self) -> bool:
        return bool(self.densities.to_dict()) or any(d.to_dict() for d in self.layers.values())

    def to_dict(self) -> dict[str, object]:
        return {
            "precision": self.precision,
            "densities": self.densities.to_dict(),
            "layer_densities": {name: d.to_dict() for name, d in sorted(self.layers.items())},
            "compress_mem": self.compress_mem,
            "skip_compute": self.skip_compute,
            **({"peak": True} if self.peak else {}),
            **({"kv_precision": self.kv_precision} if self.kv_precision else {}),
            **({"weights": self.weights} if self.weights else {}),
            **({"time_model": str(self.time_model)} if self.time_model is not None else {}),
        }


# ------------------------------------------------------------------------------------------ parsing options


def parse_density(text: str) -> tuple[str, float]:
    """``"weight=0.5"`` -> ``("weight", 0.5)``; :class:`WhatIfError` names the option on any problem."""
    kind, sep, value = text.partition("=")
    kind = kind.strip()
    if not sep or kind not in DENSITY_KINDS:
        raise WhatIfError(f"--density {text!r}: expected KIND=VALUE with KIND one of {', '.join(DENSITY_KINDS)}")
    return kind, _density_value(value.strip(), f"--density {text!r}")


def uniform_densities(items: Iterable[str]) -> Densities:
    """Densities from repeated ``--density KIND=VALUE`` options (a kind given twice is an error)."""
    values: dict[str, float] = {}
    for text in items:
        kind, value = parse_density(text)
        if kind in values:
            raise WhatIfError(f"--density: {kind} given twice")
        values[kind] = value
    return Densities(**values)


def load_layer_densities(path: str | Path) -> Mapping[str, Densities]:
    """Per-layer densities from a TOML or JSON file: ``{"layers": {"<node name or id>": {"weight": 0.5}}}``.

    TOML: ``[layers."conv1"] weight = 0.5``. Unknown top-level keys, unknown kinds and values outside (0, 1]
    raise :class:`WhatIfError` naming the file and the dotted key.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise WhatIfError(f"{path}: cannot read density file: {exc.strerror or exc}") from None
    try:
        doc = json.loads(data) if path.suffix.lower() == ".json" else tomllib.loads(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # syntax, bad UTF-8, too many digits, nested too deep
        kind = "JSON" if path.suffix.lower() == ".json" else "TOML"
        raise WhatIfError(f"{path}: not valid {kind}: {parse_failure(exc)}") from None
    if not isinstance(doc, dict) or set(doc) - {"layers"} or not isinstance(doc.get("layers"), dict):
        raise WhatIfError(f'{path}: expected one table "layers" mapping node names to densities')
    layers: dict[str, Densities] = {}
    for name, raw in doc["layers"].items():
        if not isinstance(raw, dict) or not raw:
            raise WhatIfError(f"{path}: layers.{name}: expected a table of densities (weight, input, output)")
        values = {}
        for kind, value in raw.items():
            if kind not in DENSITY_KINDS:
                raise WhatIfError(f"{path}: layers.{name}.{kind}: unknown kind (allowed: {', '.join(DENSITY_KINDS)})")
            values[kind] = _density_value(value, f"{path}: layers.{name}.{kind}")
        layers[name] = Densities(**values)
    return MappingProxyType(layers)


def whatif_options(
    density: Iterable[str] | None,
    density_file: str | Path | None,
    compress_mem: bool,
    skip_compute: bool,
    precision: str | None = None,
    peak: bool = False,
    time_model: TimeModelKind | None = None,
) -> WhatIf:
    """The :class:`WhatIf` of the CLI's what-if options (``--density``, ``--density-file``, ``--compress-mem``,
    ``--skip-compute``, ``--peak``, ``--time-model``, and ``--precision`` where one precision applies to the whole
    run)."""
    layers = load_layer_densities(density_file) if density_file is not None else {}
    return WhatIf(
        precision=precision,
        densities=uniform_densities(density or []),
        layers=MappingProxyType(dict(layers)),
        compress_mem=compress_mem,
        skip_compute=skip_compute,
        peak=peak,
        time_model=time_model,
    )


def _density_value(value: object, where: str) -> float:
    try:
        number = float(value)  # type: ignore[arg-type]  # any value: float() raises, caught below
    except (TypeError, ValueError):
        raise WhatIfError(f"{where}: density must be a number in (0, 1], got {value!r}") from None
    if isinstance(value, bool) or not math.isfinite(number) or not 0 < number <= 1:
        raise WhatIfError(f"{where}: density must be a number in (0, 1], got {value!r}")
    return number


# ------------------------------------------------------------------------------------------ tensor densities


@frozen_dataclass(eq=False)
class DensityMap:
    """What each tensor's readers and writer say about its density; :meth:`of` resolves one tensor."""

    as_weight: Mapping[str, float]
    """Largest weight density among the layers reading the tensor."""
    written: Mapping[str, float]
    """Output density of the layer writing it."""
    as_input: Mapping[str, float]
    """Largest input density among the layers reading it."""

    def __bool__(self) -> bool:
        return bool(self.as_weight or self.written or self.as_input)

    def of(self, tensor: TensorInfo) -> float:
        """The tensor's density: a weight's from its readers' weight densities, a run-time tensor's from its
        writer's output density, else its readers' input densities; static values (shapes) and the rest 1."""
        if tensor.role == Role.WEIGHT:
            return self.as_weight.get(tensor.name, 1.0)
        if tensor.role == Role.STATIC:
            return 1.0
        written = self.written.get(tensor.name)
        return written if written is not None else self.as_input.get(tensor.name, 1.0)


def tensor_densities(graph: onnx.GraphProto, plan: WhatIf) -> DensityMap:
    """The densities ``plan`` gives the tensors of ``graph`` (rules: module docstring).

    Per-layer keys must name a node of the graph (by name or by id ``"{index}:{name or op_type}"``); an unknown
    key raises :class:`WhatIfError` (a typo would otherwise silently change nothing).
    """
    if not plan.layers and plan.densities == Densities():  # nothing given: skip the walk over every node
        return DensityMap(MappingProxyType({}), MappingProxyType({}), MappingProxyType({}))
    nodes = list(graph.node)
    by_key: dict[str, int] = {}
    for index, node in enumerate(nodes):
        by_key[node_id(index, node)] = index
        if node.name:
            by_key.setdefault(node.name, index)
    layer_of: dict[int, Densities] = {}
    for key, densities in plan.layers.items():
        if key not in by_key:
            raise WhatIfError(f"density file: layers.{key}: no node of the model has this name or id")
        layer_of[by_key[key]] = densities
    uniform = plan.densities
    as_weight: dict[str, float] = {}
    written: dict[str, float] = {}
    as_input: dict[str, float] = {}
    for index, node in enumerate(nodes):
        own = layer_of.get(index, Densities())
        weight, inputs, output = (
            value if value is not None else getattr(uniform, kind)
            for kind, value in (("weight", own.weight), ("input", own.input), ("output", own.output))
        )
        if output is not None:
            written.update((name, output) for name in node.output if name)
        for name in filter(None, node.input):
            if weight is not None:
                as_weight[name] = max(as_weight.get(name, 0.0), weight)
            if inputs is not None:
                as_input[name] = max(as_input.get(name, 0.0), inputs)
    return DensityMap(MappingProxyType(as_weight), MappingProxyType(written), MappingProxyType(as_input))


WEIGHT_ONLY_BITS: Mapping[str, int] = MappingProxyType({"int4": 4, "int8": 8})
"""Weight widths of ``--weights`` (weight-only quantization)."""
WEIGHT_ONLY_GROUP = 128
"""assumed: one scale per 128 weights along the reduction axis (the group size GenAI's int4 builder, AWQ and GPTQ
default to), each scale a 2-byte fp16, no zero point (symmetric)."""
WEIGHT_ONLY_SCALE_BYTES = 2


def weight_only_itemsize(weights: str) -> float:
    """Bytes per weight element under weight-only quantization at ``weights`` (``int4``/``int8``):
    ``bits / 8 + scale_bytes / group`` = ``4/8 + 2/128 = 0.515625`` B (int4), ``8/8 + 2/128 = 1.015625`` B (int8)."""
    if weights not in WEIGHT_ONLY_BITS:
        raise WhatIfError(f"--weights {weights!r}: expected one of {', '.join(WEIGHT_ONLY_BITS)}")
    return WEIGHT_ONLY_BITS[weights] / 8 + WEIGHT_ONLY_SCALE_BYTES / WEIGHT_ONLY_GROUP


def _is_float(tensor: TensorInfo) -> bool:
    return tensor.dtype.startswith(("float", "bfloat"))


def make_restate(plan: WhatIf, densities: DensityMap) -> Restate | None:
    """The per-tensor restatement for ``plan`` (None when it changes nothing), in this order:

    1. ``precision``: element size (and dtype) of the plan's precision for floating-point tensors;
    2. ``kv_precision``: the KV cache's tensors (``kv_tensors``, floating point) at that precision's element size
       and dtype, whatever ``precision`` says;
    3. ``weights``: every floating-point weight of rank ≥ 2 (the projections, embeddings, lm_head; not norms,
       biases or the rotary cos/sin tables, :data:`~onnxroof.costing.node.BUFFER_NAME`) at
       :func:`weight_only_itemsize` bytes per element, its dtype kept (the math runs at the activations'
       precision after dequantization); activations and the cache keep theirs;
    4. the compressed size ``min(s, s·d + 1/8)`` when ``compress_mem``."""
    size = ELEMENT_SIZE[plan.precision] if plan.precision else None
    dtype = DTYPE_OF_PRECISION[plan.precision] if plan.precision else None
    kv = (ELEMENT_SIZE[plan.kv_precision], DTYPE_OF_PRECISION[plan.kv_precision]) if plan.kv_precision else None
    kv_names = plan.kv_tensors
    weight_size = weight_only_itemsize(plan.weights) if plan.weights else None
    compress = plan.compress_mem and bool(densities)
    if size is None and kv is None and weight_size is None and not compress:
        return None

    def restate(tensor: TensorInfo) -> TensorInfo:
        if size is not None and dtype is not None and _is_float(tensor):
            tensor = replace(tensor, dtype=dtype, itemsize=size)
        if kv is not None and tensor.name in kv_names and _is_float(tensor):
            tensor = replace(tensor, dtype=kv[1], itemsize=kv[0])
        shape = tensor.shape
        weight = tensor.role == Role.WEIGHT and shape is not None and len(shape) >= 2 and _is_float(tensor)
        if weight_size is not None and weight and not BUFFER_NAME.search(tensor.name):
            tensor = replace(tensor, itemsize=weight_size)
        if compress:
            density = densities.of(tensor)
            if density < 1.0:
                tensor = replace(tensor, itemsize=compressed_itemsize(tensor.itemsize, density))
        return tensor

    return restate


def compressed_itemsize(itemsize: float, density: float) -> float:
    """Bytes per element of a tensor of density ``d`` stored compressed: ``min(s, s·d + 1/8)``."""
    return min(itemsize, itemsize * density + BITMAP_BYTES_PER_ELEMENT)


# ---------------------------------------------------------------------------------------- compute density


def compute_density(sparsity: str, has_sparse_peak: bool, weight: float, inputs: float) -> float:
    """The share of a multiply-accumulate op's FLOPs that runs under ``skip_compute``.

    ``2:4`` (only where the platform has a sparse peak for the op's precision): ``½`` when ``weight ≤ ½``, else
    1; ``unstructured``: ``weight · inputs``; ``none``: 1.
    """
    if sparsity == "unstructured":
        return weight * inputs
    if sparsity == "2:4" and has_sparse_peak and weight <= STRUCTURED_DENSITY:
        return STRUCTURED_DENSITY
    return 1.0


def operand_densities(inputs: Iterable[TensorInfo | None], densities: DensityMap) -> tuple[float, float]:
    """(weight density, input density) of a node: its densest weight input and its first run-time input."""
    weight, first_input = None, None
    for tensor in inputs:
        if tensor is None:
            continue
        if tensor.role == Role.WEIGHT:
            density = densities.of(tensor)
            weight = density if weight is None else max(weight, density)
        elif first_input is None and not tensor.is_constant:
            first_input = densities.of(tensor)
    return (1.0 if weight is None else weight), (1.0 if first_input is None else first_input)


def skip_zeros(cost: Cost, density: float) -> Cost:
    """``cost`` with its FLOPs and MACs scaled by the compute ``density`` (traffic unchanged)."""
    return replace(cost, flops=cost.flops * density, macs=cost.macs * density)


def whatif_warnings(plan: WhatIf, platform: Platform) -> list[str]:
    """What a user should know about knobs that change nothing on this platform."""
    warnings = []
    if plan.has_densities and not (plan.compress_mem or plan.skip_compute):
        warnings.append("densities given without --compress-mem or --skip-compute: they change nothing")
    if (plan.compress_mem or plan.skip_compute) and not plan.has_densities:
        warnings.append("--compress-mem/--skip-compute without densities (--density, --density-file): all dense")
    if plan.skip_compute and plan.has_densities:
        if platform.sparsity == "none":
            warnings.append(
                f"platform '{platform.name}' cannot skip zeros (sparsity = none): --skip-compute changes no FLOPs"
            )
        elif platform.sparsity == "2:4":
            weights = [plan.densities.weight, *(d.weight for d in plan.layers.values())]
            if not any(w is not None and w <= STRUCTURED_DENSITY for w in weights):
                warnings.append(
                    f"platform '{platform.name}' skips only 2:4 structured sparsity (weight density ≤ 0.5, run at "
                    "0.5): no weight density qualifies, --skip-compute changes no FLOPs"
                )
    return warnings
