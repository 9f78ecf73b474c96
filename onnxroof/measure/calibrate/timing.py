"""Timing onnxruntime runs for calibration: session options, interleaved blocks of runs, and :class:`OpTimer`,
the time of one op from a chain of 1 against a chain of 1 + K.

Time per op: a chain of ``K`` identical ops (or ``K`` independent copies fanned out from one input) is timed
against a chain of one, in alternating blocks so that drift on a shared host cancels:
``time per op = (t(1 + K) − t(1)) / K``. Ops slower than :data:`LONG_OP_S` are timed alone (time − run
overhead). Each block (~40 ms of runs) gives its median; a figure is the :data:`BLOCK_QUANTILE` quantile of its
block medians.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence

import numpy as np
import onnx

from onnxroof.core.frozen import frozen_dataclass

LONG_OP_S = 2e-3
"""Ops slower than this are timed alone (a chain would only add noise)."""
BLOCK_QUANTILE = 0.25
"""Which block median a figure takes (see :class:`OpTimer`): 0.25, the least-contended quarter."""
CHAIN_FLOOR = 0.25
"""A chained op's estimate is at least this share of ``t(1 + K) / (1 + K)`` (:meth:`OpTimer._estimate`)."""


def session_options(threads: int, *, profile: bool = False):
    """The onnxruntime session options every measurement uses: ``threads`` intra-op threads, sequential
    execution, every graph optimization (what the ``ort-cpu`` fusion profile mirrors), errors only."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3
    options.enable_profiling = profile
    return options


def default_threads() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def run_blocks(
    runs: Sequence[Callable[[], object]], budget_s: float, min_runs: int = 3, block_s: float = 0.04
) -> list[list[list[float]]]:
    """Time each callable in turn, in blocks of about ``block_s`` seconds, until ``budget_s`` has passed and
    each has ``min_runs`` timed runs. Returns, per callable, the list of blocks, each a list of run times.

    The first run of a block is dropped when the block has three or more (it pays for the other callable's
    threads still spinning). Alternating blocks make slow drift of a shared host hit every callable alike.
    """
    for run in runs:
        run()
    blocks: list[list[list[float]]] = [[] for _ in runs]
    end = time.perf_counter() + budget_s
    while True:
        for run, sink in zip(runs, blocks, strict=True):
            block_end = time.perf_counter() + block_s
            local = []
            while True:
                start = time.perf_counter()
                run()
                stop = time.perf_counter()
                local.append(stop - start)
                if stop >= block_end:
                    break
            sink.append(local[1:] if len(local) >= 3 else local)
        if time.perf_counter() >= end and all(sum(len(b) for b in sink) >= min_runs for sink in blocks):
            return blocks


def _pooled(blocks: list[list[float]]) -> list[float]:
    return [t for block in blocks for t in block]


@frozen_dataclass(slots=True)
class Timing:
    """The time of one op (see :class:`OpTimer`), the range of its per-round estimates, and how it was taken."""

    seconds: float
    low: float
    high: float
    runs: int
    chain: int  # K: ops timed against a chain of one (1: timed alone, less the run overhead)
    rounds: int = 1
    blocks: int = 0

    def describe(self) -> str:
        how = f"chain of 1 vs 1 + {self.chain}" if self.chain > 1 else "timed alone"
        spread = f"{fmt_time(self.low)}–{fmt_time(self.high)}"
        return (
            f"{how}; {self.runs} runs in {self.blocks} blocks over {self.rounds} interleaved round(s), "
            f"25th percentile of the block medians (per-round range {spread})"
        )


def fmt_time(seconds: float) -> str:
    return f"{seconds * 1e6:.3g} µs" if seconds < 1e-3 else f"{seconds * 1e3:.3g} ms"


def _session(model: onnx.ModelProto, threads: int):
    import onnxruntime as ort

    return ort.InferenceSession(
        model.SerializeToString(),
        session_options(threads),
        providers=["CPUExecutionProvider"],
        disabled_optimizers=["CommonSubexpressionElimination"],  # fan-out probes repeat one op on purpose
    )


class OpTimer:
    """One measurement: the time of one op of the model family ``build(k)`` (``k`` copies of the op).

    A pilot run decides how: ops slower than a few milliseconds are timed alone (time − run overhead); faster
    ones as a chain of 1 against a chain of ``1 + K`` in alternating blocks, ``(t(1 + K) − t(1)) / K``.
    :meth:`measure` adds one round of blocks; rounds of all items are interleaved, so that each item's blocks
    are spread over the whole calibration. A block is ~40 ms of repeated runs and gives one value, the median
    of its runs. The time is taken from the least-contended quarter of the blocks (their 25th percentile,
    :data:`BLOCK_QUANTILE`): on a shared host other work only ever slows a block down, so the fast blocks are
    the host's own speed and the slow ones are someone else's load.
    """

    def __init__(
        self,
        what: str,
        build: Callable[[int], onnx.ModelProto],
        feeds: dict[str, np.ndarray],
        threads: int,
        budget_s: float,
        chain: int | None = None,
    ) -> None:
        self.what = what
        single = _session(build(1), threads)
        self._single = _caller(single, feeds)
        self._single()
        pilot = min(_timed(self._single) for _ in range(3))
        self.chain = 1
        self._longer: Callable[[], object] | None = None
        if chain is None and pilot < LONG_OP_S:
            target = max(2e-4, min(2e-3, budget_s / 40))  # the longer chain's extra time per run
            chain = int(min(64, max(2, math.ceil(target / max(pilot, 1e-7)))))
            chain += chain % 2  # even, so alternating chains end on the same shape
        if chain is not None and chain > 1:
            self.chain = chain
            self._longer = _caller(_session(build(1 + chain), threads), feeds)
        # per round: block medians of t(1), block medians of t(1 + K) (empty when timed alone), runs
        self._rounds: list[tuple[list[float], list[float], int]] = []

    def measure(self, budget_s: float) -> None:
        if self._longer is None:
            (blocks,) = run_blocks([self._single], budget_s, min_runs=3)
            self._rounds.append(([float(np.median(b)) for b in blocks], [], len(_pooled(blocks))))
            return
        blocks_1, blocks_k = run_blocks([self._single, self._longer], budget_s, min_runs=5)
        runs = min(len(_pooled(blocks_1)), len(_pooled(blocks_k)))
        self._rounds.append(([float(np.median(b)) for b in blocks_1], [float(np.median(b)) for b in blocks_k], runs))

    def reset(self) -> None:
        """Forget the rounds measured so far."""
        self._rounds.clear()

    def _estimate(self, blocks_1: list[float], blocks_k: list[float], run_overhead_s: float) -> float:
        """``(t(1 + K) − t(1)) / K``, never below ``CHAIN_FLOOR · t(1 + K) / (1 + K)``.

        A chain of ``1 + K`` ops runs at least ``(1 + K) · t_op``, so ``t(1 + K) / (1 + K)`` bounds the op's time
        from above; the difference of two noisy block quantiles can fall far below it (even to 0) when load slowed
        the chain of 1 more than the longer one, which made a 2 GFLOP MatMul look 60 ns long (a 3·10¹⁶ FLOP/s
        peak) on a busy host. The floor keeps the estimate within :data:`CHAIN_FLOOR` of the bound: binding only
        when the difference says the op costs less than a quarter of its share of the chain, which run overhead
        alone cannot explain for the chains chosen here (K ≥ 2, the longer chain's extra time ≥ 0.2 ms).
        """
        t1 = float(np.quantile(blocks_1, BLOCK_QUANTILE))
        if self.chain == 1:
            return max(t1 - run_overhead_s, 1e-9)
        tk = float(np.quantile(blocks_k, BLOCK_QUANTILE))
        return max((tk - t1) / self.chain, CHAIN_FLOOR * tk / (1 + self.chain), 1e-9)

    def timing(self, run_overhead_s: float) -> Timing:
        """The time per op (all rounds' blocks), with the range of the per-round estimates."""
        every_1 = [t for b1, _, _ in self._rounds for t in b1]
        every_k = [t for _, bk, _ in self._rounds for t in bk]
        value = self._estimate(every_1, every_k, run_overhead_s)
        per_round = [self._estimate(b1, bk, run_overhead_s) for b1, bk, _ in self._rounds]
        runs = sum(r for _, _, r in self._rounds)
        blocks = len(every_1)
        return Timing(value, min(per_round), max(per_round), runs, self.chain, len(per_round), blocks)

    def single_time(self) -> float:
        """Time of one run of the one-op model (25th percentile of its block medians)."""
        return float(np.quantile([t for b1, _, _ in self._rounds for t in b1], BLOCK_QUANTILE))


def _caller(session, feeds: dict[str, np.ndarray]) -> Callable[[], object]:
    def call() -> object:
        return session.run(None, feeds)

    return call


def _timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start
