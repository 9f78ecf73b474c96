"""Data files shipped as packages (``platforms/*.toml`` as ``onnxroof.platforms``, ``runtimes/*.toml`` as
``onnxroof.runtimes``): how a name given on the command line is told from a path, and the names a package
bundles. One home for what the platform and runtime lookups share."""

from __future__ import annotations

import os
from functools import lru_cache
from importlib.resources import files


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
