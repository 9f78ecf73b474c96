"""An LLM's serving figures from its ONNX decoder: time to the first token, time per output token, the KV cache.

``llm(model, "a100", prompt=N, generate=M)`` finds the KV cache (:mod:`onnxroof.studies.kv_cache`) and analyzes
the phases through the stages :func:`onnxroof.analyze` composes (bind, cost, fuse, place):

* **prefill**: ``N`` new tokens, past 0: ``ttft_s = t_prefill + r`` with ``r`` the runtime's per-request host
  cost (``launch.per_request_us``, :attr:`onnxroof.runtime.Runtime.per_request_s`; 0 for most runtimes), charged
  once per request and to nothing else (``request_s``);
* **decode**: one new token at past ``p = N … N+M−1``. A step's cost is affine in ``p`` for a fixed graph, so the
  first and last steps and one middle step are analyzed; when the middle is within 1% of the line through the
  ends, ``Σ decode = M · (first + last) / 2``; otherwise 9 points spread over the steps are sampled too (each
  past analyzed once) and summed piecewise-linearly (``interpolation`` says which). ``--generate 4096`` costs 3
  analyses, not 4,096. ``max_tpot_s`` / ``max_ttft_s``'s search takes the requested batch's figures from these
  phases rather than analyzing them again;
* ``tpot_s = Σ decode / M``; per sequence ``tokens_per_s = M / (ttft_s + Σ decode)`` (0 when nothing is predicted
  to run), each of the ``batch`` sequences at that rate; aggregate ``tokens_per_s_aggregate = batch ·
  tokens_per_s`` (what a server delivers);
* ``kv_cache_bytes = bytes_per_token · (N + M) · batch`` = ``2 · layers · kv_heads · head_dim · itemsize · (N + M)
  · batch`` (itemsize: ``kv_precision``'s element size when given, else the ``precision`` override's for a float
  cache, else the cache's dtype; ``kv_dtype`` names the one used);
* the memory check: ``weight_bytes + kv_cache_bytes`` against the platform's capacity ``C`` (unknown when the
  platform gives none): largest batch ``⌊(C − W) / (kv_per_token · (N + M))⌋``, largest context at this batch
  ``min(⌊(C − W) / (kv_per_token · batch)⌋, L)`` with ``L`` the model's own context limit
  (:func:`onnxroof.studies.serving.context_limit`; ``context_limited_by`` says which applied). Activations are not
  counted (they are small beside the cache);
* ``kv_precision``: the cache's tensors alone at that precision (:attr:`onnxroof.analysis.whatif.WhatIf.kv_precision`);
  ``weights``: weight-only quantization at ``int4``/``int8``
  (:func:`onnxroof.analysis.whatif.weight_only_itemsize`: group size 128, fp16 scales); the dequantizing GEMV/GEMM
  runs at the platform's roofs (a runtime's factor on them is 1.0 here);
* ``max_tpot_s`` / ``max_ttft_s``: the largest batch meeting them within the memory check's largest batch
  (:func:`onnxroof.studies.serving.largest_batch`), each batch tried predicted as above.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Mapping
from dataclasses import field, replace
from enum import StrEnum
from types import MappingProxyType

import onnx

from onnxroof.analysis.analyze import Analysis, place
from onnxroof.analysis.stages import FusedModel, bind, cost, fuse
from onnxroof.analysis.whatif import DTYPE_OF_PRECISION, ELEMENT_SIZE, WEIGHT_ONLY_BITS, WhatIf
from onnxroof.core.errors import DimsError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.load.reader import read_file
from onnxroof.platform.lookup import load_platform
from onnxroof.platform.model import Platform
from onnxroof.runtime import Runtime, runtime_for
from onnxroof.studies.kv_cache import KVCache, find_cache
from onnxroof.studies.serving import BatchPoint, BatchSearch, ContextLimit, context_limit, largest_batch
from onnxroof.studies.top import TopKernel, top_kernels

LINEAR_TOLERANCE = 0.01
"""The middle decode step may differ from the line through the ends by this share before more are sampled."""
MORE_POINTS = 9
TOP_KERNELS = 5


class Phase(StrEnum):
    """Which part of serving a request an analyzed step is."""

    PREFILL = "prefill"
    """The prompt, all its tokens at once (the time to the first token)."""
    DECODE = "decode"
    """One new token over a cache of ``past`` tokens."""


@frozen_dataclass(slots=True)
class PhasePoint:
    """One analyzed step: the prefill, or a decode step at ``past``."""

    phase: Phase
    past: int
    new: int
    latency_s: float
    flops: float
    bytes: float
    memory_bound_share: float
    top_kernels: tuple[TopKernel, ...]
    unsupported: Mapping[str, tuple[str, ...]]


@frozen_dataclass(slots=True)
class MemoryCheck:
    """Weights + KV cache against the platform's memory (``capacity_bytes`` None: unknown, never a pass)."""

    capacity_bytes: float | None
    weight_bytes: float
    kv_cache_bytes: float
    fits: bool | None
    max_batch: int | None
    max_context: int | None
    context_limit: ContextLimit | None = None
    """The model's own context limit (None: none found); ``max_context`` never exceeds it."""

    @property
    def context_limited_by(self) -> str:
        """Which bound set ``max_context``: ``memory``, ``model`` (the model's own limit) or ``none`` (unknown)."""
        if self.max_context is None:
            return "none"
        if self.context_limit is not None and self.max_context == self.context_limit.tokens:
            return "model"
        return "memory"

    @property
    def needed_bytes(self) -> float:
        return self.weight_bytes + self.kv_cache_bytes


@frozen_dataclass
class LLMResult:
    """An ONNX decoder's serving figures on one platform: first-token time, time per output token, the KV cache, the
    phases analyzed."""

    model: str
    platform: str
    platform_title: str
    fusion_profile: str
    precision: str | None
    kv_precision: str | None
    weights: str | None
    """Weight-only quantization applied (``int4``/``int8``), None for the graph's own weights."""
    prompt: int
    generate: int
    batch: int
    cache: KVCache
    ttft_s: float
    """The prefill's latency plus :attr:`request_s`."""
    tpot_s: float
    tokens_per_s: float
    """Per sequence: ``generate / (ttft_s + decode_total_s)``; :attr:`tokens_per_s_aggregate` is the batch's."""
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
    kv_dtype: str = ""
    """The dtype the cache is counted at (``kv_precision``'s, the ``precision`` override's, or its own)."""
    search: BatchSearch | None = None
    """The largest batch meeting ``--max-tpot`` / ``--max-ttft`` (None when no target was given)."""
    warnings: tuple[str, ...] = ()
    request_s: float = 0.0
    """The runtime's per-request host cost included in :attr:`ttft_s` (``launch.per_request_us``; 0: none)."""
    analyses: tuple[Analysis, ...] = field(default=(), compare=False, repr=False)
    """The prefill's and the decode steps' analyses (for charts), in the order of ``(prefill, *decode)``."""

    @property
    def tokens_per_s_per_sequence(self) -> float:
        """Tokens per second each sequence receives (:attr:`tokens_per_s`)."""
        return self.tokens_per_s

    @property
    def tokens_per_s_aggregate(self) -> float:
        """Tokens per second over the batch: ``batch · tokens_per_s``."""
        return self.batch * self.tokens_per_s

    @property
    def unsupported(self) -> dict[Phase, Mapping[str, tuple[str, ...]]]:
        """Unsupported ops per phase (the decode's: its last analyzed step's)."""
        return {Phase.PREFILL: self.prefill.unsupported, Phase.DECODE: self.decode[-1].unsupported}


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
    *,
    kv_precision: str | None = None,
    weights: str | None = None,
    max_tpot_s: float | None = None,
    max_ttft_s: float | None = None,
) -> LLMResult:
    """Prefill ``prompt`` tokens, then generate ``generate`` tokens one at a time, ``batch`` sequences at once.

    ``dims`` binds symbols the cache does not place (a symbolic head dim...); ``kv_dims`` maps cache roles
    (``batch``, ``new``, ``past``, ``total``) to symbols when they cannot be told from the graph. ``kv_precision``,
    ``weights``, ``max_tpot_s`` and ``max_ttft_s``: see the module docstring.
    """
    for name, value in (("prompt", prompt), ("generate", generate), ("batch", batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise DimsError(f"--{name} must be a positive integer, got {value!r}")
    _check_options(kv_precision, weights, max_tpot_s, max_ttft_s)
    file = read_file(model)  # read once: each phase binds a copy
    proto = file.model
    user = {k: int(v) for k, v in (dims or {}).items()}  # type: ignore[call-overload]  # dims are user values: int() checks them
    cache = find_cache(proto, kv_dims, user)
    platform = platform if isinstance(platform, Platform) else load_platform(platform)
    chosen = runtime_for(platform, runtime, fusion)  # loaded once, checked before any phase runs

    plan = whatif or WhatIf()
    if precision is not None:
        plan = replace(plan, precision=precision)
    if kv_precision is not None:
        names = frozenset(cache.past) | frozenset(p for p in cache.present if p)
        plan = replace(plan, kv_precision=kv_precision, kv_tensors=names)
    if weights is not None:
        plan = replace(plan, weights=weights)

    if plan.precision is not None:
        platform.peak(plan.precision)  # raises PlatformError naming what the platform has (as analyze() does)
    profile = fusion or chosen.fusion_profile
    previous: FusedModel | None = None

    def run(new: int, past: int, size: int = batch) -> Analysis:
        """One phase through the stages, as :func:`~onnxroof.analysis.analyze.analyze` composes them; the fusion
        stage replays the previous phase's decomposed-function matches where the facts they read are equal
        (:func:`onnxroof.analysis.stages.fuse`'s ``prior``; ~20 ms of a phase's ~190 ms on the 7B-shaped decoder)."""
        nonlocal previous
        bound = {**cache.dims(size, new, past), **{k: v for k, v in user.items() if k not in _roles(cache)}}
        previous = fuse(cost(bind(file, bound, shapes, plan), platform), profile, previous)
        return place(previous, platform, None, chosen)

    prefill = run(prompt, 0)
    request_s = chosen.per_request_s
    ttft_s = prefill.totals.latency_s + request_s
    steps, interpolation, total = _decode(run, prompt, generate)
    ordered = sorted(steps)
    first_s, last_s = steps[ordered[0]].totals.latency_s, steps[ordered[-1]].totals.latency_s
    kv_itemsize, kv_dtype = _kv_element(cache, precision, kv_precision)
    per_token = cache.bytes_per_token / cache.itemsize * kv_itemsize if cache.itemsize else cache.bytes_per_token
    kv_bytes = per_token * (prompt + generate) * batch
    weight_bytes = prefill.totals.weight_bytes
    notes: list[str] = []
    limit = context_limit(file.path, proto.graph, notes)
    memory = memory_check(platform.memory_capacity, weight_bytes, kv_bytes, per_token, prompt + generate, batch, limit)
    search = None
    if max_tpot_s is not None or max_ttft_s is not None:

        def evaluate(size: int) -> BatchPoint:
            """Batch ``size``'s times; the requested batch's are the ones found above (its phases were analyzed
            already: analyzing them again gives the same figures)."""
            ttft: float | None = None
            tpot: float | None = None
            if max_ttft_s is not None:
                ttft = ttft_s if size == batch else run(prompt, 0, size).totals.latency_s + request_s
            if max_tpot_s:
                summed = total if size == batch else _decode(lambda n, p: run(n, p, size), prompt, generate)[2]
                tpot = summed / generate
            return BatchPoint(size, ttft, tpot)

        search = largest_batch(evaluate, memory.max_batch, max_ttft_s, max_tpot_s)
    return LLMResult(
        model=str(file.path) if file.path else proto.graph.name,
        platform=platform.name,
        platform_title=platform.title,
        fusion_profile=prefill.fusion_profile,
        precision=precision,
        kv_precision=kv_precision,
        weights=weights,
        prompt=prompt,
        generate=generate,
        batch=batch,
        cache=cache,
        ttft_s=ttft_s,
        tpot_s=total / generate,
        tokens_per_s=generate / elapsed if (elapsed := ttft_s + total) > 0 else 0.0,
        decode_first_s=first_s,
        decode_last_s=last_s,
        decode_total_s=total,
        interpolation=interpolation,
        kv_cache_bytes=kv_bytes,
        weight_bytes=weight_bytes,
        params=prefill.totals.params,
        prefill=_point(Phase.PREFILL, 0, prompt, prefill),
        decode=tuple(_point(Phase.DECODE, p, 1, steps[p]) for p in ordered),
        memory=memory,
        kv_dtype=kv_dtype,
        search=search,
        warnings=tuple(dict.fromkeys([*notes, *prefill.warnings, *steps[ordered[-1]].warnings])),
        request_s=request_s,
        analyses=(prefill, *(steps[p] for p in ordered)),
    )


def _check_options(
    kv_precision: str | None, weights: str | None, max_tpot_s: float | None, max_ttft_s: float | None
) -> None:
    """One line naming the option when ``--kv-precision``, ``--weights``, ``--max-tpot`` or ``--max-ttft`` is
    malformed."""
    if kv_precision is not None and kv_precision not in ELEMENT_SIZE:
        raise DimsError(f"--kv-precision {kv_precision!r}: expected one of {', '.join(ELEMENT_SIZE)}")
    if weights is not None and weights not in WEIGHT_ONLY_BITS:
        raise DimsError(f"--weights {weights!r}: expected one of {', '.join(WEIGHT_ONLY_BITS)}")
    for name, value in (("--max-tpot", max_tpot_s), ("--max-ttft", max_ttft_s)):
        if value is not None and not value > 0:
            raise DimsError(f"{name} must be a positive time in ms, got {value!r}")


def _decode(run: Callable[[int, int], Analysis], prompt: int, generate: int) -> tuple[dict[int, Analysis], str, float]:
    """The analyzed decode steps (past → analysis), the interpolation used and ``Σ decode`` (module docstring)."""
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
                if p not in steps:  # the ends and the middle were analyzed already
                    steps[p] = run(1, p)
    points = [(p, steps[p].totals.latency_s) for p in sorted(steps)]
    total = piecewise_sum(points) if interpolation != "linear" else generate * (points[0][1] + points[-1][1]) / 2
    return steps, interpolation, total


def _roles(cache: KVCache) -> set[str]:
    return {s for s in cache.roles.values() if s} | ({cache.branch} if cache.branch else set())


def _kv_element(cache: KVCache, precision: str | None, kv_precision: str | None) -> tuple[float, str]:
    """The element size and dtype the cache is counted at: a float cache takes ``kv_precision``'s, else the
    ``precision`` override's (as the analysis restates it); otherwise its own."""
    floating = cache.dtype.startswith(("float", "bfloat"))
    for chosen in (kv_precision, precision):
        if chosen is not None and chosen in ELEMENT_SIZE and floating:
            return float(ELEMENT_SIZE[chosen]), DTYPE_OF_PRECISION[chosen]
    return cache.itemsize, cache.dtype


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


def _point(phase: Phase, past: int, new: int, analysis: Analysis) -> PhasePoint:
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
    capacity: float | None,
    weights: float,
    kv_bytes: float,
    per_token: float,
    context: int,
    batch: int,
    limit: ContextLimit | None = None,
) -> MemoryCheck:
    """``fits = W + KV ≤ C``; ``max_batch = ⌊(C − W) / (per_token · context)⌋``, ``max_context = min(⌊(C − W) /
    (per_token · batch)⌋, L)`` (0 when the weights alone do not fit; None when ``C`` is unknown, then ``L`` alone
    when the model gives it), ``L`` the model's own context limit ``limit``."""
    cap = limit.tokens if limit is not None else None
    if capacity is None:
        return MemoryCheck(None, weights, kv_bytes, None, None, cap, limit)
    room = max(capacity - weights, 0.0)
    by_memory = int(room // (per_token * batch)) if per_token > 0 else None
    max_context = cap if by_memory is None else by_memory if cap is None else min(by_memory, cap)
    return MemoryCheck(
        capacity_bytes=capacity,
        weight_bytes=weights,
        kv_cache_bytes=kv_bytes,
        fits=weights + kv_bytes <= capacity,
        max_batch=int(room // (per_token * context)) if per_token > 0 else None,
        max_context=max_context,
        context_limit=limit,
    )
