"""Runtime profiles: what a runtime does to a model's kernels beyond fusing them, loaded from TOML files.

One TOML file per runtime (bundled in ``runtimes/``, installed as ``onnxroof.runtimes``). Every figure is an inline
table ``{ value = ..., source = "<text>" }``. The file::

    schema = 1
    name = "tensorrt"                 # equal to the file stem for a bundled file
    title = "..."
    targets = ["gpu"]                 # the platform kinds it runs on (gpu, cpu, accelerator)
    fusion_profile = "tensorrt"       # an onnxroof.core.profiles.FusionProfile
    notes = "..."                     # optional
    [launch]
    mode = "per-kernel"               # LaunchMode
    per_kernel_us = { value = 5, source = "..." }   # optional, ≥ 0
    per_run_us = { value = 10, source = "..." }     # optional, ≥ 0
    per_request_us = { value = 800, source = "..." } # optional, ≥ 0
    [kv_cache]                        # optional
    write = { value = "in-place", source = "..." }  # KvWrite
    [kernels]                         # optional
    conv_bias = { value = "separate", source = "..." }  # ConvBias
    [efficiency]                      # optional; a RuntimeKernelClass per key, value in (0, 2]
    gemm = { value = 1.0, source = "..." }

**Launch.** ``per-kernel``: every kernel pays ``per_kernel_us`` (absent: the platform's
``runtime.launch_overhead_us``, the host's launch or dispatch cost) and a run pays ``per_run_us`` once (absent: 0,
which is what onnxroof charged before runtimes existed). ``cuda-graph``: the run is one replay of a captured graph;
it pays ``per_run_us`` once (absent: one launch, the platform's ``launch_overhead_us``) and each node inside the
replay pays ``per_kernel_us`` (absent: 0). :meth:`Runtime.kernel_launch_s` and :meth:`Runtime.run_launch_s` state
the same thing as formulas. ``per_request_us`` (absent: 0) is host work a request pays once, before its first
token, whatever the launch mode: the serving loop's setup of the request (input copies, sampler and buffer setup,
Python around the model): :func:`onnxroof.studies.llm.llm` adds it to the time to the first token,
``ttft = t_prefill + per_request``, and to nothing else (a single analysis is one run, not a request).

**KV cache.** ``in-place``: a ``present.*`` output that aliases its ``past_key_values.*`` input writes only the new
tokens; ``copy`` (the graph as written, the default): ``present`` is written whole every step.

**Convolution bias.** ``fused`` (the default): a convolution's bias is added by the convolution kernel itself.
``separate``: the runtime adds it afterwards with one more elementwise kernel that reads the convolution's output
and the bias and writes the output again (PyTorch's cuDNN path), a second pass per convolution with a bias input
(:func:`onnxroof.analysis.runtime_use.separate_conv_bias`).

**Efficiency.** Factors on the platform's sustained roofs per kernel class (:class:`RuntimeKernelClass`), absent:
1. A value above 1 says the runtime's kernels of that class beat the share of the datasheet the platform's
``[sustained]``/``[efficiency]`` figures describe (at most 2).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from enum import StrEnum
from types import MappingProxyType

from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.profiles import FusionProfile

SCHEMA_VERSION = 1
TARGET_KINDS: tuple[str, ...] = ("gpu", "cpu", "accelerator")
"""Platform kinds a runtime may run on (the values of a platform's ``kind``)."""
MAX_EFFICIENCY = 2.0
"""The largest efficiency factor a runtime file may give."""


class LaunchMode(StrEnum):
    """How a runtime launches a run's kernels."""

    PER_KERNEL = "per-kernel"
    """Each kernel is launched (or dispatched) by the host: each pays the per-kernel cost."""
    CUDA_GRAPH = "cuda-graph"
    """The run is captured once and replayed: one launch per run plus a small cost per node in the replay."""


class KvWrite(StrEnum):
    """How a runtime writes the KV cache of a decoder step."""

    IN_PLACE = "in-place"
    """``present`` aliases ``past`` (a shared or paged buffer): only the new tokens' keys and values are written."""
    COPY = "copy"
    """``present`` is a new tensor: past + new written in full every step (the ONNX graph as written)."""


class ConvBias(StrEnum):
    """How a runtime adds a convolution's bias."""

    FUSED = "fused"
    """In the convolution kernel (its epilogue): no traffic beyond the bias read."""
    SEPARATE = "separate"
    """One more elementwise kernel after the convolution: reads its output and the bias, writes the output."""


class RuntimeKernelClass(StrEnum):
    """The kernel classes a runtime's ``[efficiency]`` table may scale (:func:`onnxroof.runtime.classes.kernel_class`
    says which class a kernel is)."""

    GEMM = "gemm"
    """Matrix products with M ≥ 16 rows (prefill, batched decode, convolution-free GEMMs)."""
    GEMM_SMALL_M = "gemm_small_m"
    """Matrix products with 1 < M < 16 rows (small-batch decode on a float or quantized weight)."""
    GEMV_W16 = "gemv_w16"
    """Matrix-vector products (M = 1) on 16-bit (or wider) weights."""
    GEMV_W8 = "gemv_w8"
    """Matrix-vector products on 8-bit weights (int8, fp8)."""
    GEMV_W4 = "gemv_w4"
    """Dequantizing matrix-vector products on 4-bit weights (block size in the factor's source)."""
    DECODE_ATTENTION = "decode_attention"
    """Attention of one new token over the cache (fused attention ops with a past)."""
    PREFILL_ATTENTION = "prefill_attention"
    """Attention over a prompt (fused attention ops without a past, or with more than one new token)."""
    CONV = "conv"
    DEPTHWISE = "depthwise"
    ELEMENTWISE = "elementwise"
    NORMALIZATION = "normalization"
    SOFTMAX = "softmax"
    """Softmax kernels (a max, an exp-sum and a scaling pass over each row)."""
    REDUCTION = "reduction"
    """Reductions over an axis (sum, mean, max...)."""
    OTHER = "other"


_EMPTY_FLOATS: Mapping[RuntimeKernelClass, float] = MappingProxyType({})
_EMPTY_TEXT: Mapping[str, str] = MappingProxyType({})


@frozen_dataclass
class RuntimeLaunch:
    """A runtime's launch figures in seconds; None: the default :class:`Runtime` describes."""

    mode: LaunchMode
    per_kernel_s: float | None = None
    per_run_s: float | None = None
    per_request_s: float = 0.0
    """Host seconds a request pays once, before its first token (0 when the file gives none)."""


@frozen_dataclass
class Runtime:
    """One runtime profile, in SI units. Build it with :func:`onnxroof.runtime.load_runtime`."""

    name: str
    title: str
    targets: tuple[str, ...]
    """Platform kinds it runs on."""
    fusion_profile: FusionProfile
    launch: RuntimeLaunch
    kv_write: KvWrite = KvWrite.COPY
    conv_bias: ConvBias = ConvBias.FUSED
    efficiency: Mapping[RuntimeKernelClass, float] = field(default_factory=lambda: _EMPTY_FLOATS, hash=False)
    """Kernel class → factor on the platform's sustained roofs (absent: 1)."""
    sources: Mapping[str, str] = field(default_factory=lambda: _EMPTY_TEXT, hash=False)
    """Dotted key (``launch.per_kernel_us``, ``kv_cache.write``, ``kernels.conv_bias``, ``efficiency.gemv_w4``) →
    its source."""
    path: str = ""
    """``bundled:<name>`` or the file it was read from."""
    notes: str = ""

    @property
    def launch_mode(self) -> LaunchMode:
        return self.launch.mode

    @property
    def per_kernel_s(self) -> float | None:
        """The file's per-kernel (or per-node in a replay) figure, seconds; None when it gives none."""
        return self.launch.per_kernel_s

    @property
    def per_run_s(self) -> float | None:
        """The file's per-run figure, seconds; None when it gives none."""
        return self.launch.per_run_s

    @property
    def per_request_s(self) -> float:
        """Seconds a request pays once before its first token (``launch.per_request_us``; 0 when absent)."""
        return self.launch.per_request_s

    @property
    def captured(self) -> bool:
        """True when a run is one replay of a captured graph (:attr:`LaunchMode.CUDA_GRAPH`)."""
        return self.launch.mode == LaunchMode.CUDA_GRAPH

    def kernel_launch_s(self, host_launch_s: float) -> float:
        """Seconds each kernel launch costs, given the platform's ``launch_overhead_s`` (``host_launch_s``).

        ``per-kernel``: ``per_kernel_s``, else ``host_launch_s``; ``cuda-graph``: ``per_kernel_s`` (the cost of a
        node inside the replay), else 0."""
        if self.launch.per_kernel_s is not None:
            return self.launch.per_kernel_s
        return 0.0 if self.captured else host_launch_s

    def run_launch_s(self, host_launch_s: float) -> float:
        """Seconds a run pays once, given the platform's ``launch_overhead_s`` (``host_launch_s``).

        ``per_run_s`` when the file gives it; else ``cuda-graph``: ``host_launch_s`` (one graph launch),
        ``per-kernel``: 0."""
        if self.launch.per_run_s is not None:
            return self.launch.per_run_s
        return host_launch_s if self.captured else 0.0

    def factor(self, kernel_class: RuntimeKernelClass) -> float:
        """The efficiency factor of ``kernel_class`` (1 when the file gives none)."""
        return self.efficiency.get(kernel_class, 1.0)

    def runs_on(self, kind: str) -> bool:
        """True when the runtime runs on platforms of ``kind``."""
        return kind in self.targets


__all__ = [
    "MAX_EFFICIENCY",
    "SCHEMA_VERSION",
    "TARGET_KINDS",
    "KvWrite",
    "LaunchMode",
    "Runtime",
    "RuntimeKernelClass",
    "RuntimeLaunch",
]
