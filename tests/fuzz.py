"""A seeded mutation fuzzer: malformed models a user can hand onnxroof, and a harness that runs them.

``mutants(seed, count)`` yields :class:`Mutant` values, each one mutation (of one *family*) of a base model:
the three samples, small ``onnx.helper`` models (Conv, Gemm, LSTM, MatMul, Gather, Scan, If, Loop) and the real
LLM, transformer and control-flow files of :mod:`fuzz_kinds` (GenAI int4 Llama and Qwen2, the Optimum merged
decoder, the opset-23 decoder layer, the ORT-optimized BERT, Silero VAD). The families are those a converter
or a hand edit produces:

* ``attributes``  an int/ints/float attribute set to 0, negative, huge or removed;
* ``dims``        an initializer's or value_info's dims changed (data no longer matches), rank 0, 0-sized;
* ``dtypes``      an initializer's data_type changed (complex, unknown numbers, string);
* ``edges``       a node input renamed to an absent or unrelated tensor, an output dropped or duplicated;
* ``op_types``    an op type swapped for another ONNX op or an unknown one;
* ``opsets``      the default opset set to 1, 6, 99, or a second default import;
* ``bytes``       the serialized file truncated, bit-flipped or padded;
* ``external``    an initializer moved to external data with an odd location (``..``, absolute, NUL, a loop);
* ``nesting``     Scan ``num_scan_inputs`` / ``scan_input_axes`` out of range, If/Loop bodies rewired;
* ``rank0``       LSTM/Gemm/MatMul tensors declared with rank 0, weights with dims ``[]``;
* ``input_dims``  an input dim of 2**63-1, 0, or -5;
* ``complex``     complex-valued initializers feeding arithmetic;
* ``attr_removal``, ``contrib_ops``, ``huge_attrs``, ``huge_dims``: issue 25's kinds (:mod:`fuzz_kinds`):
  an attribute removed, an op swapped into a contrib op, attributes of 2**31..2**63-1, dims of 2**31..2**62.

``CLASSIC`` (the first twelve families) over ``CLASSIC_SEEDS`` gives the same stream as before the real-model
seeds came: the suite's first fuzz test keeps it, and a second runs every family over the real-model seeds.

``run_mutant(mutant, folder)`` writes it and runs ``onnxroof report FILE -f json -o OUT`` in-process (typer's
``CliRunner``); its :class:`Outcome` holds the exit code, the stderr lines, whether a file was left on failure
and, for exit 3, the crash site (``file:line`` of the innermost onnxroof frame, from a ``--debug`` rerun).
Used by ``tests/test_fuzz.py`` (~150 mutants) and ``benchmarks/fuzz_campaign.py`` (thousands).
"""

from __future__ import annotations

import inspect
import random
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from fuzz_kinds import KINDS, all_nodes, attr_removal, contrib_ops, huge_attrs, huge_dims, llm_seeds
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parent.parent
CLASSIC = (
    "attributes",
    "dims",
    "dtypes",
    "edges",
    "op_types",
    "opsets",
    "bytes",
    "external",
    "nesting",
    "rank0",
    "input_dims",
    "complex",
)
FAMILIES = (*CLASSIC, *KINDS)
CLASSIC_SEEDS = "classic"
LLM_SEEDS = "llm"
_HUGE = (0, -1, -7, 3, 2**31, 2**62, 2**63 - 1)
_OPS = ("Relu", "Add", "MatMul", "Conv", "Gemm", "Reshape", "Transpose", "Softmax", "LSTM", "Scan", "Gather", "Foo")


@dataclass(frozen=True)
class Mutant:
    family: str
    name: str
    data: bytes
    dims: tuple[str, ...] = ()
    """``--dim`` items binding the base model's symbolic dims."""
    files: dict[str, bytes] = field(default_factory=dict)
    """Extra files beside the model (external data)."""


@dataclass(frozen=True)
class Outcome:
    mutant: Mutant
    exit_code: int
    stderr_lines: int
    left_output: bool
    message: str
    crash_site: str = ""


# ------------------------------------------------------------------------------------------ base models


def _vi(name: str, shape, elem=TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _weight(name: str, shape, seed: int = 0) -> TensorProto:
    return numpy_helper.from_array(np.random.RandomState(seed).rand(*shape).astype(np.float32), name)


def _model(nodes, inputs, outputs, inits=(), opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _body(nodes, inputs, outputs) -> onnx.GraphProto:
    return helper.make_graph(nodes, "body", inputs, outputs)


def small_models() -> dict[str, onnx.ModelProto]:
    """Small valid models covering the rule families the fuzzer aims at."""
    conv = _model(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], strides=[1, 1])],
        [_vi("x", ["batch", 3, 16, 16])],
        [_vi("y", ["batch", 8, 16, 16])],
        [_weight("w", (8, 3, 3, 3)), _weight("b", (8,))],
    )
    gemm = _model(
        [helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)],
        [_vi("x", [2, 16])],
        [_vi("y", [2, 8])],
        [_weight("w", (8, 16)), _weight("b", (8,))],
    )
    lstm = _model(
        [helper.make_node("LSTM", ["x", "w", "r", "b"], ["y", "h"], hidden_size=8)],
        [_vi("x", [5, 1, 4])],
        [_vi("y", [5, 1, 1, 8]), _vi("h", [1, 1, 8])],
        [_weight("w", (1, 32, 4)), _weight("r", (1, 32, 8)), _weight("b", (1, 64))],
    )
    tied = _model(
        [
            helper.make_node("Gather", ["E", "ids"], ["h"]),
            helper.make_node("Transpose", ["E"], ["Et"], perm=[1, 0]),
            helper.make_node("MatMul", ["h", "Et"], ["y"]),
            helper.make_node("Softmax", ["y"], ["p"], axis=-1),
        ],
        [_vi("ids", [1, 4], TensorProto.INT64)],
        [_vi("p", [1, 4, 20])],
        [_weight("E", (20, 8))],
    )
    scan_body = _body(
        [helper.make_node("Add", ["s", "xi"], ["s2"]), helper.make_node("Relu", ["s2"], ["yi"])],
        [_vi("s", [4]), _vi("xi", [4])],
        [_vi("s2", [4]), _vi("yi", [4])],
    )
    scan = _model(
        [helper.make_node("Scan", ["s0", "xs"], ["sN", "ys"], body=scan_body, num_scan_inputs=1)],
        [_vi("s0", [4]), _vi("xs", [6, 4])],
        [_vi("sN", [4]), _vi("ys", [6, 4])],
    )
    branch = [
        _body([helper.make_node(op, ["a"], [f"o{op}"])], [], [_vi(f"o{op}", [3, 4])]) for op in ("Relu", "Sigmoid")
    ]
    if_model = _model(
        [
            helper.make_node("Relu", ["x"], ["a"]),
            helper.make_node("If", ["c"], ["y"], then_branch=branch[0], else_branch=branch[1]),
        ],
        [_vi("x", [3, 4]), _vi("c", [], TensorProto.BOOL)],
        [_vi("y", [3, 4])],
    )
    loop_body = _body(
        [
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            helper.make_node("MatMul", ["v", "w"], ["v2"]),
        ],
        [_vi("i", [], TensorProto.INT64), _vi("cond", [], TensorProto.BOOL), _vi("v", [2, 4])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("v2", [2, 4])],
    )
    trip = numpy_helper.from_array(np.array(3, np.int64), "trip")
    loop = _model(
        [helper.make_node("Loop", ["trip", "", "v0"], ["vN"], body=loop_body)],
        [_vi("v0", [2, 4])],
        [_vi("vN", [2, 4])],
        [trip, _weight("w", (4, 4))],
    )
    return {"conv": conv, "gemm": gemm, "lstm": lstm, "tied": tied, "scan": scan, "if": if_model, "loop": loop}


def base_models(
    seeds: tuple[str, ...] = (CLASSIC_SEEDS, LLM_SEEDS),
) -> dict[str, tuple[onnx.ModelProto, tuple[str, ...], dict[str, bytes]]]:
    """Name -> (model, --dim items binding its symbolic dims, files beside it). ``seeds``: ``CLASSIC_SEEDS``
    (the samples and the small models), ``LLM_SEEDS`` (the real files of :func:`fuzz_kinds.llm_seeds`)."""
    from onnxroof.load.dims import symbolic_dims

    found: dict[str, tuple[onnx.ModelProto, dict[str, bytes]]] = {}
    if CLASSIC_SEEDS in seeds:
        for path in sorted((ROOT / "samples").glob("*.onnx")):
            found[path.stem] = (onnx.load(str(path)), {})
        found.update((name, (model, {})) for name, model in small_models().items())
    if LLM_SEEDS in seeds:
        found.update(llm_seeds())
    return {
        name: (model, tuple(f"{s}=2" for s in symbolic_dims(model)), files) for name, (model, files) in found.items()
    }


# -------------------------------------------------------------------------------------------- mutations


def _copy(model: onnx.ModelProto) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    return copy


def _attributes(model: onnx.ModelProto, rng: random.Random) -> str:
    nodes = [n for n in all_nodes(model.graph) if n.attribute]
    if not nodes:
        node = rng.choice(list(model.graph.node))
        node.attribute.append(helper.make_attribute("axis", rng.choice(_HUGE)))
        return f"{node.op_type}.axis added"
    node = rng.choice(nodes)
    attr = rng.choice(list(node.attribute))
    choice = rng.randrange(4)
    if choice == 0:
        node.attribute.remove(attr)
        return f"{node.op_type}.{attr.name} removed"
    if attr.type == onnx.AttributeProto.INT or choice == 1:
        value = rng.choice(_HUGE)
        node.attribute.remove(attr)
        node.attribute.append(helper.make_attribute(attr.name, value))
        return f"{node.op_type}.{attr.name}={value}"
    if attr.type == onnx.AttributeProto.INTS:
        del attr.ints[:]
        attr.ints.extend(rng.choice(_HUGE) for _ in range(rng.randrange(0, 5)))
        return f"{node.op_type}.{attr.name}={list(attr.ints)}"
    if attr.type == onnx.AttributeProto.FLOAT:
        attr.f = rng.choice((float("nan"), float("inf"), -1.0, 0.0))
        return f"{node.op_type}.{attr.name}={attr.f}"
    node.attribute.remove(attr)
    node.attribute.append(helper.make_attribute(attr.name, "x"))
    return f"{node.op_type}.{attr.name} as a string"


def _dims(model: onnx.ModelProto, rng: random.Random) -> str:
    if model.graph.initializer and rng.random() < 0.6:
        tensor = rng.choice(list(model.graph.initializer))
        del tensor.dims[:]
        tensor.dims.extend(rng.choice((1, 0, 2, 3, 7, 64)) for _ in range(rng.randrange(0, 4)))
        return f"initializer {tensor.name} dims {list(tensor.dims)}"
    values = [v for v in [*model.graph.value_info, *model.graph.output] if v.type.HasField("tensor_type")]
    if not values:
        return "nothing to change"
    value = rng.choice(values)
    shape = value.type.tensor_type.shape
    if shape.dim:
        shape.dim[rng.randrange(len(shape.dim))].dim_value = rng.choice((0, 1, 5, 999))
    else:
        shape.dim.add().dim_value = 3
    return f"value {value.name} dims changed"


def _dtypes(model: onnx.ModelProto, rng: random.Random) -> str:
    tensors = list(model.graph.initializer)
    if not tensors:
        value = rng.choice(list(model.graph.input))
        value.type.tensor_type.elem_type = rng.choice((0, 8, 14, 15, 23, 99))
        return f"input {value.name} elem_type {value.type.tensor_type.elem_type}"
    tensor = rng.choice(tensors)
    tensor.data_type = rng.choice((TensorProto.COMPLEX64, TensorProto.COMPLEX128, TensorProto.STRING, 0, 77, 999))
    return f"initializer {tensor.name} data_type {tensor.data_type}"


def _edges(model: onnx.ModelProto, rng: random.Random) -> str:
    node = rng.choice(all_nodes(model.graph))
    names = [n for other in model.graph.node for n in other.output] + [i.name for i in model.graph.initializer]
    choice = rng.randrange(3)
    if choice == 0 and node.input:
        index = rng.randrange(len(node.input))
        node.input[index] = rng.choice(["", "nowhere", *names])
        return f"{node.op_type} input {index} -> {node.input[index]!r}"
    if choice == 1 and node.output:
        node.output[rng.randrange(len(node.output))] = rng.choice(["", *names])
        return f"{node.op_type} output renamed"
    node.input.append(rng.choice(["extra", *names]))
    return f"{node.op_type} extra input"


def _op_types(model: onnx.ModelProto, rng: random.Random) -> str:
    node = rng.choice(all_nodes(model.graph))
    old, node.op_type = node.op_type, rng.choice(_OPS)
    if rng.random() < 0.3:
        node.domain = rng.choice(("com.example", "com.microsoft", "ai.onnx.ml"))
    return f"{old} -> {node.domain}::{node.op_type}"


def _opsets(model: onnx.ModelProto, rng: random.Random) -> str:
    choice = rng.randrange(3)
    if choice == 0:
        model.opset_import[0].version = rng.choice((1, 6, 7, 9, 11, 13, 21, 99))
        return f"opset {model.opset_import[0].version}"
    if choice == 1:
        model.opset_import.append(helper.make_opsetid("", 11))
        return "two default opsets"
    model.ir_version = rng.choice((0, 1, 3, 99))
    return f"ir_version {model.ir_version}"


def _nesting(model: onnx.ModelProto, rng: random.Random) -> str:
    control = [n for n in all_nodes(model.graph) if n.op_type in ("Scan", "If", "Loop")]
    if not control:
        return _attributes(model, rng)
    node = rng.choice(control)
    if node.op_type == "Scan":
        name = rng.choice(("num_scan_inputs", "scan_input_axes", "scan_output_axes", "scan_input_directions"))
        for attr in list(node.attribute):
            if attr.name == name:
                node.attribute.remove(attr)
        value = rng.choice((-3, 0, 2, 5, 2**40))
        ints = name != "num_scan_inputs"
        node.attribute.append(helper.make_attribute(name, [value] * rng.randrange(1, 3) if ints else value))
        return f"Scan.{name}={value}"
    body = next(a.g for a in node.attribute if a.type == onnx.AttributeProto.GRAPH)
    choice = rng.randrange(3)
    if choice == 0 and body.output:
        del body.output[-1]
        return f"{node.op_type} body loses an output"
    if choice == 1 and body.node:
        body.node[0].input.append("outer_nowhere")
        return f"{node.op_type} body reads an absent outer tensor"
    body.node.append(helper.make_node(rng.choice(_OPS), [body.node[0].output[0] if body.node else "a"], ["z"]))
    return f"{node.op_type} body gets a node"


def _rank0(model: onnx.ModelProto, rng: random.Random) -> str:
    choice = rng.randrange(2)
    if choice == 0 and model.graph.initializer:
        tensor = rng.choice(list(model.graph.initializer))
        del tensor.dims[:]
        return f"initializer {tensor.name} dims []"
    value = rng.choice(list(model.graph.input))
    del value.type.tensor_type.shape.dim[:]
    return f"input {value.name} rank 0"


def _input_dims(model: onnx.ModelProto, rng: random.Random) -> str:
    value = rng.choice(list(model.graph.input))
    dims = value.type.tensor_type.shape.dim
    size = rng.choice((2**63 - 1, 2**62, 2**40, 0, -5))
    if dims:
        dims[rng.randrange(len(dims))].dim_value = size
    else:
        dims.add().dim_value = size
    return f"input {value.name} dim {size}"


def _complex(model: onnx.ModelProto, rng: random.Random) -> str:
    inline = [t for t in model.graph.initializer if t.data_location != TensorProto.EXTERNAL]
    if not inline:  # an external tensor's data lives beside the seed, not in the mutant
        return _dtypes(model, rng)
    tensor = rng.choice(inline)
    array = numpy_helper.to_array(tensor)
    kind = rng.choice((np.complex64, np.complex128))
    tensor.CopyFrom(numpy_helper.from_array(array.astype(kind), tensor.name))
    return f"initializer {tensor.name} as {np.dtype(kind).name}"


def _external(model: onnx.ModelProto, rng: random.Random, files: dict[str, bytes]) -> str:
    if not model.graph.initializer:
        return _dims(model, rng)
    tensor = rng.choice(list(model.graph.initializer))
    size = len(tensor.raw_data) or 4
    location = rng.choice(("w.bin", "../w.bin", "/etc/passwd", "w\0.bin", "loop.bin", "dir", "", "fifo"))
    for name in ("raw_data", "float_data", "int64_data", "int32_data", "double_data"):
        tensor.ClearField(name)
    tensor.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", str(rng.choice((0, 4, -1)))), ("length", str(size))):
        entry = tensor.external_data.add()
        entry.key, entry.value = key, value
    if location == "w.bin":
        files["w.bin"] = bytes(rng.choice((0, size // 2, size)))
    return f"{tensor.name} external at {location!r}"


MUTATIONS: dict[str, Callable[[onnx.ModelProto, random.Random], str]] = {
    "attributes": _attributes,
    "dims": _dims,
    "dtypes": _dtypes,
    "edges": _edges,
    "op_types": _op_types,
    "opsets": _opsets,
    "nesting": _nesting,
    "rank0": _rank0,
    "input_dims": _input_dims,
    "complex": _complex,
    "attr_removal": attr_removal,
    "contrib_ops": contrib_ops,
    "huge_attrs": huge_attrs,
}


def _mutate_bytes(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    choice = rng.randrange(3)
    if choice == 0:
        cut = rng.randrange(len(data))
        return data[:cut], f"truncated at {cut}"
    if choice == 1:
        buffer = bytearray(data)
        for _ in range(rng.randrange(1, 8)):
            buffer[rng.randrange(len(buffer))] ^= 1 << rng.randrange(8)
        return bytes(buffer), "bits flipped"
    return data + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64))), "padded"


def mutants(
    seed: int,
    count: int,
    families: tuple[str, ...] = FAMILIES,
    seeds: tuple[str, ...] = (CLASSIC_SEEDS, LLM_SEEDS),
) -> Iterator[Mutant]:
    """``count`` mutants, the same for the same seed; the families taken in turn, the base models (of ``seeds``,
    see :func:`base_models`) at random."""
    rng = random.Random(seed)
    bases = base_models(seeds)
    names = sorted(bases)
    for index in range(count):
        family = families[index % len(families)]
        base_name = rng.choice(names)
        base, dims, base_files = bases[base_name]
        model = _copy(base)
        files = dict(base_files)
        if family == "bytes":
            data, what = _mutate_bytes(model.SerializeToString(), rng)
        else:
            if family == "external":
                what = _external(model, rng, files)
            elif family == "huge_dims":
                what, dims = huge_dims(model, rng, dims)
            else:
                what = MUTATIONS[family](model, rng)
            data = model.SerializeToString()
        yield Mutant(family, f"{index}:{base_name}:{what}", data, dims, files)


# ----------------------------------------------------------------------------------------------- runner


def _runner():
    from typer.testing import CliRunner

    if "mix_stderr" in inspect.signature(CliRunner.__init__).parameters:
        return CliRunner(mix_stderr=False)  # type: ignore[call-arg]
    return CliRunner()


def _crash_site(exc_info) -> str:
    frames = [f for f in traceback.extract_tb(exc_info[2]) if "/onnxroof/" in f.filename or "/rules/" in f.filename]
    if not frames:
        frames = traceback.extract_tb(exc_info[2])[-1:]
    if not frames:
        return f"{exc_info[0].__name__}"
    last = frames[-1]
    where = Path(last.filename)
    short = "/".join(where.parts[-2:])
    return f"{short}:{last.lineno} {exc_info[0].__name__}"


class _Hang(BaseException):
    """Raised by the alarm in :func:`run_mutant`: a BaseException, so no ``except Exception`` swallows it."""


def _on_alarm(signum, frame) -> None:
    raise _Hang


def run_mutant(mutant: Mutant, folder: Path, timeout_s: float | None = None) -> Outcome:
    """Write ``mutant`` in ``folder`` and run ``report FILE -f json -o OUT`` on it in-process.

    ``timeout_s``: a run still going after that many seconds is stopped (SIGALRM) and reported as a hang:
    exit code -1, crash site ``hang``."""
    import os
    import signal

    from onnxroof.cli.commands import app

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.onnx"
    path.write_bytes(mutant.data)
    for name, data in mutant.files.items():
        (folder / name).write_bytes(data)
    if not (folder / "loop.bin").is_symlink():
        (folder / "loop.bin").symlink_to(folder / "loop.bin")
    (folder / "dir").mkdir(exist_ok=True)
    if not (folder / "fifo").exists():
        os.mkfifo(folder / "fifo")
    out = folder / "out.json"
    if out.exists():
        out.unlink()
    args = ["report", str(path), "-f", "json", "-o", str(out)]
    for item in mutant.dims:
        args += ["--dim", item]
    env = {"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    previous = signal.signal(signal.SIGALRM, _on_alarm) if timeout_s else None
    try:
        if timeout_s:
            signal.setitimer(signal.ITIMER_REAL, timeout_s)
        result = _runner().invoke(app, args, env=env)
    except _Hang:
        return Outcome(mutant, -1, 0, False, f"still running after {timeout_s} s", "hang")
    finally:
        if timeout_s:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    stderr = result.stderr if result.stderr_bytes is not None else ""
    lines = [line for line in stderr.splitlines() if line.strip()]
    site = ""
    if result.exit_code == 3:
        debug = _runner().invoke(app, [*args, "--debug"], env=env)
        if debug.exc_info is not None and not isinstance(debug.exception, SystemExit):
            site = _crash_site(debug.exc_info)
    message = lines[0] if lines else ""
    failed = result.exit_code not in (0, 1)
    return Outcome(mutant, result.exit_code, len(lines), failed and out.exists(), message, site)
