"""What the findings read off the result columns: the kernel each node runs in (``KernelsByNode``), the layout-chain
rule's bound on the chains' time, and member lists written as JSON text."""

from __future__ import annotations

import json
from pathlib import Path

from onnxroof import analyze
from onnxroof.analysis.finding_context import FindingContext
from onnxroof.analysis.findings import _layout_chains
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


def test_layout_chains_bound_is_never_below_the_chains_time() -> None:
    for sample, platform in (("tiny_transformer.onnx", "a100"), ("tiny_cnn.onnx", "xavier")):
        analysis = analyze(SAMPLES / sample, platform=platform, dims={"batch": 1, "seq": 16})
        kernels = analysis.kernels
        bound = sum(
            len(ids) * t
            for ids, t, copy in zip(kernels.node_ids, kernels.figures.latency_s.tolist(), kernels.layout, strict=True)
            if copy
        )
        assert bound >= analysis.totals.layout_latency_s * (1 - 1e-12)
        list(_layout_chains(FindingContext(analysis)))  # runs through either way


def test_tuples_of_text_are_written_as_the_encoder_writes_them() -> None:
    values = [("a", "b"), (), ("é\n",), ("a", "b"), (1, None), ((2, 3), None), ("x", 1)]
    assert json_texts(values) == [json.dumps(v, ensure_ascii=False) for v in values]
