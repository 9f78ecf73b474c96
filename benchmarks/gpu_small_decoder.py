"""Measure a small decoder on a real GPU: the Hugging Face model behind samples/llm/genai_llama_fp32 (and a
Llama-2-7B-shaped one, random weights), batch 1, in PyTorch eager and replayed as a CUDA graph.

``python benchmarks/gpu_small_decoder.py [--out results.json]`` on a machine with CUDA, PyTorch and transformers
(the device machine some sessions are lent; never needed by the test suite). Prints and writes, per model and
dtype: time to first token for a 128-token prompt (prefill, no past) and the time of one decode step at past 127
(one token), each the median of 20 timed runs after 5 warm-ups, with ``torch.cuda.synchronize`` around each run;
the decode step also as a CUDA graph (what TensorRT-LLM and ORT GenAI do: launches paid once per step).

Why PyTorch and not onnxruntime-gpu: the device image has onnxruntime for CPU only and cannot reach a package
registry, and the onnxruntime-gpu wheel (~300 MB) is larger than what may be carried to it (64 MiB). The
comparison in docs/accuracy.md says what this changes: eager PyTorch pays a Python dispatch per op on top of the
kernel launch, which onnxroof models as the platform's per-kernel launch overhead.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

SMALL = {  # samples/llm/reference.json: genai_llama_fp32's Hugging Face config
    "hidden_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 256,
    "vocab_size": 1000,
    "max_position_embeddings": 512,
}
LLAMA2_7B = {
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "intermediate_size": 11008,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
}
PROMPT, PAST = 128, 127


def _median_ms(run, repeats: int = 20, warmup: int = 5) -> float:
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def measure(name: str, config: dict, dtype: torch.dtype) -> dict:
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    with torch.device("cuda"):  # built on the GPU in its dtype: a 7B model never passes through host memory
        model = LlamaForCausalLM(LlamaConfig(**config, attn_implementation="eager")).eval()
    torch.set_default_dtype(previous)
    prompt = torch.randint(0, config["vocab_size"], (1, PROMPT), device="cuda")
    with torch.inference_mode():
        ttft = _median_ms(lambda: model(prompt, use_cache=True))
        past = model(prompt[:, :PAST], use_cache=True).past_key_values
        token = prompt[:, PAST : PAST + 1]
        position = torch.tensor([[PAST]], device="cuda")

        def step():
            past.crop(PAST)  # the cache back to 127 tokens: every timed step sees the same past
            return model(token, past_key_values=past, position_ids=position, use_cache=True)

        decode = _median_ms(step)
        graph_ms = None
        try:
            static = torch.cuda.CUDAGraph()
            step()
            torch.cuda.synchronize()
            with torch.cuda.graph(static):
                model(token, past_key_values=past, position_ids=position, use_cache=True)
            graph_ms = _median_ms(static.replay)
        except Exception as exc:  # a cache object that cannot be captured: say so, keep the eager figure
            graph_ms = f"not captured: {type(exc).__name__}: {exc}"[:200]
    return {
        "model": name,
        "dtype": str(dtype).removeprefix("torch."),
        "prompt": PROMPT,
        "past": PAST,
        "ttft_ms": ttft,
        "decode_step_ms": decode,
        "decode_step_cuda_graph_ms": graph_ms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    results = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": []}
    for name, config, dtypes in (
        ("genai_llama_fp32 config", SMALL, (torch.float32, torch.float16)),
        ("llama-2-7b shape", LLAMA2_7B, (torch.float16,)),
    ):
        for dtype in dtypes:
            results["rows"].append(measure(name, config, dtype))
            torch.cuda.empty_cache()  # the model of the last row is gone with its frame
            print(json.dumps(results["rows"][-1]))
    if args.out:
        with open(args.out, "w") as out:
            json.dump(results, out, indent=2)


if __name__ == "__main__":
    main()
