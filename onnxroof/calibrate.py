"""Measure this host with onnxruntime micro-benchmarks and write a platform file marked as measured.

``onnxroof calibrate`` runs small models built in memory with ``onnx.helper``, on the CPU execution provider,
threads pinned with ``SessionOptions.intra_op_num_threads``, every graph optimization on (the ``ort-cpu``
fusion profile is what the file declares). Each figure comes from the medians of blocks of repeated runs,
spread over the whole calibration in interleaved rounds (see :class:`OpTimer`); its ``source`` says what ran,
how often, and the spread.

What is measured, in order:

1. **Overheads.** A chain of 1 and of 1 + K tiny ops (``Neg`` on 16 floats). The slope is the per-kernel
   overhead (``runtime.launch_overhead_us``); the intercept, the fixed cost of one ``InferenceSession.run``
   (``runtime.run_overhead_us``).
2. **Peaks.** Large ``MatMul`` per precision onnxruntime runs on this CPU (fp32, fp16, fp64; int8 through
   ``MatMulInteger``), and a large 3×3 ``Conv`` for fp32; the fp32 peak is the faster of the two.
3. **Memory hierarchy.** Chains of ``Relu`` whose working set (one tensor read + one written) sweeps from
   64 kB to 256 MB, an empirical hierarchical roofline in the spirit of the Empirical Roofline Toolkit:
   bandwidth = bytes / (time per op − per-kernel overhead). The largest working sets give the DRAM bandwidth;
   plateaus above it give ``[memory] cache_levels``.
4. **Efficiency per op class.** Representative ops of each class (:data:`onnxroof.platform.EFFICIENCY_CLASSES`)
   at sizes typical of small CNNs and transformers. Each probe's FLOPs and bytes come from onnxroof's own cost
   rules; its efficiency is roofline time / (measured time − per-kernel overhead), with the roofline drawn from
   the measured peak and hierarchy; the class's figure is the median over its probes, capped at 1 (FRAME-style
   derating, ``[efficiency]``).

Time per op: a chain of ``K`` identical ops (or ``K`` independent copies fanned out from one input, for ops
that change the shape) is timed against a chain of one, in alternating blocks so that drift on a shared host
cancels: time per op = (t(1 + K) − t(1)) / K. Ops that take more than a few milliseconds are timed alone
(time − run overhead). Each block (~40 ms of runs) gives its median; every item is measured in 4 rounds
interleaved with all the others (1 with ``--quick``), and its time is the 25th percentile of its block
medians: on a shared host, other work only ever slows a block down, so the least-contended quarter of the
blocks is this host's own speed. Predictions made with the file are therefore for an uncontended host.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform as _pyplatform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxroof.errors import OnnxroofError

Progress = Callable[[str, int, int], None]
"""``progress(what, done, total)``: called before each measurement (``done`` of ``total`` finished)."""

OPSET = 17
IR_VERSION = 8
_LONG_OP_S = 2e-3  # ops slower than this are timed alone (a chain would only add noise)
_CAP_EFFICIENCY = 1.0
_FLOOR_EFFICIENCY = 0.001
_LEVEL_DROP = 1.5  # a bandwidth drop by more than this factor starts the next memory level
_MAX_LEVELS = 3
_OVERHEAD_CHAIN = 64
BLOCK_QUANTILE = 0.25
"""Which block median a figure takes (see :class:`OpTimer`): 0.25, the least-contended quarter."""


# ----------------------------------------------------------------------------------------------- timing


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


@dataclass(frozen=True, slots=True)
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
        spread = f"{_us(self.low)}–{_us(self.high)}"
        return (
            f"{how}; {self.runs} runs in {self.blocks} blocks over {self.rounds} interleaved round(s), "
            f"25th percentile of the block medians (per-round range {spread})"
        )


def _us(seconds: float) -> str:
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
        if chain is None and pilot < _LONG_OP_S:
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
        t1 = float(np.quantile(blocks_1, BLOCK_QUANTILE))
        if self.chain == 1:
            return max(t1 - run_overhead_s, 1e-9)
        return max((float(np.quantile(blocks_k, BLOCK_QUANTILE)) - t1) / self.chain, 1e-9)

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


# ---------------------------------------------------------------------------------------------- models

_NP_OF = {
    TensorProto.FLOAT: np.float32,
    TensorProto.FLOAT16: np.float16,
    TensorProto.DOUBLE: np.float64,
    TensorProto.UINT8: np.uint8,
    TensorProto.INT8: np.int8,
    TensorProto.INT64: np.int64,
}


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[tuple[str, int, Sequence[int]]],
    outputs: list[tuple[str, int]],
    initializers: list[TensorProto],
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "calibrate",
        [helper.make_tensor_value_info(name, dtype, list(shape)) for name, dtype, shape in inputs],
        [helper.make_tensor_value_info(name, dtype, None) for name, dtype in outputs],
        initializer=initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="onnxroof")
    model.ir_version = IR_VERSION
    return onnx.shape_inference.infer_shapes(model)  # fills the outputs' shapes, which the checker wants


NodeMaker = Callable[[int, str, str], onnx.NodeProto | list[onnx.NodeProto]]


@dataclass(frozen=True)
class Probe:
    """One micro-benchmark: ``k`` copies of an op, chained (same shape in and out) or fanned out from one input."""

    name: str
    op_class: str
    shape: tuple[int, ...]
    node: NodeMaker  # (copy index, input name, output name) -> the node(s) of one copy
    initializers: Callable[[], list[TensorProto]] = field(default=lambda: [])
    fanout: bool = False
    dtype: int = TensorProto.FLOAT
    out_dtype: int | None = None
    extra_inputs: tuple[tuple[str, int, tuple[int, ...]], ...] = ()
    cost: tuple[float, float] | None = None  # (FLOPs, bytes) per copy, for ops onnxroof has no rule for

    def build(self, copies: int) -> onnx.ModelProto:
        nodes = []
        out_type = self.out_dtype or self.dtype
        if self.fanout:
            outputs = [(f"y{i}", out_type) for i in range(copies)]
            nodes = [n for i in range(copies) for n in _listed(self.node(i, "x", f"y{i}"))]
        else:
            previous = "x"
            for i in range(copies):
                out = "y" if i == copies - 1 else f"t{i}"
                nodes.extend(_listed(self.node(i, previous, out)))
                previous = out
            outputs = [("y", out_type)]
        inputs = [("x", self.dtype, self.shape), *self.extra_inputs]
        return _model(nodes, inputs, outputs, self.initializers())

    def feeds(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        feeds = {"x": _random(self.dtype, self.shape, rng)}
        for name, dtype, shape in self.extra_inputs:
            feeds[name] = _random(dtype, shape, rng)
        return feeds


def _listed(made: onnx.NodeProto | list[onnx.NodeProto]) -> list[onnx.NodeProto]:
    return made if isinstance(made, list) else [made]


def _gelu(i: int, src: str, dst: str) -> list[onnx.NodeProto]:
    """erf-GELU as PyTorch exports it: x · 0.5 · (1 + erf(x / √2)); onnxruntime fuses it into Gelu."""
    t = f"g{i}_"
    return [
        helper.make_node("Div", [src, "sqrt2"], [t + "d"]),
        helper.make_node("Erf", [t + "d"], [t + "e"]),
        helper.make_node("Add", [t + "e", "one"], [t + "a"]),
        helper.make_node("Mul", [src, t + "a"], [t + "m"]),
        helper.make_node("Mul", [t + "m", "half"], [dst]),
    ]


def _skip_layernorm(i: int, src: str, dst: str) -> list[onnx.NodeProto]:
    """Residual Add + LayerNormalization on 3-D tensors; onnxruntime fuses it into SkipLayerNormalization."""
    return [
        helper.make_node("Add", [src, "r"], [f"s{i}"]),
        helper.make_node("LayerNormalization", [f"s{i}", "g", "b"], [dst], axis=-1),
    ]


def _scalar(name: str, value: float) -> Callable[[], TensorProto]:
    return lambda: _init(name, np.array(value, dtype=np.float32))


def _random(dtype: int, shape: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    np_type = _NP_OF[dtype]
    if np.issubdtype(np_type, np.integer):
        return rng.integers(0, 8, size=tuple(shape)).astype(np_type)
    count = int(np.prod(shape))
    if count > 1 << 22:  # large streaming inputs: a constant is as good and much faster to make
        return np.full(tuple(shape), 0.5, dtype=np_type)
    return rng.standard_normal(tuple(shape)).astype(np_type)


def _init(name: str, array: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(array, name)


def _weights(
    name: str, shape: Sequence[int], fan_in: int, dtype=np.float32, seed: int = 0
) -> Callable[[], TensorProto]:
    def make() -> TensorProto:
        rng = np.random.default_rng(seed)
        return _init(name, (rng.standard_normal(tuple(shape)) / math.sqrt(fan_in)).astype(dtype))

    return make


def _inits(*makers: Callable[[], TensorProto]) -> Callable[[], list[TensorProto]]:
    return lambda: [make() for make in makers]


def _unary(op: str, **attrs) -> NodeMaker:
    return lambda i, src, dst: helper.make_node(op, [src], [dst], name=f"{op}_{i}", **attrs)


def _with(op: str, *others: str, **attrs) -> NodeMaker:
    return lambda i, src, dst: helper.make_node(op, [src, *others], [dst], name=f"{op}_{i}", **attrs)


def _alternating(op: str, first: str, second: str, **attrs) -> NodeMaker:
    return lambda i, src, dst: helper.make_node(op, [src, first if i % 2 == 0 else second], [dst], **attrs)


def matmul_probe(m: int, k: int, n: int) -> Probe:
    """A chain X[m,k]·W[k,n]·W'[n,k]·... (square when k == n)."""
    if k == n:
        weights = _inits(_weights("W", (k, k), k))
        return Probe(f"MatMul {m}×{k}·{k}×{n}", "matmul", (m, k), _with("MatMul", "W"), weights)
    return Probe(
        f"MatMul {m}×{k}·{k}×{n} and back",
        "matmul",
        (m, k),
        _alternating("MatMul", "W1", "W2"),
        _inits(_weights("W1", (k, n), k), _weights("W2", (n, k), n, seed=1)),
    )


def _conv(c: int, hw: int, kernel: int = 3, group: int = 1, c_mid: int | None = None) -> Probe:
    pad = kernel // 2
    attrs = {"pads": [pad] * 4, "group": group}
    kind = "depthwise" if group > 1 else "conv"
    if c_mid is None:
        return Probe(
            f"Conv {kernel}×{kernel} {c}→{c} {hw}×{hw}" + (f" group {group}" if group > 1 else ""),
            kind,
            (1, c, hw, hw),
            _with("Conv", "W", **attrs),
            _inits(_weights("W", (c, c // group, kernel, kernel), c // group * kernel * kernel)),
        )
    return Probe(
        f"Conv {kernel}×{kernel} {c}→{c_mid}→{c} {hw}×{hw}",
        kind,
        (1, c, hw, hw),
        _alternating("Conv", "W1", "W2", **attrs),
        _inits(
            _weights("W1", (c_mid, c, kernel, kernel), c * kernel * kernel),
            _weights("W2", (c, c_mid, kernel, kernel), c_mid * kernel * kernel, seed=1),
        ),
    )


def _ones(name: str, shape: Sequence[int], value: float = 1.0) -> Callable[[], TensorProto]:
    return lambda: _init(name, np.full(tuple(shape), value, dtype=np.float32))


def _zeros(name: str, shape: Sequence[int]) -> Callable[[], TensorProto]:
    return _ones(name, shape, 0.0)


def _probes(quick: bool) -> list[Probe]:
    """The efficiency probes: a few per op class, at sizes typical of small CNNs and transformers."""
    bn = ("scale", "bias", "mean", "var")
    probes = [
        matmul_probe(128, 64, 64),
        matmul_probe(128, 64, 256),
        matmul_probe(1, 1024, 1024),
        matmul_probe(256, 256, 256),
        _conv(16, 32),
        _conv(64, 56),
        _conv(64, 28, kernel=1, c_mid=256),
        _conv(256, 14),
        _conv(32, 32, group=32),
        _conv(128, 28, group=128),
        Probe(
            "Add [1,64,56,56] + constant",
            "elementwise",
            (1, 64, 56, 56),
            _with("Add", "c"),
            _inits(_ones("c", (1, 64, 56, 56))),
        ),
        Probe("Relu [1,16,32,32]", "elementwise", (1, 16, 32, 32), _unary("Relu")),
        Probe("Mul [128,256] × constant", "elementwise", (128, 256), _with("Mul", "c"), _inits(_ones("c", (256,)))),
        Probe("Sigmoid [128,256]", "activation", (128, 256), _unary("Sigmoid")),
        Probe("Erf [128,256]", "activation", (128, 256), _unary("Erf")),
        Probe(
            "erf-GELU [128,256]",
            "activation",
            (128, 256),
            _gelu,
            _inits(_scalar("sqrt2", math.sqrt(2.0)), _scalar("one", 1.0), _scalar("half", 0.5)),
        ),
        Probe(
            "LayerNormalization [128,64]",
            "normalization",
            (128, 64),
            _with("LayerNormalization", "g", "b", axis=-1),
            _inits(_ones("g", (64,)), _zeros("b", (64,))),
        ),
        Probe(
            "LayerNormalization [128,768]",
            "normalization",
            (128, 768),
            _with("LayerNormalization", "g", "b", axis=-1),
            _inits(_ones("g", (768,)), _zeros("b", (768,))),
        ),
        Probe(
            "Add + LayerNormalization [1,128,64]",
            "normalization",
            (1, 128, 64),
            _skip_layernorm,
            _inits(_ones("g", (64,)), _zeros("b", (64,))),
            extra_inputs=(("r", TensorProto.FLOAT, (1, 128, 64)),),
        ),
        Probe(
            "BatchNormalization [1,64,56,56]",
            "elementwise",
            (1, 64, 56, 56),
            _with("BatchNormalization", *bn),
            _inits(_ones("scale", (64,)), _zeros("bias", (64,)), _zeros("mean", (64,)), _ones("var", (64,))),
        ),
        Probe("LRN size 5 [1,64,56,56]", "lrn", (1, 64, 56, 56), _unary("LRN", size=5)),
        Probe("Softmax [4,128,128]", "softmax", (4, 128, 128), _unary("Softmax", axis=-1)),
        Probe("Softmax [1,1000]", "softmax", (1, 1000), _unary("Softmax", axis=-1)),
        Probe(
            "MaxPool 3×3 s2 [1,64,112,112]",
            "pooling",
            (1, 64, 112, 112),
            _unary("MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
            fanout=True,
        ),
        Probe("GlobalAveragePool [1,512,7,7]", "pooling", (1, 512, 7, 7), _unary("GlobalAveragePool"), fanout=True),
        Probe(
            "AveragePool 3×3 s1 [1,64,28,28]",
            "pooling",
            (1, 64, 28, 28),
            _unary("AveragePool", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        ),
        Probe(
            "ReduceMean last axis [128,256]",
            "reduction",
            (128, 256),
            _unary("ReduceMean", axes=[-1], keepdims=1),
            fanout=True,
        ),
        Probe(
            "Transpose [1,128,4,16] (0,2,1,3)",
            "movement",
            (1, 128, 4, 16),
            _unary("Transpose", perm=[0, 2, 1, 3]),
            fanout=True,  # chained, onnxruntime would cancel each pair of transposes
        ),
        Probe(
            "Concat 2×[1,64,28,28]",
            "movement",
            (1, 64, 28, 28),
            lambda i, src, dst: helper.make_node("Concat", [src, src], [dst], axis=1),
            fanout=True,
        ),
        Probe(
            "Gather 128 rows of [1000,64]",
            "indexing",
            (1, 128),
            lambda i, src, dst: helper.make_node("Gather", ["table", src], [dst], axis=0),
            _inits(_weights("table", (1000, 64), 1)),
            fanout=True,
            dtype=TensorProto.INT64,
            out_dtype=TensorProto.FLOAT,
        ),
        Probe(
            "LSTM hidden 32, 32 steps",
            "recurrent",
            (32, 1, 16),
            lambda i, src, dst: helper.make_node("LSTM", [src, "W", "R", "B"], ["", dst], hidden_size=32),
            _inits(_weights("W", (1, 128, 16), 16), _weights("R", (1, 128, 32), 32, seed=1), _zeros("B", (1, 256))),
            fanout=True,
        ),
    ]
    if not quick:
        return probes
    first: dict[str, Probe] = {}
    for probe in probes:
        first.setdefault(probe.op_class, probe)
    return list(first.values())


def _typed_matmul_probe(n: int, np_dtype: type, onnx_dtype: int, label: str) -> Probe:
    """A square n×n·n×n MatMul probe in a non-fp32 float type (the peak of that precision)."""
    return Probe(
        f"MatMul {n}×{n}·{n}×{n} {label}",
        "matmul",
        (n, n),
        _with("MatMul", "W"),
        _inits(_weights("W", (n, n), n, dtype=np_dtype)),
        dtype=onnx_dtype,
    )


def _peak_probes(quick: bool) -> list[tuple[str, Probe]]:
    """(precision, probe) for the peak measurements: large MatMuls, and a large Conv for fp32."""
    n = 256 if quick else 1024
    fp64 = 128 if quick else 512
    return [
        ("fp32", matmul_probe(n, n, n)),
        ("fp32", _conv(32 if quick else 128, 28)),
        ("fp64", _typed_matmul_probe(fp64, np.float64, TensorProto.DOUBLE, "fp64")),
        ("fp16", _typed_matmul_probe(n, np.float16, TensorProto.FLOAT16, "fp16")),
        (
            "int8",
            Probe(
                f"MatMulInteger {n}×{n}·{n}×{n} u8·s8",
                "matmul",
                (n, n),
                _with("MatMulInteger", "W"),
                lambda: [_init("W", np.random.default_rng(0).integers(-8, 8, (n, n)).astype(np.int8))],
                fanout=True,
                dtype=TensorProto.UINT8,
                out_dtype=TensorProto.INT32,
                cost=(2.0 * n**3, 6.0 * n * n),
            ),
        ),
    ]


def stream_probe(elements: int) -> Probe:
    return Probe(f"Relu [{elements}]", "elementwise", (elements,), _unary("Relu"))


def tiny_probe() -> Probe:
    return Probe("Neg [16]", "elementwise", (16,), _unary("Neg"))


def _sweep_sizes(quick: bool) -> list[int]:
    """Working sets (bytes: one fp32 tensor read + one written) of the bandwidth sweep."""
    if quick:
        return [2**18, 2**21, 2**24, 2**26]
    return [2**k for k in range(16, 29)]  # 64 kB .. 256 MB


# ------------------------------------------------------------------------------------------ the result


@dataclass(frozen=True, slots=True)
class Figure:
    value: float
    source: str


@dataclass(frozen=True, slots=True)
class ProbeResult:
    name: str
    op_class: str
    flops: float
    bytes: float
    timing: Timing
    roof_s: float
    efficiency: float


@dataclass(frozen=True)
class Calibration:
    """Everything ``calibrate`` measured, and the platform figures derived from it (base SI units)."""

    name: str
    cpu: str
    threads: int
    onnxruntime: str
    date: str
    quick: bool
    duration_s: float
    peaks: dict[str, Figure]  # precision -> FLOP/s
    dram_bandwidth: Figure  # B/s
    cache_levels: tuple[tuple[float, Figure], ...]  # (size bytes, bandwidth B/s)
    launch_overhead: Figure  # s
    run_overhead: Figure  # s
    efficiency: dict[str, Figure]
    sweep: tuple[tuple[float, float, Timing], ...]  # (working set bytes, bandwidth B/s, timing)
    probes: tuple[ProbeResult, ...]

    def ridge(self, precision: str = "fp32") -> float:
        return self.peaks[precision].value / self.dram_bandwidth.value

    def to_toml(self) -> str:
        """The platform file: loads with :func:`onnxroof.platform.load_platform`."""
        from onnxroof import __version__

        def fig(value: float, source: str) -> str:
            return f"{{ value = {_num(value)}, source = {_str(source)} }}"

        sweep = "; ".join(f"{_mb(ws)} MB: {bw / 1e9:.3g} GB/s" for ws, bw, _ in self.sweep)
        lines = [
            "# Written by `onnxroof calibrate`: every figure measured on this host with onnxruntime.",
            "schema = 1",
            f"name = {_str(self.name)}",
            f"title = {_str(f'{self.cpu}, measured ({_threads(self.threads)}, onnxruntime {self.onnxruntime})')}",
            'kind = "cpu"',
            'fusion_profile = "ort-cpu"',
            "measured = true",
            "notes = "
            + _str(
                "Measured by onnxroof calibrate"
                + (" --quick (short runs: indicative only)" if self.quick else "")
                + ". Peaks, bandwidths and overheads are what onnxruntime achieved on this host, not datasheet "
                "figures; [efficiency] derates each op class to what its representative ops achieved. "
                "Re-run after changing the host, the thread count or the onnxruntime version."
            ),
            "",
            "[measurement]",
            f"date = {_str(self.date)}",
            f"onnxruntime = {_str(self.onnxruntime)}",
            f"onnxroof = {_str(__version__)}",
            f"threads = {self.threads}",
            f"cpu = {_str(self.cpu)}",
            f"quick = {'true' if self.quick else 'false'}",
            f"duration_s = {self.duration_s:.1f}",
            f"bandwidth_sweep = {_str(sweep)}",
            "",
            "[peak_tflops]",
        ]
        lines += [f"{p} = {fig(f.value / 1e12, f.source)}" for p, f in self.peaks.items()]
        dram = self.dram_bandwidth
        lines += ["", "[memory]", f"dram_bandwidth_gbps = {fig(dram.value / 1e9, dram.source)}"]
        if self.cache_levels:
            largest, _ = self.cache_levels[-1]
            lines.append(
                f"onchip_mb = {fig(largest / 1e6, 'measured: the largest working set of the last cache level above')}"
            )
            lines.append("cache_levels = [")
            for size, f in self.cache_levels:
                lines.append(
                    f"    {{ size_mb = {_num(size / 1e6)}, bandwidth_gbps = {_num(f.value / 1e9)}, "
                    f"source = {_str(f.source)} }},"
                )
            lines.append("]")
        lines += [
            "",
            "[runtime]",
            f"launch_overhead_us = {fig(self.launch_overhead.value * 1e6, self.launch_overhead.source)}",
            f"run_overhead_us = {fig(self.run_overhead.value * 1e6, self.run_overhead.source)}",
        ]
        if self.efficiency:
            lines += ["", "[efficiency]"]
            lines += [f"{c} = {fig(f.value, f.source)}" for c, f in self.efficiency.items()]
        return "\n".join(lines) + "\n"


def _threads(count: int) -> str:
    return f"{count} thread{'s' if count != 1 else ''}"


def _num(value: float) -> str:
    return repr(float(f"{value:.6g}"))


def _str(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # a JSON string is a valid TOML basic string


def _mb(size: float) -> str:
    return f"{size / 1e6:.3g}"


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), or what Python's ``platform`` module says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _pyplatform.processor() or _pyplatform.machine() or "unknown CPU"


# ------------------------------------------------------------------------------------------ calibrate


def calibrate(
    threads: int | None = None, quick: bool = False, progress: Progress | None = None, name: str = "host"
) -> Calibration:
    """Measure this host (under a minute; ``quick``: a few seconds, indicative only) and return the figures.

    Every measurement is taken in interleaved rounds (4; 1 when ``quick``) and each figure comes from the
    least-contended quarter of its blocks of runs (see :class:`OpTimer`).
    """
    import onnxruntime as ort

    from onnxroof.platform import EFFICIENCY_CLASSES

    started = time.perf_counter()
    threads = threads or default_threads()
    if threads < 1:
        raise OnnxroofError(f"threads must be at least 1, got {threads}")
    rounds = 1 if quick else 4
    budget = 0.06 if quick else 0.18  # seconds per item per round
    rng = np.random.default_rng(0)
    threads_text = f"{threads} intra-op thread{'s' if threads > 1 else ''}"
    peak_probes = _peak_probes(quick)
    sizes = _sweep_sizes(quick)
    probes = _probes(quick)
    total = 1 + len(peak_probes) + len(sizes) + len(probes)

    def report(what: str, done: int) -> None:
        if progress is not None:
            progress(what, done, total * (rounds + 1))

    # Set up every measurement (sessions built, pilot runs), then measure them in interleaved rounds.
    done = 0
    report("per-kernel overhead: chains of tiny Neg ops", done)
    tiny = tiny_probe()
    overhead = OpTimer("overhead", tiny.build, tiny.feeds(rng), threads, budget, chain=_OVERHEAD_CHAIN)
    done += 1
    peak_items: list[tuple[str, Probe, OpTimer]] = []
    for precision, probe in peak_probes:
        report(f"peak {precision}: {probe.name}", done)
        try:
            peak_items.append((precision, probe, OpTimer(probe.name, probe.build, probe.feeds(rng), threads, budget)))
        except Exception as exc:  # onnxruntime has no CPU kernel for this precision: no peak for it
            if precision == "fp32":
                raise OnnxroofError(f"calibrate: cannot run {probe.name} in onnxruntime: {exc}") from None
        done += 1
    sweep_items: list[tuple[int, OpTimer]] = []
    for working_set in sizes:
        probe = stream_probe(working_set // 8)
        report(f"bandwidth: Relu streaming a {_mb(working_set)} MB working set", done)
        sweep_items.append((working_set, OpTimer(probe.name, probe.build, probe.feeds(rng), threads, budget)))
        done += 1
    probe_items: list[tuple[Probe, OpTimer]] = []
    for probe in probes:
        report(f"efficiency {probe.op_class}: {probe.name}", done)
        probe_items.append((probe, OpTimer(probe.name, probe.build, probe.feeds(rng), threads, budget)))
        done += 1
    items: list[tuple[str, OpTimer]] = [("per-kernel overhead", overhead)]
    items += [(f"peak {precision}: {probe.name}", item) for precision, probe, item in peak_items]
    items += [(f"bandwidth: {_mb(ws)} MB working set", item) for ws, item in sweep_items]
    items += [(f"efficiency {probe.op_class}: {probe.name}", item) for probe, item in probe_items]
    for number in range(rounds):
        for what, item in items:
            report(f"round {number + 1}/{rounds}: {what}", done)
            item.measure(budget * (3 if item is overhead else 1))
            done += 1

    # 1. overheads
    slope = overhead.timing(0.0)
    launch = Figure(
        slope.seconds,
        f"measured: slope between chains of 1 and {1 + _OVERHEAD_CHAIN} Neg ops on 16 floats, {threads_text}; "
        f"{slope.describe()}",
    )
    run_s = max(overhead.single_time() - slope.seconds, 1e-9)
    run = Figure(
        run_s,
        "measured: intercept of the same fit, the fixed cost of one InferenceSession.run (input binding, output "
        f"allocation); the 1-op model took {_us(overhead.single_time())} in all",
    )

    # 2. peaks
    peaks: dict[str, Figure] = {}
    peak_notes: dict[str, list[str]] = {}
    for precision, probe, item in peak_items:
        timing = item.timing(run_s)
        flops = _probe_cost(probe)[0]
        rate = flops / timing.seconds
        peak_notes.setdefault(precision, []).append(
            f"{probe.name}: {flops / 1e9:.3g} GFLOP in {_us(timing.seconds)} = {rate / 1e12:.4g} TFLOP/s "
            f"({timing.describe()})"
        )
        if precision not in peaks or rate > peaks[precision].value:
            peaks[precision] = Figure(rate, "")
    for precision, figure in peaks.items():
        notes = peak_notes[precision]
        best = "the faster of: " if len(notes) > 1 else ""
        peaks[precision] = Figure(
            figure.value, f"measured: onnxruntime {ort.__version__} CPU, {threads_text}; {best}" + "; ".join(notes)
        )

    # 3. memory hierarchy
    sweep: list[tuple[float, float, Timing]] = []
    for working_set, item in sweep_items:
        timing = item.timing(run_s)
        sweep.append((float(working_set), working_set / max(timing.seconds - launch.value, 1e-9), timing))
    dram, levels = _hierarchy(sweep, threads_text)

    # 4. efficiency per op class
    fp32 = peaks["fp32"].value
    results: list[ProbeResult] = []
    for probe, item in probe_items:
        timing = item.timing(run_s)
        flops, moved, cls = _probe_cost(probe)
        roof = max(flops / fp32, moved / _bandwidth_for(moved, levels, dram.value))
        spent = max(timing.seconds - launch.value, 1e-9)
        efficiency = min(_CAP_EFFICIENCY, max(_FLOOR_EFFICIENCY, roof / spent))
        results.append(ProbeResult(probe.name, cls, flops, moved, timing, roof, efficiency))
    efficiency: dict[str, Figure] = {}
    for cls in EFFICIENCY_CLASSES:
        members = [r for r in results if r.op_class == cls]
        if not members:
            continue
        value = float(np.median([r.efficiency for r in members]))
        detail = "; ".join(
            f"{r.name}: roofline {_us(r.roof_s)}, measured {_us(r.timing.seconds)} → {r.efficiency:.3g}"
            for r in members
        )
        efficiency[cls] = Figure(
            value,
            f"measured: median over {len(members)} probe(s) of roofline time ÷ (measured time − per-kernel "
            f"overhead), capped at 1; FLOPs and bytes from onnxroof's rules and its ort-cpu fusion, {threads_text}, "
            f"{rounds} round(s): {detail}",
        )
    report("done", total * (rounds + 1))
    return Calibration(
        name=name,
        cpu=cpu_model(),
        threads=threads,
        onnxruntime=ort.__version__,
        date=_dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        quick=quick,
        duration_s=time.perf_counter() - started,
        peaks=peaks,
        dram_bandwidth=dram,
        cache_levels=levels,
        launch_overhead=launch,
        run_overhead=run,
        efficiency=efficiency,
        sweep=tuple(sweep),
        probes=tuple(results),
    )


def _probe_cost(probe: Probe) -> tuple[float, float, str]:
    """(FLOPs, bytes, efficiency class) of one copy of the probe, from onnxroof's own cost rules and its
    ``ort-cpu`` fusion (the kernels onnxroof predicts for two copies, halved); the class is the one onnxroof
    gives such a kernel (:func:`onnxroof.roofline.kernel_op_class`)."""
    from onnxroof.analysis import analyze
    from onnxroof.roofline import kernel_op_class

    if probe.cost is not None:
        return (*probe.cost, probe.op_class)
    model = probe.build(2)
    analysis = analyze(model, platform="xeon-8380", fusion="ort-cpu")
    if not analysis.kernels:
        raise OnnxroofError(f"calibrate: onnxroof has no cost for the probe {probe.name}")
    kernel = analysis.kernels[0]
    anchor = model.graph.node[int(kernel.node_ids[0].split(":", 1)[0])]
    attrs = {a.name: helper.get_attribute_value(a) for a in anchor.attribute}
    channels = probe.shape[1] if len(probe.shape) > 1 else None
    cls = kernel_op_class(kernel.op_types, kernel.pattern, "", attrs, channels)
    flops = sum(k.flops for k in analysis.kernels) / 2
    moved = sum(k.bytes for k in analysis.kernels) / 2
    return flops, moved, cls


def _bandwidth_for(moved: float, levels: Sequence[tuple[float, Figure]], dram: float) -> float:
    for size, figure in levels:
        if moved <= size:
            return figure.value
    return dram


def _hierarchy(
    sweep: Sequence[tuple[float, float, Timing]], threads_text: str
) -> tuple[Figure, tuple[tuple[float, Figure], ...]]:
    """DRAM bandwidth and cache levels from the bandwidth sweep.

    DRAM: the median of the two largest working sets. Levels: starting from the fastest working set, a level
    continues while bandwidth stays within a factor 1.5 of its best point; a larger drop starts the next level.
    Each level but the last (DRAM) whose median bandwidth beats DRAM's by 20 % or more becomes a cache level,
    sized at its largest measured working set (conservative: the true capacity lies between that and the next
    point). At most three levels are kept, merging the two closest in bandwidth.
    """
    points = [(ws, bw) for ws, bw, _ in sweep]
    tail = sorted(bw for _, bw in points[-2:])
    dram_value = float(np.median(tail))
    largest = points[-1][0]
    dram = Figure(
        dram_value,
        f"measured: chains of onnxruntime Relu ops streaming working sets of {_mb(points[-2][0])} and {_mb(largest)} "
        f"MB (one fp32 tensor read + one written), {threads_text}; bytes ÷ (time per op − per-kernel overhead), "
        "median of the two",
    )
    best = max(range(len(points)), key=lambda i: points[i][1])
    plateaus: list[list[tuple[float, float]]] = [[points[best]]]
    for point in points[best + 1 :]:
        current = plateaus[-1]
        if point[1] >= max(bw for _, bw in current) / _LEVEL_DROP:
            current.append(point)
        else:
            plateaus.append([point])
    raw = [
        (max(ws for ws, _ in plateau), float(np.median([bw for _, bw in plateau])), plateau)
        for plateau in plateaus[:-1]
    ]
    raw = [level for level in raw if level[1] >= 1.2 * dram_value]
    while len(raw) > _MAX_LEVELS:
        ratios = [raw[i][1] / raw[i + 1][1] for i in range(len(raw) - 1)]
        i = int(np.argmin(ratios))
        merged = raw[i][2] + raw[i + 1][2]
        raw[i : i + 2] = [(raw[i + 1][0], float(np.median([bw for _, bw in merged])), merged)]
    levels = []
    for size, bandwidth, plateau in raw:
        points_text = ", ".join(f"{_mb(ws)} MB: {bw / 1e9:.3g} GB/s" for ws, bw in plateau)
        levels.append(
            (
                size,
                Figure(
                    bandwidth,
                    f"measured: median bandwidth of onnxruntime Relu chains over working sets {points_text} "
                    f"({threads_text}); size = the largest working set of this plateau",
                ),
            )
        )
    return dram, tuple(levels)


def write_platform(calibration: Calibration, path: str | os.PathLike[str]) -> None:
    """Write the calibrated platform file (atomically) and check that it loads."""
    from pathlib import Path

    from onnxroof.cli import write_atomically
    from onnxroof.platform import load_platform

    target = Path(path)
    write_atomically(target, calibration.to_toml())
    if target.is_file():
        load_platform(target)
