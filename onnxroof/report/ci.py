"""Renderers for ``onnxroof check`` results: the terminal view, JSON, JUnit XML, SARIF 2.1.0 and GitHub
workflow annotations.

Every renderer takes the :class:`~onnxroof.gate.check.ModelCheck` rows of one run (one per model, in the order
given) and returns text (the terminal view prints to a console):

* **JUnit** — one ``<testsuite>`` per model; each limit is a ``<testcase>`` (``<failure>`` when violated),
  each finding that fails the check is a ``<testcase>`` with a ``<failure>``; the other findings go to
  ``<system-out>``; a model that could not be analyzed is one ``<testcase>`` with an ``<error>``.
* **SARIF** — one run; findings and violated limits are results; each result names the model file
  (``physicalLocation.artifactLocation``) and the node(s) (``logicalLocations``, kind ``function``);
  models that could not be analyzed are tool execution notifications.
* **GitHub** — ``::error``/``::warning``/``::notice`` workflow commands, one per violated limit, finding
  or failed model, then one plain summary line per model.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from rich import box
from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

from onnxroof.analysis.findings import RULES
from onnxroof.core.units import seconds
from onnxroof.core.version import __version__
from onnxroof.gate.budget import LIMITS, SLOWDOWN, STATUS_ERROR, UNSUPPORTED, VERDICT_FAIL, Budget
from onnxroof.gate.check import ModelCheck, overall_exit_code
from onnxroof.report.columns import short_path
from onnxroof.report.console import findings_view

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
SARIF_VERSION = "2.1.0"
#: At most this many node locations per SARIF result (a launch-overhead finding may name every node).
SARIF_MAX_LOCATIONS = 50
_LEVELS = {"error": "error", "warning": "warning", "note": "note"}
_GITHUB = {"error": "error", "warning": "warning", "note": "notice"}
_STATUS_STYLE = {"pass": "bold green", "fail": "bold red", "error": "bold red"}


_LIMIT_COLUMNS: tuple[tuple[str, JustifyMethod], ...] = (
    ("check", "left"),
    ("value", "right"),
    ("limit", "right"),
    ("verdict", "left"),
)


def _status(checks: Sequence[ModelCheck]) -> str:
    code = overall_exit_code(checks)
    return {0: "pass", 1: "fail"}.get(code, "error")


def error_text(check: ModelCheck) -> str:
    """A failed model's error, starting with its path."""
    return check.error if check.error.startswith(check.path) else f"{check.path}: {check.error}"


def _limit_rules() -> list[tuple[str, str]]:
    return [(spec.key, spec.label) for spec in (*LIMITS, UNSUPPORTED, SLOWDOWN)]


# --------------------------------------------------------------------------------------------- terminal


def render_check_console(checks: Sequence[ModelCheck], console: Console, verbose: bool = False) -> None:
    """Per model: its limits (value, limit, verdict) and findings (one line per kind and verdict unless
    ``verbose``); a summary table when there are several. On a terminal, paths are shortened from the left."""
    for check in checks:
        path = short_path(check.path, max(20, console.width // 2)) if console.is_terminal else check.path
        title = Text.assemble((path, "bold"), "  ", (check.status.upper(), _STATUS_STYLE[check.status]))
        if check.platform:
            title.append(f"  on {check.platform_title} ({check.platform})", style="cyan")
        console.print(title)
        if check.status == STATUS_ERROR:
            console.print(Text(f"  {check.error}", style="red"))
            console.print()
            continue
        if check.limits:
            table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=True)
            for name, justify in _LIMIT_COLUMNS:
                table.add_column(name, justify=justify, overflow="fold")
            for r in check.limits:
                table.add_row(
                    Text(r.label),
                    r.value_text,
                    r.limit_text,
                    Text(r.verdict.upper(), style=_STATUS_STYLE[r.verdict]),
                )
            console.print(table)
        else:
            console.print(Text("  no limits set (give --budget FILE or --max-... options)", style="dim"))
        findings = tuple(f.finding for f in check.findings)
        weights = tuple(f.weight for f in check.findings)
        console.print(
            findings_view(findings, tuple(f.verdict for f in check.findings), verbose=verbose, weights=weights)
        )
        console.print()
    if len(checks) > 1:
        console.print(summary_table(checks))
    code = overall_exit_code(checks)
    words = {0: "all models pass", 1: "budget violated", 2: "some models could not be checked", 3: "internal error"}
    console.print(Text(f"{words.get(code, 'error')} (exit {code})", style=_STATUS_STYLE[_status(checks)]))


_SUMMARY_COLUMNS: tuple[tuple[str, JustifyMethod], ...] = (
    ("model", "left"),
    ("status", "left"),
    ("latency", "right"),
    ("limits failed", "right"),
    ("findings", "right"),
    ("note", "left"),
)


def summary_table(checks: Sequence[ModelCheck]) -> Table:
    table = Table(title="Summary", box=box.SIMPLE_HEAD, title_justify="left")
    for name, justify in _SUMMARY_COLUMNS:
        table.add_column(name, justify=justify, overflow="fold")
    for c in checks:
        latency = seconds(c.totals["latency_s"]) if c.totals else "–"
        failing = len(c.failing_findings)
        table.add_row(
            Text(c.path),
            Text(c.status.upper(), style=_STATUS_STYLE[c.status]),
            latency,
            f"{len(c.violations)} of {len(c.limits)}" if c.status != STATUS_ERROR else "–",
            f"{len(c.findings)}" + (f" ({failing} failing)" if failing else "") if c.status != STATUS_ERROR else "–",
            Text(c.error if c.status == STATUS_ERROR else ", ".join(r.key for r in c.violations)),
        )
    return table


# --------------------------------------------------------------------------------------------- JSON


def render_check_json(checks: Sequence[ModelCheck], budget: Budget) -> str:
    data = {
        "schema": 1,
        "tool": "onnxroof",
        "version": __version__,
        "command": "check",
        "status": _status(checks),
        "exit_code": overall_exit_code(checks),
        "budget": budget.describe(),
        "models": [c.to_dict() for c in checks],
    }
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


# --------------------------------------------------------------------------------------------- JUnit


def render_junit(checks: Sequence[ModelCheck]) -> str:
    """JUnit XML: ``failures`` counts violated limits and failing findings, ``errors`` models not analyzed."""
    root = ET.Element("testsuites", name="onnxroof check")
    totals = {"tests": 0, "failures": 0, "errors": 0}
    for check in checks:
        suite = ET.SubElement(root, "testsuite", name=check.path)
        counts = {"tests": 0, "failures": 0, "errors": 0}
        if check.platform:
            props = ET.SubElement(suite, "properties")
            ET.SubElement(props, "property", name="platform", value=check.platform)
        if check.status == STATUS_ERROR:
            case = ET.SubElement(suite, "testcase", classname=_classname(check, "model"), name="analyze")
            ET.SubElement(case, "error", message=check.error, type="error").text = check.error
            counts["tests"] += 1
            counts["errors"] += 1
        for r in check.limits:
            case = ET.SubElement(
                suite, "testcase", classname=_classname(check, "limits"), name=f"{r.key}: {r.label} ≤ {r.limit_text}"
            )
            counts["tests"] += 1
            if not r.passed:
                message = f"{r.label}: {r.value_text} exceeds the limit {r.limit_text}"
                ET.SubElement(case, "failure", message=message, type="budget").text = message
                counts["failures"] += 1
        for f in check.failing_findings:
            case = ET.SubElement(
                suite, "testcase", classname=_classname(check, "findings"), name=f"{f.finding.id}: {f.finding.title}"
            )
            text = f"{f.finding.message}\nSuggestion: {f.finding.suggestion}\nNodes: {', '.join(f.finding.node_ids)}"
            ET.SubElement(case, "failure", message=f.finding.message, type=f.finding.id).text = text
            counts["tests"] += 1
            counts["failures"] += 1
        others = [f for f in check.findings if f.verdict != VERDICT_FAIL]
        if others:
            ET.SubElement(suite, "system-out").text = "\n".join(
                f"{f.finding.id} {f.finding.severity}: {f.finding.title}: {f.finding.message}" for f in others
            )
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("skipped", "0")
    for key, value in totals.items():
        root.set(key, str(value))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _classname(check: ModelCheck, part: str) -> str:
    stem = Path(check.path).name.replace(".", "_")
    return f"onnxroof.{stem}.{part}"


# --------------------------------------------------------------------------------------------- SARIF


def artifact_uri(path: str) -> str:
    """A model path as a SARIF artifact URI: relative paths stay relative (URI-escaped), absolute ones become
    ``file://`` URIs."""
    p = Path(path)
    if p.is_absolute():
        return p.as_uri()
    return quote(p.as_posix(), safe="/")


def render_sarif(checks: Sequence[ModelCheck]) -> str:
    rules = [
        {
            "id": rule.id,
            "name": rule.name,
            "shortDescription": {"text": rule.title},
            "fullDescription": {"text": rule.trigger},
            "help": {"text": rule.help},
            "defaultConfiguration": {"level": _LEVELS[rule.severity]},
        }
        for rule in RULES.values()
    ]
    for key, label in _limit_rules():
        rules.append(
            {
                "id": f"budget/{key}",
                "name": f"budget-{key.replace('_', '-')}",
                "shortDescription": {"text": f"Budget limit: {label}"},
                "fullDescription": {"text": f"The model's {label} must not exceed the budget's {key}."},
                "defaultConfiguration": {"level": "error"},
            }
        )
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    artifacts, results, notifications = [], [], []
    for i, check in enumerate(checks):
        uri = artifact_uri(check.path)
        artifacts.append({"location": {"uri": uri}})
        file_location = {"artifactLocation": {"uri": uri, "index": i}}
        if check.status == STATUS_ERROR:
            notifications.append(
                {
                    "level": "error",
                    "message": {"text": error_text(check)},
                    "locations": [{"physicalLocation": file_location}],
                }
            )
            continue
        for r in check.violations:
            rule_id = f"budget/{r.key}"
            results.append(
                {
                    "ruleId": rule_id,
                    "ruleIndex": index[rule_id],
                    "level": "error",
                    "message": {"text": f"{r.label}: {r.value_text} exceeds the limit {r.limit_text}."},
                    "locations": [{"physicalLocation": file_location}],
                    "properties": {**r.to_dict(), "platform": check.platform},
                }
            )
        for f in check.findings:
            finding = f.finding
            level = "error" if f.verdict == VERDICT_FAIL else _LEVELS[finding.severity]
            nodes = finding.node_ids[:SARIF_MAX_LOCATIONS]
            locations = [
                {"physicalLocation": file_location, "logicalLocations": [_logical(check, node_id)]} for node_id in nodes
            ] or [{"physicalLocation": file_location}]
            results.append(
                {
                    "ruleId": finding.id,
                    "ruleIndex": index[finding.id],
                    "level": level,
                    "message": {"text": f"{finding.message} Suggestion: {finding.suggestion}"},
                    "locations": locations,
                    "properties": {
                        "severity": finding.severity,
                        "verdict": f.verdict,
                        "platform": check.platform,
                        "nodes": len(finding.node_ids),
                    },
                }
            )
    invocation: dict[str, object] = {"executionSuccessful": not any(c.status == STATUS_ERROR for c in checks)}
    if notifications:
        invocation["toolExecutionNotifications"] = notifications
    sarif = {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {"driver": {"name": "onnxroof", "version": __version__, "rules": rules}},
                "invocations": [invocation],
                "artifacts": artifacts,
                "results": results,
            }
        ],
    }
    return json.dumps(sarif, indent=2, ensure_ascii=False) + "\n"


def _logical(check: ModelCheck, node_id: str) -> dict[str, str]:
    """A node as a SARIF logical location: its name (the part after ``index:``) and its full id."""
    _, _, name = node_id.partition(":")
    return {"name": name or node_id, "fullyQualifiedName": f"{Path(check.path).name}::{node_id}", "kind": "function"}


# --------------------------------------------------------------------------------------------- GitHub


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def _command(level: str, path: str, title: str, message: str) -> str:
    return f"::{level} file={_escape_property(path)},title={_escape_property(title)}::{_escape_data(message)}"


def render_github(checks: Sequence[ModelCheck]) -> str:
    """GitHub Actions workflow commands: violations and failing findings as errors, other findings by severity."""
    lines = []
    for check in checks:
        if check.status == STATUS_ERROR:
            lines.append(_command("error", check.path, "onnxroof: cannot check model", error_text(check)))
            continue
        for r in check.violations:
            lines.append(
                _command(
                    "error",
                    check.path,
                    f"onnxroof budget: {r.key}",
                    f"{r.label}: {r.value_text} exceeds the limit {r.limit_text}",
                )
            )
        for f in check.findings:
            finding = f.finding
            level = "error" if f.verdict == VERDICT_FAIL else _GITHUB[finding.severity]
            nodes = ", ".join(finding.node_ids[:5]) + (" …" if len(finding.node_ids) > 5 else "")
            message = f"{finding.message}\nSuggestion: {finding.suggestion}" + (f"\nNodes: {nodes}" if nodes else "")
            lines.append(_command(level, check.path, f"{finding.id} {finding.title}", message))
    for check in checks:
        if check.status == STATUS_ERROR:
            lines.append(f"onnxroof: ERROR: {error_text(check)}")
        else:
            lines.append(
                f"onnxroof: {check.path}: {check.status.upper()} on {check.platform}: "
                f"{len(check.violations)} of {len(check.limits)} limits violated, {len(check.findings)} finding(s), "
                f"{len(check.failing_findings)} failing"
            )
    return "\n".join(lines) + "\n"
