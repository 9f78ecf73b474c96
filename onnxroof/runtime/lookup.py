"""Finding runtimes: the bundled files (package ``onnxroof.runtimes``) by name, or a TOML file by path; which
runtime an analysis uses (:func:`runtime_for`)."""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Protocol

from onnxroof.core.bundled import bundled_bytes, bundled_names, read_user_file, user_file
from onnxroof.core.errors import RuntimeProfileError
from onnxroof.runtime.model import Runtime
from onnxroof.runtime.parse import parse_runtime

_BUNDLED_PACKAGE = "onnxroof.runtimes"


def load_runtime(name_or_path: str | os.PathLike[str]) -> Runtime:
    """A bundled runtime by name (case-insensitive), or a runtime TOML file by path.

    A string counts as a path when it ends in ``.toml`` or contains a path separator; an unknown name raises
    :class:`RuntimeProfileError` listing the bundled ones.
    """
    path = user_file(name_or_path)
    if path is not None:
        data = read_user_file(path, "runtime", RuntimeProfileError)
        return parse_runtime(data, label=str(path), origin=str(path), stem=None)
    key = str(name_or_path).strip().lower()
    if key not in runtime_names():
        raise RuntimeProfileError(
            f"unknown runtime {name_or_path!r}; bundled runtimes: {', '.join(runtime_names())} "
            "(or give a path to a .toml file)"
        )
    return _load_bundled(key)


def runtime_names() -> tuple[str, ...]:
    """Names (file stems) of the bundled runtime files, sorted."""
    return bundled_names(_BUNDLED_PACKAGE)


def bundled_runtimes() -> tuple[Runtime, ...]:
    """Every bundled runtime, loaded and validated, in name order."""
    return tuple(_load_bundled(name) for name in bundled_names(_BUNDLED_PACKAGE))


class PlatformLike(Protocol):
    """What :func:`runtime_for` reads of a platform (:class:`onnxroof.platform.model.Platform`)."""

    @property
    def name(self) -> str: ...

    @property
    def kind(self) -> str: ...

    @property
    def fusion_profile(self) -> str: ...

    @property
    def default_runtime(self) -> str: ...


#: The runtime a platform file without ``default_runtime`` implies by its fusion profile (and kind).
_BY_PROFILE = {"tensorrt": "tensorrt", "tensorrt-llm": "tensorrt-llm", "none": "none"}


def default_runtime_name(platform: PlatformLike) -> str:
    """The platform's default runtime: its ``default_runtime``, else the one its fusion profile implies
    (``tensorrt`` → ``tensorrt``, ``tensorrt-llm`` → ``tensorrt-llm``, ``none`` → ``none``, ``ort-cpu`` →
    ``ort-cpu`` on a CPU and ``ort-cuda`` elsewhere)."""
    if platform.default_runtime:
        return platform.default_runtime
    profile = str(platform.fusion_profile)
    if profile == "ort-cpu":
        return "ort-cpu" if platform.kind == "cpu" else "ort-cuda"
    return _BY_PROFILE.get(profile, "none")


def runtime_for(
    platform: PlatformLike,
    runtime: str | os.PathLike[str] | Runtime | None = None,
    fusion: str | None = None,
) -> Runtime:
    """The runtime an analysis on ``platform`` uses.

    ``runtime`` given (a :class:`Runtime`, a bundled name or a path): that one. None: the platform's default
    (:func:`default_runtime_name`), unless ``fusion`` is another profile than the default's and names a bundled
    runtime that runs on the platform's kind: that one (``--fusion tensorrt-llm`` alone picks the
    ``tensorrt-llm`` runtime, CUDA graph included, as it did before runtimes were files). The
    runtime must run on the platform's kind (:class:`RuntimeProfileError` otherwise). The fusion profile itself is
    overridden by the caller, not here.
    """
    if runtime is None:
        name = default_runtime_name(platform)
        if name.lower() not in runtime_names():
            raise RuntimeProfileError(
                f"platform {platform.name!r}: default_runtime: unknown runtime {name!r}; "
                f"bundled runtimes: {', '.join(runtime_names())}"
            )
        chosen = _load_bundled(name.lower())
        key = (fusion or "").strip().lower()
        if key != chosen.fusion_profile and key in runtime_names() and _load_bundled(key).runs_on(platform.kind):
            chosen = _load_bundled(key)
    else:
        chosen = runtime if isinstance(runtime, Runtime) else load_runtime(runtime)
    if not chosen.runs_on(platform.kind):
        fits = ", ".join(r.name for r in bundled_runtimes() if r.runs_on(platform.kind))
        raise RuntimeProfileError(
            f"runtime {chosen.name!r} runs on {', '.join(chosen.targets)} platforms, not on {platform.name!r} "
            f"({platform.kind}); runtimes for {platform.kind}: {fits}"
        )
    return chosen


@lru_cache(maxsize=64)
def _load_bundled(name: str) -> Runtime:
    data = bundled_bytes(_BUNDLED_PACKAGE, name)
    return parse_runtime(data, label=f"runtimes/{name}.toml", origin=f"bundled:{name}", stem=name)
