"""What the cost and fuse stages compute once and share, and what the function matcher does not try: each pinned
by the work it saves (calls counted) and by results equal to those computed node by node."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import parse_model

import onnxroof.costing.node as costing_node
import onnxroof.fusion.match as match
from onnxroof.analysis import stages
from onnxroof.analysis.stages import bind, cost, fuse, read
from onnxroof.fusion.descriptor import describe
from onnxroof.fusion.patterns import RMSNORM

SAMPLES = Path(__file__).resolve().parent.parent / "samples"

_RMS = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 64] x, float[2, 64] w) => (float[2, 64] y, float[2, 1] mq, float[2, 64] d)
<float two = {2.0}, float eps = {1e-5}, float[64] gamma = {GAMMA}>
{
    p = Pow(x, two)
    v = ReduceMean<axes=[-1]>(p)
    e = Add(v, eps)
    s = Sqrt(e)
    r = Reciprocal(s)
    n = Mul(x, r)
    y = Mul(n, gamma)
    q = Mul(x, w)
    mq = ReduceMean<axes=[-1]>(q)
    d = Div(x, w)
}
""".replace("GAMMA", ",".join(["1.0"] * 64))
"""An RMSNorm written with a Reciprocal (the second RMSNorm variant), a Mul of two different inputs read by a
ReduceMean (as a norm's square would be) and a Div (so that the first variant, which divides, is tried too)."""


def test_only_the_variants_the_graph_can_fill_are_compiled() -> None:
    """RMSNorm's two variants end ``n = Div(xf, s)`` and ``r = Reciprocal(s) | Div(c, s); n = Mul(xf, r)``: a graph
    without Div keeps the second alone; with both, the second shares the first five steps (Cast? Pow ReduceMean
    Add Sqrt), so a failure there from one start is a failure of both."""
    no_div = frozenset({"Cast", "Pow", "ReduceMean", "Add", "Sqrt", "Reciprocal", "Mul"})
    (plan,) = match._plans([RMSNORM], no_div)
    assert [len(steps) for steps in plan.variants] == [9]
    assert plan.prefix == ((0,) * 9,)
    (both,) = match._plans([RMSNORM], no_div | {"Div"})
    assert [len(steps) for steps in both.variants] == [8, 9]
    assert both.prefix == ((0,) * 8, (0, 0, 0, 0, 0, 1, 1, 1, 1))
    assert both.starts["Cast"] == ((0,), (0,)) and both.starts["Mul"] == ((1,), (1,))
    assert match._plans([RMSNORM], frozenset({"Cast", "Mul"})) == []  # no Pow's neighbours: nothing to try


def test_a_variant_failing_where_another_failed_is_not_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    """From a Mul of two different inputs, RMSNorm's ``Mul(xf, xf)`` fails at its first step for the first variant;
    the second shares that step, so it is not tried: one attempt per such Mul (the norm's own Muls are joined
    first or fail likewise), and the norm is still found from its Pow."""
    calls: list[tuple[int, str]] = []
    real = match._match_variant
    monkeypatch.setattr(
        match,
        "_match_variant",
        lambda steps, start, node, state: calls.append((start, node)) or real(steps, start, node, state),
    )
    fused = fuse(cost(bind(read(parse_model(_RMS)))), "tensorrt")
    assert fused.functions is not None and [m.pattern.name for m in fused.functions.matches] == ["rmsnorm"]
    assert [start for start, node in calls if node == "7:Mul"] == [1]  # q = Mul(x, w): the first variant only
    assert [start for start, node in calls if node == "0:Pow"] == [1, 1]  # both: they part after Sqrt


def test_equal_weights_run_the_rule_once_and_keep_their_names(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two MatMuls reading two weights of one shape: the rule runs once; each node keeps its own weight (by name)
    and the params it holds (16 x 4 = 64 each), and the three Constants of one dtype are costed once."""
    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 16] x) => (float[1, 4] a, float[1, 4] b, float[1] c)
    <float[16, 4] w1 = {W1}, float[16, 4] w2 = {W2}>
    {
        a = MatMul(x, w1)
        b = MatMul(x, w2)
        k1 = Constant<value = float[1] {1.0}>()
        k2 = Constant<value = float[1] {2.0}>()
        k3 = Constant<value = float[1] {3.0}>()
        k = Add(k1, k2)
        c = Add(k, k3)
    }
    """.replace("W1", ",".join(["0.5"] * 64)).replace("W2", ",".join(["0.25"] * 64))
    ran: list[str] = []
    real = costing_node.evaluate_with_weights
    monkeypatch.setattr(
        costing_node, "evaluate_with_weights", lambda op, entry: ran.append(op.op_type) or real(op, entry)
    )
    costed_nodes: list[str] = []
    real_node = stages.cost_node
    monkeypatch.setattr(stages, "cost_node", lambda op, *rest: costed_nodes.append(op.op_type) or real_node(op, *rest))
    costed = cost(bind(read(parse_model(text))))
    assert ran.count("MatMul") == 1
    first, second = costed.node_costs[:2]
    assert dict(first.weights) == {"w1": (64.0, 256.0)} and dict(second.weights) == {"w2": (64.0, 256.0)}
    assert first.cost == second.cost and first.cost.params == 64 and first.cost.flops == 2 * 16 * 4
    assert costed_nodes.count("Constant") == 1  # folded, one dtype: one row
    assert costed.firsts[:2] == (0, 1)  # their NodeCosts are their own (named weights)
    assert costed.firsts[2:5] == (2, 2, 2)


def test_kernels_alone_reading_weights_of_one_signature_are_described_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three MatMuls alone, two reading weights of one shape and one of another: the two are described once (the
    second renamed: its own weight), the third on its own; each descriptor names its node's weight."""
    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 16] x) => (float[1, 4] a, float[1, 4] b, float[1, 8] c)
    <float[16, 4] w1 = {W1}, float[16, 4] w2 = {W1}, float[16, 8] w3 = {W3}>
    {
        a = MatMul(x, w1)
        b = MatMul(x, w2)
        c = MatMul(x, w3)
    }
    """.replace("W1", ",".join(["0.5"] * 64)).replace("W3", ",".join(["0.25"] * 128))
    described: list[tuple[str, ...]] = []
    real = stages.describe
    monkeypatch.setattr(stages, "describe", lambda ops, *rest: described.append(rest[1]) or real(ops, *rest))
    fused = fuse(cost(bind(read(parse_model(text)))), "tensorrt")
    assert described == [("MatMul",), ("MatMul",)]
    assert [d.weights for d in fused.descriptors] == [("w1",), ("w2",), ("w3",)]
    first, second, third = fused.descriptors
    assert first.gemm == second.gemm != third.gemm and first.weight_inputs == second.weight_inputs == (1,)


_DECODER = ("llm/optimum_llama/model.onnx", {"batch_size": 1, "sequence_length": 16, "past_sequence_length": 8})


@pytest.mark.parametrize(
    ("sample", "dims"), [("tiny_transformer.onnx", {"batch": 2, "seq": 8}), ("tiny_cnn.onnx", {"batch": 2}), _DECODER]
)
def test_shared_kernel_descriptors_equal_each_kernels_own(sample: str, dims: dict[str, int]) -> None:
    """The fuse stage shares one descriptor among kernels of one node of one signature that name no weight, and
    renames the weights of the first one's for those that do (describe_like): every kernel's descriptor equals
    the one :func:`describe` builds from its own members (the decoder's layers repeat: some kernels share one)."""
    costed = cost(bind(read(SAMPLES / sample), dims))
    fused = fuse(costed, "tensorrt")
    ops = costed.bound.ir.ops
    by_id = {op.id: op for op in ops}
    shared = 0
    for kernel, types, descriptor in zip(fused.kernels, fused.op_types, fused.descriptors, strict=True):
        members = [by_id[n] for n in kernel.node_ids]
        assert descriptor == describe(members, kernel.patterns, types), kernel.id
        shared += sum(d is descriptor for d in fused.descriptors) > 1
    assert shared > 0 or sample != _DECODER[0]


def test_a_start_out_of_reach_of_the_first_required_step_is_not_tried(monkeypatch: pytest.MonkeyPatch) -> None:
    """Attention's steps after QKᵀ read only what the match wrote (s, d, m, f), so its Softmax is at most 4 hops
    from the start: a MatMul with no Softmax that near is not tried, QKᵀ is (and matches). RMSNorm's Div from its
    Sqrt also reads the norm's input: not known, none."""
    from onnxroof.fusion.patterns import ATTENTION

    assert match._ahead(ATTENTION.variants[0], 0) == (frozenset({"Softmax"}), 4)
    assert match._ahead(RMSNORM.variants[0], 4) is None and match._ahead(RMSNORM.variants[1], 4) is not None
    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 4, 8, 16] q, float[1, 4, 16, 8] k, float[1, 4, 8, 16] v, float[1, 1, 8, 8] mask, float[1, 4, 8, 16] x)
      => (float[1, 4, 8, 16] y, float[1, 4, 8, 16] z)
    <float scale = {4.0}, float[16, 16] w = {WEIGHT}>
    {
        s = MatMul(q, k)
        d = Div(s, scale)
        m = Add(d, mask)
        p = Softmax<axis = -1>(m)
        y = MatMul(p, v)
        h = MatMul(x, w)
        z = Relu(h)
    }
    """.replace("WEIGHT", ",".join(["0.5"] * 256))
    calls: list[str] = []
    real = match._match_variant
    monkeypatch.setattr(
        match, "_match_variant", lambda steps, start, node, state: calls.append(node) or real(steps, start, node, state)
    )
    fused = fuse(cost(bind(read(parse_model(text)))), "tensorrt")
    assert fused.functions is not None and [m.pattern.name for m in fused.functions.matches] == ["attention"]
    assert calls == ["0:MatMul"]  # QKᵀ only: PV was joined, the projection is out of reach


def test_orphans_are_not_looked_for_where_no_unit_can_be_of_their_type(monkeypatch: pytest.MonkeyPatch) -> None:
    """conv_bn explains BatchNormalization orphans: a graph without one (nor a pattern producing one) is not scanned
    for them; a graph with one is (its orphan explained)."""
    import onnxroof.fusion.edges as edges

    scanned: list[str] = []
    real = edges._explain_orphans
    monkeypatch.setattr(edges, "_explain_orphans", lambda p, state: scanned.append(p.name) or real(p, state))
    fuse(cost(bind(read(parse_model(_RMS)))), "tensorrt")
    assert scanned == []
    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 4, 8, 8] x) => (float[1, 4, 8, 8] y)
    <float[4] s = {1.0, 1.0, 1.0, 1.0}, float[4] b = {0.0, 0.0, 0.0, 0.0}>
    {
        r = Relu(x)
        y = BatchNormalization(r, s, b, b, s)
    }
    """
    fused = fuse(cost(bind(read(parse_model(text)))), "tensorrt")
    assert scanned == ["conv_bn"]
    assert [m.pattern for m in fused.misses] == ["conv_bn"]
