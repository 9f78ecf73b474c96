"""The house rules of the code base, checked on every run (docs/architecture.md).

* the import-linter contracts of pyproject.toml hold (the layers of the data flow; onnxruntime only in
  ``measure``; nothing imports the CLI);
* no import cycle among the package's modules, lazy imports inside functions included;
* no module over 500 lines (pattern data excepted), no function (method or closure) of cyclomatic complexity
  over 25 (the design guide: over ~15 wants a reason, given where the function is; over 25, a redesign);
* no module of the package calls ``exec`` or ``eval`` (code is read, not built at run time);
* no flat family of three or more modules sharing a name prefix (``fusion_*``): a family is a package;
* the installed package list names every subpackage, so ``pip install .`` ships them all.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from collections import Counter
from pathlib import Path

import grimp
import networkx as nx
import pytest
from radon.complexity import cc_visit

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "onnxroof"
SOURCES = sorted({*PACKAGE.rglob("*.py"), *(ROOT / "rules").glob("*.py")} - set((PACKAGE / "rules").glob("*.py")))
MAX_LINES = 500
MAX_COMPLEXITY = 25
PATTERN_DATA = {PACKAGE / "fusion" / "patterns.py"}  # tables of fusion patterns: data, not logic


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    command = [str(lint)] if lint.exists() else [sys.executable, "-m", "importlinter.cli"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout and "KEPT" in done.stdout


def test_the_contracts_name_every_stage() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in config if c["type"] == "layers")["layers"]
    named = {name.strip() for layer in layers for name in layer.split("|")}
    packages = {f"onnxroof.{p.name}" for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert packages == named, f"packages missing from the layers: {sorted(packages - named)}"


def test_no_import_cycles() -> None:
    graph = grimp.build_graph("onnxroof")
    imports = nx.DiGraph()
    for module in graph.modules:
        imports.add_node(module)
        for imported in graph.find_modules_directly_imported_by(module):
            imports.add_edge(module, imported)
    assert "onnxroof.rules.matmul" in imports, "the rule families are not in the import graph"
    cycles = [sorted(c) for c in nx.strongly_connected_components(imports) if len(c) > 1]
    assert not cycles, f"import cycles: {cycles}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_modules_are_small(path: Path) -> None:
    if path in PATTERN_DATA:
        return
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(ROOT)}: {lines} lines (split it by job)"


def _blocks(blocks: list) -> list:
    """radon's blocks (functions, classes, methods) with the closures inside them, which radon scores apart."""
    return [inner for block in blocks for inner in [block, *_blocks(getattr(block, "closures", []))]]


def test_no_function_is_too_complex() -> None:
    too_complex = [
        f"{path.relative_to(ROOT)}:{block.lineno} {block.name} ({block.complexity})"
        for path in SOURCES
        for block in _blocks(cc_visit(path.read_text(encoding="utf-8")))
        if block.complexity > MAX_COMPLEXITY
    ]
    assert not too_complex, "split these functions into named steps: " + ", ".join(too_complex)


def _exec_eval_calls(source: str) -> list[str]:
    """``"LINE name"`` of each call of the builtin ``exec`` or ``eval`` in ``source`` (a method such as
    ``model.eval()`` is no such call)."""
    return [
        f"{node.lineno} {node.func.id}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("exec", "eval")
    ]


def test_exec_and_eval_calls_are_found() -> None:
    source = "exec('x = 1')\nmodel.eval()\ny = eval('2', {})\ndef f(evaluate):\n    return evaluate('exec')\n"
    assert _exec_eval_calls(source) == ["1 exec", "3 eval"]


def test_no_exec_or_eval_in_the_package() -> None:
    calls = [
        f"{path.relative_to(ROOT).as_posix()}:{call}"
        for path in SOURCES
        for call in _exec_eval_calls(path.read_text(encoding="utf-8"))
    ]
    assert not calls, "code built at run time (write it out instead): " + ", ".join(calls)


def test_no_flat_module_families() -> None:
    families = []
    for folder in {p.parent for p in SOURCES}:
        prefixes = Counter(p.stem.split("_")[0] for p in folder.glob("*.py") if "_" in p.stem.strip("_"))
        families += [f"{folder.relative_to(ROOT)}/{prefix}_*" for prefix, count in prefixes.items() if count >= 3]
    assert not families, f"make these families packages: {families}"


def test_every_subpackage_is_installed() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py") if "rules" not in p.parts}
    assert found | {"onnxroof.rules", "onnxroof.platforms", "onnxroof.runtimes"} == listed


def test_the_cli_holds_no_library_logic() -> None:
    """Each command parses options, calls the library and renders: no command body over 60 statements."""
    long_commands = []
    for path in (PACKAGE / "cli").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef):
                statements = sum(isinstance(n, ast.stmt) for n in ast.walk(node)) - 1
                if statements > 60:
                    long_commands.append(f"{path.name}:{node.name} ({statements})")
    assert not long_commands, long_commands


def test_no_module_imports_another_modules_private_names() -> None:
    """A name one module shares with another is public (``cli.common.emit``, not ``_emit``); dunders aside."""
    private = [
        f"{path.relative_to(ROOT)}: {alias.name} from {node.module}"
        for path in SOURCES
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("onnxroof")
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.endswith("__")
    ]
    assert not private, private
