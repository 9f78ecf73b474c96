"""A long mutation-fuzz campaign: figures per mutation family, and every crash site with its file:line.

``python benchmarks/fuzz_campaign.py [--count 2000] [--seed 0] [--timeout 60] [--memory-gb 4]``

Runs ``--count`` mutants of ``tests/fuzz.py`` through ``onnxroof report FILE -f json -o OUT`` in-process. The
seed models: the samples, small ``onnx.helper`` models (CNN, LSTM, Scan, If, Loop...) and the real LLM,
transformer and control-flow files (GenAI int4 Llama and Qwen2, the Optimum merged decoder, the opset-23
decoder layer, the ORT-optimized BERT, Silero VAD). Each is mutated in one family: attributes, dims, dtypes,
edges, op types, opsets, bytes, external data, nesting, rank 0, input dims, complex values, and issue 25's
attribute removal, op types swapped into contrib ops, huge attribute values, huge dims. It prints per family
how many ended in each exit code, then every violation of the contract — exit 3 (an internal error: its crash
site, the innermost onnxroof frame of a ``--debug`` rerun; a MemoryError past ``--memory-gb`` of address space
is one), a hang (a run past ``--timeout`` seconds), more than one stderr line on failure, an output file left
on failure — counted by site. Exit status 1 when any violation was found. Needs no network.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fuzz import FAMILIES, mutants, run_mutant  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=2000, help="mutants to run (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="the campaign's seed (default 0)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before a run is a hang (default 60)")
    parser.add_argument("--memory-gb", type=float, default=4.0, help="address-space limit, GiB (default 4)")
    args = parser.parse_args(argv)
    limit = int(args.memory_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))

    codes: dict[str, Counter[int]] = {family: Counter() for family in FAMILIES}
    sites: Counter[str] = Counter()
    examples: dict[str, str] = {}
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="onnxroof-fuzz-") as folder:
        for index, mutant in enumerate(mutants(args.seed, args.count)):
            outcome = run_mutant(mutant, Path(folder) / str(index % 8), args.timeout)
            codes[mutant.family][outcome.exit_code] += 1
            failed = outcome.exit_code not in (0, 1)
            problem = ""
            if outcome.crash_site == "hang":
                problem = "hang"
            elif outcome.exit_code not in (0, 1, 2):
                problem = f"exit {outcome.exit_code} at {outcome.crash_site or '?'}"
            elif failed and outcome.stderr_lines != 1:
                problem = f"{outcome.stderr_lines} stderr lines on failure"
            elif outcome.left_output:
                problem = "output file left on failure"
            if problem:
                sites[problem] += 1
                examples.setdefault(problem, f"{mutant.name} -> {outcome.message[:160]}")
    elapsed = time.perf_counter() - start

    print(f"{args.count} mutants (seed {args.seed}) in {elapsed:.1f} s ({1000 * elapsed / args.count:.0f} ms each)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(f"peak RSS of the campaign process: {peak:.0f} MiB (every mutant runs in it: a bound on each run's)")
    print(f"{'family':<12} {'mutants':>7} {'exit 0':>7} {'exit 1':>7} {'exit 2':>7} {'exit 3':>7} {'other':>6}")
    for family, counts in codes.items():
        other = sum(c for code, c in counts.items() if code not in (0, 1, 2, 3))
        print(
            f"{family:<12} {sum(counts.values()):>7} {counts[0]:>7} {counts[1]:>7} {counts[2]:>7} "
            f"{counts[3]:>7} {other:>6}"
        )
    if not sites:
        print("no violations: every mutant ended in exit 0/1/2, failures in one stderr line, no partial file")
        return 0
    print(f"\n{sum(sites.values())} violation(s) at {len(sites)} site(s):")
    for site, count in sites.most_common():
        print(f"  {count:>5}  {site}\n         e.g. {examples[site]}")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
