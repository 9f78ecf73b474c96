"""Findings grouped by kind in the console report and ``check``: one head line per kind with its count, its
worst cases and its fix; ``--verbose`` lists every finding as before."""

from __future__ import annotations

import os
from pathlib import Path

import onnx
import pytest
from rich.console import Console
from test_cli import invoke

import onnxroof
from onnxroof.analysis.catalog import Finding, finding_weights
from onnxroof.analysis.findings import find
from onnxroof.report.console import WORST_SHOWN, findings_view, group_findings, render_console

DENSENET = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light" / "light_densenet121.onnx"


def _finding(rule: str, node: str) -> Finding:
    return Finding(rule, "warning", f"title {rule}", (node,), f"message {node}", f"fix {rule}")


def _text(renderable, width: int = 120) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


FINDINGS = (
    _finding("OR001", "a"),
    _finding("OR001", "b"),
    _finding("OR001", "c"),
    _finding("OR001", "d"),
    _finding("OR001", "e"),
    _finding("OR002", "f"),
)


def test_groups_keep_first_appearance_and_rank_by_weight() -> None:
    verdicts = ("fail", "fail", "warn", "fail", "fail", "warn")
    assert group_findings(FINDINGS, verdicts) == [[0, 1, 3, 4], [2], [5]]
    weights = (1.0, 3.0, 9.0, 2.0, 3.0, 0.0)
    # heaviest first, a tie (b and e, 3.0) in the given order
    assert group_findings(FINDINGS, verdicts, weights) == [[1, 4, 3, 0], [2], [5]]


def test_grouped_view_is_one_head_line_per_kind_verbose_lists_every_finding() -> None:
    weights = (1.0, 5.0, 4.0, 0.0, 2.0, 0.0)
    grouped = _text(findings_view(FINDINGS, weights=weights, verbose=False))
    assert "Findings (6 in 2 kinds)" in grouped
    assert grouped.count("OR001 warning") == 1 and "OR001 warning ×5  title OR001" in grouped
    assert f"worst: b, c, e and {5 - WORST_SHOWN} more" in grouped
    assert "message" not in grouped.split("OR002")[0]  # the group names its worst cases, not each message
    assert "message f" in grouped  # a kind found once keeps its whole block
    verbose = _text(findings_view(FINDINGS, verbose=True))
    assert verbose.count("OR001 warning") == 5 and all(f"message {n}" in verbose for n in "abcdef")
    assert "Findings (6)" in verbose


@pytest.fixture(scope="module")
def densenet() -> onnxroof.Analysis:
    return onnxroof.analyze(DENSENET, "xavier")


def test_densenet_report_is_short_and_names_its_worst_unfolded_batchnorms(densenet: onnxroof.Analysis) -> None:
    findings = find(densenet)
    bn = [f for f in findings if f.id == "OR001"]
    assert len(bn) == 62

    def lines(verbose: bool, width: int) -> list[str]:
        console = Console(width=width, record=True, color_system=None)
        render_console(densenet, console, verbose=verbose)
        return console.export_text().splitlines()

    # before grouping: 576 lines at 120 columns, 772 at 80 (main at 8467712); grouped: 85 and 94
    assert len(lines(False, 120)) < 100 and len(lines(False, 80)) < 110
    assert len(lines(True, 120)) > 500
    text = "\n".join(lines(False, 120))
    assert "OR001 warning ×62" in text
    weights = finding_weights(densenet, findings)
    worst = max(range(len(findings)), key=lambda i: (weights[i] if findings[i].id == "OR001" else -1.0, -i))
    assert f"worst: {findings[worst].node_ids[0]}," in text
    # the weight is the nodes' own predicted time: closed form on the worst one
    by_id = {n.id: n.latency_s for n in densenet.nodes}
    assert weights[worst] == sum(by_id[node] for node in findings[worst].node_ids)


def test_check_groups_with_the_reports_worst_cases(densenet: onnxroof.Analysis) -> None:
    grouped = invoke("check", DENSENET)
    assert grouped.exit_code == 0, grouped.output
    assert "OR001 warning [warn] ×62" in grouped.stdout
    assert grouped.stdout.count("OR001 warning") == 1
    findings = find(densenet)
    weights = finding_weights(densenet, findings)
    bn = sorted((i for i, f in enumerate(findings) if f.id == "OR001"), key=lambda i: (-weights[i], i))
    worst = ", ".join(findings[i].node_ids[0] for i in bn[:WORST_SHOWN])
    assert f"worst: {worst} and {62 - WORST_SHOWN} more" in grouped.stdout
