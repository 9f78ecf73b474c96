"""CI-native outputs: SARIF validates against the SARIF 2.1.0 schema, JUnit XML counts the right failures,
GitHub annotations are escaped, JSON round-trips."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from io import StringIO
from pathlib import Path

import jsonschema
import pytest
from rich.console import Console

from onnxroof.analysis.findings import RULES
from onnxroof.gate.budget import Budget, Limit
from onnxroof.gate.check import CheckSettings, check_model, error_check
from onnxroof.report.ci import (
    SARIF_MAX_LOCATIONS,
    artifact_uri,
    render_check_console,
    render_check_json,
    render_github,
    render_junit,
    render_sarif,
)

ROOT = Path(__file__).resolve().parents[1]
CNN = str(ROOT / "samples" / "tiny_cnn.onnx")
TRANSFORMER = str(ROOT / "samples" / "tiny_transformer.onnx")
SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"

#: Two limits the sample CNN violates on agx-orin (latency ≈ 175 µs, 19.3 MFLOP), two it meets.
BUDGET = Budget(
    max_latency={"default": Limit(100e-6, "100 us")},
    max_flops=Limit(1e6, "1M"),
    max_params=Limit(1e6, "1M"),
    max_memory_bound_share=Limit(0.99, "99%"),
)


@pytest.fixture(scope="module")
def checks():
    # agx-orin: on xavier no kernel of these small models is launch-bound any more (the gpu model's Volta library
    # kernels cost 18,000 cycles, 13 µs), and OR006's locations are what the SARIF and JUnit tests pin
    settings = CheckSettings(platform="agx-orin", dims={"batch": 1, "seq": 16})
    return (
        check_model(CNN, BUDGET, settings),
        check_model(TRANSFORMER, BUDGET, settings),
        error_check("models/broken model.onnx", "models/broken model.onnx: not a readable ONNX model"),
    )


def sarif_validator():
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert schema["$schema"] == "http://json-schema.org/draft-04/schema#"  # so the right validator is used
    cls = jsonschema.validators.validator_for(schema)
    assert cls is jsonschema.Draft4Validator
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def test_vendored_schema_is_the_shared_one() -> None:
    shared = ROOT.parent / "shared" / "schemas" / "sarif-schema-2.1.0.json"
    if not shared.exists():
        pytest.skip("no shared/ beside the checkout")
    assert json.loads(SCHEMA.read_text(encoding="utf-8")) == json.loads(shared.read_text(encoding="utf-8"))


def test_sarif_validates_and_locates_findings(checks) -> None:
    text = render_sarif(checks)
    doc = json.loads(text)
    sarif_validator().validate(doc)
    run = doc["runs"][0]
    assert doc["version"] == "2.1.0"
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert rules[: len(RULES)] == list(RULES) and "budget/max_latency" in rules
    results = run["results"]
    for result in results:
        assert rules[result["ruleIndex"]] == result["ruleId"]
    cnn_uri = artifact_uri(CNN)
    finding = next(r for r in results if r["ruleId"] == "OR002")  # the stem conv's 3 input channels
    (location,) = finding["locations"]
    assert location["physicalLocation"]["artifactLocation"]["uri"] == cnn_uri
    assert location["logicalLocations"] == [
        {"name": "/stem/Conv", "fullyQualifiedName": "tiny_cnn.onnx::0:/stem/Conv", "kind": "function"}
    ]
    violations = [r for r in results if r["ruleId"].startswith("budget/")]
    assert {(r["ruleId"], r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]) for r in violations} >= {
        ("budget/max_latency", cnn_uri),
        ("budget/max_flops", cnn_uri),
    }
    assert all(r["level"] == "error" for r in violations)
    overhead = next(r for r in results if r["ruleId"] == "OR006")
    assert len(overhead["locations"]) == min(SARIF_MAX_LOCATIONS, overhead["properties"]["nodes"])
    invocation = run["invocations"][0]
    assert invocation["executionSuccessful"] is False
    (notification,) = invocation["toolExecutionNotifications"]
    assert notification["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "models/broken%20model.onnx"


def test_sarif_for_a_clean_run_validates() -> None:
    check = check_model(CNN, Budget(ignore=frozenset(RULES)), CheckSettings(dims={"batch": 1}))
    doc = json.loads(render_sarif([check]))
    sarif_validator().validate(doc)
    assert doc["runs"][0]["results"] == [] and doc["runs"][0]["invocations"][0]["executionSuccessful"]


def test_artifact_uris() -> None:
    assert artifact_uri("models/a b.onnx") == "models/a%20b.onnx"
    assert artifact_uri("/abs/m.onnx") == "file:///abs/m.onnx"


def test_junit_counts_violated_limits(checks) -> None:
    root = ET.fromstring(render_junit(checks))
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [c.path for c in checks]
    for suite, check in zip(suites[:2], checks[:2], strict=True):
        violated = sum(1 for r in check.limits if not r.passed)
        assert violated >= 2
        assert not check.failing_findings
        assert int(suite.get("failures")) == violated == len(suite.findall("testcase/failure"))
        assert int(suite.get("tests")) == len(check.limits) == len(suite.findall("testcase"))
        assert suite.find("system-out").text.count("OR00") == len(check.findings)
    broken = suites[2]
    assert (broken.get("errors"), broken.get("failures")) == ("1", "0")
    assert "not a readable ONNX model" in broken.find("testcase/error").get("message")
    assert int(root.get("failures")) == sum(int(s.get("failures")) for s in suites)
    assert root.get("errors") == "1"


def test_junit_counts_failing_findings_too() -> None:
    budget = Budget(max_latency={"default": Limit(1.0, "1 s")}, fail=frozenset({"OR006"}))
    check = check_model(CNN, budget, CheckSettings(platform="agx-orin", dims={"batch": 1}))
    suite = ET.fromstring(render_junit([check])).find("testsuite")
    assert suite.get("failures") == "1"
    (failure,) = suite.findall("testcase/failure")
    assert failure.get("type") == "OR006"


def test_github_annotations(checks) -> None:
    lines = render_github(checks).splitlines()
    commands = [line for line in lines if line.startswith("::")]
    errors = [line for line in commands if line.startswith("::error ")]
    cnn = checks[0]
    assert sum(1 for line in errors if "title=onnxroof budget%3A" in line and "tiny_cnn" in line) == len(cnn.violations)
    assert any(line.startswith("::warning file=") and "title=OR006 " in line for line in commands)
    assert any("file=models/broken model.onnx,title=onnxroof%3A cannot check model::" in line for line in errors)
    assert all("\n" not in f.finding.message or "%0A" in line for f in cnn.findings for line in commands)
    assert lines[-3].startswith("onnxroof: ") and "FAIL on agx-orin" in lines[-3]


def test_github_escapes_properties_and_data() -> None:
    text = render_github([error_check("a,b:c.onnx", "first line\nsecond: 100%")])
    assert text.splitlines()[0] == (
        "::error file=a%2Cb%3Ac.onnx,title=onnxroof%3A cannot check model::a,b:c.onnx: first line%0Asecond: 100%25"
    )


def test_check_json(checks) -> None:
    doc = json.loads(render_check_json(checks, BUDGET))
    assert (doc["status"], doc["exit_code"], doc["command"]) == ("error", 2, "check")
    assert [m["status"] for m in doc["models"]] == ["fail", "fail", "error"]
    first = doc["models"][0]
    assert {r["key"]: r["verdict"] for r in first["limits"]} == {
        "max_latency": "fail",
        "max_flops": "fail",
        "max_params": "pass",
        "max_memory_bound_share": "pass",
    }
    assert first["totals"]["latency_s"] == pytest.approx(checks[0].totals["latency_s"])
    assert all(f["verdict"] == "warn" for f in first["findings"])
    assert doc["budget"]["max_latency"] == {"default": "100 us"}


def test_console_lists_every_limit_and_a_summary(checks) -> None:
    buffer = StringIO()
    render_check_console(checks, Console(file=buffer, width=160, color_system=None))
    text = buffer.getvalue()
    for label in ("predicted latency on agx-orin", "FLOPs", "parameters", "memory-bound share of time"):
        assert label in text
    assert text.count("FAIL") >= 4 and "PASS" in text
    assert "Summary" in text and "ERROR" in text and "(exit 2)" in text
