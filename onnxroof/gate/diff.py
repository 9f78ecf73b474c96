"""Regressions: what changed between two versions of a model on one platform.

Both sides are the JSON document of :func:`onnxroof.analysis.document.to_dict` (a model analyzed now, or a
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
from pathlib import Path
from typing import Any

from onnxroof.analysis.analyze import analyze
from onnxroof.analysis.document import to_dict
from onnxroof.analysis.whatif import WhatIf
from onnxroof.core.errors import OnnxroofError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.strict_toml import parse_failure

#: Totals compared, with the unit family used to show them. A dotted name is a path into ``totals``:
#: ``bytes`` is the unfused count (Σ over nodes, as ``totals.bytes``), ``fused.bytes`` what the fused kernels
#: move (the "Bytes moved" of the report).
TOTALS: tuple[tuple[str, str], ...] = (
    ("latency_s", "duration"),
    ("flops", "count"),
    ("macs", "count"),
    ("params", "count"),
    ("weight_bytes", "bytes"),
    ("bytes", "bytes"),
    ("fused.bytes", "bytes"),
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
    except (ValueError, RecursionError) as exc:  # syntax, bad UTF-8, too many digits, nested too deep
        raise BaselineError(f"{path}: not JSON: {parse_failure(exc)}") from None
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


@frozen_dataclass(slots=True)
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


@frozen_dataclass(slots=True)
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


@frozen_dataclass(slots=True)
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


@frozen_dataclass
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


def _total(document: Mapping[str, Any], name: str) -> object:
    """``totals[name]``, a dotted name read as a path (``fused.bytes``); None where absent (an older file)."""
    value: object = document["totals"]
    for part in name.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


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
        Delta(name, kind, float(before), float(after))
        for name, kind in TOTALS
        if isinstance(before := _total(old, name), int | float) and isinstance(after := _total(new, name), int | float)
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


def document_of(path: Path, platform: str, dims, precision, fusion, shapes=None, runtime=None) -> dict[str, Any]:
    """A model's analysis document: analyzed now (.onnx) or read from a saved JSON output."""
    if path.suffix.lower() == ".json":
        doc = load_document(path)
        if "totals" not in doc:
            models = [m for m in doc["models"] if m.get("totals")]
            if len(models) != 1:
                raise BaselineError(f"{path}: holds {len(models)} analyzed models; give a single-model output")
            doc = models[0]
        return doc
    return to_dict(
        analyze(path, platform, dims, shapes=shapes, whatif=WhatIf(precision=precision), fusion=fusion, runtime=runtime)
    )


def slowdown_gate(result: ModelDiff, tolerance: float, allowed: str) -> dict[str, Any]:
    """``diff --fail-if-slower``: passed when the predicted latency grew by at most ``tolerance`` (a share)."""
    relative = result.latency.relative
    passed = relative is not None and relative <= tolerance + 1e-9
    return {"fail_if_slower": allowed, "latency_change": relative, "passed": passed}
