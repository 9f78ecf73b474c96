"""Serving figures of an LLM study (:mod:`onnxroof.studies.llm`): the model's own context limit, and the largest batch
that meets a latency target.

**Context limit** (:func:`context_limit`): the most tokens the model can attend to, from what ships with it; the
smallest of those found applies, and the result says which:

* ``context_length`` of ``genai_config.json`` beside the model (``model.context_length``, ONNX Runtime GenAI);
* ``max_position_embeddings`` of a ``config.json`` beside the model (Hugging Face, Optimum);
* the rows of a rotary cos/sin cache initializer (``cos_cache``, ``model.rotary_emb.cos_cached``...): axis ``-2``
  of a tensor of rank ≥ 2, the positions the model has angles for.

**Batch search** (:func:`largest_batch`): the largest batch ``B`` whose predicted time to first token and time per
output token meet the targets (``ttft(B) ≤ max_ttft``, ``tpot(B) ≤ max_tpot``), searched in ``1 … B_max`` where
``B_max`` is the memory check's largest batch at the run's context (weights + ``B`` sequences' KV cache within the
platform's memory), or :data:`SEARCH_BOUND` when the platform's capacity is unknown. Both times grow with ``B``
(more rows through the same weights, more cache read), so the search is a bisection: ``B = 1`` is tried first
(none meets → batch 0), then ``B_max`` (meets → limited by memory), then the midpoint of the last meeting and the
first failing batch until they are adjacent: ``⌈log₂ B_max⌉ + 2`` evaluations at most.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path

import onnx

from onnxroof.core.errors import ModelError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.strict_toml import parse_failure, show_toml
from onnxroof.load.genai_config import read_genai_config

SEARCH_BOUND = 4096
"""assumed: the largest batch searched when the platform's memory capacity is unknown (no serving engine in the
published results runs more sequences at once on one device)."""
_ROTARY_CACHE = re.compile(r"(^|[._/])(cos|sin)(_cached|_cache)$", re.IGNORECASE)


class ContextSource(StrEnum):
    """Where a model's context limit was read."""

    GENAI_CONFIG = "genai_config.json context_length"
    CONFIG_JSON = "config.json max_position_embeddings"
    ROTARY_CACHE = "rotary cache rows"


@frozen_dataclass(slots=True)
class ContextLimit:
    """The model's own context limit in tokens, where it was read (``detail``: the file or initializer)."""

    tokens: int
    source: ContextSource
    detail: str

    @property
    def text(self) -> str:
        return f"{self.tokens} tokens ({self.source}: {self.detail})"


def _json_field(path: Path, keys: tuple[str, ...], warnings: list[str]) -> int | None:
    """The positive integer at ``keys`` in the JSON file ``path`` (None when the file or the field is absent; a
    file that does not parse, or a field that is not a positive integer, adds a warning naming it)."""
    if not path.is_file():
        return None
    try:
        value: object = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as error:  # bad UTF-8, syntax, too many digits, too deep
        warnings.append(f"{path}: not read ({parse_failure(error)}); its context limit is not applied")
        return None
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        warnings.append(f"{path}: {'.'.join(keys)} = {show_toml(value)} is not a positive integer; not applied")
        return None
    return value


def _rotary_rows(graph: onnx.GraphProto) -> tuple[int, str] | None:
    """The fewest positions among the rotary cos/sin cache initializers (axis ``-2``), and the tensor's name."""
    found = [(int(t.dims[-2]), t.name) for t in graph.initializer if _ROTARY_CACHE.search(t.name) and len(t.dims) >= 2]
    return min(found) if found else None


def context_limit(
    path: str | os.PathLike[str] | None, graph: onnx.GraphProto, warnings: list[str]
) -> ContextLimit | None:
    """The model's context limit (see the module docstring): the smallest of those found, None when none is."""
    found: list[ContextLimit] = []
    if path is not None:
        folder = Path(path).parent
        try:  # the one reader of genai_config.json (the runtime reads its KV and graph settings from it too)
            genai = read_genai_config(Path(path))
        except ModelError as error:
            warnings.append(f"{error}; its context limit is not applied")
            genai = None
        if genai is not None and genai.context_length is not None:
            found.append(ContextLimit(genai.context_length, ContextSource.GENAI_CONFIG, genai.path))
        config = _json_field(folder / "config.json", ("max_position_embeddings",), warnings)
        if config is not None:
            found.append(ContextLimit(config, ContextSource.CONFIG_JSON, str(folder / "config.json")))
    rotary = _rotary_rows(graph)
    if rotary is not None and rotary[0] > 0:
        found.append(ContextLimit(rotary[0], ContextSource.ROTARY_CACHE, f"'{rotary[1]}'"))
    return min(found, key=lambda limit: limit.tokens) if found else None


# ---------------------------------------------------------------------------------------------- batch search


class BatchLimit(StrEnum):
    """What stopped the batch search."""

    TARGET = "the latency target"
    MEMORY = "the platform's memory"
    SEARCH_BOUND = "the search bound"
    NONE = "no batch meets the target"


@frozen_dataclass(slots=True)
class BatchPoint:
    """The predicted times of one batch (``ttft_s`` or ``tpot_s`` None when the search did not need them)."""

    batch: int
    ttft_s: float | None
    tpot_s: float | None


@frozen_dataclass(slots=True)
class BatchSearch:
    """The largest batch meeting ``max_ttft_s`` / ``max_tpot_s`` (None: no such target), the batch found (0: none
    meets), its figures, what limited it, and every batch evaluated (in the order tried)."""

    max_ttft_s: float | None
    max_tpot_s: float | None
    batch: int
    limited_by: BatchLimit
    bound: int
    found: BatchPoint | None
    evaluated: tuple[BatchPoint, ...]


def _meets(point: BatchPoint, max_ttft_s: float | None, max_tpot_s: float | None) -> bool:
    ttft_ok = max_ttft_s is None or (point.ttft_s is not None and point.ttft_s <= max_ttft_s)
    tpot_ok = max_tpot_s is None or (point.tpot_s is not None and point.tpot_s <= max_tpot_s)
    return ttft_ok and tpot_ok


def largest_batch(
    evaluate: Callable[[int], BatchPoint], bound: int | None, max_ttft_s: float | None, max_tpot_s: float | None
) -> BatchSearch:
    """The bisection of the module docstring over ``1 … bound`` (``bound`` None: :data:`SEARCH_BOUND`; 0: not even
    one sequence fits in memory). ``evaluate(B)`` predicts batch ``B``'s times."""
    top = SEARCH_BOUND if bound is None else bound
    tried: dict[int, BatchPoint] = {}

    def meets(batch: int) -> bool:
        point = tried.get(batch) or tried.setdefault(batch, evaluate(batch))
        return _meets(point, max_ttft_s, max_tpot_s)

    def result(batch: int, limit: BatchLimit) -> BatchSearch:
        found = tried.get(batch) if batch > 0 else None
        return BatchSearch(max_ttft_s, max_tpot_s, batch, limit, top, found, tuple(tried.values()))

    if top < 1:
        return result(0, BatchLimit.MEMORY)
    if not meets(1):
        return result(0, BatchLimit.NONE)
    if meets(top):
        return result(top, BatchLimit.SEARCH_BOUND if bound is None else BatchLimit.MEMORY)
    good, bad = 1, top
    while bad - good > 1:
        middle = (good + bad) // 2
        good, bad = (middle, bad) if meets(middle) else (good, middle)
    return result(good, BatchLimit.TARGET)


__all__ = [
    "SEARCH_BOUND",
    "BatchLimit",
    "BatchPoint",
    "BatchSearch",
    "ContextLimit",
    "ContextSource",
    "context_limit",
    "largest_batch",
]
