"""Reading and validating one runtime TOML file (the schema is described in :mod:`onnxroof.runtime.model`).

Every problem is one :class:`~onnxroof.core.errors.RuntimeProfileError` line naming the file and the dotted key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any, TypeVar

from onnxroof.core.errors import RuntimeProfileError
from onnxroof.core.profiles import FusionProfile
from onnxroof.core.strict_toml import TomlReader, show_toml
from onnxroof.runtime.model import (
    MAX_EFFICIENCY,
    SCHEMA_VERSION,
    TARGET_KINDS,
    ConvBias,
    KvWrite,
    LaunchMode,
    Runtime,
    RuntimeKernelClass,
    RuntimeLaunch,
)

_TOP_KEYS = frozenset(
    {"schema", "name", "title", "targets", "fusion_profile", "notes", "launch", "kv_cache", "kernels", "efficiency"}
)
_LAUNCH_KEYS = frozenset({"mode", "per_kernel_us", "per_run_us", "per_request_us"})
_KV_KEYS = frozenset({"write"})
_KERNEL_KEYS = frozenset({"conv_bias"})
_Choice = TypeVar("_Choice", bound=StrEnum)
_FIGURE_KEYS = frozenset({"value", "source"})


def parse_runtime(data: bytes, *, label: str, origin: str, stem: str | None) -> Runtime:
    """Validate one runtime file's bytes (``label`` names it in errors; ``stem``, if given, is its name)."""
    reader = TomlReader(label, RuntimeProfileError, show=show_toml, one_line=True)
    doc = reader.load(data)
    reader.refuse_unknown(doc, _TOP_KEYS)
    reader.require(doc, ("schema", "name", "title", "targets", "fusion_profile", "launch"))
    reader.schema(doc["schema"], SCHEMA_VERSION)
    name = reader.string(doc["name"], "name", non_empty=True)
    if stem is not None and name != stem:
        raise reader.fail("name", f"must equal the file stem {stem!r}, got {name!r}")
    sources: dict[str, str] = {}
    launch = _launch(reader.table(doc["launch"], "launch"), reader, sources)
    kv_write = _kv_write(reader.table(doc.get("kv_cache", {}), "kv_cache"), reader, sources)
    conv_bias = _conv_bias(reader.table(doc.get("kernels", {}), "kernels"), reader, sources)
    efficiency = _efficiency(reader.table(doc.get("efficiency", {}), "efficiency"), reader, sources)
    return Runtime(
        name=name,
        title=reader.string(doc["title"], "title", non_empty=True),
        targets=_targets(doc["targets"], reader),
        fusion_profile=FusionProfile(reader.choice(doc["fusion_profile"], "fusion_profile", FusionProfile)),
        launch=launch,
        kv_write=kv_write,
        conv_bias=conv_bias,
        efficiency=MappingProxyType(efficiency),
        sources=MappingProxyType(sources),
        path=origin,
        notes=reader.string(doc.get("notes", ""), "notes"),
    )


def _targets(value: Any, reader: TomlReader) -> tuple[str, ...]:
    """``targets``: a non-empty list of distinct platform kinds."""
    if not isinstance(value, list) or not value:
        raise reader.fail("targets", f"must be a non-empty list of {', '.join(TARGET_KINDS)}, got {show_toml(value)}")
    for index, kind in enumerate(value):
        reader.choice(kind, f"targets[{index}]", TARGET_KINDS)
    if len(set(value)) != len(value):
        raise reader.fail("targets", f"lists a kind twice: {show_toml(value)}")
    return tuple(value)


def _launch(table: Mapping[str, Any], reader: TomlReader, sources: dict[str, str]) -> RuntimeLaunch:
    """``[launch]``: ``mode`` and the optional ``per_kernel_us`` / ``per_run_us`` / ``per_request_us`` figures
    (µs, ≥ 0)."""
    reader.refuse_unknown(table, _LAUNCH_KEYS, "launch")
    reader.require(table, ("mode",), "launch")
    mode = LaunchMode(reader.choice(table["mode"], "launch.mode", LaunchMode))
    seconds: dict[str, float | None] = {}
    for key in ("per_kernel_us", "per_run_us", "per_request_us"):
        if key not in table:
            seconds[key] = None
            continue
        where = f"launch.{key}"
        value, sources[where] = _figure(table[key], where, reader)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
            raise reader.fail(where, f"value must be a number ≥ 0 (µs), got {show_toml(value)}")
        seconds[key] = float(value) * 1e-6
    return RuntimeLaunch(mode, seconds["per_kernel_us"], seconds["per_run_us"], seconds["per_request_us"] or 0.0)


def _kv_write(table: Mapping[str, Any], reader: TomlReader, sources: dict[str, str]) -> KvWrite:
    """``[kv_cache] write``: ``in-place`` or ``copy`` with its source (absent: ``copy``)."""
    reader.refuse_unknown(table, _KV_KEYS, "kv_cache")
    return _choice(table, "kv_cache", "write", KvWrite, KvWrite.COPY, reader, sources)


def _conv_bias(table: Mapping[str, Any], reader: TomlReader, sources: dict[str, str]) -> ConvBias:
    """``[kernels] conv_bias``: ``fused`` or ``separate`` with its source (absent: ``fused``)."""
    reader.refuse_unknown(table, _KERNEL_KEYS, "kernels")
    return _choice(table, "kernels", "conv_bias", ConvBias, ConvBias.FUSED, reader, sources)


def _choice(
    table: Mapping[str, Any],
    section: str,
    key: str,
    kind: type[_Choice],
    absent: _Choice,
    reader: TomlReader,
    sources: dict[str, str],
) -> _Choice:
    """``[section] key = { value = <a member of kind>, source = "..." }``, its source recorded; ``absent`` when the
    key is not there."""
    if key not in table:
        return absent
    where = f"{section}.{key}"
    value, sources[where] = _figure(table[key], where, reader)
    return kind(reader.choice(value, f"{where}.value", kind))


def _efficiency(
    table: Mapping[str, Any], reader: TomlReader, sources: dict[str, str]
) -> dict[RuntimeKernelClass, float]:
    """``[efficiency]``: a factor in (0, :data:`MAX_EFFICIENCY`] per :class:`RuntimeKernelClass`."""
    reader.refuse_unknown(table, RuntimeKernelClass, "efficiency")
    factors: dict[RuntimeKernelClass, float] = {}
    for key, fig in table.items():
        where = f"efficiency.{key}"
        value, sources[where] = _figure(fig, where, reader)
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 < value <= MAX_EFFICIENCY
        ):
            raise reader.fail(where, f"value must lie in (0, {MAX_EFFICIENCY:g}], got {show_toml(value)}")
        factors[RuntimeKernelClass(key)] = float(value)
    return factors


def _figure(fig: Any, where: str, reader: TomlReader) -> tuple[Any, str]:
    """``{ value = ..., source = "<text>" }``: (value, source); the caller checks the value."""
    if not isinstance(fig, dict):
        raise reader.fail(where, f'must be a table {{ value = ..., source = "<text>" }}, got {show_toml(fig)}')
    reader.refuse_unknown(fig, _FIGURE_KEYS, where)
    reader.require(fig, ("value", "source"), where)
    source = fig["source"]
    if not isinstance(source, str) or not source.strip():
        raise reader.fail(f"{where}.source", f"must be a non-empty string, got {show_toml(source)}")
    return fig["value"], source
