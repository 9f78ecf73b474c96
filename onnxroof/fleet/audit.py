"""``onnxroof audit``: every model of a registry on every platform, into one table, with a result cache.

The client (this process) expands the paths, loads and hashes the platforms and budgets, identifies each model
(:mod:`onnxroof.fleet.identity`: content sha256, symbols, external files), looks every (model, platform) up in
the cache (:mod:`onnxroof.fleet.cache`), and sends only the misses to the engine
(:mod:`onnxroof.fleet.engine`: Dask by default). Workers analyze (:func:`onnxroof.fleet.task.analyze_task`) and
return figures; the client stores them as they arrive (an interrupted run keeps what finished), computes the
budget verdicts and builds the table (:mod:`onnxroof.fleet.table`). A model that cannot be analyzed is an error
row; only bad usage (an unknown platform, a bad budget or manifest) raises.

A ``--dim`` applies to the models whose inputs have that symbol; a manifest's dims apply to their model.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from onnxroof.core.frozen import frozen_dataclass
from onnxroof.fleet.cache import ResultCache, digest, result_key
from onnxroof.fleet.engine import Engine, EngineKind, TaskFailure, run
from onnxroof.fleet.identity import identify
from onnxroof.fleet.manifest import ModelEntry, expand_paths
from onnxroof.fleet.table import Status, make_row, to_frame
from onnxroof.fleet.task import ErrorKind, analyze_task, cacheable, error_figures
from onnxroof.gate.budget import Budget, load_budget
from onnxroof.platform.lookup import load_platform
from onnxroof.platform.model import Platform
from onnxroof.runtime import runtime_for

#: Called as each analysis finishes: (model path, analyses done, analyses in all).
Progress = Callable[[str, int, int], None]


@frozen_dataclass
class AuditOptions:
    """How every model is analyzed: platforms (names or TOML paths), dims, precision, fusion, a budget file."""

    platforms: tuple[str, ...] = ("xavier",)
    dims: Mapping[str, int] = field(default_factory=dict)
    precision: str | None = None
    fusion: str | None = None
    budget: Path | None = None
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    """Whole-input shapes (``--shape``), applied to every model (one without that input gets an error row)."""
    peak: bool = False
    """Draw the roofline from the datasheet figures (``--peak``), not the sustained shares."""
    time_model: str | None = None
    """The time model (``--time-model``: ``roofline`` or ``gpu``); None: each platform's default."""
    runtime: str | None = None
    """The runtime profile (``--runtime``: a bundled name or a TOML path); None: each platform's."""


@frozen_dataclass
class AuditResult:
    """The table and how it was made: analyses run, rows from the cache, where the cache lives."""

    table: Any  # pandas.DataFrame, one row per model × platform (see onnxroof.fleet.table.COLUMNS)
    analyzed: int
    cached: int
    unreadable: int
    elapsed_s: float
    cache: str
    engine: str

    @property
    def exit_code(self) -> int:
        """0 every row ok; 1 some row violated its budget or could not be analyzed."""
        return 0 if (self.table["status"] == Status.ok.value).all() else 1


@frozen_dataclass(slots=True)
class _Target:
    platform: Platform
    spec: str
    hash: str

    @property
    def names(self) -> tuple[str, ...]:
        return (self.platform.name, *self.platform.aliases)


def audit(
    paths: Sequence[Path],
    options: AuditOptions,
    *,
    engine: Engine | None = None,
    cache: ResultCache | None = None,
    progress: Progress | None = None,
) -> AuditResult:
    """Audit every model the ``paths`` name (files, folders, manifests) on every platform of ``options``."""
    start = time.perf_counter()
    engine = engine or Engine(EngineKind.dask_local, 2)
    cache = cache or ResultCache(None)
    targets = _targets(options)
    entries = expand_paths(paths)
    plan = _plan(entries, targets, _budgets(entries, options.budget, targets), options, cache)
    try:
        unreadable = _collect(plan, engine, cache, progress)
    finally:
        cache.flush()
    return AuditResult(
        table=to_frame(_filled(plan.rows)),
        analyzed=len(plan.tasks),
        cached=plan.cached,
        unreadable=unreadable,
        elapsed_s=time.perf_counter() - start,
        cache=cache.location,
        engine=engine.describe if plan.tasks else "none (nothing to analyze)",
    )


@dataclass
class _Plan:
    """Rows (None where a task will fill them), the tasks (one per distinct cache key) and their keys, and for
    each key the rows waiting on it: (row index, row base, platform, budget)."""

    rows: list[dict[str, Any] | None] = field(default_factory=list)
    tasks: list[tuple] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    waiting: dict[str, list[tuple[int, dict, _Target, Budget | None]]] = field(default_factory=dict)
    cached: int = 0


def _plan(
    entries: Sequence[ModelEntry],
    targets: Sequence[_Target],
    budgets: Mapping[str, Budget],
    options: AuditOptions,
    cache: ResultCache,
) -> _Plan:
    """Every row from the cache that can come from it; a task for each distinct miss."""
    from onnxroof.core.version import __version__ as version

    plan = _Plan()
    for entry in entries:
        budget = budgets.get(entry.budget or "")
        try:
            identity = identify(entry.path, cache)
        except OSError as exc:
            failed = error_figures(f"{entry.path}: cannot read: {exc.strerror or exc}", ErrorKind.input)
            for target in targets:
                base = _base(entry, "", target, {}, options, version)
                plan.rows.append(make_row(base, failed, target.names, budget, False))
            continue
        dims = {k: v for k, v in options.dims.items() if k in identity.symbols} | dict(entry.dims)
        shapes = dict(options.shapes) | dict(entry.shapes)  # a manifest's shapes are the model's own
        settings: dict[str, object] = {"dims": dims, "precision": options.precision, "fusion": options.fusion}
        if shapes:  # only then: the cache keys of audits without shapes stay as they were
            settings["shapes"] = {k: list(v) for k, v in sorted(shapes.items())}
        if options.peak:  # likewise
            settings["peak"] = True
        if options.time_model is not None:  # likewise
            settings["time_model"] = str(options.time_model)
        if options.runtime is not None:  # likewise; a runtime file by its content
            settings["runtime"] = runtime_key(options.runtime)
        for target in targets:
            base = _base(entry, identity.sha256, target, dims, options, version)
            key = result_key(identity.sha256, identity.external, version, target.hash, settings)
            figures = cache.get(key)
            if figures is not None:
                plan.cached += 1
                plan.rows.append(make_row(base, figures, target.names, budget, True))
                continue
            plan.rows.append(None)
            if key not in plan.waiting:
                plan.keys.append(key)
                plan.tasks.append(
                    (
                        entry.path,
                        target.spec,
                        dims,
                        options.precision,
                        options.fusion,
                        shapes,
                        options.peak,
                        options.time_model,
                        options.runtime,
                    )
                )
            plan.waiting.setdefault(key, []).append((len(plan.rows) - 1, base, target, budget))
    return plan


def _filled(rows: list[dict[str, Any] | None]) -> list[dict[str, Any]]:
    """The plan's rows once :func:`_collect` has run: every task's result fills its rows, so none is left None."""
    filled = [row for row in rows if row is not None]
    assert len(filled) == len(rows), "an audit row was never filled"
    return filled


def _collect(plan: _Plan, engine: Engine, cache: ResultCache, progress: Progress | None) -> int:
    """Run the plan's tasks; fill their rows and the cache as results arrive. Returns the unreadable count."""
    unreadable = 0
    for done, (k, outcome) in enumerate(run(analyze_task, plan.tasks, engine), start=1):
        figures = outcome
        if isinstance(outcome, TaskFailure):
            figures = error_figures(f"internal error: {outcome.message}", ErrorKind.internal)
        elif cacheable(figures):
            cache.put(plan.keys[k], figures)
        unreadable += figures.get("error_kind") == ErrorKind.unreadable.value
        for index, base, target, budget in plan.waiting[plan.keys[k]]:
            plan.rows[index] = make_row(base, figures, target.names, budget, False)
        if progress is not None:
            progress(plan.tasks[k][0], done, len(plan.tasks))
    return unreadable


def _targets(options: AuditOptions) -> list[_Target]:
    """The platforms, loaded once here (a bad one raises before any model runs), each with its hash."""
    targets: dict[str, _Target] = {}
    for spec in options.platforms:
        platform = load_platform(spec)
        if options.precision is not None:
            platform.peak(options.precision)
        runtime_for(platform, options.runtime, options.fusion)  # a bad runtime raises before any model runs
        targets.setdefault(platform.name, _Target(platform, spec, digest(platform)))
    return list(targets.values())


def _budgets(entries: Sequence[ModelEntry], default: Path | None, targets: Sequence[_Target]) -> dict[str, Budget]:
    """Every budget file named, loaded once and checked against every platform; ``""`` is the default one."""
    budgets: dict[str, Budget] = {}
    if default is not None:
        budgets[""] = load_budget(default)
    for entry in entries:
        if entry.budget and entry.budget not in budgets:
            budgets[entry.budget] = load_budget(entry.budget)
    for budget in budgets.values():
        for target in targets:
            budget.latency_limit(target.names)  # a per-platform latency without this platform fails now
    return budgets


def _base(
    entry: ModelEntry, sha: str, target: _Target, dims: Mapping[str, int], options: AuditOptions, version: str
) -> dict[str, Any]:
    return {
        "model": entry.path,
        "name": entry.name,
        "sha256": sha or None,
        "platform": target.platform.name,
        "dims": " ".join(f"{k}={v}" for k, v in sorted(dims.items())) or None,
        "precision": options.precision,
        "fusion": options.fusion or target.platform.fusion_profile,
        "onnxroof_version": version,
    }


def runtime_key(runtime: str) -> str:
    """What a ``--runtime`` adds to a result's cache key: a bundled name as given, a file by its content's hash."""
    path = Path(runtime)
    if path.is_file():
        return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    return runtime.strip().lower()
