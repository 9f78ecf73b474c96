"""``onnxroof llm``'s serving figures (issue 23 item 4, issue 24's llm labels): tokens/s per sequence and aggregate,
``--kv-precision`` and ``--weights`` changing only what they name, the largest batch meeting ``--max-tpot`` /
``--max-ttft``, the largest context capped at the model's own limit, the KV label naming the dtype counted."""

from __future__ import annotations

import json
import shutil
from functools import cache
from pathlib import Path

import onnx
import pytest
from typer.testing import CliRunner

from onnxroof.analysis.analyze import Analysis
from onnxroof.analysis.stages import BoundModel, bind
from onnxroof.analysis.whatif import weight_only_itemsize
from onnxroof.cli.commands import app
from onnxroof.studies.llm import LLMResult, llm
from onnxroof.studies.serving import BatchLimit, BatchPoint, ContextSource, context_limit, largest_batch

ROOT = Path(__file__).resolve().parent.parent
GENAI_FP32 = ROOT / "samples" / "llm" / "genai_llama_fp32" / "model.onnx"
PROMPT, GENERATE = 32, 8


@cache
def _run(batch: int = 1, **options: object) -> LLMResult:
    return llm(GENAI_FP32, "a100", prompt=PROMPT, generate=GENERATE, batch=batch, **options)  # type: ignore[arg-type]


def _cache_names(result: LLMResult) -> set[str]:
    return set(result.cache.past) | {p for p in result.cache.present if p}


def _touches(analysis: Analysis, node_id: str, names: set[str]) -> bool:
    op = analysis.op(node_id)
    assert op is not None
    return any(t is not None and t.name in names for t in (*op.inputs, *op.outputs))


# ------------------------------------------------------------------------------------------------ tokens/s


def test_aggregate_tokens_per_second_is_batch_times_per_sequence() -> None:
    one, four = _run(1), _run(4)
    for result in (one, four):
        assert result.tokens_per_s_per_sequence == GENERATE / (result.ttft_s + result.decode_total_s)
        assert result.tokens_per_s_aggregate == result.batch * result.tokens_per_s_per_sequence
    assert four.tokens_per_s_aggregate > one.tokens_per_s_aggregate  # more served at once, though each is slower


def test_the_table_json_and_csv_label_both_rates() -> None:
    runner = CliRunner()
    base = ["llm", str(GENAI_FP32), "-p", "a100", "--prompt", "32", "--generate", "8", "--batch", "4"]
    table = runner.invoke(app, [*base, "--format", "table"])
    assert table.exit_code == 0, table.output
    assert "tokens/s per sequence" in table.output and "tokens/s aggregate (batch 4)" in table.output
    data = json.loads(runner.invoke(app, [*base, "--format", "json"]).stdout)
    assert data["tokens_per_s_aggregate"] == pytest.approx(4 * data["tokens_per_s_per_sequence"])
    csv = runner.invoke(app, [*base, "--format", "csv"]).stdout.splitlines()
    header = csv[0].split(",")
    assert {"batch", "tokens_per_s_per_sequence", "tokens_per_s_aggregate"} <= set(header)
    html = runner.invoke(app, [*base, "--format", "html"]).stdout
    assert "Tokens/s per sequence" in html and "Tokens/s aggregate" in html and "batch 4 × per sequence" in html


# ------------------------------------------------------------------------------------------- --kv-precision


def test_kv_precision_changes_only_the_cache() -> None:
    base, fp16 = _run(), _run(kv_precision="fp16")
    # the cache at 2 bytes an element instead of 4: exactly half; the label says float16
    assert fp16.kv_cache_bytes == base.kv_cache_bytes / 2 and fp16.kv_dtype == "float16" and base.kv_dtype == "float32"
    assert fp16.weight_bytes == base.weight_bytes and fp16.params == base.params
    names = _cache_names(base)
    for before, after in zip(base.analyses, fp16.analyses, strict=True):
        assert after.totals.fused.flops == before.totals.fused.flops
        for old, new in zip(before.nodes, after.nodes, strict=True):
            if _touches(before, old.id, names):
                assert new.bytes < old.bytes or old.bytes == 0  # a node reading or writing the cache moves less
            else:
                assert (new.flops, new.bytes) == (old.flops, old.bytes)  # every other node is unchanged
    # the decode step reads the past cache: it moves fewer bytes
    assert fp16.decode[-1].bytes < base.decode[-1].bytes


def test_precision_labels_the_cache_with_the_dtype_counted() -> None:
    result = _run(precision="fp16")
    assert result.kv_dtype == "float16" and result.kv_cache_bytes == _run().kv_cache_bytes / 2
    out = CliRunner().invoke(
        app, ["llm", str(GENAI_FP32), "-p", "a100", "--prompt", "32", "--generate", "8", "--precision", "fp16"]
    )
    assert "float16: 512 B/token" in out.output and "float32" not in out.output  # 2 layers·2·2 heads·32·2 B


# ------------------------------------------------------------------------------------------------ --weights


def _quantized_elements(path: Path) -> int:
    """Elements of the rank ≥ 2 float initializers that are not rotary tables."""
    model = onnx.load(path, load_external_data=False)
    quantized = 0
    for t in model.graph.initializer:
        if len(t.dims) >= 2 and "cos" not in t.name and "sin" not in t.name:
            numel = 1
            for d in t.dims:
                numel *= d
            quantized += numel
    return quantized


@pytest.mark.parametrize("width", ["int4", "int8"])
def test_weight_only_quantization_changes_only_the_weights(width: str) -> None:
    base, quant = _run(), _run(weights=width)
    per_weight = {"int4": 0.5 + 2 / 128, "int8": 1 + 2 / 128}[width]
    assert weight_only_itemsize(width) == per_weight
    quantized = _quantized_elements(GENAI_FP32)
    assert quantized == 550_912  # embedding 1000·128, 2 layers of 128·256·4 + 128·128 + 256·128, lm_head 128·1000
    # each of those elements goes from 4 bytes to per_weight; every other weight (norms, rotary tables) keeps its bytes
    assert quant.weight_bytes == pytest.approx(base.weight_bytes - quantized * (4 - per_weight), rel=1e-12)
    assert quant.kv_cache_bytes == base.kv_cache_bytes and quant.kv_dtype == base.kv_dtype  # the cache unchanged
    for before, after in zip(base.analyses, quant.analyses, strict=True):
        assert after.totals.fused.flops == before.totals.fused.flops  # the math runs at the activations' precision
        for old, new in zip(before.nodes, after.nodes, strict=True):
            op = before.op(old.id)
            assert op is not None
            if not any(t is not None and t.role == "weight" and len(t.shape or ()) >= 2 for t in op.inputs):
                assert new.bytes == old.bytes  # no quantized weight read: activations unchanged
    data = json.loads(
        CliRunner()
        .invoke(app, ["llm", str(GENAI_FP32), "-p", "a100", "--prompt", "32", "--generate", "8", "--weights", width,
                      "-f", "json"])
        .stdout
    )  # fmt: skip
    expected = {"quantization": width, "bytes_per_weight": per_weight, "group_size": 128, "scale_bytes": 2}
    assert data["weights"] == expected


def test_bad_serving_options_are_one_line() -> None:
    runner = CliRunner()
    base = ["llm", str(GENAI_FP32), "-p", "a100", "--prompt", "8", "--generate", "2"]
    for extra, text in (
        (["--weights", "int3"], "--weights 'int3'"),
        (["--kv-precision", "fp7"], "--kv-precision 'fp7'"),
        (["--max-tpot", "0"], "--max-tpot must be a positive time"),
    ):
        out = runner.invoke(app, [*base, *extra])
        assert out.exit_code == 2 and text in out.output and "Traceback" not in out.output


# -------------------------------------------------------------------------------------------- batch search


def test_the_bisection_finds_the_largest_batch_on_a_line() -> None:
    # tpot(B) = 10 ms + 0.5 ms · B: ≤ 30 ms while B ≤ 40
    def evaluate(batch: int) -> BatchPoint:
        return BatchPoint(batch, None, 0.010 + 0.0005 * batch)

    found = largest_batch(evaluate, 1000, None, 0.030)
    assert (found.batch, found.limited_by) == (40, BatchLimit.TARGET)
    assert len(found.evaluated) <= 10 + 2  # ⌈log₂ 1000⌉ + 2
    assert largest_batch(evaluate, 25, None, 0.030).limited_by == BatchLimit.MEMORY  # 25 meets it: memory binds
    assert largest_batch(evaluate, 25, None, 0.030).batch == 25
    assert largest_batch(evaluate, 1000, None, 0.005).batch == 0  # even one sequence is too slow
    assert largest_batch(evaluate, 0, None, 0.030).limited_by == BatchLimit.MEMORY  # nothing fits in memory
    assert largest_batch(evaluate, None, None, 10.0).limited_by == BatchLimit.SEARCH_BOUND  # 2.06 s at 4096


def test_max_tpot_finds_a_batch_that_meets_it_and_one_more_that_does_not() -> None:
    target = 1.5 * _run(1).tpot_s
    result = _run(1, max_tpot_s=target)
    search = result.search
    assert search is not None and search.limited_by == BatchLimit.TARGET and search.batch >= 1
    assert _run(search.batch).tpot_s <= target < _run(search.batch + 1).tpot_s
    # the search changes nothing else
    assert (result.ttft_s, result.tpot_s, result.batch) == (_run(1).ttft_s, _run(1).tpot_s, 1)


def test_the_search_does_not_analyze_the_requested_batch_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # the requested batch's figures are the result's own: its prefill and decode steps are analyzed once
    import onnxroof.studies.llm as study

    target = 1.5 * _run(1).tpot_s
    batches: list[object] = []  # the batch each analysis binds

    def counted(model: object, dims: dict[str, object], *args: object) -> BoundModel:
        batches.append(dims[_run(1).cache.roles["batch"]])
        return bind(model, dims, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(study, "bind", counted)  # each phase is bound once
    result = llm(GENAI_FP32, "a100", prompt=PROMPT, generate=GENERATE, max_tpot_s=target, max_ttft_s=10.0)
    search = result.search
    assert search is not None and search.limited_by == BatchLimit.TARGET and result.interpolation == "linear"
    tried = [point.batch for point in search.evaluated]
    assert tried[0] == 1 and len(tried) == len(set(tried)) > 2
    assert batches.count(1) == 4  # 1 prefill + 3 decode steps (linear), not twice that
    assert set(batches) == set(tried)
    # batch 1's figures are exactly what analyzing it on its own gives
    assert (search.evaluated[0].ttft_s, search.evaluated[0].tpot_s) == (_run(1).ttft_s, _run(1).tpot_s)


def test_max_ttft_finds_a_batch() -> None:
    target = 3 * _run(1).ttft_s
    search = _run(1, max_ttft_s=target).search
    assert search is not None and search.batch >= 1
    assert _run(search.batch).ttft_s <= target < _run(search.batch + 1).ttft_s


# ----------------------------------------------------------------------------------------- context limit


def test_the_largest_context_respects_the_models_limit(tmp_path: Path) -> None:
    folder = tmp_path / "genai"
    shutil.copytree(GENAI_FP32.parent, folder)
    model = onnx.load(folder / "model.onnx", load_external_data=False)
    limit = context_limit(folder / "model.onnx", model.graph, [])
    assert limit is not None and (limit.tokens, limit.source) == (512, ContextSource.GENAI_CONFIG)
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 300}))
    limit = context_limit(folder / "model.onnx", model.graph, [])
    assert limit is not None and (limit.tokens, limit.source) == (300, ContextSource.CONFIG_JSON)  # the smallest
    (folder / "config.json").unlink()
    (folder / "genai_config.json").unlink()
    limit = context_limit(folder / "model.onnx", model.graph, [])
    assert limit is not None and (limit.tokens, limit.source) == (512, ContextSource.ROTARY_CACHE)  # cos_cache rows
    (folder / "genai_config.json").write_text("{not json")
    warnings: list[str] = []
    assert context_limit(folder / "model.onnx", model.graph, warnings) is not None
    assert "genai_config.json" in warnings[0]  # the file that does not parse is named
    result = llm(folder / "model.onnx", "a100", prompt=8, generate=2)
    assert result.memory.max_context == 512 and result.memory.context_limited_by == "model"
    assert (
        "the model's limit: rotary cache rows"
        in CliRunner()
        .invoke(app, ["llm", str(folder / "model.onnx"), "-p", "a100", "--prompt", "8", "--generate", "2"])
        .output
    )


def test_a_context_beyond_the_models_limit_is_said() -> None:
    args = ["llm", str(GENAI_FP32), "-p", "a100", "--prompt", "510", "--generate", "8"]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0 and "518 tokens exceeds the model's context limit, 512 tokens" in out.output
    data = json.loads(CliRunner().invoke(app, [*args, "-f", "json"]).stdout)
    assert data["memory"]["context_limit"]["tokens"] == 512 and "exceeds" in data["warnings"][0]
    inside = CliRunner().invoke(app, ["llm", str(GENAI_FP32), "-p", "a100", "--prompt", "500", "--generate", "12"])
    assert "exceeds" not in inside.output  # 512 tokens: within the limit
