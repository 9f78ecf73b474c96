"""The cost of one operator: arithmetic and traffic, in plain SI counts.

Conventions (stated once, used everywhere):

* A multiply-accumulate (MAC) is ``FLOPS_PER_MAC = 2`` FLOPs. Rules report MACs only for ops that are
  built from multiply-accumulates (Conv, ConvTranspose, MatMul, Gemm, Einsum, recurrent cells); for every
  other op ``macs`` is 0 and ``flops`` counts the arithmetic operations of the op's defining formula.
* ``bytes_read`` / ``bytes_written`` are the bytes the op touches in memory, assuming each input is read
  once and each output written once (no cache reuse across ops). Weights are included in ``bytes_read``.
* ``params`` are the elements of constant (weight) tensors the op consumes as data; the analysis counts
  a weight shared by several nodes once in its totals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields

from onnxroof.core.frozen import frozen_dataclass

FLOPS_PER_MAC = 2
"""One multiply-accumulate = one multiply + one add = 2 FLOPs."""


@frozen_dataclass(slots=True)
class Cost:
    """Work and traffic of one node or kernel. Addable; ``Cost.zero()`` is the identity."""

    flops: float = 0.0
    macs: float = 0.0
    bytes_read: float = 0.0
    bytes_written: float = 0.0
    params: float = 0.0

    @staticmethod
    def zero() -> Cost:
        return _ZERO

    @property
    def bytes(self) -> float:
        """Total traffic: bytes read + bytes written."""
        return self.bytes_read + self.bytes_written

    def __add__(self, other: Cost) -> Cost:
        return Cost(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(Cost)))

    def scaled(self, factor: float) -> Cost:
        """Every figure multiplied by ``factor`` (a loop body run ``factor`` times)."""
        return Cost(*(getattr(self, f.name) * factor for f in fields(Cost)))


_ZERO = Cost()


def merge_weights(into: dict[str, tuple[float, float]], more: Mapping[str, tuple[float, float]]) -> None:
    """Add ``more`` (weight name -> (params, bytes)) to ``into`` in place; a name in both keeps each figure's
    larger value: a weight read by one node ``(n, b)`` and reached as the root of a derived weight by another
    ``(n, 0)`` counts ``(n, b)`` once."""
    for name, (params, size) in more.items():
        seen = into.get(name)
        into[name] = (params, size) if seen is None else (max(seen[0], params), max(seen[1], size))
