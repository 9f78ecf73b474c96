"""Peak activation memory by liveness over the topological order."""

from __future__ import annotations

from helpers import parse_model

import onnxroof


def test_chain_frees_dead_tensors() -> None:
    # x -> a -> b -> c: at most two [n] float tensors live at once (the input of a node and its output).
    n = 1000
    model = parse_model(f"""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[{n}] x) => (float[{n}] c) {{ a = Relu(x) b = Relu(a) c = Relu(b) }}""")
    assert onnxroof.analyze(model).totals.peak_activation_bytes == 2 * 4 * n


def test_branches_keep_inputs_alive() -> None:
    # x feeds a and the final Add: x, a, b live together at the Add -> three tensors.
    n = 256
    model = parse_model(f"""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[{n}] x) => (float[{n}] y) {{ a = Relu(x) b = Sigmoid(a) y = Add(x, b) }}""")
    assert onnxroof.analyze(model).totals.peak_activation_bytes == 3 * 4 * n


def test_views_alias_their_input() -> None:
    # Reshape's output shares x's buffer: x (aliased as r) and y live together = 2 tensors, not 3.
    model = parse_model("""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[4, 8] x) => (float[32] y) {
        s = Constant <value = int64[1] {32}> ()
        r = Reshape(x, s)
        y = Relu(r)
    }""")
    assert onnxroof.analyze(model).totals.peak_activation_bytes == 2 * 4 * 32


def test_an_output_nobody_reads_is_freed_at_once_after_its_node_runs() -> None:
    # x feeds a and d; d is read by nobody. At d's node x, a and d live together (3 tensors: the peak, at that
    # node); then x (its last use) and d (unread) are freed, so b's node holds a and b only (2 tensors).
    n = 64
    model = parse_model(f"""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[{n}] x) => (float[{n}] b) {{ a = Relu(x) d = Sigmoid(x) b = Relu(a) }}""")
    from onnxroof.analysis.liveness import peak_activation_memory

    peak = peak_activation_memory(onnxroof.bind(model).ir)
    assert peak.bytes == 3 * 4 * n and type(peak.bytes) is int  # float32 sizes are ints: summed as ints
    assert peak.node_id is not None and peak.node_id.startswith("1:")


def test_fractional_element_sizes_are_summed_as_floats() -> None:
    # int4 restates every float tensor at half a byte an element: two [n] tensors live at once, 0.5 · n bytes
    # each, summed as Python floats (the int path holds only int sizes).
    n = 1001
    model = parse_model(f"""
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[{n}] x) => (float[{n}] c) {{ a = Relu(x) b = Relu(a) c = Relu(b) }}""")
    from onnxroof.analysis.liveness import peak_activation_memory

    peak = peak_activation_memory(onnxroof.bind(model, whatif=onnxroof.WhatIf(precision="int4")).ir).bytes
    assert peak == 2 * 0.5 * n and type(peak) is float
