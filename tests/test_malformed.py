"""Malformed contrib and ONNX nodes (issue 25): a missing required attribute, another op's inputs, a head count
of 0 or a data type outside the enum give ONE line naming the node and the attribute, and exit 2; never an
internal error. Each case is one mutation of a shipped LLM sample, or a node built with onnx.helper."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
from helpers import make_op
from onnx import helper
from test_cli import invoke

import onnxroof
from onnxroof.core.errors import MalformedNode, ModelError
from onnxroof.core.registry import evaluate
from onnxroof.rules import REGISTRY

LLM = Path(__file__).resolve().parent.parent / "samples" / "llm"
INT4 = LLM / "genai_llama_int4" / "model.onnx"
BERT = LLM / "ort_bert_optimized.onnx"
OPSET23 = LLM / "onnx_decoder_layer_opset23.onnx"
DIMS = {
    INT4: {"batch_size": 1, "sequence_length": 8, "past_sequence_length": 0, "total_sequence_length": 8},
    BERT: {"batch_size": 1, "sequence_length": 8},
    OPSET23: {"batch_size": 1, "sequence_length": 8, "past_sequence_length": 0, "total_sequence_length": 8},
}
EXTRA = {INT4: {"kv_cache_dim": 64}}
Mutation = Callable[[onnx.NodeProto], None]


def _drop(name: str) -> Mutation:
    def mutate(node: onnx.NodeProto) -> None:
        kept = [a for a in node.attribute if a.name != name]
        del node.attribute[:]
        node.attribute.extend(kept)

    return mutate


def _set(name: str, value: int) -> Mutation:
    def mutate(node: onnx.NodeProto) -> None:
        _drop(name)(node)
        node.attribute.append(helper.make_attribute(name, value))

    return mutate


def _swap_to_attention(node: onnx.NodeProto) -> None:
    """The op type swapped to com.microsoft Attention on a node with one input (a Sigmoid)."""
    node.op_type, node.domain = "Attention", "com.microsoft"
    node.attribute.append(helper.make_attribute("num_heads", 4))


#: (sample, op type of the node mutated, name fragment, mutation, node id, what the line names)
CASES = {
    "MatMulNBits without K": (INT4, "MatMulNBits", "", _drop("K"), "MatMulNBits", "required attribute 'K' is missing"),
    "MatMulNBits without N": (INT4, "MatMulNBits", "", _drop("N"), "MatMulNBits", "required attribute 'N' is missing"),
    "Attention without num_heads": (
        BERT,
        "Attention",
        "",
        _drop("num_heads"),
        "com.microsoft::Attention",
        "required attribute 'num_heads' is missing",
    ),
    "Attention with num_heads=0": (
        BERT,
        "Attention",
        "",
        _set("num_heads", 0),
        "com.microsoft::Attention",
        "attribute 'num_heads' = 0, must be a positive integer",
    ),
    "Attention with num_heads<0": (
        BERT,
        "Attention",
        "",
        _set("num_heads", -4),
        "com.microsoft::Attention",
        "attribute 'num_heads' = -4, must be a positive integer",
    ),
    "ONNX Attention without kv_num_heads": (
        OPSET23,
        "Attention",
        "",
        _drop("kv_num_heads"),
        "(Attention)",
        "required attribute 'kv_num_heads' is missing",
    ),
    "ONNX Attention with q_num_heads=0": (
        OPSET23,
        "Attention",
        "",
        _set("q_num_heads", 0),
        "(Attention)",
        "attribute 'q_num_heads' = 0, must be a positive integer",
    ),
    "Sigmoid swapped to contrib Attention": (
        INT4,
        "Sigmoid",
        "",
        _swap_to_attention,
        "com.microsoft::Attention",
        "has 1 input(s), the operator takes at least 2",
    ),
    **{
        f"Cast to={value}": (
            INT4,
            "Cast",
            "Sub/Cast",
            _set("to", value),
            "(Cast)",
            f"attribute 'to' = {value} is not a TensorProto data type",
        )
        for value in (2**31, 2**40, 2**63 - 1, 99)
    },
}


def _mutant(tmp_path: Path, sample: Path, op_type: str, fragment: str, mutation: Mutation) -> tuple[Path, str]:
    """``sample`` with ``mutation`` applied to its first ``op_type`` node whose name holds ``fragment``, saved
    beside nothing (its external weights absent: onnxroof never reads them); the path and the node's name."""
    model = onnx.load(str(sample), load_external_data=False)
    node = next(n for n in model.graph.node if n.op_type == op_type and fragment in n.name)
    mutation(node)
    path = tmp_path / "mutant.onnx"
    onnx.save(model, str(path))
    return path, node.name


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_api_names_node_and_attribute(tmp_path: Path, case: str) -> None:
    sample, op_type, fragment, mutation, key, says = CASES[case]
    path, name = _mutant(tmp_path, sample, op_type, fragment, mutation)
    with pytest.raises(MalformedNode) as raised:
        onnxroof.analyze(path, dims={**DIMS[sample], **EXTRA.get(sample, {})})
    message = str(raised.value)
    assert f":{name} " in message and key in message and says in message
    assert "\n" not in message


@pytest.mark.parametrize("case", ["MatMulNBits without K", "Attention with num_heads=0", "Cast to=1099511627776"])
def test_cli_exits_2_with_one_line(tmp_path: Path, case: str) -> None:
    sample, op_type, fragment, mutation, key, says = CASES[case]
    path, name = _mutant(tmp_path, sample, op_type, fragment, mutation)
    dims = [arg for k, v in {**DIMS[sample], **EXTRA.get(sample, {})}.items() for arg in ("--dim", f"{k}={v}")]
    result = invoke("report", path, *dims)
    assert result.exit_code == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and name in errors[0] and key in errors[0] and says in errors[0], result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr


# ------------------------------------------------------------------------------ the contract, node by node
def _cost(op_type: str, inputs, outputs, domain: str = "", opset: int = 17, **attrs) -> None:
    op = make_op(op_type, inputs, outputs, opset=opset, domain=domain, **attrs)
    entry = REGISTRY.lookup(domain, op_type)
    assert entry is not None
    evaluate(op, entry)


def test_einsum_without_equation_names_the_attribute() -> None:
    with pytest.raises(MalformedNode, match=r"node 0:Einsum \(Einsum\): required attribute 'equation' is missing"):
        _cost("Einsum", [((2, 3), "float32"), ((3, 4), "float32")], [((2, 4), "float32")], opset=12)


def test_einsum_without_equation_in_a_file_is_refused_by_the_checker_naming_it() -> None:
    x = helper.make_tensor_value_info("a", onnx.TensorProto.FLOAT, [2, 3])
    w = helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, [3, 4])
    y = helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4])
    graph = helper.make_graph([helper.make_node("Einsum", ["a", "b"], ["y"], name="es")], "g", [x, w], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ModelError, match=r"Required attribute 'equation' is missing.*node 'es', Einsum"):
        onnxroof.analyze(model)


@pytest.mark.parametrize("rank", [2, 4])
def test_group_query_attention_query_of_another_rank(rank: int) -> None:
    query = ((1,) * (rank - 1) + (64,), "float32")
    with pytest.raises(MalformedNode, match=rf"input query '.*' has rank {rank}.*needs rank 3"):
        _cost("GroupQueryAttention", [query], [query], domain="com.microsoft", num_heads=4, kv_num_heads=2)


def test_contrib_attention_input_of_another_rank() -> None:
    x, w = ((1, 1, 8, 64), "float32"), ((64, 192), "float32", "weight")
    with pytest.raises(MalformedNode, match=r"input 'in0' has rank 4.*needs rank 3"):
        _cost("Attention", [x, w], [x], domain="com.microsoft", num_heads=4)


def test_group_query_attention_without_kv_num_heads() -> None:
    query = ((1, 8, 64), "float32")
    with pytest.raises(
        MalformedNode, match=r"\(com.microsoft::GroupQueryAttention\): required attribute 'kv_num_heads'"
    ):
        _cost("GroupQueryAttention", [query], [query], domain="com.microsoft", num_heads=4)


def test_onnx_attention_with_4d_inputs_needs_no_head_counts() -> None:
    """ONNX requires ``q_num_heads``/``kv_num_heads`` only for 3D inputs: a 4D attention without them is valid."""
    q = ((1, 4, 8, 16), "float32")
    _cost("Attention", [q, q, q], [q], opset=23)


def test_dtype_zero_is_not_refused() -> None:
    """UNDEFINED (0) is in the enum: QuantizeLinear's ``output_dtype`` defaults to it ("infer from the zero point")."""
    _cost("QuantizeLinear", [((4,), "float32"), ((), "float32", "weight")], [((4,), "uint8")], opset=21)


def test_gather_block_quantized_on_scalar_data() -> None:
    # found by the 5,000-mutant campaign (seed 2, #1293): a Loop swapped to GatherBlockQuantized, a modulo by zero
    data, index = ((), "uint8", "weight"), ((1,), "int64")
    with pytest.raises(MalformedNode, match=r"data 'in0' is a scalar"):
        _cost("GatherBlockQuantized", [data, index, ((), "float32")], [((1,), "float32")], domain="com.microsoft")


@pytest.mark.parametrize("shape", [(), (8,), (2, 8)])
def test_rotary_embedding_on_an_input_of_another_rank(shape: tuple[int, ...]) -> None:
    # found by the 5,000-mutant campaign (seed 2, #2029): a Loop swapped to RotaryEmbedding, an index error
    x, positions, cache = (shape, "float32"), ((1,), "int64"), ((16, 4), "float32", "weight")
    with pytest.raises(MalformedNode, match=rf"has rank {len(shape)}.*rank-3 or rank-4 input"):
        _cost("RotaryEmbedding", [x, positions, cache, cache], [(shape, "float32")], domain="com.microsoft")
