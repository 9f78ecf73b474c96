"""Checking many models: paths expanded, the platform and budget validated once, models checked in order or in
a pool of processes, a baseline entry picked per model. A model that fails makes its own row say error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from onnxroof.gate.budget import EXIT_INTERNAL, Budget, BudgetError
from onnxroof.gate.check import CheckSettings, ModelCheck, check_model, error_check
from onnxroof.gate.diff import load_baseline, pick_baseline
from onnxroof.platform.lookup import load_platform

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
    debug: bool = False,
    progress: Progress | None = None,
) -> list[ModelCheck]:
    """Check every model (folders searched for *.onnx) against ``budget``; one :class:`ModelCheck` per model.

    A bad platform, precision or budget raises before any model runs; a model that cannot be analyzed (or
    has no entry in ``baseline``) gets an error row and the others still run. ``jobs`` > 1 checks in that
    many processes; a worker that dies makes its model's row an internal error.
    """
    target = load_platform(settings.platform)
    if settings.precision is not None:
        target.peak(settings.precision)
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
    total = len(tasks)
    report = (lambda path, done: progress(path, done, total)) if progress else (lambda _path, _done: None)
    if jobs > 1 and len(tasks) > 1:
        _run_pool(tasks, budget, settings, min(jobs, len(tasks)), debug, results, report)
    else:
        for done, (i, path, previous) in enumerate(tasks, start=1):
            results[i] = check_model(path, budget, settings, previous, debug)
            report(path, done)
    return [results[i] for i in range(len(paths))]


def _run_pool(tasks, budget, settings, workers: int, debug: bool, results: dict, report: Progress) -> None:
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(check_model, path, budget, settings, prev, debug): (i, path) for i, path, prev in tasks}
        for done, future in enumerate(as_completed(futures), start=1):
            index, path = futures[future]
            try:
                results[index] = future.result()
            except Exception as exc:  # a worker died (killed, out of memory): its model's row says so
                if debug:
                    raise
                message = f"internal error: worker process failed: {type(exc).__name__}: {exc}"
                results[index] = error_check(path, message, EXIT_INTERNAL)
            report(path, done)
