"""The command line's conventions (issue 24): ``--version``, ``-h`` everywhere, trtexec's ``--shape`` syntax,
usage errors as one line with exit 2, a closed pipe exits 0 quietly, ``rules OP`` and ``rules --format json``,
and a note naming the platform when ``--platform`` is left to its default."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_cli import CNN, invoke

from onnxroof.cli.commands import app
from onnxroof.core.errors import DimsError
from onnxroof.core.version import __version__
from onnxroof.load.dims import parse_shape_bindings
from onnxroof.rules import REGISTRY

REGISTERED = sorted(c.name or c.callback.__name__ for c in app.registered_commands)
ENV = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120"}


def _one_error_line(result) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert result.stdout == ""
    return lines[0]


def test_version_prints_the_package_version() -> None:
    result = invoke("--version")
    assert result.exit_code == 0
    assert result.stdout == f"onnxroof {__version__}\n"


@pytest.mark.parametrize("command", REGISTERED)
def test_dash_h_is_help_on_every_command(command: str) -> None:
    short, long = invoke(command, "-h"), invoke(command, "--help")
    assert short.exit_code == 0 and long.exit_code == 0, short.output
    assert short.stdout == long.stdout and "Usage:" in short.stdout


def test_top_level_dash_h() -> None:
    assert invoke("-h").stdout == invoke("--help").stdout


# ------------------------------------------------------------------------------------------- --shape


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        (["x:1x3x32x32"], {"x": (1, 3, 32, 32)}),
        (["ids:1x128,mask:1x64"], {"ids": (1, 128), "mask": (1, 64)}),
        (["input:0:1x3"], {"input:0": (1, 3)}),  # the name is what precedes the last ':'
        (["'input:0':1x3"], {"input:0": (1, 3)}),
        (["a=2x4", "b:8"], {"a": (2, 4), "b": (8,)}),
        (["a=2,4"], {"a": (2, 4)}),  # with '=', commas still separate dims
    ],
)
def test_trtexec_shapes_are_accepted(items: list[str], expected: dict[str, tuple[int, ...]]) -> None:
    assert parse_shape_bindings(items) == expected


@pytest.mark.parametrize("item", ["x:", "x1x3", "a:1x2,", "a:1,a:2"])
def test_bad_trtexec_shapes_name_the_item(item: str) -> None:
    with pytest.raises(DimsError, match="--shape"):
        parse_shape_bindings([item])


def test_trtexec_shape_binds_as_the_equal_form(tmp_path: Path) -> None:
    colon = invoke("report", CNN, "--shape", "image:2x3x64x64", "-f", "json")
    equal = invoke("report", CNN, "--shape", "image=2x3x64x64", "-f", "json")
    assert colon.exit_code == 0, colon.output
    assert json.loads(colon.stdout)["model"]["dims"] == {"batch": 2}
    assert json.loads(colon.stdout)["totals"] == json.loads(equal.stdout)["totals"]


# -------------------------------------------------------------------------------------- usage errors


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("report", CNN, "--format", "xml"), "'xml' is not one of"),
        (("report",), "Missing argument"),
        (("report", CNN, "--no-such-option"), "No such option"),
        (("report", CNN, "--top", "0"), "--top"),
        (("no-such-command",), "No such command"),
    ],
)
def test_usage_errors_are_one_line_exit_2(args: tuple[object, ...], needle: str) -> None:
    line = _one_error_line(invoke(*args))
    assert needle in line and "-h)" in line


def test_usage_error_from_the_installed_command_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "onnxroof", "report", str(CNN), "--format", "xml"],
        capture_output=True,
        text=True,
        timeout=60,
        env=ENV,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "error: onnxroof report: Invalid value for '--format' / '-f': 'xml' is not one of 'table', 'json', 'csv', "
        "'html'. (see onnxroof report -h)"
    ]


# -------------------------------------------------------------------------------------- closed pipe


@pytest.mark.parametrize("fmt", ["table", "json", "csv"])
def test_a_closed_pipe_exits_0_quietly(fmt: str) -> None:
    """The reader closes the pipe before onnxroof writes (as `| head -1` does once it has its line): every
    write then fails with EPIPE, so this cannot pass by luck of timing."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "onnxroof", "report", str(CNN), "-d", "batch=1", "-p", "xavier", "-f", fmt],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert err == ""


def test_head_minus_1_exits_0_quietly() -> None:
    command = f"set -o pipefail; {sys.executable} -m onnxroof report {CNN} -d batch=1 -p xavier | head -1"
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60, env=ENV)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and len(done.stdout.splitlines()) == 1


# -------------------------------------------------------------------------------------------- rules


def test_rules_json_lists_every_rule_with_its_formula() -> None:
    result = invoke("rules", "--format", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) == len(REGISTRY.all_rules())
    conv = next(r for r in rows if r["op_type"] == "Conv" and r["domain"] == "")
    assert conv["kind"] == "compute" and conv["family"] == "conv" and conv["op_class"] == "conv"
    assert conv["formula"].startswith("MACs = numel(Y)") and "Bytes:" in conv["doc"]


@pytest.mark.parametrize("name", ["Conv", "conv", "CONV"])
def test_rules_op_shows_that_rule_in_full(name: str) -> None:
    result = invoke("rules", name)
    assert result.exit_code == 0, result.output
    assert "1 cost rules" in result.stdout
    assert "Bytes: read X, W and B once each" in result.stdout and "Assumptions:" in result.stdout


def test_rules_op_json_and_domain_form() -> None:
    rows = json.loads(invoke("rules", "com.microsoft::BiasGelu", "-f", "json").stdout)
    assert [(r["domain"], r["op_type"]) for r in rows] == [("com.microsoft", "BiasGelu")]


def test_rules_unknown_op_is_one_line_with_suggestions() -> None:
    line = _one_error_line(invoke("rules", "Conx"))
    assert "no cost rule for op type 'Conx'" in line and "Conv" in line


# -------------------------------------------------------------------------------- the default platform


def test_a_defaulted_platform_is_named_on_stderr() -> None:
    defaulted = invoke("report", CNN, "-d", "batch=1", "-f", "json")
    assert defaulted.exit_code == 0
    assert defaulted.stderr.splitlines() == [
        "note: platform xavier (the default; choose one with --platform, list them with `onnxroof platforms`)"
    ]
    assert json.loads(defaulted.stdout)["platform"]["name"] == "xavier"
    chosen = invoke("report", CNN, "-d", "batch=1", "-f", "json", "-p", "xavier")
    assert chosen.exit_code == 0 and "note:" not in chosen.stderr


def test_no_note_on_an_error() -> None:
    _one_error_line(invoke("report", CNN))  # unbound dim: the error alone


def test_the_note_on_repeatable_platform_options_and_not_on_a_diff_of_documents(tmp_path: Path) -> None:
    plotted = invoke("plot", CNN, "-d", "batch=1", "-o", tmp_path / "r.png")
    assert plotted.exit_code == 0, plotted.output
    assert plotted.stderr.startswith("note: platform xavier (the default")
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    for path, batch in ((old, 1), (new, 2)):
        assert invoke("report", CNN, "-d", f"batch={batch}", "-p", "xeon-8380", "-o", path).exit_code == 0
    compared = invoke("diff", old, new)  # both sides carry their platform: --platform's default is not used
    assert compared.exit_code == 0, compared.output
    assert "note:" not in compared.stderr and "on xeon-8380" in compared.stdout
