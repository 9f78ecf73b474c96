"""Seeded mutation fuzzing (``tests/fuzz.py``): ~150 malformed models through ``report -f json -o FILE``.

Every mutant must end in exit 0, 1 or 2 — never 3, an internal error — and a failure must be one line on
stderr with no output file left behind. ``benchmarks/fuzz_campaign.py`` runs thousands with figures per family.
"""

from __future__ import annotations

from fuzz import FAMILIES, mutants, run_mutant

SEED, COUNT = 16, 156  # 13 per family


def test_the_mutants_are_reproducible() -> None:
    first = [(m.family, m.name, m.data) for m in mutants(SEED, 24)]
    assert first == [(m.family, m.name, m.data) for m in mutants(SEED, 24)]
    assert {family for family, _, _ in first} == set(FAMILIES)


def test_no_mutant_crashes_hangs_or_leaves_a_partial_file(tmp_path) -> None:
    problems = []
    for index, mutant in enumerate(mutants(SEED, COUNT)):
        outcome = run_mutant(mutant, tmp_path / str(index % 4))
        failed = outcome.exit_code not in (0, 1)
        if outcome.exit_code not in (0, 1, 2) or (failed and outcome.stderr_lines != 1) or outcome.left_output:
            problems.append(
                f"{mutant.name}: exit {outcome.exit_code}, {outcome.stderr_lines} stderr line(s), "
                f"{'file left, ' if outcome.left_output else ''}{outcome.crash_site} {outcome.message[:200]}"
            )
    assert not problems, "\n".join(problems)
