"""Measure a CUDA GPU for onnxroof's time models: kernel shapes, whole vision models, and a static-cache decoder.

``python benchmarks/gpu_measure.py --out DIR [--budget-s 330]`` on a machine with CUDA and PyTorch (with
torchvision for part 2; the device machine some sessions are lent; the test suite never needs it). Writes
``kernels.csv``, ``models.csv``, ``decoder.csv``, ``meta.json`` and ``onnx.tar.gz`` (the models of part 2 exported
to ONNX at each measured batch, weights stripped) into DIR. ``--dry`` runs every code path on the CPU with tiny
repeat counts (timings meaningless) so the script can be checked where no GPU is.

How each figure is taken
------------------------
* **Kernels** (part 1): each shape's op is captured ``reps`` times into one CUDA graph and the graph replayed
  3 times between CUDA events after a warm-up replay; ``time_s`` is the median replay ÷ ``reps``. Replaying a graph
  takes the Python dispatch out of the figure (a 5 µs kernel launched from eager Python would be timed as its
  launch). Each of the ``reps`` copies reads its own inputs (``copies`` buffers, enough that the working set of one
  graph is ≥ 3 × the L2), so a kernel's operands come from DRAM as a network's weights do, not from a warm L2.
  cuDNN runs with ``benchmark = True`` (it picks the fastest algorithm per shape, as TensorRT's tactic search
  does); convolutions run channels-last (NHWC, the layout TensorRT's tensor-core kernels use) in fp16/bf16.
  ``flops`` counts 2 per multiply-add; ``bytes`` is the ideal traffic: every input read once and the output
  written once.
* **Models** (part 2): torchvision models in fp16 (channels-last), batch 1 and 32: eager (median of 20 runs, each
  synchronised) and one captured CUDA graph replayed (median of 20 replays timed with CUDA events).
* **Decoder** (part 3): a Llama-architecture decoder written here in plain PyTorch (RMSNorm, fused QKV, rotary,
  GQA SDPA, SwiGLU), with a static KV cache written in place (``index_copy_``) so that a decode step can be
  captured as one CUDA graph (gpt-fast style; Hugging Face's dynamic cache cannot be captured). Shapes of
  Llama-3.2-1B (hidden 2048, 16 layers, 32 heads, 8 KV heads, head 64, intermediate 8192, vocab 128256), random
  weights, bf16. Time per output token at batch 1, 8, 32 and a past of 512 tokens, graph-replayed; time to first
  token for a 512-token prompt at batch 1 (eager and graph).

Every section stops when the time budget runs out; what ran is written.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import json
import math
import os
import platform
import statistics
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

KERNEL_COLUMNS = [
    "kind", "op", "dtype", "m", "n", "k", "batch", "n_img", "c_in", "h", "w", "c_out", "r", "s", "stride", "pad",
    "dilation", "groups", "heads", "kv_heads", "q_len", "kv_len", "head_dim", "causal", "numel", "flops", "bytes",
    "time_s", "repeats", "copies",
]  # fmt: skip
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32, "tf32": torch.float32}
SIZE = {"fp16": 2, "bf16": 2, "fp32": 4, "tf32": 4, "int8": 1}


@dataclass
class Clock:
    """The script's time budget: each section asks ``left()`` before each shape."""

    budget_s: float
    start: float = field(default_factory=time.perf_counter)

    def left(self) -> float:
        return self.budget_s - (time.perf_counter() - self.start)


@dataclass
class Bench:
    device: str
    dry: bool
    l2_bytes: int

    def time_op(self, make: Callable[[int], Callable[[], object]], working_set: float, est_s: float) -> tuple:
        """Median seconds of one call of ``make(i)()``; ``make(i)`` returns the i-th copy's call (own inputs)."""
        if self.dry:
            call = make(0)
            call()
            start = time.perf_counter()
            call()
            return time.perf_counter() - start, 1, 1
        reps = int(min(64, max(4, math.ceil(3e-3 / max(est_s, 1e-7)))))
        copies = int(min(reps, max(1, math.ceil(3 * self.l2_bytes / max(working_set, 1.0)))))
        calls = [make(i) for i in range(copies)]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for call in calls:  # warm-up outside capture: cuDNN/cuBLAS pick algorithms and workspaces here
                call()
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for i in range(reps):
                calls[i % copies]()
        graph.replay()
        torch.cuda.synchronize()
        times = []
        for _ in range(3):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) / 1e3 / reps)
        del graph, calls
        return statistics.median(times), reps, copies


def _rand(shape, dtype, device):
    if dtype == torch.int8:
        return torch.randint(-8, 8, shape, dtype=torch.int8, device=device)
    return torch.randn(shape, dtype=dtype, device=device) * 0.1


def _row(**values) -> dict:
    row = dict.fromkeys(KERNEL_COLUMNS, "")
    row.update(values)
    return row


# ---------------------------------------------------------------- part 1: kernel shapes, in order of importance
def gemm_shapes() -> Iterator[tuple[str, int, int, int, int]]:
    """(dtype, batch, m, n, k): LLM projections first, then a grid, then odd sizes (tile quantization)."""
    llm_nk = [(3072, 2048), (2048, 2048), (16384, 2048), (2048, 8192), (128256, 2048),  # Llama-3.2-1B
              (4096, 4096), (12288, 4096), (22016, 4096), (4096, 11008), (32000, 4096),  # Llama-2-7B
              (28672, 4096), (4096, 14336)]  # fmt: skip
    for m in (1, 2, 4, 8, 16, 32, 64, 128, 512, 2048):
        for n, k in llm_nk:
            yield "bf16", 1, m, n, k
    grid = (64, 256, 1024, 4096, 8192)
    for dtype in ("fp16", "fp32", "tf32"):
        for m in (1, 8, 32, 128, 512, 2048, 8192):
            for n in grid:
                for k in grid:
                    yield dtype, 1, m, n, k
    for m in (1, 16, 128, 1000, 1001, 3000, 4097):
        for n, k in ((1000, 2048), (1001, 1024), (3000, 768), (4097, 4097), (768, 3072), (1024, 4096)):
            yield "fp16", 1, m, n, k
    for m in (1, 2, 4, 8, 16):  # GEMV over a grid of weight shapes (decode at small batch)
        for n in (1024, 2048, 4096, 8192, 16384):
            for k in (1024, 2048, 4096, 8192, 16384):
                yield "fp16", 1, m, n, k
    for m in (96, 192, 384, 768, 1536, 3072, 6144):  # M between the grid's points: wave quantization
        for n, k in ((768, 768), (3072, 768), (768, 3072), (4096, 4096), (1024, 1024)):
            yield "bf16", 1, m, n, k
    for batch, m, n, k in ((8, 128, 128, 64), (32, 128, 128, 64), (96, 512, 512, 64), (96, 512, 64, 512),
                           (384, 197, 197, 64), (384, 197, 64, 197), (12, 1024, 1024, 64)):  # fmt: skip
        yield "fp16", batch, m, n, k


def run_gemms(bench: Bench, clock: Clock, rows: list, dtypes: tuple[str, ...] | None = None) -> None:
    dev = bench.device
    for dtype_name, batch, m, n, k in gemm_shapes():
        if clock.left() <= 0:
            return
        if dtypes and dtype_name not in dtypes:
            continue
        dtype = DTYPES[dtype_name]
        torch.backends.cuda.matmul.allow_tf32 = dtype_name == "tf32"
        size = SIZE[dtype_name]
        flops = 2.0 * batch * m * n * k
        nbytes = size * batch * (m * k + k * n + m * n)
        peak = {"fp32": 60e12, "tf32": 400e12}.get(dtype_name, 800e12)
        est = max(flops / peak, nbytes / 4e12)
        shape_a, shape_b = ((batch, m, k), (batch, k, n)) if batch > 1 else ((m, k), (k, n))

        def make(i: int, shape_a=shape_a, shape_b=shape_b, dtype=dtype):
            a, b = _rand(shape_a, dtype, dev), _rand(shape_b, dtype, dev)
            return lambda: torch.matmul(a, b)

        t, reps, copies = bench.time_op(make, nbytes, est)
        kind = "bmm" if batch > 1 else ("gemv" if m == 1 else "gemm")
        rows.append(_row(kind=kind, op="matmul", dtype=dtype_name, m=m, n=n, k=k, batch=batch, flops=flops,
                         bytes=nbytes, time_s=t, repeats=reps, copies=copies))  # fmt: skip
    torch.backends.cuda.matmul.allow_tf32 = False


def int8_gemms(bench: Bench, clock: Clock, rows: list) -> None:
    """torch._int_mm (cuBLASLt int8 × int8 → int32): M > 16 and K, N multiples of 8."""
    dev = bench.device
    for m in (32, 128, 512, 2048, 8192):
        for n, k in ((1024, 1024), (4096, 4096), (11008, 4096), (4096, 11008), (1024, 4096)):
            if clock.left() <= 0:
                return
            flops, nbytes = 2.0 * m * n * k, m * k + k * n + 4 * m * n

            def make(i: int, m=m, n=n, k=k):
                a, b = _rand((m, k), torch.int8, dev), _rand((k, n), torch.int8, dev)
                return lambda: torch._int_mm(a, b)

            try:
                t, reps, copies = bench.time_op(make, nbytes, max(flops / 1.5e15, nbytes / 4e12))
            except RuntimeError:
                continue
            rows.append(_row(kind="gemm", op="int_mm", dtype="int8", m=m, n=n, k=k, batch=1, flops=flops,
                             bytes=nbytes, time_s=t, repeats=reps, copies=copies))  # fmt: skip


def conv_shapes() -> Iterator[tuple]:
    """(dtype, n, c_in, h, w, c_out, r, stride, groups): the layers of ResNet-50, MobileNet-v2, VGG-19 and
    ResNeXt at batch 1 and 32, then a grid over channels, size and kernel."""
    resnet50 = [(3, 224, 64, 7, 2, 1), (64, 56, 64, 1, 1, 1), (64, 56, 64, 3, 1, 1), (64, 56, 256, 1, 1, 1),
                (256, 56, 64, 1, 1, 1), (256, 56, 128, 1, 1, 1), (128, 56, 128, 3, 2, 1), (128, 28, 512, 1, 1, 1),
                (256, 56, 512, 1, 2, 1), (512, 28, 128, 1, 1, 1), (128, 28, 128, 3, 1, 1), (512, 28, 256, 1, 1, 1),
                (256, 28, 256, 3, 2, 1), (256, 14, 1024, 1, 1, 1), (512, 28, 1024, 1, 2, 1),
                (1024, 14, 256, 1, 1, 1), (256, 14, 256, 3, 1, 1), (1024, 14, 512, 1, 1, 1),
                (512, 14, 512, 3, 2, 1), (512, 7, 2048, 1, 1, 1), (1024, 14, 2048, 1, 2, 1),
                (2048, 7, 512, 1, 1, 1), (512, 7, 512, 3, 1, 1)]  # fmt: skip
    mobilenet = [(32, 112, 32, 3, 1, 32), (32, 112, 16, 1, 1, 1), (96, 112, 96, 3, 2, 96), (96, 56, 24, 1, 1, 1),
                 (144, 56, 144, 3, 1, 144), (144, 56, 24, 1, 1, 1), (24, 56, 144, 1, 1, 1),
                 (192, 28, 192, 3, 1, 192), (384, 14, 384, 3, 1, 384), (576, 14, 576, 3, 1, 576),
                 (960, 7, 960, 3, 1, 960), (960, 7, 160, 1, 1, 1), (160, 7, 960, 1, 1, 1),
                 (320, 7, 1280, 1, 1, 1)]  # fmt: skip
    vgg = [(3, 224, 64, 3, 1, 1), (64, 224, 64, 3, 1, 1), (64, 112, 128, 3, 1, 1), (128, 112, 128, 3, 1, 1),
           (128, 56, 256, 3, 1, 1), (256, 56, 256, 3, 1, 1), (256, 28, 512, 3, 1, 1), (512, 28, 512, 3, 1, 1),
           (512, 14, 512, 3, 1, 1)]  # fmt: skip
    resnext = [(128, 56, 128, 3, 1, 32), (256, 28, 256, 3, 1, 32), (512, 14, 512, 3, 1, 32), (1024, 7, 1024, 3, 1, 32)]
    for batch in (1, 32):
        for c_in, hw, c_out, r, stride, groups in resnet50 + mobilenet + vgg + resnext:
            yield "fp16", batch, c_in, hw, c_out, r, stride, groups
    for c_in, hw, c_out, r, stride, groups in resnet50:
        yield "fp32", 1, c_in, hw, c_out, r, stride, groups
    for batch in (1, 8):
        for c in (3, 8, 16, 24, 32, 64, 96, 128, 256, 512):
            for hw in (7, 14, 28, 56, 112):
                for r in (1, 3):
                    yield "fp16", batch, c, hw, max(c, 16) * 2 if c < 64 else c, r, 1, 1
                yield "fp16", batch, c, hw, c, 3, 1, c  # depthwise
                if c % 8 == 0 and c >= 32:
                    yield "fp16", batch, c, hw, c, 3, 1, c // 8  # grouped, 8 channels per group


def run_convs(bench: Bench, clock: Clock, rows: list) -> None:
    dev = bench.device
    torch.backends.cudnn.benchmark = True
    for dtype_name, batch, c_in, hw, c_out, r, stride, groups in conv_shapes():
        if clock.left() <= 0:
            return
        dtype, size = DTYPES[dtype_name], SIZE[dtype_name]
        pad = r // 2
        ho = (hw + 2 * pad - r) // stride + 1
        flops = 2.0 * batch * c_out * ho * ho * (c_in // groups) * r * r
        nbytes = size * (batch * c_in * hw * hw + c_out * (c_in // groups) * r * r + batch * c_out * ho * ho)
        layout = torch.channels_last if dtype_name != "fp32" else torch.contiguous_format

        def make(i: int, batch=batch, c_in=c_in, hw=hw, c_out=c_out, r=r, stride=stride, groups=groups,
                 dtype=dtype, layout=layout, pad=pad):  # fmt: skip
            x = _rand((batch, c_in, hw, hw), dtype, dev).to(memory_format=layout)
            wt = _rand((c_out, c_in // groups, r, r), dtype, dev).to(memory_format=layout)
            return lambda: F.conv2d(x, wt, None, stride, pad, 1, groups)

        t, reps, copies = bench.time_op(make, nbytes, max(flops / 300e12, nbytes / 3e12))
        rows.append(_row(kind="conv", op="conv2d", dtype=dtype_name, n_img=batch, c_in=c_in, h=hw, w=hw,
                         c_out=c_out, r=r, s=r, stride=stride, pad=pad, dilation=1, groups=groups, flops=flops,
                         bytes=nbytes, time_s=t, repeats=reps, copies=copies))  # fmt: skip


def sdpa_shapes() -> Iterator[tuple]:
    """(batch, heads, kv_heads, q_len, kv_len, head_dim, causal)."""
    for batch in (1, 8, 32, 64):  # decode: one query token over the cache
        for kv_len in (128, 512, 2048, 8192):
            yield batch, 32, 8, 1, kv_len, 64, False
            yield batch, 32, 32, 1, kv_len, 128, False
    for batch in (1, 4, 16):  # prefill
        for seq in (128, 512, 2048, 4096):
            yield batch, 32, 8, seq, seq, 64, True
            yield batch, 32, 32, seq, seq, 128, True
    for batch in (1, 32):  # encoders (ViT-B/16, BERT-Large)
        yield batch, 12, 12, 197, 197, 64, False
        yield batch, 16, 16, 384, 384, 64, False


def run_sdpa(bench: Bench, clock: Clock, rows: list) -> None:
    dev = bench.device
    dtype = torch.bfloat16
    for batch, heads, kv_heads, q_len, kv_len, head_dim, causal in sdpa_shapes():
        if clock.left() <= 0:
            return
        pairs = q_len * kv_len if not causal else q_len * (q_len + 1) / 2
        flops = 4.0 * batch * heads * pairs * head_dim
        nbytes = 2 * batch * head_dim * (2 * heads * q_len + 2 * kv_heads * kv_len)

        def make(i: int, batch=batch, heads=heads, kv_heads=kv_heads, q_len=q_len, kv_len=kv_len,
                 head_dim=head_dim, causal=causal):  # fmt: skip
            q = _rand((batch, heads, q_len, head_dim), dtype, dev)
            k = _rand((batch, kv_heads, kv_len, head_dim), dtype, dev)
            v = _rand((batch, kv_heads, kv_len, head_dim), dtype, dev)
            gqa = kv_heads != heads
            return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)

        t, reps, copies = bench.time_op(make, nbytes, max(flops / 400e12, nbytes / 3e12))
        rows.append(_row(kind="sdpa", op="sdpa", dtype="bf16", batch=batch, heads=heads, kv_heads=kv_heads,
                         q_len=q_len, kv_len=kv_len, head_dim=head_dim, causal=int(causal), flops=flops,
                         bytes=nbytes, time_s=t, repeats=reps, copies=copies))  # fmt: skip


POINTWISE = {
    "add": (lambda a, b: a + b, 2, 1),
    "mul": (lambda a, b: a * b, 2, 1),
    "relu": (lambda a, b: F.relu(a), 1, 1),
    "gelu": (lambda a, b: F.gelu(a), 1, 8),
    "silu": (lambda a, b: F.silu(a), 1, 4),
    "sigmoid": (lambda a, b: torch.sigmoid(a), 1, 4),
}  # name: (op, inputs read, flops per element (nominal))


def run_pointwise(bench: Bench, clock: Clock, rows: list) -> None:
    dev = bench.device
    for dtype_name in ("fp16", "fp32"):
        dtype, size = DTYPES[dtype_name], SIZE[dtype_name]
        for exp in range(10, 29, 2):
            numel = 2**exp
            for name, (fn, inputs, per) in POINTWISE.items():
                if clock.left() <= 0:
                    return
                nbytes = size * numel * (inputs + 1)

                def make(i: int, fn=fn, numel=numel, dtype=dtype):
                    a, b = _rand((numel,), dtype, dev), _rand((numel,), dtype, dev)
                    return lambda: fn(a, b)

                t, reps, copies = bench.time_op(make, nbytes, nbytes / 3e12 + 2e-6)
                rows.append(_row(kind="elementwise", op=name, dtype=dtype_name, numel=numel, flops=per * numel,
                                 bytes=nbytes, time_s=t, repeats=reps, copies=copies))  # fmt: skip


def run_reductions(bench: Bench, clock: Clock, rows: list) -> None:
    dev = bench.device
    dtype = torch.float16
    for rows_n, cols in ((1, 4096), (128, 768), (512, 1024), (4096, 4096), (8192, 11008), (32768, 768),
                         (65536, 128), (16, 128256), (2048, 32000), (197 * 32, 768)):  # fmt: skip
        numel = rows_n * cols
        for name in ("sum", "softmax", "layernorm", "rmsnorm"):
            if clock.left() <= 0:
                return
            out_elems = rows_n if name == "sum" else numel
            nbytes = 2 * (numel + out_elems + (cols if name in ("layernorm", "rmsnorm") else 0))
            flops = {"sum": 1, "softmax": 5, "layernorm": 8, "rmsnorm": 4}[name] * numel

            def make(i: int, name=name, rows_n=rows_n, cols=cols):
                x = _rand((rows_n, cols), dtype, dev)
                weight = _rand((cols,), dtype, dev)
                ops = {
                    "sum": lambda: x.sum(-1),
                    "softmax": lambda: torch.softmax(x, -1),
                    "layernorm": lambda: F.layer_norm(x, (cols,), weight),
                    "rmsnorm": lambda: F.rms_norm(x, (cols,), weight),
                }
                return ops[name]

            t, reps, copies = bench.time_op(make, nbytes, nbytes / 3e12 + 2e-6)
            kind = {"sum": "reduction", "softmax": "softmax"}.get(name, "norm")
            rows.append(_row(kind=kind, op=name, dtype="fp16", m=rows_n, n=cols, numel=numel, flops=flops,
                             bytes=nbytes, time_s=t, repeats=reps, copies=copies))  # fmt: skip


# ---------------------------------------------------------------- part 2: whole models
MODELS = ("resnet50", "resnet18", "mobilenet_v2", "vgg19", "efficientnet_b0", "convnext_tiny", "vit_b_16",
          "resnext50_32x4d", "densenet121", "regnet_y_1_6gf")  # fmt: skip


def _median_eager(fn: Callable[[], object], dry: bool, runs: int = 20) -> float:
    for _ in range(1 if dry else 3):
        fn()
    times = []
    for _ in range(1 if dry else runs):
        if not dry:
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if not dry:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _median_graph(fn: Callable[[], object], runs: int = 20) -> float:
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    del graph
    return statistics.median(times)


def _strip_weights(model_bytes: bytes) -> bytes:
    """The exported model with every initializer's bytes dropped (dims and dtype kept): onnxroof reads no weights."""
    import onnx

    model = onnx.load_from_string(model_bytes)
    for tensor in model.graph.initializer:
        for name in ("raw_data", "float_data", "int64_data", "int32_data", "double_data"):
            tensor.ClearField(name)
        tensor.data_location = onnx.TensorProto.EXTERNAL
        del tensor.external_data[:]
        for key, value in (("location", "stripped.weights"), ("offset", "0"), ("length", "0")):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
    return model.SerializeToString()


def run_models_folded(bench: Bench, clock: Clock, rows: list) -> None:
    """The same torchvision models with each BatchNorm folded into its convolution (``torch.fx`` ``fuse``), as the
    ONNX export and TensorRT fold it: CUDA-graph replays at batch 1 and 32 (mode ``cuda-graph-folded``). A model
    that ``torch.fx`` cannot trace is skipped with a line."""
    try:
        import torchvision
        from torch.fx.experimental.optimization import fuse
    except ImportError:
        return
    dev = bench.device
    dtype = torch.float16 if not bench.dry else torch.float32
    size = 224 if not bench.dry else 64
    for name in MODELS:
        if clock.left() <= 0:
            return
        try:
            folded = fuse(getattr(torchvision.models, name)(weights=None).eval())
        except Exception as error:
            print(f"fold {name}: {type(error).__name__}: {error}"[:200], flush=True)
            continue
        net = folded.to(dev, dtype).to(memory_format=torch.channels_last)
        for batch in (1, 32) if not bench.dry else (1,):
            xs = torch.randn(batch, 3, size, size, device=dev, dtype=dtype).to(memory_format=torch.channels_last)
            with torch.inference_mode():
                run = lambda: net(xs)  # noqa: B023, E731
                t = _median_eager(run, True) if bench.dry else _median_graph(run)
            rows.append({"model": name, "batch": batch, "dtype": "fp16", "mode": "cuda-graph-folded", "time_s": t,
                         "onnx": f"{name}.onnx"})  # fmt: skip
            print(f"folded {name} b{batch}: {t * 1e3:.3f} ms ({clock.left():.0f} s left)", flush=True)


def run_models(bench: Bench, clock: Clock, rows: list, archive: tarfile.TarFile) -> None:
    try:
        import torchvision
    except ImportError:
        return
    dev = bench.device
    dtype = torch.float16 if not bench.dry else torch.float32
    size = 224 if not bench.dry else 64
    for name in MODELS:
        if clock.left() <= 0:
            return
        model = getattr(torchvision.models, name)(weights=None).eval()
        torch.backends.mha.set_fastpath_enabled(False)  # ViT's fused MHA fast path has no ONNX export
        try:  # one export, batch as a symbolic dim (onnxroof binds it with --dim batch=N)
            with torch.inference_mode():
                buffer = io.BytesIO()
                torch.onnx.export(model, (torch.randn(1, 3, size, size),), buffer, dynamo=False, opset_version=17,
                                  input_names=["input"], output_names=["output"],
                                  dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})  # fmt: skip
            data = _strip_weights(buffer.getvalue())
            info = tarfile.TarInfo(f"{name}.onnx")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        except Exception as error:
            print(f"export {name}: {type(error).__name__}: {error}"[:300], flush=True)
        net = model.to(dev, dtype).to(memory_format=torch.channels_last)
        for batch in (1, 32) if not bench.dry else (1,):
            if clock.left() <= 0:
                return
            xs = torch.randn(batch, 3, size, size, device=dev, dtype=dtype).to(memory_format=torch.channels_last)
            with torch.inference_mode():
                eager = _median_eager(lambda: net(xs), bench.dry)  # noqa: B023
                rows.append({"model": name, "batch": batch, "dtype": "fp16", "mode": "eager", "time_s": eager,
                             "onnx": f"{name}.onnx"})  # fmt: skip
                if not bench.dry:
                    try:
                        replay = _median_graph(lambda: net(xs))  # noqa: B023
                        rows.append({"model": name, "batch": batch, "dtype": "fp16", "mode": "cuda-graph",
                                     "time_s": replay, "onnx": f"{name}.onnx"})  # fmt: skip
                    except RuntimeError as error:
                        print(f"graph {name} b{batch}: {error}"[:300], flush=True)
            print(f"model {name} b{batch}: eager {eager * 1e3:.3f} ms ({clock.left():.0f} s left)", flush=True)


# ---------------------------------------------------------------- part 3: a static-cache decoder
LLAMA2_7B = {"hidden": 4096, "layers": 32, "heads": 32, "kv_heads": 32, "head_dim": 128, "inter": 11008,
             "vocab": 32000}  # fmt: skip
LLAMA_1B = {"hidden": 2048, "layers": 16, "heads": 32, "kv_heads": 8, "head_dim": 64, "inter": 8192,
            "vocab": 128256}  # fmt: skip


class Decoder(torch.nn.Module):
    """A Llama-architecture decoder with a static KV cache written in place (so a step can be graph-captured)."""

    def __init__(self, cfg: dict, batch: int, max_len: int, dtype: torch.dtype, device: str) -> None:
        super().__init__()
        h, hd, kvh = cfg["hidden"], cfg["head_dim"], cfg["kv_heads"]
        self.cfg = cfg
        std = 0.02

        def w(*shape):
            return torch.randn(*shape, dtype=dtype, device=device) * std

        self.embed = w(cfg["vocab"], h)
        self.layers = [
            {"qkv": w((cfg["heads"] + 2 * kvh) * hd, h), "o": w(h, cfg["heads"] * hd),
             "gate_up": w(2 * cfg["inter"], h),
             "down": w(h, cfg["inter"]), "n1": torch.ones(h, dtype=dtype, device=device),
             "n2": torch.ones(h, dtype=dtype, device=device),
             "k": torch.zeros(batch, kvh, max_len, hd, dtype=dtype, device=device),
             "v": torch.zeros(batch, kvh, max_len, hd, dtype=dtype, device=device)}
            for _ in range(cfg["layers"])
        ]  # fmt: skip
        self.norm = torch.ones(h, dtype=dtype, device=device)
        self.head = w(cfg["vocab"], h)
        inv = 1.0 / (500000.0 ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))
        angles = torch.outer(torch.arange(max_len, device=device, dtype=torch.float32), inv)
        self.cos = torch.cat([angles.cos(), angles.cos()], -1).to(dtype)
        self.sin = torch.cat([angles.sin(), angles.sin()], -1).to(dtype)

    @staticmethod
    def _rotate(x, cos, sin):
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
        return x * cos + rotated * sin

    def forward(self, tokens: torch.Tensor, positions: torch.Tensor, kv_len: int) -> torch.Tensor:
        cfg = self.cfg
        b, s = tokens.shape
        hd, heads, kvh = cfg["head_dim"], cfg["heads"], cfg["kv_heads"]
        x = self.embed[tokens]
        cos, sin = self.cos[positions][:, None], self.sin[positions][:, None]
        for layer in self.layers:
            y = F.rms_norm(x, (x.shape[-1],), layer["n1"])
            q, k, v = (y @ layer["qkv"].T).split([heads * hd, kvh * hd, kvh * hd], -1)
            q = self._rotate(q.view(b, s, heads, hd).transpose(1, 2), cos, sin)
            k = self._rotate(k.view(b, s, kvh, hd).transpose(1, 2), cos, sin)
            layer["k"].index_copy_(2, positions[0], k)
            layer["v"].index_copy_(2, positions[0], v.view(b, s, kvh, hd).transpose(1, 2))
            keys, values = layer["k"][:, :, :kv_len], layer["v"][:, :, :kv_len]
            attn = F.scaled_dot_product_attention(q, keys, values, is_causal=s > 1, enable_gqa=True)
            x = x + attn.transpose(1, 2).reshape(b, s, heads * hd) @ layer["o"].T
            y = F.rms_norm(x, (x.shape[-1],), layer["n2"])
            gate, up = (y @ layer["gate_up"].T).chunk(2, -1)
            x = x + (F.silu(gate) * up) @ layer["down"].T
        x = F.rms_norm(x[:, -1:], (x.shape[-1],), self.norm)
        return x @ self.head.T


def run_decoder(bench: Bench, clock: Clock, rows: list) -> None:
    for name, cfg, past in (("llama-3.2-1b-shape", LLAMA_1B, 512), ("llama-3.2-1b-shape", LLAMA_1B, 2048),
                            ("llama-2-7b-shape", LLAMA2_7B, 512)):  # fmt: skip
        run_one_decoder(bench, clock, rows, name, dict(cfg), past)


def run_one_decoder(bench: Bench, clock: Clock, rows: list, label: str, cfg: dict, past: int) -> None:
    dev = bench.device
    dtype = torch.bfloat16 if not bench.dry else torch.float32
    prompt = 512
    if bench.dry:
        cfg.update(hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, inter=128, vocab=100)
    for batch in (1, 8, 32):
        if clock.left() <= 0:
            return
        model = Decoder(cfg, batch, past + 16, dtype, dev)
        with torch.inference_mode():
            token = torch.randint(0, cfg["vocab"], (batch, 1), device=dev)
            position = torch.tensor([[past]], device=dev)
            step = lambda: model(token, position, past + 1)  # noqa: B023, E731
            eager = _median_eager(step, bench.dry)
            rows.append({"model": label, "phase": "decode", "batch": batch, "past": past,
                         "prompt": 0, "dtype": "bf16", "mode": "eager", "time_s": eager})  # fmt: skip
            if not bench.dry:
                replay = _median_graph(step)
                rows.append({"model": label, "phase": "decode", "batch": batch, "past": past,
                             "prompt": 0, "dtype": "bf16", "mode": "cuda-graph", "time_s": replay})  # fmt: skip
            if batch == 1:
                tokens = torch.randint(0, cfg["vocab"], (1, prompt), device=dev)
                positions = torch.arange(prompt, device=dev)[None]
                fill = lambda: model(tokens, positions, prompt)  # noqa: B023, E731
                for mode, timer in (("eager", lambda: _median_eager(fill, bench.dry)),  # noqa: B023
                                    ("cuda-graph", None if bench.dry else (lambda: _median_graph(fill)))):  # fmt: skip  # noqa: B023
                    if timer is not None:
                        rows.append({"model": label, "phase": "prefill", "batch": 1, "past": 0,
                                     "prompt": prompt, "dtype": "bf16", "mode": mode, "time_s": timer()})  # fmt: skip
        print(
            f"decoder {label} past {past} batch {batch}: eager step {eager * 1e3:.3f} ms ({clock.left():.0f} s left)",
            flush=True,
        )
        if not bench.dry:
            torch.cuda.empty_cache()


# ---------------------------------------------------------------- the run
def meta(bench: Bench) -> dict:
    info: dict = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "python": platform.python_version(),
                  "torch": torch.__version__, "cuda": torch.version.cuda,
                  "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None}  # fmt: skip
    if not bench.dry:
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, sm_count=props.multi_processor_count, memory_bytes=props.total_memory,
                    l2_bytes=getattr(props, "L2_cache_size", None),
                    capability=f"{props.major}.{props.minor}")  # fmt: skip
        try:
            query = "driver_version,clocks.max.sm,clocks.max.mem,power.limit,name"
            out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=20).stdout.strip()  # fmt: skip
            info["nvidia_smi"] = dict(zip(query.split(","), [v.strip() for v in out.split(",")], strict=False))
        except (OSError, subprocess.SubprocessError) as error:
            info["nvidia_smi"] = str(error)
        with contextlib.suppress(AttributeError):
            info["cublas"] = torch._C._cuda_getCompiledVersion()
    return info


def write_csv(path: str, rows: list, columns: list[str] | None = None) -> None:
    if not rows:
        return
    columns = columns or list(rows[0])
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        writer.writerows(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--budget-s", type=float, default=330.0)
    parser.add_argument("--dry", action="store_true", help="run every path on the CPU, tiny and untimed")
    parser.add_argument("--sections", help="comma-separated sections to run (default: all), e.g. models-folded")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    dry = args.dry or not torch.cuda.is_available()
    l2 = 0 if dry else getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 50 << 20)
    bench = Bench("cpu" if dry else "cuda", dry, l2)
    clock = Clock(args.budget_s)
    info = meta(bench)
    print(json.dumps(info), flush=True)
    kernels: list = []
    models: list = []
    decoder: list = []
    # (section, share of the budget it may use from when it starts): the decoder and models first, being few
    # and whole; the kernel sweep takes what is left, in order of importance.
    with tarfile.open(os.path.join(args.out, "onnx.tar.gz"), "w:gz") as archive:
        plan: list[tuple[str, Callable[[Clock], None]]] = [
            ("decoder", lambda c: run_decoder(bench, c, decoder)),
            ("models", lambda c: run_models(bench, c, models, archive)),
            ("models-folded", lambda c: run_models_folded(bench, c, models)),
            ("gemm-bf16", lambda c: run_gemms(bench, c, kernels, ("bf16",))),
            ("conv", lambda c: run_convs(bench, c, kernels)),
            ("sdpa", lambda c: run_sdpa(bench, c, kernels)),
            ("pointwise", lambda c: run_pointwise(bench, c, kernels)),
            ("reductions", lambda c: run_reductions(bench, c, kernels)),
            ("int8", lambda c: int8_gemms(bench, c, kernels)),
            ("gemm-rest", lambda c: run_gemms(bench, c, kernels, ("fp16", "fp32", "tf32"))),
        ]
        shares = {"decoder": 0.25, "models": 0.30, "models-folded": 0.3,
                  "gemm-bf16": 0.12, "conv": 0.25, "sdpa": 0.2, "pointwise": 0.2,
                  "reductions": 0.2, "int8": 0.2, "gemm-rest": 1.0}  # fmt: skip
        wanted = set(args.sections.split(",")) if args.sections else {name for name, _ in plan}
        for name, section in plan:
            if name not in wanted:
                continue
            sub = Clock(max(0.0, min(clock.left(), shares[name] * clock.left())))
            start = time.perf_counter()
            try:
                section(sub)
            except Exception as error:
                print(f"section {name} failed: {type(error).__name__}: {error}"[:500], flush=True)
            print(f"section {name}: {time.perf_counter() - start:.1f} s; kernels {len(kernels)}", flush=True)
            write_csv(os.path.join(args.out, "kernels.csv"), kernels, KERNEL_COLUMNS)
            write_csv(os.path.join(args.out, "models.csv"), models)
            write_csv(os.path.join(args.out, "decoder.csv"), decoder)
    info["elapsed_s"] = time.perf_counter() - clock.start
    info["rows"] = {"kernels": len(kernels), "models": len(models), "decoder": len(decoder)}
    with open(os.path.join(args.out, "meta.json"), "w") as handle:
        json.dump(info, handle, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
