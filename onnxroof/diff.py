"""Regressions: what changed between two versions of a model on one platform.

Both sides are the JSON document of :func:`onnxroof.report.data.to_dict` (a model analyzed now, or a
``report --format json`` saved earlier). The diff holds the totals and per-op-type deltas, the kernels
added, removed and changed, and the predicted latency change. Kernels are matched by their members' node
names and op types, never by ids (ids carry node indices, which shift when a node is inserted); kernels
with the same signature pair up in order.

A baseline for ``check --baseline`` is a ``report --format json`` or ``check --format json`` output;
:func:`load_baseline` reads either into ``{"path", "source", "platform", "totals"}`` entries.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from onnxroof.errors import OnnxroofError
from onnxroof.report.units import joules, percent, seconds, si

#: Totals compared, with the unit family used to show them.
TOTALS: tuple[tuple[str, str], ...] = (
    ("latency_s", "duration"),
    ("flops", "count"),
    ("macs", "count"),
    ("params", "count"),
    ("weight_bytes", "bytes"),
    ("bytes", "bytes"),
    ("peak_activation_bytes", "bytes"),
    ("memory_bound_share", "share"),
    ("layout_share", "share"),
    ("energy_j", "energy"),  # only where both reports were made on a platform with energy figures
    ("kernels", "count"),
    ("nodes", "count"),
)
_REL_TOL = 1e-9


class BaselineError(OnnxroofError):
    """A baseline or diff input cannot be read or does not fit the check."""


# --------------------------------------------------------------------------------------------- baselines


def load_document(path: str | Path) -> dict[str, Any]:
    """A JSON document written by onnxroof (``report`` or ``check``); errors name the file."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BaselineError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BaselineError(f"{path}: not JSON: {exc}") from None
    if not isinstance(doc, dict) or not ("totals" in doc or isinstance(doc.get("models"), list)):
        raise BaselineError(
            f"{path}: not an onnxroof JSON output (expected `report --format json` or `check --format json`)"
        )
    return doc


def load_baseline(path: str | Path) -> tuple[dict[str, Any], ...]:
    """The models a baseline file describes: ``{"path", "source", "platform", "totals"}`` each."""
    doc = load_document(path)
    source = str(path)
    if "totals" in doc:
        entries = [_entry(doc, source, "")]
    else:
        entries = [_entry(m, source, f"models[{i}].") for i, m in enumerate(doc["models"]) if m.get("totals")]
    if not entries:
        raise BaselineError(f"{source}: no model in it was analyzed (every row is an error)")
    return tuple(entries)


def _entry(doc: Mapping[str, Any], source: str, where: str) -> dict[str, Any]:
    totals = doc.get("totals")
    if not isinstance(totals, dict) or not isinstance(totals.get("latency_s"), int | float):
        raise BaselineError(f"{source}: {where}totals.latency_s: missing or not a number")
    path = doc.get("path") or (doc.get("model") or {}).get("path") or ""
    platform = doc.get("platform") or {}
    return {
        "path": path,
        "source": source,
        "platform": platform.get("name", "") if isinstance(platform, dict) else "",
        "totals": totals,
    }


def pick_baseline(entries: Sequence[Mapping[str, Any]], model_path: str, models: int) -> Mapping[str, Any] | None:
    """The baseline entry for ``model_path``: same path, else same file name, else the only entry when only
    one model is checked (a previous version may live elsewhere). None when nothing matches."""
    for same in (
        lambda e: e["path"] and Path(e["path"]).resolve() == Path(model_path).resolve(),
        lambda e: e["path"] and Path(e["path"]).name == Path(model_path).name,
    ):
        found = [e for e in entries if same(e)]
        if found:
            return found[0]
    if len(entries) == 1 and models == 1:
        return entries[0]
    return None


# --------------------------------------------------------------------------------------------- diff


@dataclass(frozen=True, slots=True)
class Delta:
    name: str
    kind: str  # duration | count | bytes | share
    old: float
    new: float

    @property
    def change(self) -> float:
        return self.new - self.old

    @property
    def relative(self) -> float | None:
        """new/old − 1; None when old is zero (and new is not)."""
        if self.old == 0:
            return 0.0 if self.new == 0 else None
        return self.new / self.old - 1

    @property
    def changed(self) -> bool:
        return not math.isclose(self.old, self.new, rel_tol=_REL_TOL, abs_tol=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {"old": self.old, "new": self.new, "change": self.change, "relative": self.relative}


@dataclass(frozen=True, slots=True)
class KernelSide:
    id: str
    pattern: str
    flops: float
    bytes: float
    latency_s: float
    bound: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "pattern": self.pattern,
            "flops": self.flops,
            "bytes": self.bytes,
            "latency_s": self.latency_s,
            "bound": self.bound,
        }


@dataclass(frozen=True, slots=True)
class KernelDelta:
    """A kernel matched by its signature: ``old`` None when added, ``new`` None when removed."""

    signature: tuple[tuple[str, str], ...]  # (op_type, node name) per member
    old: KernelSide | None
    new: KernelSide | None

    @property
    def label(self) -> str:
        return " + ".join(f"{op} {name}".strip() for op, name in self.signature)

    @property
    def latency_change(self) -> float:
        return (self.new.latency_s if self.new else 0.0) - (self.old.latency_s if self.old else 0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "members": [{"op_type": op, "name": name} for op, name in self.signature],
            "old": self.old.to_dict() if self.old else None,
            "new": self.new.to_dict() if self.new else None,
            "latency_change_s": self.latency_change,
        }


@dataclass(frozen=True)
class ModelDiff:
    old: str
    new: str
    platform: str
    totals: tuple[Delta, ...]
    op_types: tuple[Delta, ...]  # latency per op type ("domain::op" or op), changed ones only
    op_type_counts: tuple[Delta, ...]  # node count per op type, changed ones only
    kernels_added: tuple[KernelDelta, ...]
    kernels_removed: tuple[KernelDelta, ...]
    kernels_changed: tuple[KernelDelta, ...]
    kernels_compared: bool  # False when a side has no kernels (a check JSON baseline)

    @property
    def latency(self) -> Delta:
        return next(d for d in self.totals if d.name == "latency_s")

    def to_dict(self) -> dict[str, Any]:
        counts = {d.name: d for d in self.op_type_counts}
        latencies = {d.name: d for d in self.op_types}
        return {
            "schema": 1,
            "old": self.old,
            "new": self.new,
            "platform": self.platform,
            "latency": self.latency.to_dict(),
            "totals": {d.name: d.to_dict() for d in self.totals},
            "op_types": {
                name: {
                    "count": counts[name].to_dict() if name in counts else None,
                    "latency_s": latencies[name].to_dict() if name in latencies else None,
                }
                for name in sorted(set(counts) | set(latencies))
            },
            "kernels": {
                "compared": self.kernels_compared,
                "added": [k.to_dict() for k in self.kernels_added],
                "removed": [k.to_dict() for k in self.kernels_removed],
                "changed": [k.to_dict() for k in self.kernels_changed],
            },
        }


def diff_documents(old: Mapping[str, Any], new: Mapping[str, Any], old_label: str, new_label: str) -> ModelDiff:
    """The diff between two analysis documents (``to_dict`` output; ``old`` may hold only ``totals``)."""
    old_platform = (old.get("platform") or {}).get("name", "")
    new_platform = (new.get("platform") or {}).get("name", "")
    if old_platform and new_platform and old_platform != new_platform:
        raise BaselineError(
            f"{old_label} was analyzed for platform {old_platform!r}, {new_label} for {new_platform!r}: "
            "latencies on different platforms do not compare"
        )
    totals = tuple(
        Delta(name, kind, float(old["totals"][name]), float(new["totals"][name]))
        for name, kind in TOTALS
        if isinstance(old["totals"].get(name), int | float) and isinstance(new["totals"].get(name), int | float)
    )
    old_ops, new_ops = _op_rows(old), _op_rows(new)
    names = sorted(set(old_ops) | set(new_ops)) if old_ops and new_ops else []  # a check JSON has no op types
    zero = (0, 0.0)
    op_latency = tuple(
        d for n in names if (d := Delta(n, "duration", old_ops.get(n, zero)[1], new_ops.get(n, zero)[1])).changed
    )
    op_counts = tuple(
        d for n in names if (d := Delta(n, "count", old_ops.get(n, zero)[0], new_ops.get(n, zero)[0])).changed
    )
    compared = bool(old.get("kernels") is not None and new.get("kernels") is not None)
    added, removed, changed = _match_kernels(old, new) if compared else ((), (), ())
    return ModelDiff(
        old_label,
        new_label,
        new_platform or old_platform,
        totals,
        op_latency,
        op_counts,
        added,
        removed,
        changed,
        compared,
    )


def _op_rows(doc: Mapping[str, Any]) -> dict[str, tuple[int, float]]:
    rows = {}
    for row in doc.get("op_types") or ():
        name = f"{row['domain']}::{row['op_type']}" if row.get("domain") else row["op_type"]
        rows[name] = (int(row["count"]), float(row["latency_s"]))
    return rows


def _signatures(doc: Mapping[str, Any]) -> list[tuple[tuple[tuple[str, str], ...], KernelSide]]:
    names = {n["id"]: n.get("name") or "" for n in doc.get("nodes") or ()}
    out = []
    for k in doc["kernels"]:
        signature = tuple((op, names.get(nid, "")) for nid, op in zip(k["node_ids"], k["op_types"], strict=False))
        side = KernelSide(
            k["id"],
            k.get("pattern", ""),
            float(k["flops"]),
            float(k["bytes_read"]) + float(k["bytes_written"]),
            float(k["latency_s"]),
            k.get("bound", ""),
        )
        out.append((signature, side))
    return out


def _match_kernels(old: Mapping[str, Any], new: Mapping[str, Any]):
    pending: dict[tuple, list[KernelSide]] = {}
    for signature, side in _signatures(old):
        pending.setdefault(signature, []).append(side)
    added, changed = [], []
    for signature, side in _signatures(new):
        queue = pending.get(signature)
        if not queue:
            added.append(KernelDelta(signature, None, side))
            continue
        before = queue.pop(0)
        if before.bound != side.bound or any(
            not math.isclose(a, b, rel_tol=_REL_TOL, abs_tol=0.0)
            for a, b in ((before.flops, side.flops), (before.bytes, side.bytes), (before.latency_s, side.latency_s))
        ):
            changed.append(KernelDelta(signature, before, side))
    removed = [KernelDelta(sig, side, None) for sig, queue in pending.items() for side in queue]
    return tuple(added), tuple(removed), tuple(sorted(changed, key=lambda k: -abs(k.latency_change)))


# --------------------------------------------------------------------------------------------- rendering


def format_value(value: float, kind: str) -> str:
    if kind == "duration":
        return seconds(value) if value >= 0 else "-" + seconds(-value)
    if kind == "bytes":
        return si(value, "B")
    if kind == "share":
        return percent(value)
    if kind == "energy":
        return joules(value) if value >= 0 else "-" + joules(-value)
    return si(value)


def _signed(delta: Delta) -> str:
    if not delta.changed:
        return "="
    if delta.kind == "share":
        return f"{100 * delta.change:+.1f} pt"
    sign = "+" if delta.change > 0 else "-"
    text = sign + format_value(abs(delta.change), delta.kind)
    relative = delta.relative
    return text + (f" ({relative:+.1%})" if relative is not None else " (new)")


def render_diff_json(diff: ModelDiff, verdict: Mapping[str, Any] | None = None) -> str:
    data = diff.to_dict()
    if verdict is not None:
        data["gate"] = dict(verdict)
    return json.dumps(data, indent=2, allow_nan=False) + "\n"


def render_diff_console(diff: ModelDiff, console: Console, top: int = 15) -> None:
    latency = diff.latency
    console.print(
        Text.assemble(
            ("Predicted latency ", "bold"),
            f"{seconds(latency.old)} → {seconds(latency.new)}  ",
            (_signed(latency), "bold red" if latency.change > 0 and latency.changed else "bold green"),
            f"  on {diff.platform}" if diff.platform else "",
        )
    )
    console.print(Text(f"old: {diff.old}\nnew: {diff.new}", style="dim"))
    table = Table(title="Totals", box=box.SIMPLE_HEAD, title_justify="left")
    for name, justify in (("figure", "left"), ("old", "right"), ("new", "right"), ("change", "right")):
        table.add_column(name, justify=justify, no_wrap=True)
    for delta in diff.totals:
        table.add_row(
            delta.name, format_value(delta.old, delta.kind), format_value(delta.new, delta.kind), _signed(delta)
        )
    console.print(table)
    if diff.op_types or diff.op_type_counts:
        ops = Table(title="Op types that changed", box=box.SIMPLE_HEAD, title_justify="left")
        for name, justify in (("op type", "left"), ("count", "right"), ("time", "right"), ("change", "right")):
            ops.add_column(name, justify=justify, no_wrap=True)
        counts = {d.name: d for d in diff.op_type_counts}
        latencies = {d.name: d for d in diff.op_types}
        for name in sorted(
            set(counts) | set(latencies), key=lambda n: -abs(latencies[n].change) if n in latencies else 0
        ):
            count = counts.get(name)
            time = latencies.get(name)
            ops.add_row(
                Text(name),
                f"{count.old:g} → {count.new:g}" if count else "=",
                f"{seconds(time.old)} → {seconds(time.new)}" if time else "=",
                _signed(time) if time else "=",
            )
        console.print(ops)
    if not diff.kernels_compared:
        console.print(Text("Kernels: not compared (the baseline holds totals only)", style="dim"))
        return
    console.print(
        Text(
            f"Kernels: {len(diff.kernels_added)} added, {len(diff.kernels_removed)} removed, "
            f"{len(diff.kernels_changed)} changed",
            style="bold",
        )
    )
    rows = [("added", k) for k in diff.kernels_added] + [("removed", k) for k in diff.kernels_removed]
    rows += [("changed", k) for k in diff.kernels_changed]
    rows.sort(key=lambda r: -abs(r[1].latency_change))
    if not rows:
        return
    kernels = Table(box=box.SIMPLE_HEAD)
    for name, justify in (("", "left"), ("kernel", "left"), ("old", "right"), ("new", "right"), ("change", "right")):
        kernels.add_column(name, justify=justify, overflow="fold")
    for what, k in rows[:top]:
        kernels.add_row(
            what,
            Text(k.label),
            seconds(k.old.latency_s) if k.old else "–",
            seconds(k.new.latency_s) if k.new else "–",
            ("+" if k.latency_change >= 0 else "-") + seconds(abs(k.latency_change)),
        )
    console.print(kernels)
    if len(rows) > top:
        console.print(Text(f"… {len(rows) - top} more (--top to show more)", style="dim"))
