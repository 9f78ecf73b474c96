"""Budgets: units, TOML validation (one line naming the file and key), finding policies and evaluation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onnxroof.analysis.findings import Finding
from onnxroof.core.errors import OnnxroofError
from onnxroof.gate.budget import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_PASS,
    EXIT_VIOLATION,
    Budget,
    BudgetError,
    Limit,
    load_budget,
    parse_budget,
    parse_quantity,
)
from onnxroof.gate.check import CheckSettings, check_model, error_check, evaluate, overall_exit_code

ROOT = Path(__file__).resolve().parents[1]
CNN = str(ROOT / "samples" / "tiny_cnn.onnx")


def readme_budget() -> str:
    """The budget example in the README's "Gatekeeping in CI" section."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Gatekeeping in CI") :]
    return re.search(r"```toml\n(.*?)```", section, re.S).group(1)


# --------------------------------------------------------------------------------------------- units


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("15ms", "duration", 15e-3),
        ("15 ms", "duration", 15e-3),
        ("800us", "duration", 800e-6),
        ("800µs", "duration", 800e-6),  # micro sign
        ("800μs", "duration", 800e-6),  # Greek mu
        ("1.5s", "duration", 1.5),
        ("250ns", "duration", 250e-9),
        ("5G", "count", 5e9),
        ("25M", "count", 25e6),
        ("3k", "count", 3e3),
        ("3K", "count", 3e3),
        ("2T", "count", 2e12),
        ("1e6", "count", 1e6),
        (1200, "count", 1200),
        ("100MB", "bytes", 100e6),
        ("100 kB", "bytes", 100e3),
        ("64MiB", "bytes", 64 * 2**20),
        ("1 GiB", "bytes", 2**30),
        ("2KiB", "bytes", 2048),
        ("1GB", "bytes", 1e9),
        (4096, "bytes", 4096),
        ("60%", "share", 0.6),
        ("12.5 %", "share", 0.125),
        (0.6, "share", 0.6),
        ("0.25", "share", 0.25),
    ],
)
def test_units(text, kind, expected) -> None:
    assert parse_quantity(text, kind, "--opt") == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("value", "kind", "says"),
    [
        ("15", "duration", "has no unit"),
        (0.015, "duration", "has no unit"),
        ("15 mss", "duration", "unknown unit 'mss'"),
        ("5X", "count", "unknown unit 'X'"),
        ("10 MB/s", "bytes", "unknown unit"),
        ("1.5", "share", "write a percentage ('1.5%')"),
        (60, "share", "write a percentage"),
        ("fast", "duration", "cannot read 'fast'"),
        ("-5%", "share", "cannot read"),
        (True, "count", "got true"),
        ([1], "count", "got [1]"),
    ],
)
def test_bad_units_name_the_option(value, kind, says) -> None:
    with pytest.raises(BudgetError) as caught:
        parse_quantity(value, kind, "--max-thing")
    message = str(caught.value)
    assert message.startswith("--max-thing: ") and says in message and "\n" not in message


@pytest.mark.parametrize(("text", "expected"), [("5e-1", 0.5), ("2.5e-1", 0.25), ("1e0", 1.0)])
def test_a_share_with_an_exponent_is_checked_whole(text: str, expected: float) -> None:
    """The ≤ 1 check of a unitless share reads the whole number, exponent included (it once read the mantissa)."""
    assert parse_quantity(text, "share", "x") == pytest.approx(expected, rel=1e-12)


def test_a_share_over_one_written_with_an_exponent_is_refused() -> None:
    with pytest.raises(BudgetError, match="more than 1"):
        parse_quantity("0.5e1", "share", "x")


_SCALES = {
    "duration": {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9},
    "count": {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12},
    "bytes": {"B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "KiB": 1024.0, "MiB": 2.0**20, "GiB": 2.0**30},
    "share": {"%": 0.01},
}


@given(
    st.sampled_from([(kind, unit) for kind, units in _SCALES.items() for unit in units]),
    st.decimals(min_value=0, max_value=10**6, places=3, allow_nan=False, allow_infinity=False),
    st.sampled_from(["", " "]),
)
def test_units_round_trip(kind_unit, number, space) -> None:
    kind, unit = kind_unit
    text = f"{number}{space if unit else ''}{unit}"
    assert parse_quantity(text, kind, "x") == pytest.approx(float(number) * _SCALES[kind][unit], rel=1e-12)


# --------------------------------------------------------------------------------------------- the file


def test_readme_example_loads(tmp_path: Path) -> None:
    path = tmp_path / "budget.toml"
    path.write_text(readme_budget(), encoding="utf-8")
    budget = load_budget(path)
    assert budget.max_latency["xavier"] == Limit(15e-3, "15 ms")
    assert budget.latency_limit(("orin-nano",)).value == pytest.approx(25e-3)
    assert budget.latency_limit(("h100", "h100-sxm")).value == pytest.approx(40e-3)
    assert budget.max_flops.value == 5e9 and budget.max_params.value == 25e6
    assert budget.max_weight_bytes.value == 100e6 and budget.max_peak_activation_bytes.value == 64 * 2**20
    assert budget.max_memory_bound_share.value == pytest.approx(0.8)
    assert budget.max_layout_share.value == pytest.approx(0.1)
    assert budget.allow_unsupported is False and budget.max_slowdown.value == pytest.approx(0.05)
    assert (budget.fail_on, budget.fail, budget.allow, budget.ignore) == (
        "error",
        {"OR001"},
        {"OR006"},
        {"OR002"},
    )


def test_one_latency_for_every_platform_and_aliases() -> None:
    budget = parse_budget('schema = 1\nmax_latency = "2 ms"', "b.toml")
    assert budget.latency_limit(("xavier",)) == Limit(2e-3, "2 ms")
    aliased = parse_budget('schema = 1\nmax_latency = { agx-xavier = "3 ms" }', "b.toml")
    assert aliased.latency_limit(("xavier", "agx-xavier", "jetson-agx-xavier")).value == pytest.approx(3e-3)


def test_a_platform_missing_from_the_latency_table_is_an_error() -> None:
    budget = parse_budget('schema = 1\nmax_latency = { orin-nano = "3 ms" }', "b.toml")
    with pytest.raises(BudgetError, match=r"^b\.toml: max_latency: no limit for platform 'xavier' \(has: orin-nano\)"):
        budget.latency_limit(("xavier",))


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("max_latency = '1 ms'", "b.toml: schema: missing required key"),
        ("schema = 2", "b.toml: schema: must be 1, got 2"),
        ("schema = 1\nmax_latncy = '1 ms'", "b.toml: max_latncy: unknown key (allowed:"),
        ("schema = 1\nmax_latency = '1 mss'", "b.toml: max_latency: unknown unit 'mss'"),
        ("schema = 1\nmax_latency = { xavier = 15 }", "b.toml: max_latency.xavier: 15 has no unit"),
        ("schema = 1\nmax_latency = {}", "b.toml: max_latency: empty table"),
        ("schema = 1\nmax_flops = -1", "b.toml: max_flops: must not be negative"),
        ("schema = 1\nmax_weight_bytes = '10 Mb/s'", "b.toml: max_weight_bytes: unknown unit"),
        ("schema = 1\nmax_memory_bound_share = 80", "b.toml: max_memory_bound_share: 80 is more than 1"),
        ("schema = 1\nallow_unsupported = 'no'", "b.toml: allow_unsupported: must be true or false"),
        ("schema = 1\nname = 3", "b.toml: name: must be a string"),
        ("schema = 1\nfindings = 3", "b.toml: findings: must be a table"),
        ("schema = 1\n[findings]\nfail_on = 'info'", "b.toml: findings.fail_on: must be one of error, warning"),
        ("schema = 1\n[findings]\nfails = []", "b.toml: findings.fails: unknown key"),
        ("schema = 1\n[findings]\nfail = 'OR001'", "b.toml: findings.fail: must be a list"),
        ("schema = 1\n[findings]\nignore = ['OR999']", "b.toml: findings.ignore: unknown finding id 'OR999'"),
        ("schema = 1\n[findings]\nfail = ['OR001']\nallow = ['OR001']", "OR001 is in both 'fail' and 'allow'"),
        ("schema = 1\nmax_flops = ", "b.toml: invalid TOML"),
    ],
)
def test_bad_budget_files_name_file_and_key(text: str, names: str) -> None:
    with pytest.raises(BudgetError) as caught:
        parse_budget(text, "b.toml")
    message = str(caught.value)
    assert names in message and "\n" not in message
    assert isinstance(caught.value, OnnxroofError)  # the CLI turns it into exit 2


def test_missing_budget_file(tmp_path: Path) -> None:
    with pytest.raises(BudgetError, match=r"missing\.toml: cannot read budget file"):
        load_budget(tmp_path / "missing.toml")


def test_options_override_the_file() -> None:
    budget = parse_budget(
        "schema = 1\nmax_latency = { xavier = '1 ms' }\nmax_flops = '1G'\n[findings]\nallow = ['OR006']"
    )
    merged = budget.with_options(
        {"max_latency": "5ms", "max_flops": None, "max_params": "2M"},
        allow_unsupported=False,
        fail_on="warning",
        fail=["or005"],
        ignore=["OR002"],
    )
    assert merged.max_latency == {"default": Limit(5e-3, "5ms")}
    assert merged.max_flops == Limit(1e9, "1G") and merged.max_params == Limit(2e6, "2M")
    assert merged.allow_unsupported is False and merged.fail_on == "warning"
    assert (merged.fail, merged.allow, merged.ignore) == ({"OR005"}, {"OR006"}, {"OR002"})
    with pytest.raises(BudgetError, match=r"^--max-flops: cannot read"):
        budget.with_options({"max_flops": "lots"})
    with pytest.raises(BudgetError, match="OR006 is in both 'allow' and 'ignore'"):
        budget.with_options({}, ignore=["OR006"])


# --------------------------------------------------------------------------------------------- policy


def _finding(id_: str, severity: str) -> Finding:
    return Finding(id_, severity, "t", (), "m", "s")


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        (Budget(), {"OR007": "fail", "OR001": "warn", "OR004": "warn"}),
        (Budget(fail_on="warning"), {"OR007": "fail", "OR001": "fail", "OR004": "fail"}),
        (Budget(fail_on="never"), {"OR007": "warn", "OR001": "warn", "OR004": "warn"}),
        (Budget(fail=frozenset({"OR004"})), {"OR007": "fail", "OR001": "warn", "OR004": "fail"}),
        (Budget(allow=frozenset({"OR007"})), {"OR007": "warn", "OR001": "warn", "OR004": "warn"}),
        (Budget(ignore=frozenset({"OR007"})), {"OR007": None, "OR001": "warn", "OR004": "warn"}),
    ],
)
def test_finding_policy(budget: Budget, expected) -> None:
    findings = [_finding("OR007", "error"), _finding("OR001", "warning"), _finding("OR004", "warning")]
    assert {f.id: budget.policy(f) for f in findings} == expected


# --------------------------------------------------------------------------------------------- evaluation

TOTALS = {
    "latency_s": 2e-3,
    "flops": 1e9,
    "params": 1e6,
    "weight_bytes": 4e6,
    "peak_activation_bytes": 1e6,
    "memory_bound_share": 0.5,
    "layout_share": 0.1,
}


def test_a_value_equal_to_its_limit_passes() -> None:
    budget = parse_budget(
        "schema = 1\nmax_latency = '2 ms'\nmax_flops = '1G'\nmax_params = '1M'\nmax_weight_bytes = '4 MB'\n"
        "max_peak_activation_bytes = '1 MB'\nmax_memory_bound_share = '50%'\nmax_layout_share = '10%'"
    )
    limits, _ = evaluate(TOTALS, ("xavier",), 0, (), budget)
    assert [r.key for r in limits] == [
        "max_latency",
        "max_flops",
        "max_params",
        "max_weight_bytes",
        "max_peak_activation_bytes",
        "max_memory_bound_share",
        "max_layout_share",
    ]
    assert all(r.passed for r in limits)


def test_violations_and_unsupported_and_slowdown() -> None:
    budget = Budget(max_flops=Limit(5e8, "500M"), allow_unsupported=False, max_slowdown=Limit(0.05, "5%"))
    limits, verdicts = evaluate(TOTALS, ("xavier",), 2, [_finding("OR007", "error")], budget, 1.8e-3)
    by_key = {r.key: r for r in limits}
    assert not by_key["max_flops"].passed and by_key["max_flops"].value_text == "1 G"
    assert not by_key["allow_unsupported"].passed and by_key["allow_unsupported"].value_text == "2 node(s)"
    slowdown = by_key["max_slowdown"]
    assert slowdown.value == pytest.approx(2 / 1.8 - 1) and not slowdown.passed
    assert slowdown.value_text.startswith("+11.1%")
    assert [v.verdict for v in verdicts] == ["fail"]
    limits, _ = evaluate(TOTALS, ("xavier",), 0, (), Budget(allow_unsupported=True), 2.1e-3)
    assert all(r.passed for r in limits)  # allowed unsupported ops, and faster than the baseline


def test_check_model_rows() -> None:
    passing = check_model(CNN, Budget(max_latency={"default": Limit(1.0, "1 s")}), CheckSettings(dims={"batch": 1}))
    assert (passing.status, passing.exit_code, passing.platform) == ("pass", EXIT_PASS, "xavier")
    assert passing.totals["latency_s"] > 0 and [r.key for r in passing.limits] == ["max_latency"]
    failing = check_model(CNN, Budget(max_flops=Limit(1.0, "1")), CheckSettings(dims={"batch": 1}))
    assert (failing.status, failing.exit_code) == ("fail", EXIT_VIOLATION)
    assert [r.key for r in failing.violations] == ["max_flops"]
    broken = check_model("missing.onnx", Budget(), CheckSettings())
    assert (broken.status, broken.exit_code) == ("error", EXIT_BAD_INPUT) and "missing.onnx" in broken.error
    unbound = check_model(CNN, Budget(), CheckSettings())  # symbolic batch left unbound
    assert unbound.status == "error" and "batch" in unbound.error


def test_the_worst_exit_code_wins() -> None:
    ok = check_model(CNN, Budget(), CheckSettings(dims={"batch": 1}))
    bad = error_check("x.onnx", "no")
    bug = error_check("y.onnx", "bug", EXIT_INTERNAL)
    assert overall_exit_code([ok]) == EXIT_PASS
    assert overall_exit_code([ok, bad]) == EXIT_BAD_INPUT
    assert overall_exit_code([bug, ok, bad]) == EXIT_INTERNAL
    assert overall_exit_code([]) == EXIT_PASS


@pytest.mark.parametrize(("text", "joules"), [("5 mJ", 5e-3), ("2J", 2.0), ("750 µJ", 750e-6), ("3e2 nJ", 3e-7)])
def test_energy_limits_read_si_units(text: str, joules: float) -> None:
    assert parse_budget(f"schema = 1\nmax_energy = '{text}'").max_energy.value == pytest.approx(joules)


@pytest.mark.parametrize("text", ["5", "5 kWh", "5 ms"])
def test_energy_limits_need_an_energy_unit(text: str) -> None:
    with pytest.raises(BudgetError, match="max_energy"):
        parse_budget(f"schema = 1\nmax_energy = '{text}'")


def test_an_energy_limit_on_a_platform_without_energy_figures_fails_and_says_why() -> None:
    budget = Budget(max_energy=Limit(5e-3, "5 mJ"))
    (unknown,), _ = evaluate({**TOTALS, "energy_j": None}, ("xavier",), 0, (), budget)
    assert not unknown.passed and unknown.value_text == "unknown (no figures)"
    assert unknown.label == "energy per inference on xavier" and unknown.to_dict()["value"] is None
    (within,), _ = evaluate({**TOTALS, "energy_j": 5e-3}, ("pim",), 0, (), budget)
    (over,), _ = evaluate({**TOTALS, "energy_j": 6e-3}, ("pim",), 0, (), budget)
    assert within.passed and not over.passed and over.value_text == "6 mJ"
