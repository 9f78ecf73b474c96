"""`onnxroof check` and `onnxroof diff` as CI runs them.

The exit codes (0 pass, 1 a limit or failing finding violated, 2 bad usage or bad input with one ``error:`` line
on stderr and no traceback), several models in processes, the progress bar, JUnit and SARIF run the INSTALLED
entry point in real subprocesses (started together: each one mostly pays Python's imports). The other options
run in-process through typer's runner.
"""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import onnx
import pytest
from onnx import helper

ROOT = Path(__file__).resolve().parents[1]
CNN = ROOT / "samples" / "tiny_cnn.onnx"
TRANSFORMER = ROOT / "samples" / "tiny_transformer.onnx"
SCHEMA = Path(__file__).parent / "data" / "sarif-schema-2.1.0.json"
ENV = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}

TINY_MEMORY_PLATFORM = """
schema = 1
name = "tiny-memory"
title = "A GPU with 1 kB of memory"
kind = "gpu"
fusion_profile = "none"
[peak_tflops]
fp32 = { value = 1.0, source = "test" }
[memory]
dram_bandwidth_gbps = { value = 100.0, source = "test" }
capacity_gb = { value = 0.000001, source = "test: 1 kB" }
[runtime]
launch_overhead_us = { value = 5.0, source = "test" }
"""


def onnxroof_script() -> str:
    beside = Path(sys.executable).parent / "onnxroof"
    found = str(beside) if beside.exists() else shutil.which("onnxroof")
    assert found, "the onnxroof entry point is not installed (pip install -e .)"
    return found


def run(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [onnxroof_script(), *map(str, args)], capture_output=True, text=True, timeout=120, env=ENV, cwd=cwd
    )


def one_error_line(done: subprocess.CompletedProcess) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def matmul_model(path: Path) -> Path:
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")
    weight = helper.make_tensor("w", onnx.TensorProto.FLOAT, [64, 64], [0.0] * 64 * 64)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 64])],
        [weight],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


# --------------------------------------------------------------------------------------------- the runs

LIMITS_OK = ("--max-latency", "10ms", "--max-params", "1M", "--max-flops", "1G")
JUNIT_LIMITS = ("--max-latency", "100us", "--max-flops", "1M", "--max-params", "1M")
MANY = ("check", "models", "-d", "batch=1", "-d", "seq=16", "--max-latency", "1s", "--jobs", "2")
BAD_USAGE = {
    "unitless": (("--max-latency", "15"), "--max-latency: '15' has no unit"),
    "no-budget": (("--budget", "missing.toml"), "missing.toml: cannot read budget file"),
    "no-platform": (("--platform", "no-such-chip"), "unknown platform 'no-such-chip'"),
    "no-baseline": (("--fail-if-slower", "5%"), "--fail-if-slower: needs --baseline"),
    "bad-id": (("--ignore-finding", "OR999"), "unknown finding id 'OR999'"),
}


def _prepare(folder: Path) -> None:
    """Every input file the runs need, built in-process (no subprocess depends on another)."""
    from test_budget import readme_budget

    from onnxroof.analysis.analyze import analyze
    from onnxroof.report.data import render_json

    (folder / "budget.toml").write_text(readme_budget(), encoding="utf-8")
    (folder / "tiny.toml").write_text(TINY_MEMORY_PLATFORM, encoding="utf-8")
    (folder / "bad.onnx").write_bytes(b"not a model")
    matmul_model(folder / "mm.onnx")
    models = folder / "models"
    models.mkdir()
    shutil.copy(CNN, models / "cnn.onnx")
    shutil.copy(TRANSFORMER, models / "transformer.onnx")
    (models / "broken.onnx").write_bytes(b"\x08\x01garbage")
    (folder / "base.json").write_text(render_json(analyze(CNN, dims={"batch": 1})), encoding="utf-8")
    onnx.save(with_extra_relu(onnx.load(CNN)), folder / "new.onnx")


def with_extra_relu(model: onnx.ModelProto) -> onnx.ModelProto:
    """The sample CNN with one more Relu after /pw/Relu."""
    relu = next(n for n in model.graph.node if n.name == "/pw/Relu")
    extra = helper.make_node("Relu", [relu.output[0]], ["/pw/extra_out"], name="/pw/Relu_extra")
    for node in model.graph.node:
        for i, name in enumerate(node.input):
            if name == relu.output[0]:
                node.input[i] = "/pw/extra_out"
    model.graph.node.insert(list(model.graph.node).index(relu) + 1, extra)
    return model


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("gate")
    _prepare(path)
    return path


@pytest.fixture(scope="module")
def runs(folder: Path) -> dict[str, subprocess.CompletedProcess]:
    """The subprocess commands of this module, run at once in parallel (in the folder of inputs)."""
    commands: dict[str, tuple] = {
        "pass": ("check", CNN, "-d", "batch=1", *LIMITS_OK),
        "violation": ("check", CNN, "-d", "batch=1", "--max-latency", "100µs", "--max-params", "1M"),
        "bad-model": ("check", "bad.onnx", "--max-latency", "1s"),
        "usage-unitless": ("check", CNN, "-d", "batch=1", *BAD_USAGE["unitless"][0]),
        "many-json": (*MANY, "-f", "json"),
        "junit": ("check", CNN, "-d", "batch=1", *JUNIT_LIMITS, "-o", "report.xml"),
        "sarif": ("check", CNN, "-d", "batch=1", "--max-latency", "100us", "-f", "sarif"),
        "diff-slower": ("diff", CNN, "new.onnx", "-d", "batch=1", "--fail-if-slower", "1%"),
    }
    with ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(run, *args, cwd=folder) for name, args in commands.items()}
        return {name: future.result() for name, future in futures.items()}


def invoke(folder: Path, *args: object):
    """The CLI in-process (typer's runner), in ``folder``; stdout and stderr apart."""
    from test_cli import make_runner

    from onnxroof.cli.commands import app

    here = Path.cwd()
    os.chdir(folder)
    try:
        return make_runner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200", "NO_COLOR": "1"})
    finally:
        os.chdir(here)


# --------------------------------------------------------------------------------------------- exit codes


def test_pass_exits_0_and_lists_every_limit(runs) -> None:
    done = runs["pass"]
    assert done.returncode == 0, done.stderr
    for label in ("predicted latency on xavier", "parameters", "FLOPs"):
        assert label in done.stdout
    assert done.stdout.count("PASS") >= 4 and "FAIL" not in done.stdout


def test_violation_exits_1(runs) -> None:
    done = runs["violation"]
    assert done.returncode == 1, done.stderr
    row = next(line for line in done.stdout.splitlines() if "predicted latency on xavier" in line)
    assert "100µs" in row and "FAIL" in row


def test_bad_usage_exits_2_with_one_line(runs) -> None:
    done = runs["usage-unitless"]
    assert done.returncode == 2
    assert BAD_USAGE["unitless"][1] in one_error_line(done)


@pytest.mark.parametrize("key", [k for k in BAD_USAGE if k != "unitless"])
def test_more_bad_usage_exits_2(folder: Path, key: str) -> None:
    args, says = BAD_USAGE[key]
    result = invoke(folder, "check", CNN, "-d", "batch=1", *args)
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0]


def test_bad_model_exits_2(runs) -> None:
    done = runs["bad-model"]
    assert done.returncode == 2
    assert "bad.onnx" in done.stdout and "ERROR" in done.stdout and "Traceback" not in done.stderr


def test_readme_budget_file(folder: Path) -> None:
    done = invoke(folder, "check", CNN, "-d", "batch=1", "-b", "budget.toml", "-f", "json")
    assert done.exit_code in (0, 1), done.stderr
    (model,) = json.loads(done.stdout)["models"]
    assert [r["key"] for r in model["limits"]] == [
        "max_latency",
        "max_flops",
        "max_params",
        "max_weight_bytes",
        "max_peak_activation_bytes",
        "max_memory_bound_share",
        "max_layout_share",
        "max_energy",
        "allow_unsupported",
    ]
    assert done.exit_code == (1 if any(r["verdict"] == "fail" for r in model["limits"]) else 0)
    assert "OR002" not in {f["id"] for f in model["findings"]}  # ignored by the budget


def test_a_failing_finding_exits_1_and_can_be_allowed(folder: Path) -> None:
    done = invoke(folder, "check", "mm.onnx", "-p", "tiny.toml", "-f", "github")
    assert done.exit_code == 1
    assert any(line.startswith("::error ") and "title=OR007 " in line for line in done.stdout.splitlines())
    allowed = invoke(folder, "check", "mm.onnx", "-p", "tiny.toml", "--allow-finding", "OR007")
    assert allowed.exit_code == 0, allowed.stdout


# --------------------------------------------------------------------------------------------- many models


def test_many_models_in_processes_one_bad(runs, folder: Path) -> None:
    done = runs["many-json"]
    assert done.returncode == 2, done.stderr
    rows = json.loads(done.stdout)["models"]
    assert [(r["path"], r["status"]) for r in rows] == [
        ("models/broken.onnx", "error"),
        ("models/cnn.onnx", "pass"),
        ("models/transformer.onnx", "pass"),
    ]
    assert rows[1]["limits"][0]["verdict"] == "pass" and rows[2]["totals"]["latency_s"] > 0
    assert "checking" not in done.stderr  # no progress bar when stderr is not a terminal
    table = invoke(folder, *MANY[:-2])  # in one process
    assert table.exit_code == 2
    summary = table.stdout[table.stdout.index("Summary") :]
    assert "models/broken.onnx" in summary and "ERROR" in summary and summary.count("PASS") == 2


def test_progress_bar_on_a_terminal() -> None:
    primary, secondary = pty.openpty()
    try:
        done = subprocess.run(
            [onnxroof_script(), "check", CNN, TRANSFORMER, "-d", "batch=1", "-d", "seq=16", "-f", "json"],
            stdout=subprocess.PIPE,
            stderr=secondary,
            timeout=120,
            env={**ENV, "TERM": "xterm"},
        )
        os.close(secondary)
        secondary = -1
        chunks = []
        while True:
            try:
                chunk = os.read(primary, 65536)
            except OSError:  # EIO once the terminal's writer is gone
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(primary)
        if secondary >= 0:
            os.close(secondary)
    assert done.returncode == 0
    assert b"checking" in b"".join(chunks)
    assert json.loads(done.stdout)["status"] == "pass"  # stdout stays clean


# --------------------------------------------------------------------------------------------- CI formats


def test_junit_failures_equal_violated_limits(runs, folder: Path) -> None:
    assert runs["junit"].returncode == 1
    root = ET.parse(folder / "report.xml").getroot()
    (suite,) = root.findall("testsuite")
    assert suite.get("tests") == "3" and suite.get("failures") == "2" and root.get("failures") == "2"
    failed = [case.get("name").split(":")[0] for case in suite.findall("testcase") if case.find("failure") is not None]
    assert failed == ["max_latency", "max_flops"]


def test_sarif_output_validates(runs) -> None:
    done = runs["sarif"]
    assert done.returncode == 1
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.validators.validator_for(schema)
    validator(schema).validate(json.loads(done.stdout))
    results = json.loads(done.stdout)["runs"][0]["results"]
    assert "budget/max_latency" in {r["ruleId"] for r in results}


# --------------------------------------------------------------------------------------------- regressions


def test_baseline_gate(folder: Path) -> None:
    same = invoke(folder, "check", CNN, "-d", "batch=1", "--baseline", "base.json")
    assert same.exit_code == 0 and "latency change vs baseline" in same.stdout
    # batch 4 (+18% on xavier): at batch 2 the tiny CNN's kernels are mostly their fixed cost (+4.6%)
    slower = invoke(
        folder, "check", CNN, "-d", "batch=4", "--baseline", "base.json", "--fail-if-slower", "5%", "-f", "json"
    )
    assert slower.exit_code == 1
    (row,) = [r for r in json.loads(slower.stdout)["models"][0]["limits"] if r["key"] == "max_slowdown"]
    assert row["verdict"] == "fail" and row["value"] > 0.05


def test_diff_gate(runs, folder: Path) -> None:
    slower = runs["diff-slower"]
    assert slower.returncode == 1, slower.stderr
    assert "1 added, 0 removed, 0 changed" in slower.stdout and "Relu /pw/Relu_extra" in slower.stdout
    tolerated = invoke(folder, "diff", CNN, "new.onnx", "-d", "batch=1", "--fail-if-slower", "50%", "-f", "json")
    assert tolerated.exit_code == 0
    data = json.loads(tolerated.stdout)
    assert data["gate"]["passed"] is True and 0 < data["latency"]["relative"] < 0.5
    missing = invoke(folder, "diff", CNN, "missing.onnx", "-d", "batch=1")
    assert missing.exit_code == 2 and "missing.onnx" in missing.stderr
    from_json = invoke(folder, "diff", "base.json", "new.onnx", "-d", "batch=1")  # a saved report as OLD
    assert from_json.exit_code == 0 and "1 added" in from_json.stdout
