"""The decoders measured on the H200 against onnxroof's prediction of the same shapes (issue 23, item 6).

``python benchmarks/gpu_decoder_compare.py [--data benchmarks/data/gpu/run2/decoder.csv] [--json PATH]``

The measurements (``benchmarks/gpu_measure.py`` part 3, on a lent NVIDIA H200): a Llama-architecture decoder in
plain PyTorch with a static KV cache written in place, random weights, bf16; one decode step at a past of 512 or
2048 tokens and batch 1, 8, 32, replayed as one captured CUDA graph (``cuda-graph``) and run eagerly (``eager``);
and a 512-token prefill at batch 1. Shapes: Llama-3.2-1B (hidden 2048, 16 layers, 32 heads, 8 KV heads,
intermediate 8192, vocab 128256, untied LM head) and Llama-2-7B.

The predictions: the same shapes built by ``benchmarks/llama_shaped.py`` (the Optimum/PyTorch-export layout:
unfused MatMul, Softmax attention, a KV cache concatenated per layer) with sparse weights, and
``onnxroof.llm(model, "h200", prompt=past, generate=2, batch=B, runtime=R)``: the first decode step (past =
``prompt``) and the prefill (``prompt`` tokens); the files are fp16 (the builder writes no bf16 mask
constant), which has bf16's element size and, on Hopper, its tensor-core peak. Runtimes: ``torch-cuda-graph``
(benchmarks/runtimes: what was measured, every op its own kernel, one graph replay per step), ``torch-cuda``
(eager: a host launch per op, the figure measured by ``calibrate --device cuda``) and ``tensorrt-llm`` (what the
issue asks to compare: fused kernels, graph replay, in-place paged cache). Nothing is fitted here; the error is
(predicted − measured) ÷ measured.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import tempfile
from pathlib import Path

from onnx import TensorProto

sys.path.insert(0, str(Path(__file__).parent))
from llama_shaped import build_llama_shaped

import onnxroof

ROOT = Path(__file__).resolve().parent
SHAPES = {
    "llama-3.2-1b-shape": {"layers": 16, "hidden": 2048, "heads": 32, "kv_heads": 8, "intermediate": 8192,
                           "vocab": 128256},
    "llama-2-7b-shape": {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 32, "intermediate": 11008,
                         "vocab": 32000},
}  # fmt: skip
RUNTIMES = {  # the measured mode each runtime is held against
    "torch-cuda-graph": ("cuda-graph", ROOT / "runtimes" / "torch-cuda-graph.toml"),
    "torch-cuda": ("eager", "torch-cuda"),
    "tensorrt-llm": ("cuda-graph", "tensorrt-llm"),
}


def predict(model: Path, row: dict, runtime: str | Path) -> float:
    past, batch = int(row["past"]), int(row["batch"])
    if row["phase"] == "prefill":
        result = onnxroof.llm(model, "h200", prompt=int(row["prompt"]), generate=1, batch=batch, runtime=runtime)
        return result.ttft_s
    result = onnxroof.llm(model, "h200", prompt=past, generate=2, batch=batch, runtime=runtime)
    return result.decode_first_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(ROOT / "data" / "gpu" / "run2" / "decoder.csv"))
    parser.add_argument("--json")
    args = parser.parse_args()
    with open(args.data, newline="") as handle:
        rows = list(csv.DictReader(handle))
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        models = {
            name: build_llama_shaped(Path(tmp) / f"{name}.onnx", dtype=TensorProto.FLOAT16, kv_cache=True, **shape)
            for name, shape in SHAPES.items()
        }
        print(
            "| model | phase | batch | past / prompt | measured mode | measured ms | runtime | predicted ms | error |"
        )
        print("|---|---|--:|--:|---|--:|---|--:|--:|")
        for row in rows:
            for runtime, (mode, spec) in RUNTIMES.items():
                if row["mode"] != mode:
                    continue
                measured = float(row["time_s"])
                predicted = predict(models[row["model"]], row, spec)
                error = (predicted - measured) / measured
                tokens = row["prompt"] if row["phase"] == "prefill" else row["past"]
                print(f"| {row['model']} | {row['phase']} | {row['batch']} | {tokens} | {mode} | "
                      f"{measured * 1e3:.3f} | `{runtime}` | {predicted * 1e3:.3f} | {error:+.0%} |")  # fmt: skip
                out.append({**row, "runtime": runtime, "predicted_s": predicted, "error": error})
    for runtime in RUNTIMES:
        errors = [abs(r["error"]) for r in out if r["runtime"] == runtime]
        if errors:
            within = sum(e <= 0.2 for e in errors)
            print(f"{runtime}: {len(errors)} figures, median |error| {statistics.median(errors):.0%}, "
                  f"{within} within ±20%")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
