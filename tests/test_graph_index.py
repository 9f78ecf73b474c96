"""The graph index built with the IR (core/index.py): readers in topological order, each once, then the If whose
bodies read a tensor; producers; view aliases. The same index whether fed op by op or built from the ops."""

from __future__ import annotations

from onnx import TensorProto, helper

from onnxroof.core.index import build_index
from onnxroof.core.ir import build_ir

VIEWS = frozenset({("", "Identity")})


def _model():
    """r: a = Relu(x); s: b = Add(a, a); m: c = Mul(a, b); i: v = Identity(c); f: y = If(cond), whose then-branch
    reads a and c and whose else-branch reads a, from the enclosing scope."""
    then = helper.make_graph(
        [helper.make_node("Add", ["a", "c"], ["t"])], "then", [], [helper.make_tensor_value_info("t", 1, [2])]
    )
    other = helper.make_graph(
        [helper.make_node("Neg", ["a"], ["e"])], "else", [], [helper.make_tensor_value_info("e", 1, [2])]
    )
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["a"], name="r"),
            helper.make_node("Add", ["a", "a"], ["b"], name="s"),
            helper.make_node("Mul", ["a", "b"], ["c"], name="m"),
            helper.make_node("Identity", ["c"], ["v"], name="i"),
            helper.make_node("If", ["cond"], ["y"], name="f", then_branch=then, else_branch=other),
        ],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_each_reader_once_in_order_then_the_if_whose_bodies_read_it() -> None:
    ir = build_ir(_model(), {}, view_ops=VIEWS)
    index = ir.index
    assert dict(index.consumers) == {
        "x": ("0:r",),
        "a": ("1:s", "2:m", "4:f"),  # Add reads it twice: once; the If's two bodies read it: once, last
        "b": ("2:m",),
        "c": ("3:i", "4:f"),
        "cond": ("4:f",),
    }
    assert list(index.consumers) == ["x", "a", "b", "c", "cond"]  # first read first
    assert dict(index.producer) == {"a": "0:r", "b": "1:s", "c": "2:m", "v": "3:i", "y": "4:f"}
    assert (dict(index.view_source), dict(index.view_children), index.views) == (
        {"v": "c"},
        {"c": ("v",)},
        frozenset({"3:i"}),
    )
    assert index.root("v") == "c"
    assert build_index(ir.ops, VIEWS) == index


def test_ops_of_one_input_and_one_output_index_as_add_does() -> None:
    """Relu, Neg and Exp each read one tensor and write one (the builder indexes them from their names): a read
    twice by single-input ops keeps both readers in order, the graph input read by no op has no entry, and the
    index equals the one :meth:`IndexBuilder.add` makes from the ops."""
    graph = helper.make_graph(
        [
            helper.make_node("Relu", ["x"], ["a"], name="r"),
            helper.make_node("Neg", ["a"], ["n"], name="n"),
            helper.make_node("Exp", ["a"], ["e"], name="e"),
            helper.make_node("Add", ["n", "e"], ["y"], name="s"),
        ],
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("unused", TensorProto.FLOAT, [2]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    ir = build_ir(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), {}, view_ops=VIEWS)
    assert dict(ir.index.consumers) == {"x": ("0:r",), "a": ("1:n", "2:e"), "n": ("3:s",), "e": ("3:s",)}
    assert dict(ir.index.producer) == {"a": "0:r", "n": "1:n", "e": "2:e", "y": "3:s"}
    assert build_index(ir.ops, VIEWS) == ir.index


def test_the_ir_keeps_its_op_kinds_and_the_ops_with_bodies() -> None:
    ir = build_ir(_model(), {}, view_ops=VIEWS)
    assert ir.op_kinds == frozenset({("", "Relu"), ("", "Add"), ("", "Mul"), ("", "Identity"), ("", "If")})
    assert ir.bodies == ("4:f",)
