"""Finding platforms: the bundled files (package ``onnxroof.platforms``) by name or alias, or a TOML file by path."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType

from onnxroof.core.bundled import bundled_bytes, bundled_names, read_user_file, user_file
from onnxroof.core.errors import PlatformError
from onnxroof.platform.model import Platform
from onnxroof.platform.parse import parse_platform

_BUNDLED_PACKAGE = "onnxroof.platforms"


def load_platform(name_or_path: str | os.PathLike[str]) -> Platform:
    """A bundled platform by name or alias (case-insensitive), or a platform TOML file by path.

    A string counts as a path when it ends in ``.toml`` or contains a path separator; anything else is
    looked up among the bundled platforms, and an unknown name raises :class:`PlatformError` listing them.
    """
    path = user_file(name_or_path)
    if path is not None:
        data = read_user_file(path, "platform", PlatformError)
        return _parse(data, label=str(path), origin=str(path), stem=None)
    key = str(name_or_path).strip().lower()
    if key in bundled_platform_names():  # a file's own name: parse that file alone, not all of them for the index
        return _load_bundled(key)
    index = _bundled_index()
    if key not in index:
        raise PlatformError(
            f"unknown platform {name_or_path!r}; bundled platforms: {', '.join(bundled_platform_names())} "
            "(or give a path to a .toml file)"
        )
    return _load_bundled(index[key])


def bundled_platform_names() -> tuple[str, ...]:
    """Names (file stems) of the bundled platform files, sorted."""
    return bundled_names(_BUNDLED_PACKAGE)


def bundled_platforms() -> tuple[Platform, ...]:
    """Every bundled platform, loaded and validated, in name order."""
    return tuple(_load_bundled(name) for name in bundled_names(_BUNDLED_PACKAGE))


@lru_cache(maxsize=64)
def _load_bundled(name: str) -> Platform:
    data = bundled_bytes(_BUNDLED_PACKAGE, name)
    return _parse(data, label=f"platforms/{name}.toml", origin=f"bundled:{name}", stem=name)


@lru_cache(maxsize=1)
def _bundled_index() -> Mapping[str, str]:
    """Lower-cased name or alias -> bundled name; a clash between two files is an error."""
    index: dict[str, str] = {}
    for platform in bundled_platforms():
        for key in (platform.name, *platform.aliases):
            low = key.lower()
            if index.get(low, platform.name) != platform.name:
                raise PlatformError(
                    f"platforms/{platform.name}.toml: aliases: {key!r} is already used by platforms/{index[low]}.toml"
                )
            index[low] = platform.name
    return MappingProxyType(index)


def _parse(data: bytes, *, label: str, origin: str, stem: str | None) -> Platform:
    """Validate one platform file (:func:`onnxroof.platform.parse.parse_platform`)."""
    return parse_platform(data, label=label, origin=origin, stem=stem)
