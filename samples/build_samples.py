"""Build the bundled sample models: small but real architectures, exported the way PyTorch exports them.

Run ``python samples/build_samples.py [OUT_DIR]`` to (re)write ``tiny_cnn.onnx``, ``tiny_transformer.onnx``
and ``tiny_lstm.onnx`` (into this folder by default). The output is deterministic: weights come from a
seeded NumPy generator and the protos are built in a fixed order, so every run writes the same bytes.
Each model is checked with ``onnx.checker.check_model(full_check=True)`` and run once in onnxruntime
(``CPUExecutionProvider``) on random inputs, to prove it is a real executable model.

Also importable (the tests do): :data:`SAMPLES` maps each file name to its builder and :func:`build_all`
writes them all.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
#: IR version 8 (onnx 1.12/1.13) so that older onnxruntime releases load the files too.
IR_VERSION = 8
PRODUCER = "onnxroof/samples"
HERE = Path(__file__).resolve().parent


class GraphBuilder:
    """Accumulates nodes and initializers, naming nodes and values the way the PyTorch exporter does
    (``/scope/sub/MatMul`` producing ``/scope/sub/MatMul_output_0``)."""

    def __init__(self, seed: int) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        # RandomState, not default_rng: NumPy freezes the legacy stream (NEP 19), so the bytes stay the same
        # across NumPy versions and the checked-in files stay reproducible.
        self.rng = np.random.RandomState(seed)
        self._scope: list[str] = []
        self._used: Counter[str] = Counter()

    @contextmanager
    def scope(self, name: str) -> Iterator[None]:
        self._scope.append(name)
        try:
            yield
        finally:
            self._scope.pop()

    def _node_name(self, op_type: str) -> str:
        base = "/" + "/".join([*self._scope, op_type])
        n = self._used[base]
        self._used[base] += 1
        return base if n == 0 else f"{base}_{n}"

    def op(self, op_type: str, inputs: Sequence[str], n_out: int = 1, **attrs: object) -> str:
        """Add a node; return its first output's name (see :meth:`op_multi` for more)."""
        return self.op_multi(op_type, inputs, n_out, **attrs)[0]

    def op_multi(self, op_type: str, inputs: Sequence[str], n_out: int, **attrs: object) -> list[str]:
        name = self._node_name(op_type)
        outputs = [f"{name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outputs, name=name, **attrs))
        return outputs

    def const(self, value: object, dtype: type = np.int64) -> str:
        """A ``Constant`` node (scalars and shape vectors, as the exporter emits them)."""
        array = np.asarray(value, dtype=dtype)
        name = self._node_name("Constant")
        out = f"{name}_output_0"
        self.nodes.append(helper.make_node("Constant", [], [out], name=name, value=numpy_helper.from_array(array, out)))
        return out

    def weight(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def randn(self, name: str, shape: Sequence[int], std: float | None = None) -> str:
        """A float32 weight drawn from N(0, std²); std defaults to 1/sqrt(fan_in) (fan_in = prod(shape[1:]))."""
        if std is None:
            fan_in = math.prod(shape[1:]) if len(shape) > 1 else shape[0]
            std = 1.0 / math.sqrt(fan_in)
        return self.weight(name, (self.rng.standard_normal(tuple(shape)) * std).astype(np.float32))

    def uniform(self, name: str, shape: Sequence[int], low: float, high: float) -> str:
        return self.weight(name, self.rng.uniform(low, high, tuple(shape)).astype(np.float32))

    def model(
        self,
        graph_name: str,
        inputs: Sequence[onnx.ValueInfoProto],
        outputs: Sequence[onnx.ValueInfoProto],
        doc: str,
    ) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, graph_name, list(inputs), list(outputs), self.initializers)
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name=PRODUCER,
            producer_version="0.1.0",
            doc_string=doc,
        )
        model.ir_version = IR_VERSION
        return model


# --------------------------------------------------------------------------------------------------- CNN


def _conv_bn(
    g: GraphBuilder,
    x: str,
    name: str,
    c_in: int,
    c_out: int,
    k: int,
    stride: int = 1,
    group: int = 1,
) -> str:
    """Conv (no bias) + BatchNormalization (inference), as a torchvision ``Conv2d(bias=False) + BatchNorm2d``."""
    with g.scope(name):
        w = g.randn(f"{name}.conv.weight", (c_out, c_in // group, k, k))
        pad = k // 2
        y = g.op(
            "Conv", [x, w], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4, group=group, dilations=[1, 1]
        )
        scale = g.uniform(f"{name}.bn.weight", (c_out,), 0.5, 1.5)
        bias = g.uniform(f"{name}.bn.bias", (c_out,), -0.1, 0.1)
        mean = g.uniform(f"{name}.bn.running_mean", (c_out,), -0.1, 0.1)
        var = g.uniform(f"{name}.bn.running_var", (c_out,), 0.5, 1.5)
        return g.op("BatchNormalization", [y, scale, bias, mean, var], epsilon=1e-5, momentum=0.9)


def _basic_block(g: GraphBuilder, x: str, name: str, c_in: int, c_out: int, stride: int) -> str:
    """A ResNet BasicBlock: conv3x3-BN-ReLU-conv3x3-BN + shortcut, Add, ReLU."""
    with g.scope(name):
        y = _conv_bn(g, x, f"{name}.conv1", c_in, c_out, 3, stride)
        y = g.op("Relu", [y])
        y = _conv_bn(g, y, f"{name}.conv2", c_out, c_out, 3)
        shortcut = x if stride == 1 and c_in == c_out else _conv_bn(g, x, f"{name}.downsample", c_in, c_out, 1, stride)
        y = g.op("Add", [y, shortcut])
        return g.op("Relu", [y])


def build_tiny_cnn() -> onnx.ModelProto:
    """ResNet-style stem and two BasicBlocks, a MobileNet-style depthwise-separable stage, a classifier."""
    g = GraphBuilder(seed=1)
    x = _conv_bn(g, "image", "stem", 3, 16, 3, stride=2)  # [b, 16, 32, 32]
    x = g.op("Relu", [x])
    x = _basic_block(g, x, "layer1", 16, 16, stride=1)  # [b, 16, 32, 32]
    x = _basic_block(g, x, "layer2", 16, 32, stride=2)  # [b, 32, 16, 16]
    with g.scope("dw"):
        x = _conv_bn(g, x, "dw", 32, 32, 3, group=32)  # depthwise
        x = g.op("Clip", [x, g.const(0.0, np.float32), g.const(6.0, np.float32)])  # ReLU6
    with g.scope("pw"):
        w = g.randn("pw.weight", (64, 32, 1, 1))
        b = g.uniform("pw.bias", (64,), -0.1, 0.1)
        x = g.op(
            "Conv", [x, w, b], kernel_shape=[1, 1], strides=[1, 1], pads=[0, 0, 0, 0], group=1, dilations=[1, 1]
        )  # [b, 64, 16, 16]
        x = g.op("Relu", [x])
    with g.scope("head"):
        x = g.op("GlobalAveragePool", [x])  # [b, 64, 1, 1]
        x = g.op("Flatten", [x], axis=1)  # [b, 64]
        w = g.randn("fc.weight", (10, 64))
        b = g.uniform("fc.bias", (10,), -0.1, 0.1)
        x = g.op("Gemm", [x, w, b], alpha=1.0, beta=1.0, transB=1)
        g.nodes.append(helper.make_node("Softmax", [x], ["probs"], name="/head/Softmax", axis=1))
    return g.model(
        "tiny_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 64, 64])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])],
        "ResNet-style stem + 2 BasicBlocks (one with a strided 1x1 projection), depthwise conv + ReLU6, "
        "pointwise conv, global average pool, linear classifier, softmax.",
    )


# --------------------------------------------------------------------------------------------- transformer

HIDDEN, HEADS, FFN, VOCAB, MAX_POS, LAYERS = 64, 4, 256, 1000, 128, 2
HEAD_DIM = HIDDEN // HEADS


def _linear(g: GraphBuilder, x: str, name: str, n_in: int, n_out: int) -> str:
    """``nn.Linear`` as exported for 3-D inputs: MatMul by the transposed weight, then Add of the bias."""
    with g.scope(name):
        w = g.randn(f"{name}.weight_t", (n_in, n_out), std=1.0 / math.sqrt(n_in))
        b = g.uniform(f"{name}.bias", (n_out,), -0.02, 0.02)
        return g.op("Add", [g.op("MatMul", [x, w]), b])


def _layer_norm(g: GraphBuilder, x: str, name: str) -> str:
    with g.scope(name):
        scale = g.uniform(f"{name}.weight", (HIDDEN,), 0.9, 1.1)
        bias = g.uniform(f"{name}.bias", (HIDDEN,), -0.02, 0.02)
        return g.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=1e-12)


def _dim(g: GraphBuilder, x: str, axis: int) -> str:
    """``x.size(axis)`` as a 1-D tensor: Shape, Gather, Unsqueeze."""
    d = g.op("Gather", [g.op("Shape", [x]), g.const(axis)], axis=0)
    return g.op("Unsqueeze", [d, g.const([0])])


def _bert_layer(g: GraphBuilder, x: str, i: int) -> str:
    name = f"encoder.layer.{i}"
    with g.scope(name):
        with g.scope("attention"):
            b, s = _dim(g, x, 0), _dim(g, x, 1)
            heads_shape = g.op("Concat", [b, s, g.const([HEADS]), g.const([HEAD_DIM])], axis=0)
            q = _linear(g, x, f"{name}.attention.query", HIDDEN, HIDDEN)
            k = _linear(g, x, f"{name}.attention.key", HIDDEN, HIDDEN)
            v = _linear(g, x, f"{name}.attention.value", HIDDEN, HIDDEN)
            q = g.op("Transpose", [g.op("Reshape", [q, heads_shape])], perm=[0, 2, 1, 3])  # [b, h, s, d]
            k = g.op("Transpose", [g.op("Reshape", [k, heads_shape])], perm=[0, 2, 3, 1])  # [b, h, d, s]
            v = g.op("Transpose", [g.op("Reshape", [v, heads_shape])], perm=[0, 2, 1, 3])  # [b, h, s, d]
            scores = g.op("MatMul", [q, k])  # [b, h, s, s]
            scores = g.op("Div", [scores, g.const(math.sqrt(HEAD_DIM), np.float32)])
            probs = g.op("Softmax", [scores], axis=-1)
            ctx = g.op("MatMul", [probs, v])  # [b, h, s, d]
            ctx = g.op("Transpose", [ctx], perm=[0, 2, 1, 3])  # [b, s, h, d]
            merge_shape = g.op("Concat", [_dim(g, ctx, 0), _dim(g, ctx, 1), g.const([HIDDEN])], axis=0)
            ctx = g.op("Reshape", [ctx, merge_shape])  # [b, s, HIDDEN]
            out = _linear(g, ctx, f"{name}.attention.output.dense", HIDDEN, HIDDEN)
            x = _layer_norm(g, g.op("Add", [out, x]), f"{name}.attention.output.LayerNorm")
        with g.scope("ffn"):
            h = _linear(g, x, f"{name}.intermediate.dense", HIDDEN, FFN)
            # GELU(erf) exactly as torch.onnx exports nn.GELU(): x * 0.5 * (1 + erf(x / sqrt(2)))
            e = g.op("Erf", [g.op("Div", [h, g.const(1.4142135381698608, np.float32)])])
            h = g.op("Mul", [g.op("Mul", [h, g.op("Add", [e, g.const(1.0, np.float32)])]), g.const(0.5, np.float32)])
            out = _linear(g, h, f"{name}.output.dense", FFN, HIDDEN)
            return _layer_norm(g, g.op("Add", [out, x]), f"{name}.output.LayerNorm")


def build_tiny_transformer() -> onnx.ModelProto:
    """A 2-layer post-LN BERT encoder (hidden 64, 4 heads, FFN 256, vocabulary 1000, 128 positions)."""
    g = GraphBuilder(seed=2)
    with g.scope("embeddings"):
        table = g.randn("embeddings.word_embeddings.weight", (VOCAB, HIDDEN), std=0.02)
        words = g.op("Gather", [table, "input_ids"], axis=0)  # [b, s, HIDDEN]
        positions = g.randn("embeddings.position_embeddings.weight", (MAX_POS, HIDDEN), std=0.02)
        seq = _dim(g, "input_ids", 1)
        pos = g.op("Slice", [positions, g.const([0]), seq, g.const([0]), g.const([1])])  # [s, HIDDEN]
        x = _layer_norm(g, g.op("Add", [words, pos]), "embeddings.LayerNorm")
    for i in range(LAYERS):
        x = _bert_layer(g, x, i)
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="/Identity"))
    return g.model(
        "tiny_transformer",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", HIDDEN])],
        "2-layer post-LN BERT encoder: hidden 64, 4 heads, FFN 256 with erf GELU, vocabulary 1000, "
        "up to 128 positions.",
    )


# --------------------------------------------------------------------------------------------------- LSTM


def build_tiny_lstm() -> onnx.ModelProto:
    """One forward LSTM layer (input 16, hidden 32) and a linear head on the last hidden state (→ 4)."""
    g = GraphBuilder(seed=3)
    n_in, n_hidden, n_out = 16, 32, 4
    with g.scope("lstm"):
        std = 1.0 / math.sqrt(n_hidden)
        w = g.uniform("lstm.W", (1, 4 * n_hidden, n_in), -std, std)
        r = g.uniform("lstm.R", (1, 4 * n_hidden, n_hidden), -std, std)
        b = g.uniform("lstm.B", (1, 8 * n_hidden), -std, std)
        _, y_h, _ = g.op_multi("LSTM", ["sequence", w, r, b], 3, hidden_size=n_hidden, direction="forward")
        h = g.op("Squeeze", [y_h, g.const([0])])  # [batch, hidden]
    with g.scope("head"):
        w = g.randn("head.weight", (n_out, n_hidden))
        b = g.uniform("head.bias", (n_out,), -0.1, 0.1)
        g.nodes.append(helper.make_node("Gemm", [h, w, b], ["logits"], name="/head/Gemm", transB=1))
    return g.model(
        "tiny_lstm",
        [helper.make_tensor_value_info("sequence", TensorProto.FLOAT, ["seq", "batch", n_in])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", n_out])],
        "One forward LSTM layer (input 16, hidden 32) over [seq, batch, 16], Gemm on the last hidden state.",
    )


# ------------------------------------------------------------------------------------------------- driver

SAMPLES: dict[str, Callable[[], onnx.ModelProto]] = {
    "tiny_cnn.onnx": build_tiny_cnn,
    "tiny_transformer.onnx": build_tiny_transformer,
    "tiny_lstm.onnx": build_tiny_lstm,
}


def sample_inputs(model: onnx.ModelProto, batch: int = 2, seq: int = 16, seed: int = 0) -> dict[str, np.ndarray]:
    """Random feeds for ``model``'s inputs with the symbolic dims bound (``batch``, ``seq``)."""
    rng = np.random.default_rng(seed)
    bound = {"batch": batch, "seq": seq}
    feeds = {}
    for value in model.graph.input:
        t = value.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else bound[d.dim_param] for d in t.shape.dim]
        if t.elem_type == TensorProto.INT64:
            feeds[value.name] = rng.integers(0, VOCAB, shape, dtype=np.int64)
        else:
            feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def run_once(model: onnx.ModelProto, batch: int = 2, seq: int = 16) -> list[np.ndarray]:
    """Run ``model`` once in onnxruntime (CPU) on random inputs; return its outputs."""
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, sample_inputs(model, batch, seq))


def parameter_count(model: onnx.ModelProto) -> int:
    """Elements in all initializers (weights and buffers such as BatchNorm running statistics)."""
    return sum(math.prod(t.dims) for t in model.graph.initializer)


def build_all(out_dir: Path | str = HERE, check: bool = True) -> dict[str, Path]:
    """Write every sample into ``out_dir``; with ``check``, validate and run each. Returns name → path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, builder in SAMPLES.items():
        model = builder()
        if check:
            onnx.checker.check_model(model, full_check=True)
            run_once(model)
        path = out / name
        path.write_bytes(model.SerializeToString())
        written[name] = path
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", nargs="?", default=str(HERE), help="where to write (default: this folder)")
    args = parser.parse_args(argv)
    for path in build_all(args.out_dir).values():
        model = onnx.load(path, load_external_data=False)
        ops = Counter(n.op_type for n in model.graph.node)
        print(
            f"{path}: {path.stat().st_size} bytes, {parameter_count(model)} initializer elements, "
            f"{len(model.graph.node)} nodes: {dict(sorted(ops.items()))}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
