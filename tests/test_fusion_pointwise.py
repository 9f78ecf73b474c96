"""Pointwise fusion's dependency bitsets stay bounded: renumbering the bits never changes a decision, and a chain
whose groups stay apart keeps a handful of bits however long it is (they grew with the number of groups)."""

from __future__ import annotations

import random

import pytest
from test_fusion import analysed, model

import onnxroof.fusion.blocks as blocks
import onnxroof.fusion.graph as graph
import onnxroof.fusion.pointwise as pointwise
from onnxroof.fusion.fuse import fuse

UNARY = ("Relu", "Sigmoid", "Exp", "Neg", "Tanh")
BINARY = ("Add", "Mul", "Sub")
SHAPES = {"a": "float[8,8]", "b": "float[64]"}


def random_graph(seed: int) -> str:
    """Elementwise ops over two element counts' worth of shapes, with views (Identity, Reshape), a layout copy
    (Transpose), a MatMul and several graph outputs: forks, joins and groups kept apart by their sizes."""
    rng = random.Random(seed)
    kinds = {"x": "a", "z": "a"}
    lines = []
    for i in range(rng.randint(8, 40)):
        out = f"t{i}"
        roll = rng.random()
        source = rng.choice(list(kinds))
        if roll < 0.35:
            lines.append(f"{out} = {rng.choice(UNARY)}({source})")
            kinds[out] = kinds[source]
        elif roll < 0.45:
            target = rng.choice("ab")
            lines.append(f"{out} = Reshape({source}, {'sa' if target == 'a' else 'sb'})")
            kinds[out] = target
        elif roll < 0.5:
            lines.append(f"{out} = Identity({source})")
            kinds[out] = kinds[source]
        elif roll < 0.58:
            source = rng.choice([n for n, k in kinds.items() if k == "a"])
            lines.append(f"{out} = MatMul({source}, W)" if roll < 0.54 else f"{out} = Transpose({source})")
            kinds[out] = "a"
        else:
            other = rng.choice([n for n, k in kinds.items() if k == kinds[source]])
            lines.append(f"{out} = {rng.choice(BINARY)}({source}, {other})")
            kinds[out] = kinds[source]
    made = [n for n in kinds if n.startswith("t")]
    outputs = [n for n in made if rng.random() < 0.2] or [made[-1]]
    weight = ",".join(["0.1"] * 64)
    inits = f"int64[2] sa = {{8, 8}}, int64[1] sb = {{64}}, float[8,8] W = {{{weight}}}"
    return model(
        "\n".join(lines),
        "float[8,8] x, float[8,8] z",
        ", ".join(f"{SHAPES[kinds[o]]} {o}" for o in outputs),
        inits,
    )


def fused(text: str, profile: str) -> tuple:
    ir, costs = analysed(text)
    result = fuse(ir, costs, profile)
    return tuple((k.node_ids, k.patterns, k.cost, k.ideal) for k in result.kernels), result.misses


@pytest.mark.parametrize("seed", range(40))
def test_renumbering_the_bits_changes_no_decision(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    text = random_graph(seed)
    for profile in ("tensorrt", "ort-cpu"):
        expected = fused(text, profile)
        with monkeypatch.context() as patched:
            patched.setattr(pointwise, "_SLACK", 0)  # renumber at every new group
            assert fused(text, profile) == expected


def test_a_chain_kept_apart_holds_few_bits(monkeypatch: pytest.MonkeyPatch) -> None:
    count = 1200  # Relu, Transpose in turn: 600 pointwise groups, none joining another
    lines = [f"t{i} = {'Relu' if i % 2 == 0 else 'Transpose'}({f't{i - 1}' if i else 'x'})" for i in range(count)]
    text = model("\n".join(lines), "float[1,16] x", f"float[1,16] t{count - 1}")
    most = 0
    new_bit = pointwise._Grouping._new_bit

    def spy(self: pointwise._Grouping) -> int:
        nonlocal most
        bit = new_bit(self)
        most = max(most, bit, *(mask.bit_length() for mask in self.dep.values()))
        return bit

    monkeypatch.setattr(pointwise._Grouping, "_new_bit", spy)
    ir, costs = analysed(text)
    result = fuse(ir, costs, "tensorrt")
    assert len(result.kernels) == count
    assert most <= 8 + pointwise._SLACK  # not one bit per group


@pytest.mark.parametrize("seed", range(40))
def test_runs_change_no_decision(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit taken into its producer's run fuses as it would have as a block of its own (the random graphs'
    kernels, patterns, costs and misses), and some graphs do have runs (else the comparison proves nothing)."""
    text = random_graph(seed)
    for profile in ("tensorrt", "ort-cpu"):
        expected = fused(text, profile)
        with monkeypatch.context() as patched:
            patched.setattr(blocks.Blocks, "_run_producers", lambda self, state, sizes, outputs: [-1] * len(sizes))
            assert fused(text, profile) == expected


def test_a_chain_is_one_run() -> None:
    """Relu → Neg → Abs → Relu over [1, 16]: one block of four units (one visit), one kernel of four nodes."""
    lines = ["a = Relu(x)", "b = Neg(a)", "c = Abs(b)", "y = Relu(c)"]
    ir, costs = analysed(model("\n".join(lines), "float[1,16] x", "float[1,16] y"))
    visits = []
    visit = pointwise._Grouping.visit

    def spy(self: pointwise._Grouping, b: int) -> None:
        visits.append(b)
        visit(self, b)

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(pointwise._Grouping, "visit", spy)
        result = fuse(ir, costs, "tensorrt")
    assert visits == [0]
    assert [len(k.node_ids) for k in result.kernels] == [4]


def test_random_graphs_have_runs() -> None:
    """The random graphs of :func:`test_runs_change_no_decision` take units into runs (a comparison with and
    without runs over graphs that have none could not fail), through both the columns (a node reading the one
    output of the node before) and the lookup one by one (any other producer)."""
    counted, by_lookup = 0, 0
    run_producers, run_of = blocks.Blocks._run_producers, blocks.Blocks._run_of

    def spy(self: blocks.Blocks, *args: object) -> list[int]:
        nonlocal counted
        found = run_producers(self, *args)  # type: ignore[arg-type]
        counted += sum(p >= 0 for p in found)
        return found

    def spy_of(self: blocks.Blocks, *args: object) -> int:
        nonlocal by_lookup
        found = run_of(self, *args)  # type: ignore[arg-type]
        by_lookup += found >= 0
        return found

    with pytest.MonkeyPatch.context() as patched:
        patched.setattr(blocks.Blocks, "_run_producers", spy)
        patched.setattr(blocks.Blocks, "_run_of", spy_of)
        for seed in range(40):
            fused(random_graph(seed), "tensorrt")
    assert counted >= 10
    assert 0 < by_lookup < counted


@pytest.mark.parametrize("seed", range(40))
def test_run_columns_agree_with_the_lookup(seed: int) -> None:
    """The run producers told from the columns (the node before) are those the lookup one by one finds for every
    pointwise unit alone (``_run_of``), and -1 for every other node."""
    ir, costs = analysed(random_graph(seed))
    state = graph.PassState(graph.FusionGraph(ir, costs))
    outputs = [op.outputs for op in ir.ops]
    sizes = blocks.alone_sizes(state, {}, outputs, {})
    made = object.__new__(blocks.Blocks)
    found = made._run_producers(state, sizes, outputs)
    assert found == [made._run_of(i, sizes, state) if size >= 0 else -1 for i, size in enumerate(sizes)]


def test_a_chain_makes_one_unit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A costed node's unit is made on first access (fusion.graph.Units): the four-node chain's run keeps its
    nodes as ids and merges them into the one unit its head made, and the kernel is the same."""
    lines = ["a = Relu(x)", "b = Neg(a)", "c = Abs(b)", "y = Relu(c)"]
    ir, costs = analysed(model("\n".join(lines), "float[1,16] x", "float[1,16] y"))
    made = []
    init = graph.Unit.__init__

    def spy(self: graph.Unit, *args: object) -> None:
        made.append(args[0])
        init(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(graph.Unit, "__init__", spy)
    result = fuse(ir, costs, "tensorrt")
    assert made == ["0:Relu"]
    assert [k.node_ids for k in result.kernels] == [("0:Relu", "1:Neg", "2:Abs", "3:Relu")]
    assert result.kernels[0].patterns == ("pointwise",)


def test_anchored_members_come_in_node_order_and_kernels_start_at_the_anchor() -> None:
    """Units.anchored() lists a unit at its anchor's position with its members' positions in node order, even when
    the anchor is not its first node; the kernel's node ids and positions put the anchor first, then the rest."""
    from onnxroof.fusion.fuse import _build_kernels

    text = "a = Relu(x)\nb = Relu(a)\ny = Relu(b)"
    ir, costs = analysed(model(text, "float[1,16] x", "float[1,16] y"))
    state = graph.PassState(graph.FusionGraph(ir, costs))
    middle = state.unit_of["1:Relu"]
    state.merge(middle, state.unit_of["2:Relu"], "p", False, None, "y")
    state.merge(middle, state.unit_of["0:Relu"], "p", False, None, "y")
    assert middle.nodes == ["1:Relu", "2:Relu", "0:Relu"] and middle.anchor == "1:Relu"
    assert state.unit_of.anchored() == [(1, middle, [0, 1, 2])]
    (kernel,), (at,) = _build_kernels(state)
    assert kernel.node_ids == ("1:Relu", "0:Relu", "2:Relu") and list(at) == [1, 0, 2]


def test_never_made_units_are_kernels_of_their_node() -> None:
    """Units.anchored(): a costed node whose unit nobody asked for is a kernel of that node alone, in node order
    (anchor position, unit, member positions)."""
    ir, costs = analysed(model("a = Relu(x)\ny = Transpose<perm=[1, 0]>(a)", "float[1,16] x", "float[16,1] y"))
    state = graph.PassState(graph.FusionGraph(ir, costs))
    assert state.unit_of.made("1:Transpose") is None
    assert state.unit_of.anchored() == [(0, None, [0]), (1, None, [1])]
    unit = state.unit_of["1:Transpose"]
    assert unit.nodes == ["1:Transpose"] and state.unit_of.made("1:Transpose") is unit
    assert state.unit_of.anchored() == [(0, None, [0]), (1, unit, [1])]


def test_merge_all_equals_merge_applied_in_turn() -> None:
    """PassState.merge_all(head, others, p, produces) leaves the head unit, the node -> unit map and the merged units
    as merge(head, other, p, False, produces, other.out) applied to each in turn: nodes, folded members, patterns
    (first appearance order), op type, output; an other given by node id is that node's never-made unit."""
    text = "a = Relu(x)\nb = Relu(a)\nc = Relu(b)\nd = Relu(c)\ny = Relu(d)"
    ir, costs = analysed(model(text, "float[1,16] x", "float[1,16] y"))

    def prepared() -> tuple[graph.PassState, graph.Unit, list[graph.Unit | str]]:
        state = graph.PassState(graph.FusionGraph(ir, costs))
        head, second, fourth = state.unit_of["0:Relu"], state.unit_of["1:Relu"], state.unit_of["3:Relu"]
        head.patterns = ("edge",)
        second.patterns, second.folded = ("conv_bn", "edge"), ("1:Relu",)
        return state, head, [second, "2:Relu", fourth, "4:Relu"]

    together, head_a, others_a = prepared()
    together.merge_all(head_a, others_a, "pointwise", "Pointwise")
    in_turn, head_b, others_b = prepared()
    for other in others_b:
        unit = in_turn.unit_of[other] if isinstance(other, str) else other
        in_turn.merge(head_b, unit, "pointwise", False, "Pointwise", unit.out)

    def described(unit: graph.Unit) -> tuple[object, ...]:
        return (list(unit.nodes), tuple(unit.folded), unit.patterns, unit.op_type, unit.out, unit.function)

    assert described(head_a) == described(head_b)
    assert described(head_a) == (
        ["0:Relu", "1:Relu", "2:Relu", "3:Relu", "4:Relu"],
        ("1:Relu",),
        ("edge", "conv_bn", "pointwise"),
        "Pointwise",
        "y",
        False,
    )
    for op in ir.ops:
        assert together.unit_of[op.id] is head_a and in_turn.unit_of[op.id] is head_b
    assert [o.alive for o in others_a if not isinstance(o, str)] == [False, False]
