"""The loader's single walks agree with the walks they replaced: one scan of every graph (external tensors,
unregistered nodes), the lean parse's regex prefilter, the shared TypeProtos of ``value_types``."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxroof.core.protos import graph_value_types
from onnxroof.load.checks import _external_tensors, scan_model, unregistered_nodes
from onnxroof.load.lean import PAYLOAD_THRESHOLD, parse_without_payloads
from onnxroof.load.reader import load_model
from onnxroof.load.shapes import value_types


def _external(name: str, location: str) -> TensorProto:
    tensor = helper.make_tensor(name, TensorProto.FLOAT, [2], [0.0, 0.0])
    tensor.ClearField("float_data")
    tensor.data_location = TensorProto.EXTERNAL
    entry = tensor.external_data.add()
    entry.key, entry.value = "location", location
    return tensor


def _nested_model() -> onnx.ModelProto:
    """Unregistered ops and external tensors at three depths: main graph, an If branch, a Loop inside it."""
    inner = helper.make_graph(
        [
            helper.make_node("Constant", [], ["k"], value=_external("k_value", "inner.bin")),
            helper.make_node("SimplifiedLayerNormalization", ["k"], ["inner_out"]),
        ],
        "inner",
        [],
        [helper.make_tensor_value_info("inner_out", TensorProto.FLOAT, [2])],
        [_external("inner_init", "inner_init.bin")],
    )
    branch = helper.make_graph(
        [
            helper.make_node("Loop", ["", ""], ["loop_out"], body=inner),
            helper.make_node("SkipSimplifiedLayerNormalization", ["loop_out", "loop_out"], ["then_out"]),
        ],
        "then",
        [],
        [helper.make_tensor_value_info("then_out", TensorProto.FLOAT, [2])],
        [_external("then_init", "then.bin")],
    )
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["else_out"])], "else", [], [])
    graph = helper.make_graph(
        [
            helper.make_node("SimplifiedLayerNormalization", ["x"], ["a"]),
            helper.make_node("Constant", [], ["c"], value=_external("c_value", "c.bin")),
            helper.make_node("If", ["cond"], ["y"], then_branch=branch, else_branch=other),
            helper.make_node("RotaryEmbedding", ["a"], ["b"], domain="ai.onnx"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [_external("W", "w.bin")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_one_scan_finds_what_each_walk_found_in_the_same_order() -> None:
    model = _nested_model()
    scan = scan_model(model)
    assert [t.name for t in scan.external] == [t.name for t in _external_tensors(model)]
    assert [t.name for t in scan.external] == ["W", "c_value", "then_init", "inner_init", "k_value"]
    assert [n.op_type for n in scan.unregistered] == [n.op_type for n in unregistered_nodes(model)]
    assert len(scan.unregistered) == 4  # RotaryEmbedding is not an ONNX op at opset 17 either


def test_the_scan_sums_the_stored_weights_of_every_graph() -> None:
    """Five float tensors of 2 elements stored: initializers W, then_init, inner_init and the Constants c and k,
    at three depths: 5 × 2 × 4 B; a Constant outside the default domain stores no weight."""
    model = _nested_model()
    assert scan_model(model).stored_weight_bytes == 5 * 2 * 4
    custom = helper.make_node("Constant", [], ["z"], domain="com.example", value=_external("z_value", "z.bin"))
    model.graph.node.append(custom)
    assert scan_model(model).stored_weight_bytes == 5 * 2 * 4


def test_no_default_opset_means_no_unregistered_nodes() -> None:
    model = _nested_model()
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("ai.onnx.ml", 3))
    assert scan_model(model).unregistered == () == tuple(unregistered_nodes(model))


def _bytes_model(attribute_bytes: int, weight_elements: int) -> onnx.ModelProto:
    """A node whose string attribute has ``attribute_bytes`` bytes (its field may look like a large
    initializer to the prefilter) and a weight of ``weight_elements`` floats."""
    weight = numpy_helper.from_array(np.arange(weight_elements, dtype=np.float32).reshape(1, -1), "W")
    node = helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")
    node.attribute.append(helper.make_attribute("note", "n" * attribute_bytes))
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, weight_elements])],
        [weight],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_the_prefilter_never_hides_a_large_initializer(tmp_path) -> None:
    large = PAYLOAD_THRESHOLD // 4 + 16  # floats: just over the threshold
    for attribute_bytes, elements, left_out in [(20_000, 16, False), (10, 16, False), (10, large, True)]:
        path = tmp_path / f"m{attribute_bytes}_{elements}.onnx"
        onnx.save(_bytes_model(attribute_bytes, elements), path)
        lean = parse_without_payloads(path)
        weight = lean.graph.initializer[0]
        assert (weight.data_location == TensorProto.EXTERNAL) is left_out
        if not left_out:
            assert lean == onnx.load(str(path))  # parsed as it is
        else:
            lean.graph.ClearField("initializer")
            full = onnx.load(str(path))
            full.graph.ClearField("initializer")
            assert lean == full


def test_value_types_share_equal_types_and_equal_graph_value_types(tmp_path) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["t0"])]
    nodes += [helper.make_node("Neg", [f"t{i}"], [f"t{i + 1}"]) for i in range(5)]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("t5", TensorProto.FLOAT, [1, 16])],
        [numpy_helper.from_array(np.zeros((2, 3), np.float32), f"w{i}") for i in range(2)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    inferred = onnx.shape_inference.infer_shapes(model)
    shared = value_types(inferred)
    g = inferred.graph
    plain = {v.name: v.type for v in [*g.value_info, *g.input, *g.output] if v.type.HasField("tensor_type")}
    plain.update({t.name: helper.make_tensor_type_proto(t.data_type, list(t.dims)) for t in g.initializer})
    assert shared == plain and list(shared) == list(plain)  # one TypeProto per type, same mapping as one per value
    assert graph_value_types(g) == shared
    assert len({id(shared[f"t{i}"]) for i in range(6)}) == 1
    assert shared["w0"] is shared["w1"]
    assert all(shared[f"t{i}"] is not v.type for i, v in enumerate(g.value_info))  # messages of their own
    loaded = load_model(model)
    assert dict(loaded.value_types) == shared and list(loaded.value_types) == list(shared)
    # the loaded model drops the main graph's value_info (its types are in value_types), nothing else
    assert not loaded.model.graph.value_info and len(g.value_info) == 5
    assert loaded.model.graph.node == g.node and loaded.model.graph.initializer == g.initializer
    assert tuple(loaded.order) == tuple(range(6))  # the file order, held as a range


def _typed_chain(*extra: onnx.NodeProto, value_info: list[onnx.ValueInfoProto] | None = None) -> onnx.ModelProto:
    """x[2, 3] -> Relu -> a -> Neg -> y, then ``extra`` nodes; ``value_info`` written into the file."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["a"], ["y"]), *extra],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        value_info=value_info or [],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("custom", 1)])


def _loaded_counts(model: onnx.ModelProto) -> tuple[int | None, bool, list[str]]:
    """The file's output slots, the count's verdict on the inferred graph, and what missing_outputs finds."""
    from onnxroof.load.reader import _infer, read_file
    from onnxroof.load.shapes import every_output_static, missing_outputs

    file = read_file(model)
    inferred = _infer(file.model)[0]
    types = value_types(inferred)
    assert file.main is not None
    slots = file.main.output_slots if file.main.countable else None
    verdict = slots is not None and every_output_static(inferred.graph, types, slots)
    return slots, verdict, missing_outputs(inferred, types)[0]


def test_the_output_count_says_every_output_is_static_only_when_none_is_missing() -> None:
    """Two typed outputs (a, y): 2 slots, 2 typed names besides the input. A custom op's output is untyped (3 slots,
    2 typed); an empty optional output name is a slot no type fills; a file's own value_info (here naming no
    node's output) leaves no count."""
    assert _loaded_counts(_typed_chain()) == (2, True, [])
    custom = helper.make_node("Mystery", ["a"], ["m"], domain="custom")
    assert _loaded_counts(_typed_chain(custom)) == (3, False, ["m"])
    split = helper.make_node("Dropout", ["a"], ["d", ""])
    assert _loaded_counts(_typed_chain(split))[:2] == (4, False)
    dangling = [helper.make_tensor_value_info("nobody", TensorProto.FLOAT, [2, 3])]
    assert _loaded_counts(_typed_chain(custom, value_info=dangling)) == (None, False, ["m"])


def test_the_scan_tells_what_binding_needs_of_the_main_graph() -> None:
    """The nested model's main graph: 4 nodes of one output each, one of them an If; a Range found in the default
    domain only; a value_info of the file's own makes the count unusable."""
    from onnxroof.load.checks import MainGraphFacts

    model = _nested_model()
    assert scan_model(model).main == MainGraphFacts(
        output_slots=4, bodies=True, value_info=False, ranges=(), attributes=True
    )
    assert not scan_model(model).main.countable
    chain = _typed_chain()
    assert scan_model(chain).main == MainGraphFacts(
        output_slots=2, bodies=False, value_info=False, ranges=(), attributes=False
    )
    assert scan_model(chain).main.countable
    chain.graph.node.append(helper.make_node("Range", ["s", "l", "d"], ["r"], domain="custom"))
    assert not scan_model(chain).main.ranges
    chain.graph.node.append(helper.make_node("Range", ["s", "l", "d"], ["r2"]))
    chain.graph.value_info.append(helper.make_tensor_value_info("r2", TensorProto.INT64, [3]))
    facts = scan_model(chain).main
    assert (facts.output_slots, facts.ranges, facts.value_info, facts.countable) == (4, (3,), True, False)


def test_the_scan_tells_whether_a_node_holds_an_attribute_and_binding_reads_them_only_then() -> None:
    """The typed chain holds no attribute: the loaded model says so, and its IR gives each op its schema's
    defaults. A Softmax with ``axis=0`` after the chain's two nodes (not the first node) makes the flag True, and
    the bound IR reads that axis; a build told that no node holds one (``attributes=False``) reads none."""
    from onnxroof.core.ir import build_ir
    from onnxroof.load.reader import load_model
    from onnxroof.rules import REGISTRY

    plain = load_model(_typed_chain())
    assert (scan_model(_typed_chain()).main.attributes, plain.attributes) == (False, False)
    softmax = helper.make_node("Softmax", ["y"], ["s"], axis=0)
    assert scan_model(_typed_chain(softmax)).main.attributes
    loaded = load_model(_typed_chain(softmax))
    assert loaded.attributes
    bound = build_ir(loaded.model, loaded.value_types, view_ops=REGISTRY.view_ops, attributes=loaded.attributes)
    assert bound.ops[2].attrs["axis"] == 0
    blind = build_ir(loaded.model, loaded.value_types, view_ops=REGISTRY.view_ops, attributes=False)
    assert blind.ops[2].attrs["axis"] == -1  # Softmax-13's default: the attribute was not read


def test_the_checkers_copy_walks_the_other_graphs_only_when_they_hold_external_tensors(monkeypatch) -> None:
    """Every external tensor is made inline or an input in the checker's copy; the walk over every graph's nodes
    and attributes runs only when the main graph's initializers are not all of them (scan.external counts all)."""
    from onnxroof.load import checks

    nested = _nested_model()
    copy = checks._without_external_initializers(nested, scan_model(nested))
    assert list(checks._external_tensors(copy)) == [] and len(list(checks._external_tensors(nested))) == 5
    assert [v.name for v in copy.graph.input][-1:] == ["W"]  # the main graph's external initializer became an input

    main_only = _nested_model()
    main_only.graph.ClearField("node")
    walks: list[int] = []

    def counted(model: onnx.ModelProto):
        walks.append(1)
        return _external_tensors(model)

    monkeypatch.setattr(checks, "_external_tensors", counted)
    copy = checks._without_external_initializers(main_only, scan_model(main_only))
    assert walks == [] and [v.name for v in copy.graph.input][-1:] == ["W"] and not copy.graph.initializer
    checks._without_external_initializers(nested, scan_model(nested))
    assert walks == [1]


def test_the_checkers_copy_types_each_external_initializer_as_its_input_one_type_message_each() -> None:
    """An external initializer becomes a graph input of its dtype and dims (what make_tensor_value_info gives),
    each input holding a type message of its own though equal types are built once."""
    from onnxroof.load import checks

    model = _nested_model()
    shapes = {"A": [4, 8], "B": [4, 8], "C": [2]}
    for name, dims in shapes.items():
        tensor = TensorProto(name=name, data_type=TensorProto.FLOAT16, dims=dims)
        tensor.data_location = TensorProto.EXTERNAL
        tensor.external_data.add(key="location", value="w.bin")
        model.graph.initializer.append(tensor)
    copy = checks._without_external_initializers(model, scan_model(model))
    inputs = {v.name: v for v in copy.graph.input}
    for name, dims in shapes.items():
        assert inputs[name] == helper.make_tensor_value_info(name, TensorProto.FLOAT16, dims)
    inputs["A"].type.tensor_type.shape.dim[0].dim_value = 5
    assert inputs["B"].type.tensor_type.shape.dim[0].dim_value == 4  # a copy, not a shared message


def test_the_prefilter_finds_an_initializer_key_plain_or_padded_before_a_long_length() -> None:
    """The prefilter's patterns (load.lean._LARGE_INITIALIZER): the key of GraphProto.initializer (field 5, wire
    type 2) as one byte 0x2a or padded (0xaa 0x80... 0x00), then a length of three varint bytes or more (a message
    over PAYLOAD_THRESHOLD = 64 KiB: 65,537 is 0x81 0x80 0x04); a two-byte length (at most 16,383) is no match."""
    from onnxroof.load.lean import _LARGE_INITIALIZER, _encode_varint

    def found(data: bytes) -> bool:
        return any(pattern.search(data) is not None for pattern in _LARGE_INITIALIZER)

    length = _encode_varint(PAYLOAD_THRESHOLD + 1)
    assert length == b"\x81\x80\x04"
    assert found(b"abc\x2a" + length) and found(b"\xaa\x80\x80\x00" + length) and found(b"\xaa\x00" + length)
    assert not found(b"abc\x2a\xff\x7f") and not found(b"\xaa\x80\x80\x00\xff\x7f")
    assert not found(b"\xaa\x80\x01" + length)  # not a varint of 0x2a
