"""Wall time of ``onnxroof llm`` on the Llama-2-7B-shaped decoder with a KV cache, in a fresh process.

``python benchmarks/bench_llm.py [--platform a100] [--prompt 2048] [--generate 4096] [--repeat 3]``

Builds ``llama_shaped.onnx`` with ``kv_cache=True`` (32 layers, fp16, sparse external weights: nothing written)
into a temporary folder, then runs ``python -m onnxroof llm MODEL -p PLATFORM --prompt N --generate M --format
json`` ``--repeat`` times, each a new interpreter (imports, load, the prefill and three decode analyses
included), and prints each wall time and their median. Target: under 3 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

from llama_shaped import build_llama_shaped  # noqa: E402

TARGET_S = 3.0


def llm_command(model: Path, platform: str, prompt: int, generate: int) -> list[str]:
    """``python -m onnxroof llm MODEL -p PLATFORM --prompt N --generate M --format json`` (the JSON on stdout)."""
    command = [sys.executable, "-m", "onnxroof", "llm", str(model), "-p", platform]
    return [*command, "--prompt", str(prompt), "--generate", str(generate), "--format", "json"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--platform", default="a100")
    parser.add_argument("--prompt", type=int, default=2048)
    parser.add_argument("--generate", type=int, default=4096)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryDirectory() as folder:
        model = build_llama_shaped(Path(folder) / "llama_shaped.onnx", kv_cache=True)
        command = llm_command(model, args.platform, args.prompt, args.generate)
        times, result = [], {}
        for _ in range(args.repeat):
            start = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
            times.append(time.perf_counter() - start)
            result = json.loads(done.stdout)
    median = statistics.median(times)
    print(f"onnxroof llm (7B-shaped, KV cache) on {args.platform}, prompt {args.prompt}, generate {args.generate}")
    print(f"  runs: {', '.join(f'{t:.2f} s' for t in times)}; median {median:.2f} s (target < {TARGET_S:.0f} s)")
    print(
        f"  ttft {result['ttft_s'] * 1e3:.1f} ms, tpot {result['tpot_s'] * 1e3:.2f} ms, "
        f"{result['tokens_per_s_per_sequence']:.1f} tokens/s per sequence, "
        f"KV cache {result['kv_cache_bytes'] / 1e9:.2f} GB, "
        f"{result['interpolation']} ({len(result['decode'])} decode steps analyzed)"
    )
    return 0 if median < TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
