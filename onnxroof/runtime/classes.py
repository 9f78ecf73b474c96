"""Which :class:`~onnxroof.runtime.model.RuntimeKernelClass` a kernel is: the key of a runtime's ``[efficiency]``.

A pure function of facts the fusion stage knows (its op class, the GEMM view's M, the bit width of its weights,
whether it is attention and how many query tokens it has), so that it can be tested without a model.
"""

from __future__ import annotations

from onnxroof.runtime.model import RuntimeKernelClass

SMALL_M = 16
"""Below this many rows (and above 1) a matrix product is ``gemm_small_m``: an MMA tile of 16 rows is mostly
padding (tensor-core fragments are 16 rows tall on Volta through Hopper)."""

_BY_OP_CLASS = {
    "conv": RuntimeKernelClass.CONV,
    "depthwise": RuntimeKernelClass.DEPTHWISE,
    "elementwise": RuntimeKernelClass.ELEMENTWISE,
    "activation": RuntimeKernelClass.ELEMENTWISE,
    "normalization": RuntimeKernelClass.NORMALIZATION,
    "lrn": RuntimeKernelClass.NORMALIZATION,
    "softmax": RuntimeKernelClass.SOFTMAX,
    "reduction": RuntimeKernelClass.REDUCTION,
}


def kernel_class(
    op_class: str, m: int | None, weight_bits: int | None, attention: bool, query_tokens: int | None
) -> RuntimeKernelClass:
    """The kernel class of one kernel.

    * attention (a fused attention op): ``decode_attention`` when it has one query token, else
      ``prefill_attention``;
    * ``matmul`` with weights: ``M = 1``: ``gemv_w4`` (weights of ≤ 4 bits), ``gemv_w8`` (≤ 8), else ``gemv_w16``;
      ``1 < M < 16``: ``gemm_small_m``; else ``gemm``; ``matmul`` without weights (activation × activation):
      ``gemm_small_m`` for ``M < 16``, else ``gemm``; M unknown: ``gemm``;
    * ``conv``, ``depthwise``: themselves; ``elementwise`` and ``activation``: ``elementwise``;
      ``normalization`` and ``lrn``: ``normalization``; ``softmax`` and ``reduction``: themselves; anything else:
      ``other``.
    """
    if attention:
        return RuntimeKernelClass.DECODE_ATTENTION if query_tokens == 1 else RuntimeKernelClass.PREFILL_ATTENTION
    if op_class != "matmul":
        return _BY_OP_CLASS.get(op_class, RuntimeKernelClass.OTHER)
    if m is None or m >= SMALL_M:
        return RuntimeKernelClass.GEMM
    if m > 1 or weight_bits is None:
        return RuntimeKernelClass.GEMM_SMALL_M
    if weight_bits <= 4:
        return RuntimeKernelClass.GEMV_W4
    return RuntimeKernelClass.GEMV_W8 if weight_bits <= 8 else RuntimeKernelClass.GEMV_W16
