"""Transformer/LLM files as shipped: checker relaxation, contrib shape functions, dim expressions, past 0, If branch."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper

import onnxroof
from onnxroof.core.errors import DimsError, ModelError
from onnxroof.load.contrib_shapes import CONTRIB_SHAPES, MS, Arg, contrib_output_shapes
from onnxroof.load.dims import parse_dim_bindings, parse_dim_expression
from onnxroof.load.reader import load_model
from onnxroof.load.shapes import is_static

F = TensorProto.FLOAT


def _shape(loaded, name):
    return [d.dim_value for d in loaded.value_types[name].tensor_type.shape.dim]


def _model(nodes, inputs, outputs, inits=(), opsets=(("", 17),), ir=8):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets], ir_version=ir)


def _w(name, *dims):
    return helper.make_tensor(name, F, dims, [0.0] * int(__import__("math").prod(dims)))


# ------------------------------------------------------------------------------------------- checker


def test_default_domain_simplified_layer_norm_is_a_warning_and_shaped():
    nodes = [
        helper.make_node("SimplifiedLayerNormalization", ["x", "g"], ["y"], name="ln", axis=-1, epsilon=1e-5),
        helper.make_node("MatMul", ["y", "w"], ["z"], name="mm"),
    ]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", F, ["batch", 8, 16])],
        [helper.make_tensor_value_info("z", F, ["o1", "o2", "o3"])],
        [_w("g", 16), _w("w", 16, 4)],
        opsets=(("", 22),),
    )
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(model)
    loaded = load_model(model, {"batch": 2})
    assert any("SimplifiedLayerNormalization" in w and "'ln'" in w for w in loaded.warnings)
    assert _shape(loaded, "y") == [2, 8, 16] and _shape(loaded, "z") == [2, 8, 4]
    assert loaded.model.graph.node[0].domain == ""  # restored after the checker and inference


def test_structural_errors_still_exit_2():
    node = helper.make_node("Relu", ["missing"], ["y"])
    model = _model([node], [helper.make_tensor_value_info("x", F, [1])], [helper.make_tensor_value_info("y", F, [1])])
    with pytest.raises(ModelError, match="ONNX checker"):
        load_model(model)


def test_onnx_op_against_its_schema_stays_an_error():
    node = helper.make_node("Relu", ["x", "x"], ["y"])
    model = _model([node], [helper.make_tensor_value_info("x", F, [1])], [helper.make_tensor_value_info("y", F, [1])])
    with pytest.raises(ModelError):
        load_model(model)


def test_model_with_only_ai_onnx_ml_ops_loads():
    node = helper.make_node("Normalizer", ["x"], ["y"], domain="ai.onnx.ml", norm="L2")
    model = _model(
        [node],
        [helper.make_tensor_value_info("x", F, [2, 3])],
        [helper.make_tensor_value_info("y", F, [2, 3])],
        opsets=(("ai.onnx.ml", 3),),
    )
    loaded = load_model(model)
    assert loaded.opset == 0


# ------------------------------------------------------------------------------------------ contrib shapes


CASES = [
    (
        "GroupQueryAttention",
        [(1, 5, 64), (1, 5, 32), (1, 5, 32), (1, 2, 7, 16)],
        {"num_heads": 4, "kv_num_heads": 2},
        [(1, 5, 64), (1, 2, 12, 16), (1, 2, 12, 16)],
    ),
    (
        "MultiHeadAttention",
        [(1, 5, 64), (1, 5, 64), (1, 5, 64), None, None, None, (1, 4, 3, 16)],
        {"num_heads": 4},
        [(1, 5, 64), (1, 4, 8, 16), (1, 4, 8, 16)],
    ),
    ("Attention", [(2, 5, 64), (64, 192)], {"num_heads": 4}, [(2, 5, 64), (2, 2, 4, 5, 16)]),
    ("PackedAttention", [(9, 64), (64, 192)], {"num_heads": 4}, [(9, 64)]),
    ("PackedMultiHeadAttention", [(9, 4, 3, 16)], {"num_heads": 4}, [(9, 64)]),
    (
        "DecoderMaskedMultiHeadAttention",
        [(2, 1, 64), (2, 1, 64), (2, 1, 64), None, None, (2, 4, 32, 16), (2, 4, 32, 16)],
        {"num_heads": 4},
        [(2, 1, 64), (2, 4, 32, 16), (2, 4, 32, 16)],
    ),
    (
        "SparseAttention",
        [(1, 5, 128), None, None, (1, 2, 32, 16), (1, 2, 32, 16)],
        {"num_heads": 4, "kv_num_heads": 2},
        [(1, 5, 64), (1, 2, 32, 16), (1, 2, 32, 16)],
    ),
    ("EmbedLayerNormalization", [(2, 5), (2, 5), (100, 32)], {}, [(2, 5, 32), (2,), (2, 5, 32)]),
    ("SkipLayerNormalization", [(2, 5, 32)], {}, [(2, 5, 32), (2, 5, 1), (2, 5, 1), (2, 5, 32)]),
    ("SkipSimplifiedLayerNormalization", [(2, 5, 32)], {}, [(2, 5, 32), (2, 5, 1), (2, 5, 1), (2, 5, 32)]),
    ("RotaryEmbedding", [(1, 5, 64)], {}, [(1, 5, 64)]),
    ("MatMulNBits", [(1, 5, 64)], {"N": 96, "K": 64, "bits": 4, "block_size": 32}, [(1, 5, 96)]),
    ("MatMulBnb4", [(3, 64)], {"N": 8, "K": 64}, [(3, 8)]),
    ("GemmFastGelu", [(3, 64), (64, 8)], {}, [(3, 8)]),
    ("BiasSplitGelu", [(1, 16, 64)], {}, [(1, 16, 32)]),
    ("MoE", [(7, 64)], {}, [(7, 64)]),
    ("QMoE", [(7, 64)], {}, [(7, 64)]),
    ("BiasAdd", [(1, 16, 64)], {}, [(1, 16, 64)]),
    ("BiasGelu", [(1, 16, 64)], {}, [(1, 16, 64)]),
    ("FastGelu", [(1, 16, 64)], {}, [(1, 16, 64)]),
    ("QuickGelu", [(1, 16, 64)], {}, [(1, 16, 64)]),
]


@pytest.mark.parametrize(("op", "ins", "attrs", "expected"), CASES, ids=[c[0] for c in CASES])
def test_contrib_shape_functions(op, ins, attrs, expected):
    args = [Arg(shape, F) for shape in ins]
    outs = contrib_output_shapes(MS, op, args, attrs)
    assert [o[0] if o else None for o in outs] == expected


def test_gqa_total_sequence_length_value_and_gather_block_quantized():
    args = [Arg((1, 1, 64), F), Arg((1, 1, 32), F), Arg((1, 1, 32), F), Arg((1, 2, 0, 16), F)]
    args += [Arg((1, 2, 0, 16), F), Arg((1,), 6), Arg((), 6, __import__("numpy").array(9))]
    outs = contrib_output_shapes(MS, "GroupQueryAttention", args, {"num_heads": 4, "kv_num_heads": 2})
    assert outs[1][0] == (1, 2, 9, 16)
    outs = contrib_output_shapes(
        MS, "GatherBlockQuantized", [Arg((100, 16), TensorProto.UINT8), Arg((1, 5), 7), Arg((100, 1), F)], {"bits": 4}
    )
    assert outs == [((1, 5, 32), F)]
    assert ("", "SimplifiedLayerNormalization") in CONTRIB_SHAPES


def test_contrib_outputs_shape_the_rest_of_the_graph():
    nodes = [
        helper.make_node("SkipLayerNormalization", ["x", "s", "g", "b"], ["y", "", "", "sum"], domain=MS),
        helper.make_node("MatMul", ["y", "w"], ["z"]),
        helper.make_node("Shape", ["z"], ["zs"]),
        helper.make_node("Reshape", ["sum", "target"], ["r"]),
    ]
    model = _model(
        nodes,
        [helper.make_tensor_value_info("x", F, ["b", 4, 16]), helper.make_tensor_value_info("s", F, ["b", 4, 16])],
        [
            helper.make_tensor_value_info("z", F, ["o1", "o2", "o3"]),
            helper.make_tensor_value_info("r", F, ["r1", "r2"]),
        ],
        [_w("g", 16), _w("b", 16), _w("w", 16, 8), helper.make_tensor("target", TensorProto.INT64, [2], [-1, 16])],
        opsets=(("", 17), (MS, 1)),
    )
    loaded = load_model(model, {"b": 3})
    assert _shape(loaded, "z") == [3, 4, 8] and _shape(loaded, "r") == [12, 16]
    assert all(is_static(loaded.value_types.get(o)) for n in loaded.model.graph.node for o in n.output if o)


# --------------------------------------------------------------------------------------------------- dims


def test_dim_expressions_parse_and_never_eval():
    expr = parse_dim_expression("past_sequence_length + sequence_length")
    assert expr.names == ("past_sequence_length", "sequence_length")
    assert expr.evaluate({"past_sequence_length": 3, "sequence_length": 4}) == 7
    assert parse_dim_expression("(a + 2) * b // 3 - 1").evaluate({"a": 1, "b": 4}) == 3
    assert parse_dim_expression("batch") is None
    assert parse_dim_expression("__import__('os')") is None
    with pytest.raises(DimsError, match="negative"):
        parse_dim_expression("a - b").evaluate({"a": 1, "b": 2})


def _kv_model():
    total = "past_sequence_length + sequence_length"
    nodes = [
        helper.make_node("Concat", ["past", "new"], ["kv"], axis=1),
        helper.make_node("Add", ["kv", "mask"], ["y"]),
    ]
    return _model(
        nodes,
        [
            helper.make_tensor_value_info("past", F, [1, "past_sequence_length", 8]),
            helper.make_tensor_value_info("new", F, [1, "sequence_length", 8]),
            helper.make_tensor_value_info("mask", F, [1, total, 1]),
        ],
        [helper.make_tensor_value_info("y", F, [1, total, 8])],
    )


def test_expression_dim_needs_no_binding_and_past_zero_is_valid():
    loaded = load_model(_kv_model(), {"past_sequence_length": 0, "sequence_length": 5})
    assert _shape(loaded, "mask") == [1, 5, 1] and _shape(loaded, "past") == [1, 0, 8]
    assert _shape(loaded, "y") == [1, 5, 8]
    assert not [w for w in loaded.warnings if "--dim" in w]
    with pytest.raises(DimsError, match="contradicts"):
        load_model(
            _kv_model(), {"past_sequence_length": 1, "sequence_length": 5, "past_sequence_length + sequence_length": 7}
        )
    with pytest.raises(DimsError, match="unbound symbolic dims: past_sequence_length"):
        load_model(_kv_model(), {"sequence_length": 5})


def test_zero_dims_parse_negative_refused_and_analyze_costs_nothing():
    assert parse_dim_bindings(["past=0"]) == {"past": 0}
    with pytest.raises(DimsError, match="non-negative"):
        parse_dim_bindings(["past=-1"])
    analysis = onnxroof.analyze(
        _kv_model(), platform="orin-nano", dims={"past_sequence_length": 0, "sequence_length": 0}
    )
    assert all(n.flops == 0 for n in analysis.nodes)


# --------------------------------------------------------------------------------------------------- If


def _if_model():
    def branch(name, width):
        node = helper.make_node("MatMul", ["x", f"w{width}"], [f"{name}_out"])
        return helper.make_graph([node], name, [], [helper.make_tensor_value_info(f"{name}_out", F, ["n", "m"])])

    node = helper.make_node(
        "If", ["use_cache_branch"], ["y"], then_branch=branch("then", 8), else_branch=branch("else", 64)
    )
    return _model(
        [node],
        [
            helper.make_tensor_value_info("use_cache_branch", TensorProto.BOOL, [1]),
            helper.make_tensor_value_info("x", F, ["batch", 16]),
        ],
        [helper.make_tensor_value_info("y", F, ["n", "m"])],
        [_w("w8", 16, 8), _w("w64", 16, 64)],
    )


def test_if_on_bound_bool_input_costs_that_branch():
    default = onnxroof.analyze(_if_model(), platform="orin-nano", dims={"batch": 2})
    assert any("else_branch" in w and "--dim use_cache_branch=1" in w for w in default.warnings)
    cheap = onnxroof.analyze(_if_model(), platform="orin-nano", dims={"batch": 2, "use_cache_branch": 1})
    expensive = onnxroof.analyze(_if_model(), platform="orin-nano", dims={"batch": 2, "use_cache_branch": 0})
    assert cheap.nodes[0].flops == 2 * 2 * 16 * 8
    assert expensive.nodes[0].flops == default.nodes[0].flops == 2 * 2 * 16 * 64
    assert not any("use_cache_branch" in w for w in cheap.warnings)
    with pytest.raises(DimsError, match="0 or 1"):
        load_model(_if_model(), {"batch": 2, "use_cache_branch": 2})
