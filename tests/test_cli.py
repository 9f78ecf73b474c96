"""The command line: bad input through the API and the CLI, output formats, listings, help and the entry point.

Every bad input must give, through the API, an :class:`OnnxroofError` subclass whose one-line message names
the file / node / field at fault, and through the CLI exit code 2 with exactly one ``error:`` line on stderr,
no traceback, and no output file (nor temporary file) left behind.
"""

from __future__ import annotations

import builtins
import csv
import inspect
import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from typer.testing import CliRunner

from onnxroof.analysis.analyze import analyze
from onnxroof.analysis.whatif import WhatIf
from onnxroof.cli import COMMAND_MODULES, modules_for
from onnxroof.cli.commands import app
from onnxroof.core.errors import DimsError, ModelError, OnnxroofError, PlatformError, StrictError
from onnxroof.core.units import seconds, si
from onnxroof.core.version import __version__
from onnxroof.platform.lookup import bundled_platform_names

SAMPLES = Path(__file__).resolve().parents[1] / "samples"
CNN = SAMPLES / "tiny_cnn.onnx"
TRANSFORMER = SAMPLES / "tiny_transformer.onnx"
LSTM = SAMPLES / "tiny_lstm.onnx"
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"

TOTALS_KEYS = {
    "flops",
    "macs",
    "params",
    "weight_bytes",
    "bytes_read",
    "bytes_written",
    "latency_s",
    "memory_bound_share",
    "peak_activation_bytes",
}
NODE_KEYS = {
    "id",
    "name",
    "op_type",
    "domain",
    "dtype",
    "flops",
    "macs",
    "bytes_read",
    "bytes_written",
    "params",
    "intensity",
    "bound",
    "latency_s",
}
TOP_KEYS = {"schema", "model", "platform", "totals", "nodes", "op_types", "unsupported", "warnings"}
ENV = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}


def make_runner() -> CliRunner:
    """A runner that keeps stderr apart from stdout (older click-based runners need ``mix_stderr=False``)."""
    if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    return CliRunner()


def invoke(*args: object):
    return make_runner().invoke(app, [str(a) for a in args], env=ENV)


# ------------------------------------------------------------------------------------------ model builders


def _relu_graph_model(nodes, inputs, outputs, opset: int = 17, value_info=(), extra_opsets=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, value_info=list(value_info))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), *extra_opsets])


def _vi(name: str, shape=(1, 8), elem=TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, list(shape))


def custom_op_model() -> onnx.ModelProto:
    """Relu -> com.example.Foo -> Relu; Foo's output shape is given through value_info."""
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="first"),
        helper.make_node("Foo", ["a"], ["b"], name="foo_node", domain="com.example"),
        helper.make_node("Relu", ["b"], ["y"], name="last"),
    ]
    return _relu_graph_model(
        nodes, [_vi("x")], [_vi("y")], value_info=[_vi("b")], extra_opsets=[helper.make_opsetid("com.example", 1)]
    )


def external_model(location: str) -> onnx.ModelProto:
    weight = TensorProto()
    weight.name = "W"
    weight.data_type = TensorProto.FLOAT
    weight.dims.extend([8, 8])
    weight.data_location = TensorProto.EXTERNAL
    entry = weight.external_data.add()
    entry.key = "location"
    entry.value = location
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")], "g", [_vi("x")], [_vi("y")], [weight]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


PLATFORM_WITH_UNKNOWN_KEY = """
schema = 1
name = "tmp-chip"
title = "A test chip"
kind = "gpu"
fusion_profile = "none"
bogus_key = 3

[peak_tflops]
fp32 = { value = 1.0, source = "test" }

[memory]
dram_bandwidth_gbps = { value = 100.0, source = "test" }

[runtime]
launch_overhead_us = { value = 5.0, source = "test" }
"""


# ---------------------------------------------------------------------------------------- bad-input cases


@dataclass
class Bad:
    """One bad input: how to build it, how to pass it, and what the message must name."""

    build: Callable[[Path], Path]  # writes what it needs into the folder; returns the model path
    error: type[OnnxroofError]
    names: tuple[str, ...]  # substrings the message must contain
    cli: tuple[str, ...] = ()  # extra CLI options
    api: dict = field(default_factory=dict)  # extra analyze() keywords


def _save(model: onnx.ModelProto, name: str) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        path = folder / name
        onnx.save(model, path)
        return path

    return build


def _missing(folder: Path) -> Path:
    return folder / "missing.onnx"


def _folder(folder: Path) -> Path:
    (folder / "afolder.onnx").mkdir()
    return folder / "afolder.onnx"


def _text(folder: Path) -> Path:
    (folder / "notes.onnx").write_text("this is a text file,\nnot an ONNX model\n")
    return folder / "notes.onnx"


def _empty(folder: Path) -> Path:
    (folder / "empty.onnx").write_bytes(b"")
    return folder / "empty.onnx"


def _truncated(folder: Path) -> Path:
    data = (LIGHT / "light_resnet50.onnx").read_bytes()
    (folder / "truncated.onnx").write_bytes(data[: len(data) // 2])
    return folder / "truncated.onnx"


def _copy(source: Path) -> Callable[[Path], Path]:
    def build(folder: Path) -> Path:
        return Path(shutil.copy(source, folder / source.name))

    return build


def _no_opset() -> onnx.ModelProto:
    model = _relu_graph_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x")], [_vi("y")])
    del model.opset_import[:]
    return model


def _with_platform_file(folder: Path) -> Path:
    (folder / "badchip.toml").write_text(PLATFORM_WITH_UNKNOWN_KEY)
    return _copy(CNN)(folder)


UNPRODUCED = _relu_graph_model(
    [helper.make_node("Relu", ["x"], ["a"], name="ok_node"), helper.make_node("Relu", ["ghost"], ["y"], name="orphan")],
    [_vi("x")],
    [_vi("y")],
)
CAST_WITHOUT_TO = _relu_graph_model([helper.make_node("Cast", ["x"], ["y"], name="my_cast")], [_vi("x")], [_vi("y")])
OPSET_6 = _relu_graph_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x")], [_vi("y")], opset=6)

BAD_CASES: dict[str, Bad] = {
    "missing-file": Bad(_missing, ModelError, ("missing.onnx", "no such file")),
    "folder": Bad(_folder, ModelError, ("afolder.onnx", "folder")),
    "text-file": Bad(_text, ModelError, ("notes.onnx",)),
    "empty-file": Bad(_empty, ModelError, ("empty.onnx",)),
    "truncated": Bad(_truncated, ModelError, ("truncated.onnx",)),
    "no-default-opset": Bad(_save(_no_opset(), "noopset.onnx"), ModelError, ("noopset.onnx", "opset")),
    "opset-6": Bad(_save(OPSET_6, "old.onnx"), ModelError, ("old.onnx", "opset 6")),
    "unproduced-input": Bad(_save(UNPRODUCED, "orphan.onnx"), ModelError, ("orphan.onnx", "ghost", "orphan")),
    "missing-attribute": Bad(_save(CAST_WITHOUT_TO, "cast.onnx"), ModelError, ("cast.onnx", "my_cast", "'to'")),
    "dim-abc": Bad(_copy(CNN), DimsError, ("batch", "abc"), ("--dim", "batch=abc"), {"dims": {"batch": "abc"}}),
    "dim-x": Bad(_copy(CNN), DimsError, ("batch", "x"), ("--dim", "batch=x"), {"dims": {"batch": "x"}}),
    "dim-negative": Bad(_copy(CNN), DimsError, ("batch", "-1"), ("--dim", "batch=-1"), {"dims": {"batch": -1}}),
    "dim-float": Bad(_copy(CNN), DimsError, ("batch", "1.5"), ("--dim", "batch=1.5"), {"dims": {"batch": 1.5}}),
    "unbound-symbols": Bad(_copy(TRANSFORMER), DimsError, ("batch", "seq", "--dim batch=", "--dim seq=")),
    "external-parent": Bad(
        _save(external_model("../outside.bin"), "parent.onnx"),
        ModelError,
        ("parent.onnx", "'W'", "../outside.bin", "outside"),
    ),
    "unknown-platform": Bad(
        _copy(CNN),
        PlatformError,
        ("no-such-chip",),
        ("--dim", "batch=1", "--platform", "no-such-chip"),
        {"dims": {"batch": 1}, "platform": "no-such-chip"},
    ),
    "platform-file-missing": Bad(
        _copy(CNN),
        PlatformError,
        ("nochip.toml",),
        ("--dim", "batch=1", "--platform", "nochip.toml"),
        {"dims": {"batch": 1}, "platform": "nochip.toml"},
    ),
    "precision-int4": Bad(
        _copy(CNN),
        PlatformError,
        ("xavier", "int4"),
        ("--dim", "batch=1", "--precision", "int4"),
        {"dims": {"batch": 1}, "whatif": WhatIf(precision="int4")},
    ),
    "strict-unsupported": Bad(
        _save(custom_op_model(), "custom.onnx"), StrictError, ("Foo", "--strict"), ("--strict",), {"strict": True}
    ),
}


def _platform_case_options(folder: Path) -> tuple[tuple[str, ...], dict]:
    toml = folder / "badchip.toml"
    return ("--dim", "batch=1", "--platform", str(toml)), {"dims": {"batch": 1}, "platform": str(toml)}


def _assert_one_error_line(result, names: tuple[str, ...]) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error:"), lines[0]
    for name in names:
        assert name in lines[0], (name, lines[0])
    return lines[0]


def _check_bad(
    tmp_path: Path,
    build: Callable[[Path], Path],
    error: type[OnnxroofError],
    names: tuple[str, ...],
    cli: tuple[str, ...],
    api: dict,
) -> None:
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    out.mkdir()
    model = build(folder)

    with pytest.raises(OnnxroofError) as excinfo:
        analyze(model, **api)
    assert type(excinfo.value) is error, type(excinfo.value)
    message = str(excinfo.value)
    assert "\n" not in message
    for name in names:
        assert name in message, (name, message)

    for extra in ((), ("-o", out / "out.json"), ("-o", out / "out.csv"), ("--format", "json")):
        result = invoke("report", model, *cli, *extra)
        _assert_one_error_line(result, names)
        assert list(out.iterdir()) == [], "an output or temporary file was left behind"


@pytest.mark.parametrize("case", BAD_CASES.values(), ids=BAD_CASES.keys())
def test_bad_input_api_and_cli(tmp_path: Path, case: Bad) -> None:
    _check_bad(tmp_path, case.build, case.error, case.names, case.cli, case.api)


def test_bad_platform_file_api_and_cli(tmp_path: Path) -> None:
    cli, api = _platform_case_options(tmp_path / "in")
    _check_bad(tmp_path, _with_platform_file, PlatformError, ("badchip.toml", "bogus_key"), cli, api)


def test_external_data_at_an_absolute_path_is_refused(tmp_path: Path) -> None:
    sentinel = tmp_path / "secret.bin"
    sentinel.write_bytes(b"\0" * 256)
    _check_bad(
        tmp_path,
        _save(external_model(str(sentinel)), "absolute.onnx"),
        ModelError,
        ("absolute.onnx", "'W'", str(sentinel), "outside"),
        (),
        {},
    )


@pytest.mark.parametrize("location", ["../outside.bin", "ABSOLUTE"])
def test_external_data_outside_the_folder_is_never_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, location: str
) -> None:
    folder = tmp_path / "model"
    folder.mkdir()
    sentinel = tmp_path / "outside.bin"  # ../outside.bin seen from the model's folder
    sentinel.write_bytes(b"\0" * 256)
    if location == "ABSOLUTE":
        location = str(sentinel)
    path = folder / "m.onnx"
    onnx.save(external_model(location), path)

    forbidden = str(sentinel.resolve())
    real_open, real_io_open, real_os_open = builtins.open, io.open, os.open

    def guard(opener):
        def guarded(file, *args, **kwargs):
            if isinstance(file, str | bytes | os.PathLike) and str(Path(os.fsdecode(file)).resolve()) == forbidden:
                raise AssertionError(f"onnxroof opened {file!r}, outside the model's folder")
            return opener(file, *args, **kwargs)

        return guarded

    monkeypatch.setattr(builtins, "open", guard(real_open))
    monkeypatch.setattr(io, "open", guard(real_io_open))
    monkeypatch.setattr(os, "open", guard(real_os_open))

    with pytest.raises(ModelError, match="outside"):
        analyze(path)
    result = invoke("report", path)
    _assert_one_error_line(result, ("m.onnx", "'W'", "outside"))


def test_unnamed_dim_bound_on_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "dyn.onnx"
    onnx.save(
        _relu_graph_model(
            [helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x", [None, 8])], [_vi("y", [None, 8])]
        ),
        path,
    )
    _assert_one_error_line(invoke("report", path), ("x:0", "--dim x:0="))
    result = invoke("report", path, "--dim", "x:0=3", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["model"]["dims"] == {"x:0": 3}
    assert data["nodes"][0]["output_shapes"] == [[3, 8]]


def test_debug_reraises_with_a_traceback(tmp_path: Path) -> None:
    missing = tmp_path / "missing.onnx"
    result = invoke("report", missing, "--debug")
    assert isinstance(result.exception, ModelError)
    done = subprocess.run(
        [sys.executable, "-m", "onnxroof", "report", str(missing), "--debug"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode not in (0, 2, 3)
    assert "Traceback" in done.stderr
    assert "ModelError" in done.stderr and "missing.onnx" in done.stderr


def test_internal_error_exits_3_with_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import onnxroof.analysis.analyze

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(onnxroof.analysis.analyze, "analyze", broken)
    result = invoke("report", CNN, "--dim", "batch=1")
    assert result.exit_code == 3
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "boom" in lines[0]


def test_dim_beyond_int64_exits_2() -> None:
    result = invoke("report", CNN, "--dim", f"batch={2**64}")
    _assert_one_error_line(result, ("batch",))


def test_output_onto_an_existing_folder_exits_2(tmp_path: Path) -> None:
    target = tmp_path / "taken"
    target.mkdir()
    result = invoke("report", CNN, "--dim", "batch=1", "-o", target)
    _assert_one_error_line(result, ("taken",))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]  # no temporary file left


# ----------------------------------------------------------------------------------------- unsupported op


def test_unsupported_op_is_reported_without_strict(tmp_path: Path) -> None:
    path = tmp_path / "custom.onnx"
    onnx.save(custom_op_model(), path)

    table = invoke("report", path)
    assert table.exit_code == 0, table.output
    assert "Foo" in table.stdout
    assert "Unsupported ops: none" not in table.stdout

    result = invoke("report", path, "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["unsupported"] == {"com.example::Foo": {"count": 1, "nodes": ["1:foo_node"]}}
    (node,) = [n for n in data["nodes"] if n["op_type"] == "Foo"]
    assert node["state"] == "unsupported" and node["domain"] == "com.example"

    rows = list(csv.DictReader(io.StringIO(invoke("report", path, "--format", "csv").stdout)))
    (row,) = [r for r in rows if r["op_type"] == "Foo"]
    assert row["state"] == "unsupported" and row["domain"] == "com.example"


def test_table_shows_node_names_with_brackets_verbatim(tmp_path: Path) -> None:
    path = tmp_path / "brackets.onnx"
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="attn[i]"),
        helper.make_node("Relu", ["a"], ["y"], name="[/bad]"),
    ]
    onnx.save(_relu_graph_model(nodes, [_vi("x")], [_vi("y")]), path)
    result = invoke("report", path)
    assert result.exit_code == 0, result.output
    assert "0:attn[i]" in result.stdout
    assert "1:[/bad]" in result.stdout


# --------------------------------------------------------------------------------------------- report


def test_report_table() -> None:
    result = invoke("report", CNN, "--dim", "batch=1")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "Unsupported ops: none" in out
    for label in ("Predicted latency", "FLOPs", "MACs", "Params", "Bytes moved", "Peak activations"):
        assert label in out, label
    totals = analyze(CNN, dims={"batch": 1}).totals
    for figure in (si(totals.flops), si(totals.macs), si(totals.params), seconds(totals.latency_s)):
        assert figure in out, figure
    assert "xavier" in out  # the default platform
    assert "(Conv+BN+Relu counts as Conv)" in " ".join(out.split())  # how the op-type time is attributed
    assert "Traceback" not in result.output


def test_report_json_schema() -> None:
    result = invoke("report", CNN, "--dim", "batch=1", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema"] == 1
    assert set(data) >= TOP_KEYS
    assert set(data["totals"]) >= TOTALS_KEYS
    assert data["nodes"]
    for node in data["nodes"]:
        assert set(node) >= NODE_KEYS, NODE_KEYS - set(node)
    assert data["unsupported"] == {}
    assert data["platform"]["name"] == "xavier"
    assert data["model"]["dims"] == {"batch": 1}
    assert len(data["nodes"]) == data["model"]["nodes"] == data["totals"]["nodes"]


def test_report_json_stdout_is_only_json_when_warnings_are_emitted() -> None:
    result = invoke("report", CNN, "--dim", "batch=1", "--dim", "foo=3", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)  # nothing but the document on stdout
    assert result.stdout.lstrip().startswith("{")
    assert any("foo" in w for w in data["warnings"])
    assert "foo" in result.stderr  # the warning went to stderr


def test_report_csv_has_a_header_and_one_row_per_node() -> None:
    result = invoke("report", CNN, "--dim", "batch=1", "--format", "csv")
    assert result.exit_code == 0, result.output
    reader = csv.DictReader(io.StringIO(result.stdout))
    rows = list(reader)
    assert set(reader.fieldnames or ()) >= NODE_KEYS
    assert len(rows) == len(analyze(CNN, dims={"batch": 1}).nodes) == 30
    assert len({r["id"] for r in rows}) == len(rows)


@pytest.mark.parametrize(("suffix", "kind"), [(".json", "json"), (".csv", "csv"), (".txt", "table")])
def test_output_file_format_from_suffix(tmp_path: Path, suffix: str, kind: str) -> None:
    target = tmp_path / f"out{suffix}"
    result = invoke("report", CNN, "--dim", "batch=1", "-o", target)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == [target.name]  # no temporary file left
    text = target.read_text(encoding="utf-8")
    if kind == "json":
        assert json.loads(text)["schema"] == 1
    elif kind == "csv":
        header = next(csv.reader(io.StringIO(text)))
        assert set(header) >= NODE_KEYS
        assert len(text.strip().splitlines()) == 31
    else:
        assert "Unsupported ops: none" in text


def test_explicit_format_wins_over_the_suffix(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    result = invoke("report", CNN, "--dim", "batch=1", "--format", "json", "-o", target)
    assert result.exit_code == 0, result.output
    assert json.loads(target.read_text())["schema"] == 1


def test_output_into_a_missing_folder_fails_cleanly(tmp_path: Path) -> None:
    result = invoke("report", CNN, "--dim", "batch=1", "-o", tmp_path / "nowhere" / "out.json")
    _assert_one_error_line(result, ("nowhere",))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("path", "dims"),
    [
        (CNN, {"batch": 1}),
        (TRANSFORMER, {"batch": 2, "seq": 16}),
        (LSTM, {"batch": 3, "seq": 5}),
    ],
)
def test_api_and_cli_totals_agree(path: Path, dims: dict[str, int]) -> None:
    options = [item for name, value in dims.items() for item in ("--dim", f"{name}={value}")]
    result = invoke("report", path, *options, "--format", "json")
    assert result.exit_code == 0, result.output
    cli_totals = json.loads(result.stdout)["totals"]
    totals = analyze(path, dims=dims).totals
    for key in TOTALS_KEYS:
        assert cli_totals[key] == pytest.approx(getattr(totals, key), rel=1e-12, abs=0), key


# ------------------------------------------------------------------------------------ platforms and rules


def test_platforms_table_lists_every_platform_with_ridges() -> None:
    result = invoke("platforms")
    assert result.exit_code == 0, result.output
    names = bundled_platform_names()
    assert len(names) >= 15
    for name in names:
        assert name in result.stdout, name
    lines = result.stdout.splitlines()
    second = next(i for i, line in enumerate(lines) if line.split()[:1] == ["name"])
    # two-line headers: "ridge" over "fp32" and "fp16"
    assert lines[second - 1].split().count("ridge") == 2
    assert {"fp32", "fp16"} <= set(lines[second].split())


def test_platforms_json() -> None:
    result = invoke("platforms", "--format", "json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert len(rows) >= 15
    assert "xavier" in {r["name"] for r in rows}
    for row in rows:
        assert row["ridge"], row["name"]
        for precision, ridge in row["ridge"].items():
            roofs = row["sustained"]["roofs"] if "sustained" in row else row  # the ridge of the roofs used
            assert ridge == pytest.approx(roofs["peak_flops"][precision] / roofs["dram_bandwidth"]), row["name"]


def test_rules_lists_rules() -> None:
    result = invoke("rules")
    assert result.exit_code == 0, result.output
    for op_type in ("Conv", "MatMul", "Gemm", "Relu", "Softmax", "LSTM"):
        assert op_type in result.stdout, op_type
    assert "cost rules" in result.stdout


def test_rules_show_formulas_verbatim() -> None:
    result = invoke("rules")
    assert result.exit_code == 0, result.output
    assert "shape[axis]" in result.stdout


def test_platforms_csv_is_csv_or_refused() -> None:
    result = invoke("platforms", "--format", "csv")
    if result.exit_code == 2:
        return
    assert result.exit_code == 0, result.output
    header = next(csv.reader(io.StringIO(result.stdout)))
    assert "name" in header


# -------------------------------------------------------------------------------------------- help


def test_app_help_lists_every_command() -> None:
    result = invoke("--help")
    assert result.exit_code == 0
    for command in ("report", "platforms", "rules"):
        assert command in result.stdout


REGISTERED = {c.name or c.callback.__name__: c for c in app.registered_commands}


def test_the_core_commands_are_registered() -> None:
    assert {
        "report",
        "platforms",
        "rules",
        "check",
        "diff",
        "plot",
        "graph",
        "calibrate",
        "profile",
        "sweep",
        "compare",
    } <= set(REGISTERED)


@pytest.mark.parametrize("command", sorted(REGISTERED))
def test_every_command_is_documented(command: str) -> None:
    assert (REGISTERED[command].callback.__doc__ or "").strip(), f"{command} has no docstring"
    result = invoke(command, "--help")
    assert result.exit_code == 0, result.output
    first_line = REGISTERED[command].callback.__doc__.strip().splitlines()[0]
    assert " ".join(first_line.split()[:4]) in " ".join(result.stdout.split())
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert f"onnxroof {command}" in readme, f"`onnxroof {command}` is not in the README"


def test_each_command_is_loaded_from_the_module_the_table_names() -> None:
    """``onnxroof.cli.main`` imports only the module COMMAND_MODULES names for the command asked for: the table
    lists every registered command, with the module that registers it, in the order --help lists them."""
    assert list(REGISTERED) == list(COMMAND_MODULES)
    for name, command in REGISTERED.items():
        assert command.callback.__module__ == f"onnxroof.cli.{COMMAND_MODULES[name]}", name


@pytest.mark.parametrize("command", sorted(REGISTERED))
def test_command_annotations_are_objects_not_strings(command: str) -> None:
    """Command modules do without ``from __future__ import annotations``: typer evaluates a string annotation
    each of the three times it reads a command's signature, an object never (cli/__init__.py)."""
    parameters = inspect.signature(REGISTERED[command].callback).parameters.values()
    assert parameters, command
    assert [p.name for p in parameters if isinstance(p.annotation, str)] == [], command


@pytest.mark.parametrize(
    ("args", "modules"),
    [
        (["report", "m.onnx", "-p", "a100"], ("report",)),
        (["llm", "m.onnx"], ("llm",)),
        (["platforms"], ("listings",)),
        (["-V"], ()),
        (["--version", "report"], ()),
        (["report", "--version"], ("report",)),
        (["compare", "m.onnx"], ("whatif",)),
        (["-h"], ("gate", "graphs", "measure", "report", "listings", "whatif", "audit", "llm")),
        ([], ("gate", "graphs", "measure", "report", "listings", "whatif", "audit", "llm")),
        (["repor", "m.onnx"], ("gate", "graphs", "measure", "report", "listings", "whatif", "audit", "llm")),
        (["m.onnx", "report"], ("gate", "graphs", "measure", "report", "listings", "whatif", "audit", "llm")),
    ],
)
def test_modules_for_a_command_line(args: list[str], modules: tuple[str, ...]) -> None:
    assert modules_for(args) == modules


def _run_and_list(args: list[str], listing: str) -> subprocess.CompletedProcess:
    """A real process running the CLI with ``args`` (exit 0 asserted inside), then printing the Python expression
    ``listing`` (over ``sys.modules``) on stderr's last line."""
    code = (
        "import sys\n"
        "from onnxroof.cli import main\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
        f"print({listing}, file=sys.stderr)\n"
    )
    return _run([sys.executable, "-c", code])


def test_a_command_run_imports_only_its_module() -> None:
    """A real process running `platforms` imports the listing commands' module and no other command module (nor
    the libraries only they use); the run's output is the one the app with every command gives."""
    listing = "sorted(m for m in sys.modules if m.startswith('onnxroof.cli.') or m.startswith('onnxroof.studies'))"
    done = _run_and_list(["platforms", "--format", "json"], listing)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "['onnxroof.cli.common', 'onnxroof.cli.listings']"
    assert json.loads(done.stdout) == json.loads(invoke("platforms", "--format", "json").stdout)


@pytest.mark.parametrize(
    "args",
    [
        ["report", str(CNN), "-p", "a100", "--dim", "batch=1", "--format", "json"],
        ["compare", str(CNN), "-p", "a100", "-p", "h100", "--dim", "batch=1", "--format", "json"],
        ["sweep", str(CNN), "-p", "a100", "--dim", "batch=1,2", "--format", "json"],
    ],
    ids=["report", "compare", "sweep"],
)
def test_json_without_warnings_loads_no_terminal_or_page_machinery(args: list[str]) -> None:
    """A JSON run with nothing to warn about imports neither rich (tables, warnings) nor the HTML page's and the
    chart's machinery (jinja2, markupsafe, matplotlib): each is imported where it is used."""
    heavy = ("rich", "jinja2", "markupsafe", "matplotlib")
    done = _run_and_list(args, f"sorted(m for m in {heavy!r} if m in sys.modules)")
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"
    assert json.loads(done.stdout)


def test_report_of_a_model_without_bodies_or_unruled_ops_imports_neither_control_flow_nor_function_costing() -> None:
    """`report` of the CNN (no If/Loop/Scan, every op ruled) imports neither the costing of bodies nor that of ONNX
    function bodies (each imported by the branch of cost_node that needs it), nor networkx (the DAG is built only
    when asked for) nor ONNX's reference evaluator (small-constant folding only), nor the contrib shape functions
    (the shape fallback only), nor the one-cost placement of calibration and profiling (roofline.classify: the
    analysis reads precisions from roofline.precision)."""
    lazy = (
        "onnxroof.costing.control_flow",
        "onnxroof.costing.function",
        "onnxroof.load.contrib_shapes",
        "onnxroof.roofline.classify",
        "networkx",
        "onnx.reference",
    )
    args = ["report", str(CNN), "-p", "a100", "--dim", "batch=1", "--format", "json"]
    done = _run_and_list(args, f"sorted(m for m in {lazy!r} if m in sys.modules)")
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]"
    assert json.loads(done.stdout)["nodes"]


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_the_version_flag_imports_no_command(flag: str) -> None:
    """`onnxroof -V` prints the version and exits 0 from a process that imported no command module (nor the
    libraries behind them: no onnx); the app with every command prints the same line."""
    code = (
        "import sys\n"
        "from onnxroof.cli import main\n"
        "try:\n"
        f"    main([{flag!r}])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
        "print(sorted(m for m in sys.modules if m.startswith('onnxroof.cli.') or m == 'onnx'), file=sys.stderr)\n"
    )
    done = _run([sys.executable, "-c", code])
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "['onnxroof.cli.common']"
    assert done.stdout == f"onnxroof {__version__}\n" == invoke(flag).stdout


@pytest.mark.parametrize(
    ("args", "given", "seen"),
    [
        (["platforms", "--format", "json"], None, "1 False"),  # an analysis command: one BLAS thread, no collector
        (["platforms", "--format", "json"], "3", "3 False"),  # the user's setting stands
        (["calibrate", "--help"], None, "None True"),  # a measuring command: BLAS and the collector as they are
        (["audit", "--help"], None, "1 True"),  # audit's process hosts Dask's scheduler: the collector stays on
    ],
)
def test_blas_threads_and_collector_for_analysis_commands(args: list[str], given: str | None, seen: str) -> None:
    """``main`` sets OPENBLAS_NUM_THREADS=1 before numpy is imported, unless the environment sets it or the
    command measures; numpy is not imported by ``import onnxroof.cli`` (else the setting would come too late).
    The cycle collector is off during the command except for measuring commands and audit."""
    code = (
        "import gc, os, sys\n"
        "from onnxroof.cli import main\n"
        "assert 'numpy' not in sys.modules\n"
        "try:\n"
        f"    main({args!r})\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
        "print(os.environ.get('OPENBLAS_NUM_THREADS'), gc.isenabled(), file=sys.stderr)\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1] == seen


def test_no_arguments_shows_help() -> None:
    result = invoke()
    assert "report" in result.output
    assert "Traceback" not in result.output


def test_usage_error_exits_2() -> None:
    result = invoke("report", CNN, "--format", "xml")
    assert result.exit_code == 2
    assert "Traceback" not in result.output


# ------------------------------------------------------------------------------ the installed entry point


def _run(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        command, capture_output=True, text=True, timeout=60, env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    )


@pytest.mark.parametrize("launcher", ["script", "module"])
def test_installed_entry_point(tmp_path: Path, launcher: str) -> None:
    if launcher == "script":
        script = shutil.which("onnxroof") or str(Path(sys.executable).parent / "onnxroof")
        assert Path(script).exists(), "the `onnxroof` console script is not installed"
        base = [script]
    else:
        base = [sys.executable, "-m", "onnxroof"]

    good = _run([*base, "report", str(CNN), "--dim", "batch=1", "--format", "json"])
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["schema"] == 1
    assert "Traceback" not in good.stderr

    missing = tmp_path / "missing.onnx"
    bad = _run([*base, "report", str(missing), "-o", str(tmp_path / "out.json")])
    assert bad.returncode == 2
    assert "Traceback" not in bad.stderr
    assert bad.stdout == ""
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and "missing.onnx" in lines[0]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "status", "quick"),
    [
        (["report", str(TRANSFORMER), "--dim", "batch=1", "--dim", "seq=16", "--format", "json"], 0, True),
        (["report", "missing.onnx", "--format", "json"], 2, True),
        (["platforms", "--format", "json"], 0, True),
        (["check", "--help"], 0, False),
        (["audit", "--help"], 0, False),
        (["--help"], 0, False),
    ],
    ids=["report", "bad-input", "listing", "check", "audit", "help"],
)
def test_the_entry_point_ends_a_quick_exit_command_without_the_teardown(
    args: list[str], status: int, quick: bool
) -> None:
    """``run`` (the ``onnxroof`` script, ``python -m onnxroof``) ends a command of the QUICK_EXIT modules with
    ``os._exit`` once standard output and error are flushed: an ``atexit`` handler, part of the teardown, never
    runs, while the output is whole (a JSON document larger than a pipe's buffer) and the status and error line
    are kept; the other commands (process pools, Dask, measuring sessions; help lists them all) exit the usual
    way, the handler run."""
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('TEARDOWN', file=sys.stderr))\n"
        f"sys.argv = ['onnxroof', *{args!r}]\n"
        "from onnxroof.cli import run\n"
        "run()\n"
    )
    done = _run([sys.executable, "-c", code])
    assert done.returncode == status, done.stderr
    assert ("TEARDOWN" in done.stderr) is not quick, done.stderr
    assert "Traceback" not in done.stderr
    if args[0] == "report" and status == 0:
        assert len(done.stdout) > 65536 and json.loads(done.stdout)["schema"] == 1
    if status == 2:
        assert done.stdout == "" and done.stderr.splitlines()[0].startswith("error:")


def test_output_to_a_device_writes_through_it_and_never_replaces_it(tmp_path) -> None:
    """-o /dev/null must not rename a temporary file over the device (as root that would replace it)."""
    import stat as stat_module

    from onnxroof.cli.common import write_atomically

    before = os.stat("/dev/null")
    write_atomically(Path("/dev/null"), "{}")
    after = os.stat("/dev/null")
    assert stat_module.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


def test_output_file_gets_umask_permissions(tmp_path) -> None:
    from onnxroof.cli.common import write_atomically

    target = tmp_path / "out.json"
    write_atomically(target, "{}")
    umask = os.umask(0)
    os.umask(umask)
    assert (target.stat().st_mode & 0o777) == (0o666 & ~umask)


def test_text_written_in_pieces_leaves_nothing_when_a_piece_fails(tmp_path) -> None:
    from onnxroof.cli.common import write_atomically

    def pieces(fail: bool):
        yield "{"
        if fail:
            raise ValueError("Out of range float values are not JSON compliant")
        yield "}"

    target = tmp_path / "out.json"
    write_atomically(target, pieces(False))
    assert target.read_text() == "{}"
    with pytest.raises(ValueError):
        write_atomically(target, pieces(True))
    assert target.read_text() == "{}"  # the old file untouched, no temporary left beside it
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_the_json_written_in_pieces_is_the_json_rendered_whole(tmp_path) -> None:
    from onnxroof.analysis.analyze import analyze
    from onnxroof.report.data import json_chunks, render_json

    analysis = analyze(CNN, "xavier", {"batch": 1})
    assert len(analysis.nodes) > 1 and len(analysis.kernels) > 1
    assert "".join(json_chunks(analysis)) == render_json(analysis)
    written = tmp_path / "a.json"
    result = make_runner().invoke(app, ["report", str(CNN), "-p", "xavier", "--dim", "batch=1", "-o", str(written)])
    assert result.exit_code == 0, result.output
    assert written.read_text() == render_json(analysis)


def test_the_json_document_is_one_node_per_line_and_parses_to_the_library_dict() -> None:
    from onnxroof.analysis.analyze import analyze
    from onnxroof.analysis.document import to_dict
    from onnxroof.report.data import render_json

    analysis = analyze(CNN, "xavier", {"batch": 1})
    text = render_json(analysis)
    assert json.loads(text) == json.loads(json.dumps(to_dict(analysis)))
    items = [json.loads(line.rstrip(",")) for line in text.splitlines() if line.startswith('    {"id": ')]
    assert [item["id"] for item in items if "state" in item] == [node.id for node in analysis.nodes]
    assert [item["id"] for item in items if "pattern" in item] == [kernel.id for kernel in analysis.kernels]
