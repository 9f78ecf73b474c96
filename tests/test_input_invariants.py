"""Invariants every input must keep: costs never negative, tied and derived weights counted once, unknown ops
never silently folded, nothing uncosted inside a control-flow body left out of the warnings."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from helpers import make_op
from onnx import TensorProto, helper, numpy_helper

import onnxroof
from onnxroof.core.errors import CostError, ModelError
from onnxroof.core.registry import evaluate
from onnxroof.rules import REGISTRY

# ------------------------------------------------------------------------------------ costs never negative


@pytest.mark.parametrize("op_type", ["Relu", "Add", "MatMul"])
def test_a_negative_dim_is_an_error_naming_the_node(op_type: str) -> None:
    shape = (-2, 8) if op_type != "MatMul" else (4, -8)
    inputs = [(shape, "float32")] * (1 if op_type == "Relu" else 2)
    op = make_op(op_type, inputs, [((-2, 8), "float32")])
    entry = REGISTRY.lookup("", op_type)
    with pytest.raises(CostError, match=rf"node 0:{op_type} \({op_type}\): negative cost"):
        evaluate(op, entry)


def test_cost_error_is_a_model_error() -> None:
    assert issubclass(CostError, ModelError)  # exit 2 on the command line, one line


# ----------------------------------------------------------------------- unknown ops are never folded


def _model(nodes, inputs, outputs, initializers, value_info=(), opsets=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializers, value_info=list(value_info))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), *opsets])


def test_unknown_op_on_weights_is_unsupported_not_folded() -> None:
    weight = numpy_helper.from_array(np.ones((8, 8), np.float32), "w")
    model = _model(
        [
            helper.make_node("Scramble", ["w"], ["v"], name="scramble", domain="com.example"),
            helper.make_node("MatMul", ["x", "v"], ["y"], name="mm"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [weight],
        [helper.make_tensor_value_info("v", TensorProto.FLOAT, [8, 8])],
        [helper.make_opsetid("com.example", 1)],
    )
    analysis = onnxroof.analyze(model)
    states = {n.name: n.state for n in analysis.nodes}
    assert states["scramble"] == "unsupported"
    assert dict(analysis.unsupported) == {"com.example::Scramble": ("0:scramble",)}


def test_known_op_on_weights_still_folds() -> None:
    weight = numpy_helper.from_array(np.ones((8, 8), np.float32), "w")
    model = _model(
        [helper.make_node("Neg", ["w"], ["v"], name="neg"), helper.make_node("MatMul", ["x", "v"], ["y"], name="mm")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [weight],
    )
    assert {n.name: n.state for n in onnxroof.analyze(model).nodes}["neg"] == "folded"


# ------------------------------------------------------------------ tied and derived weights count once

VOCAB, HIDDEN = 50, 16


def tied_embedding_model() -> onnx.ModelProto:
    """GPT-2's tied embedding as exporters write it: E feeds Gather (lookup) and, through Transpose(E), the
    lm_head MatMul."""
    table = numpy_helper.from_array(np.ones((VOCAB, HIDDEN), np.float32), "E")
    return _model(
        [
            helper.make_node("Gather", ["E", "ids"], ["h"], name="embed"),
            helper.make_node("Transpose", ["E"], ["Et"], name="untie", perm=[1, 0]),
            helper.make_node("MatMul", ["h", "Et"], ["logits"], name="lm_head"),
        ],
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 4])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 4, VOCAB])],
        [table],
    )


def test_tied_embedding_counts_once() -> None:
    analysis = onnxroof.analyze(tied_embedding_model())
    assert analysis.totals.params == VOCAB * HIDDEN
    lm_head = next(n for n in analysis.nodes if n.name == "lm_head")
    assert lm_head.bytes_read >= VOCAB * HIDDEN * 4  # the derived weight's bytes are still read


def test_derived_weight_roots_count_once_through_chains() -> None:
    """Transpose(Neg(E)) read by MatMul, E read by nobody else: params are E's, once."""
    table = numpy_helper.from_array(np.ones((VOCAB, HIDDEN), np.float32), "E")
    model = _model(
        [
            helper.make_node("Neg", ["E"], ["En"], name="neg"),
            helper.make_node("Transpose", ["En"], ["Et"], name="t", perm=[1, 0]),
            helper.make_node("MatMul", ["x", "Et"], ["y"], name="mm1"),
            helper.make_node("MatMul", ["x", "Et"], ["z"], name="mm2"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, HIDDEN])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, VOCAB]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [2, VOCAB]),
        ],
        [table],
    )
    assert onnxroof.analyze(model).totals.params == VOCAB * HIDDEN


# ------------------------------------------------------------------------------ never hang, never crash


def _report(*args: object):
    import inspect

    from typer.testing import CliRunner

    from onnxroof.cli.commands import app

    runner = CliRunner(mix_stderr=False) if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters else None
    return (runner or CliRunner()).invoke(app, ["report", *map(str, args)], env={"COLUMNS": "200", "NO_COLOR": "1"})


def _one_line_error(result, *needles: str) -> None:
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    for needle in needles:
        assert needle in result.stderr


def test_a_fifo_is_refused_not_read(tmp_path) -> None:
    import os

    fifo = tmp_path / "model.onnx"
    os.mkfifo(fifo)
    _one_line_error(_report(fifo), "not a regular file")


def test_a_link_to_dev_zero_is_refused(tmp_path) -> None:
    link = tmp_path / "model.onnx"
    link.symlink_to("/dev/zero")
    _one_line_error(_report(link), "not a regular file")


def test_a_full_disk_is_an_environment_error(tmp_path) -> None:
    from pathlib import Path

    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    path = tmp_path / "m.onnx"
    onnx.save(tied_embedding_model(), path)
    _one_line_error(_report(path, "-f", "json", "-o", "/dev/full"), "/dev/full", "No space left")


def _external_model(location: str) -> onnx.ModelProto:
    model = tied_embedding_model()
    table = model.graph.initializer[0]
    table.ClearField("raw_data")
    table.ClearField("float_data")
    table.data_location = TensorProto.EXTERNAL
    entry = table.external_data.add()
    entry.key, entry.value = "location", location
    return model


@pytest.mark.parametrize(("location", "needle"), [("loop.bin", "loop.bin"), ("we\0ights.bin", "NUL byte")])
def test_bad_external_locations_are_one_line(tmp_path, location: str, needle: str) -> None:
    (tmp_path / "loop.bin").symlink_to(tmp_path / "loop.bin")
    path = tmp_path / "m.onnx"
    path.write_bytes(_external_model(location).SerializeToString())
    _one_line_error(_report(path), needle)


def test_an_external_location_that_is_a_fifo_is_refused(tmp_path) -> None:
    import os

    os.mkfifo(tmp_path / "w.bin")
    path = tmp_path / "m.onnx"
    path.write_bytes(_external_model("w.bin").SerializeToString())
    _one_line_error(_report(path), "not a regular file")


def test_an_absent_external_file_still_analyzes(tmp_path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(_external_model("absent.bin").SerializeToString())
    assert _report(path, "-f", "json").exit_code == 0


# --------------------------------------------------- the crash sites the fuzzer found, each named to the user


def _mutated(name: str, change) -> onnx.ModelProto:
    from fuzz import small_models

    model = small_models()[name]
    change(model)
    return model


def _set_attr(node: onnx.NodeProto, name: str, value) -> None:
    for attr in list(node.attribute):
        if attr.name == name:
            node.attribute.remove(attr)
    node.attribute.append(helper.make_attribute(name, value))


def _clear_dims(tensor) -> None:
    del tensor.dims[:]


def _rank0_input(model: onnx.ModelProto) -> None:
    del model.graph.input[0].type.tensor_type.shape.dim[:]


@pytest.mark.parametrize(
    ("name", "change", "needle"),
    [
        ("lstm", lambda m: _clear_dims(m.graph.initializer[0]), "(LSTM): weight W 'w' has rank 0"),
        ("lstm", _rank0_input, "(LSTM): input X 'x' has rank 0"),
        ("gemm", _rank0_input, "(Gemm): operand ranks do not form a matrix product"),
        ("scan", lambda m: _set_attr(m.graph.node[0], "num_scan_inputs", 2**40), "(Scan): num_scan_inputs"),
        ("scan", lambda m: _set_attr(m.graph.node[0], "scan_input_axes", [5]), "(Scan): scan axis 5 is out of range"),
        ("conv", lambda m: _set_attr(m.graph.node[0], "group", -7), "(Conv): group = -7"),
    ],
)
def test_malformed_nodes_are_named(tmp_path, name: str, change, needle: str) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes(_mutated(name, change).SerializeToString())
    result = _report(path, "-f", "json", "-o", tmp_path / "out.json", "--dim", "batch=1")
    _one_line_error(result, needle)
    assert not (tmp_path / "out.json").exists()


def _set_opset(model: onnx.ModelProto, domain: str, version: int) -> None:
    for entry in model.opset_import:
        if entry.domain == domain:
            entry.version = version


@pytest.mark.parametrize(
    ("domain", "version", "needle"),
    [
        ("", 2**31, "opset_import version 2147483648 of domain 'ai.onnx' is out of range"),
        ("", 2**40, "opset_import version 1099511627776 of domain 'ai.onnx' is out of range"),
        ("com.microsoft", -1, "opset_import version -1 of domain 'com.microsoft' is out of range"),
    ],
)
def test_an_opset_version_out_of_range_is_one_line(tmp_path, domain: str, version: int, needle: str) -> None:
    """Found while chasing a fuzz crash (seed 1): ONNX's schema lookup takes a C int and raised TypeError."""
    model = _mutated("lstm", lambda m: _set_opset(m, domain, version))
    if domain and not any(o.domain == domain for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(domain, version))
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    result = _report(path, "-f", "json", "-o", tmp_path / "out.json", "--dim", "batch=1")
    _one_line_error(result, needle)
    assert not (tmp_path / "out.json").exists()


def test_an_op_type_that_is_not_utf8_is_one_line(tmp_path) -> None:
    """Found by the fuzz campaign (seed 1, flipped bits in a Scan body): protobuf hands the string over as bytes."""
    data = _mutated("scan", lambda m: None).SerializeToString()
    body_op = data.index(b"Add")  # the Scan body's op type, 3 bytes long: same length, invalid UTF-8
    path = tmp_path / "m.onnx"
    path.write_bytes(data[:body_op] + b"A\xe4d" + data[body_op + 3 :])
    result = _report(path, "-f", "json", "-o", tmp_path / "out.json", "--dim", "batch=1")
    _one_line_error(result, "op_type or domain is not valid UTF-8")
    assert not (tmp_path / "out.json").exists()


def test_element_counts_past_64_bits_still_fuse() -> None:
    """Found by the fuzz campaign (an input dim of 2^62): pointwise fusion kept element counts in 64-bit arrays."""
    model = _model(
        [helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Neg", ["r"], ["y"], name="neg")],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2**62, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2**62, 16])],
        [],
    )
    analysis = onnxroof.analyze(model, fusion="tensorrt")
    assert [k.node_ids for k in analysis.kernels] == [("0:relu", "1:neg")]
    assert analysis.kernels[0].bytes == 2 * 2**62 * 16 * 4  # x read, y written; r stays on chip


def test_folding_skips_what_it_cannot_evaluate() -> None:
    """A weight whose dims no longer match its data (dims []) is not folded, and nothing raises."""
    from onnxroof.load.shapes import small_constant_values

    model = tied_embedding_model()
    del model.graph.initializer[0].dims[:]
    assert small_constant_values(model, None) == {}
    model.graph.initializer[0].data_type = 999
    assert small_constant_values(model, None) == {}


# ----------------------------------------------------------- what a control-flow body leaves uncosted warns


def test_uncosted_body_nodes_are_warnings() -> None:
    def change(model: onnx.ModelProto) -> None:
        then_branch = next(a.g for a in model.graph.node[1].attribute if a.name == "then_branch")
        then_branch.node[0].op_type, then_branch.node[0].domain = "Scramble", "com.example"
        model.opset_import.append(helper.make_opsetid("com.example", 1))

    analysis = onnxroof.analyze(_mutated("if", change))
    body = [w for w in analysis.warnings if w.startswith("inside node")]
    assert len(body) == 1, analysis.warnings
    assert "(If) then_branch: node" in body[0]
    assert "(com.example::Scramble) not costed" in body[0]


def test_a_body_node_without_a_shape_is_a_warning() -> None:
    def change(model: onnx.ModelProto) -> None:
        loop_body = model.graph.node[0].attribute[0].g
        loop_body.node[1].input[1] = "nowhere_w"  # MatMul reads a tensor nothing defines: no shape
        loop_body.input.append(_vi_unknown("nowhere_w"))

    analysis = onnxroof.analyze(_mutated("loop", change))
    assert any("(Loop) body: node" in w and "has no static shape" in w for w in analysis.warnings), analysis.warnings


def _vi_unknown(name: str) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, None)


# ------------------------------------------------------------------- weights inside the file are never read


def _big_inline_model() -> onnx.ModelProto:
    big = numpy_helper.from_array(np.arange(256 * 128, dtype=np.float32).reshape(256, 128), "W")  # 128 KiB
    shape = numpy_helper.from_array(np.array([1, 128], np.int64), "shape")
    return _model(
        [
            helper.make_node("MatMul", ["x", "W"], ["h"], name="mm"),
            helper.make_node("Reshape", ["h", "shape"], ["y"], name="reshape"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 128])],
        [big, shape],
    )


def test_large_inline_weights_stay_in_the_file(tmp_path) -> None:
    from onnxroof.load.lean import parse_without_payloads

    path = tmp_path / "m.onnx"
    onnx.save(_big_inline_model(), path)
    lean = parse_without_payloads(path)
    weight, shape = lean.graph.initializer
    assert weight.data_location == TensorProto.EXTERNAL and not weight.raw_data
    entries = {e.key: e.value for e in weight.external_data}
    assert entries["location"] == "m.onnx"
    data = path.read_bytes()[int(entries["offset"]) : int(entries["offset"]) + int(entries["length"])]
    assert np.array_equal(np.frombuffer(data, np.float32), np.arange(256 * 128, dtype=np.float32))
    assert numpy_helper.to_array(shape).tolist() == [1, 128]  # small tensors stay inline
    lean.graph.ClearField("initializer")
    full = onnx.load(str(path))
    full.graph.ClearField("initializer")
    assert lean == full  # nothing else changed


def test_a_file_analyzes_as_its_in_memory_model(tmp_path) -> None:
    from onnxroof.analysis.document import to_dict

    model = _big_inline_model()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    link = tmp_path / "elsewhere"
    link.mkdir()
    (link / "m.onnx").symlink_to(path)
    in_memory = to_dict(onnxroof.analyze(model))
    for source in (path, link / "m.onnx"):
        from_file = to_dict(onnxroof.analyze(source))
        assert from_file["totals"] == in_memory["totals"]
        assert from_file["nodes"] == in_memory["nodes"]
        assert from_file["warnings"] == in_memory["warnings"]


def test_an_in_memory_model_is_copied_without_its_payloads() -> None:
    from onnxroof.load.lean import IN_MEMORY, copy_without_payloads

    model = _big_inline_model()
    before = model.SerializeToString()
    lean = copy_without_payloads(model)
    assert model.SerializeToString() == before  # the caller's model is untouched
    weight, shape = lean.graph.initializer
    assert not weight.raw_data and weight.data_location == TensorProto.EXTERNAL
    assert {e.key: e.value for e in weight.external_data} == {"location": IN_MEMORY}
    assert list(weight.dims) == [256, 128] and shape == model.graph.initializer[1]
    lean.graph.ClearField("initializer")
    model.graph.ClearField("initializer")
    assert lean == model
