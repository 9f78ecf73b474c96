"""Place a cost on a platform's roofline.

For a kernel with ``F`` FLOPs and ``B`` bytes moved on a platform with peak ``P`` (FLOP/s, for the precision
it computes in):

* bandwidth: without measured cache levels, the DRAM bandwidth ``W_dram`` for all ``B`` bytes. With
  ``[memory] cache_levels``, the kernel's *cold* bytes ``C`` (``0 ≤ C ≤ B``, default 0: e.g. the weights of a
  model too large for the caches, evicted between runs) stream from DRAM, and its *hot* bytes ``H = B − C``
  at ``W_H``, the bandwidth of the smallest level whose size holds ``H`` (DRAM if none does): caches are
  assumed warm, as in repeated inference. The effective bandwidth is
  ``W = B / (C / W_dram + H / W_H)`` (``= W_H`` when ``C = 0``);
* efficiency ``e`` in (0, 1]: the platform's ``[efficiency]`` figure for the kernel's op class (FRAME-style
  derating, see :func:`op_class`), 1 when no class is given or the platform has no figure for it;
* intensity ``I = F / B`` (FLOP/byte); ridge ``R = P / W``;
* attainable FLOP/s ``= e · min(P, I · W)`` (the roofline, derated);
* ``t_compute = F / (e · P)``, ``t_memory = B / (e · W) = (C / W_dram + H / W_H) / e``;
* utilization ``u`` in (0, 1]: the share of a processing-element array a GEMM-like kernel keeps busy
  (:mod:`onnxroof.roofline.pe_array`; 1 without an ``[array]`` or for other kernels); the compute roof is ``u · P``;
* predicted time ``t = max(t_compute, t_memory) + t_launch`` with ``t_compute = F / (e · u · P)`` (per-kernel
  launch/dispatch overhead ``launch_overhead_s`` × launches);
* bound: ``compute`` when ``t_compute ≥ t_memory`` (equivalently ``I ≥ u · R``), else ``memory``;
* energy (platforms with energy figures, :mod:`onnxroof.roofline.energy`): ``F · E_op`` plus the DRAM bytes (the cold
  ones, and the hot ones when no cache level holds them) × ``E_dram`` and the cache-served bytes × ``E_onchip``.

``P`` and ``W_dram`` are the platform's roofs (:meth:`Platform.peak`, :attr:`Platform.roof_bandwidth`): the
datasheet figures times the ``[sustained]`` shares, or the datasheet figures as given with ``--peak``.
Bundled datasheet platforms have neither cache levels nor efficiency figures, so for them ``W`` is the DRAM
roof and ``e = 1``: the plain roofline.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

import onnxroof.rules  # noqa: F401  (op_class looks up rule families)
from onnxroof.core.cost import Cost
from onnxroof.core.errors import PlatformError
from onnxroof.core.registry import lookup
from onnxroof.core.states import Bound
from onnxroof.fusion.patterns import PATTERNS_BY_NAME
from onnxroof.platform.model import PRECISION_FALLBACK, Platform
from onnxroof.roofline.energy import Energy
from onnxroof.roofline.place import Work, floats, place

#: The platform precision an element type computes in. Integer and boolean ops that are not int8 run on
#: the vector units at roughly the fp32 rate, so they use the fp32 peak.
PRECISION_OF_DTYPE = {
    "float32": "fp32",
    "float16": "fp16",
    "bfloat16": "bf16",
    "float64": "fp64",
    "int8": "int8",
    "uint8": "int8",
    "int4": "int4",
    "uint4": "int4",
    "float8e4m3fn": "fp8",
    "float8e4m3fnuz": "fp8",
    "float8e5m2": "fp8",
    "float8e5m2fnuz": "fp8",
}


def precision_of(dtype: str) -> str:
    return PRECISION_OF_DTYPE.get(dtype, "fp32")


def resolve_precision(platform: Platform, wanted: str) -> str:
    """The precision whose peak a node of precision ``wanted`` uses on ``platform`` (the fallback chain
    :data:`onnxroof.platform.model.PRECISION_FALLBACK`)."""
    available = platform.precisions()
    current: str | None = wanted
    while current is not None:
        if current in available:
            return current
        current = PRECISION_FALLBACK.get(current)
    if not available:
        raise PlatformError(f"{platform.path}: no peak figures")
    return available[0]


#: Op types by efficiency class, where the class is not simply the family of the op's cost rule: fused ops a
#: runtime creates, transcendental elementwise ops (activation), norms and softmax.
_CLASS_OPS: dict[str, frozenset[str]] = {
    "matmul": frozenset(
        {
            "MatMul",
            "Gemm",
            "Einsum",
            "FusedMatMul",
            "FusedGemm",
            "MatMulInteger",
            "QLinearMatMul",
            "MatMulIntegerToFloat",
            "DynamicQuantizeMatMul",
            "MatMulNBits",
            "QGemm",
        }
    ),
    "conv": frozenset({"Conv", "ConvTranspose", "FusedConv", "ConvResidual", "QLinearConv", "ConvInteger", "NhwcConv"}),
    "activation": frozenset(
        {
            "Erf",
            "Exp",
            "Log",
            "Sigmoid",
            "Tanh",
            "Gelu",
            "BiasGelu",
            "FastGelu",
            "QuickGelu",
            "GeluTanh",
            "SiLU",
            "Swish",
            "Mish",
            "Softplus",
            "Softsign",
            "HardSwish",
            "Elu",
            "Selu",
            "Celu",
            "Pow",
            "Sqrt",
            "Reciprocal",
            "Sin",
            "Cos",
            "Tan",
            "Asin",
            "Acos",
            "Atan",
            "Sinh",
            "Cosh",
            "Asinh",
            "Acosh",
            "Atanh",
        }
    ),
    # at inference a per-channel scale and shift; (de)quantization a per-element one
    "elementwise": frozenset({"BatchNormalization", "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}),
    "normalization": frozenset(
        {
            "LayerNormalization",
            "SkipLayerNormalization",
            "SimplifiedLayerNormalization",
            "SkipSimplifiedLayerNormalization",
            "RMSNormalization",
            "GroupNormalization",
            "InstanceNormalization",
            "MeanVarianceNormalization",
        }
    ),
    "lrn": frozenset({"LRN"}),
    "softmax": frozenset({"Softmax", "LogSoftmax", "Hardmax"}),
}
_CLASS_OF_OP = {op: cls for cls, ops in _CLASS_OPS.items() for op in ops}
#: Cost-rule family (:attr:`RuleEntry.family`, declared once by each module of ``onnxroof.rules``) to efficiency
#: class, for every other op.
_FAMILY_CLASS = {
    "matmul": "matmul",
    "conv": "conv",
    "elementwise": "elementwise",
    "normalization": "normalization",
    "pooling": "pooling",
    "reduction": "reduction",
    "movement": "movement",
    "indexing": "indexing",
    "recurrent": "recurrent",
}


def op_class(
    op_type: str, domain: str = "", attrs: Mapping[str, Any] | None = None, channels: int | None = None
) -> str:
    """The efficiency class of an op (a key of a platform's ``[efficiency]`` table).

    ``matmul``, ``conv``, ``activation`` (transcendental elementwise ops and the fused activations: Erf, Exp,
    Sigmoid, Tanh, Gelu...), ``normalization`` (Layer/Skip/RMS/Group/Instance norms; BatchNormalization, at
    inference a per-channel scale and shift, is ``elementwise``), ``lrn`` (local response
    normalization, a class of its own because runtimes implement it as plain loops far below the roofline)
    and ``softmax`` are listed by op type; any other op takes the family of its cost rule (``elementwise``,
    ``pooling``, ``reduction``, ``movement``, ``indexing``, ``recurrent``), else ``other``. A Conv whose
    ``group`` attribute is above 1 and equals its input ``channels`` (or any grouped Conv when ``channels``
    is unknown) is ``depthwise``.
    """
    cls = _CLASS_OF_OP.get(op_type)
    if cls is None:
        entry = lookup(domain, op_type)
        cls = _FAMILY_CLASS.get(entry.family if entry is not None else "", "other")
    if cls == "conv":
        group = int((attrs or {}).get("group", 1) or 1)
        if group > 1 and (channels is None or group == channels):
            return "depthwise"
    return cls


def kernel_op_class(
    op_types: Sequence[str],
    patterns: Sequence[str] = (),
    domain: str = "",
    attrs: Mapping[str, Any] | None = None,
    channels: int | None = None,
) -> str:
    """The efficiency class of a kernel: that of the op the runtime runs for it.

    A fused kernel whose fusion patterns rename it (``Conv`` + ``Relu`` → ``FusedConv``, ``Add`` +
    ``LayerNormalization`` → ``SkipLayerNormalization``, erf-GELU → ``Gelu``) takes the class of the last
    name given; a generic pointwise fusion is ``activation`` when any member is, else ``elementwise``;
    any other kernel takes its anchor's (first op's) class. ``domain``, ``attrs`` and ``channels`` are the
    anchor's (see :func:`op_class`).
    """
    produced = None
    for name in reversed(patterns):
        found = PATTERNS_BY_NAME.get(name)
        if found is not None and getattr(found, "produces", None):
            produced = found.produces
            break
    if produced is not None:
        return op_class(produced, domain, attrs, channels)
    if "pointwise" in patterns:
        return "activation" if any(_CLASS_OF_OP.get(t) == "activation" for t in op_types) else "elementwise"
    return op_class(op_types[0], domain, attrs, channels) if op_types else "other"


@dataclass(frozen=True, slots=True)
class RooflinePoint:
    precision: str
    intensity: float
    peak_flops: float
    bandwidth: float
    ridge: float
    attainable_flops: float
    t_compute: float
    t_memory: float
    t_overhead: float
    latency: float
    bound: Bound
    efficiency: float = 1.0
    """The derating ``e`` applied (1: none)."""
    level: str = "dram"
    """The memory level whose bandwidth ``W`` was used: ``dram``, ``onchip``, ``L1``, ``L2``... (measured cache
    levels), or ``L1+dram``... when cold bytes came from DRAM and the rest from a cache level."""
    utilization: float = 1.0
    """The processing-element array utilization ``u`` applied (1: none)."""
    energy: Energy | None = None
    """Dynamic energy of the kernel; None when the platform gives no energy figures."""


def classify(
    cost: Cost,
    platform: Platform,
    precision: str,
    runs: bool = True,
    launches: int = 1,
    *,
    op_class: str | None = None,
    hierarchy: bool = True,
    cold_bytes: float = 0.0,
    utilization: float = 1.0,
) -> RooflinePoint:
    """The roofline point of one ``cost`` run at ``precision`` on ``platform``: :func:`onnxroof.roofline.place.place`
    on a single row (formulas there and in the module docstring).

    ``runs=False`` (views, folded constants, unsupported ops) gives a zero-time point bound ``none``.
    ``launches`` kernels pay the launch overhead (a control-flow node launches its body's kernels each
    iteration). ``op_class`` selects the platform's efficiency figure; ``hierarchy=False`` ignores measured cache
    levels and uses the DRAM bandwidth; ``cold_bytes`` of the kernel's bytes come from DRAM even when the working
    set would fit a cache level (clamped to ``[0, B]``); ``utilization`` is the processing-element array
    utilization of a GEMM-like kernel (:func:`onnxroof.roofline.pe_array.utilization`).
    """
    target = platform if hierarchy or not platform.cache_levels else replace(platform, cache_levels=())
    work = Work(
        flops=floats([cost.flops]),
        bytes=floats([cost.bytes]),
        precision=np.asarray([precision], dtype=object),
        op_class=np.asarray(["" if op_class is None else op_class], dtype=object),
        runs=np.asarray([runs]),
        launches=floats([launches]),
        utilization=floats([utilization]),
        cold_bytes=floats([cold_bytes]),
    )
    figures = place(work, target)
    energy = (
        None
        if np.isnan(figures.energy_j[0])
        else Energy(float(figures.energy_compute_j[0]), float(figures.energy_memory_j[0]))
    )
    return RooflinePoint(
        precision,
        float(figures.intensity[0]),
        float(figures.peak_flops[0]),
        float(figures.bandwidth[0]),
        float(figures.ridge[0]),
        float(figures.attainable_flops[0]),
        float(figures.t_compute_s[0]),
        float(figures.t_memory_s[0]),
        float(figures.t_overhead_s[0]),
        float(figures.latency_s[0]),
        figures.bound[0],
        float(figures.efficiency[0]),
        str(figures.level[0]),
        float(figures.utilization[0]) if runs else 1.0,
        energy,
    )
