"""Platform files: every bundled file loads and is sourced; bad files fail with one line naming file and key."""

from __future__ import annotations

import math
import tomllib
from importlib.resources import files
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onnxroof.core.errors import PlatformError
from onnxroof.core.profiles import FusionProfile
from onnxroof.platform.lookup import bundled_platform_names, bundled_platforms, load_platform
from onnxroof.platform.model import PRECISIONS, Platform

GOOD = """\
schema = 1
name = "toy"
title = "Toy platform"
kind = "gpu"
fusion_profile = "none"
aliases = ["toy-alias"]

[peak_tflops]
fp32 = { value = 2.0, source = "made up for a test" }
fp16 = { value = 8.0, source = "made up for a test" }

[sparse_peak_tflops]
fp16 = { value = 16.0, source = "made up for a test" }

[memory]
dram_bandwidth_gbps = { value = 100.0, source = "made up for a test" }
capacity_gb = { value = 4, source = "made up for a test" }
onchip_mb = { value = 2, source = "made up for a test" }

[power]
tdp_w = { value = 10, source = "made up for a test" }

[runtime]
launch_overhead_us = { value = 5, source = "assumed for a test" }
"""


def _write(tmp_path: Path, text: str, name: str = "toy.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _bundled_toml(name: str) -> dict:
    return tomllib.loads(files("onnxroof.platforms").joinpath(f"{name}.toml").read_text(encoding="utf-8"))


# --- bundled files -------------------------------------------------------------------------------------


def test_bundled_platforms_load_and_are_sane() -> None:
    platforms = bundled_platforms()
    names = [p.name for p in platforms]
    assert len(platforms) >= 15
    assert len(set(names)) == len(names)
    assert tuple(names) == bundled_platform_names()
    for p in platforms:
        assert p.path == f"bundled:{p.name}"
        assert "fp32" in p.peak_flops or "int8" in p.peak_flops, p.name
        assert p.dram_bandwidth > 0
        assert p.launch_overhead_s > 0
        assert type(p.fusion_profile) is FusionProfile, p.name
        for precision in p.precisions():
            assert math.isfinite(p.ridge(precision)) and p.ridge(precision) > 0
        assert set(p.peak_flops) <= set(PRECISIONS)
        assert set(p.sparse_peak_flops) <= set(PRECISIONS)


def test_every_bundled_figure_has_a_source() -> None:
    for p in bundled_platforms():
        doc = _bundled_toml(p.name)
        dotted = {f"{table}.{key}" for table, body in doc.items() if isinstance(body, dict) for key in body}
        assert set(p.sources) == dotted, p.name
        for key, source in p.sources.items():
            assert source.strip(), f"{p.name}: {key}"
            assert "\n" not in source


def test_names_and_aliases_unique_across_bundled_files() -> None:
    seen: dict[str, str] = {}
    for p in bundled_platforms():
        for key in (p.name, *p.aliases):
            assert key.lower() not in seen, f"{key} in {p.name} and {seen.get(key.lower())}"
            seen[key.lower()] = p.name


def test_sparse_peaks_never_below_dense() -> None:
    for p in bundled_platforms():
        for precision, sparse in p.sparse_peak_flops.items():
            assert precision in p.peak_flops, f"{p.name}: sparse {precision} without a dense peak"
            assert sparse >= p.peak_flops[precision], f"{p.name}: {precision}"


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_xavier_ridge_is_peak_over_bandwidth(precision: str) -> None:
    doc = _bundled_toml("xavier")
    peak_tflops = doc["peak_tflops"][precision]["value"]
    bw_gbps = doc["memory"]["dram_bandwidth_gbps"]["value"]
    xavier = load_platform("xavier").with_peak_roofs()  # the pure datasheet roofline (--peak)
    assert xavier.peak(precision) == pytest.approx(peak_tflops * 1e12, rel=1e-12)
    assert xavier.ridge(precision) == pytest.approx(peak_tflops * 1e12 / (bw_gbps * 1e9), rel=1e-12)


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_xavier_sustained_roofs(precision: str) -> None:
    """By default the roofs are the [sustained] shares of the datasheet figures; tensor only for tensor precisions."""
    doc = _bundled_toml("xavier")
    peak = doc["peak_tflops"][precision]["value"] * 1e12
    bandwidth = doc["memory"]["dram_bandwidth_gbps"]["value"] * 1e9
    f_bw = doc["sustained"]["dram_bandwidth"]["value"]
    f_tensor = doc["sustained"]["tensor"]["value"] if precision == "fp16" else 1.0  # fp32 runs on CUDA cores
    xavier = load_platform("xavier")
    assert xavier.peak_flops[precision] == pytest.approx(peak, rel=1e-12)  # the datasheet figures stay
    assert xavier.dram_bandwidth == pytest.approx(bandwidth, rel=1e-12)
    assert xavier.peak(precision) == pytest.approx(f_tensor * peak, rel=1e-12)
    assert xavier.roof_bandwidth == pytest.approx(f_bw * bandwidth, rel=1e-12)
    assert xavier.ridge(precision) == pytest.approx(f_tensor * peak / (f_bw * bandwidth), rel=1e-12)


NVIDIA_GPUS = frozenset(
    [
        "a100",
        "a100-80gb",
        "h100",
        "h200",
        "l4",
        "t4",
        "v100",
        "rtx3080",
        "rtx4090",
        "gtx1080ti",
        "xavier",
        "agx-orin",
        "orin-nano",
        "orin-nano-super",
        "jetson-nano",
    ]
)


def test_sustained_shares_are_sourced_and_not_on_measured_files(tmp_path) -> None:
    for p in bundled_platforms():
        for key in p.sustained:
            assert p.sources[f"sustained.{key}"].strip(), f"{p.name}: sustained.{key}"
        if p.name in NVIDIA_GPUS:
            assert "dram_bandwidth" in p.sustained, f"{p.name}: a GPU platform without [sustained] dram_bandwidth"
    measured = GOOD.replace('aliases = ["toy-alias"]', 'aliases = ["toy-alias"]\nmeasured = true')
    path = _write(tmp_path, measured + '\n[sustained]\ndram_bandwidth = { value = 0.9, source = "x" }\n')
    with pytest.raises(PlatformError, match="measured"):
        load_platform(path)
    path = _write(tmp_path, GOOD + '\n[sustained]\ntensor = { value = 1.2, source = "x" }\n')
    with pytest.raises(PlatformError, match=r"sustained\.tensor.*\(0, 1\]"):
        load_platform(path)
    toy = load_platform(_write(tmp_path, GOOD + '\n[sustained]\ntensor = { value = 0.5, source = "x" }\n'))
    assert (toy.peak("fp16"), toy.peak("fp32"), toy.roof_bandwidth) == (4e12, 2e12, 100e9)  # fp32: CUDA cores


def test_units_are_converted_to_si(tmp_path: Path) -> None:
    p = load_platform(_write(tmp_path, GOOD))
    assert p.peak_flops == {"fp32": 2.0e12, "fp16": 8.0e12}
    assert p.sparse_peak_flops == {"fp16": 16.0e12}
    assert p.dram_bandwidth == 100.0e9
    assert p.memory_capacity == 4e9
    assert p.onchip_memory == 2e6
    assert p.tdp_w == 10
    assert p.launch_overhead_s == pytest.approx(5e-6)
    assert p.precisions() == ("fp32", "fp16")
    assert p.sources["memory.dram_bandwidth_gbps"] == "made up for a test"
    assert not p.measured


def test_optional_figures_may_be_absent(tmp_path: Path) -> None:
    text = "\n".join(
        line for line in GOOD.splitlines() if not line.startswith(("capacity_gb", "onchip_mb", "tdp_w", "[power]"))
    )
    p = load_platform(_write(tmp_path, text))
    assert p.memory_capacity is None and p.onchip_memory is None and p.tdp_w is None


def test_platform_is_hashable_and_frozen() -> None:
    p = load_platform("xavier")
    assert hash(p) == hash(load_platform("xavier"))
    with pytest.raises(AttributeError):
        p.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        p.peak_flops["fp32"] = 1.0  # type: ignore[index]


# --- lookup --------------------------------------------------------------------------------------------


def test_user_path_loading(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD)
    for arg in (path, str(path)):
        p = load_platform(arg)
        assert isinstance(p, Platform)
        assert p.name == "toy" and p.path == str(path)


def test_alias_and_case_insensitive_lookup() -> None:
    xavier = load_platform("xavier")
    assert load_platform("XAVIER") is xavier
    assert load_platform("agx-xavier") is xavier
    assert load_platform("  AGX-Xavier ") is xavier


def test_unknown_name_lists_bundled_names() -> None:
    with pytest.raises(PlatformError) as info:
        load_platform("no-such-chip")
    message = str(info.value)
    assert "no-such-chip" in message
    for name in bundled_platform_names():
        assert name in message


def test_missing_file_is_a_platform_error(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    with pytest.raises(PlatformError, match=r"absent\.toml"):
        load_platform(path)


def test_peak_for_missing_precision_names_what_it_has() -> None:
    xavier = load_platform("xavier")
    with pytest.raises(PlatformError) as info:
        xavier.peak("int4")
    message = str(info.value)
    assert "xavier" in message and "int4" in message
    for precision in xavier.precisions():
        assert precision in message
    with pytest.raises(PlatformError):
        xavier.ridge("int4")


# --- bad files -----------------------------------------------------------------------------------------

BAD_CASES = {
    "unknown top-level key": ('colour = "red"\n' + GOOD, "colour"),
    "unknown key in memory": (
        GOOD.replace("[memory]\n", '[memory]\nl3_mb = { value = 1, source = "x" }\n'),
        "memory.l3_mb",
    ),
    "unknown key in a figure": (
        GOOD.replace(
            'tdp_w = { value = 10, source = "made up for a test" }', 'tdp_w = { value = 10, source = "s", unit = "W" }'
        ),
        "power.tdp_w.unit",
    ),
    "unknown precision": (
        GOOD.replace("[peak_tflops]\n", '[peak_tflops]\nfp12 = { value = 1, source = "x" }\n'),
        "peak_tflops.fp12",
    ),
    "missing source": (
        GOOD.replace('fp32 = { value = 2.0, source = "made up for a test" }', "fp32 = { value = 2.0 }"),
        "peak_tflops.fp32.source",
    ),
    "empty source": (
        GOOD.replace('fp32 = { value = 2.0, source = "made up for a test" }', 'fp32 = { value = 2.0, source = " " }'),
        "peak_tflops.fp32.source",
    ),
    "negative value": (
        GOOD.replace("dram_bandwidth_gbps = { value = 100.0", "dram_bandwidth_gbps = { value = -3"),
        "memory.dram_bandwidth_gbps",
    ),
    "zero value": (GOOD.replace("fp16 = { value = 8.0", "fp16 = { value = 0"), "peak_tflops.fp16"),
    "boolean value": (GOOD.replace("tdp_w = { value = 10", "tdp_w = { value = true"), "power.tdp_w"),
    "string value": (GOOD.replace("tdp_w = { value = 10", 'tdp_w = { value = "10"'), "power.tdp_w"),
    "infinite value": (GOOD.replace("tdp_w = { value = 10", "tdp_w = { value = inf"), "power.tdp_w"),
    "bare number figure": (
        GOOD.replace('tdp_w = { value = 10, source = "made up for a test" }', "tdp_w = 10"),
        "power.tdp_w",
    ),
    "missing launch overhead": (
        GOOD.replace('launch_overhead_us = { value = 5, source = "assumed for a test" }', ""),
        "runtime.launch_overhead_us",
    ),
    "missing runtime table": (
        GOOD.replace('[runtime]\nlaunch_overhead_us = { value = 5, source = "assumed for a test" }\n', ""),
        "runtime.launch_overhead_us",
    ),
    "missing bandwidth": (
        GOOD.replace('dram_bandwidth_gbps = { value = 100.0, source = "made up for a test" }', ""),
        "memory.dram_bandwidth_gbps",
    ),
    "no peaks": (
        GOOD.replace(
            'fp32 = { value = 2.0, source = "made up for a test" }\n'
            'fp16 = { value = 8.0, source = "made up for a test" }\n',
            "",
        ),
        "peak_tflops",
    ),
    "missing title": (GOOD.replace('title = "Toy platform"\n', ""), "title"),
    "bad kind": (GOOD.replace('kind = "gpu"', 'kind = "fpga"'), "kind"),
    "bad fusion profile": (GOOD.replace('fusion_profile = "none"', 'fusion_profile = "xla"'), "fusion_profile"),
    "bad schema": (GOOD.replace("schema = 1", "schema = 2"), "schema"),
    "bad aliases": (GOOD.replace('aliases = ["toy-alias"]', 'aliases = "toy-alias"'), "aliases"),
    "bad measured": (GOOD.replace("schema = 1\n", 'schema = 1\nmeasured = "yes"\n'), "measured"),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_file_raises_one_line_naming_file_and_key(tmp_path: Path, case: str) -> None:
    text, key = BAD_CASES[case]
    path = _write(tmp_path, text)
    with pytest.raises(PlatformError) as info:
        load_platform(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert f": {key}: " in message, message


def test_negative_value_message_is_exact(tmp_path: Path) -> None:
    path = _write(tmp_path, BAD_CASES["negative value"][0])
    with pytest.raises(PlatformError) as info:
        load_platform(path)
    assert str(info.value) == f"{path}: memory.dram_bandwidth_gbps: value must be a positive number, got -3"


def test_invalid_toml_raises_one_line_naming_file(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD + "[memory\nbroken = \n")
    with pytest.raises(PlatformError) as info:
        load_platform(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: invalid TOML")


def test_measured_flag_is_accepted(tmp_path: Path) -> None:
    p = load_platform(_write(tmp_path, GOOD.replace("schema = 1\n", "schema = 1\nmeasured = true\n")))
    assert p.measured


# --- property ------------------------------------------------------------------------------------------

_positive = st.floats(min_value=1e-6, max_value=1e9, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(peak_tflops=_positive, bw_gbps=_positive)
def test_ridge_is_peak_over_bandwidth_for_any_values(
    tmp_path_factory: pytest.TempPathFactory, peak_tflops: float, bw_gbps: float
) -> None:
    text = GOOD.replace("fp32 = { value = 2.0", f"fp32 = {{ value = {peak_tflops!r}").replace(
        "dram_bandwidth_gbps = { value = 100.0", f"dram_bandwidth_gbps = {{ value = {bw_gbps!r}"
    )
    path = _write(tmp_path_factory.mktemp("prop"), text)
    p = load_platform(path)
    assert p.ridge("fp32") == pytest.approx(peak_tflops * 1e12 / (bw_gbps * 1e9), rel=1e-12)


def test_bundled_name_must_equal_file_stem() -> None:
    from onnxroof.platform.parse import parse_platform  # the bundled loader's parser, with the stem it enforces

    with pytest.raises(PlatformError, match=r"^platforms/other\.toml: name: must equal the file stem"):
        parse_platform(GOOD.encode(), label="platforms/other.toml", origin="bundled:other", stem="other")


# --- measured platforms: [measurement], [efficiency], [memory] cache_levels, run overhead ----------------

MEASURED = GOOD.replace("schema = 1\n", "schema = 1\nmeasured = true\n").replace(
    'launch_overhead_us = { value = 5, source = "assumed for a test" }',
    'launch_overhead_us = { value = 5, source = "assumed for a test" }\n'
    'run_overhead_us = { value = 4, source = "measured for a test" }',
).replace(
    'onchip_mb = { value = 2, source = "made up for a test" }',
    'onchip_mb = { value = 2, source = "made up for a test" }\n'
    "cache_levels = [\n"
    '    { size_mb = 0.5, bandwidth_gbps = 400, source = "measured for a test" },\n'
    '    { size_mb = 2, bandwidth_gbps = 200, source = "measured for a test" },\n'
    "]",
) + (
    '\n[measurement]\ndate = "2025-01-01T00:00:00+00:00"\nonnxruntime = "1.31.1"\nthreads = 2\n'
    'cpu = "Toy CPU"\nquick = true\nduration_s = 3.5\n'
    '\n[efficiency]\nconv = { value = 0.5, source = "measured for a test" }\n'
    'elementwise = { value = 1, source = "measured for a test" }\n'
)


def test_measured_file_loads_every_table(tmp_path: Path) -> None:
    p = load_platform(_write(tmp_path, MEASURED))
    assert p.measured
    assert p.measurement["threads"] == 2 and p.measurement["quick"] is True and p.measurement["cpu"] == "Toy CPU"
    assert p.run_overhead_s == pytest.approx(4e-6)
    assert [(lv.size, lv.bandwidth) for lv in p.cache_levels] == [(0.5e6, 400e9), (2e6, 200e9)]
    assert dict(p.efficiency) == {"conv": 0.5, "elementwise": 1.0}
    assert p.sources["efficiency.conv"] == "measured for a test"
    assert p.sources["memory.cache_levels[1]"] == "measured for a test"
    assert hash(p) == hash(load_platform(tmp_path / "toy.toml"))  # measured extras keep it hashable


def test_bandwidth_for_picks_the_smallest_level_that_holds_the_working_set(tmp_path: Path) -> None:
    p = load_platform(_write(tmp_path, MEASURED))
    assert p.bandwidth_for(1e5) == (400e9, "L1")
    assert p.bandwidth_for(0.5e6) == (400e9, "L1")
    assert p.bandwidth_for(1e6) == (200e9, "L2")
    assert p.bandwidth_for(3e6) == (100e9, "dram")
    assert load_platform("xavier").bandwidth_for(1.0) == (load_platform("xavier").roof_bandwidth, "dram")


def test_datasheet_platforms_have_no_measured_extras() -> None:
    for p in bundled_platforms():
        assert not p.cache_levels and not p.efficiency and not p.measurement and p.run_overhead_s == 0.0


MEASURED_BAD_CASES = {
    "measurement without measured": (MEASURED.replace("measured = true\n", ""), "measurement"),
    "unknown measurement key": (
        MEASURED.replace('cpu = "Toy CPU"', 'cpu = "Toy CPU"\ncolour = "red"'),
        "measurement.colour",
    ),
    "measurement value not scalar": (MEASURED.replace("threads = 2", "threads = [2]"), "measurement.threads"),
    "efficiency above one": (MEASURED.replace("conv = { value = 0.5", "conv = { value = 1.5"), "efficiency.conv"),
    "efficiency zero": (MEASURED.replace("conv = { value = 0.5", "conv = { value = 0"), "efficiency.conv"),
    "unknown efficiency class": (
        MEASURED.replace("conv = { value = 0.5", "convolution = { value = 0.5"),
        "efficiency.convolution",
    ),
    "efficiency without source": (
        MEASURED.replace('conv = { value = 0.5, source = "measured for a test" }', "conv = { value = 0.5 }"),
        "efficiency.conv.source",
    ),
    "cache levels not a list": (
        MEASURED[: MEASURED.index("cache_levels")]
        + "cache_levels = 3\n"
        + MEASURED[MEASURED.index("]\n", MEASURED.index("cache_levels")) + 2 :],
        "memory.cache_levels",
    ),
    "cache level decreasing": (MEASURED.replace("size_mb = 2,", "size_mb = 0.25,"), "memory.cache_levels[1].size_mb"),
    "cache level unknown key": (
        MEASURED.replace("size_mb = 0.5,", "size_mb = 0.5, ways = 8,"),
        "memory.cache_levels[0].ways",
    ),
    "cache level missing source": (
        MEASURED.replace(
            '{ size_mb = 0.5, bandwidth_gbps = 400, source = "measured for a test" }',
            "{ size_mb = 0.5, bandwidth_gbps = 400 }",
        ),
        "memory.cache_levels[0].source",
    ),
    "cache level negative bandwidth": (
        MEASURED.replace("bandwidth_gbps = 400", "bandwidth_gbps = -4"),
        "memory.cache_levels[0].bandwidth_gbps",
    ),
    "run overhead zero": (
        MEASURED.replace("run_overhead_us = { value = 4", "run_overhead_us = { value = 0"),
        "runtime.run_overhead_us",
    ),
}


@pytest.mark.parametrize("case", sorted(MEASURED_BAD_CASES))
def test_bad_measured_file_raises_one_line_naming_file_and_key(tmp_path: Path, case: str) -> None:
    text, key = MEASURED_BAD_CASES[case]
    path = _write(tmp_path, text)
    with pytest.raises(PlatformError) as info:
        load_platform(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert f": {key}: " in message, message
