"""Energy: the floorline beside the roofline.

A platform with ``[energy_pj_per_op]`` and ``[energy_pj_per_byte]`` prices a kernel of ``F`` operations (FLOPs;
OPs for integer precisions) moving ``B_dram`` bytes from DRAM and ``B_near`` bytes from the on-chip level
(or a measured cache level):

* ``E_compute = F · E_op(precision)`` — the precision's figure, else the next one down the roofline's fallback
  chain (bf16 → fp16 → fp32, int8 → fp32...);
* ``E_memory = B_dram · E_dram + B_near · E_onchip`` (``E_onchip`` defaults to ``E_dram`` when not given);
* ``E = E_compute + E_memory``; the kernel is *energy-bound* by ``compute`` when ``E_compute ≥ E_memory``,
  else by ``memory``.

The floorline is the energy per operation a kernel of intensity ``I = F / B`` cannot go below:
``E / F = E_op + E_mem / I`` (all bytes from DRAM), falling towards the floor ``E_op`` as intensity grows;
the *energy ridge* ``I* = E_mem / E_op`` is where moving data and computing cost the same. Only dynamic energy
is modelled (no static or idle power).
"""

from __future__ import annotations

import math

from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.states import Bound
from onnxroof.platform.model import PRECISION_FALLBACK, Platform


@frozen_dataclass(slots=True)
class Energy:
    """A kernel's dynamic energy, J: ``compute_j = F · E_op``, ``memory_j = B_dram · E_dram + B_near · E_onchip``
    (module docstring)."""

    compute_j: float
    memory_j: float

    @property
    def total_j(self) -> float:
        return self.compute_j + self.memory_j

    @property
    def bound(self) -> Bound:
        return Bound.COMPUTE if self.compute_j >= self.memory_j and self.compute_j > 0 else Bound.MEMORY


def op_energy(platform: Platform, precision: str) -> float | None:
    """Joules per operation at ``precision`` (fallback chain as the roofline's), None without energy figures."""
    if not platform.has_energy:
        return None
    current: str | None = precision
    while current is not None:
        if current in platform.energy_per_op:
            return platform.energy_per_op[current]
        current = PRECISION_FALLBACK.get(current)
    return max(platform.energy_per_op.values())


def byte_energy(platform: Platform, level: str) -> float:
    """Joules per byte from ``level``: ``dram``, else the on-chip figure (DRAM's when none is given)."""
    dram = platform.energy_per_byte.get("dram", 0.0)
    return dram if level == "dram" else platform.energy_per_byte.get("onchip", dram)


def kernel_energy(
    platform: Platform, precision: str, ops: float, dram_bytes: float, near_bytes: float
) -> Energy | None:
    """The energy of one kernel (formulas: module docstring); None when the platform gives no energy figures."""
    per_op = op_energy(platform, precision)
    if per_op is None:
        return None
    memory = dram_bytes * byte_energy(platform, "dram") + near_bytes * byte_energy(platform, "onchip")
    return Energy(ops * per_op, memory)


def floorline(platform: Platform, precision: str, intensity: float) -> float | None:
    """Least energy per operation (J/op) at ``intensity`` FLOP/byte, all bytes from DRAM: ``E_op + E_dram / I``."""
    per_op = op_energy(platform, precision)
    if per_op is None:
        return None
    if intensity <= 0:
        return math.inf
    return per_op + byte_energy(platform, "dram") / intensity


def energy_ridge(platform: Platform, precision: str) -> float | None:
    """Intensity (FLOP/byte) where compute and DRAM energy are equal: ``E_dram / E_op``."""
    per_op = op_energy(platform, precision)
    return None if per_op is None else byte_energy(platform, "dram") / per_op
