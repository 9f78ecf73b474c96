"""An LLM's serving figures from its ONNX decoder: time to the first token, time per output token, the KV cache.

``llm(model, "a100", prompt=N, generate=M)`` finds the KV cache (:mod:`onnxroof.studies.kv_cache`) and analyzes
the phases with :func:`onnxroof.analyze`:

* **prefill**: ``N`` new tokens, past 0: ``ttft_s`` is its latency;
* **decode**: one new token at past ``p = N … N+M−1``. A step's cost is affine in ``p`` for a fixed graph, so the
  first and last steps and one middle step are analyzed; when the middle is within 1% of the line through the
  ends, ``Σ decode = M · (first + last) / 2``; otherwise 9 points are analyzed and summed piecewise-linearly
  (``interpolation`` says which). ``--generate 4096`` costs 3 analyses, not 4,096;
* ``tpot_s = Σ decode / M``; ``tokens_per_s = M / (ttft_s + Σ decode)`` (0 when nothing is predicted to run);
* ``kv_cache_bytes = bytes_per_token · (N + M) · batch`` = ``2 · layers · kv_heads · head_dim · itemsize · (N + M)
  · batch`` (itemsize: the cache's dtype, or the ``precision`` override's for a float cache);
* the memory check: ``weight_bytes + kv_cache_bytes`` against the platform's capacity ``C`` (unknown when the
  platform gives none): largest batch ``⌊(C − W) / (kv_per_token · (N + M))⌋``, largest context at this batch
  ``⌊(C − W) / (kv_per_token · batch)⌋``. Activations are not counted (they are small beside the cache).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import onnx

from onnxroof.analysis.analyze import Analysis, analyze
from onnxroof.analysis.whatif import ELEMENT_SIZE, WhatIf
from onnxroof.core.errors import DimsError
from onnxroof.load.reader import read_file
from onnxroof.platform.lookup import load_platform
from onnxroof.platform.model import Platform
from onnxroof.runtime import Runtime, runtime_for
from onnxroof.studies.kv_cache import KVCache, find_cache
from onnxroof.studies.top import TopKernel, top_kernels

LINEAR_TOLERANCE = 0.01
"""The middle decode step may differ from the line through the ends by this share before more are sampled."""
MORE_POINTS = 9
TOP_KERNELS = 5
PREFILL = "prefill"
DECODE = "decode"


@dataclass(frozen=True, slots=True)
class PhasePoint:
    """One analyzed step: the prefill, or a decode step at ``past``."""

    phase: str
    past: int
    new: int
    latency_s: float
    flops: float
    bytes: float
    memory_bound_share: float
    top_kernels: tuple[TopKernel, ...]
    unsupported: Mapping[str, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class MemoryCheck:
    """Weights + KV cache against the platform's memory (``capacity_bytes`` None: unknown, never a pass)."""

    capacity_bytes: float | None
    weight_bytes: float
    kv_cache_bytes: float
    fits: bool | None
    max_batch: int | None
    max_context: int | None

    @property
    def needed_bytes(self) -> float:
        return self.weight_bytes + self.kv_cache_bytes


@dataclass(frozen=True)
class LLMResult:
    model: str
    platform: str
    platform_title: str
    fusion_profile: str
    precision: str | None
    prompt: int
    generate: int
    batch: int
    cache: KVCache
    ttft_s: float
    tpot_s: float
    tokens_per_s: float
    decode_first_s: float
    decode_last_s: float
    decode_total_s: float
    interpolation: str
    """``linear`` (3 points agree) or ``piecewise`` (more sampled), ``exact`` when every step was analyzed."""
    kv_cache_bytes: float
    weight_bytes: float
    params: float
    prefill: PhasePoint
    decode: tuple[PhasePoint, ...]
    """The analyzed decode steps, in increasing past."""
    memory: MemoryCheck
    warnings: tuple[str, ...] = ()
    analyses: tuple[Analysis, ...] = field(default=(), compare=False, repr=False)
    """The prefill's and the decode steps' analyses (for charts), in the order of ``(prefill, *decode)``."""

    @property
    def unsupported(self) -> dict[str, Mapping[str, tuple[str, ...]]]:
        """Unsupported ops per phase (the decode's: its last analyzed step's)."""
        return {PREFILL: self.prefill.unsupported, DECODE: self.decode[-1].unsupported}


def llm(
    model: str | os.PathLike[str] | onnx.ModelProto,
    platform: str | os.PathLike[str] | Platform = "xavier",
    prompt: int = 128,
    generate: int = 128,
    batch: int = 1,
    dims: Mapping[str, object] | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    precision: str | None = None,
    fusion: str | None = None,
    whatif: WhatIf | None = None,
    runtime: str | os.PathLike[str] | Runtime | None = None,
    kv_dims: Mapping[str, str] | None = None,
) -> LLMResult:
    """Prefill ``prompt`` tokens, then generate ``generate`` tokens one at a time, ``batch`` sequences at once.

    ``dims`` binds symbols the cache does not place (a symbolic head dim...); ``kv_dims`` maps cache roles
    (``batch``, ``new``, ``past``, ``total``) to symbols when they cannot be told from the graph.
    """
    for name, value in (("prompt", prompt), ("generate", generate), ("batch", batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DimsError(f"--{name} must be a positive integer, got {value!r}")
    file = read_file(model)  # read once: each phase binds a copy
    proto = file.model
    user = {k: int(v) for k, v in (dims or {}).items()}  # type: ignore[call-overload]  # dims are user values: int() checks them
    cache = find_cache(proto, kv_dims, user)
    platform = platform if isinstance(platform, Platform) else load_platform(platform)
    chosen = runtime_for(platform, runtime, fusion)  # loaded once, checked before any phase runs

    plan = whatif or WhatIf()
    if precision is not None:
        plan = replace(plan, precision=precision)

    def run(new: int, past: int) -> Analysis:
        bound = {**cache.dims(batch, new, past), **{k: v for k, v in user.items() if k not in _roles(cache)}}
        return analyze(file, platform, bound, whatif=plan, fusion=fusion, shapes=shapes, runtime=chosen)

    prefill = run(prompt, 0)
    first, last = prompt, prompt + generate - 1
    steps = {first: run(1, first)}
    if last != first:
        steps[last] = run(1, last)
    interpolation = "exact" if generate <= 2 else "linear"
    if generate > 2:
        middle = (first + last) // 2
        steps[middle] = run(1, middle)
        if not _on_line(steps, first, middle, last):
            interpolation = "piecewise"
            for p in _spread(first, last, MORE_POINTS):
                steps.setdefault(p, run(1, p))
    ordered = sorted(steps)
    points = [(p, steps[p].totals.latency_s) for p in ordered]
    total = piecewise_sum(points) if interpolation != "linear" else generate * (points[0][1] + points[-1][1]) / 2
    kv_bytes = _kv_bytes(cache, precision) * (prompt + generate) * batch
    weights = prefill.totals.weight_bytes
    return LLMResult(
        model=str(file.path) if file.path else proto.graph.name,
        platform=platform.name,
        platform_title=platform.title,
        fusion_profile=prefill.fusion_profile,
        precision=precision,
        prompt=prompt,
        generate=generate,
        batch=batch,
        cache=cache,
        ttft_s=prefill.totals.latency_s,
        tpot_s=total / generate,
        tokens_per_s=generate / elapsed if (elapsed := prefill.totals.latency_s + total) > 0 else 0.0,
        decode_first_s=points[0][1],
        decode_last_s=points[-1][1],
        decode_total_s=total,
        interpolation=interpolation,
        kv_cache_bytes=kv_bytes,
        weight_bytes=weights,
        params=prefill.totals.params,
        prefill=_point(PREFILL, 0, prompt, prefill),
        decode=tuple(_point(DECODE, p, 1, steps[p]) for p in ordered),
        memory=memory_check(
            platform.memory_capacity,
            weights,
            kv_bytes,
            kv_bytes / (prompt + generate) / batch,
            prompt + generate,
            batch,
        ),
        warnings=tuple(dict.fromkeys([*prefill.warnings, *steps[last].warnings])),
        analyses=(prefill, *(steps[p] for p in ordered)),
    )


def _roles(cache: KVCache) -> set[str]:
    return {s for s in cache.roles.values() if s} | ({cache.branch} if cache.branch else set())


def _kv_bytes(cache: KVCache, precision: str | None) -> float:
    """Bytes per token; a float cache takes the precision override's element size (as analyze restates it)."""
    if (
        precision is not None
        and precision in ELEMENT_SIZE
        and cache.dtype.startswith(("float", "bfloat"))
        and cache.itemsize
    ):
        return cache.bytes_per_token / cache.itemsize * ELEMENT_SIZE[precision]
    return cache.bytes_per_token


def _on_line(steps: Mapping[int, Analysis], first: int, middle: int, last: int) -> bool:
    """``|t(mid) − line(mid)| ≤ 1% · t(mid)``, the line through ``(first, t(first))`` and ``(last, t(last))``."""
    t0, t1, tm = (steps[p].totals.latency_s for p in (first, last, middle))
    line = t0 + (t1 - t0) * (middle - first) / (last - first)
    return abs(tm - line) <= LINEAR_TOLERANCE * abs(tm)


def _spread(first: int, last: int, count: int) -> list[int]:
    return sorted({first + round(i * (last - first) / (count - 1)) for i in range(count)})


def piecewise_sum(points: list[tuple[int, float]]) -> float:
    """``Σ_{p=p₀}^{pₙ} L(p)`` for ``L`` piecewise linear through the points: each segment ``(a, tₐ)–(b, t_b)``
    adds ``(b − a) · tₐ + (t_b − tₐ) · (b − a − 1) / 2`` (its steps ``a … b−1``), then the last point ``tₙ``."""
    total = points[-1][1]
    for (a, ta), (b, tb) in itertools.pairwise(points):
        total += (b - a) * ta + (tb - ta) * (b - a - 1) / 2
    return total


def _point(phase: str, past: int, new: int, analysis: Analysis) -> PhasePoint:
    return PhasePoint(
        phase=phase,
        past=past,
        new=new,
        latency_s=analysis.totals.latency_s,
        flops=analysis.totals.fused.flops,
        bytes=analysis.totals.fused.bytes,
        memory_bound_share=analysis.totals.memory_bound_share,
        top_kernels=top_kernels(analysis, TOP_KERNELS),
        unsupported=MappingProxyType({k: tuple(v) for k, v in analysis.unsupported.items()}),
    )


def memory_check(
    capacity: float | None, weights: float, kv_bytes: float, per_token: float, context: int, batch: int
) -> MemoryCheck:
    """``fits = W + KV ≤ C``; ``max_batch = ⌊(C − W) / (per_token · context)⌋``, ``max_context = ⌊(C − W) /
    (per_token · batch)⌋`` (0 when the weights alone do not fit; None when ``C`` is unknown)."""
    if capacity is None:
        return MemoryCheck(None, weights, kv_bytes, None, None, None)
    room = max(capacity - weights, 0.0)
    return MemoryCheck(
        capacity_bytes=capacity,
        weight_bytes=weights,
        kv_cache_bytes=kv_bytes,
        fits=weights + kv_bytes <= capacity,
        max_batch=int(room // (per_token * context)) if per_token > 0 else None,
        max_context=int(room // (per_token * batch)) if per_token > 0 else None,
    )
