"""What a time model needs to know of a kernel beyond its FLOPs and bytes: built once, by the fusion stage."""

from __future__ import annotations

import math

from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.gemm import GEMM_OPS, GemmShape
from onnxroof.core.ir import OpView

#: Element types a GEMM accumulates in: integers in int32, fp64 in fp64, every other float in fp32 (cuBLAS and
#: cuDNN's default compute types for fp16/bf16/fp8/tf32 GEMMs and convolutions; int8 IMMA accumulates in int32).
_INTEGER = frozenset({"int8", "uint8", "int4", "uint4", "int16", "uint16", "int32", "uint32"})


def accumulation_dtype(dtype: str) -> str:
    """The element type a product of ``dtype`` operands accumulates in: ``int32`` for integers, ``float64`` for
    ``float64``, ``float32`` for every other float (``unknown`` stays ``unknown``)."""
    if dtype == "unknown":
        return dtype
    if dtype in _INTEGER:
        return "int32"
    return "float64" if dtype == "float64" else "float32"


@frozen_dataclass(slots=True)
class ConvGeometry:
    """A convolution as its implicit GEMM sees it: ``batch`` images, ``groups`` groups of ``in_per_group`` input and
    ``out_per_group`` output channels, a ``kernel`` window with ``strides`` and ``dilations`` (one entry per
    spatial axis). The GEMM view (:class:`~onnxroof.core.gemm.GemmShape`) follows: ``m = batch · Π out``,
    ``k = in_per_group · Π kernel``, ``n = out_per_group``."""

    batch: int
    groups: int
    in_per_group: int
    out_per_group: int
    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]

    @property
    def window(self) -> int:
        """``Π kernel``: the taps one output reads per input channel."""
        return math.prod(self.kernel)


def conv_geometry(op: OpView) -> ConvGeometry | None:
    """The :class:`ConvGeometry` of a forward convolution (``GEMM_OPS`` form ``conv``) with a static filter and
    a known batch, else None. Strides and dilations default to 1 per spatial axis (ONNX's defaults)."""
    form = GEMM_OPS.get(op.op_type)
    if form is None or form[0] != "conv":
        return None
    w, x = op.input(form[1]), op.input(0)
    if w is None or w.shape is None or len(w.shape) < 3 or None in w.shape:
        return None
    if x is None or x.shape is None or not x.shape or x.shape[0] is None:
        return None
    dims = tuple(int(d or 0) for d in w.shape)  # every dim static (checked above)
    group = int(op.attrs.get("group", 1) or 1)
    spatial = len(dims) - 2
    kernel = dims[2:]
    strides = tuple(int(s) for s in (op.attrs.get("strides") or (1,) * spatial))
    dilations = tuple(int(d) for d in (op.attrs.get("dilations") or (1,) * spatial))
    return ConvGeometry(
        batch=int(x.shape[0]),
        groups=group,
        in_per_group=dims[1],
        out_per_group=dims[0] // group,
        kernel=kernel,
        strides=strides,
        dilations=dilations,
    )


@frozen_dataclass(slots=True)
class KernelDescriptor:
    """A kernel as a time model sees it.

    ``op_class``: the efficiency class of the op the runtime runs for it (a key of a platform's ``[efficiency]``:
    ``matmul``, ``conv``, ``depthwise``, ``elementwise``...); ``gemm``: the GEMM view of its first GEMM-like member
    (M, N, K, groups: the batch count of a batched product, a convolution's groups; a convolution as its implicit
    GEMM: :mod:`onnxroof.core.gemm`), None for other kernels; ``conv``: that member's convolution geometry
    (kernel size, stride, dilation, channels per group, groups, batch), None when it is not a convolution;
    ``dtype``: the anchor's element type; ``weights``: the weight tensors its members read; ``input_dtypes``: the
    element types of the GEMM member's (else the anchor's) inputs, in order (``""`` for a missing optional input);
    ``weight_inputs``: the positions among them that are weights; ``weight_dtype``: the first weight's element type
    (``""`` without one); ``accumulation``: the element type its products accumulate in
    (:func:`accumulation_dtype` of ``dtype``).
    """

    op_class: str
    gemm: GemmShape | None
    dtype: str
    weights: tuple[str, ...] = ()
    conv: ConvGeometry | None = None
    input_dtypes: tuple[str, ...] = ()
    weight_inputs: tuple[int, ...] = ()
    weight_dtype: str = ""
    accumulation: str = ""
