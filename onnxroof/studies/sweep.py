"""Sweeps: one model analysed over a range of one symbolic dim's values, or over precisions.

``sweep(model, "xavier", {"seq": 128}, dim="batch", values=[1, 2, 4, 8])`` runs :func:`onnxroof.analyze` once per
value (the other dims fixed) and keeps, per value, what decides a deployment: predicted latency, throughput,
the fused FLOPs and bytes and their ratio (the model's intensity), the memory-bound share and the energy per
inference. ``precisions=["fp32", "fp16", "int8"]`` sweeps the precision instead (``analyze(precision=...)``).

* throughput is inferences per second, ``1 / latency``; when the swept dim is the batch dim (a name containing
  ``batch``, or ``N``, ``B``, ``bs``; failing any such name, the first input's axis 0) each inference holds
  ``value`` samples and ``samples_per_s = value / latency``;
* ``turns_compute_bound`` is the first value (in sweep order) whose memory-bound share is below one half:
  from there on most of the predicted time is compute-bound.

Dim values are swept in increasing order; precisions in the order given.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import field, replace
from types import MappingProxyType

import onnx

from onnxroof.analysis.analyze import Analysis, analyze
from onnxroof.analysis.whatif import WhatIf
from onnxroof.core.errors import DimsError, OnnxroofError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.load.dims import parse_dim_bindings, shape_bindings, symbolic_dims
from onnxroof.load.reader import read_file
from onnxroof.platform.lookup import load_platform
from onnxroof.platform.model import Platform
from onnxroof.runtime import Runtime, runtime_for

AXIS_PRECISION = "precision"
"""The :attr:`Sweep.axis` of a precision sweep (a dim sweep's axis is ``"dim"``)."""
AXIS_DIM = "dim"
COMPUTE_BOUND_BELOW = 0.5
"""A sweep point is mostly compute-bound when its memory-bound share is below this."""
_BATCH_NAME = re.compile(r"batch|^(n|b|bs)$", re.IGNORECASE)


class SweepError(OnnxroofError):
    """A sweep is malformed: nothing or two things swept, an unknown dim, a repeated or bad value."""


@frozen_dataclass(slots=True)
class SweepPoint:
    """The model at one swept value."""

    value: int | str
    """The dim's value, or the precision."""
    latency_s: float
    throughput: float
    """Inferences per second: ``1 / latency_s``."""
    samples_per_s: float | None
    """``value / latency_s`` when the swept dim is the batch dim, else None."""
    flops: float
    """Fused FLOPs (what the kernels compute)."""
    bytes: float
    """Fused bytes (what crosses the kernels' boundaries)."""
    intensity: float
    """``flops / bytes`` (FLOP/byte; infinite when nothing moves)."""
    memory_bound_share: float
    energy_j: float | None
    """Energy per inference (None: the platform gives no energy figures)."""
    energy_delay_js: float | None

    @property
    def compute_bound(self) -> bool:
        return self.memory_bound_share < COMPUTE_BOUND_BELOW


@frozen_dataclass
class Sweep:
    """One model, one platform, one swept parameter: a point per value."""

    model: str
    """The model's path (or graph name when given as a ModelProto)."""
    platform: str
    platform_title: str
    axis: str
    """``dim`` or ``precision``."""
    parameter: str
    """The swept dim's name, or ``precision``."""
    dims: Mapping[str, int]
    """The fixed dims (the swept one excluded)."""
    precision: str | None
    """A fixed precision override during a dim sweep (None: the model's own)."""
    fusion_profile: str
    per_sample: bool
    """True when the swept dim is the batch dim: points carry ``samples_per_s``."""
    points: tuple[SweepPoint, ...]
    turns_compute_bound: int | str | None
    """The first value whose memory-bound share is below ½ (None: never in this sweep)."""
    has_energy: bool
    warnings: tuple[str, ...]
    whatif: WhatIf = field(default_factory=WhatIf)
    """The what-if knobs every point shares (``precision`` None in a precision sweep)."""


def sweep(
    model: str | os.PathLike[str] | onnx.ModelProto,
    platform: str | os.PathLike[str] | Platform = "xavier",
    dims: Mapping[str, object] | None = None,
    *,
    dim: str | None = None,
    values: Sequence[int] = (),
    precisions: Sequence[str] = (),
    precision: str | None = None,
    fusion: str | None = None,
    runtime: str | os.PathLike[str] | Runtime | None = None,
    strict: bool = False,
    whatif: WhatIf | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> Sweep:
    """Analyse ``model`` once per value of ``dim`` (``values``, positive integers) or per precision.

        Give either ``dim`` and ``values`` (``dims`` binds the other symbolic dims; ``precision`` optionally fixes
        one precision for every point) or ``precisions``. ``whatif`` holds the what-if knobs every point shares
    (:class:`WhatIf`; the swept or given precision replaces its own); ``strict`` and ``fusion`` are
    :func:`onnxroof.analyze`'s.
        Raises :class:`SweepError` when nothing or both are swept, the dim is not a symbolic dim of the model's
        inputs (or is also fixed in ``dims``), or a value repeats; :class:`~onnxroof.core.errors.PlatformError` when the
        platform lacks a precision; :class:`~onnxroof.core.errors.DimsError` on a value that is not a positive integer.
    """
    target = platform if isinstance(platform, Platform) else load_platform(platform)
    runtime = runtime_for(target, runtime, fusion)  # checked before any point runs, loaded once
    fixed: dict[str, object] = dict(dims or {})
    file = read_file(model)  # read once: every point binds a copy
    proto = file.model
    if shapes:  # whole-input shapes become dim bindings here, so that the swept dim conflicts with them
        fixed = dict(shape_bindings(proto, shapes, fixed))
    plan = whatif if whatif is not None else WhatIf()
    precision = precision if precision is not None else plan.precision
    if dim is not None and precisions:
        raise SweepError(f"sweep one thing: dim '{dim}' or precisions ({', '.join(precisions)}), not both")
    if dim is not None:
        swept: list[int | str] = list(_dim_values(proto, dim, values, fixed))
        per_sample = is_batch_dim(proto, dim)
        if precision is not None:
            target.peak(precision)
        point = replace(plan, precision=precision)
        analyses = [
            analyze(file, target, {**fixed, dim: value}, whatif=point, strict=strict, fusion=fusion, runtime=runtime)
            for value in swept
        ]
        axis, parameter = AXIS_DIM, dim
    elif precisions:
        swept = list(_unique(precisions, "precision"))
        for name in swept:
            target.peak(str(name))  # PlatformError names what the platform has, before any analysis
        per_sample = False
        analyses = [
            analyze(
                file,
                target,
                fixed,
                whatif=replace(plan, precision=str(name)),
                strict=strict,
                fusion=fusion,
                runtime=runtime,
            )
            for name in swept
        ]
        axis, parameter, precision = AXIS_PRECISION, AXIS_PRECISION, None
    else:
        raise SweepError(
            "nothing to sweep: give one dim a list of values (--dim batch=1,2,4; dim= and values= in the API) "
            "or several precisions (--precision fp32,fp16; precisions=)"
        )
    points = tuple(_point(value, a, per_sample) for value, a in zip(swept, analyses, strict=True))
    first = analyses[0]
    return Sweep(
        model=str(file.path) if file.path is not None else (proto.graph.name or "model"),
        platform=target.name,
        platform_title=target.title,
        axis=axis,
        parameter=parameter,
        dims=MappingProxyType({k: v for k, v in first.model.dims.items() if not (axis == AXIS_DIM and k == dim)}),
        precision=precision,
        fusion_profile=first.fusion_profile,
        per_sample=per_sample,
        points=points,
        turns_compute_bound=turns_compute_bound(points),
        has_energy=target.has_energy,
        warnings=tuple(dict.fromkeys(w for a in analyses for w in a.warnings)),
        whatif=replace(first.whatif, precision=precision),
    )


def parse_sweep_dims(items: Sequence[str]) -> tuple[dict[str, int], str | None, tuple[int, ...]]:
    """``["batch=1,2,4", "seq=128"]`` -> ``({"seq": 128}, "batch", (1, 2, 4))``: the fixed dims, the swept dim
    (None when no item holds a comma list) and its values. A list on two dims raises :class:`SweepError`; a
    value that is not a positive integer, :class:`~onnxroof.core.errors.DimsError` naming the dim."""
    fixed: dict[str, int] = {}
    swept: dict[str, tuple[int, ...]] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if "," not in text:
            fixed.update(parse_dim_bindings([item]))
            continue
        name = name.strip()
        parts = [part.strip() for part in text.split(",")]
        if not sep or not name or not all(parts):
            raise SweepError(f"--dim {item!r}: expected NAME=V1,V2,..., e.g. --dim batch=1,2,4,8")
        if name in swept:
            raise SweepError(f"--dim {name}: given twice")
        swept[name] = tuple(parse_dim_bindings([f"{name}={part}"])[name] for part in parts)
    if len(swept) > 1:
        raise SweepError(f"sweep one dim at a time: {' and '.join(swept)} both have lists of values")
    if not swept:
        return fixed, None, ()
    ((name, values),) = swept.items()
    return fixed, name, values


def parse_precisions(text: str | None) -> tuple[str, ...]:
    """``"fp32, fp16,int8"`` -> ``("fp32", "fp16", "int8")``; None or empty -> ``()``."""
    if not text:
        return ()
    names = tuple(part.strip() for part in text.split(","))
    if not all(names):
        raise SweepError(f"--precision {text!r}: expected P1,P2,..., e.g. --precision fp32,fp16,int8")
    return names


def turns_compute_bound(points: Sequence[SweepPoint]) -> int | str | None:
    """The first point's value whose memory-bound share is below ½; None when there is none."""
    return next((p.value for p in points if p.compute_bound), None)


def is_batch_dim(model: onnx.ModelProto, name: str) -> bool:
    """Whether ``name`` is the batch dim: named like one (``batch``, ``batch_size``, ``N``...), or, when no
    symbolic dim of the inputs is, the first input's axis 0."""
    if _BATCH_NAME.search(name):
        return True
    if any(_BATCH_NAME.search(symbol) for symbol in symbolic_dims(model)):
        return False
    initializers = {t.name for t in model.graph.initializer}
    inputs = [v for v in model.graph.input if v.name not in initializers and v.type.HasField("tensor_type")]
    if not inputs or not inputs[0].type.tensor_type.shape.dim:
        return False
    first = inputs[0].type.tensor_type.shape.dim[0]
    return not first.HasField("dim_value") and (first.dim_param or f"{inputs[0].name}:0") == name


def _dim_values(model: onnx.ModelProto, dim: str, values: Sequence[int], fixed: Mapping[str, object]) -> list[int]:
    """The values to sweep ``dim`` over, checked (positive integers, each once) and in increasing order."""
    symbols = symbolic_dims(model)
    if dim not in symbols:
        known = ", ".join(symbols) or "none"
        raise SweepError(f"dim '{dim}': the model's inputs have no symbolic dim of that name (they have: {known})")
    if dim in fixed:
        raise SweepError(f"dim '{dim}' is both swept and fixed: give it once")
    if not values:
        raise SweepError(f"dim '{dim}': no values to sweep")
    checked = [parse_dim_bindings([f"{dim}={value}"])[dim] for value in values]
    if 0 in checked:  # a dim may be 0 (an empty KV cache), but a sweep divides by it (throughput per item)
        raise DimsError(f"dim '{dim}': a swept value must be a positive integer, got 0")
    return sorted(int(v) for v in _unique(checked, f"dim '{dim}'"))


def _unique(values: Sequence[int | str], what: str) -> list[int | str]:
    seen: list[int | str] = []
    for value in values:
        if value in seen:
            raise SweepError(f"{what}: value {value} given twice")
        seen.append(value)
    return seen


def _point(value: int | str, analysis: Analysis, per_sample: bool) -> SweepPoint:
    t = analysis.totals
    latency = t.latency_s
    throughput = 1.0 / latency if latency > 0 else math.inf
    fused = t.fused
    return SweepPoint(
        value=value,
        latency_s=latency,
        throughput=throughput,
        samples_per_s=float(value) * throughput if per_sample and isinstance(value, int) else None,
        flops=float(fused.flops),
        bytes=float(fused.bytes),
        intensity=fused.flops / fused.bytes if fused.bytes > 0 else math.inf,
        memory_bound_share=t.memory_bound_share,
        energy_j=t.energy_j,
        energy_delay_js=t.energy_delay_js,
    )
