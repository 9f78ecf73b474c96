"""The audit table: one tidy row per model × platform, its columns and their types.

Every figure is copied from the ``totals`` of the JSON document (``report --format json``), in SI units:
seconds, FLOPs, MACs, bytes, shares as fractions. ``status`` is ``ok``, ``violated`` (the budget fails) or
``error`` (the model could not be analyzed; ``error`` says why in one line). ``budget`` is ``pass``, ``fail`` or
empty (no budget), ``violations`` names what failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

from onnxroof.analysis.findings import Finding
from onnxroof.gate.budget import VERDICT_FAIL, Budget
from onnxroof.gate.check import evaluate


class Status(StrEnum):
    ok = "ok"
    violated = "violated"
    error = "error"


#: Figures taken from the document's ``totals`` as they are.
FIGURES: tuple[str, ...] = (
    "latency_s",
    "flops",
    "macs",
    "params",
    "weight_bytes",
    "peak_activation_bytes",
    "memory_bound_share",
    "layout_share",
    "energy_j",
    "nodes",
    "kernels",
)

#: Every column of the table, in order, with its pandas dtype (so that an all-error table keeps its types).
COLUMNS: Mapping[str, str] = {
    "model": "string",
    "name": "string",
    "sha256": "string",
    "platform": "string",
    "status": "string",
    "error": "string",
    "budget": "string",
    "violations": "string",
    "latency_s": "Float64",
    "flops": "Float64",
    "macs": "Float64",
    "params": "Float64",
    "weight_bytes": "Float64",
    "peak_activation_bytes": "Int64",
    "memory_bound_share": "Float64",
    "layout_share": "Float64",
    "energy_j": "Float64",
    "nodes": "Int64",
    "kernels": "Int64",
    "unsupported_count": "Int64",
    "dims": "string",
    "precision": "string",
    "fusion": "string",
    "onnxroof_version": "string",
    "cached": "boolean",
    "analysis_s": "Float64",
}


def verdict(
    figures: Mapping[str, Any], names: Sequence[str], budget: Budget | None
) -> tuple[str | None, tuple[str, ...]]:
    """The budget verdict (``pass``/``fail``, None without a budget) and what failed, from cached figures."""
    if budget is None or figures.get("error"):
        return None, ()
    findings = tuple(Finding.from_dict(f) for f in figures["findings"])
    limits, verdicts = evaluate(figures["totals"], names, figures["unsupported_count"], findings, budget)
    failed = tuple(f"{r.key} {r.value_text} > {r.limit_text}" for r in limits if not r.passed) + tuple(
        f"{v.finding.id} {v.finding.title}" for v in verdicts if v.verdict == VERDICT_FAIL
    )
    return ("fail" if failed else "pass"), failed


def make_row(
    base: Mapping[str, Any],
    figures: Mapping[str, Any],
    names: Sequence[str],
    budget: Budget | None,
    cached: bool,
) -> dict[str, Any]:
    """A table row: ``base`` (model, name, sha256, platform, dims, precision, fusion, onnxroof_version) and the
    figures, with the budget's verdict."""
    row: dict[str, Any] = {column: None for column in COLUMNS}
    row.update(base)
    row["cached"] = cached
    row["analysis_s"] = figures.get("analysis_s")
    if figures.get("error"):
        row.update(status=Status.error.value, error=figures["error"])
        return row
    totals = figures["totals"]
    for figure in FIGURES:
        row[figure] = totals.get(figure)
    row["unsupported_count"] = figures["unsupported_count"]
    budget_verdict, failed = verdict(figures, names, budget)
    row["budget"] = budget_verdict
    row["violations"] = "; ".join(failed) or None
    row["status"] = (Status.violated if budget_verdict == "fail" else Status.ok).value
    return row


def to_frame(rows: Sequence[Mapping[str, Any]]):
    """The rows as a pandas DataFrame with :data:`COLUMNS` in order and typed."""
    import pandas as pd

    frame = pd.DataFrame(list(rows), columns=list(COLUMNS))
    return frame.astype(dict(COLUMNS))
