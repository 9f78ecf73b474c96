"""What an audit covers: model files, folders searched for ``*.onnx``, and manifests giving per-model settings.

A manifest is a CSV or TOML file listing models; relative paths are read from the manifest's folder.

CSV: a header row with ``path`` (required) and optionally ``name``, ``dims`` (``batch=1 seq=16``, separated by
spaces, commas or semicolons), ``shapes`` (whole-input shapes, ``image=1x3x224x224``, separated the same way)
and ``budget`` (a budget TOML file)::

    path,name,dims,shapes,budget
    models/encoder.onnx,encoder,batch=1 seq=128,,budgets/encoder.toml
    models/ocr.onnx,ocr,,x=1x3x48x192,

TOML: one ``[[model]]`` table per model with the same keys (``dims`` an inline table, ``shapes`` an inline table
of lists)::

    [[model]]
    path = "models/encoder.onnx"
    dims = { batch = 1, seq = 128 }
    shapes = { attention_mask = [1, 128] }
    budget = "budgets/encoder.toml"

A manifest's dims and shapes are the model's own: they override a command-line ``--dim`` / ``--shape`` of the
same name.
"""

from __future__ import annotations

import csv
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import Any

from onnxroof.core.errors import OnnxroofError
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.strict_toml import parse_failure
from onnxroof.load.dims import parse_dim_bindings, parse_shape_bindings

MANIFEST_SUFFIXES = (".csv", ".toml")
_KEYS = frozenset({"path", "name", "dims", "shapes", "budget"})


class ManifestError(OnnxroofError):
    """A manifest or an audit path is missing, malformed or names an unknown key."""


@frozen_dataclass(slots=True)
class ModelEntry:
    """One model to audit: its path, a display name, its own dims and budget file (from a manifest)."""

    path: str
    name: str
    dims: Mapping[str, int] = field(default_factory=dict)
    budget: str | None = None
    shapes: Mapping[str, tuple[int, ...]] = field(default_factory=dict)


def expand_paths(paths: Sequence[Path]) -> list[ModelEntry]:
    """Every model the paths name, in order: a folder gives its ``*.onnx`` files (recursively, sorted), a
    ``.csv``/``.toml`` file its manifest entries, any other file itself. A path listed twice counts once."""
    entries: list[ModelEntry] = []
    for path in paths:
        if path.is_dir():
            found = sorted(p for p in path.rglob("*.onnx") if p.is_file())
            if not found:
                raise ManifestError(f"{path}: no .onnx files in this folder")
            entries.extend(ModelEntry(str(p), p.stem) for p in found)
        elif path.suffix.lower() in MANIFEST_SUFFIXES:
            entries.extend(read_manifest(path))
        elif not path.exists():
            raise ManifestError(f"{path}: no such file or folder")
        else:
            entries.append(ModelEntry(str(path), path.stem))
    seen: set[str] = set()
    unique = []
    for entry in entries:
        if entry.path not in seen:
            seen.add(entry.path)
            unique.append(entry)
    return unique


def read_manifest(path: Path) -> list[ModelEntry]:
    """The entries of a CSV or TOML manifest; :class:`ManifestError` naming the file, row and key at fault."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read manifest: {exc.strerror or exc}") from None
    if path.suffix.lower() == ".csv":
        rows = list(csv.DictReader(text.splitlines()))
        where = [f"{path}: row {i}" for i in range(2, len(rows) + 2)]
    else:
        try:
            data = tomllib.loads(text)
        except (ValueError, RecursionError) as exc:  # syntax, too many digits, nested too deep
            raise ManifestError(f"{path}: not valid TOML: {parse_failure(exc)}") from None
        unknown = set(data) - {"model", "schema"}
        if unknown:
            raise ManifestError(f"{path}: unknown key(s) {sorted(unknown)}; a manifest lists [[model]] tables")
        rows = data.get("model", [])
        if not isinstance(rows, list):
            raise ManifestError(f"{path}: 'model' must be an array of tables ([[model]])")
        where = [f"{path}: model[{i}]" for i in range(len(rows))]
    if not rows:
        raise ManifestError(f"{path}: the manifest lists no models")
    return [_entry(row, path.parent, label) for row, label in zip(rows, where, strict=True)]


def _entry(row: Any, base: Path, where: str) -> ModelEntry:
    if not isinstance(row, dict):
        raise ManifestError(f"{where}: expected a table with a 'path'")
    unknown = {k for k, v in row.items() if k not in _KEYS and (k is not None or v)}
    if unknown:
        raise ManifestError(f"{where}: unknown key(s) {sorted(map(str, unknown))}; expected {sorted(_KEYS)}")
    raw = row.get("path")
    if not isinstance(raw, str) or not raw.strip():
        raise ManifestError(f"{where}: 'path' is missing")
    model = base / raw.strip()
    name = row.get("name") or model.stem
    budget = row.get("budget") or None
    if budget is not None and not isinstance(budget, str):
        raise ManifestError(f"{where}: 'budget' must be the path of a budget TOML file")
    try:
        dims = _dims(row.get("dims"))
        shapes = _shapes(row.get("shapes"))
    except OnnxroofError as exc:
        raise ManifestError(f"{where}: {exc}") from None
    return ModelEntry(str(model), str(name), dims, str(base / budget.strip()) if budget else None, shapes)


def _dims(value: Any) -> dict[str, int]:
    if value is None or value == "":
        return {}
    if isinstance(value, dict):
        return parse_dim_bindings([f"{k}={v}" for k, v in value.items()])
    if isinstance(value, str):
        return parse_dim_bindings([item for item in re.split(r"[\s,;]+", value.strip()) if item])
    raise ManifestError(f"'dims' must be NAME=VALUE items or a table, got {value!r}")


def _shapes(value: Any) -> dict[str, tuple[int, ...]]:
    if value is None or value == "":
        return {}
    if isinstance(value, dict):
        items = []
        for name, dims in value.items():
            if not isinstance(dims, list) or not all(isinstance(d, int) for d in dims):
                raise ManifestError(f"'shapes': '{name}' must be a list of integers, got {dims!r}")
            items.append(f"{name}=" + "x".join(map(str, dims)))
        return parse_shape_bindings(items)
    if isinstance(value, str):
        return parse_shape_bindings([item for item in re.split(r"[\s;]+", value.strip()) if item])
    raise ManifestError(f"'shapes' must be INPUT=AxBxC items or a table of lists, got {value!r}")
