"""Transformer and LLM files as they ship (issue 14's acceptance): every artifact in samples/llm/, built by
samples/llm/build_llm_samples.py with the real exporters (ONNX Runtime GenAI builder, ORT transformer
optimizer, Optimum, onnx.helper at opset 23/24), analyzed for a prefill (batch 1, 128 tokens, past 0) and a
decode step (1 token, past 127) with the dims reference.json gives:

* it loads and analyzes (exit 0 from the CLI), with no ``unsupported`` and no ``unknown_shape`` node;
* params within 2% of the Hugging Face model's (tied weights once), or of the layer's formula;
* matmul-like MACs within 2% of ``torch.utils.flop_counter`` on the eager model (or the formula);
* int4 files: weight bytes within 2% of the bytes the file stores;
* a decode step's bytes include the KV-cache read: they grow with the past length.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
from typer.testing import CliRunner

import onnxroof
from onnxroof.cli.commands import app
from onnxroof.core.states import NodeState

LLM = Path(__file__).resolve().parent.parent / "samples" / "llm"
REFERENCE = json.loads((LLM / "reference.json").read_text())["artifacts"]
CASES = [(name, case) for name, artifact in REFERENCE.items() for case in artifact["cases"]]
RTOL = 0.02


def _path(name: str) -> Path:
    return LLM / REFERENCE[name]["files"][0]


def _dims(name: str, case: str, **override: int) -> dict[str, int]:
    spec = REFERENCE[name]["cases"][case]
    dims = {k: v for k, v in spec["dims"].items() if "+" not in k}  # expressions are computed, not bound
    dims.update({k: int(v) for k, v in spec.get("input_values", {}).items()})  # the merged decoder's branch
    dims.update(override)
    return dims


@cache
def _analysis(name: str, case: str) -> onnxroof.Analysis:
    return onnxroof.analyze(_path(name), platform="xavier", dims=_dims(name, case))


@pytest.mark.parametrize(("name", "case"), CASES)
def test_every_node_is_costed(name: str, case: str) -> None:
    states = _analysis(name, case).totals.states
    assert states.get(NodeState.UNSUPPORTED, 0) == 0 and states.get(NodeState.UNKNOWN_SHAPE, 0) == 0, states


@pytest.mark.parametrize(("name", "case"), CASES)
def test_params_match_the_model(name: str, case: str) -> None:
    artifact = REFERENCE[name]
    expected = artifact["hf"]["params"] if "hf" in artifact else artifact["formula_params"]
    assert _analysis(name, case).totals.params == pytest.approx(expected, rel=RTOL)


@pytest.mark.parametrize(("name", "case"), CASES)
def test_matmul_macs_match_the_eager_model(name: str, case: str) -> None:
    spec = REFERENCE[name]["cases"][case]
    expected = spec["hf_macs"]["total"] if "hf_macs" in spec else spec["formula_macs"]["total"]
    assert _analysis(name, case).totals.macs == pytest.approx(expected, rel=RTOL)


@pytest.mark.parametrize("name", [n for n, a in REFERENCE.items() if a.get("quantized_weight_bytes")])
def test_int4_weight_bytes_are_the_stored_bytes(name: str) -> None:
    stored = REFERENCE[name]["initializer_bytes"]
    assert _analysis(name, "prefill").totals.weight_bytes == pytest.approx(stored, rel=RTOL)


@pytest.mark.parametrize("name", [n for n, a in REFERENCE.items() if "decode" in a["cases"]])
def test_a_decode_step_reads_the_kv_cache(name: str) -> None:
    """Bytes of a decode step at past P: the KV read grows by 2·layers·kv_heads·head_dim·itemsize per token."""
    spec = REFERENCE[name]["cases"]["decode"]["dims"]
    # the cache's length: past (GenAI, Optimum, opset 23) or the whole buffer a TensorScatter writes into
    grows = (
        next(k for k in spec if k.startswith("past") and "+" not in k)
        if "max_sequence_length" not in spec
        else "max_sequence_length"
    )
    longer = _dims(name, "decode", **{grows: 2 * spec[grows]})
    if "total_sequence_length" in spec:
        longer["total_sequence_length"] = 2 * spec[grows] + 1
    near = _analysis(name, "decode").totals.bytes
    far = onnxroof.analyze(_path(name), platform="xavier", dims=longer).totals.bytes
    assert far > near


@pytest.mark.parametrize("name", list(REFERENCE))
def test_the_cli_reports_it(name: str, tmp_path: Path) -> None:
    dims = [arg for key, value in _dims(name, "prefill").items() for arg in ("--dim", f"{key}={value}")]
    result = CliRunner().invoke(app, ["report", str(_path(name)), *dims, "-f", "json", "-o", str(tmp_path / "r.json")])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "r.json").read_text())["unsupported"] == {}
