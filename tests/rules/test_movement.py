"""Movement rules: views and metadata are free, layout copies move bytes, Resize interpolates."""

from __future__ import annotations

import math

import pytest
from helpers import W, cost_of, make_op
from hypothesis import given, settings
from hypothesis import strategies as st

from onnxroof.core.cost import Cost
from onnxroof.core.errors import ShapeUnknown
from onnxroof.core.states import RuleKind
from onnxroof.rules import REGISTRY

B, S, D = 4, 128, 64
N, C, H, WD = 2, 3, 16, 24
F32, F16, I64 = 4, 2, 8

shapes = st.lists(st.integers(1, 6), min_size=1, max_size=4)
dtypes = st.sampled_from([("float32", 4), ("float16", 2), ("int8", 1), ("int64", 8)])


# --- views and metadata -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op",
    [
        make_op("Reshape", [([B, S, D], "float32"), ([2], "int64", W)], [([B * S, D], "float32")]),
        make_op("Flatten", [([B, S, D], "float32")], [([B, S * D], "float32")]),
        make_op("Squeeze", [([B, 1, D], "float32"), ([1], "int64", W)], [([B, D], "float32")]),
        make_op("Unsqueeze", [([B, D], "float32"), ([1], "int64", W)], [([B, 1, D], "float32")]),
        make_op("Identity", [([B, D], "float16")], [([B, D], "float16")]),
        make_op(
            "Dropout",
            [([B, D], "float32"), ([], "float32", W), ([], "bool", W)],
            [([B, D], "float32"), ([B, D], "bool")],
        ),
        make_op("Shape", [([B, S, D], "float32", W)], [([3], "int64")]),
        make_op("Size", [([B, S, D], "float32")], [([], "int64")]),
    ],
    ids=lambda op: op.op_type,
)
def test_views_and_metadata_cost_exactly_zero(op):
    assert cost_of(op) == Cost.zero()  # no traffic, and config / shape-only inputs are not parameters


def test_view_and_metadata_kinds():
    for op_type in ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"):
        assert REGISTRY.lookup("", op_type).kind == RuleKind.VIEW
    for op_type in ("Shape", "Size"):
        assert REGISTRY.lookup("", op_type).kind == RuleKind.METADATA


def test_views_need_no_shapes():
    op = make_op("Reshape", [(None, "float32"), ([2], "int64")], [(None, "float32")])
    assert cost_of(op) == Cost.zero()


@pytest.mark.parametrize(
    ("op_type", "config"),
    [
        ("Reshape", {1}),
        ("Squeeze", {1}),
        ("Unsqueeze", {1}),
        ("Dropout", {1, 2}),
        ("Shape", {0}),
        ("Expand", {1}),
        ("Tile", {1}),
        ("Split", {1}),
        ("Trilu", {1}),
        ("Slice", {1, 2, 3, 4}),
        ("Pad", {1, 2, 3}),
        ("CenterCropPad", {1}),
        ("Resize", {1, 2, 3}),
        ("Upsample", {1}),
        ("Concat", set()),
        ("Transpose", set()),
        ("ReverseSequence", set()),
    ],
)
def test_config_inputs_are_declared(op_type, config):
    assert REGISTRY.lookup("", op_type).config_inputs == config


# --- layout copies ------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(shape=shapes, dtype=dtypes, data=st.data())
def test_transpose_reads_and_writes_the_tensor_once(shape, dtype, data):
    name, size = dtype
    perm = data.draw(st.permutations(range(len(shape))))
    out = [shape[p] for p in perm]
    cost = cost_of(make_op("Transpose", [(shape, name)], [(out, name)], perm=list(perm)))
    assert cost.bytes_read == cost.bytes_written == math.prod(shape) * size
    assert cost.flops == 0


@settings(max_examples=50, deadline=None)
@given(base=shapes, sizes=st.lists(st.integers(1, 5), min_size=1, max_size=5), dtype=dtypes, data=st.data())
def test_concat_reads_all_inputs_and_writes_their_sum(base, sizes, dtype, data):
    name, size = dtype
    axis = data.draw(st.integers(0, len(base) - 1))
    ins = [[*base[:axis], k, *base[axis + 1 :]] for k in sizes]
    out = [*base[:axis], sum(sizes), *base[axis + 1 :]]
    cost = cost_of(make_op("Concat", [(s, name) for s in ins], [(out, name)], axis=axis))
    total = sum(math.prod(s) for s in ins) * size
    assert cost.bytes_read == cost.bytes_written == total
    assert cost.flops == 0


def test_concat_of_a_weight_counts_its_bytes_and_params():
    cost = cost_of(
        make_op("Concat", [([1, 1, D], "float32", W), ([B, S, D], "float32")], [([B, S + 1, D], "float32")], axis=1)
    )
    assert cost.bytes_read == (D + B * S * D) * F32
    assert cost.bytes_written == B * (S + 1) * D * F32
    assert cost.params == D


def test_split_reads_the_input_and_writes_every_output():
    op = make_op(
        "Split",
        [([B, S, D], "float16"), ([3], "int64", W)],
        [([B, S, 16], "float16"), ([B, S, 16], "float16"), ([B, S, 32], "float16")],
        axis=2,
    )
    cost = cost_of(op)
    assert cost == Cost(bytes_read=B * S * D * F16, bytes_written=B * S * (16 + 16 + 32) * F16)


def test_slice_charges_the_slice_not_the_input():
    config = [([1], "int64", W)] * 4  # starts, ends, axes, steps: config, never charged
    op = make_op("Slice", [([B, S, D], "float32"), *config], [([B, S // 2, D], "float32")])
    cost = cost_of(op)
    assert cost == Cost(bytes_read=B * (S // 2) * D * F32, bytes_written=B * (S // 2) * D * F32)
    assert cost.bytes_read < B * S * D * F32


def test_slice_with_an_unknown_output_shape_is_not_guessed():
    op = make_op("Slice", [([B, S, D], "float32"), ([1], "int64"), ([1], "int64")], [([B, None, D], "float32")])
    with pytest.raises(ShapeUnknown):
        cost_of(op)


def test_pad_reads_the_input_once_and_writes_the_padded_output():
    op = make_op(
        "Pad",
        [([N, C, H, WD], "float32"), ([8], "int64", W), ([], "float32", W)],
        [([N, C, H + 2, WD + 2], "float32")],
        mode="reflect",
    )
    assert cost_of(op) == Cost(bytes_read=N * C * H * WD * F32, bytes_written=N * C * (H + 2) * (WD + 2) * F32)


def test_pad_with_negative_pads_reads_only_what_it_keeps():
    op = make_op("Pad", [([N, C, H, WD], "float32"), ([8], "int64", W)], [([N, C, H - 2, WD + 2], "float32")])
    cost = cost_of(op)
    assert cost.bytes_read == N * C * (H - 2) * WD * F32
    assert cost.bytes_written == N * C * (H - 2) * (WD + 2) * F32


def test_center_crop_pad_reads_the_kept_region():
    op = make_op(
        "CenterCropPad",
        [([H, WD, C], "uint8"), ([2], "int64", W)],
        [([H // 2, 2 * WD, C], "uint8")],
        opset=18,
        axes=[0, 1],
    )
    assert cost_of(op) == Cost(bytes_read=(H // 2) * WD * C, bytes_written=(H // 2) * 2 * WD * C)


@pytest.mark.parametrize("op_type", ["Expand", "Tile"])
def test_expand_and_tile_read_the_input_once(op_type):
    op = make_op(op_type, [([1, S, D], "float16"), ([3], "int64", W)], [([B, S, D], "float16")])
    assert cost_of(op) == Cost(bytes_read=S * D * F16, bytes_written=B * S * D * F16)


@settings(max_examples=30, deadline=None)
@given(shape=shapes, reps=st.lists(st.integers(1, 4), min_size=4, max_size=4), dtype=dtypes)
def test_tile_reads_input_bytes_and_writes_output_bytes(shape, reps, dtype):
    name, size = dtype
    reps = reps[: len(shape)]
    out = [s * r for s, r in zip(shape, reps, strict=True)]
    cost = cost_of(make_op("Tile", [(shape, name), ([len(shape)], "int64", W)], [(out, name)]))
    assert cost == Cost(bytes_read=math.prod(shape) * size, bytes_written=math.prod(out) * size)


@pytest.mark.parametrize(
    ("op_type", "out"), [("DepthToSpace", [N, 3, 2 * H, 2 * WD]), ("SpaceToDepth", [N, 48, H // 2, WD // 2])]
)
def test_depth_space_rearrangements_copy_the_tensor(op_type, out):
    inp = [N, 12, H, WD]
    cost = cost_of(make_op(op_type, [(inp, "float32")], [(out, "float32")], blocksize=2))
    assert cost == Cost(bytes_read=math.prod(inp) * F32, bytes_written=math.prod(out) * F32)
    assert math.prod(inp) == math.prod(out)


def test_trilu_is_a_masked_copy():
    op = make_op("Trilu", [([B, S, S], "float32"), ([], "int64", W)], [([B, S, S], "float32")])
    assert cost_of(op) == Cost(bytes_read=B * S * S * F32, bytes_written=B * S * S * F32)


def test_reverse_sequence_reads_input_and_lengths():
    op = make_op("ReverseSequence", [([S, B, D], "float32"), ([B], "int64")], [([S, B, D], "float32")])
    assert cost_of(op) == Cost(bytes_read=S * B * D * F32 + B * I64, bytes_written=S * B * D * F32)


def test_layout_kinds_have_zero_flops():
    layout = (
        "Transpose",
        "Concat",
        "Split",
        "Slice",
        "Pad",
        "Expand",
        "Tile",
        "DepthToSpace",
        "SpaceToDepth",
        "Trilu",
        "ReverseSequence",
        "CenterCropPad",
    )
    for op_type in layout:
        assert REGISTRY.lookup("", op_type).kind == RuleKind.LAYOUT


# --- Resize / Upsample --------------------------------------------------------------------------


def _resize(out, inp=(N, C, H, WD), opset=17, **attrs):
    config = [([0], "float32"), ([4], "float32", W)]  # roi (empty), scales: config inputs
    return make_op("Resize", [(list(inp), "float32"), *config], [(list(out), "float32")], opset=opset, **attrs)


def test_resize_nearest_is_free_arithmetic():
    out = (N, C, 2 * H, 2 * WD)
    cost = cost_of(_resize(out))
    assert cost == Cost(bytes_read=N * C * H * WD * F32, bytes_written=math.prod(out) * F32)


def test_resize_bilinear_on_nchw_is_seven_flops_per_output_element():
    out = (N, C, 2 * H, 2 * WD)
    d = 2  # H and W are resized
    cost = cost_of(_resize(out, mode="linear"))
    assert cost.flops == math.prod(out) * (2 * 2**d - 1) == math.prod(out) * 7
    assert cost.bytes_read == N * C * H * WD * F32  # scales (a weight) is config: not read, not a param
    assert cost.params == 0


def test_resize_linear_counts_only_resized_axes():
    out = (N, C, H, 3 * WD)  # only W changes: d = 1, linear interpolation: 2 mul + 1 add
    assert cost_of(_resize(out, mode="linear")).flops == math.prod(out) * 3


def test_resize_cubic_blends_four_taps_per_axis():
    out = (N, C, 2 * H, 2 * WD)
    assert cost_of(_resize(out, mode="cubic")).flops == math.prod(out) * (2 * 4**2 - 1)


def test_resize_trilinear_volume():
    inp, out = (N, C, 4, H, WD), (N, C, 8, 2 * H, 2 * WD)
    op = make_op(
        "Resize", [(list(inp), "float16"), None, None, ([5], "int64", W)], [(list(out), "float16")], mode="linear"
    )
    assert cost_of(op) == Cost(
        flops=math.prod(out) * (2 * 2**3 - 1), bytes_read=math.prod(inp) * F16, bytes_written=math.prod(out) * F16
    )


def test_resize_with_nothing_resized_is_a_copy():
    assert cost_of(_resize((N, C, H, WD), mode="linear")).flops == 0


def test_resize_antialiased_downscale_widens_the_filter():
    out = (N, C, H // 2, WD // 4)  # scales 1/2 and 1/4
    linear = cost_of(_resize(out, opset=18, mode="linear", antialias=1)).flops
    taps = (2 * 2) * (2 * 4)  # 2·⌈1/s⌉ per axis
    assert linear == math.prod(out) * (2 * taps - 1)
    cubic = cost_of(_resize(out, opset=18, mode="cubic", antialias=1)).flops
    taps = (2 * 4) * (2 * 8)  # 2·⌈2/s⌉ per axis
    assert cubic == math.prod(out) * (2 * taps - 1)
    upscale = (N, C, 2 * H, 2 * WD)  # antialias changes nothing when upscaling
    assert cost_of(_resize(upscale, opset=18, mode="linear", antialias=1)).flops == math.prod(upscale) * 7


@settings(max_examples=50, deadline=None)
@given(
    inp=st.lists(st.integers(1, 8), min_size=1, max_size=5),
    data=st.data(),
    mode=st.sampled_from(["nearest", "linear", "cubic"]),
)
def test_resize_flops_follow_the_tap_formula(inp, data, mode):
    out = [data.draw(st.integers(1, 16)) for _ in inp]
    d = sum(i != o for i, o in zip(inp, out, strict=True))
    taps = {"nearest": 0, "linear": 2**d, "cubic": 4**d}[mode]
    per_output = 2 * taps - 1 if taps and d else 0
    cost = cost_of(
        make_op("Resize", [(inp, "float32"), None, None, ([len(inp)], "int64", W)], [(out, "float32")], mode=mode)
    )
    assert cost == Cost(
        flops=math.prod(out) * per_output, bytes_read=math.prod(inp) * F32, bytes_written=math.prod(out) * F32
    )


def test_upsample_linear_matches_resize():
    out = (N, C, 2 * H, 2 * WD)
    op = make_op(
        "Upsample", [([N, C, H, WD], "float32"), ([4], "float32", W)], [(list(out), "float32")], opset=9, mode="linear"
    )
    assert cost_of(op) == Cost(
        flops=math.prod(out) * 7, bytes_read=N * C * H * WD * F32, bytes_written=math.prod(out) * F32
    )


# --- documentation ------------------------------------------------------------------------------


def test_every_movement_rule_documents_formula_and_bytes():
    entries = [e for e in REGISTRY.all_rules() if e.fn.__module__ == "onnxroof.rules.movement"]
    assert len(entries) >= 20
    for entry in entries:
        assert "Formula:" in entry.doc and "Bytes:" in entry.doc, entry.op_type
