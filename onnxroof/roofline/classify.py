"""Place a cost on a platform's roofline.

For a kernel with ``F`` FLOPs and ``B`` bytes moved on a platform with peak ``P`` (FLOP/s, for the precision
it computes in):

* bandwidth: without measured cache levels, the DRAM bandwidth ``W_dram`` for all ``B`` bytes. With
  ``[memory] cache_levels``, the kernel's *cold* bytes ``C`` (``0 ≤ C ≤ B``, default 0: e.g. the weights of a
  model too large for the caches, evicted between runs) stream from DRAM, and its *hot* bytes ``H = B − C``
  at ``W_H``, the bandwidth of the smallest level whose size holds ``H`` (DRAM if none does): caches are
  assumed warm, as in repeated inference. The effective bandwidth is
  ``W = B / (C / W_dram + H / W_H)`` (``= W_H`` when ``C = 0``);
* efficiency ``e`` in (0, 1]: the platform's ``[efficiency]`` figure for the kernel's op class (FRAME-style
  derating; the class is declared by the op's rule, :mod:`onnxroof.costing.opclass`, or by the fusion pattern
  that renamed the kernel, :mod:`onnxroof.fusion.opclass`), 1 when no class is given or the platform has no
  figure for it;
* intensity ``I = F / B`` (FLOP/byte); ridge ``R = P / W``;
* memory efficiency ``e_mem``: ``e`` for a kernel served by the first cache level (where calibrate measures
  ``e``), ``1 / (1 + (1/e − 1) · W / W_1)`` for one served by a slower level (``W_1``: the first level's
  bandwidth; :func:`onnxroof.roofline.place.memory_efficiency`), ``e`` without cache levels;
* attainable FLOP/s ``= min(e · P, e_mem · I · W)`` (the roofline, derated);
* ``t_compute = F / (e · P)``, ``t_memory = B / (e_mem · W) = B / W + (1/e − 1) · B / W_1`` (``B / (e · W)``
  without cache levels);
* utilization ``u`` in (0, 1]: the share of a processing-element array a GEMM-like kernel keeps busy
  (:mod:`onnxroof.roofline.pe_array`; 1 without an ``[array]`` or for other kernels); the compute roof is ``u · P``;
* predicted time ``t = max(t_compute, t_memory) + t_launch`` with ``t_compute = F / (e · u · P)`` (per-kernel
  launch/dispatch overhead ``launch_overhead_s`` × launches);
* bound: ``compute`` when ``t_compute ≥ t_memory`` (equivalently ``I ≥ u · R``), else ``memory``;
* energy (platforms with energy figures, :mod:`onnxroof.roofline.energy`): ``F · E_op`` plus the DRAM bytes (the cold
  ones, and the hot ones when no cache level holds them) × ``E_dram`` and the cache-served bytes × ``E_onchip``.

``P`` and ``W_dram`` are the platform's roofs (:meth:`Platform.peak`, :attr:`Platform.roof_bandwidth`): the
datasheet figures times the ``[sustained]`` shares, or the datasheet figures as given with ``--peak``.
Bundled datasheet platforms have neither cache levels nor efficiency figures, so for them ``W`` is the DRAM
roof and ``e = 1``: the plain roofline.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from onnxroof.core.cost import Cost
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.states import Bound
from onnxroof.platform.model import Platform
from onnxroof.roofline.energy import Energy
from onnxroof.roofline.place import Work, floats, place


@frozen_dataclass(slots=True)
class RooflinePoint:
    """One cost placed on one platform's roofline (:func:`classify`): the roof used, the times and the bound."""

    precision: str
    intensity: float
    peak_flops: float
    bandwidth: float
    ridge: float
    attainable_flops: float
    t_compute: float
    t_memory: float
    t_overhead: float
    latency: float
    bound: Bound
    efficiency: float = 1.0
    """The derating ``e`` applied (1: none)."""
    level: str = "dram"
    """The memory level whose bandwidth ``W`` was used: ``dram``, ``onchip``, ``L1``, ``L2``... (measured cache
    levels), or ``L1+dram``... when cold bytes came from DRAM and the rest from a cache level."""
    utilization: float = 1.0
    """The processing-element array utilization ``u`` applied (1: none)."""
    energy: Energy | None = None
    """Dynamic energy of the kernel; None when the platform gives no energy figures."""


def classify(
    cost: Cost,
    platform: Platform,
    precision: str,
    runs: bool = True,
    launches: int = 1,
    *,
    op_class: str | None = None,
    hierarchy: bool = True,
    cold_bytes: float = 0.0,
    utilization: float = 1.0,
) -> RooflinePoint:
    """The roofline point of one ``cost`` run at ``precision`` on ``platform``: :func:`onnxroof.roofline.place.place`
    on a single row (formulas there and in the module docstring).

    ``runs=False`` (views, folded constants, unsupported ops) gives a zero-time point bound ``none``.
    ``launches`` kernels pay the launch overhead (a control-flow node launches its body's kernels each
    iteration). ``op_class`` (:class:`~onnxroof.core.states.OpClass`) selects the platform's efficiency figure;
    ``hierarchy=False`` ignores measured cache levels and uses the DRAM bandwidth; ``cold_bytes`` of the kernel's
    bytes come from DRAM even when the working set would fit a cache level (clamped to ``[0, B]``);
    ``utilization`` is the processing-element array utilization of a GEMM-like kernel
    (:func:`onnxroof.roofline.pe_array.utilization`).
    """
    target = platform if hierarchy or not platform.cache_levels else replace(platform, cache_levels=())
    work = Work(
        flops=floats([cost.flops]),
        bytes=floats([cost.bytes]),
        precision=np.asarray([precision], dtype=object),
        op_class=np.asarray(["" if op_class is None else op_class], dtype=object),
        runs=np.asarray([runs]),
        launches=floats([launches]),
        utilization=floats([utilization]),
        cold_bytes=floats([cold_bytes]),
    )
    figures = place(work, target)
    energy = (
        None
        if np.isnan(figures.energy_j[0])
        else Energy(float(figures.energy_compute_j[0]), float(figures.energy_memory_j[0]))
    )
    return RooflinePoint(
        precision,
        float(figures.intensity[0]),
        float(figures.peak_flops[0]),
        float(figures.bandwidth[0]),
        float(figures.ridge[0]),
        float(figures.attainable_flops[0]),
        float(figures.t_compute_s[0]),
        float(figures.t_memory_s[0]),
        float(figures.t_overhead_s[0]),
        float(figures.latency_s[0]),
        figures.bound[0],
        float(figures.efficiency[0]),
        str(figures.level[0]),
        float(figures.utilization[0]) if runs else 1.0,
        energy,
    )
