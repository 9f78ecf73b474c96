"""The type checker: mypy over the package with pyproject's [tool.mypy] (strict on the modules its overrides name).

mypy runs in process (``mypy.api.run``) from the repository root, its cache in the default ``.mypy_cache``: a cold
run takes tens of seconds, a warm one a second or two.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

mypy_api = pytest.importorskip("mypy.api")

ROOT = Path(__file__).resolve().parent.parent


def _overrides() -> list[dict[str, object]]:
    with (ROOT / "pyproject.toml").open("rb") as f:
        return list(tomllib.load(f)["tool"]["mypy"]["overrides"])


def test_the_package_type_checks() -> None:
    cwd = os.getcwd()
    os.chdir(ROOT)  # mypy reads pyproject.toml and resolves `files` from the working directory
    try:
        stdout, stderr, status = mypy_api.run([])
    finally:
        os.chdir(cwd)
    assert status == 0, f"mypy found errors:\n{stdout}{stderr}"


def test_strict_overrides_enable_what_strict_does(tmp_path: Path) -> None:
    """mypy honours ``strict = true`` only globally (in an override it turns strict mode on for every module), so
    the strict overrides spell out --strict's per-module flags: exactly those, so that no module is 'strict'
    with a flag missing when mypy adds one."""
    from mypy.main import process_options
    from mypy.options import PER_MODULE_OPTIONS, Options

    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n")  # not the project's: its `files` and --strict's "-c" exclude each other
    _, strict = process_options(["--strict", "--config-file", str(config), "-c", "pass"])
    defaults = Options()
    expected = {
        name: getattr(strict, name)
        for name in PER_MODULE_OPTIONS
        if hasattr(defaults, name) and getattr(strict, name) != getattr(defaults, name)
    }
    strict_overrides = [o for o in _overrides() if o.get("disallow_untyped_defs")]
    assert strict_overrides, "no strict override in [tool.mypy]"
    for override in strict_overrides:
        assert "strict" not in override
        flags = {k: v for k, v in override.items() if k != "module"}
        assert flags == expected, f"override for {override['module']}: {flags} != --strict's {expected}"
