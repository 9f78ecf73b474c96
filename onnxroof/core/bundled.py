"""Data files shipped as packages (``platforms/*.toml`` as ``onnxroof.platforms``, ``runtimes/*.toml`` as
``onnxroof.runtimes``): how a name given on the command line is told from a path, and the names a package
bundles. One home for what the platform and runtime lookups share."""

from __future__ import annotations

import os
from functools import lru_cache
from importlib.resources import files
from pathlib import Path

from onnxroof.core.errors import OnnxroofError


def looks_like_path(text: str) -> bool:
    """A ``.toml`` name or anything with a path separator is a user's file, not a bundled name."""
    seps = {os.sep, "/"} | ({os.altsep} if os.altsep else set())
    return text.lower().endswith(".toml") or any(sep in text for sep in seps)


@lru_cache(maxsize=8)
def bundled_names(package: str) -> tuple[str, ...]:
    """The stems of the ``.toml`` files ``package`` ships, sorted."""
    root = files(package)
    return tuple(sorted(p.name[: -len(".toml")] for p in root.iterdir() if p.name.endswith(".toml")))


def bundled_bytes(package: str, name: str) -> bytes:
    """The bytes of ``package``'s ``name.toml``."""
    return files(package).joinpath(f"{name}.toml").read_bytes()


def user_file(name_or_path: str | os.PathLike[str]) -> Path | None:
    """The path a user named (a path-like, or text :func:`looks_like_path` takes for one); None for a bundled name."""
    if isinstance(name_or_path, os.PathLike) or looks_like_path(name_or_path):
        return Path(name_or_path)
    return None


def read_user_file(path: Path, what: str, error: type[OnnxroofError]) -> bytes:
    """The bytes of a user's ``what`` file (``"platform"``, ``"runtime"``); one line naming it when it cannot be
    read, as ``error``."""
    try:
        return path.read_bytes()
    except OSError as exc:
        raise error(f"{path}: cannot read {what} file: {exc.strerror or exc}") from None
