"""The calibration micro-benchmarks: small ONNX models built in memory with ``onnx.helper``.

A :class:`Probe` is ``k`` copies of one op, chained (same shape in and out) or fanned out from one input;
``build(k)`` makes the model and ``feeds`` its random inputs. :func:`efficiency_probes` lists the efficiency probes (a
few per op class at sizes typical of small CNNs and transformers), :func:`peak_probes` the large MatMul and
Conv of the peak measurements, :func:`stream_probe` the Relu chains of the bandwidth sweep and
:func:`tiny_probe` the ``Neg`` on 16 floats whose chains give the overheads.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnxroof.core.frozen import frozen_dataclass

OPSET = 17
IR_VERSION = 8


_NP_OF: dict[int, type[np.generic]] = {
    TensorProto.FLOAT: np.float32,
    TensorProto.FLOAT16: np.float16,
    TensorProto.DOUBLE: np.float64,
    TensorProto.UINT8: np.uint8,
    TensorProto.INT8: np.int8,
    TensorProto.INT64: np.int64,
}


def _model(
    nodes: list[onnx.NodeProto],
    inputs: Sequence[tuple[str, int, Sequence[int]]],
    outputs: list[tuple[str, int]],
    initializers: list[TensorProto],
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "calibrate",
        [helper.make_tensor_value_info(name, dtype, list(shape)) for name, dtype, shape in inputs],
        [helper.make_tensor_value_info(name, dtype, None) for name, dtype in outputs],
        initializer=initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="onnxroof")
    model.ir_version = IR_VERSION
    return onnx.shape_inference.infer_shapes(model)  # fills the outputs' shapes, which the checker wants


NodeMaker = Callable[[int, str, str], onnx.NodeProto | list[onnx.NodeProto]]


@frozen_dataclass
class Probe:
    """One micro-benchmark: ``k`` copies of an op, chained (same shape in and out) or fanned out from one input."""

    name: str
    op_class: str
    shape: tuple[int, ...]
    node: NodeMaker  # (copy index, input name, output name) -> the node(s) of one copy
    initializers: Callable[[], list[TensorProto]] = field(default=lambda: [])
    fanout: bool = False
    dtype: int = TensorProto.FLOAT
    out_dtype: int | None = None
    extra_inputs: tuple[tuple[str, int, tuple[int, ...]], ...] = ()
    cost: tuple[float, float] | None = None  # (FLOPs, bytes) per copy, for ops onnxroof has no rule for

    def build(self, copies: int) -> onnx.ModelProto:
        nodes = []
        out_type = self.out_dtype or self.dtype
        if self.fanout:
            outputs = [(f"y{i}", out_type) for i in range(copies)]
            nodes = [n for i in range(copies) for n in _listed(self.node(i, "x", f"y{i}"))]
        else:
            previous = "x"
            for i in range(copies):
                out = "y" if i == copies - 1 else f"t{i}"
                nodes.extend(_listed(self.node(i, previous, out)))
                previous = out
            outputs = [("y", out_type)]
        inputs = [("x", self.dtype, self.shape), *self.extra_inputs]
        return _model(nodes, inputs, outputs, self.initializers())

    def feeds(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        feeds = {"x": _random(self.dtype, self.shape, rng)}
        for name, dtype, shape in self.extra_inputs:
            feeds[name] = _random(dtype, shape, rng)
        return feeds


def _listed(made: onnx.NodeProto | list[onnx.NodeProto]) -> list[onnx.NodeProto]:
    return made if isinstance(made, list) else [made]


def _gelu(i: int, src: str, dst: str) -> list[onnx.NodeProto]:
    """erf-GELU as PyTorch exports it: x · 0.5 · (1 + erf(x / √2)); onnxruntime fuses it into Gelu."""
    t = f"g{i}_"
    return [
        helper.make_node("Div", [src, "sqrt2"], [t + "d"]),
        helper.make_node("Erf", [t + "d"], [t + "e"]),
        helper.make_node("Add", [t + "e", "one"], [t + "a"]),
        helper.make_node("Mul", [src, t + "a"], [t + "m"]),
        helper.make_node("Mul", [t + "m", "half"], [dst]),
    ]


def _skip_layernorm(i: int, src: str, dst: str) -> list[onnx.NodeProto]:
    """Residual Add + LayerNormalization on 3-D tensors; onnxruntime fuses it into SkipLayerNormalization."""
    return [
        helper.make_node("Add", [src, "r"], [f"s{i}"]),
        helper.make_node("LayerNormalization", [f"s{i}", "g", "b"], [dst], axis=-1),
    ]


def _scalar(name: str, value: float) -> Callable[[], TensorProto]:
    return lambda: _init(name, np.array(value, dtype=np.float32))


def _random(dtype: int, shape: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    np_type = _NP_OF[dtype]
    if np.issubdtype(np_type, np.integer):
        return rng.integers(0, 8, size=tuple(shape)).astype(np_type)
    count = int(np.prod(shape))
    if count > 1 << 22:  # large streaming inputs: a constant is as good and much faster to make
        return np.full(tuple(shape), 0.5, dtype=np_type)
    return rng.standard_normal(tuple(shape)).astype(np_type)


def _init(name: str, array: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(array, name)


def _weights(
    name: str, shape: Sequence[int], fan_in: int, dtype=np.float32, seed: int = 0
) -> Callable[[], TensorProto]:
    def make() -> TensorProto:
        rng = np.random.default_rng(seed)
        return _init(name, (rng.standard_normal(tuple(shape)) / math.sqrt(fan_in)).astype(dtype))

    return make


def _inits(*makers: Callable[[], TensorProto]) -> Callable[[], list[TensorProto]]:
    return lambda: [make() for make in makers]


def _unary(op: str, **attrs) -> NodeMaker:
    return lambda i, src, dst: helper.make_node(op, [src], [dst], name=f"{op}_{i}", **attrs)


def _with(op: str, *others: str, **attrs) -> NodeMaker:
    return lambda i, src, dst: helper.make_node(op, [src, *others], [dst], name=f"{op}_{i}", **attrs)


def _alternating(op: str, first: str, second: str, **attrs) -> NodeMaker:
    return lambda i, src, dst: helper.make_node(op, [src, first if i % 2 == 0 else second], [dst], **attrs)


def matmul_probe(m: int, k: int, n: int) -> Probe:
    """A chain X[m,k]·W[k,n]·W'[n,k]·... (square when k == n)."""
    if k == n:
        weights = _inits(_weights("W", (k, k), k))
        return Probe(f"MatMul {m}×{k}·{k}×{n}", "matmul", (m, k), _with("MatMul", "W"), weights)
    return Probe(
        f"MatMul {m}×{k}·{k}×{n} and back",
        "matmul",
        (m, k),
        _alternating("MatMul", "W1", "W2"),
        _inits(_weights("W1", (k, n), k), _weights("W2", (n, k), n, seed=1)),
    )


def _conv(c: int, hw: int, kernel: int = 3, group: int = 1, c_mid: int | None = None) -> Probe:
    pad = kernel // 2
    attrs = {"pads": [pad] * 4, "group": group}
    kind = "depthwise" if group > 1 else "conv"
    if c_mid is None:
        return Probe(
            f"Conv {kernel}×{kernel} {c}→{c} {hw}×{hw}" + (f" group {group}" if group > 1 else ""),
            kind,
            (1, c, hw, hw),
            _with("Conv", "W", **attrs),
            _inits(_weights("W", (c, c // group, kernel, kernel), c // group * kernel * kernel)),
        )
    return Probe(
        f"Conv {kernel}×{kernel} {c}→{c_mid}→{c} {hw}×{hw}",
        kind,
        (1, c, hw, hw),
        _alternating("Conv", "W1", "W2", **attrs),
        _inits(
            _weights("W1", (c_mid, c, kernel, kernel), c * kernel * kernel),
            _weights("W2", (c, c_mid, kernel, kernel), c_mid * kernel * kernel, seed=1),
        ),
    )


def _ones(name: str, shape: Sequence[int], value: float = 1.0) -> Callable[[], TensorProto]:
    return lambda: _init(name, np.full(tuple(shape), value, dtype=np.float32))


def _zeros(name: str, shape: Sequence[int]) -> Callable[[], TensorProto]:
    return _ones(name, shape, 0.0)


def efficiency_probes(quick: bool) -> list[Probe]:
    """The efficiency probes: a few per op class, at sizes typical of small CNNs and transformers."""
    bn = ("scale", "bias", "mean", "var")
    probes = [
        matmul_probe(128, 64, 64),
        matmul_probe(128, 64, 256),
        matmul_probe(1, 1024, 1024),
        matmul_probe(256, 256, 256),
        _conv(16, 32),
        _conv(64, 56),
        _conv(64, 28, kernel=1, c_mid=256),
        _conv(256, 14),
        _conv(32, 32, group=32),
        _conv(128, 28, group=128),
        Probe(
            "Add [1,64,56,56] + constant",
            "elementwise",
            (1, 64, 56, 56),
            _with("Add", "c"),
            _inits(_ones("c", (1, 64, 56, 56))),
        ),
        Probe("Relu [1,16,32,32]", "elementwise", (1, 16, 32, 32), _unary("Relu")),
        Probe("Mul [128,256] × constant", "elementwise", (128, 256), _with("Mul", "c"), _inits(_ones("c", (256,)))),
        Probe("Sigmoid [128,256]", "activation", (128, 256), _unary("Sigmoid")),
        Probe("Erf [128,256]", "activation", (128, 256), _unary("Erf")),
        Probe(
            "erf-GELU [128,256]",
            "activation",
            (128, 256),
            _gelu,
            _inits(_scalar("sqrt2", math.sqrt(2.0)), _scalar("one", 1.0), _scalar("half", 0.5)),
        ),
        Probe(
            "LayerNormalization [128,64]",
            "normalization",
            (128, 64),
            _with("LayerNormalization", "g", "b", axis=-1),
            _inits(_ones("g", (64,)), _zeros("b", (64,))),
        ),
        Probe(
            "LayerNormalization [128,768]",
            "normalization",
            (128, 768),
            _with("LayerNormalization", "g", "b", axis=-1),
            _inits(_ones("g", (768,)), _zeros("b", (768,))),
        ),
        Probe(
            "Add + LayerNormalization [1,128,64]",
            "skip_normalization",
            (1, 128, 64),
            _skip_layernorm,
            _inits(_ones("g", (64,)), _zeros("b", (64,))),
            extra_inputs=(("r", TensorProto.FLOAT, (1, 128, 64)),),
        ),
        Probe(
            "BatchNormalization [1,64,56,56]",
            "elementwise",
            (1, 64, 56, 56),
            _with("BatchNormalization", *bn),
            _inits(_ones("scale", (64,)), _zeros("bias", (64,)), _zeros("mean", (64,)), _ones("var", (64,))),
        ),
        Probe("LRN size 5 [1,64,56,56]", "lrn", (1, 64, 56, 56), _unary("LRN", size=5)),
        Probe("Softmax [4,128,128]", "softmax", (4, 128, 128), _unary("Softmax", axis=-1)),
        Probe("Softmax [1,1000]", "softmax", (1, 1000), _unary("Softmax", axis=-1)),
        Probe(
            "MaxPool 3×3 s2 [1,64,112,112]",
            "pooling",
            (1, 64, 112, 112),
            _unary("MaxPool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
            fanout=True,
        ),
        Probe("GlobalAveragePool [1,512,7,7]", "pooling", (1, 512, 7, 7), _unary("GlobalAveragePool"), fanout=True),
        Probe(
            "AveragePool 3×3 s1 [1,64,28,28]",
            "pooling",
            (1, 64, 28, 28),
            _unary("AveragePool", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        ),
        Probe(
            "ReduceMean last axis [128,256]",
            "reduction",
            (128, 256),
            _unary("ReduceMean", axes=[-1], keepdims=1),
            fanout=True,
        ),
        Probe(
            "Transpose [1,128,4,16] (0,2,1,3)",
            "movement",
            (1, 128, 4, 16),
            _unary("Transpose", perm=[0, 2, 1, 3]),
            fanout=True,  # chained, onnxruntime would cancel each pair of transposes
        ),
        Probe(
            "Concat 2×[1,64,28,28]",
            "movement",
            (1, 64, 28, 28),
            lambda i, src, dst: helper.make_node("Concat", [src, src], [dst], axis=1),
            fanout=True,
        ),
        Probe(
            "Gather 128 rows of [1000,64]",
            "indexing",
            (1, 128),
            lambda i, src, dst: helper.make_node("Gather", ["table", src], [dst], axis=0),
            _inits(_weights("table", (1000, 64), 1)),
            fanout=True,
            dtype=TensorProto.INT64,
            out_dtype=TensorProto.FLOAT,
        ),
        Probe(
            "LSTM hidden 32, 32 steps",
            "recurrent",
            (32, 1, 16),
            lambda i, src, dst: helper.make_node("LSTM", [src, "W", "R", "B"], ["", dst], hidden_size=32),
            _inits(_weights("W", (1, 128, 16), 16), _weights("R", (1, 128, 32), 32, seed=1), _zeros("B", (1, 256))),
            fanout=True,
        ),
    ]
    if not quick:
        return probes
    first: dict[str, Probe] = {}
    for probe in probes:
        first.setdefault(probe.op_class, probe)
    return list(first.values())


def _typed_matmul_probe(n: int, np_dtype: type, onnx_dtype: int, label: str) -> Probe:
    """A square n×n·n×n MatMul probe in a non-fp32 float type (the peak of that precision)."""
    return Probe(
        f"MatMul {n}×{n}·{n}×{n} {label}",
        "matmul",
        (n, n),
        _with("MatMul", "W"),
        _inits(_weights("W", (n, n), n, dtype=np_dtype)),
        dtype=onnx_dtype,
    )


def peak_probes(quick: bool) -> list[tuple[str, Probe]]:
    """(precision, probe) for the peak measurements: large MatMuls, and a large Conv for fp32."""
    n = 256 if quick else 1024
    fp64 = 128 if quick else 512
    return [
        ("fp32", matmul_probe(n, n, n)),
        ("fp32", _conv(32 if quick else 128, 28)),
        ("fp64", _typed_matmul_probe(fp64, np.float64, TensorProto.DOUBLE, "fp64")),
        ("fp16", _typed_matmul_probe(n, np.float16, TensorProto.FLOAT16, "fp16")),
        (
            "int8",
            Probe(
                f"MatMulInteger {n}×{n}·{n}×{n} u8·s8",
                "matmul",
                (n, n),
                _with("MatMulInteger", "W"),
                lambda: [_init("W", np.random.default_rng(0).integers(-8, 8, (n, n)).astype(np.int8))],
                fanout=True,
                dtype=TensorProto.UINT8,
                out_dtype=TensorProto.INT32,
                cost=(2.0 * n**3, 6.0 * n * n),
            ),
        ),
    ]


def stream_probe(elements: int) -> Probe:
    return Probe(f"Relu [{elements}]", "elementwise", (elements,), _unary("Relu"))


def tiny_probe() -> Probe:
    return Probe("Neg [16]", "elementwise", (16,), _unary("Neg"))


def sweep_sizes(quick: bool) -> list[int]:
    """Working sets (bytes: one fp32 tensor read + one written) of the bandwidth sweep."""
    if quick:
        return [2**18, 2**21, 2**24, 2**26]
    return [2**k for k in range(16, 29)]  # 64 kB .. 256 MB
