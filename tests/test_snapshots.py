"""Golden snapshots: every output format, byte for byte, on real models.

The redesign of the package (issue 13) must not change a single byte of what users see. These tests pin the
JSON and CSV reports of the three samples and the nine light models of the onnx wheel on two platforms (a GPU
and a CPU) under two fusion profiles (``tensorrt`` and ``ort-cpu``), and, on the samples, the console table,
the HTML report, and ``check``'s JSON, SARIF and JUnit.

Paths differ between machines (the light models live in the virtual environment), so the model folder is
written as ``<models>`` before comparing. To accept a deliberate change of output, regenerate with::

    ONNXROOF_UPDATE_SNAPSHOTS=1 pytest tests/test_snapshots.py

and review the diff of ``tests/snapshots/`` like any other change.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import onnx
import pytest
from typer.testing import CliRunner

from onnxroof.cli.commands import app

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOTS = Path(__file__).parent / "snapshots"
LIGHT_DIR = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"
UPDATE = os.environ.get("ONNXROOF_UPDATE_SNAPSHOTS") == "1"

SAMPLES = {"tiny_cnn": ("batch=1",), "tiny_lstm": ("batch=1", "seq=16"), "tiny_transformer": ("batch=1", "seq=32")}
LIGHT = (
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
)
PLATFORMS = ("xavier", "xeon-8380")
FUSIONS = ("tensorrt", "ort-cpu")


def _model(name: str) -> tuple[Path, tuple[str, ...]]:
    if name in SAMPLES:
        return ROOT / "samples" / f"{name}.onnx", SAMPLES[name]
    path = LIGHT_DIR / f"light_{name}.onnx"
    if not path.exists():
        pytest.skip(f"{path} is not shipped with this onnx wheel")
    return path, ()


def _run(args: list[str], out: Path) -> str:
    result = CliRunner().invoke(app, [*args, "-o", str(out)])
    assert result.exit_code in (0, 1), result.output
    return out.read_text(encoding="utf-8")


def _normalized(text: str, path: Path) -> str:
    return text.replace(str(path.parent), "<models>")


def _compare(text: str, golden_name: str) -> None:
    golden = SNAPSHOTS / f"{golden_name}.gz"
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        golden.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
        return
    assert golden.exists(), f"no snapshot {golden.name}: run with ONNXROOF_UPDATE_SNAPSHOTS=1 to create it"
    expected = gzip.decompress(golden.read_bytes()).decode("utf-8")
    if text != expected:
        first = next(
            (i for i, (a, b) in enumerate(zip(text.splitlines(), expected.splitlines(), strict=False)) if a != b),
            min(len(text.splitlines()), len(expected.splitlines())),
        )
        got = text.splitlines()[first : first + 3]
        want = expected.splitlines()[first : first + 3]
        pytest.fail(f"{golden_name}: output changed at line {first + 1}:\n  got  {got}\n  want {want}")


CASES = [(m, p, f) for m in (*SAMPLES, *LIGHT) for p in PLATFORMS for f in FUSIONS]


@pytest.mark.parametrize(("name", "platform", "fusion"), CASES)
def test_report_json_and_csv(name: str, platform: str, fusion: str, tmp_path: Path) -> None:
    path, dims = _model(name)
    args = ["report", str(path), "-p", platform, "--fusion", fusion, *(a for d in dims for a in ("--dim", d))]
    for fmt in ("json", "csv"):
        text = _run([*args, "-f", fmt], tmp_path / f"out.{fmt}")
        _compare(_normalized(text, path), f"{name}__{platform}__{fusion}.{fmt}")


@pytest.mark.parametrize("name", list(SAMPLES))
def test_table_and_html(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The table's panels are as wide as the model path: run from the samples folder so the path is the bare
    # file name on every machine.
    monkeypatch.chdir(ROOT / "samples")
    args = ["report", f"{name}.onnx", "-p", "xavier", *(a for d in SAMPLES[name] for a in ("--dim", d))]
    table = _run([*args, "-f", "table", "--explain-fusion"], tmp_path / "out.txt")
    _compare(table, f"{name}__table.txt")
    html = _run([*args, "-f", "html"], tmp_path / "out.html")
    _compare(html, f"{name}__report.html")


@pytest.mark.parametrize("fmt", ["json", "sarif", "junit"])
def test_check_formats(fmt: str, tmp_path: Path) -> None:
    models = [str(ROOT / "samples" / f"{name}.onnx") for name in SAMPLES]
    args = ["check", *models, "-p", "xavier", "--dim", "batch=1", "--dim", "seq=16", "--max-latency", "50us"]
    text = _run([*args, "-f", fmt], tmp_path / f"out.{fmt}")
    _compare(_normalized(text, ROOT / "samples" / "x.onnx"), f"check__{fmt}.txt")
