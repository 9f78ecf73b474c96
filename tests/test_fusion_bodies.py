"""Fusion through control flow (issue 23 item 3): the body an If takes, a Loop's and a Scan's body are fused by the
same pass as the main graph, the body's boundary being the kernel boundary (:mod:`onnxroof.fusion.bodies`)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import onnx
import onnx.parser
import pytest

import onnxroof
from onnxroof.studies.llm import LLMResult, llm

ROOT = Path(__file__).resolve().parent.parent
OPTIMUM = ROOT / "samples" / "llm" / "optimum_llama"

# x [4, 8] float32; w [8, 16]; b [16]. The If takes then_branch (c is the constant 1): MatMul → Add → Relu, one
# kernel under tensorrt (matmul_bias, then the activation), three unfused. The Loop runs 5 times a body of three
# pointwise ops over [4, 8] (Relu → Relu → Mul, one FLOP an element each): one kernel under tensorrt (pointwise
# fusion), three unfused; its cond output is an Identity (a view: no kernel).
BODIES = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 8] x) => (float[4, 16] y, float[4, 8] z) {
    c = Constant <value = bool {1}> ()
    ws = Constant <value = int64[2] {8, 16}> ()
    w = ConstantOfShape <value = float[1] {0.5}> (ws)
    bs = Constant <value = int64[1] {16}> ()
    b = ConstantOfShape <value = float[1] {0.25}> (bs)
    y = If (c) <
        then_branch = t () => (float[4, 16] a) { m = MatMul(x, w) s = Add(m, b) a = Relu(s) },
        else_branch = e () => (float[4, 16] d) { d = MatMul(x, w) }
    >
    n = Constant <value = int64 {5}> ()
    go = Constant <value = bool {1}> ()
    z = Loop (n, go, x) <body = lb (int64 i, bool ci, float[4, 8] xi) => (bool co, float[4, 8] xo) {
        co = Identity(ci)
        r = Relu(xi)
        q = Relu(r)
        xo = Mul(r, q)
    }>
}"""
F32 = 4
X_BYTES, W_BYTES, B_BYTES, Y_BYTES = 4 * 8 * F32, 8 * 16 * F32, 16 * F32, 4 * 16 * F32


@cache
def _bodies(fusion: str) -> onnxroof.Analysis:
    return onnxroof.analyze(onnx.parser.parse_model(BODIES), "a100", fusion=fusion)


def _kernels_inside(analysis: onnxroof.Analysis, op_type: str) -> list[onnxroof.KernelResult]:
    node = next(n for n in analysis.nodes if n.op_type == op_type)
    return [k for k in analysis.kernels if k.node_ids[0].startswith(f"{node.id}/")]


def test_an_if_branch_is_fused_like_a_graph() -> None:
    fused, unfused = _kernels_inside(_bodies("tensorrt"), "If"), _kernels_inside(_bodies("none"), "If")
    assert [k.op_types for k in fused] == [("MatMul", "Add", "Relu")]
    assert [k.op_types for k in unfused] == [("MatMul",), ("Add",), ("Relu",)]
    (kernel,) = fused
    # one kernel: reads x, w and b from outside the branch, writes the branch's output once
    assert kernel.bytes == X_BYTES + W_BYTES + B_BYTES + Y_BYTES
    assert kernel.flops == 2 * 4 * 8 * 16 + 4 * 16 + 4 * 16
    assert kernel.node_ids[0].endswith("/then_branch/0:MatMul")  # members named inside their branch


def test_a_loop_body_is_fused_and_run_its_trip_count() -> None:
    fused, unfused = _kernels_inside(_bodies("tensorrt"), "Loop"), _kernels_inside(_bodies("none"), "Loop")
    assert [k.op_types for k in fused] == [("Relu", "Relu", "Mul")]
    assert len(unfused) == 3
    (kernel,) = fused
    # 5 iterations, each reading xi and writing xo once: 5 · (128 + 128) B; 5 · 3 · 32 elementwise FLOPs
    assert kernel.bytes == 5 * (X_BYTES + X_BYTES)
    assert kernel.flops == 5 * 3 * 4 * 8
    platform = _bodies("tensorrt").platform
    assert kernel.t_overhead_s == pytest.approx(5 * platform.launch_overhead_s)  # a launch per iteration


def test_kernel_count_of_the_whole_graph() -> None:
    # tensorrt: If → 1, Loop → 1 (the constants are folded at load time); none: 3 + 3
    assert len(_bodies("tensorrt").kernels) == 2
    assert len(_bodies("none").kernels) == 6
    assert [k.id for k in _bodies("none").kernels] == [f"k{i}" for i in range(1, 7)]
    # the node view keeps each control-flow node's unfused cost: Σ of its body's nodes
    if_node = next(n for n in _bodies("tensorrt").nodes if n.op_type == "If")
    assert if_node.bytes == (X_BYTES + W_BYTES + Y_BYTES) + (Y_BYTES + B_BYTES + Y_BYTES) + 2 * Y_BYTES


@cache
def _optimum(name: str) -> LLMResult:
    return llm(OPTIMUM / name, "a100", prompt=2048, generate=256)


def test_merged_and_unmerged_optimum_decoders_agree() -> None:
    merged, plain = _optimum("decoder_model_merged.onnx"), _optimum("model.onnx")
    # time per token: the cache branch runs the same kernels as model.onnx (785 vs 506 µs before bodies were fused)
    assert merged.tpot_s == pytest.approx(plain.tpot_s, rel=0.02)
    # time to first token within 2% (the target; 1.94 vs 0.96 ms before bodies were fused); the merged
    # file's no-cache branch lacks the four Concat(past, new) of model.onnx, which concatenate a zero-length past
    # at the prefill, so merged is never the slower
    prefill = plain.analyses[0]
    assert len([k for k in prefill.kernels if k.op_types == ("Concat",)]) - 4 == len(
        [k for k in merged.analyses[0].kernels if k.op_types == ("Concat",)]
    )
    assert merged.ttft_s == pytest.approx(plain.ttft_s, rel=0.02)
    assert merged.ttft_s < plain.ttft_s


def test_every_view_of_a_report_shows_body_kernels(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from onnxroof.cli.commands import app

    path = tmp_path / "bodies.onnx"
    onnx.save(onnx.parser.parse_model(BODIES), path)
    runner = CliRunner()
    table = runner.invoke(app, ["report", str(path), "-p", "a100", "--fusion", "none"])
    assert table.exit_code == 0, table.output
    assert "If/then_branch/" in table.output  # the top-kernels table names a body kernel by its path
    for fmt in ("json", "csv", "html"):  # the CSV is a row per node (the If, the Loop): no kernel names
        out = runner.invoke(app, ["report", str(path), "-p", "a100", "--format", fmt])
        assert out.exit_code == 0 and ("/then_branch/0:MatMul" in out.stdout or fmt == "csv")
