"""Reading and validating one platform TOML file (the schema is described in :mod:`onnxroof.platform.model`).

Every problem is one :class:`~onnxroof.core.errors.PlatformError` line naming the file and the dotted key.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from onnxroof.core.errors import PlatformError
from onnxroof.platform.model import (
    EFFICIENCY_CLASSES,
    ENERGY_LEVELS,
    FUSION_PROFILES,
    KINDS,
    MEASUREMENT_KEYS,
    PRECISIONS,
    SCHEMA_VERSION,
    SPARSITY_KINDS,
    CacheLevel,
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
}
_CACHE_LEVEL_KEYS = frozenset({"size_mb", "bandwidth_gbps", "source"})
_FIGURE_KEYS = frozenset({"value", "source"})


def _fail(label: str, key: str, message: str) -> PlatformError:
    text = f"{label}: {key}: {message}" if key else f"{label}: {message}"
    return PlatformError(" ".join(text.split()))


def parse_platform(data: bytes, *, label: str, origin: str, stem: str | None) -> Platform:
    try:
        doc = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise _fail(label, "", f"invalid TOML: {exc}") from None

    for key in doc:
        if key not in _TOP_KEYS:
            raise _fail(label, key, f"unknown key (allowed: {', '.join(sorted(_TOP_KEYS))})")
    for key in ("schema", "name", "title", "kind", "fusion_profile"):
        if key not in doc:
            raise _fail(label, key, "missing required key")

    schema = doc["schema"]
    if type(schema) is not int or schema != SCHEMA_VERSION:
        raise _fail(label, "schema", f"must be {SCHEMA_VERSION}, got {schema!r}")
    name = _string(doc, "name", label)
    if stem is not None and name != stem:
        raise _fail(label, "name", f"must equal the file stem {stem!r}, got {name!r}")
    title = _string(doc, "title", label)
    kind = _choice(doc, "kind", KINDS, label)
    fusion_profile = _choice(doc, "fusion_profile", FUSION_PROFILES, label)
    aliases = doc.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
        raise _fail(label, "aliases", f"must be a list of non-empty strings, got {aliases!r}")
    notes = doc.get("notes", "")
    if not isinstance(notes, str):
        raise _fail(label, "notes", f"must be a string, got {notes!r}")
    measured = doc.get("measured", False)
    if not isinstance(measured, bool):
        raise _fail(label, "measured", f"must be true or false, got {measured!r}")

    sources: dict[str, str] = {}
    figures: dict[str, dict[str, float]] = {}
    raw_levels: Any = None
    for table, allowed in _TABLE_KEYS.items():
        raw = doc.get(table, {})
        if not isinstance(raw, dict):
            raise _fail(label, table, f"must be a table, got {raw!r}")
        figures[table] = {}
        for key, fig in raw.items():
            dotted = f"{table}.{key}"
            if table == "memory" and key == "cache_levels":
                raw_levels = fig
                continue
            if key not in allowed:
                extra = ["cache_levels"] if table == "memory" else []
                raise _fail(label, dotted, f"unknown key (allowed: {', '.join(sorted([*allowed, *extra]))})")
            figures[table][key], sources[dotted] = _figure(fig, dotted, label)
    for key, value in figures["efficiency"].items():
        if value > 1:
            raise _fail(label, f"efficiency.{key}", f"value must lie in (0, 1], got {_show(value)}")
    cache_levels = _cache_levels(raw_levels, label, sources) if raw_levels is not None else ()
    measurement = _measurement(doc.get("measurement", {}), label)
    array = _array(figures["array"], label)
    sparsity = doc.get("sparsity", "2:4" if figures["sparse_peak_tflops"] else "none")
    if sparsity not in SPARSITY_KINDS:
        raise _fail(label, "sparsity", f"must be one of {', '.join(SPARSITY_KINDS)}, got {sparsity!r}")
    if figures["energy_pj_per_byte"] and "dram" not in figures["energy_pj_per_byte"]:
        raise _fail(label, "energy_pj_per_byte.dram", "missing required key")
    if bool(figures["energy_pj_per_op"]) != bool(figures["energy_pj_per_byte"]):
        given, missing = (
            ("energy_pj_per_op", "energy_pj_per_byte")
            if figures["energy_pj_per_op"]
            else ("energy_pj_per_byte", "energy_pj_per_op")
        )
        raise _fail(label, missing, f"missing required table: [{given}] needs [{missing}]")
    onchip_bandwidth = figures["memory"].get("onchip_bandwidth_gbps")
    if onchip_bandwidth is not None and "onchip_mb" not in figures["memory"]:
        raise _fail(label, "memory.onchip_mb", "missing required key: memory.onchip_bandwidth_gbps needs it")
    if onchip_bandwidth is not None and not cache_levels:
        cache_levels = (
            CacheLevel(
                figures["memory"]["onchip_mb"] * 1e6,
                onchip_bandwidth * 1e9,
                sources["memory.onchip_bandwidth_gbps"],
                "onchip",
            ),
        )

    peaks, memory, runtime = figures["peak_tflops"], figures["memory"], figures["runtime"]
    if not peaks:
        raise _fail(label, "peak_tflops", f"missing required key: give at least one of {', '.join(PRECISIONS)}")
    for table, key in (("memory", "dram_bandwidth_gbps"), ("runtime", "launch_overhead_us")):
        if key not in figures[table]:
            raise _fail(label, f"{table}.{key}", "missing required key")
    if measurement and not measured:
        raise _fail(label, "measurement", "only a measured platform (measured = true) has a [measurement] table")

    def scaled(values: Mapping[str, float], factor: float) -> Mapping[str, float]:
        return MappingProxyType({k: v * factor for k, v in values.items()})

    def optional(table: str, key: str, factor: float) -> float | None:
        value = figures[table].get(key)
        return None if value is None else value * factor

    return Platform(
        name=name,
        title=title,
        kind=kind,
        fusion_profile=fusion_profile,
        peak_flops=scaled(peaks, 1e12),
        sparse_peak_flops=scaled(figures["sparse_peak_tflops"], 1e12),
        dram_bandwidth=memory["dram_bandwidth_gbps"] * 1e9,
        memory_capacity=optional("memory", "capacity_gb", 1e9),
        onchip_memory=optional("memory", "onchip_mb", 1e6),
        tdp_w=optional("power", "tdp_w", 1.0),
        launch_overhead_s=runtime["launch_overhead_us"] * 1e-6,
        sources=MappingProxyType(sources),
        path=origin,
        aliases=tuple(aliases),
        notes=notes,
        measured=measured,
        measurement=MappingProxyType(measurement),
        cache_levels=cache_levels,
        efficiency=MappingProxyType(dict(figures["efficiency"])),
        run_overhead_s=(optional("runtime", "run_overhead_us", 1e-6) or 0.0),
        onchip_bandwidth=optional("memory", "onchip_bandwidth_gbps", 1e9),
        array=array,
        sparsity=sparsity,
        energy_per_op=scaled(figures["energy_pj_per_op"], 1e-12),
        energy_per_byte=scaled(figures["energy_pj_per_byte"], 1e-12),
    )


def _array(values: Mapping[str, float], label: str) -> PEArray | None:
    """Validate ``[array]``: integer ``height``, ``width`` (and ``instances``, default 1) and ``clock_ghz``."""
    if not values:
        return None
    for key in ("height", "width", "clock_ghz"):
        if key not in values:
            raise _fail(label, f"array.{key}", "missing required key")
    counts = {}
    for key in ("height", "width", "instances"):
        value = values.get(key, 1.0)
        if value != int(value):
            raise _fail(label, f"array.{key}", f"value must be a whole number of PEs, got {_show(value)}")
        counts[key] = int(value)
    return PEArray(counts["height"], counts["width"], counts["instances"], values["clock_ghz"] * 1e9)


def _cache_levels(raw: Any, label: str, sources: dict[str, str]) -> tuple[CacheLevel, ...]:
    """Validate ``[memory] cache_levels``: a list of ``{ size_mb, bandwidth_gbps, source }`` in increasing size."""
    key = "memory.cache_levels"
    if not isinstance(raw, list):
        raise _fail(label, key, f"must be a list of {{ size_mb, bandwidth_gbps, source }} tables, got {raw!r}")
    levels: list[CacheLevel] = []
    for index, entry in enumerate(raw):
        dotted = f"{key}[{index}]"
        if not isinstance(entry, dict):
            raise _fail(label, dotted, f"must be a table {{ size_mb, bandwidth_gbps, source }}, got {entry!r}")
        for name in entry:
            if name not in _CACHE_LEVEL_KEYS:
                raise _fail(label, f"{dotted}.{name}", "unknown key (allowed: bandwidth_gbps, size_mb, source)")
        for name in ("size_mb", "bandwidth_gbps", "source"):
            if name not in entry:
                raise _fail(label, f"{dotted}.{name}", "missing required key")
        size, _ = _figure({"value": entry["size_mb"], "source": entry["source"]}, f"{dotted}.size_mb", label)
        bandwidth, source = _figure(
            {"value": entry["bandwidth_gbps"], "source": entry["source"]}, f"{dotted}.bandwidth_gbps", label
        )
        if levels and size * 1e6 <= levels[-1].size:
            raise _fail(label, f"{dotted}.size_mb", "cache levels must be listed in increasing size")
        levels.append(CacheLevel(size * 1e6, bandwidth * 1e9, source))
        sources[dotted] = source
    return tuple(levels)


def _measurement(raw: Any, label: str) -> dict[str, str | int | float | bool]:
    """Validate ``[measurement]``: known keys, each a string, number or boolean (no sources)."""
    if not isinstance(raw, dict):
        raise _fail(label, "measurement", f"must be a table, got {raw!r}")
    for key, value in raw.items():
        if key not in MEASUREMENT_KEYS:
            raise _fail(label, f"measurement.{key}", f"unknown key (allowed: {', '.join(sorted(MEASUREMENT_KEYS))})")
        if not isinstance(value, str | int | float | bool):
            raise _fail(label, f"measurement.{key}", f"must be a string, number or boolean, got {value!r}")
    return dict(raw)


def _string(doc: Mapping[str, Any], key: str, label: str) -> str:
    value = doc[key]
    if not isinstance(value, str) or not value.strip():
        raise _fail(label, key, f"must be a non-empty string, got {value!r}")
    return value


def _choice(doc: Mapping[str, Any], key: str, allowed: tuple[str, ...], label: str) -> str:
    value = doc[key]
    if value not in allowed:
        raise _fail(label, key, f"must be one of {', '.join(allowed)}, got {value!r}")
    return value


def _figure(fig: Any, dotted: str, label: str) -> tuple[float, str]:
    """Validate ``{ value = <positive number>, source = "<text>" }`` and return (value, source)."""
    if not isinstance(fig, dict):
        raise _fail(label, dotted, f'must be a table {{ value = <number>, source = "<text>" }}, got {fig!r}')
    for key in fig:
        if key not in _FIGURE_KEYS:
            raise _fail(label, f"{dotted}.{key}", "unknown key (allowed: source, value)")
    for key in ("value", "source"):
        if key not in fig:
            raise _fail(label, f"{dotted}.{key}", "missing required key")
    value, source = fig["value"], fig["source"]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise _fail(label, dotted, f"value must be a positive number, got {_show(value)}")
    if not isinstance(source, str) or not source.strip():
        raise _fail(label, f"{dotted}.source", f"must be a non-empty string, got {source!r}")
    return float(value), source


def _show(value: Any) -> str:
    """A value as TOML spells it, for error messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value)
