"""The README's example outputs are made by the code (docs/readme_examples.py): each generated block must be
exactly what the code prints today, so an output change without `python docs/readme_examples.py` fails here."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _examples():
    spec = importlib.util.spec_from_file_location("readme_examples", ROOT / "docs" / "readme_examples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


EXAMPLES = _examples()
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_every_generated_block_is_known_and_present() -> None:
    assert set(EXAMPLES.blocks(README)) == set(EXAMPLES.EXAMPLES)


@pytest.mark.parametrize("name", sorted(EXAMPLES.EXAMPLES))
def test_readme_block_matches_the_code(name: str) -> None:
    made = EXAMPLES.blocks(EXAMPLES.regenerate(README, [name]))[name]
    assert EXAMPLES.blocks(README)[name] == made, f"README block {name!r} is stale: run python docs/readme_examples.py"


def test_a_changed_block_is_caught() -> None:
    """The check can fail: a README whose audit row was edited by hand differs from what the code makes."""
    edited = README.replace("| tiny_cnn | xavier | ok |", "| tiny_cnn | xavier | violated |", 1)
    assert edited != README
    assert EXAMPLES.blocks(edited)["audit-table"] != EXAMPLES.blocks(README)["audit-table"]


def test_the_screenshots_name_the_script_that_makes_them() -> None:
    for image in ("docs/report-resnet50.png", "docs/report-tiny-transformer.png"):
        assert image in README and (ROOT / image).exists()
    assert "`python tests/test_html.py docs/` retakes the screenshots" in README
    assert "take_screenshots(" in (ROOT / "tests" / "test_html.py").read_text(encoding="utf-8")
