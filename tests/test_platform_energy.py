"""Energy figures of the bundled platforms (the floorline, issue 7) and the three example architectures."""

from __future__ import annotations

import inspect
import json
import math

import pytest
from typer.testing import CliRunner

from onnxroof.cli.commands import app
from onnxroof.platform.lookup import bundled_platform_names, bundled_platforms, load_platform
from onnxroof.platform.model import ENERGY_LEVELS, PRECISIONS
from onnxroof.roofline.energy import energy_ridge, op_energy

PJ = 1e-12
ENV = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}

#: name: (dense 16-bit peak TOPS, DRAM TB/s, E_op pJ, E_mem / E_op) of the study's example architectures.
EXAMPLES = {
    "example-digital": (275, 1.2, 2000, 0.8),
    "example-pim": (400, 2.9, 2, 0.0075),
    "example-pnm": (400, 2.2, 200, 0.075),
}
ALIASES = {"digital": "example-digital", "pim": "example-pim", "pnm": "example-pnm"}


def _with_energy():
    return [p for p in bundled_platforms() if p.has_energy]


def test_every_bundled_platform_loads_and_gives_energy() -> None:
    platforms = bundled_platforms()
    assert tuple(p.name for p in platforms) == bundled_platform_names()
    assert set(EXAMPLES) <= set(bundled_platform_names())
    missing = [p.name for p in platforms if not p.has_energy]
    assert not missing, f"platforms without energy figures: {missing}"


def test_every_precision_with_a_peak_gets_an_energy() -> None:
    for p in _with_energy():
        top = max(p.precisions(), key=p.peak)
        assert "fp32" in p.energy_per_op or top in p.energy_per_op, p.name
        for precision in p.precisions():
            per_op = op_energy(p, precision)  # its own figure, or the roofline's fallback chain
            assert per_op is not None and math.isfinite(per_op) and per_op > 0, f"{p.name}: {precision}"
        for precision in ("fp32", "fp16", "int8"):  # the precisions with a published default figure
            if precision in p.peak_flops:
                assert precision in p.energy_per_op, f"{p.name}: peak for {precision} but no energy figure"


def test_energies_are_positive_sourced_and_use_known_keys() -> None:
    for p in _with_energy():
        assert set(p.energy_per_op) <= set(PRECISIONS), p.name
        assert set(p.energy_per_byte) <= set(ENERGY_LEVELS) and "dram" in p.energy_per_byte, p.name
        for table, values in (("energy_pj_per_op", p.energy_per_op), ("energy_pj_per_byte", p.energy_per_byte)):
            for key, joules in values.items():
                assert math.isfinite(joules) and joules > 0, f"{p.name}: {table}.{key}"
                source = p.sources[f"{table}.{key}"]
                assert source.strip() and "\n" not in source, f"{p.name}: {table}.{key}"


def test_narrower_precisions_never_cost_more_per_op() -> None:
    for p in _with_energy():
        given = p.energy_per_op
        chain = [given[x] for x in ("int8", "fp16", "fp32") if x in given]
        assert chain == sorted(chain), f"{p.name}: int8 ≤ fp16 ≤ fp32 per op, got {dict(given)}"


def test_default_figures_name_their_origin() -> None:
    """A figure not measured or published for the platform itself says so: ``[default]`` and where it comes from."""
    for p in bundled_platforms():
        if p.name in EXAMPLES:
            continue
        for key, source in p.sources.items():
            if key.startswith("energy_pj_per_"):
                assert source.startswith(("[default]", "[derived]")), f"{p.name}: {key}"
                if source.startswith("[default]"):
                    assert any(t in source for t in ("ISSCC 2014", "MICRO 2017", "Micron", "Accelergy")), key
        if any(s.startswith("[default]") for k, s in p.sources.items() if k.startswith("energy_pj_per_")):
            assert "45 nm" in p.notes and "overstate" in p.notes, p.name


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_have_exactly_the_study_figures(name: str) -> None:
    tops, tbps, e_op_pj, ratio = EXAMPLES[name]
    p = load_platform(name)
    assert p.kind == "accelerator" and p.fusion_profile == "tensorrt" and p.path == f"bundled:{name}"
    assert p.peak("fp16") == pytest.approx(tops * 1e12, rel=1e-12)
    assert p.dram_bandwidth == pytest.approx(tbps * 1e12, rel=1e-12)
    assert p.energy_per_op["fp16"] == pytest.approx(e_op_pj * PJ, rel=1e-12)
    assert math.isclose(p.energy_per_byte["dram"] / p.energy_per_op["fp16"], ratio, rel_tol=1e-9)
    assert math.isclose(energy_ridge(p, "fp16"), ratio, rel_tol=1e-9)  # E_mem / E_op, op/byte
    assert not p.sparse_peak_flops and p.sparsity == "none"
    for key in ("peak_tflops.fp16", "memory.dram_bandwidth_gbps", "energy_pj_per_op.fp16", "energy_pj_per_byte.dram"):
        assert "roofline+floorline example architectures (shared/research/platforms.md, issue 7)" in p.sources[key]
    assert "not a real chip" in p.notes.lower()


def test_example_aliases() -> None:
    for alias, name in ALIASES.items():
        assert load_platform(alias).name == name
        assert alias in load_platform(name).aliases


def test_digital_example_array_reproduces_its_peak() -> None:
    p = load_platform("example-digital")
    assert p.array is not None and (p.array.height, p.array.width) == (128, 128)
    assert p.array.peak_flops == pytest.approx(2 * 128 * 128 * p.array.instances * p.array.clock_hz)
    assert abs(p.array.peak_flops / p.peak("fp16") - 1) < 0.01
    assert load_platform("example-pim").array is None and load_platform("example-pnm").array is None


def test_digital_example_would_dissipate_550_kw_at_peak() -> None:
    p = load_platform("example-digital")
    assert p.peak("fp16") * p.energy_per_op["fp16"] == pytest.approx(550e3)
    assert "550 kW" in p.notes


def _invoke(*args: str):
    kwargs = {"mix_stderr": False} if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters else {}
    return CliRunner(**kwargs).invoke(app, list(args), env=ENV)


def test_platforms_command_lists_every_platform_with_its_energy() -> None:
    result = _invoke("platforms")
    assert result.exit_code == 0, result.output
    for name in bundled_platform_names():
        assert name in result.stdout, name
    assert "1.6e+03" in result.stdout  # example-digital: 1600 pJ per DRAM byte


def test_platforms_json_carries_the_energy_figures() -> None:
    result = _invoke("platforms", "--format", "json")
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    assert set(rows) == set(bundled_platform_names())
    for name, (_, _, e_op_pj, ratio) in EXAMPLES.items():
        row = rows[name]
        assert row["energy_per_op_j"]["fp16"] == pytest.approx(e_op_pj * PJ)
        assert row["energy_per_byte_j"]["dram"] == pytest.approx(e_op_pj * ratio * PJ)
