"""The public API (``onnxroof/__init__.py``): lazy at run time, typed for type checkers."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import onnxroof

ROOT = Path(__file__).resolve().parent.parent


def test_every_public_name_is_listed_and_resolves() -> None:
    assert sorted(onnxroof.__all__) == sorted(onnxroof._PUBLIC)
    for name in onnxroof.__all__:
        assert getattr(onnxroof, name) is getattr(importlib.import_module(onnxroof._PUBLIC[name]), name)
    assert onnxroof.WhatIf().precision is None


def test_importing_a_core_module_stays_light() -> None:
    """Rules import ``onnxroof.core.cost``: that must not load the analysis, onnx or numpy."""
    probe = (
        "import sys, onnxroof.core.cost; "
        "print(' '.join(m for m in sys.modules if m.startswith(('onnxroof.analysis', 'onnx.', 'numpy'))))"
    )
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == ""


def test_type_checkers_see_the_real_types(tmp_path: Path) -> None:
    """mypy reveals each public name's own type, not the ``Any`` of the lazy ``__getattr__``. Only onnxroof's
    ``__init__`` and the modules defining the public names are read (the rest is skipped), so it runs in seconds."""
    snippet = tmp_path / "snippet.py"
    snippet.write_text("import onnxroof\n" + "".join(f"reveal_type(onnxroof.{n})\n" for n in onnxroof.__all__))
    config = tmp_path / "mypy.ini"
    followed = ["onnxroof", *sorted(set(onnxroof._PUBLIC.values()))]
    config.write_text(
        "[mypy]\nfollow_imports = skip\nignore_missing_imports = True\n"
        + "".join(f"[mypy-{module}]\nfollow_imports = silent\n" for module in followed)
    )
    command = [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", "/dev/null", str(snippet)]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)  # cwd: mypy finds the package here
    revealed = [line.split("Revealed type is ", 1)[1] for line in result.stdout.splitlines() if "Revealed type" in line]
    assert len(revealed) == len(onnxroof.__all__), result.stdout + result.stderr
    named = dict(zip(onnxroof.__all__, revealed, strict=True))
    assert all(kind != '"Any"' for kind in named.values()), named
    assert named["analyze"].endswith('.Analysis"'), named["analyze"]
