"""Every real model the project ships is analyzed: none may be refused as malformed (exit 2) or crash.

The corpus: the samples (samples/*.onnx), the LLM and transformer files from real exporters (samples/llm) and
Silero VAD as shipped (tests/data/silero). ONNX Runtime runs each of them, so a refusal is onnxroof's bug (issue
25: Silero VAD refused after an ``If`` took the shapes of the branch that does not run). Every symbolic dim
(anonymous ones by ``input:axis``) is bound to 1, then to 8.
"""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from typer.testing import CliRunner

from onnxroof.cli.commands import app
from onnxroof.load.dims import symbolic_dims

ROOT = Path(__file__).resolve().parent.parent
CORPUS = sorted(
    [
        *(ROOT / "samples").glob("*.onnx"),
        *(ROOT / "samples" / "llm").rglob("*.onnx"),
        *(ROOT / "tests" / "data" / "silero").glob("*.onnx"),
    ]
)


def test_the_corpus_holds_the_real_models() -> None:
    names = {path.relative_to(ROOT).as_posix() for path in CORPUS}
    assert {"samples/llm/genai_qwen2_int4/model.onnx", "tests/data/silero/silero_vad_v5.onnx"} <= names
    assert len(CORPUS) >= 16


@pytest.mark.parametrize("value", [1, 8])
@pytest.mark.parametrize("path", CORPUS, ids=[p.relative_to(ROOT).as_posix() for p in CORPUS])
def test_no_real_model_is_refused(path: Path, value: int, tmp_path: Path) -> None:
    dims = symbolic_dims(onnx.load(path, load_external_data=False))
    args = ["report", str(path), "-f", "json", "-o", str(tmp_path / "out.json")]
    for name in dims:
        args += ["--dim", f"{name}={value}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, f"exit {result.exit_code}: {result.output}"
