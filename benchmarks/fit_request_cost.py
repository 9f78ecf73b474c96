"""Fit the per-request host cost (``launch.per_request_us``) of the benchmark runtime profiles that carry one.

``python benchmarks/fit_request_cost.py``

A per-request cost is what a serving loop spends once per request, before its first token, beside the model's
kernels (input handling, sampler and buffer setup, Python around the model). No source states it alone, so it is
FITTED, each time on figures that are NOT the rows it is then judged on:

* ``benchmarks/runtimes/tensorrt-llm-v0.5.toml``: on the two GPT-J 6B 128-token first-token latencies of TensorRT-LLM
  v0.5's performance page (A100 fp16 12 ms, H100 fp8 7 ms; the rows ``gptj-*-128-fit`` of
  ``llm_measurements.toml``, marked ``fit = true``): ``r = mean(measured − predicted)`` with the profile's own
  per-request cost set to 0. Held out: the LLaMA 7B rows of the same table and GPT-J's 2,048-token rows.
* ``benchmarks/runtimes/tinychat.toml`` (RTX 4090 host) and ``tinychat-orin.toml`` (Jetson host): on the
  'New TinyChat TTFT' of TinyChat's README at a history of 1,024 tokens (4090: 14.49 ms) and 32 tokens (Orin:
  65.40 ms): ``r = measured − predicted``, where the prediction is a 32-token prefill over that history already in
  the cache (``past`` = history). Held out: the 16-token-history figures (the rows ``tinychat-*-llama3-ttft``).

Each fit prints its inputs, the predicted compute and the fitted figure; the profiles quote it. Re-run after a
change to the time model and update the profiles' ``per_request_us`` (and the sources' arithmetic) if it moves.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import tomllib
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from genai_shaped import build_genai_shaped  # noqa: E402

from onnxroof.analysis.analyze import analyze  # noqa: E402
from onnxroof.load.reader import read_file  # noqa: E402
from onnxroof.runtime import Runtime, load_runtime  # noqa: E402
from onnxroof.studies.kv_cache import find_cache  # noqa: E402
from onnxroof.studies.llm import llm  # noqa: E402

BENCH = Path(__file__).resolve().parent
TRTLLM_V05 = BENCH / "runtimes" / "tensorrt-llm-v0.5.toml"
TINYCHAT = BENCH / "runtimes" / "tinychat.toml"
TINYCHAT_ORIN = BENCH / "runtimes" / "tinychat-orin.toml"
#: TinyChat README (llm-awq 048e19e), 'New Optimization of Context Stage', Llama-3-8B, 'New TinyChat TTFT (ms)':
#: (profile, platform, history tokens, measured ms). The question is 32 tokens.
TINYCHAT_FITS = ((TINYCHAT, "rtx4090", 1024, 14.49), (TINYCHAT_ORIN, "agx-orin", 32, 65.40))
QUESTION = 32


def without_request(path: Path) -> Runtime:
    """The profile at ``path`` with its per-request cost set to 0 (what the fit subtracts from)."""
    runtime = load_runtime(path)
    return replace(runtime, launch=replace(runtime.launch, per_request_s=0.0))


def prefill_over_history_s(model: Path, platform: str, runtime: Runtime, new: int, past: int) -> float:
    """Seconds of one prefill of ``new`` tokens over ``past`` tokens already in the cache (batch 1)."""
    file = read_file(model)
    dims = find_cache(file.model, None, {}).dims(1, new, past)
    return analyze(file, platform, dims, runtime=runtime).totals.latency_s


def fit_trtllm(folder: Path) -> float:
    """The fitted per-request seconds of :data:`TRTLLM_V05`."""
    with open(BENCH / "llm_measurements.toml", "rb") as f:
        rows = [r for r in tomllib.load(f)["row"] if r.get("fit") and r["runtime_profile"].endswith("v0.5.toml")]
    runtime = without_request(TRTLLM_V05)
    residuals = []
    for row in rows:
        model = build_genai_shaped(folder / row["id"] / "model.onnx", row["shape"], bits=None, config=True)
        result = llm(model, row["platform"], prompt=row["prompt"], generate=1, batch=row["batch"],
                     precision=row["whatif_precision"] or None, runtime=runtime)  # fmt: skip
        residual = row["ttft_ms"] - result.ttft_s * 1e3
        residuals.append(residual)
        print(
            f"  {row['id']}: measured {row['ttft_ms']:g} ms, predicted {result.ttft_s * 1e3:.2f} ms → {residual:.2f} ms"
        )
    fitted_ms = statistics.mean(residuals)
    print(f"{TRTLLM_V05.name}: per_request_us = {fitted_ms * 1e3:.0f} (mean of {len(residuals)} residuals)")
    return fitted_ms * 1e-3


def fit_tinychat(folder: Path) -> dict[Path, float]:
    """Profile → fitted per-request seconds, for each of :data:`TINYCHAT_FITS`."""
    model = build_genai_shaped(folder / "tinychat" / "model.onnx", "llama3-8b", bits=4, block_size=128, config=True)
    fitted = {}
    for path, platform, history, measured in TINYCHAT_FITS:
        predicted = prefill_over_history_s(model, platform, without_request(path), QUESTION, history) * 1e3
        fitted[path] = (measured - predicted) * 1e-3
        print(
            f"{path.name}: {platform}, {QUESTION} tokens over {history}: measured {measured:g} ms, predicted "
            f"{predicted:.2f} ms → per_request_us = {(measured - predicted) * 1e3:.0f}"
        )
    return fitted


def main() -> int:
    with tempfile.TemporaryDirectory() as folder:
        fit_trtllm(Path(folder))
        fit_tinychat(Path(folder))
    return 0


if __name__ == "__main__":
    sys.exit(main())
