"""Checking a model against a :class:`~onnxroof.gate.budget.Budget`: each limit and finding gets a verdict, each model
a status and an exit code (``onnxroof check``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any

from onnxroof.analysis.findings import Finding
from onnxroof.core.errors import OnnxroofError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.states import TimeModelKind
from onnxroof.core.units import seconds
from onnxroof.gate.budget import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_PASS,
    EXIT_VIOLATION,
    LIMITS,
    SLOWDOWN,
    STATUS_ERROR,
    STATUS_FAIL,
    STATUS_PASS,
    UNSUPPORTED,
    VERDICT_FAIL,
    VERDICT_PASS,
    Budget,
    BudgetError,
    Limit,
    format_quantity,
)

# --------------------------------------------------------------------------------------------- evaluation


@frozen_dataclass(slots=True)
class LimitResult:
    """One limit checked: the model's value, the limit and the verdict."""

    key: str
    label: str
    kind: str
    value: float
    limit: float
    value_text: str
    limit_text: str
    passed: bool

    @property
    def verdict(self) -> str:
        return VERDICT_PASS if self.passed else VERDICT_FAIL

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "value": self.value if math.isfinite(self.value) else None,
            "limit": self.limit if math.isfinite(self.limit) else None,
            "value_text": self.value_text,
            "limit_text": self.limit_text,
            "verdict": self.verdict,
        }


@frozen_dataclass(slots=True)
class FindingResult:
    """A finding with what the budget makes of it: ``fail`` or ``warn`` (reported, does not fail)."""

    finding: Finding
    verdict: str
    weight: float = field(default=0.0, compare=False)
    """The predicted time of its nodes (:func:`~onnxroof.analysis.findings.finding_weights`): ranks the worst of
    a kind first in the terminal view; not part of the JSON."""

    def to_dict(self) -> dict[str, Any]:
        return {**self.finding.to_dict(), "verdict": self.verdict}


_PER_PLATFORM = frozenset({"max_latency", "max_energy"})


def evaluate(
    totals: Mapping[str, float],
    platform_names: Sequence[str],
    unsupported: int,
    findings: Sequence[Finding],
    budget: Budget,
    baseline_latency_s: float | None = None,
    weights: Sequence[float] | None = None,
) -> tuple[tuple[LimitResult, ...], tuple[FindingResult, ...]]:
    """Check ``totals`` (the JSON ``totals`` object) against ``budget``.

    ``platform_names`` are the platform's name and aliases (to pick its latency limit); ``unsupported`` the
    number of nodes without a cost rule; ``weights`` each finding's weight (carried on its result for the
    terminal view's ranking); ``baseline_latency_s`` a previous predicted latency to compare with
    (``max_slowdown``, default 0: any slowdown fails).
    """
    results: list[LimitResult] = []
    for spec in LIMITS:
        limit = budget.latency_limit(platform_names) if spec.key == "max_latency" else getattr(budget, spec.key)
        if limit is None:
            continue
        label = f"{spec.label} on {platform_names[0]}" if spec.key in _PER_PLATFORM else spec.label
        if totals.get(spec.total) is None:  # e.g. energy on a platform without energy figures: never a silent pass
            results.append(
                LimitResult(
                    spec.key, label, spec.kind, math.nan, limit.value, "unknown (no figures)", limit.text, False
                )
            )
            continue
        value = float(totals[spec.total])
        results.append(
            LimitResult(
                spec.key,
                label,
                spec.kind,
                value,
                limit.value,
                format_quantity(value, spec.kind),
                limit.text,
                value <= limit.value * (1 + 1e-12),
            )
        )
    if budget.allow_unsupported is not None:
        results.append(
            LimitResult(
                UNSUPPORTED.key,
                UNSUPPORTED.label,
                UNSUPPORTED.kind,
                float(unsupported),
                math.inf if budget.allow_unsupported else 0.0,
                f"{unsupported} node(s)",
                "allowed" if budget.allow_unsupported else "none allowed",
                budget.allow_unsupported or unsupported == 0,
            )
        )
    if baseline_latency_s is not None:
        tolerance = budget.max_slowdown or Limit(0.0, "0%")
        latency = float(totals["latency_s"])
        change = latency / baseline_latency_s - 1 if baseline_latency_s > 0 else (0.0 if latency == 0 else math.inf)
        results.append(
            LimitResult(
                SLOWDOWN.key,
                SLOWDOWN.label,
                SLOWDOWN.kind,
                change,
                tolerance.value,
                f"{change:+.1%} ({seconds(latency)} vs {seconds(baseline_latency_s)})",
                f"+{tolerance.text}" if not tolerance.text.startswith("+") else tolerance.text,
                change <= tolerance.value + 1e-9,
            )
        )
    verdicts = []
    for i, finding in enumerate(findings):
        verdict = budget.policy(finding)
        if verdict is not None:
            verdicts.append(FindingResult(finding, verdict, weights[i] if weights is not None else 0.0))
    return tuple(results), tuple(verdicts)


# --------------------------------------------------------------------------------------------- one model


@frozen_dataclass
class CheckSettings:
    """How every model of a check is analyzed (plain data: it crosses process boundaries)."""

    platform: str = "xavier"
    dims: dict[str, int] = field(default_factory=dict, hash=False)
    precision: str | None = None
    fusion: str | None = None
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict, hash=False)
    """Whole-input shapes (``--shape``), bound with ``dims``."""
    peak: bool = False
    """Draw the roofline from the datasheet figures (``--peak``), not the sustained shares."""
    time_model: TimeModelKind | None = None
    """The time model (``--time-model``); None: the platform's default."""
    runtime: str | None = None
    """The runtime profile (``--runtime``: a bundled name or a path); None: the platform's."""


@frozen_dataclass
class ModelCheck:
    """The outcome of checking one model: plain, picklable data for every renderer."""

    path: str
    status: str  # pass | fail | error
    exit_code: int
    error: str = ""
    platform: str = ""
    platform_title: str = ""
    limits: tuple[LimitResult, ...] = ()
    findings: tuple[FindingResult, ...] = ()
    totals: dict[str, Any] | None = field(default=None, hash=False)
    baseline: dict[str, Any] | None = field(default=None, hash=False)
    warnings: tuple[str, ...] = ()

    @property
    def violations(self) -> tuple[LimitResult, ...]:
        return tuple(r for r in self.limits if not r.passed)

    @property
    def failing_findings(self) -> tuple[FindingResult, ...]:
        return tuple(f for f in self.findings if f.verdict == VERDICT_FAIL)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "status": self.status,
            "exit_code": self.exit_code,
            "error": self.error or None,
            "platform": {"name": self.platform, "title": self.platform_title} if self.platform else None,
            "limits": [r.to_dict() for r in self.limits],
            "findings": [f.to_dict() for f in self.findings],
            "totals": self.totals,
            "baseline": self.baseline,
            "warnings": list(self.warnings),
        }


def error_check(path: str, message: str, code: int = EXIT_BAD_INPUT) -> ModelCheck:
    return ModelCheck(path=path, status=STATUS_ERROR, exit_code=code, error=message)


def check_model(
    path: str,
    budget: Budget,
    settings: CheckSettings,
    baseline: Mapping[str, Any] | None = None,
    debug: bool = False,
) -> ModelCheck:
    """Analyze one model and check it against ``budget``; never raises for a bad model (its row says error).

    ``baseline`` is a previous run's ``{"path", "source", "platform", "totals"}`` (see
    :func:`onnxroof.gate.diff.load_baseline`). ``debug`` lets unexpected errors (bugs) propagate with their traceback.
    """
    from onnxroof.analysis.analyze import analyze
    from onnxroof.analysis.catalog import finding_weights
    from onnxroof.analysis.document import to_dict
    from onnxroof.analysis.whatif import WhatIf

    try:
        analysis = analyze(
            path,
            platform=settings.platform,
            dims=settings.dims,
            shapes=settings.shapes,
            whatif=WhatIf(precision=settings.precision, peak=settings.peak, time_model=settings.time_model),
            fusion=settings.fusion,
            runtime=settings.runtime,
        )
        doc = to_dict(analysis)
        platform = analysis.platform
        names = (platform.name, *platform.aliases)
        baseline_latency = None
        if baseline is not None:
            if baseline["platform"] and baseline["platform"] != platform.name:
                raise BudgetError(
                    f"{baseline['source']}: the baseline was predicted for platform {baseline['platform']!r}, "
                    f"this check is for {platform.name!r}"
                )
            baseline_latency = float(baseline["totals"]["latency_s"])
        unsupported = sum(len(ids) for ids in analysis.unsupported.values())
        findings = tuple(Finding.from_dict(f) for f in doc["findings"])
        weights = finding_weights(analysis, findings)
        limits, verdicts = evaluate(doc["totals"], names, unsupported, findings, budget, baseline_latency, weights)
    except OnnxroofError as exc:
        return error_check(path, str(exc))
    except Exception as exc:  # a bug: reported on this model's row, the others still run
        if debug:
            raise
        return error_check(path, f"internal error: {type(exc).__name__}: {exc}", EXIT_INTERNAL)
    failed = any(not r.passed for r in limits) or any(v.verdict == VERDICT_FAIL for v in verdicts)
    return ModelCheck(
        path=path,
        status=STATUS_FAIL if failed else STATUS_PASS,
        exit_code=EXIT_VIOLATION if failed else EXIT_PASS,
        platform=platform.name,
        platform_title=platform.title,
        limits=limits,
        findings=verdicts,
        totals=doc["totals"],
        baseline=None
        if baseline is None
        else {"source": baseline["source"], "path": baseline["path"], "latency_s": baseline_latency},
        warnings=analysis.warnings,
    )


def overall_exit_code(checks: Sequence[ModelCheck]) -> int:
    """The worst outcome: 3 on an internal error, else 2 on any bad input, else 1 on any violation, else 0."""
    return max((c.exit_code for c in checks), default=EXIT_PASS)
