"""Hostile input on the newer surfaces: runtime profiles, ``genai_config.json``, ``--shape``, the row filters,
``llm``'s targets and quantization, ``inspect``, the ``gpu`` time model and control-flow bodies.

The promise each test holds: bad input is one stderr line naming the file, option or field, and exit 2 (never
exit 3, a traceback, a hang or a partial file); a side file ONNX Runtime does not read (``genai_config.json``)
is set aside with a line; figures stay finite, with no numpy warning, for zero and 2**40-sized dims.
"""

from __future__ import annotations

import json
import math
import shutil
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_cli import invoke

import onnxroof
from onnxroof.analysis.document import to_dict
from onnxroof.analysis.select import FilterError, RowFilter
from onnxroof.core.errors import MalformedNode, ModelError
from onnxroof.load.genai_config import read_genai_config

ROOT = Path(__file__).resolve().parent.parent
CNN = ROOT / "samples" / "tiny_cnn.onnx"
GENAI = ROOT / "samples" / "llm" / "genai_llama_int4"
RUNTIME = (ROOT / "runtimes" / "ort-cuda.toml").read_text()
LAUNCH = 'mode = "per-kernel"'


def _one_error_line(result, *fragments: str) -> str:
    """The single stderr line of a failed run, exit 2, holding every fragment."""
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert len(lines) == 1, lines
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


# ------------------------------------------------------------------------------------------ runtime files
RUNTIME_CASES = {
    "unknown key": (RUNTIME + "\nbogus = 1\n", "kv_cache.bogus: unknown key"),
    "wrong type": (RUNTIME.replace(LAUNCH, "mode = 3"), "launch.mode: must be one of"),
    "negative launch": (
        RUNTIME.replace(LAUNCH, LAUNCH + '\nper_kernel_us = { value = -1, source = "x" }'),
        "launch.per_kernel_us: value must be a number ≥ 0",
    ),
    "NaN launch": (
        RUNTIME.replace(LAUNCH, LAUNCH + '\nper_kernel_us = { value = nan, source = "x" }'),
        "launch.per_kernel_us",
    ),
    "infinite run": (
        RUNTIME.replace(LAUNCH, LAUNCH + '\nper_run_us = { value = inf, source = "x" }'),
        "launch.per_run_us",
    ),
    "NaN efficiency": (RUNTIME + "\n[efficiency]\ngemm = { value = nan, source = 'x' }\n", "efficiency.gemm"),
    "huge efficiency": (RUNTIME + "\n[efficiency]\ngemm = { value = 1e300, source = 'x' }\n", "efficiency.gemm"),
    "efficiency as text": (RUNTIME + "\n[efficiency]\ngemm = 'fast'\n", "efficiency.gemm: must be a table"),
    "huge schema": (RUNTIME.replace("schema = 1", "schema = 1e400"), "schema: must be 1"),
    "not TOML": ("\x00\xff[[[", "invalid TOML"),
    "empty": ("", "schema: missing required key"),
    "arrays nested 100000 deep": ("x = " + "[" * 100_000 + "]" * 100_000, "invalid TOML: nested too deep"),
    "integer of 5000 digits": ("schema = " + "9" * 5000, "invalid TOML: Exceeds the limit (4300 digits)"),
}


@pytest.mark.parametrize("case", RUNTIME_CASES, ids=list(RUNTIME_CASES))
def test_a_bad_runtime_file_is_one_line_naming_file_and_key(case: str, tmp_path: Path) -> None:
    text, fragment = RUNTIME_CASES[case]
    path = tmp_path / "mine.toml"
    path.write_text(text)
    result = invoke("report", CNN, "-d", "batch=1", "-p", "a100", "--runtime", path)
    _one_error_line(result, str(path), fragment)


@pytest.mark.parametrize("kind", ["folder", "folder.toml", "missing", "outside, not TOML"])
def test_a_runtime_path_that_is_no_runtime_file_is_one_line(kind: str, tmp_path: Path) -> None:
    if kind.startswith("folder"):
        path = tmp_path / ("d.toml" if kind == "folder.toml" else "d")
        path.mkdir()
    elif kind == "missing":
        path = tmp_path / "nowhere" / "x.toml"
    else:  # a file in another folder whose text is not TOML (a passwd-like file)
        other = tmp_path / "elsewhere"
        other.mkdir()
        path = other / "passwd"
        path.write_text("root:x:0:0:root:/root:/bin/bash\n")
    result = invoke("report", CNN, "-d", "batch=1", "-p", "a100", "--runtime", path)
    _one_error_line(result, str(path))


def test_a_huge_finite_launch_time_is_accepted_and_stays_finite(tmp_path: Path) -> None:
    """1e308 µs is 1e302 s per launch: a silly figure, but a number; the totals stay finite JSON."""
    path = tmp_path / "slow.toml"
    path.write_text(RUNTIME.replace(LAUNCH, LAUNCH + '\nper_kernel_us = { value = 1e308, source = "assumed: x" }'))
    out = tmp_path / "out.json"
    result = invoke("report", CNN, "-d", "batch=1", "-p", "a100", "--runtime", path, "-f", "json", "-o", out)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(out.read_text())  # json.loads accepts NaN/Infinity; check them explicitly
    latency = doc["totals"]["latency_s"]
    assert math.isfinite(latency) and latency >= 1e302


# ------------------------------------------------------------------------------------------ genai_config
def _genai_copy(tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(GENAI, folder)
    (folder / "genai_config.json").write_text(text)
    return folder / "model.onnx"


def _config_with(**model_fields: object) -> str:
    doc = json.loads((GENAI / "genai_config.json").read_text())
    doc["model"].update(model_fields)
    return json.dumps(doc)


GENAI_CASES = {
    "context as text": (_config_with(context_length="512"), "model.context_length: must be a int"),
    "context as float": (_config_with(context_length=512.0), "model.context_length: must be a int"),
    "negative context": (_config_with(context_length=-5), "model.context_length: must be a positive integer"),
    "zero context": (_config_with(context_length=0), "model.context_length: must be a positive integer"),
    "context 10**30": (_config_with(context_length=10**30), "below 2**63"),
    "context of 5000 digits": (
        _config_with(context_length=512).replace('"context_length": 512', '"context_length": ' + "9" * 5000),
        "not a readable JSON file",
    ),
    "nested 100000 deep": ('{"model": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deep"),
    "model as a list": (json.dumps({"model": [1]}), "model: must be a JSON object"),
    "not JSON": ("\x00\x01{{{", "not a readable JSON file"),
}


@pytest.mark.parametrize("case", GENAI_CASES, ids=list(GENAI_CASES))
def test_a_malformed_genai_config_is_a_model_error_naming_the_field(case: str, tmp_path: Path) -> None:
    text, fragment = GENAI_CASES[case]
    model = _genai_copy(tmp_path, text)
    with pytest.raises(ModelError, match=r"genai_config\.json: ") as caught:
        read_genai_config(model)
    assert fragment in str(caught.value)
    assert len(str(caught.value)) < 300  # one readable line, not the 5000 digits


@pytest.mark.parametrize("case", ["context of 5000 digits", "nested 100000 deep", "negative context"])
def test_llm_sets_a_malformed_genai_config_aside_with_a_line(case: str, tmp_path: Path) -> None:
    model = _genai_copy(tmp_path, GENAI_CASES[case][0])
    result = invoke("llm", model, "-p", "a100", "--prompt", "8", "--generate", "4", "--max-tpot", "5")
    assert result.exit_code == 0, result.stderr
    assert "genai_config.json: " in result.stdout and "; ignored" in result.stdout


# ------------------------------------------------------------------------------------------ options
@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--shape", "x:99999999999x3"), "--shape x=...: the model has no input 'x'"),
        (("--shape", "image:99999999999x3"), "2 dims given, input 'image' has rank 4"),
        (("--shape", "image:9223372036854775808x3x64x64"), "below 2**63"),
        (("--shape", "image:-1x3x64x64"), "non-negative integer"),
        (("--shape", ",,,"), "--shape ',,,': expected"),
        (("-d", "batch=1", "--name", "(["), "--name: '([' is not a regular expression"),
        (("-d", "batch=1", "--name", "a{99999999999}"), "repetition number is too large"),
        (
            ("-d", "batch=1", "--name", "(" * 100_000 + ")" * 100_000),
            "groups nested too deep",
        ),  # past any recursion limit (mypy, run in-process by test_types, raises it to 2**14)
        (("-d", "batch=1", "--top", "-1"), "--top"),
        (("-d", "batch=1", "--top", "0"), "--top"),
    ],
    ids=["no-input", "rank", "2^63", "negative", "commas", "regex", "repetition", "nesting", "top-1", "top0"],
)
def test_bad_report_options_are_one_line(args: tuple[str, ...], fragment: str, tmp_path: Path) -> None:
    out = tmp_path / "out.csv"
    result = invoke("report", CNN, *args, "-f", "csv", "--level", "kernels", "-o", out)
    line = _one_error_line(result, fragment)
    assert len(line) < 400
    assert not out.exists()


def test_a_huge_repetition_count_is_a_filter_error() -> None:
    """``re`` raises OverflowError (not re.error) past its repetition limit: still the option's error."""
    with pytest.raises(FilterError, match="--name"):
        RowFilter.of(name="x{4294967296}")


def _named_relu(tmp_path: Path, name: str) -> Path:
    """One Relu whose node name is ``name``."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name=name)], "g", [x], [y])
    path = tmp_path / "named.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("level", ["nodes", "kernels"])
def test_a_name_pattern_that_backtracks_without_end_is_stopped_with_one_line(
    level: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``(a+)+$`` against 40 a's and a '!' takes about 2**40 steps in ``re``: stopped at the limit, one line, exit 2."""
    import signal
    import time

    from onnxroof.analysis import select

    monkeypatch.setattr(select, "MATCH_LIMIT_S", 0.3)
    model, out = _named_relu(tmp_path, "a" * 40 + "!"), tmp_path / "out.csv"
    before = signal.getsignal(signal.SIGALRM)
    start = time.perf_counter()
    result = invoke("report", model, "--name", "(a+)+$", "-f", "csv", "--level", level, "-o", out)
    assert time.perf_counter() - start < 30
    _one_error_line(result, "--name: '(a+)+$' was still matching after 0.3 s", "simplify")
    assert not out.exists()
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_name_pattern_that_ends_leaves_no_timer_behind(tmp_path: Path) -> None:
    import signal

    model, out = _named_relu(tmp_path, "a" * 40 + "!"), tmp_path / "out.csv"
    before = signal.getsignal(signal.SIGALRM)
    result = invoke("report", model, "--name", "a+!$", "-f", "csv", "-o", out)
    assert result.exit_code == 0, result.stderr
    assert len(out.read_text().splitlines()) == 2  # the header and the one node
    assert signal.getsignal(signal.SIGALRM) is before
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


def test_a_batch_of_99999999999_images_is_costed_in_bounded_memory(tmp_path: Path) -> None:
    """FLOPs are affine in the batch: flops(B) = flops(1) + (B - 1)·(flops(2) - flops(1)), B = 99,999,999,999."""

    def flops(batch: int) -> float:
        out = tmp_path / f"b{batch}.json"
        result = invoke("report", CNN, "--shape", f"image:{batch}x3x64x64", "-p", "a100", "-f", "json", "-o", out)
        assert result.exit_code == 0, result.stderr
        return float(json.loads(out.read_text())["totals"]["flops"])

    one, two, big = flops(1), flops(2), 99_999_999_999
    assert flops(big) == pytest.approx(one + (big - 1) * (two - one), rel=1e-12)


LLM_ARGS = ("llm", GENAI / "model.onnx", "-p", "a100", "--prompt", "8", "--generate", "4")


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (("--max-tpot", "0"), "--max-tpot must be a positive time in ms"),
        (("--max-tpot", "-5"), "--max-tpot must be a positive time in ms"),
        (("--max-tpot", "nan"), "--max-tpot must be a positive time in ms"),
        (("--max-ttft", "0"), "--max-ttft must be a positive time in ms"),
        (("--max-ttft", "nan"), "--max-ttft must be a positive time in ms"),
        (("--weights", "int3"), "--weights 'int3': expected one of int4, int8"),
        (("--kv-precision", "int3"), "--kv-precision 'int3'"),
    ],
    ids=["tpot0", "tpot-neg", "tpot-nan", "ttft0", "ttft-nan", "int3", "kv-int3"],
)
def test_bad_llm_targets_are_one_line(args: tuple[str, ...], fragment: str) -> None:
    _one_error_line(invoke(*LLM_ARGS, *args), fragment)


# ------------------------------------------------------------------------------------------ inspect
@pytest.mark.parametrize("kind", ["folder", "empty", "garbage"])
def test_inspect_on_what_is_no_model_is_one_line(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    if kind == "folder":
        path.mkdir()
    else:
        path.write_bytes(b"" if kind == "empty" else bytes(np.random.default_rng(3).integers(0, 256, 3000, np.uint8)))
    _one_error_line(invoke("inspect", path), str(path))


# ------------------------------------------------------------------------------------------ gpu time model
def _batched_matmul() -> onnx.ModelProto:
    """Y = Relu(A[b, m, k] @ B[b, k, n]) in fp16, every dim symbolic (B an input: no weight bytes)."""
    half = TensorProto.FLOAT16
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "w"], ["t"]), helper.make_node("Relu", ["t"], ["y"])],
        "mm",
        [
            helper.make_tensor_value_info("a", half, ["b", "m", "k"]),
            helper.make_tensor_value_info("w", half, ["b", "k", "n"]),
        ],
        [helper.make_tensor_value_info("y", half, ["b", "m", "n"])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


BIG = 2**40
GPU_DIMS = {
    "all zero": {"b": 1, "m": 0, "k": 0, "n": 0},
    "k zero": {"b": 1, "m": 64, "k": 0, "n": 64},
    "batch zero": {"b": 0, "m": 64, "k": 64, "n": 64},
    "odd": {"b": 3, "m": 7, "k": 13, "n": 17},
    "m 2^40": {"b": 1, "m": BIG, "k": 1, "n": 1},
    "k 2^40": {"b": 1, "m": 1, "k": BIG, "n": 1},
    "all 2^40": {"b": BIG, "m": BIG, "k": BIG, "n": BIG},
}


@pytest.mark.parametrize("platform", ["a100", "t4"])
@pytest.mark.parametrize("case", GPU_DIMS, ids=list(GPU_DIMS))
def test_the_gpu_model_stays_finite_on_zero_and_huge_dims(case: str, platform: str, tmp_path: Path) -> None:
    path = tmp_path / "mm.onnx"
    onnx.save(_batched_matmul(), path)
    dims = GPU_DIMS[case]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an overflow or invalid-value RuntimeWarning fails the test
        analysis = onnxroof.analyze(path, platform, dims)
        json.dumps(to_dict(analysis), allow_nan=False)  # no NaN, no infinity anywhere in the document
    assert analysis.time_model == "gpu"
    latency = analysis.totals.latency_s
    assert math.isfinite(latency) and latency > 0
    flops = analysis.totals.flops
    assert flops == 2 * dims["b"] * dims["m"] * dims["k"] * dims["n"] + dims["b"] * dims["m"] * dims["n"]


def test_the_gpu_model_on_grouped_and_empty_convs_stays_finite(tmp_path: Path) -> None:
    half = TensorProto.FLOAT16
    for groups, dims in (
        (64, {"c": 64, "o": 64, "cg": 1}),
        (4, {"c": 64, "o": 64, "cg": 16}),
        (1, {"c": 0, "o": 0, "cg": 0}),
    ):
        graph = helper.make_graph(
            [helper.make_node("Conv", ["x", "wt"], ["y"], group=groups, pads=[1, 1, 1, 1])],
            "conv",
            [
                helper.make_tensor_value_info("x", half, [1, "c", 8, 8]),
                helper.make_tensor_value_info("wt", half, ["o", "cg", 3, 3]),
            ],
            [helper.make_tensor_value_info("y", half, [1, "o", 8, 8])],
        )
        path = tmp_path / f"conv{groups}.onnx"
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            analysis = onnxroof.analyze(path, "a100", dims)
            json.dumps(to_dict(analysis), allow_nan=False)
        # 2 FLOPs per MAC: out elements · (c/groups) · 9
        assert analysis.totals.flops == 2 * dims["o"] * 64 * dims["cg"] * 9
        assert math.isfinite(analysis.totals.latency_s)


# ------------------------------------------------------------------------------------------ nested bodies
def _leaf(tag: str) -> onnx.GraphProto:
    """x[1, 16] @ W[16, 16] → Relu → + x: 2·16·16 + 16 + 16 = 544 FLOPs."""
    weight = numpy_helper.from_array(np.ones((16, 16), np.float32), name=f"w_{tag}")
    nodes = [
        helper.make_node("MatMul", ["x", weight.name], [f"mm_{tag}"]),
        helper.make_node("Relu", [f"mm_{tag}"], [f"r_{tag}"]),
        helper.make_node("Add", [f"r_{tag}", "x"], [f"out_{tag}"]),
    ]
    out = helper.make_tensor_value_info(f"out_{tag}", TensorProto.FLOAT, [1, 16])
    return helper.make_graph(nodes, f"leaf_{tag}", [], [out], [weight])


def _in_if(then: onnx.GraphProto, other: onnx.GraphProto, tag: str) -> onnx.GraphProto:
    node = helper.make_node("If", ["cond"], [f"if_{tag}"], then_branch=then, else_branch=other)
    return helper.make_graph(
        [node], f"if_{tag}", [], [helper.make_tensor_value_info(f"if_{tag}", TensorProto.FLOAT, [1, 16])]
    )


def _in_loop(inner: onnx.GraphProto, tag: str) -> onnx.GraphProto:
    """Loop(trip = 4) whose body runs ``inner`` through an If on the loop's condition."""
    f, b = TensorProto.FLOAT, TensorProto.BOOL
    body = helper.make_graph(
        [
            helper.make_node("Identity", [f"c_in{tag}"], [f"c_out{tag}"]),
            helper.make_node("If", [f"c_in{tag}"], [f"v_out{tag}"], then_branch=inner, else_branch=inner),
        ],
        f"body_{tag}",
        [
            helper.make_tensor_value_info(f"i{tag}", TensorProto.INT64, []),
            helper.make_tensor_value_info(f"c_in{tag}", b, []),
            helper.make_tensor_value_info(f"v_in{tag}", f, [1, 16]),
        ],
        [helper.make_tensor_value_info(f"c_out{tag}", b, []), helper.make_tensor_value_info(f"v_out{tag}", f, [1, 16])],
    )
    node = helper.make_node("Loop", ["trip", "cond", "x"], [f"loop_{tag}"], body=body)
    return helper.make_graph([node], f"loop_{tag}", [], [helper.make_tensor_value_info(f"loop_{tag}", f, [1, 16])])


def nested_model() -> onnx.ModelProto:
    """If ⊃ If ⊃ Loop ⊃ If ⊃ If ⊃ leaf: control flow nested three deep under the top If (and deeper)."""
    inner = _in_if(_in_loop(_in_if(_leaf("0"), _leaf("e1"), "1"), "2"), _leaf("e3"), "3")
    top = helper.make_node("If", ["cond"], ["y"], then_branch=inner, else_branch=inner)
    graph = helper.make_graph(
        [top],
        "nested",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16]),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])],
        [numpy_helper.from_array(np.array(4, np.int64), name="trip")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize(
    "options",
    [
        ("-p", "xavier"),
        ("-p", "a100", "--time-model", "gpu"),
        ("-p", "a100", "--fusion", "ort-cpu", "--explain-fusion"),
        ("-p", "xeon-8380", "--fusion", "none"),
    ],
    ids=["xavier", "a100-gpu", "ort-cpu", "no-fusion"],
)
def test_bodies_nested_three_deep_are_costed_and_fused(options: tuple[str, ...], tmp_path: Path) -> None:
    path = tmp_path / "nested.onnx"
    onnx.save(nested_model(), path)
    out = tmp_path / "nested.json"
    result = invoke("report", path, *options, "-f", "json", "-o", out)
    assert result.exit_code == 0, result.stderr
    doc = json.loads(out.read_text())
    assert doc["totals"]["flops"] == 4 * 544  # the loop's 4 trips of the leaf; an If costs one branch


def test_onnx_runtime_runs_the_nested_model(tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    path = tmp_path / "nested.onnx"
    onnx.save(nested_model(), path)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {"x": np.zeros((1, 16), np.float32), "cond": np.array(True)})
    assert y.shape == (1, 16)


def test_embed_layer_norm_with_a_rank_zero_table_is_malformed() -> None:
    """fuzz_campaign seed 3 mutant 657: a position table declared with dims [] crashed with IndexError."""
    from helpers import W, cost_of, make_op

    op = make_op(
        "EmbedLayerNormalization",
        [
            ([1, 8], "int64"),
            ([1, 8], "int64"),
            ([100, 32], "float32", W),
            ([], "float32", W),
            None,
            ([32], "float32", W),
            ([32], "float32", W),
        ],
        [([1, 8, 32], "float32"), ([1], "int32")],
        domain="com.microsoft",
    )
    with pytest.raises(MalformedNode, match="embedding table 'in3' has rank 0"):
        cost_of(op)


def test_a_baseline_nested_too_deep_is_one_line(tmp_path: Path) -> None:
    base = tmp_path / "base.json"
    base.write_text("[" * 100_000 + "]" * 100_000)
    new = tmp_path / "new.json"
    assert invoke("report", CNN, "-d", "batch=1", "-f", "json", "-o", new).exit_code == 0
    _one_error_line(invoke("diff", base, new), str(base), "not JSON: nested too deep")


def test_a_kernel_of_2_63_is_refused_before_onnx_shape_inference_can_abort(tmp_path: Path) -> None:
    """fuzz_campaign seed 11 mutant 366: Conv(kernel_shape = 2**63 - 1) → Slice aborted the process inside
    onnx's C++ shape inference (a negative dim reaching a clamp); now one line naming node and attribute."""
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["x", "w"], ["c"], name="wide", kernel_shape=[2**63 - 1], strides=[128]),
            helper.make_node("Slice", ["c", "st", "en", "ax"], ["y"]),
        ],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 100]),
            helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 1, 3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([v], np.int64), n) for v, n in ((0, "st"), (2, "en"), (2, "ax"))],
    )
    path = tmp_path / "wide.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    _one_error_line(
        invoke("report", path, "-f", "json"), "node 'wide' (Conv): attribute 'kernel_shape' holds 9223372036854775807"
    )
