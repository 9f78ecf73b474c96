"""A small valid model whose every name tries to break out of HTML, SVG, JSON-in-script, DOT and mathtext.

Every injected script sets ``window.__pwned`` (or calls ``alert``): a report that escapes properly leaves
``window.__pwned`` undefined and fires no dialog. ``build_hostile(path)`` writes the model and returns it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

PWN = "window.__pwned=1"
SCRIPT = f"<script>{PWN}</script>"
CLOSE_SCRIPT = f"</script><script>{PWN}</script>"
IMG = f'"><img src=x onerror="{PWN};alert(1)">'
STYLE = f"</style><script>{PWN}</script><style>"
SVG_ONLOAD = f"<svg onload={PWN}>"
TEMPLATE = "{{ 7*7 }}{% raw %}"
DOT_BREAK = 'q" -> evil [label="pwned"]; x -> "\\'
NEWLINES = "line1\nline2\r\tline3 \u2028 $x^2$ \\N"
TITLE = f"</title>{SCRIPT}"
FILE_NAME = "<img src=x onerror=window.__pwned=1>.onnx"

#: Every hostile string, for tests that check none survives unescaped.
ALL = (SCRIPT, CLOSE_SCRIPT, IMG, STYLE, SVG_ONLOAD, TEMPLATE, DOT_BREAK, NEWLINES, TITLE)


def hostile_model() -> onnx.ModelProto:
    """Conv → Relu → (Reshape) → MatMul → Add → Softmax → Transpose, plus an unsupported custom op.

    Two nodes share a name and one has none (Netron then matches them by output tensor).
    """
    x = f"x{CLOSE_SCRIPT}"
    weight = numpy_helper.from_array(np.ones((8, 3, 3, 3), np.float32), name=f"w{IMG}")
    matrix = numpy_helper.from_array(np.ones((64, 32), np.float32), name=f"m{STYLE}")
    bias = numpy_helper.from_array(np.ones((32,), np.float32), name=f"b{SVG_ONLOAD}")
    shape = numpy_helper.from_array(np.array([1, 8, 64], np.int64), name=f"shape{TEMPLATE}")
    nodes = [
        helper.make_node(
            "Conv", [x, weight.name], [f"conv{SCRIPT}"], name=SCRIPT, pads=[1, 1, 1, 1], doc_string=CLOSE_SCRIPT
        ),
        helper.make_node("Relu", [f"conv{SCRIPT}"], [f"relu{IMG}"], name=IMG, doc_string=STYLE),
        helper.make_node("Reshape", [f"relu{IMG}", shape.name], [f"flat{STYLE}"], name=STYLE),
        helper.make_node("MatMul", [f"flat{STYLE}", matrix.name], [f"mm{DOT_BREAK}"], name=DOT_BREAK),
        helper.make_node("Add", [f"mm{DOT_BREAK}", bias.name], [f"add{NEWLINES}"], name=NEWLINES),
        helper.make_node("Softmax", [f"add{NEWLINES}"], [f"soft{TEMPLATE}"], name=TITLE, axis=-1),
        helper.make_node("Transpose", [f"soft{TEMPLATE}"], [f"t{SVG_ONLOAD}"], name=TITLE, perm=[0, 2, 1]),
        helper.make_node("Sigmoid", [f"t{SVG_ONLOAD}"], [f"y{TITLE}"], name=""),
        helper.make_node(f"Evil{SVG_ONLOAD}", [f"y{TITLE}"], [f"z{SCRIPT}"], name=SVG_ONLOAD, domain="com.evil"),
    ]
    graph = helper.make_graph(
        nodes,
        CLOSE_SCRIPT,
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 8, 8])],
        [
            helper.make_tensor_value_info(f"y{TITLE}", TensorProto.FLOAT, [1, 32, 8]),
            helper.make_tensor_value_info(f"z{SCRIPT}", TensorProto.FLOAT, [1, 32, 8]),
        ],
        [weight, matrix, bias, shape],
        doc_string=STYLE,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.evil", 1)],
        producer_name=IMG,
        producer_version=TEMPLATE,
        doc_string=SCRIPT,
    )
    model.ir_version = 8
    return model


def build_hostile(folder: Path) -> Path:
    """Write the hostile model into ``folder`` under a hostile file name; return its path."""
    path = Path(folder) / FILE_NAME
    onnx.save(hostile_model(), path)
    return path


def fuse_first_kernels(analysis, count: int = 2, pattern: str = "test_fused"):
    """The analysis with its first ``count`` kernels merged into one (as a fusion pass would group them).

    Renderers must draw kernels of several nodes whatever the fusion pass does today; the merged kernel's
    figures are the sums of its parts (its roofline place is the first part's: renderers do not re-derive it).
    """
    import dataclasses

    import numpy as np

    from onnxroof.core.cost import Cost
    from onnxroof.roofline.kernels import KernelTable

    table = analysis.kernels
    parts = table[:count]
    cost = Cost(*(sum(getattr(k, name) for k in parts) for name in ("flops", "macs", "bytes_read", "bytes_written")))
    cost = dataclasses.replace(cost, params=sum(k.params for k in parts))
    figures = table.figures
    summed = {
        name: np.concatenate([[sum(getattr(figures, name)[:count])], getattr(figures, name)[count:]])
        for name in ("t_compute_s", "t_memory_s", "t_overhead_s", "latency_s")
    }
    rest = slice(count - 1, None)  # the first part's row stands for the merged kernel, then the others
    kept = {
        f.name: getattr(figures, f.name)[rest] for f in dataclasses.fields(figures) if f.name not in ("time_model",)
    }
    merged = KernelTable(
        id=("kfused", *table.id[count:]),
        patterns=(tuple(pattern.split("+")), *table.patterns[count:]),
        node_ids=(tuple(n for k in parts for n in k.node_ids), *table.node_ids[count:]),
        op_types=(tuple(o for k in parts for o in k.op_types), *table.op_types[count:]),
        folded_nodes=(tuple(n for k in parts for n in k.folded_nodes), *table.folded_nodes[count:]),
        layout=(False, *table.layout[count:]),
        precision=table.precision[rest],
        costs=(cost, *table.costs[count:]),
        ideal_bytes=(sum(table.ideal_bytes[:count]), *table.ideal_bytes[count:]),
        ideal_latency_s=np.concatenate([[sum(table.ideal_latency_s[:count])], table.ideal_latency_s[count:]]),
        figures=dataclasses.replace(figures, **{**kept, **summed}),
    )
    return dataclasses.replace(analysis, kernels=merged)
