"""Whole-graph behaviour: weights, folding, control flow, and a Llama-shaped decoder."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import onnx
import pytest
from helpers import parse_model
from onnx import TensorProto, helper, numpy_helper

import onnxroof
from onnxroof.analysis.results import NodeResult
from onnxroof.analysis.stages import bind
from onnxroof.analysis.stages import cost as stage_cost
from onnxroof.core.states import NodeState
from onnxroof.roofline.kernels import KernelResult
from onnxroof.roofline.place import ROOFLINE

ROOT = Path(__file__).resolve().parents[1]


def _llama_module():
    spec = importlib.util.spec_from_file_location("llama_shaped", ROOT / "benchmarks" / "llama_shaped.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_shared_weight_counts_once() -> None:
    w = numpy_helper.from_array(np.zeros((8, 8), np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["a"]), helper.make_node("MatMul", ["a", "w"], ["y"])]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [w],
    )
    analysis = onnxroof.analyze(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert [n.params for n in analysis.nodes] == [64, 64]  # each node reads the weight...
    assert analysis.totals.params == 64  # ...but the model has it once
    assert analysis.totals.weight_bytes == 64 * 4


def test_weights_made_by_constant_subgraphs_are_parameters() -> None:
    # W = Transpose(ConstantOfShape([16, 4])): computable from constants alone, so a weight; nodes folded.
    model = parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 4] x) => (float[2, 16] y) {
        s = Constant <value = int64[2] {16, 4}> ()
        w0 = ConstantOfShape <value = float[1] {0.02}> (s)
        w = Transpose(w0)
        y = MatMul(x, w)
    }""")
    analysis = onnxroof.analyze(model)
    states = {n.op_type: n.state for n in analysis.nodes}
    assert states == {"Constant": "folded", "ConstantOfShape": "folded", "Transpose": "folded", "MatMul": "costed"}
    assert analysis.totals.params == 16 * 4  # the shape vector {16, 4} is not a parameter
    assert analysis.totals.latency_s == next(n for n in analysis.nodes if n.op_type == "MatMul").latency_s


def test_unsupported_op_is_listed_never_zero_silently() -> None:
    node = helper.make_node("Foo", ["x"], ["y"], domain="com.example")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    analysis = onnxroof.analyze(model)
    assert dict(analysis.unsupported) == {"com.example::Foo": ("0:Foo",)}
    assert analysis.totals.states["unsupported"] == 1
    with pytest.raises(onnxroof.OnnxroofError, match=r"com\.example::Foo"):
        onnxroof.analyze(model, strict=True)


CONTROL_FLOW = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[4, 8] x, bool c) => (float[4, 16] y, float[4, 8] z) {
    ws = Constant <value = int64[2] {8, 16}> ()
    w = ConstantOfShape <value = float[1] {0.5}> (ws)
    y = If (c) <
        then_branch = t () => (float[4, 16] a) { a = MatMul(x, w) },
        else_branch = e () => (float[4, 16] b) { r = Relu(x) b = MatMul(r, w) }
    >
    m = Constant <value = int64 {5}> ()
    go = Constant <value = bool {1}> ()
    z = Loop (m, go, x) <body = b (int64 i, bool ci, float[4, 8] xi) => (bool co, float[4, 8] xo) {
        co = Identity(ci)
        xo = Relu(xi)
    }>
}"""


def test_control_flow_bodies_are_costed() -> None:
    analysis = onnxroof.analyze(onnx.parser.parse_model(CONTROL_FLOW))
    by_op = {n.op_type: n for n in analysis.nodes}
    # If: the more expensive branch, Relu (32 FLOPs) + MatMul (2·4·8·16).
    assert by_op["If"].macs == 4 * 8 * 16
    assert by_op["If"].flops == 2 * 4 * 8 * 16 + 4 * 8
    assert "else_branch" in by_op["If"].note
    # Loop: 5 iterations of Relu over [4, 8]; one launch per body kernel per iteration.
    assert by_op["Loop"].flops == 5 * 4 * 8
    assert by_op["Loop"].t_overhead_s == pytest.approx(5 * analysis.platform.launch_overhead_s)
    assert analysis.totals.params == 8 * 16  # the weight read inside the branches counts once


def test_bodies_reading_the_enclosing_scope_are_edges_of_the_lazily_built_graph() -> None:
    analysis = onnxroof.analyze(onnx.parser.parse_model(CONTROL_FLOW))
    ids = {n.op_type: n.id for n in analysis.nodes}
    assert "graph" not in vars(analysis.ir)  # the analysis needs no networkx graph: built only when asked for
    assert analysis.graph.edges[ids["ConstantOfShape"], ids["If"]]["tensors"] == ["w", "w"]  # both branches read w
    assert "graph" in vars(analysis.ir)
    assert ids["If"] in analysis.index.consumers["w"]
    assert ids["If"] not in analysis.index.consumers["x"]  # a graph input: no producer, no edge
    assert analysis.op(ids["If"]).op_type == "If" and analysis.op("99:nothing") is None


def test_llama_shaped_decoder_with_gqa_and_rotary(tmp_path: Path) -> None:
    llama = _llama_module()
    config = {"layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "intermediate": 176, "vocab": 100}
    path = llama.build_llama_shaped(tmp_path / "llama.onnx", **config, dtype=TensorProto.FLOAT)
    batch, seq = 2, 8
    analysis = onnxroof.analyze(path, dims={"batch": batch, "seq": seq})
    assert analysis.totals.states["unsupported"] == 0
    assert analysis.totals.states["unknown_shape"] == 0
    # Parameters: the architecture's formula, plus at most the float scalar constants of the exported
    # expressions (eps, exponents, 1/sqrt(d)) that run-time nodes read. The rotary cos/sin tables (buffers in
    # PyTorch) do not count: once seq is bound the positions are static, so Gather(table, positions) is
    # folded at load time and no node that runs reads the tables.
    model = onnx.load(path, load_external_data=False)
    scalars = sum(
        1
        for n in model.graph.node
        if n.op_type == "Constant"
        and n.attribute[0].t.data_type == TensorProto.FLOAT
        and math.prod(n.attribute[0].t.dims) == 1
    )
    scalars += sum(1 for t in model.graph.initializer if t.data_type == TensorProto.FLOAT and math.prod(t.dims) == 1)
    expected = llama.expected_parameter_count(**config)
    assert expected <= analysis.totals.params <= expected + scalars
    gathers = [n for n in analysis.nodes if n.op_type == "Gather" and n.state == "folded"]
    assert gathers, "rotary table lookups at static positions are folded"
    # MatMul MACs: q, o projections h·h; k, v h·(kv·d); MLP 3·h·inter; attention 2·heads·s·s·d; lm_head h·vocab.
    h, d, inter, vocab = config["hidden"], config["hidden"] // config["heads"], config["intermediate"], config["vocab"]
    tokens = batch * seq
    per_layer = (
        tokens * (2 * h * h + 2 * h * config["kv_heads"] * d + 3 * h * inter)
        + 2 * batch * config["heads"] * seq * seq * d
    )
    matmul_macs = sum(n.macs for n in analysis.nodes if n.op_type == "MatMul")
    assert matmul_macs == config["layers"] * per_layer + tokens * h * vocab


def test_nodes_out_of_order_fail_the_checker_naming_the_node() -> None:
    """ONNX requires topological order; the checker refuses other files, naming the node."""
    nodes = [
        helper.make_node("Relu", ["a"], ["b"], name="second"),
        helper.make_node("Relu", ["x"], ["a"], name="first"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, [4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(onnxroof.OnnxroofError, match=r"topologically sorted.*second"):
        onnxroof.analyze(model)


def test_analysis_restores_the_garbage_collector_state() -> None:
    import gc

    was = gc.isenabled()
    try:
        for state in (True, False):
            (gc.enable if state else gc.disable)()
            onnxroof.analyze("samples/tiny_cnn.onnx", dims={"batch": 1})
            assert gc.isenabled() is state
    finally:
        (gc.enable if was else gc.disable)()


def test_op_type_time_is_the_time_of_the_kernels_anchored_on_that_type() -> None:
    """time(type) = Σ latency of the kernels whose first node has that type; the rows add up to the kernels."""
    analysis = onnxroof.analyze(ROOT / "samples" / "tiny_cnn.onnx", "xavier", dims={"batch": 1})
    type_of = {n.id: n.op_type for n in analysis.nodes}
    expected: dict[str, float] = {}
    for kernel in analysis.kernels:
        anchor = type_of[kernel.node_ids[0]]
        expected[anchor] = expected.get(anchor, 0.0) + kernel.latency_s
    rows = {row.op_type: row for row in analysis.op_types}
    for op_type, row in rows.items():
        assert row.latency_s == pytest.approx(expected.get(op_type, 0.0), rel=1e-12, abs=0), op_type
    # BatchNormalization is folded into its Conv: its FLOPs stay in the row, its time goes to Conv
    assert rows["BatchNormalization"].flops > 0 and rows["BatchNormalization"].latency_s == 0
    assert sum(r.latency_s for r in rows.values()) == pytest.approx(sum(k.latency_s for k in analysis.kernels))


def test_placed_columns_follow_the_roofline_formula_row_by_row() -> None:
    # placement is vectorized over the kernels' and nodes' columns: each row must still be the plain roofline,
    # t = max(F / P, B / W) + launch (xavier: no cache levels, no efficiency figures), computed here in Python
    sample = Path(__file__).parent.parent / "samples" / "tiny_transformer.onnx"
    analysis = onnxroof.analyze(sample, "xavier", dims={"batch": 1, "seq": 16}, time_model=ROOFLINE)
    platform = analysis.platform
    assert len(analysis.kernels) > 1
    for row in (*analysis.kernels, *analysis.nodes):
        runs = not isinstance(row, NodeResult) or row.state == "costed"
        if not runs:
            assert row.latency_s == 0.0 and row.bound == "none" and row.energy_j is None
            continue
        peak = platform.peak(row.precision)
        launches = 1 if isinstance(row, KernelResult) else row.t_overhead_s / platform.launch_overhead_s
        expected = max(row.flops / peak, row.bytes / platform.roof_bandwidth) + platform.launch_overhead_s * launches
        assert row.latency_s == pytest.approx(expected, rel=1e-12)
        assert row.peak_flops == peak and row.ridge == peak / platform.roof_bandwidth
        compute = row.flops / peak >= row.bytes / platform.roof_bandwidth and row.flops > 0
        assert row.bound == ("compute" if compute else "memory")


def test_results_are_light_views_of_columns() -> None:
    analysis = onnxroof.analyze(Path(__file__).parent.parent / "samples" / "tiny_cnn.onnx", dims={"batch": 1})
    first, again = analysis.nodes[0], analysis.nodes[0]
    assert first == again and first is not again  # built on demand, equal by their fields
    assert list(first.to_dict()) == list(NodeResult.FIELDS)
    assert list(analysis.kernels[0].to_dict())[:2] == ["id", "pattern"]
    assert [n.id for n in analysis.nodes] == [op.id for op in analysis.ir.ops]
    assert analysis.nodes[-1] == list(analysis.nodes)[-1] and len(analysis.nodes[1:3]) == 2
    assert isinstance(analysis.nodes.figures.latency_s, np.ndarray)
    with pytest.raises(IndexError):
        analysis.nodes[len(analysis.nodes)]


def test_nodes_of_equal_costs_share_one_node_cost_but_int_figures_stay_ints() -> None:
    from onnxroof.core.states import RuleKind
    from onnxroof.costing.node import CostCache, _costed

    cache = CostCache()
    floats = _costed(RuleKind.COMPUTE, onnxroof.Cost(flops=4.0), cache)
    assert _costed(RuleKind.COMPUTE, onnxroof.Cost(flops=4.0), cache) is floats
    ints = _costed(RuleKind.COMPUTE, onnxroof.Cost(flops=4), cache)
    assert ints is not floats and type(ints.cost.flops) is int


def test_main_precision_is_where_the_most_time_computes_a_tie_going_to_the_greater_name():
    from dataclasses import replace

    analysis = onnxroof.analyze(ROOT / "samples" / "tiny_cnn.onnx", "xavier", {"batch": 1})

    def timed(*pairs: tuple[str, float]) -> onnxroof.Analysis:
        """The analysis with kernels of these precisions and times (the columns main_precision reads)."""
        precision = np.array([p for p, _ in pairs], dtype=object)
        latency = np.array([t for _, t in pairs], dtype=float)
        kernels = SimpleNamespace(precision=precision, figures=SimpleNamespace(latency_s=latency))
        return replace(analysis, kernels=kernels)  # type: ignore[arg-type]

    assert timed(("fp16", 1.0), ("fp32", 2.0)).main_precision == "fp32"
    assert timed(("int8", 1.0), ("fp16", 0.6), ("fp16", 0.6)).main_precision == "fp16"  # summed per precision
    assert timed(("fp32", 1.0), ("fp16", 1.0)).main_precision == "fp32"  # a tie: the greater name,
    assert timed(("fp16", 1.0), ("fp32", 1.0)).main_precision == "fp32"  # whatever the kernels' order
    assert timed().main_precision == analysis.platform.precisions()[0]
    assert replace(timed(), precision_override="int8").main_precision == "int8"


def test_nodes_of_one_signature_are_costed_once_and_share_their_node_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cost stage costs each distinct node signature once (costing.node.cost_signature): a chain of equal
    Relus shares one NodeCost; a Relu of another shape gets its own, with its own figures. A MatMul reading a
    weight has no signature (its weights are named), only one with its weights described (the rule's figures);
    a list attribute is keyed by its items (a Transpose of another perm differs), a tensor attribute not at all."""
    from helpers import make_op

    from onnxroof.costing.node import cost_signature

    relu = make_op("Relu", [([1, 16], "float32")], [([1, 16], "float32")])
    wider = make_op("Relu", [([1, 32], "float32")], [([1, 32], "float32")])
    weighted = make_op("MatMul", [([1, 16], "float32"), ([16, 4], "float32", "weight")], [([1, 4], "float32")])
    transpose = make_op("Transpose", [([1, 16], "float32")], [([16, 1], "float32")], perm=[1, 0])
    assert cost_signature(relu) == cost_signature(make_op("Relu", [([1, 16], "float32")], [([1, 16], "float32")]))
    assert cost_signature(relu) != cost_signature(wider)
    assert cost_signature(weighted) is None and cost_signature(weighted, weights=True) is not None
    other = make_op("MatMul", [([1, 16], "float32"), ([16, 4], "float32", "weight")], [([1, 4], "float32")])
    assert cost_signature(weighted, weights=True) == cost_signature(other, weights=True)
    flipped = make_op("Transpose", [([1, 16], "float32")], [([16, 1], "float32")], perm=[0, 1])
    assert cost_signature(transpose) is not None and cost_signature(transpose) != cost_signature(flipped)
    constant = make_op("Constant", [], [([2], "float32")], value=helper.make_tensor("v", 1, [2], [1.0, 2.0]))
    assert cost_signature(constant) is None

    text = """
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 16] x) => (float[1, 32] y) {
        a = Relu(x)
        b = Relu(a)
        c = Relu(b)
        y = Concat<axis = 1>(c, b)
    }
    """
    from onnxroof.analysis import stages

    called: list[str] = []
    real = stages.cost_node
    monkeypatch.setattr(stages, "cost_node", lambda op, *rest: called.append(op.op_type) or real(op, *rest))
    costed = onnxroof.cost(onnxroof.bind(parse_model(text)))
    assert called == ["Relu", "Relu", "Concat"]  # the first reads a graph input (another role); the third: the second's
    relus = costed.node_costs[:3]
    assert relus[0] is relus[1] is relus[2]
    assert relus[0].cost.flops == 16 and relus[0].cost.bytes_read == 64 and relus[0].cost.bytes_written == 64
    assert costed.node_costs[3].cost.bytes_written == 128  # the Concat: costed on its own


def test_top_kernels_rank_the_columns_as_the_views_would() -> None:
    """Analysis.top_kernels ranks the latency and id columns: the same kernels, in the same order, as sorting every
    kernel's view by (-latency, id)."""
    analysis = onnxroof.analyze(ROOT / "samples" / "tiny_transformer.onnx", "a100", {"batch": 2, "seq": 16})
    by_views = sorted(analysis.kernels, key=lambda k: (-k.latency_s, k.id))
    for count in (1, 5, len(by_views), len(by_views) + 3):
        assert list(analysis.top_kernels(count)) == by_views[:count]
    assert len({k.latency_s for k in by_views}) < len(by_views)  # ties present: the id decides between them


def test_equal_unsupported_nodes_are_each_listed() -> None:
    """Two unknown ops on constants share a cost signature, but an unsupported node's cost is never shared by the
    cost stage's rows (it gathers the unsupported ops from the nodes whose cost is their own): both are listed."""
    text = (
        '<ir_version: 8, opset_import: ["" : 17, "my.dom" : 1]>\n'
        "g (float[2] x) => (float[2] y)\n<float[2] w = {1.0, 2.0}>\n"
        "{\na = my.dom.Mystery(w)\nb = my.dom.Mystery(w)\nc = Add(a, b)\ny = Add(c, x)\n}"
    )
    costed = stage_cost(bind(parse_model(text)))
    assert dict(costed.unsupported) == {"my.dom::Mystery": ("0:Mystery", "1:Mystery")}
    assert costed.node_costs[0].state == NodeState.UNSUPPORTED


def test_buffer_names_are_told_as_the_regex_tells_them_without_it_on_plain_names() -> None:
    """is_buffer_name agrees with BUFFER_NAME on ASCII names with and without its words, and on names whose
    case-blind match pairs other characters with ASCII letters (long s, dotless i: the regex always runs)."""
    from onnxroof.costing.node import BUFFER_NAME, is_buffer_name

    names = ["model.rotary_emb.inv_freq", "INV_FREQ", "a.sin", "A/COS_CACHED", "x_cos_cache", "cos", "xcos", "sinh"]
    names += ["model.layers.0.mlp.up_proj.weight", "cosine.weight", "co\u017f", "\u0131nv_freq", "", "sin_cached.x"]
    told = [is_buffer_name(name) for name in names]
    assert told == [BUFFER_NAME.search(name) is not None for name in names]
    assert told == [True, True, True, True, True, True, False, False, False, False, True, True, False, False]
