"""Checking many models (``onnxroof check``): paths expanded, the platform and budget validated once, a baseline
entry picked per model, the models checked on the batch engine (:mod:`onnxroof.fleet.engine`: this process, local
processes, or a Dask cluster). A model that fails makes its own row say error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from onnxroof.fleet.engine import Engine, TaskFailure, choose_engine, run
from onnxroof.gate.budget import EXIT_INTERNAL, Budget, BudgetError
from onnxroof.gate.check import CheckSettings, ModelCheck, check_model, error_check
from onnxroof.gate.diff import load_baseline, pick_baseline
from onnxroof.platform.lookup import load_platform
from onnxroof.runtime import runtime_for

#: Called once per model as it finishes: (model path, models done so far, models in all).
Progress = Callable[[str, int, int], None]


def expand_models(models: Sequence[Path]) -> list[str]:
    """Model paths in the order given; a folder becomes its *.onnx files (recursively, sorted)."""
    paths: list[str] = []
    for model in models:
        if model.is_dir():
            found = sorted(p for p in model.rglob("*.onnx") if p.is_file())
            if not found:
                raise BudgetError(f"{model}: no .onnx files in this folder")
            paths.extend(str(p) for p in found)
        else:
            paths.append(str(model))
    return paths


def check_models(
    models: Sequence[Path],
    budget: Budget,
    settings: CheckSettings,
    *,
    baseline: Path | None = None,
    jobs: int = 1,
    engine: Engine | None = None,
    debug: bool = False,
    progress: Progress | None = None,
) -> list[ModelCheck]:
    """Check every model (folders searched for *.onnx) against ``budget``; one :class:`ModelCheck` per model.

    A bad platform, precision or budget raises before any model runs; a model that cannot be analyzed (or
    has no entry in ``baseline``) gets an error row and the others still run. ``jobs`` > 1 checks in that
    many processes, ``engine`` (when given) where it says; a worker that dies makes its model's row an
    internal error.
    """
    target = load_platform(settings.platform)
    if settings.precision is not None:
        target.peak(settings.precision)
    runtime_for(target, settings.runtime, settings.fusion)  # a bad runtime raises before any model runs
    budget.latency_limit((target.name, *target.aliases))  # a budget without this platform fails now
    paths = expand_models(models)
    entries = load_baseline(baseline) if baseline is not None else None
    tasks: list[tuple[int, str, Any]] = []
    results: dict[int, ModelCheck] = {}
    for i, path in enumerate(paths):
        previous = None
        if entries is not None:
            previous = pick_baseline(entries, path, len(paths))
            if previous is None:
                results[i] = error_check(path, f"{baseline}: the baseline has no entry for this model")
                continue
        tasks.append((i, path, previous))
    engine = engine or choose_engine(workers=jobs)
    work = [(path, budget, settings, previous, debug) for _i, path, previous in tasks]
    for done, (k, outcome) in enumerate(run(check_model, work, engine), start=1):
        index, path, _previous = tasks[k]
        if isinstance(outcome, TaskFailure):
            if debug:
                raise RuntimeError(f"{path}: {outcome.message}")
            outcome = error_check(path, f"internal error: {outcome.message}", EXIT_INTERNAL)
        results[index] = outcome
        if progress is not None:
            progress(path, done, len(tasks))
    return [results[i] for i in range(len(paths))]
