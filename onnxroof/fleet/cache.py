"""The audit's result cache: one SQLite file in a per-user folder, so that a second run over unchanged models
analyzes nothing.

Two tables:

* ``results``: the figures of one (model content, external data identity, onnxroof version, platform
  definition, options) — see :func:`result_key` — as a zlib-compressed JSON object (about 1.5 KB). Budgets
  are not in the key: verdicts are recomputed from the cached figures, so changing a budget re-analyzes
  nothing.
* ``files``: what a model file was the last time it was seen (path, size, mtime) → its content sha256, its
  symbolic input dims and its external-data locations. A file whose size and mtime are unchanged is not read
  again; one that changed is hashed again (the .onnx file only: external weight files are identified by their
  path, size and mtime, never read).

The default folder is ``$XDG_CACHE_HOME/onnxroof`` (``~/.cache/onnxroof`` when unset). SQLite serializes
writers, so runs may share a cache; on a cluster the cache stays with the client, which alone reads and writes it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import zlib
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from onnxroof.core.errors import OnnxroofError

CACHE_SCHEMA = 1
CACHE_FILE = f"audit-v{CACHE_SCHEMA}.sqlite3"
_COMMIT_EVERY = 256


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/onnxroof``, or ``~/.cache/onnxroof``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "onnxroof"


def canonical(value: Any) -> Any:
    """Plain JSON-able data for hashing: dataclasses field by field, mappings sorted, tuples as lists."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: canonical(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): canonical(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))}
    if isinstance(value, list | tuple | set | frozenset):
        items = [canonical(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
    if isinstance(value, float | int | str | bool) or value is None:
        return value
    return repr(value)


def digest(value: Any) -> str:
    """sha256 of the canonical JSON of ``value``."""
    text = json.dumps(canonical(value), sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def result_key(
    sha256: str,
    external: tuple[tuple[str, int, int], ...],
    version: str,
    platform_hash: str,
    options: Mapping[str, Any],
) -> str:
    """The cache key of one analysis: model content, its external files' (location, size, mtime), the onnxroof
    version, the platform definition's hash and the options (dims applied, precision, fusion)."""
    return digest(
        {
            "cache_schema": CACHE_SCHEMA,
            "model": sha256,
            "external": [list(e) for e in external],
            "onnxroof": version,
            "platform": platform_hash,
            "options": dict(options),
        }
    )


class ResultCache:
    """The cache in ``folder`` (created if needed); ``None`` folder: a cache that remembers nothing."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        self._db: sqlite3.Connection | None = None
        self._pending = 0
        if folder is None:
            return
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(folder / CACHE_FILE, timeout=60)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS results (key TEXT PRIMARY KEY, figures BLOB NOT NULL)")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER, "
                "sha256 TEXT, facts TEXT)"
            )
            self._db.commit()
        except (OSError, sqlite3.Error) as exc:
            raise OnnxroofError(f"--cache {folder}: cannot open the result cache: {exc}") from None

    @property
    def enabled(self) -> bool:
        return self._db is not None

    @property
    def location(self) -> str:
        return str(self.folder / CACHE_FILE) if self.folder is not None else "none"

    def get(self, key: str) -> dict[str, Any] | None:
        if self._db is None:
            return None
        row = self._db.execute("SELECT figures FROM results WHERE key = ?", (key,)).fetchone()
        return json.loads(zlib.decompress(row[0])) if row else None

    def put(self, key: str, figures: Mapping[str, Any]) -> None:
        if self._db is None:
            return
        packed = zlib.compress(json.dumps(figures).encode("utf-8"))
        self._db.execute("INSERT OR REPLACE INTO results VALUES (?, ?)", (key, packed))
        self._tick()

    def file_facts(self, path: str, size: int, mtime_ns: int) -> tuple[str, dict[str, Any]] | None:
        """(sha256, facts) remembered for ``path`` when its size and mtime are unchanged."""
        if self._db is None:
            return None
        row = self._db.execute(
            "SELECT sha256, facts FROM files WHERE path = ? AND size = ? AND mtime_ns = ?", (path, size, mtime_ns)
        ).fetchone()
        return (row[0], json.loads(row[1])) if row else None

    def remember_file(self, path: str, size: int, mtime_ns: int, sha256: str, facts: Mapping[str, Any]) -> None:
        if self._db is None:
            return
        self._db.execute(
            "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?)", (path, size, mtime_ns, sha256, json.dumps(facts))
        )
        self._tick()

    def _tick(self) -> None:
        self._pending += 1
        if self._pending >= _COMMIT_EVERY:
            self.flush()

    def flush(self) -> None:
        if self._db is not None and self._pending:
            self._db.commit()
            self._pending = 0

    def close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self.flush()
            self._db.close()
            self._db = None

    def __enter__(self) -> ResultCache:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
