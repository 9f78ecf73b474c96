"""Reading and validating one platform TOML file (the schema is described in :mod:`onnxroof.platform.model`).

Every problem is one :class:`~onnxroof.core.errors.PlatformError` line naming the file and the dotted key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from onnxroof.core.errors import PlatformError
from onnxroof.core.profiles import FusionProfile
from onnxroof.core.strict_toml import TomlReader, show_toml
from onnxroof.platform.model import (
    EFFICIENCY_CLASSES,
    ENERGY_LEVELS,
    GPU_KEYS,
    KINDS,
    MEASUREMENT_KEYS,
    PRECISIONS,
    SCHEMA_VERSION,
    SPARSITY_KINDS,
    SUSTAINED_KEYS,
    TENSOR_CORE_GENERATIONS,
    CacheLevel,
    GpuSpec,
    PEArray,
    Platform,
)

_TOP_KEYS = frozenset(
    {
        "schema",
        "name",
        "title",
        "kind",
        "fusion_profile",
        "default_runtime",
        "aliases",
        "notes",
        "measured",
        "peak_tflops",
        "sparse_peak_tflops",
        "memory",
        "power",
        "runtime",
        "measurement",
        "efficiency",
        "sparsity",
        "array",
        "energy_pj_per_op",
        "energy_pj_per_byte",
        "sustained",
        "gpu",
    }
)
_TABLE_KEYS: dict[str, frozenset[str]] = {
    "peak_tflops": frozenset(PRECISIONS),
    "sparse_peak_tflops": frozenset(PRECISIONS),
    "memory": frozenset({"dram_bandwidth_gbps", "capacity_gb", "onchip_mb", "onchip_bandwidth_gbps"}),
    "power": frozenset({"tdp_w"}),
    "runtime": frozenset({"launch_overhead_us", "run_overhead_us"}),
    "efficiency": frozenset(EFFICIENCY_CLASSES),
    "array": frozenset({"height", "width", "instances", "clock_ghz"}),
    "energy_pj_per_op": frozenset(PRECISIONS),
    "energy_pj_per_byte": frozenset(ENERGY_LEVELS),
    "sustained": frozenset(SUSTAINED_KEYS),
}
_CACHE_LEVEL_KEYS = frozenset({"size_mb", "bandwidth_gbps", "source"})
_FIGURE_KEYS = frozenset({"value", "source"})


def parse_platform(data: bytes, *, label: str, origin: str, stem: str | None) -> Platform:
    """Validate one platform file's bytes (``label`` names it in errors; ``stem``, if given, is its name)."""
    reader = TomlReader(label, PlatformError, one_line=True)
    doc = reader.load(data)
    reader.refuse_unknown(doc, _TOP_KEYS)
    reader.require(doc, ("schema", "name", "title", "kind", "fusion_profile"))
    reader.schema(doc["schema"], SCHEMA_VERSION)
    header = _header(doc, reader, stem)
    figures, sources, raw_levels = _figure_tables(doc, reader)
    cache_levels = _cache_levels(raw_levels, reader, sources) if raw_levels is not None else ()
    measurement = _measurement(doc.get("measurement", {}), reader)
    array = _array(figures["array"], reader)
    gpu = _gpu(doc.get("gpu"), reader, sources, header["kind"])
    sparsity = doc.get("sparsity", "2:4" if figures["sparse_peak_tflops"] else "none")
    if sparsity not in SPARSITY_KINDS:
        raise reader.fail("sparsity", f"must be one of {', '.join(SPARSITY_KINDS)}, got {sparsity!r}")
    _check_energy(figures, reader)
    onchip = _onchip_level(figures["memory"], sources, reader)  # checked even when cache_levels are given
    cache_levels = cache_levels or onchip
    _check_required_figures(figures, reader)
    if figures["sustained"] and header["measured"]:
        raise reader.fail(
            "sustained", "a measured platform (measured = true) has no [sustained] table: its roofs are measured"
        )
    if measurement and not header["measured"]:
        raise reader.fail("measurement", "only a measured platform (measured = true) has a [measurement] table")

    def scaled(values: Mapping[str, float], factor: float) -> Mapping[str, float]:
        return MappingProxyType({k: v * factor for k, v in values.items()})

    def optional(table: str, key: str, factor: float) -> float | None:
        value = figures[table].get(key)
        return None if value is None else value * factor

    return Platform(
        **header,
        peak_flops=scaled(figures["peak_tflops"], 1e12),
        sparse_peak_flops=scaled(figures["sparse_peak_tflops"], 1e12),
        dram_bandwidth=figures["memory"]["dram_bandwidth_gbps"] * 1e9,
        memory_capacity=optional("memory", "capacity_gb", 1e9),
        onchip_memory=optional("memory", "onchip_mb", 1e6),
        tdp_w=optional("power", "tdp_w", 1.0),
        launch_overhead_s=figures["runtime"]["launch_overhead_us"] * 1e-6,
        sources=MappingProxyType(sources),
        path=origin,
        measurement=MappingProxyType(measurement),
        cache_levels=cache_levels,
        efficiency=MappingProxyType(dict(figures["efficiency"])),
        run_overhead_s=(optional("runtime", "run_overhead_us", 1e-6) or 0.0),
        onchip_bandwidth=optional("memory", "onchip_bandwidth_gbps", 1e9),
        array=array,
        sparsity=sparsity,
        energy_per_op=scaled(figures["energy_pj_per_op"], 1e-12),
        energy_per_byte=scaled(figures["energy_pj_per_byte"], 1e-12),
        sustained=MappingProxyType(dict(figures["sustained"])),
        gpu=gpu,
    )


def _header(doc: Mapping[str, Any], reader: TomlReader, stem: str | None) -> dict[str, Any]:
    """The platform's identity and description: name, title, kind, fusion profile, aliases, notes, measured, and the
    default runtime (a bundled runtime's name; empty: the one its fusion profile implies, checked where it is used)."""
    name = reader.string(doc["name"], "name", non_empty=True)
    if stem is not None and name != stem:
        raise reader.fail("name", f"must equal the file stem {stem!r}, got {name!r}")
    title = reader.string(doc["title"], "title", non_empty=True)
    kind = reader.choice(doc["kind"], "kind", KINDS)
    fusion_profile = FusionProfile(reader.choice(doc["fusion_profile"], "fusion_profile", FusionProfile))
    aliases = doc.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
        raise reader.fail("aliases", f"must be a list of non-empty strings, got {aliases!r}")
    return {
        "name": name,
        "title": title,
        "kind": kind,
        "fusion_profile": fusion_profile,
        "aliases": tuple(aliases),
        "notes": reader.string(doc.get("notes", ""), "notes"),
        "measured": reader.boolean(doc.get("measured", False), "measured"),
        "default_runtime": reader.string(doc.get("default_runtime", ""), "default_runtime"),
    }


def _figure_tables(
    doc: Mapping[str, Any], reader: TomlReader
) -> tuple[dict[str, dict[str, float]], dict[str, str], Any]:
    """The tables of sourced figures: ``{table: {key: value}}``, ``{"table.key": source}``, and the raw
    ``memory.cache_levels`` (None if not given)."""
    sources: dict[str, str] = {}
    figures: dict[str, dict[str, float]] = {}
    raw_levels: Any = None
    for table, allowed in _TABLE_KEYS.items():
        figures[table] = {}
        for key, fig in reader.table(doc.get(table, {}), table).items():
            if table == "memory" and key == "cache_levels":
                raw_levels = fig
                continue
            reader.known(key, allowed, table, ["cache_levels"] if table == "memory" else [])
            figures[table][key], sources[f"{table}.{key}"] = _figure(fig, f"{table}.{key}", reader)
    for table in ("efficiency", "sustained"):
        for key, value in figures[table].items():
            if value > 1:
                raise reader.fail(f"{table}.{key}", f"value must lie in (0, 1], got {show_toml(value)}")
    return figures, sources, raw_levels


def _check_energy(figures: Mapping[str, Mapping[str, float]], reader: TomlReader) -> None:
    """Energy figures come as a pair of tables, and the per-byte one has at least ``dram``."""
    per_op, per_byte = figures["energy_pj_per_op"], figures["energy_pj_per_byte"]
    if per_byte and "dram" not in per_byte:
        raise reader.fail("energy_pj_per_byte.dram", "missing required key")
    if bool(per_op) != bool(per_byte):
        given, missing = (
            ("energy_pj_per_op", "energy_pj_per_byte") if per_op else ("energy_pj_per_byte", "energy_pj_per_op")
        )
        raise reader.fail(missing, f"missing required table: [{given}] needs [{missing}]")


def _onchip_level(
    memory: Mapping[str, float], sources: Mapping[str, str], reader: TomlReader
) -> tuple[CacheLevel, ...]:
    """The one on-chip level ``onchip_mb`` and ``onchip_bandwidth_gbps`` describe (none without a bandwidth)."""
    bandwidth = memory.get("onchip_bandwidth_gbps")
    if bandwidth is None:
        return ()
    if "onchip_mb" not in memory:
        raise reader.fail("memory.onchip_mb", "missing required key: memory.onchip_bandwidth_gbps needs it")
    return (CacheLevel(memory["onchip_mb"] * 1e6, bandwidth * 1e9, sources["memory.onchip_bandwidth_gbps"], "onchip"),)


def _check_required_figures(figures: Mapping[str, Mapping[str, float]], reader: TomlReader) -> None:
    """A peak for some precision, the DRAM bandwidth and the launch overhead."""
    if not figures["peak_tflops"]:
        raise reader.fail("peak_tflops", f"missing required key: give at least one of {', '.join(PRECISIONS)}")
    reader.require(figures["memory"], ("dram_bandwidth_gbps",), "memory")
    reader.require(figures["runtime"], ("launch_overhead_us",), "runtime")


def _array(values: Mapping[str, float], reader: TomlReader) -> PEArray | None:
    """Validate ``[array]``: integer ``height``, ``width`` (and ``instances``, default 1) and ``clock_ghz``."""
    if not values:
        return None
    reader.require(values, ("height", "width", "clock_ghz"), "array")
    counts = {}
    for key in ("height", "width", "instances"):
        value = values.get(key, 1.0)
        if value != int(value):
            raise reader.fail(f"array.{key}", f"value must be a whole number of PEs, got {show_toml(value)}")
        counts[key] = int(value)
    return PEArray(counts["height"], counts["width"], counts["instances"], values["clock_ghz"] * 1e9)


def _gpu(raw: Any, reader: TomlReader, sources: dict[str, str], kind: str) -> GpuSpec | None:
    """Validate ``[gpu]``: ``sm_count`` (whole), ``boost_clock_ghz``, ``l2_mb``, optional ``l2_bytes_per_clock``
    (sourced figures) and ``tensor_cores`` (a sourced generation name); only on ``kind = "gpu"``."""
    if raw is None:
        return None
    table = reader.table(raw, "gpu")
    if kind != "gpu":
        raise reader.fail("gpu", f'only a kind = "gpu" platform has a [gpu] table, this one is {kind!r}')
    for key in table:
        reader.known(key, GPU_KEYS, "gpu")
    reader.require(table, ("sm_count", "boost_clock_ghz", "l2_mb", "tensor_cores"), "gpu")
    values: dict[str, float] = {}
    for key in ("sm_count", "boost_clock_ghz", "l2_mb", "l2_bytes_per_clock"):
        if key in table:
            values[key], sources[f"gpu.{key}"] = _figure(table[key], f"gpu.{key}", reader)
    if values["sm_count"] != int(values["sm_count"]):
        raise reader.fail("gpu.sm_count", f"value must be a whole number of SMs, got {show_toml(values['sm_count'])}")
    generation = table["tensor_cores"]
    if not isinstance(generation, dict):
        raise reader.fail(
            "gpu.tensor_cores", f'must be a table {{ value = "<generation>", source = "<text>" }}, got {generation!r}'
        )
    reader.refuse_unknown(generation, _FIGURE_KEYS, "gpu.tensor_cores")
    reader.require(generation, ("value", "source"), "gpu.tensor_cores")
    name = reader.choice(generation["value"], "gpu.tensor_cores.value", TENSOR_CORE_GENERATIONS)
    source = generation["source"]
    if not isinstance(source, str) or not source.strip():
        raise reader.fail("gpu.tensor_cores.source", f"must be a non-empty string, got {source!r}")
    sources["gpu.tensor_cores"] = source
    return GpuSpec(
        sm_count=int(values["sm_count"]),
        clock_hz=values["boost_clock_ghz"] * 1e9,
        l2_size=values["l2_mb"] * 1e6,
        tensor_cores=name,
        l2_bytes_per_clock=values.get("l2_bytes_per_clock"),
    )


def _cache_levels(raw: Any, reader: TomlReader, sources: dict[str, str]) -> tuple[CacheLevel, ...]:
    """Validate ``[memory] cache_levels``: a list of ``{ size_mb, bandwidth_gbps, source }`` in increasing size."""
    key = "memory.cache_levels"
    if not isinstance(raw, list):
        raise reader.fail(key, f"must be a list of {{ size_mb, bandwidth_gbps, source }} tables, got {raw!r}")
    levels: list[CacheLevel] = []
    for index, entry in enumerate(raw):
        where = f"{key}[{index}]"
        if not isinstance(entry, dict):
            raise reader.fail(where, f"must be a table {{ size_mb, bandwidth_gbps, source }}, got {entry!r}")
        reader.refuse_unknown(entry, _CACHE_LEVEL_KEYS, where)
        reader.require(entry, ("size_mb", "bandwidth_gbps", "source"), where)
        size, _ = _figure({"value": entry["size_mb"], "source": entry["source"]}, f"{where}.size_mb", reader)
        bandwidth, source = _figure(
            {"value": entry["bandwidth_gbps"], "source": entry["source"]}, f"{where}.bandwidth_gbps", reader
        )
        if levels and size * 1e6 <= levels[-1].size:
            raise reader.fail(f"{where}.size_mb", "cache levels must be listed in increasing size")
        levels.append(CacheLevel(size * 1e6, bandwidth * 1e9, source))
        sources[where] = source
    return tuple(levels)


def _measurement(raw: Any, reader: TomlReader) -> dict[str, str | int | float | bool]:
    """Validate ``[measurement]``: known keys, each a string, number or boolean (no sources)."""
    reader.table(raw, "measurement")
    for key, value in raw.items():
        reader.known(key, MEASUREMENT_KEYS, "measurement")
        if not isinstance(value, str | int | float | bool):
            raise reader.fail(f"measurement.{key}", f"must be a string, number or boolean, got {value!r}")
    return dict(raw)


def _figure(fig: Any, where: str, reader: TomlReader) -> tuple[float, str]:
    """Validate ``{ value = <positive number>, source = "<text>" }`` and return (value, source)."""
    if not isinstance(fig, dict):
        raise reader.fail(where, f'must be a table {{ value = <number>, source = "<text>" }}, got {fig!r}')
    reader.refuse_unknown(fig, _FIGURE_KEYS, where)
    reader.require(fig, ("value", "source"), where)
    value, source = fig["value"], fig["source"]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise reader.fail(where, f"value must be a positive number, got {show_toml(value)}")
    if not isinstance(source, str) or not source.strip():
        raise reader.fail(f"{where}.source", f"must be a non-empty string, got {source!r}")
    return float(value), source
