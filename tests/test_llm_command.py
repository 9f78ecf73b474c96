"""``onnxroof llm`` (issue 15): the KV cache found by itself on the shipped decoders (GenAI, Optimum plain and merged,
opset-23 Attention) and the Llama-shaped decoder with ``kv_cache=True``; the figures against the formulas and
against ``analyze`` run by hand; the memory check; the errors; the CLI in every format."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
from onnx import TensorProto
from typer.testing import CliRunner

import onnxroof
from onnxroof.cli.commands import app
from onnxroof.platform.lookup import load_platform
from onnxroof.studies.kv_cache import KVCacheError
from onnxroof.studies.llm import Phase, llm, memory_check, piecewise_sum

ROOT = Path(__file__).resolve().parent.parent
LLM = ROOT / "samples" / "llm"
sys.path.insert(0, str(ROOT / "benchmarks"))

from llama_shaped import build_llama_shaped  # noqa: E402

# name -> (path, layers, kv_heads, head_dim, itemsize, extra prefill dims for a hand-run analyze)
DECODERS = {
    "genai_int4": (LLM / "genai_llama_int4" / "model.onnx", 2, 2, 64, 4, {"kv_cache_dim": 64}),
    "optimum": (LLM / "optimum_llama" / "model.onnx", 2, 2, 32, 4, {}),
    "optimum_merged": (LLM / "optimum_llama" / "decoder_model_merged.onnx", 2, 2, 32, 4, {"use_cache_branch": 0}),
    "opset23": (LLM / "onnx_decoder_layer_opset23.onnx", 1, 2, 32, 4, {}),
    "llama_kv": (None, 2, 2, 16, 4, {}),
}
PROMPT, GENERATE = 32, 8


@cache
def _small_llama() -> Path:
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="onnxroof_llm_"))
    return build_llama_shaped(
        folder / "llama_kv.onnx", layers=2, hidden=64, heads=4, kv_heads=2, intermediate=128, vocab=100,
        dtype=TensorProto.FLOAT, external_data=False, kv_cache=True,
    )  # fmt: skip


def _path(name: str) -> Path:
    return DECODERS[name][0] or _small_llama()


@cache
def _result(name: str, generate: int = GENERATE) -> onnxroof.LLMResult:
    return llm(_path(name), "xavier", prompt=PROMPT, generate=generate)


def _prefill_dims(name: str, new: int, past: int) -> dict[str, int]:
    if name == "llama_kv":
        dims = {"batch": 1, "seq": new, "past_sequence_length": past, "total_sequence_length": past + new}
    else:
        dims = {"batch_size": 1, "sequence_length": new, "past_sequence_length": past}
        dims |= {} if name.startswith("optimum") else {"total_sequence_length": past + new}
    extra = dict(DECODERS[name][5])
    if "use_cache_branch" in extra:
        extra["use_cache_branch"] = int(past > 0)
    return dims | extra


@pytest.mark.parametrize("name", DECODERS)
def test_the_cache_is_found(name: str) -> None:
    _, layers, kv_heads, head_dim, itemsize, _ = DECODERS[name]
    found = _result(name).cache
    assert (found.layers, found.kv_heads, found.head_dim, found.itemsize) == (layers, kv_heads, head_dim, itemsize)
    assert all(found.present) and found.roles["past"] == "past_sequence_length"
    assert (found.branch == "use_cache_branch") == (name == "optimum_merged")


@pytest.mark.parametrize("name", DECODERS)
def test_kv_cache_bytes_is_the_formula(name: str) -> None:
    _, layers, kv_heads, head_dim, itemsize, _ = DECODERS[name]
    result = llm(_path(name), "xavier", prompt=PROMPT, generate=GENERATE, batch=3)
    assert result.kv_cache_bytes == 2 * layers * kv_heads * head_dim * itemsize * (PROMPT + GENERATE) * 3


@pytest.mark.parametrize("name", DECODERS)
def test_time_per_token_grows_with_context(name: str) -> None:
    result = _result(name)
    assert result.decode_last_s > result.decode_first_s
    assert result.decode_first_s <= result.tpot_s <= result.decode_last_s
    assert result.tokens_per_s == pytest.approx(GENERATE / (result.ttft_s + result.decode_total_s))


@pytest.mark.parametrize("name", DECODERS)
def test_ttft_is_the_prefill_report(name: str) -> None:
    by_hand = onnxroof.analyze(_path(name), "xavier", dims=_prefill_dims(name, PROMPT, 0))
    assert _result(name).ttft_s == by_hand.totals.latency_s
    assert _result(name).weight_bytes == by_hand.totals.weight_bytes


def test_each_point_names_its_phase_with_the_enum() -> None:
    result = _result("genai_int4")
    assert result.prefill.phase is Phase.PREFILL and {p.phase for p in result.decode} == {Phase.DECODE}
    assert set(result.unsupported) == {Phase.PREFILL, Phase.DECODE}
    assert json.dumps([result.prefill.phase, result.decode[0].phase]) == '["prefill", "decode"]'  # the schema's text


@pytest.mark.parametrize("name", ["genai_int4", "optimum_merged", "llama_kv"])
def test_interpolated_decode_is_the_sum_over_every_step(name: str) -> None:
    steps = [
        onnxroof.analyze(_path(name), "xavier", dims=_prefill_dims(name, 1, past)).totals.latency_s
        for past in range(PROMPT, PROMPT + GENERATE)
    ]
    result = _result(name)
    assert result.interpolation == "linear" and len(result.decode) == 3
    assert result.decode_first_s == steps[0] and result.decode_last_s == steps[-1]
    assert result.decode_total_s == pytest.approx(sum(steps), rel=1e-9)
    assert result.tpot_s == pytest.approx(sum(steps) / GENERATE, rel=1e-9)


def test_short_generations_are_exact() -> None:
    one = llm(_path("genai_int4"), "xavier", prompt=PROMPT, generate=1)
    two = llm(_path("genai_int4"), "xavier", prompt=PROMPT, generate=2)
    assert one.interpolation == two.interpolation == "exact"
    assert one.decode_total_s == one.decode_first_s == one.tpot_s
    assert two.decode_total_s == pytest.approx(two.decode_first_s + two.decode_last_s)


def test_a_piecewise_decode_analyzes_each_past_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # 1024 sequences of the GenAI fp32 decoder on an A100 leave the line: the 9 spread pasts of 32…39 are the 8
    # steps themselves, the ends and the middle among them: 8 decode analyses (not 3 + 9)
    import onnxroof.studies.llm as study

    pasts: list[object] = []

    def counted(model: object, dims: dict[str, object], *args: object) -> onnxroof.BoundModel:
        if dims["sequence_length"] == 1:
            pasts.append(dims["past_sequence_length"])
        return onnxroof.bind(model, dims, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(study, "bind", counted)  # each phase is bound once
    result = llm(LLM / "genai_llama_fp32" / "model.onnx", "a100", prompt=PROMPT, generate=GENERATE, batch=1024)
    assert result.interpolation == "piecewise"
    assert sorted(pasts) == [p.past for p in result.decode] == list(range(PROMPT, PROMPT + GENERATE))
    assert result.decode_total_s == piecewise_sum([(p.past, p.latency_s) for p in result.decode])


def test_piecewise_sum_sums_every_integer_step() -> None:
    points = [(10, 1.0), (14, 3.0), (20, 4.0)]

    def line(p: int) -> float:
        (a, ta), (b, tb) = next((s, e) for s, e in itertools.pairwise(points) if s[0] <= p <= e[0])
        return ta + (tb - ta) * (p - a) / (b - a)

    assert piecewise_sum(points) == pytest.approx(sum(line(p) for p in range(10, 21)))


def test_the_memory_check() -> None:
    result = _result("genai_int4")
    memory, capacity = result.memory, load_platform("xavier").memory_capacity
    per_token = result.cache.bytes_per_token
    assert memory.capacity_bytes == capacity and memory.fits
    assert memory.needed_bytes == result.weight_bytes + result.kv_cache_bytes
    assert memory.max_batch == (capacity - result.weight_bytes) // (per_token * (PROMPT + GENERATE))
    # the memory allows ~16.8 M tokens, the model's genai_config.json says context_length = 512: the model's limit
    assert (capacity - result.weight_bytes) // per_token > 512
    assert memory.max_context == 512 and memory.context_limited_by == "model"
    assert memory.context_limit is not None and memory.context_limit.source == "genai_config.json context_length"
    tight = memory_check(100.0, 90.0, 40.0, 1.0, 40, 1)
    assert (tight.fits, tight.max_batch, tight.max_context) == (False, 0, 10)
    unknown = llm(_path("genai_int4"), replace(load_platform("xavier"), memory_capacity=None), prompt=8, generate=2)
    assert unknown.memory.fits is None and unknown.memory.max_batch is None


def test_precision_restates_a_float_cache() -> None:
    result = llm(_path("opset23"), "xavier", prompt=PROMPT, generate=GENERATE, precision="fp16")
    assert result.kv_cache_bytes == _result("opset23").kv_cache_bytes / 2


def test_a_model_without_a_cache_is_one_error() -> None:
    with pytest.raises(KVCacheError, match=r"no KV cache found.*input_ids"):
        llm(LLM / "ort_gpt2_optimized.onnx", "xavier", prompt=8, generate=2)
    with pytest.raises(KVCacheError, match="unknown role"):
        llm(_path("opset23"), "xavier", prompt=8, generate=2, kv_dims={"seq": "x"})


RUNNER = CliRunner()


def _cli(*args: str):
    return RUNNER.invoke(app, ["llm", str(_path("genai_int4")), "-p", "xavier", "--prompt", "16", *args])


def test_cli_table_json_csv() -> None:
    table = _cli("--generate", "4")
    assert table.exit_code == 0, table.output
    assert "time to first token" in table.output and "memory:" in table.output
    data = json.loads(_cli("--generate", "4", "--format", "json").stdout)
    assert data["kv_cache_bytes"] == 2 * 2 * 2 * 64 * 4 * 20 and data["memory"]["fits"] is True
    assert {"ttft_s", "tpot_s", "tokens_per_s_per_sequence", "tokens_per_s_aggregate", "decode_first_s"} <= set(data)
    assert {"decode_last_s", "unsupported"} <= set(data) and "tokens_per_s" not in set(data)  # one name, one meaning
    lines = _cli("--generate", "4", "--format", "csv").stdout.splitlines()
    assert lines[0].startswith("phase,past,new") and len(lines) == 1 + 1 + 3


def test_cli_html(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = _cli("--generate", "16", "-o", str(out))
    assert result.exit_code == 0, result.output
    page = out.read_text()
    # the report's design (its script draws the roofline and the kernel table), the LLM's figures above it
    assert 'id="llm-summary"' in page and "Time per output token" in page and 'id="roofline"' in page
    assert "sustained DRAM" in page  # the roofs used, as in every report


def test_cli_bad_input_exits_2_with_one_line() -> None:
    no_cache = RUNNER.invoke(app, ["llm", str(LLM / "ort_gpt2_optimized.onnx"), "--prompt", "8", "--generate", "2"])
    assert no_cache.exit_code == 2 and "no KV cache found" in no_cache.output
    assert len(no_cache.output.strip().splitlines()) == 1
    bad = _cli("--kv-dims", "past")
    assert bad.exit_code == 2 and "ROLE=NAME" in bad.output


def test_json_output_does_not_import_the_html_page() -> None:
    """``onnxroof llm -f json`` (and the table, the CSV) never load jinja2 or :mod:`onnxroof.report.html`: the
    page's machinery is imported by ``render_llm_html`` alone (~45 ms of every run otherwise). The probe runs the
    command itself in a fresh interpreter, so an import added anywhere on its path fails here."""
    model = LLM / "optimum_llama" / "model.onnx"
    probe = (
        "import sys; from onnxroof.cli.commands import app\n"
        f"app(['llm', {str(model)!r}, '-p', 'a100', '--prompt', '8', '--generate', '4', '-f', 'json'], "
        "standalone_mode=False)\n"
        "print('LOADED', *sorted(m for m in sys.modules if m in ('jinja2', 'onnxroof.report.html')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout[: done.stdout.rindex("LOADED")])["prompt"] == 8
    assert done.stdout.rsplit("LOADED", 1)[1].split() == []
