"""The roofline placement: closed-form times, bounds and the precision fallback."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from onnxroof.core.cost import Cost
from onnxroof.core.errors import PlatformError
from onnxroof.core.states import Bound
from onnxroof.platform.lookup import load_platform
from onnxroof.roofline.classify import classify
from onnxroof.roofline.precision import precision_of, resolve_precision

XAVIER = load_platform("xavier")


@settings(max_examples=100, deadline=None)
@given(st.floats(0, 1e13), st.floats(1, 1e11), st.sampled_from(["fp32", "fp16", "int8"]))
def test_classify_formulas(flops: float, moved: float, precision: str) -> None:
    point = classify(Cost(flops=flops, bytes_read=moved / 2, bytes_written=moved / 2), XAVIER, precision)
    peak, bandwidth = XAVIER.peak(precision), XAVIER.roof_bandwidth  # the sustained roofs: f · datasheet
    assert point.t_compute == pytest.approx(flops / peak)
    assert point.t_memory == pytest.approx(moved / bandwidth)
    assert point.latency == pytest.approx(max(flops / peak, moved / bandwidth) + XAVIER.launch_overhead_s)
    assert point.attainable_flops == pytest.approx(min(peak, flops / moved * bandwidth))
    assert point.ridge == pytest.approx(peak / bandwidth)
    expected = Bound.COMPUTE if flops > 0 and flops / moved >= peak / bandwidth else Bound.MEMORY
    assert point.bound == expected


def test_nodes_that_do_not_run_take_no_time() -> None:
    point = classify(Cost(flops=10.0, bytes_read=4.0), XAVIER, "fp32", runs=False)
    assert point.latency == 0 and point.bound == Bound.NONE


def test_zero_byte_flops_are_compute_bound_with_infinite_intensity() -> None:
    point = classify(Cost(flops=1e6), XAVIER, "fp32")
    assert math.isinf(point.intensity) and point.bound == Bound.COMPUTE


def test_launch_overhead_scales_with_launches() -> None:
    one = classify(Cost(flops=1.0, bytes_read=1.0), XAVIER, "fp32")
    five = classify(Cost(flops=1.0, bytes_read=1.0), XAVIER, "fp32", launches=5)
    assert five.t_overhead == pytest.approx(5 * one.t_overhead)


def test_precision_of_dtype_and_fallback() -> None:
    assert precision_of("float16") == "fp16" and precision_of("int64") == "fp32" and precision_of("uint8") == "int8"
    pi = load_platform("raspberry-pi-4")  # fp32 only
    assert resolve_precision(pi, "fp16") == "fp32"
    assert resolve_precision(load_platform("t4"), "bf16") in ("bf16", "fp16")


def test_forced_precision_must_exist() -> None:
    with pytest.raises(PlatformError, match="int4"):
        XAVIER.peak("int4")
