"""What the findings read off the result columns: the kernel each node runs in (``KernelsByNode``), the layout-chain
rule's bound on the chains' time, and member lists written as JSON text."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from onnxroof import analyze
from onnxroof.analysis.finding_context import FindingContext
from onnxroof.report.data import json_texts

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def test_the_kernel_of_each_node_is_the_kernel_listing_it() -> None:
    """``Analysis.kernel_by_node`` (a ``KernelsByNode`` read off the member column) maps each member of each kernel
    to that kernel, in kernel then member order, and nothing else; the findings read the same mapping."""
    analysis = analyze(SAMPLES / "tiny_transformer.onnx", platform="a100", dims={"batch": 1, "seq": 16})
    by_node = analysis.kernel_by_node
    expected = [(node, kernel.id) for kernel in analysis.kernels for node in kernel.node_ids]
    assert [(node, by_node[node].id) for node in by_node] == expected
    assert len(by_node) == len(expected) > len(analysis.kernels)
    assert "no such node" not in by_node and by_node.get("no such node") is None
    assert analysis.kernel_of(expected[-1][0]).id == expected[-1][1]
    assert FindingContext(analysis).kernel_of is by_node


@pytest.mark.parametrize("case", ["layout_chain", "single_transpose", "tiny_transformer", "tiny_cnn"])
def test_the_layout_chain_bound_never_changes_the_findings(case: str, monkeypatch) -> None:
    """OR004 returns early when its bound on the chains' time is under its share: the findings are those of the
    full search, on a model where OR004 fires (a Transpose-Reshape-Transpose chain), one where it does not, and
    the two samples; and the bound is never below the copy kernels' time, which holds the chains'."""
    from test_findings import layout_chain, single_transpose

    import onnxroof.analysis.findings as findings

    models = {
        "layout_chain": (layout_chain(), "xavier", None),
        "single_transpose": (single_transpose(), "xavier", None),
        "tiny_transformer": (SAMPLES / "tiny_transformer.onnx", "a100", {"batch": 1, "seq": 16}),
        "tiny_cnn": (SAMPLES / "tiny_cnn.onnx", "xavier", {"batch": 1}),
    }
    model, platform, dims = models[case]
    analysis = analyze(model, platform=platform, dims=dims)
    bound = findings._copy_time_bound(analysis.kernels)
    with_bound = list(findings._layout_chains(FindingContext(analysis)))
    monkeypatch.setattr(findings, "_copy_time_bound", lambda kernels: math.inf)  # never returns early
    searched = list(findings._layout_chains(FindingContext(analysis)))
    assert with_bound == searched
    assert (case == "layout_chain") == bool(searched)
    assert bound >= analysis.totals.layout_latency_s * (1 - 1e-12)


def test_tuples_of_text_are_written_as_the_encoder_writes_them() -> None:
    values = [("a", "b"), (), ("é\n",), ("a", "b"), (1, None), ((2, 3), None), ("x", 1)]
    assert json_texts(values) == [json.dumps(v, ensure_ascii=False) for v in values]
