"""Budgets: the limits a model must meet on a platform before it ships, loaded from TOML and checked.

A budget file, validated like a platform file (an unknown key, a bad value or a wrong type is one error
naming the file and the key)::

    schema = 1
    max_latency = { xavier = "15 ms", default = "40 ms" }   # or one value for every platform: "15 ms"
    max_flops = "5G"                       # counts: plain number or K/M/G/T/P (decimal)
    max_params = "25M"
    max_weight_bytes = "100 MB"            # bytes: B, kB/KB, MB, GB, TB (decimal) or KiB, MiB, GiB, TiB
    max_peak_activation_bytes = "64 MiB"
    max_memory_bound_share = "60%"         # shares: "60%" or a fraction 0.6
    max_layout_share = "10%"
    max_energy = "5 mJ"                    # energy per inference: J, mJ, uJ (or µJ), nJ, pJ (platforms with
                                           # energy figures; on others the limit fails, naming the platform)
    allow_unsupported = false              # false: any op without a cost rule fails the check
    max_slowdown = "5%"                    # with --baseline: predicted latency may grow this much

    [findings]
    fail_on = "error"                      # findings of this severity or worse fail: error|warning|note|never
    fail = ["OR001"]                       # these fail whatever their severity
    allow = ["OR006"]                      # reported, never fail
    ignore = ["OR002"]                     # not reported at all

Durations need a unit (s, ms, us or µs, ns). Every limit is an upper bound: the check passes when the
model's figure is at most the limit. The same limits come as command-line options (``--max-latency 15ms``)
which override the file's.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import field, replace
from pathlib import Path
from typing import Any

from onnxroof.analysis.findings import RULES, SEVERITIES, Finding
from onnxroof.core.errors import OnnxroofError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.strict_toml import TomlReader, show_toml
from onnxroof.core.units import joules, percent, seconds, si

SCHEMA_VERSION = 1
FAIL_ON = (*SEVERITIES, "never")

#: Exit codes of ``onnxroof check`` and ``onnxroof diff``.
EXIT_PASS, EXIT_VIOLATION, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3

STATUS_PASS, STATUS_FAIL, STATUS_ERROR = "pass", "fail", "error"
VERDICT_PASS, VERDICT_FAIL, VERDICT_WARN = "pass", "fail", "warn"


class BudgetError(OnnxroofError):
    """A budget file or limit option is missing, malformed or names an unknown key."""


@frozen_dataclass(slots=True)
class LimitSpec:
    """One kind of limit: its key, what it measures and the unit family its values are read in."""

    key: str
    kind: str  # duration | count | bytes | share | energy
    label: str
    total: str  # the Totals field it bounds ("" when computed otherwise)


LIMITS: tuple[LimitSpec, ...] = (
    LimitSpec("max_latency", "duration", "predicted latency", "latency_s"),
    LimitSpec("max_flops", "count", "FLOPs", "flops"),
    LimitSpec("max_params", "count", "parameters", "params"),
    LimitSpec("max_weight_bytes", "bytes", "weight bytes", "weight_bytes"),
    LimitSpec("max_peak_activation_bytes", "bytes", "peak activation memory", "peak_activation_bytes"),
    LimitSpec("max_memory_bound_share", "share", "memory-bound share of time", "memory_bound_share"),
    LimitSpec("max_layout_share", "share", "layout-traffic share of time", "layout_share"),
    LimitSpec("max_energy", "energy", "energy per inference", "energy_j"),
)
SLOWDOWN = LimitSpec("max_slowdown", "share", "latency change vs baseline", "")
UNSUPPORTED = LimitSpec("allow_unsupported", "count", "unsupported ops", "")
SPECS: Mapping[str, LimitSpec] = {s.key: s for s in (*LIMITS, SLOWDOWN, UNSUPPORTED)}

_TOP_KEYS = frozenset({"schema", "name", "description", "findings", *SPECS})
_FINDING_KEYS = frozenset({"fail_on", "fail", "allow", "ignore"})


# --------------------------------------------------------------------------------------------- units

_NUMBER = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?\s*(\S*)\s*$")
_DURATION_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ns": 1e-9}
_ENERGY_UNITS = {"J": 1.0, "mJ": 1e-3, "uJ": 1e-6, "µJ": 1e-6, "μJ": 1e-6, "nJ": 1e-9, "pJ": 1e-12}
_COUNT_UNITS = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
_BYTE_UNITS = {
    "": 1.0,
    "b": 1.0,
    "kb": 1e3,
    "mb": 1e6,
    "gb": 1e9,
    "tb": 1e12,
    "kib": 2.0**10,
    "mib": 2.0**20,
    "gib": 2.0**30,
    "tib": 2.0**40,
}
_HINTS = {
    "duration": "a number with a unit: s, ms, us (or µs), ns — e.g. '15 ms'",
    "count": "a number, optionally with K, M, G, T or P (decimal) — e.g. '5G'",
    "bytes": "a number of bytes, optionally with kB, MB, GB, TB (decimal) or KiB, MiB, GiB, TiB — e.g. '64 MiB'",
    "share": "a percentage or a fraction from 0 to 1 — e.g. '60%' or 0.6",
    "energy": "a number with a unit: J, mJ, uJ (or µJ), nJ, pJ — e.g. '5 mJ'",
}


def parse_quantity(value: Any, kind: str, where: str) -> float:
    """A limit value in base SI units (seconds, counts, bytes, fractions); :class:`BudgetError` naming ``where``.

    ``value`` is a string with its unit (``"15 ms"``, ``"5G"``, ``"64 MiB"``, ``"60%"``) or, except for
    durations, a plain number (counts, bytes; a share as a fraction from 0 to 1).
    """
    hint = _HINTS[kind]
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise BudgetError(f"{where}: expected {hint}, got {show_toml(value)}")
    if not isinstance(value, str):
        number, unit = float(value), None
    else:
        match = _NUMBER.match(value)
        if match is None:
            raise BudgetError(f"{where}: cannot read {value!r}: expected {hint}")
        mantissa, exponent, unit = match.groups()
        number = float(mantissa) * 10.0 ** int(exponent or 0)
    if not math.isfinite(number):
        raise BudgetError(f"{where}: {show_toml(value)} is not a finite number")
    scale = _scale(kind, unit, number, value, where)
    return number * scale


def _scale(kind: str, unit: str | None, number: float, value: Any, where: str) -> float:
    """The factor from ``unit`` to base SI units; ``number``: the value read (a unitless share must be ≤ 1)."""
    hint = _HINTS[kind]
    if kind in ("duration", "energy"):
        if not unit:
            raise BudgetError(f"{where}: {show_toml(value)} has no unit: expected {hint}")
        scale = (_DURATION_UNITS if kind == "duration" else _ENERGY_UNITS).get(unit)
    elif kind == "count":
        scale = _COUNT_UNITS.get(unit or "")
    elif kind == "bytes":
        scale = _BYTE_UNITS.get((unit or "").lower())
    elif unit == "%":
        scale = 0.01
    elif unit:
        scale = None
    else:
        if number > 1:
            raise BudgetError(f"{where}: {show_toml(value)} is more than 1: write a percentage ('{number:g}%')")
        scale = 1.0
    if scale is None:
        raise BudgetError(f"{where}: unknown unit {unit!r} in {show_toml(value)}: expected {hint}")
    return scale


def format_quantity(value: float, kind: str) -> str:
    """A base-SI value as the reports show it."""
    if kind == "duration":
        return seconds(value)
    if kind == "bytes":
        return si(value, "B")
    if kind == "share":
        return percent(value)
    if kind == "energy":
        return joules(value)
    return si(value)


# --------------------------------------------------------------------------------------------- budget


@frozen_dataclass(slots=True)
class Limit:
    """One limit: its value in base SI units and as the user wrote it."""

    value: float
    text: str


@frozen_dataclass
class Budget:
    """Every limit a check applies; None (or an empty latency table) means no limit."""

    max_latency: dict[str, Limit] = field(default_factory=dict, hash=False)  # platform (lower case) | "default"
    max_flops: Limit | None = None
    max_params: Limit | None = None
    max_weight_bytes: Limit | None = None
    max_peak_activation_bytes: Limit | None = None
    max_memory_bound_share: Limit | None = None
    max_layout_share: Limit | None = None
    max_energy: Limit | None = None
    allow_unsupported: bool | None = None
    max_slowdown: Limit | None = None
    fail_on: str = "error"
    fail: frozenset[str] = frozenset()
    allow: frozenset[str] = frozenset()
    ignore: frozenset[str] = frozenset()
    source: str = "options"

    def latency_limit(self, names: Sequence[str], label: str = "") -> Limit | None:
        """The latency limit for a platform known by ``names`` (name and aliases), else the default.

        A budget that gives per-platform latencies but neither this platform nor a default is an error:
        a typo in a platform name must never switch a limit off silently.
        """
        if not self.max_latency:
            return None
        for name in names:
            if name.lower() in self.max_latency:
                return self.max_latency[name.lower()]
        if "default" in self.max_latency:
            return self.max_latency["default"]
        known = ", ".join(sorted(self.max_latency))
        raise BudgetError(
            f"{self.source}: max_latency: no limit for platform {names[0]!r} (has: {known}); "
            f"add {names[0]} or a default{label}"
        )

    def with_options(
        self,
        limits: Mapping[str, str | None],
        *,
        allow_unsupported: bool | None = None,
        fail_on: str | None = None,
        fail: Sequence[str] = (),
        allow: Sequence[str] = (),
        ignore: Sequence[str] = (),
    ) -> Budget:
        """This budget with command-line options applied: a given limit replaces the file's, the id lists add."""
        changes: dict[str, Any] = {}
        for key, text in limits.items():
            if text is None:
                continue
            option = "--" + key.replace("_", "-")
            limit = Limit(parse_quantity(text, SPECS[key].kind, option), text.strip())
            changes[key] = {"default": limit} if key == "max_latency" else limit
        if allow_unsupported is not None:
            changes["allow_unsupported"] = allow_unsupported
        if fail_on is not None:
            changes["fail_on"] = _fail_on(fail_on, "--fail-on")
        lists = {
            "fail": self.fail | _ids(fail, "--fail-finding"),
            "allow": self.allow | _ids(allow, "--allow-finding"),
            "ignore": self.ignore | _ids(ignore, "--ignore-finding"),
        }
        _disjoint(lists, "options")
        return replace(self, **changes, fail=lists["fail"], allow=lists["allow"], ignore=lists["ignore"])

    def policy(self, finding: Finding) -> str | None:
        """``fail``, ``warn`` (reported, passes) or None (ignored) for a finding."""
        if finding.id in self.ignore:
            return None
        if finding.id in self.fail:
            return VERDICT_FAIL
        if finding.id in self.allow or self.fail_on == "never":
            return VERDICT_WARN
        failing = SEVERITIES[: SEVERITIES.index(self.fail_on) + 1]
        return VERDICT_FAIL if finding.severity in failing else VERDICT_WARN

    def describe(self) -> dict[str, Any]:
        """The limits as plain data (for the JSON output)."""
        data: dict[str, Any] = {"source": self.source}
        if self.max_latency:
            data["max_latency"] = {k: v.text for k, v in self.max_latency.items()}
        for spec in (*LIMITS[1:], SLOWDOWN):
            limit = getattr(self, spec.key)
            if limit is not None:
                data[spec.key] = limit.text
        if self.allow_unsupported is not None:
            data["allow_unsupported"] = self.allow_unsupported
        data["findings"] = {
            "fail_on": self.fail_on,
            "fail": sorted(self.fail),
            "allow": sorted(self.allow),
            "ignore": sorted(self.ignore),
        }
        return data


def load_budget(path: str | Path) -> Budget:
    """Read and validate a budget TOML file; :class:`BudgetError` with one line naming the file and key."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BudgetError(f"{path}: cannot read budget file: {exc.strerror or exc}") from None
    return parse_budget(data, label=str(path))


def parse_budget(data: bytes | str, label: str = "<budget>") -> Budget:
    """Validate a budget file's text (``label`` names it in errors)."""
    reader = TomlReader(label, BudgetError, show=show_toml)
    doc = reader.load(data.decode("utf-8", errors="strict") if isinstance(data, bytes) else data)
    reader.refuse_unknown(doc, _TOP_KEYS)
    reader.require(doc, ("schema",), hint=f" (schema = {SCHEMA_VERSION})")
    reader.schema(doc["schema"], SCHEMA_VERSION)
    for key in ("name", "description"):
        if key in doc:
            reader.string(doc[key], key)
    values: dict[str, Any] = {"source": label, **_limits(doc, reader)}
    if "allow_unsupported" in doc:
        values["allow_unsupported"] = reader.boolean(doc["allow_unsupported"], "allow_unsupported")
    findings = reader.table(doc.get("findings", {}), "findings")
    reader.refuse_unknown(findings, _FINDING_KEYS, "findings")
    if "fail_on" in findings:
        values["fail_on"] = _fail_on(findings["fail_on"], reader.where("findings.fail_on"))
    lists: dict[str, frozenset[str]] = {}
    for key in ("fail", "allow", "ignore"):
        raw = findings.get(key, [])
        if not isinstance(raw, list):
            raise reader.fail(f"findings.{key}", f"must be a list of finding ids, got {show_toml(raw)}")
        lists[key] = _ids(raw, reader.where(f"findings.{key}"))
    _disjoint(lists, reader.where("findings"))
    return Budget(**values, fail=lists["fail"], allow=lists["allow"], ignore=lists["ignore"])


def _limits(doc: Mapping[str, Any], reader: TomlReader) -> dict[str, Any]:
    """The file's limits (and ``max_slowdown``); ``max_latency`` as a table by platform (one value: default)."""
    values: dict[str, Any] = {}
    for spec in (*LIMITS, SLOWDOWN):
        if spec.key not in doc:
            continue
        raw = doc[spec.key]
        if spec.key == "max_latency" and isinstance(raw, dict):
            if not raw:
                raise reader.fail("max_latency", 'empty table: give platform = "<duration>" entries')
            values["max_latency"] = {
                name.lower(): _limit(value, spec.kind, reader.where(f"max_latency.{name}"))
                for name, value in raw.items()
            }
        elif spec.key == "max_latency":
            values["max_latency"] = {"default": _limit(raw, spec.kind, reader.where("max_latency"))}
        else:
            values[spec.key] = _limit(raw, spec.kind, reader.where(spec.key))
    return values


def _limit(value: Any, kind: str, where: str) -> Limit:
    number = parse_quantity(value, kind, where)
    if number < 0:
        raise BudgetError(f"{where}: must not be negative, got {show_toml(value)}")
    return Limit(number, value.strip() if isinstance(value, str) else format_quantity(number, kind))


def _fail_on(value: Any, where: str) -> str:
    if value not in FAIL_ON:
        raise BudgetError(f"{where}: must be one of {', '.join(FAIL_ON)}, got {show_toml(value)}")
    return value


def _ids(values: Sequence[Any], where: str) -> frozenset[str]:
    for value in values:
        if not isinstance(value, str) or value.upper() not in RULES:
            raise BudgetError(f"{where}: unknown finding id {show_toml(value)} (known: {', '.join(RULES)})")
    return frozenset(v.upper() for v in values)


def _disjoint(lists: Mapping[str, frozenset[str]], where: str) -> None:
    names = list(lists)
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            both = lists[first] & lists[second]
            if both:
                raise BudgetError(f"{where}: {', '.join(sorted(both))} is in both '{first}' and '{second}'")
