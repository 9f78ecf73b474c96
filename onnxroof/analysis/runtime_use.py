"""What the runtime changes at placement: its launch figures, the KV cache written in place, its efficiency factors.

:func:`apply_runtime` takes a fused model, the platform and the runtime, and returns the fused model as the
runtime runs it (the KV cache's ``present`` outputs written in place when it does so) with a :class:`RuntimeUse`
saying what was applied: the runtime, its launch mode and the figures used, how the KV cache is written and where
that came from (the runtime file or a ``genai_config.json`` beside the model), the efficiency factors per kernel
class and how many kernels each touched.

**Convolution bias in a second pass.** A runtime whose ``[kernels] conv_bias`` is ``separate`` (PyTorch's cuDNN
path) runs each convolution with a bias input as the convolution and then one in-place add: the kernel anchored
on a ``Conv`` or ``ConvTranspose`` with a bias gains ``pass = 2·W + W·b/E`` bytes (read the output and the bias,
write the output: ``W`` the anchor's output bytes as costed, ``E`` its output elements, ``b`` the bias elements),
``E`` FLOPs and one launch; :attr:`~onnxroof.analysis.stages.FusedModel.pass_bytes` records ``pass`` so that a time
model can run it after the kernel (:func:`separate_conv_bias`).

**In-place KV cache.** A ``present`` output ``Y`` aliasing a ``past`` input ``X`` (:func:`kv_pairs`) costs, written
in place, only the new tokens: the node producing ``Y`` writes ``bytes(Y) − bytes(X)`` instead of ``bytes(Y)``, and
when it is a ``Concat`` reading ``X`` (the copy the shared buffer removes) it reads ``bytes(X)`` less too. So a
decode step's bytes grow with the cache by ``1.0×`` its growth (the attention reads the cache once) in place and by
``2.0×`` (read once, written once more) under ``copy``. The kernels holding those nodes lose the same bytes (never
below zero).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

import numpy as np

from onnxroof.analysis.stages import CostedModel, FusedModel
from onnxroof.core.cost import Cost
from onnxroof.core.descriptor import KernelDescriptor
from onnxroof.core.errors import ModelError, ShapeUnknown
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.ir import ModelIR, OpView
from onnxroof.fusion.descriptor import describe
from onnxroof.load.genai_config import read_genai_config
from onnxroof.platform.model import Platform
from onnxroof.roofline.place import Objects
from onnxroof.runtime import ConvBias, KvWrite, LaunchMode, Runtime, RuntimeKernelClass, RuntimeLaunch
from onnxroof.runtime.classes import kernel_class

_PAST_NAME = re.compile(r"past.*(key|value)", re.IGNORECASE)
_POSITIONS = {  # (domain, op_type) -> ((past input, present output), ...): the ops' own aliasing
    ("", "Attention"): ((4, 1), (5, 2)),
    ("com.microsoft", "GroupQueryAttention"): ((3, 1), (4, 2)),
    ("com.microsoft", "MultiHeadAttention"): ((6, 1), (7, 2)),
}


@frozen_dataclass(eq=False)
class RuntimeUse:
    """What the runtime did to one analysis (module docstring)."""

    runtime: Runtime
    per_kernel_s: float
    """Seconds each launch cost (a kernel launch; a node of a replayed graph)."""
    per_run_s: float
    """Seconds the run paid once (a graph launch, host sync)."""
    kv_write: KvWrite
    kv_from: str
    """Where the KV write policy came from: ``runtime`` or the ``genai_config.json`` path."""
    kv_saved_bytes: float
    """Bytes per run the in-place write saved (0 under ``copy`` or without a KV cache)."""
    factors: Mapping[str, tuple[float, int]]
    """Kernel class → (the runtime's factor, kernels it applied to), for the classes the file gives."""
    genai: tuple[tuple[str, str], ...] = ()
    """The ``genai_config.json`` fields read (key, value), empty when there is no such file."""
    genai_path: str = ""
    genai_error: str = ""
    """Why a ``genai_config.json`` beside the model was ignored (it does not parse, or a field is malformed): the
    model still runs under ONNX Runtime, so the file is set aside with this line rather than the model refused."""
    bias_passes: int = 0
    """Kernels that pay a separate bias pass (``conv_bias = "separate"``, :func:`separate_conv_bias`; else 0)."""

    def to_dict(self) -> dict[str, Any]:
        """What the runtime did, for the JSON document: name, launch mode and the figures applied (s), the KV
        write policy and where it came from, the factors per kernel class with the kernels they touched and their
        sources, what was read from a ``genai_config.json``, and every source of the runtime file."""
        runtime = self.runtime
        return {
            "name": runtime.name,
            "title": runtime.title,
            "path": runtime.path,
            "launch_mode": str(runtime.launch_mode),
            "per_kernel_launch_s": self.per_kernel_s,
            "per_run_s": self.per_run_s,
            "kv_write": str(self.kv_write),
            "kv_write_from": self.kv_from,
            "kv_saved_bytes": self.kv_saved_bytes,
            "conv_bias": str(runtime.conv_bias),
            "bias_passes": self.bias_passes,
            "factors": {
                cls: {"value": value, "kernels": count, "source": runtime.sources.get(f"efficiency.{cls}", "")}
                for cls, (value, count) in self.factors.items()
            },
            "genai_config": {"path": self.genai_path, **dict(self.genai)} if self.genai_path else None,
            **({"genai_config_ignored": self.genai_error} if self.genai_error else {}),
            "sources": dict(runtime.sources),
        }


def apply_runtime(fused: FusedModel, platform: Platform, runtime: Runtime) -> tuple[FusedModel, RuntimeUse, Objects]:
    """``fused`` as ``runtime`` runs it on ``platform``, what was applied (:attr:`RuntimeUse.runtime` is the
    runtime placement uses), and each kernel's kernel class (module docstring). A ``genai_config.json`` beside
    the model overrides the runtime's KV write policy with its ``past_present_share_buffer`` (``true``: in place,
    ``false``: copy), and a ``per-kernel`` runtime's launch mode with ``enable_cuda_graph`` (``1``: one replayed
    CUDA graph per run, with the launch defaults of that mode: one platform launch per run, 0 per node)."""
    try:
        config, error = read_genai_config(fused.costed.bound.path), ""
    except ModelError as exc:  # a side file ONNX Runtime does not read: set aside, the model still runs
        config, error = None, f"{exc}; ignored"
    if config is not None and config.enable_cuda_graph and not runtime.captured:
        runtime = replace(
            runtime,
            launch=RuntimeLaunch(LaunchMode.CUDA_GRAPH, per_request_s=runtime.per_request_s),
            path=f"{runtime.path} + {config.path}",
        )
    kv_write, kv_from = runtime.kv_write, "runtime"
    if config is not None and config.past_present_share_buffer is not None:
        kv_write = KvWrite.IN_PLACE if config.past_present_share_buffer else KvWrite.COPY
        kv_from = config.path
    saved = 0.0
    if kv_write == KvWrite.IN_PLACE:
        fused, saved = write_in_place(fused)
    passes = 0
    if runtime.conv_bias == ConvBias.SEPARATE:
        fused, passes = separate_conv_bias(fused)
    classes = kernel_classes(fused) if runtime.efficiency else np.full(len(fused.kernels), None, dtype=object)
    counts = {cls: int(np.count_nonzero(classes == cls)) for cls in runtime.efficiency}
    use = RuntimeUse(
        runtime=runtime,
        per_kernel_s=runtime.kernel_launch_s(platform.launch_overhead_s),
        per_run_s=runtime.run_launch_s(platform.launch_overhead_s),
        kv_write=kv_write,
        kv_from=kv_from,
        kv_saved_bytes=saved,
        factors=MappingProxyType({str(cls): (runtime.factor(cls), counts[cls]) for cls in runtime.efficiency}),
        genai=config.facts() if config is not None else (),
        genai_path=config.path if config is not None else "",
        genai_error=error,
        bias_passes=passes,
    )
    return fused, use, classes


def separate_conv_bias(fused: FusedModel) -> tuple[FusedModel, int]:
    """``fused`` with each convolution's bias added by a second kernel (module docstring): the kernels anchored on
    a ``Conv`` / ``ConvTranspose`` with a bias input gain the pass's bytes, FLOPs and launch, and
    :attr:`~onnxroof.analysis.stages.FusedModel.pass_bytes` says how many bytes each pass moves; the count of such
    kernels."""
    ir = fused.costed.bound.ir
    node_costs = fused.costed.node_costs
    pass_bytes = np.zeros(len(fused.kernels))
    kernels = list(fused.kernels)
    for row, kernel in enumerate(fused.kernels):
        anchor = ir.op(kernel.node_ids[0])
        if anchor is None or anchor.op_type not in ("Conv", "ConvTranspose"):
            continue
        bias, output = anchor.input(2), anchor.output(0)
        if bias is None or output is None or bias.shape is None or output.shape is None:
            continue
        if any(d is None for d in (*bias.shape, *output.shape)):
            continue
        elements = math.prod(d for d in output.shape if d is not None)
        if elements == 0:
            continue
        written = node_costs[int(fused.anchors[row])].cost.bytes_written
        bias_read = written * math.prod(d for d in bias.shape if d is not None) / elements
        extra = Cost(flops=float(elements), bytes_read=written + bias_read, bytes_written=written)
        kernels[row] = replace(kernel, cost=kernel.cost + extra)
        pass_bytes[row] = extra.bytes
    count = int(np.count_nonzero(pass_bytes))
    if not count:
        return fused, 0
    launches = fused.launches + (pass_bytes > 0)
    return replace(fused, kernels=tuple(kernels), launches=launches, pass_bytes=pass_bytes), count


# ------------------------------------------------------------------------------------------ kernel classes


def kernel_classes(fused: FusedModel) -> Objects:
    """Each kernel's :class:`RuntimeKernelClass` (:func:`onnxroof.runtime.classes.kernel_class`), as a column."""
    ir = fused.costed.bound.ir
    out = np.empty(len(fused.kernels), dtype=object)
    for row, (kernel, descriptor, int8) in enumerate(zip(fused.kernels, fused.descriptors, fused.int8, strict=True)):
        anchor = ir.op(kernel.node_ids[0])
        out[row] = _class_of(anchor, kernel.patterns, descriptor, bool(int8), ir)
    return out


def node_classes(costed: CostedModel) -> Objects:
    """Each node's :class:`RuntimeKernelClass`, as if it ran alone (the unfused view)."""
    ir = costed.bound.ir
    out = np.empty(len(ir.ops), dtype=object)
    for row, op in enumerate(ir.ops):
        out[row] = _class_of(op, (), describe([op], (), (op.op_type,)), False, ir)
    return out


def _class_of(
    anchor: OpView | None, patterns: tuple[str, ...], descriptor: KernelDescriptor, int8: bool, ir: ModelIR
) -> RuntimeKernelClass:
    """The class of one kernel from its anchor, patterns and descriptor."""
    attention = anchor is not None and ("Attention" in anchor.op_type or "attention" in patterns)
    gemm = descriptor.gemm
    m = gemm.m if gemm is not None else None
    if m is None and descriptor.op_class == "matmul":
        m = _rows(anchor)
    return kernel_class(
        descriptor.op_class, m, _weight_bits(anchor, descriptor, int8, ir), attention, _queries(anchor, m)
    )


def _rows(anchor: OpView | None) -> int | None:
    """M of a matrix product without a GEMM view (MatMulNBits): the product of its input's leading dims."""
    data = anchor.input(0) if anchor is not None else None
    if data is None or data.shape is None or not data.shape or any(d is None for d in data.shape[:-1]):
        return None
    return math.prod(d for d in data.shape[:-1] if d is not None)


def _weight_bits(anchor: OpView | None, descriptor: KernelDescriptor, int8: bool, ir: ModelIR) -> int | None:
    """Bits per weight element: MatMulNBits' ``bits`` (default 4), 8 for a QDQ kernel, else the first weight's
    element size; None without weights."""
    if anchor is not None and anchor.op_type == "MatMulNBits":
        bits = anchor.attrs.get("bits", 4)
        return int(bits) if isinstance(bits, int) else 4
    if int8:
        return 8
    for name in descriptor.weights:
        tensor = ir.tensors.get(name)
        if tensor is not None:
            return round(tensor.itemsize * 8)
    return None


def _queries(anchor: OpView | None, m: int | None) -> int | None:
    """The query tokens of an attention kernel: axis 2 of a rank-4 query (ONNX Attention), else axis 1; the GEMM
    view's M for a decomposed attention pattern."""
    query = anchor.input(0) if anchor is not None else None
    if anchor is None or query is None or query.shape is None or "Attention" not in anchor.op_type:
        return m
    shape = query.shape
    axis = 2 if len(shape) == 4 and anchor.domain == "" else 1
    return shape[axis] if len(shape) > axis else None


# ------------------------------------------------------------------------------------------ in-place KV cache


def kv_pairs(ir: ModelIR) -> tuple[tuple[str, str], ...]:
    """(past input, present output) pairs: by name (``past_key_values.N.key`` → ``present.N.key``, or ``past`` →
    ``present`` in the name) among the graph's inputs and outputs, and by position on the attention ops that take
    a past (opset-23 ``Attention`` inputs 4, 5 → outputs 1, 2; ``GroupQueryAttention`` 3, 4 → 1, 2;
    ``MultiHeadAttention`` 6, 7 → 1, 2)."""
    outputs = set(ir.graph_outputs)
    pairs: dict[str, str] = {}
    for name in ir.graph_inputs:
        if not _PAST_NAME.search(name):
            continue
        for candidate in (name.replace("past_key_values", "present"), name.replace("past", "present")):
            if candidate in outputs:
                pairs[name] = candidate
                break
    for op in ir.ops:
        for past_index, present_index in _POSITIONS.get((op.domain, op.op_type), ()):
            past, present = op.input(past_index), op.output(present_index)
            if past is not None and present is not None and past.name not in pairs:
                pairs[past.name] = present.name
    return tuple(pairs.items())


def write_in_place(fused: FusedModel) -> tuple[FusedModel, float]:
    """``fused`` with every ``present`` written in place (module docstring), and the bytes that saved."""
    ir = fused.costed.bound.ir
    savings: dict[str, tuple[float, float]] = {}  # node id -> (read, write) bytes saved
    for past, present in kv_pairs(ir):
        producer = ir.index.producer.get(present)
        op = ir.op(producer) if producer is not None else None
        past_info = ir.tensors.get(past)
        if op is None or past_info is None:
            continue
        try:
            past_bytes = past_info.nbytes
        except ShapeUnknown:
            continue
        copies = op.op_type == "Concat" and any(t is not None and t.name == past for t in op.inputs)
        read, write = savings.get(op.id, (0.0, 0.0))
        savings[op.id] = (read + (past_bytes if copies else 0.0), write + past_bytes)
    if not savings:
        return fused, 0.0
    costed = fused.costed
    node_costs = list(costed.node_costs)
    saved = 0.0
    for row, op in enumerate(ir.ops):
        if op.id in savings:
            new = _less(node_costs[row].cost, *savings[op.id])
            saved += node_costs[row].cost.bytes - new.bytes
            node_costs[row] = replace(node_costs[row], cost=new)
    kernels = tuple(
        replace(kernel, cost=_less(kernel.cost, *spent), ideal=_less(kernel.ideal, *spent))
        if (spent := _kernel_saving(kernel.node_ids, savings)) != (0.0, 0.0)
        else kernel
        for kernel in fused.kernels
    )
    return replace(fused, costed=replace(costed, node_costs=tuple(node_costs)), kernels=kernels), saved


def _kernel_saving(node_ids: tuple[str, ...], savings: Mapping[str, tuple[float, float]]) -> tuple[float, float]:
    read = sum(savings[n][0] for n in node_ids if n in savings)
    write = sum(savings[n][1] for n in node_ids if n in savings)
    return read, write


def _less(cost: Cost, read: float, write: float) -> Cost:
    """``cost`` reading ``read`` and writing ``write`` bytes fewer (never below zero)."""
    return replace(
        cost, bytes_read=max(cost.bytes_read - read, 0.0), bytes_written=max(cost.bytes_written - write, 0.0)
    )
