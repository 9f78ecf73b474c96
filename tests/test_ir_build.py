"""What ``build_ir`` shares between nodes: it must change no value, only how many objects hold them."""

from __future__ import annotations

import onnx
import pytest
from onnx import TensorProto, helper
from test_fusion import analysed, model


def test_a_node_reading_the_one_output_before_it_shares_that_tuple() -> None:
    """Relu → Neg → Add(b, x): Neg's inputs are Relu's outputs (one tuple); Add reads two tensors, its own."""
    text = model("a = Relu(x)\nb = Neg(a)\ny = Add(b, x)", "float[2,3] x", "float[2,3] y")
    ir, _ = analysed(text)
    relu, neg, add = ir.ops
    assert neg.inputs is relu.outputs
    assert add.inputs is not neg.outputs
    for op in ir.ops:  # every input is the tensor of its name, as a lookup by name would give
        assert all(t is ir.tensors[t.name] for t in op.inputs if t is not None)
    assert [t.name for t in add.inputs if t is not None] == ["b", "x"]


def test_nodes_without_attributes_share_their_schema_defaults() -> None:
    """Two LeakyRelu nodes without attributes: one read-only view of the schema's default, alpha = 0.01."""
    text = model("a = LeakyRelu(x)\ny = LeakyRelu(a)", "float[2,3] x", "float[2,3] y")
    ir, _ = analysed(text)
    first, second = ir.ops
    assert first.attrs is second.attrs
    assert first.attrs["alpha"] == pytest.approx(0.01)
    with pytest.raises(TypeError):
        first.attrs["alpha"] = 1.0  # type: ignore[index]


def test_an_op_view_is_immutable_and_reads_its_fields_by_name() -> None:
    """OpView is a named tuple: its fields by name (``index`` the node's position, not tuple.index), no field
    can be set, and a copy with one field changed differs in that field alone."""
    text = model("a = Relu(x)\ny = Neg(a)", "float[2,3] x", "float[2,3] y")
    ir, _ = analysed(text)
    relu, neg = ir.ops
    assert (relu.index, neg.index) == (0, 1)
    assert (relu.id, neg.id, neg.op_type, neg.domain) == ("0:Relu", "1:Neg", "Neg", "")
    with pytest.raises(AttributeError):
        neg.op_type = "Relu"  # type: ignore[misc]
    renamed = neg._replace(name="n")
    assert renamed.name == "n" and renamed != neg
    assert renamed._replace(name=neg.name) == neg


def test_attributes_and_bodies_in_one_pass_agree_with_the_two_readers() -> None:
    """protos.attributes_and_bodies (what the IR builder and node_attributes read) gives a node's plain attributes
    over its schema's defaults (each as onnx's get_attribute_value reads it) and subgraphs_of's bodies: a body
    (GRAPH), a list of bodies (GRAPHS) named ``name[k]``."""
    from onnx import TensorProto, helper

    from onnxroof.core.protos import _attr_value, attributes_and_bodies, default_attributes, subgraphs_of

    body = helper.make_graph([], "b", [], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])])
    nodes = [
        helper.make_node("LeakyRelu", ["x"], ["y"]),  # no attribute: the schema's alpha
        helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.5),
        helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body),
        helper.make_node("Mystery", ["x"], ["y"], domain="custom", bodies=[body, body], k=3),
    ]
    for node in nodes:
        domain = "" if node.domain in ("", "ai.onnx") else node.domain
        defaults = default_attributes(node.op_type, 17, domain)
        plain = {a.name: _attr_value(a) for a in node.attribute if a.type not in (a.GRAPH, a.GRAPHS)}
        assert attributes_and_bodies(node, defaults) == ({**defaults, **plain}, subgraphs_of(node))
    assert attributes_and_bodies(nodes[1], default_attributes("LeakyRelu", 17, ""))[0] == {"alpha": 0.5}
    assert list(attributes_and_bodies(nodes[3], {})[1]) == ["bodies[0]", "bodies[1]"]
    assert attributes_and_bodies(nodes[0], default_attributes("LeakyRelu", 17, ""))[0]["alpha"] == pytest.approx(0.01)


def test_attributes_read_directly_equal_what_onnx_reads_and_a_reference_is_refused() -> None:
    """attributes_and_bodies reads INT, INTS, FLOAT and TENSOR attributes itself: each value and its type equal
    what onnx.helper.get_attribute_value gives (through _attr_value); other kinds go through it; a function
    body's reference attribute is refused as get_attribute_value refuses it."""
    from onnxroof.core.protos import _attr_value, attributes_and_bodies

    tensor = helper.make_tensor("t", TensorProto.FLOAT, [2], [1.0, 2.0])
    node = helper.make_node(
        "Custom", ["x"], ["y"], i=3, ints=[1, -1], f=0.5, fs=[0.25], t=tensor, s="same", ss=["a", "b"], domain="my"
    )
    attrs, bodies = attributes_and_bodies(node, {"i": 7, "other": 1})
    expected = {a.name: _attr_value(a) for a in node.attribute}
    assert attrs == {**expected, "other": 1} and not bodies
    assert [type(attrs[k]) for k in expected] == [type(v) for v in expected.values()]
    assert (attrs["i"], attrs["ints"], attrs["f"], attrs["s"], attrs["t"]) == (3, [1, -1], 0.5, "same", tensor)
    reference = helper.make_node("Custom", ["x"], ["y"], domain="my")
    reference.attribute.add(name="alpha", ref_attr_name="beta", type=onnx.AttributeProto.INT)
    with pytest.raises(ValueError, match="reference attribute"):
        attributes_and_bodies(reference, {})
