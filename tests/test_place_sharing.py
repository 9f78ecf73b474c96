"""The unfused view places each distinct node once (:func:`onnxroof.analysis.analyze.shared_rows`): nodes of one
cost signature holding one NodeCost share their figures. Pinned by the rows a time model is given and by figures
equal, column for column, to those of every node placed on its own."""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest
from helpers import write_relu_chain
from hypothesis import given
from hypothesis import strategies as st

from onnxroof.analysis.analyze import place, shared_rows
from onnxroof.analysis.stages import bind, cost, fuse
from onnxroof.analysis.totals import figure_sum, repeated_sum
from onnxroof.analysis.whatif import WhatIf
from onnxroof.core.cost import Cost
from onnxroof.platform.lookup import load_platform
from onnxroof.platform.model import Platform
from onnxroof.roofline.place import ROOFLINE, Roofs, Times, Work

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


class _Counting:
    """The roofline, recording how many rows each call places."""

    name = "counting"

    def __init__(self) -> None:
        self.rows: list[int] = []

    def times(self, work: Work, roofs: Roofs, platform: Platform) -> Times:
        self.rows.append(len(work))
        return ROOFLINE.times(work, roofs, platform)


def _same_figures(shared: object, alone: object) -> None:
    for f in fields(shared):  # type: ignore[arg-type]
        left, right = getattr(shared, f.name), getattr(alone, f.name)
        if isinstance(left, np.ndarray) and left.dtype == np.float64:
            assert np.array_equal(left, right, equal_nan=True), f.name
        elif isinstance(left, np.ndarray):
            assert left.tolist() == right.tolist(), f.name
        else:
            assert left == right, f.name


def test_nodes_of_one_signature_are_placed_once(tmp_path: Path) -> None:
    path = write_relu_chain(tmp_path / "chain.onnx", 3)  # the first Relu reads the input; the other two share a row
    costed = cost(bind(str(path)))
    assert costed.firsts == (0, 1, 1, 3)
    placed, inverse = shared_rows(costed)
    assert placed.tolist() == [0, 1, 3]
    assert inverse is not None and inverse.tolist() == [0, 1, 1, 2]
    model = _Counting()
    analysis = place(fuse(costed, "none"), load_platform("xavier"), model)
    assert model.rows[0] == 3  # the nodes (the kernels follow)
    assert analysis.nodes[1].latency_s == analysis.nodes[2].latency_s > 0


def test_a_node_with_its_own_node_cost_is_placed_alone(tmp_path: Path) -> None:
    """A runtime writing the KV cache in place, or skip_compute, gives a node a NodeCost of its own: that node is
    placed on its own even though its signature's first node is another."""
    path = write_relu_chain(tmp_path / "chain.onnx", 3)  # the first Relu reads the input; the other two share a row
    costed = cost(bind(str(path)))
    node_costs = list(costed.node_costs)
    node_costs[2] = replace(node_costs[2], cost=replace(node_costs[2].cost, bytes_read=1.0))
    changed = replace(costed, node_costs=tuple(node_costs))
    placed, inverse = shared_rows(changed)
    assert placed.tolist() == [0, 1, 2, 3] and inverse is None
    analysis = place(fuse(changed, "none"), load_platform("xavier"))
    assert analysis.nodes[2].bytes_read == 1.0 and analysis.nodes[1].latency_s != analysis.nodes[2].latency_s


@pytest.mark.parametrize(
    ("sample", "dims", "platform", "runtime", "plan"),
    [
        ("tiny_transformer.onnx", {"batch": 1, "seq": 64}, "a100", "torch-cuda", WhatIf()),
        ("tiny_cnn.onnx", {"batch": 2}, "xavier", None, WhatIf.of(densities={"weight": 0.5}, skip_compute=True)),
        (
            "llm/genai_llama_int4/model.onnx",
            {
                "batch_size": 1,
                "sequence_length": 1,
                "total_sequence_length": 65,
                "past_sequence_length": 64,
                "kv_cache_dim": 64,
            },
            "h100",
            "ort-genai-cuda",
            WhatIf(),
        ),
    ],
)
def test_shared_figures_equal_each_nodes_own(
    sample: str, dims: dict[str, int], platform: str, runtime: str | None, plan: WhatIf
) -> None:
    """Every node's figures, placed once per distinct node, equal those of every node placed on its own (no
    signature known: ``firsts`` empty), under a runtime with efficiency factors, skip_compute with a density, and
    a runtime writing the KV cache in place."""
    target = load_platform(platform)
    costed = cost(bind(str(SAMPLES / sample), dims, None, plan), target)
    fused = fuse(costed, "none" if runtime is None else "tensorrt")
    shared = place(fused, target, None, runtime)
    alone = place(replace(fused, costed=replace(costed, firsts=())), target, None, runtime)
    assert len(shared_rows(costed)[0]) < len(costed.node_costs)  # some nodes share
    _same_figures(shared.nodes.figures, alone.nodes.figures)
    assert shared.nodes.precision.tolist() == alone.nodes.precision.tolist()
    assert shared.totals == alone.totals
    assert shared.op_types == alone.op_types


def test_repeated_sum_closed_form() -> None:
    assert repeated_sum([3, 5], [2, 4]) == 26 and isinstance(repeated_sum([3, 5], [2, 4]), int)
    assert repeated_sum([3, 5.0], [2, 4]) == 26.0 and isinstance(repeated_sum([3, 5.0], [2, 4]), float)
    assert repeated_sum([0.5], [2]) is None  # a fraction: the row-order sum decides
    assert repeated_sum([float("nan")], [1]) is None and repeated_sum([float("inf")], [1]) is None
    assert repeated_sum([2.0**52], [2]) is None  # 2**53 and beyond: a partial sum may round
    assert repeated_sum([2.0**52, 1.0], [1, 1]) == 2.0**52 + 1
    assert repeated_sum([], []) == 0


def test_figure_sum_reads_the_rows_only_when_the_repeated_sum_is_not_exact() -> None:
    """Whole figures: counted from the distinct costs, the rows never read; a fraction: summed over the rows in
    their order, as given."""
    calls: list[str] = []

    def rows(costs: list[Cost]):  # type: ignore[no-untyped-def]
        return lambda: calls.append("rows") or costs

    whole = [Cost(flops=3.0), Cost(flops=5.0)]
    assert figure_sum("flops", whole, [2, 4], rows([])) == 26.0 and calls == []
    half = [Cost(flops=0.1), Cost(flops=0.2), Cost(flops=0.1)]
    assert figure_sum("flops", half[:2], [2, 1], rows(half)) == 0.1 + 0.2 + 0.1 and calls == ["rows"]


_NUMBERS = st.one_of(
    st.integers(-(2**40), 2**40),
    st.integers(-(2**40), 2**40).map(float),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.sampled_from([float("nan"), float("inf"), 2.0**60, 0.5]),
)


@given(st.lists(st.tuples(_NUMBERS, st.integers(0, 50)), max_size=12), st.randoms())
def test_repeated_sum_is_the_sum_in_any_row_order(pairs: list[tuple[float, int]], rng: object) -> None:
    """Whenever it answers, it is Python's sum of the column in any order, to the bit and the type."""
    values, counts = [v for v, _ in pairs], [c for _, c in pairs]
    column = [v for v, c in pairs for _ in range(c)]
    rng.shuffle(column)  # type: ignore[attr-defined]
    got = repeated_sum(values, counts)
    if got is not None:
        expected = sum(column)
        assert got == expected and type(got) is type(expected)
