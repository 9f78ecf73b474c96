"""Seeded mutation fuzzing (``tests/fuzz.py``): malformed models through ``report -f json -o FILE``.

Every mutant must end in exit 0, 1 or 2 — never 3, an internal error — and a failure must be one line on
stderr with no output file left behind. The first test runs the classic families over the samples and small
models (~150 mutants); the second every family, issue 25's kinds included, over those and the real LLM,
transformer and control-flow seeds, one case per mutant. ``benchmarks/fuzz_campaign.py`` runs thousands with
figures per family.
"""

from __future__ import annotations

import pytest
from fuzz import CLASSIC, CLASSIC_SEEDS, FAMILIES, LLM_SEEDS, Mutant, mutants, run_mutant

SEED, COUNT = 16, 156  # 13 per classic family
REAL_SEED, REAL_COUNT = 25, 32  # 2 per family, every seed model
REAL_MUTANTS = list(mutants(REAL_SEED, REAL_COUNT, FAMILIES, (CLASSIC_SEEDS, LLM_SEEDS)))


def _problem(mutant: Mutant, folder) -> str:
    outcome = run_mutant(mutant, folder)
    failed = outcome.exit_code not in (0, 1)
    if outcome.exit_code not in (0, 1, 2) or (failed and outcome.stderr_lines != 1) or outcome.left_output:
        return (
            f"{mutant.name}: exit {outcome.exit_code}, {outcome.stderr_lines} stderr line(s), "
            f"{'file left, ' if outcome.left_output else ''}{outcome.crash_site} {outcome.message[:200]}"
        )
    return ""


def test_the_mutants_are_reproducible() -> None:
    first = [(m.family, m.name, m.data) for m in mutants(SEED, 24)]
    assert first == [(m.family, m.name, m.data) for m in mutants(SEED, 24)]
    assert {family for family, _, _ in first} == set(FAMILIES)


def test_the_real_model_seeds_are_drawn() -> None:
    names = {m.name.split(":")[1] for m in mutants(REAL_SEED, 160)}
    assert {"genai_llama_int4", "genai_qwen2_int4", "optimum_merged", "decoder_opset23", "ort_bert"} <= names


def test_no_mutant_crashes_hangs_or_leaves_a_partial_file(tmp_path) -> None:
    problems = []
    for index, mutant in enumerate(mutants(SEED, COUNT, CLASSIC, (CLASSIC_SEEDS,))):
        problem = _problem(mutant, tmp_path / str(index % 4))
        if problem:
            problems.append(problem)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "index",
    range(REAL_COUNT),
    ids=[m.name.split(":")[1] + f"-{m.family}-{i}" for i, m in enumerate(REAL_MUTANTS)],
)
def test_no_mutant_of_the_real_seeds_or_new_kinds_crashes(index: int, tmp_path) -> None:
    problem = _problem(REAL_MUTANTS[index], tmp_path)
    assert not problem, problem
