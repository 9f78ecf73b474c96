"""What the findings read off the result columns: the kernel each node runs in (``KernelOf``), the layout-chain
rule's bound on the chains' time, and member lists written as JSON text."""

from __future__ import annotations

import json
from pathlib import Path

from onnxroof import analyze
from onnxroof.analysis.finding_context import FindingContext, KernelOf
from onnxroof.analysis.findings import _layout_chains
from onnxroof.report.data import json_texts

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def test_kernel_of_is_the_analysis_kernel_by_node() -> None:
    analysis = analyze(SAMPLES / "tiny_transformer.onnx", platform="a100", dims={"batch": 1, "seq": 16})
    kernel_of = KernelOf(analysis.kernels)
    assert dict(kernel_of) == dict(analysis.kernel_by_node)
    assert len(kernel_of) == len(analysis.kernel_by_node) > 0
    first = next(iter(kernel_of))
    assert first in kernel_of and "no such node" not in kernel_of
    assert kernel_of.get("no such node") is None


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
