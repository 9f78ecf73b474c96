"""The LLM accuracy benchmark's data: benchmarks/llm_measurements.toml parses, every row is sourced and names a
known platform and runtime profile; benchmarks/genai_shaped.py writes the bytes its closed form says."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from fit_request_cost import TINYCHAT_FITS, TRTLLM_V05, fit_tinychat, fit_trtllm  # noqa: E402
from genai_shaped import SHAPES, Shape, build_genai_shaped, expected_weight_bytes  # noqa: E402

from onnxroof.platform.lookup import load_platform  # noqa: E402
from onnxroof.runtime import load_runtime  # noqa: E402
from onnxroof.studies.llm import llm  # noqa: E402

MEASUREMENTS = ROOT / "benchmarks" / "llm_measurements.toml"
#: The runtime profiles the rows may name without a path: the bundled LLM runtimes (issue 23).
BUNDLED = {"tensorrt-llm", "vllm", "llama.cpp-cuda", "llama.cpp-metal", "mlc", "ort-genai-cuda"}
REQUIRED = (
    "id", "model", "shape", "runtime", "runtime_profile", "precision", "weights", "group", "whatif_precision",
    "gpu", "platform", "batch", "prompt", "generate", "ttft_ms", "throughput_tok_s", "tpot_ms", "source", "date",
)  # fmt: skip


def _rows() -> list[dict]:
    with open(MEASUREMENTS, "rb") as f:
        return tomllib.load(f)["row"]


ROWS = _rows()


def test_enough_rows_runtimes_and_platforms() -> None:
    assert len(ROWS) >= 40
    assert len({r["runtime_profile"] for r in ROWS}) >= 5
    assert len({r["platform"] for r in ROWS}) >= 6
    assert len({r["id"] for r in ROWS}) == len(ROWS), "row ids are unique"


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_row_is_sourced_and_predictable(row: dict) -> None:
    missing = [key for key in REQUIRED if key not in row]
    assert not missing, f"{row['id']}: missing {missing}"
    assert row["source"].count("http") >= 1, f"{row['id']}: the source names no URL"
    assert row["shape"] in SHAPES
    assert row["weights"] in {"fp16", "int4", "int8"}
    assert (row["group"] == 0) == (row["weights"] == "fp16")
    assert row["whatif_precision"] in {"", "fp8"}
    assert any(row[f] > 0 for f in ("ttft_ms", "tpot_ms", "throughput_tok_s")), f"{row['id']}: no figure"
    assert min(row["batch"], row["prompt"], row["generate"]) >= 1
    assert load_platform(row["platform"]).name == row["platform"]
    profile = row["runtime_profile"]
    if profile.endswith(".toml"):
        assert (ROOT / profile).is_file(), f"{row['id']}: {profile} does not exist"
    else:
        assert profile in BUNDLED, f"{row['id']}: unknown runtime profile {profile!r}"


def test_genai_shaped_bytes_match_the_closed_form(tmp_path: Path) -> None:
    """The weights an analysis reads are the closed form's: products at ``bits`` + fp16 scales per group, the fp16
    embedding and norms, plus the two rotary caches [context, head_dim / 2] in fp16 (and the mask's constants)."""
    shape = Shape(layers=2, hidden=256, heads=4, kv_heads=2, intermediate=512, vocab=1000, context=512)
    rotary = 2 * 2 * shape.context * shape.head_dim // 2
    for bits, block in ((None, 128), (4, 32), (8, 128)):
        model = build_genai_shaped(tmp_path / f"b{bits}" / "model.onnx", shape, bits=bits, block_size=block)
        assert (model.parent / "genai_config.json").is_file()
        result = llm(model, "a100-80gb", prompt=8, generate=2)
        # + the mask subgraph's int64 constants (a few 8-byte scalars), which count as constant inputs
        assert 0 <= result.weight_bytes - (expected_weight_bytes(shape, bits, block) + rotary) <= 3 * 8
    # 4-bit group 32 in closed form: 4 bits + one 16-bit scale per 32 weights = 9/16 B per product weight
    h, kv, i = shape.hidden, shape.kv_heads * shape.head_dim, shape.intermediate
    products = shape.layers * (h * (h + 2 * kv) + h * h + 3 * h * i) + h * shape.vocab
    fp16_rest = 2 * shape.vocab * h + 2 * (2 * h * shape.layers + h)
    assert expected_weight_bytes(shape, 4, 32) == products * 9 // 16 + fp16_rest
    assert expected_weight_bytes(shape) == products * 2 + fp16_rest


def test_fitted_per_request_costs_are_what_the_fit_gives(tmp_path: Path) -> None:
    """The benchmark profiles' ``per_request_us`` are the figures benchmarks/fit_request_cost.py fits (to 1 %), their
    sources say "[fitted]", and the rows the TensorRT-LLM v0.5 figure is fitted on are marked ``fit`` (left out of
    the headline) while the rows judged under it are not."""
    fitted = {TRTLLM_V05: fit_trtllm(tmp_path), **fit_tinychat(tmp_path)}
    assert len(fitted) == 1 + len(TINYCHAT_FITS)
    for path, seconds in fitted.items():
        runtime = load_runtime(path)
        assert runtime.per_request_s == pytest.approx(seconds, rel=0.01), path.name
        assert runtime.sources["launch.per_request_us"].startswith("[fitted]"), path.name
    v05 = [r for r in ROWS if r["runtime_profile"].endswith("tensorrt-llm-v0.5.toml")]
    fit_ids = {r["id"] for r in v05 if r.get("fit")}
    assert fit_ids == {"gptj-a100-128-fit", "gptj-h100-fp8-128-fit"}
    assert len(v05) - len(fit_ids) >= 6  # the LLaMA 7B rows and GPT-J's 2,048-token rows: held out
