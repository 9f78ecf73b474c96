"""The analysis as one plain document: the documented JSON schema (``schema: 1``, docs/json-schema.md).

Every figure is a plain number in SI units (FLOPs, bytes, seconds, FLOP/s, B/s). Infinite intensities
(FLOPs with no bytes moved) become ``None`` (JSON ``null``). Renderers serialize it; gates, diffs, the
measured overlay and the fleet table read it, so every output shows the same figures.
"""

from __future__ import annotations

from collections.abc import Iterator
from math import isfinite
from typing import Any

from onnxroof.analysis.analyze import Analysis
from onnxroof.platform.model import Platform

SCHEMA_VERSION = 1

NODE_FIELDS = (
    "id",
    "name",
    "op_type",
    "domain",
    "state",
    "kind",
    "dtype",
    "precision",
    "input_shapes",
    "output_shapes",
    "flops",
    "macs",
    "bytes_read",
    "bytes_written",
    "params",
    "intensity",
    "peak_flops",
    "ridge",
    "attainable_flops",
    "t_compute_s",
    "t_memory_s",
    "t_overhead_s",
    "latency_s",
    "bound",
    "utilization",
    "compute_density",
    "energy_j",
    "energy_compute_j",
    "energy_memory_j",
    "energy_bound",
    "note",
)


def finite_column(values: list[Any]) -> list[Any]:
    """``values`` with every non-finite float (an intensity with no bytes moved) as None, the JSON ``null``;
    the list itself when there is none (a NumPy float64 is a ``float`` too).

    Most columns are settled without a test per value: one whose values sum to a finite number holds no
    non-finite float (an inf or NaN anywhere makes the sum inf or NaN), and one that cannot be summed (text,
    None, lists) needs no change unless a float is among its value types. The rest (a sum that overflows or
    is not finite, floats beside text or None) are checked value by value."""
    try:
        if isfinite(sum(values)):
            return values
    except (TypeError, OverflowError):
        if not any(issubclass(kind, float) for kind in set(map(type, values))):
            return values
    if any(isinstance(value, float) and not isfinite(value) for value in values):
        return [None if isinstance(value, float) and not isfinite(value) else value for value in values]
    return values


def node_records(analysis: Analysis) -> Iterator[dict[str, Any]]:
    """Each node's :data:`NODE_FIELDS` as the JSON document gives them (non-finite figures as None), in order."""
    return analysis.nodes.records(fix=finite_column, fields=NODE_FIELDS)


def kernel_records(analysis: Analysis) -> Iterator[dict[str, Any]]:
    """Each kernel's fields as the JSON document gives them (non-finite figures as None), in order."""
    return analysis.kernels.records(fix=finite_column)


def node_columns(analysis: Analysis, lists: bool = True, gather: bool = False) -> Iterator[dict[str, Any]]:
    """:func:`node_records` as runs of columns (:meth:`~onnxroof.roofline.rows.RowTable.column_chunks`; with
    ``lists=False`` sequences may be tuples; with ``gather`` the fields nodes share come as
    :class:`~onnxroof.roofline.rows.Gathered` runs)."""
    return analysis.nodes.column_chunks(fix=finite_column, fields=NODE_FIELDS, lists=lists, gather=gather)


def kernel_columns(analysis: Analysis, lists: bool = True) -> Iterator[dict[str, list[Any]]]:
    """:func:`kernel_records` as runs of columns (:meth:`~onnxroof.roofline.rows.RowTable.column_chunks`; with
    ``lists=False`` sequences may be tuples)."""
    return analysis.kernels.column_chunks(fix=finite_column, lists=lists)


def platform_dict(analysis: Analysis) -> dict[str, Any]:
    return platform_fields(analysis.platform)


def platform_fields(p: Platform) -> dict[str, Any]:
    """A platform's figures in SI units (FLOP/s, B/s, bytes, seconds, joules)."""
    return {
        "name": p.name,
        "title": p.title,
        "kind": p.kind,
        "source": p.path,
        "peak_flops": dict(p.peak_flops),
        "sparse_peak_flops": dict(p.sparse_peak_flops),
        "dram_bandwidth": p.dram_bandwidth,
        "ridge": {precision: p.ridge(precision) for precision in p.precisions()},
        "memory_capacity": p.memory_capacity,
        "onchip_memory": p.onchip_memory,
        "tdp_w": p.tdp_w,
        "launch_overhead_s": p.launch_overhead_s,
        "fusion_profile": p.fusion_profile,
        "onchip_bandwidth": p.onchip_bandwidth,
        "sparsity": p.sparsity,
        "array": None
        if p.array is None
        else {
            "height": p.array.height,
            "width": p.array.width,
            "instances": p.array.instances,
            "clock_hz": p.array.clock_hz,
            "peak_flops": p.array.peak_flops,
        },
        "energy_per_op_j": dict(p.energy_per_op),
        "energy_per_byte_j": dict(p.energy_per_byte),
        **({"sustained": sustained_fields(p)} if p.sustained else {}),
        **({"gpu": gpu_fields(p)} if p.gpu is not None else {}),
    }


def gpu_fields(p: Platform) -> dict[str, Any]:
    """The ``[gpu]`` table in SI units, each figure with its source."""
    gpu = p.gpu
    assert gpu is not None
    values: dict[str, Any] = {
        "sm_count": gpu.sm_count,
        "clock_hz": gpu.clock_hz,
        "l2_size": gpu.l2_size,
        "tensor_cores": gpu.tensor_cores,
        "l2_bytes_per_clock": gpu.l2_bytes_per_clock,
    }
    keys = {"clock_hz": "boost_clock_ghz", "l2_size": "l2_mb"}
    return {**values, "sources": {k: p.sources.get(f"gpu.{keys.get(k, k)}", "") for k in values}}


def time_model_fields(analysis: Analysis) -> dict[str, Any]:
    """The time model that placed the kernels: ``name``, ``launch_mode`` and every other figure or constant it
    assumed, with its source (:func:`~onnxroof.roofline.gpu.describe_time_model`)."""
    info = dict(analysis.time_model_info)
    name = info.pop("name", analysis.time_model)
    mode = info.pop("launch_mode", "")
    return {"name": name, "launch_mode": mode, "constants": info}


def sustained_fields(p: Platform) -> dict[str, Any]:
    """The ``[sustained]`` shares with their sources, whether the roofline applied them (not with ``--peak``),
    and the roofs it used: ``dram_bandwidth`` (B/s) and ``peak_flops`` per precision (FLOP/s)."""
    return {
        **{
            key: {"value": value, "source": p.sources.get(f"sustained.{key}", "")} for key, value in p.sustained.items()
        },
        "applied": not p.peak_roofs,
        "roofs": {
            "dram_bandwidth": p.roof_bandwidth,
            "peak_flops": {precision: p.peak(precision) for precision in p.precisions()},
        },
    }


def _bounds(bounds) -> dict[str, float]:
    return {"flops": bounds.flops, "bytes": bounds.bytes, "latency_s": bounds.latency_s}


def to_dict(analysis: Analysis, *, lazy: bool = False) -> dict[str, Any]:
    """The stable JSON document (see docs/json-schema.md).

    ``lazy=True`` gives the per-node and per-kernel lists as iterators, each item built as it is read (a
    renderer that writes as it goes then never holds a million node dicts at once: ~1 KB each)."""
    # The findings and their catalog on first use: `llm`'s views read this module's platform fields, never a
    # whole document (~3 ms of its start-up: findings, catalog, finding_context).
    from onnxroof.analysis.findings import find

    m, t = analysis.model, analysis.totals
    nodes = node_records(analysis)
    kernels = kernel_records(analysis)
    return {
        "schema": SCHEMA_VERSION,
        "model": {
            "path": m.path,
            "graph_name": m.graph_name,
            "producer": m.producer,
            "ir_version": m.ir_version,
            "opset": m.opset,
            "nodes": m.nodes,
            "dims": dict(m.dims),
            "inputs": [{"name": n, "shape": s, "dtype": d} for n, s, d in m.inputs],
            "outputs": [{"name": n, "shape": s, "dtype": d} for n, s, d in m.outputs],
            "subgraph_nodes": list(m.subgraph_nodes),
        },
        "platform": platform_dict(analysis),
        "precision_override": analysis.precision_override,
        "whatif": analysis.whatif.to_dict(),
        "totals": {
            "flops": t.flops,
            "macs": t.macs,
            "params": t.params,
            "weight_bytes": t.weight_bytes,
            "weight_bytes_stored": t.weight_bytes_stored,
            "bytes_read": t.bytes_read,
            "bytes_written": t.bytes_written,
            "bytes": t.bytes,
            "latency_s": t.latency_s,
            "compute_time_s": t.compute_time_s,
            "memory_time_s": t.memory_time_s,
            "overhead_time_s": t.overhead_time_s,
            "memory_bound_share": t.memory_bound_share,
            "peak_activation_bytes": t.peak_activation_bytes,
            "peak_activation_node": t.peak_activation_node,
            "nodes": t.nodes,
            "kernels": t.kernels,
            "states": dict(t.states),
            "unfused": _bounds(t.unfused),
            "fused": _bounds(t.fused),
            "ideal": _bounds(t.ideal),
            "layout_bytes": t.layout_bytes,
            "layout_latency_s": t.layout_latency_s,
            "layout_share": t.layout_share,
            "energy_j": t.energy_j,
            "energy_compute_j": t.energy_compute_j,
            "energy_memory_j": t.energy_memory_j,
            "energy_delay_js": t.energy_delay_js,
            "energy_memory_share": t.energy_memory_share,
            "array_utilization": t.array_utilization,
        },
        "nodes": nodes if lazy else list(nodes),
        "kernels": kernels if lazy else list(kernels),
        "time_model": time_model_fields(analysis),
        **({"runtime": analysis.runtime.to_dict()} if analysis.runtime is not None else {}),
        "fusion": {
            "profile": analysis.fusion_profile,
            "misses": [
                {"pattern": m.pattern, "nodes": list(m.node_ids), "reason": m.reason} for m in analysis.fusion_misses
            ],
        },
        "op_types": [
            {
                "op_type": r.op_type,
                "domain": r.domain,
                "count": r.count,
                "flops": r.flops,
                "macs": r.macs,
                "bytes": r.bytes,
                "params": r.params,
                "latency_s": r.latency_s,
                "share": r.share,
            }
            for r in analysis.op_types
        ],
        "unsupported": {op: {"count": len(ids), "nodes": list(ids)} for op, ids in analysis.unsupported.items()},
        "findings": [finding.to_dict() for finding in find(analysis)],
        "warnings": list(analysis.warnings),
    }
