"""The MLPerf Inference models as ONNX graphs built with ``onnx.helper``, weights in a sparse external file.

``build(shape, folder)`` writes ``folder/<shape>.onnx`` (the graph, a few hundred KB) and
``folder/<shape>.weights`` beside it: one external-data file that every weight points into, created as a
*sparse* file of the right size, so no weight byte is allocated or written (the same trick as
:mod:`llama_shaped`). The batch axis is the symbolic dim ``N``; bind it with ``dims={"N": batch}``. The graphs
are what an exporter writes for inference: BatchNorm already folded into the convolution's weights and bias
(``torch.onnx.export`` in eval mode, TensorFlow's frozen graphs), activations as their own nodes.

Shapes (the builders follow the published architectures; counts checked by :func:`published_counts`):

* ``resnet50``: ResNet-50 v1.5 (stride on the 3x3 of each bottleneck), 224x224, 1000 classes.
* ``ssd-mobilenet``: SSD-MobileNet-v1 as MLPerf's TensorFlow model: MobileNet-v1 (depth 1.0) with SAME
  padding, feature maps at 19x19 (conv11, 512) and 10x10 (conv13, 1024), four extra 1x1 + 3x3/2 layers (512,
  256, 256, 128 channels), 1x1 box predictors with 3 then 6 anchors per position, 91 classes: 1917 boxes.
* ``ssd-resnet34``: MLPerf's SSD-ResNet34 at 1200x1200: ResNet-34 through its third stage with that stage's
  stride set to 1 (150x150, 256 channels), five extra blocks (1x1 then 3x3, strides 2, 2, 2, 2 and 1, the last
  two unpadded) to 75, 38, 19, 9, 7, and 3x3 heads of stride 3 on every map (4, 6, 6, 6, 4, 4 anchors; 81
  classes): 50, 25, 13, 7, 3, 3 positions, 15130 boxes.
* ``retinanet``: MLPerf's RetinaNet at 800x800: ResNeXt-50 32x4d, an FPN on C3-C5 (256 channels, nearest
  upsampling, 3x3 output convs) with P6 and P7 from P5 (3x3/2 convs), and the shared heads (four 3x3 256
  convs + ReLU, then 9x264 class logits or 9x4 box deltas) on P3-P7: 120087 anchors, 264 classes.
* ``resnet18``, ``vgg16``, ``vgg19``, ``mobilenet-v2``: torchvision's models at 224x224 (the ones torch2trt's
  Jetson tables time), BatchNorm folded, ReLU6 as ``Clip``.
* ``bert-large``: BERT-Large (24 layers, hidden 1024, 16 heads, intermediate 4096, vocabulary 30522, 512
  positions) with the SQuAD span head, at sequence ``S`` (384 in MLPerf): embeddings Gathered and summed,
  LayerNormalization, Q/K/V MatMul + Add, attention as MatMul → scale → mask Add → Softmax → MatMul, GELU
  (opset 20 ``Gelu``), residual Adds.

Detection post-processing is part of every detection graph, since MLPerf times it (the engine's last layer): NVIDIA's
engines run it as a TensorRT plugin, written here with the ONNX ops that do the same work (:func:`_ssd_postprocess`,
:func:`_retinanet_postprocess`; their docstrings cite each plugin's parameters). ONNX has no op for the plugins'
threshold filter, so a TopK to the candidate count stands for filter + sort (an upper bound on the work).

Command line: ``python benchmarks/gpu_models.py OUT_DIR [--shape NAME]`` writes the models and prints each
one's parameters and MACs (at batch 1) beside the published counts.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import onnx
from onnx import TensorProto, helper

OPSET = 20  # Gelu (opset 20), LayerNormalization (17)
IR_VERSION = 9
ALIGNMENT = 4096
BATCH = "N"

_TORCHVISION = (
    "torchvision {weights}_Weights.IMAGENET1K_V1: num_params {n}, GFLOPS {g} (multiply-adds) "
    "(https://pytorch.org/vision/stable/models/generated/torchvision.models.{name}.html)"
)

#: Published parameter and MAC counts (one sample), with their sources.
PUBLISHED: dict[str, tuple[float, float, str]] = {
    "resnet50": (
        25.557032e6,
        4.09e9,
        "torchvision ResNet50_Weights.IMAGENET1K_V1: num_params 25,557,032, GFLOPS 4.09 (multiply-adds) "
        "(https://pytorch.org/vision/stable/models/generated/torchvision.models.resnet50.html); MLPerf Inference "
        "paper (Reddi et al., ISCA 2020, arXiv:1911.02549) Table I: 25.6M parameters, 8.2 GOPS/input",
    ),
    "ssd-mobilenet": (
        6.91e6,
        2.47e9 / 2,
        "MLPerf Inference paper (Reddi et al., ISCA 2020, arXiv:1911.02549) Table I: SSD-MobileNet-v1 6.91M "
        "parameters, 2.47 GOPS/input (2 ops per MAC)",
    ),
    "ssd-resnet34": (
        36.3e6,
        433e9 / 2,
        "MLPerf Inference paper (Reddi et al., ISCA 2020, arXiv:1911.02549) Table I: SSD-ResNet-34 36.3M "
        "parameters, 433 GOPS/input at 1200x1200 (2 ops per MAC). The built graph has the same MACs (within "
        "0.1%) but 20.0M parameters: the paper's count is not reconciled here (ResNet-34's unused fourth stage "
        "and classifier, 13.6M, are part of the reference checkpoint but run in no inference)",
    ),
    "retinanet": (
        0.0,
        0.0,
        "no published count found for MLPerf's 264-class RetinaNet; tests/test_gpu_published.py checks its "
        "anchor count, 9 x (100² + 50² + 25² + 13² + 7²) = 120087 at 800x800",
    ),
    "bert-large": (
        335.1e6,
        0.0,
        "Devlin et al. 2019 (arXiv:1810.04805): BERT-Large 340M parameters (rounded); the closed form with the "
        "pooler (1024² + 1024, unused by the SQuAD span head and absent here) is 335.14M",
    ),
    "resnet18": (
        11_689_512,
        1.81e9,
        _TORCHVISION.format(name="resnet18", weights="ResNet18", n="11,689,512", g="1.81"),
    ),
    "vgg16": (138_357_544, 15.47e9, _TORCHVISION.format(name="vgg16", weights="VGG16", n="138,357,544", g="15.47")),
    "vgg19": (143_667_240, 19.63e9, _TORCHVISION.format(name="vgg19", weights="VGG19", n="143,667,240", g="19.63")),
    "mobilenet-v2": (
        3_504_872,
        0.30e9,
        _TORCHVISION.format(name="mobilenet_v2", weights="MobileNet_V2", n="3,504,872", g="0.30"),
    ),
}


class _Graph:
    """Nodes, weights as external-data TensorProtos at 4096-aligned offsets of one (sparse) file, and the
    channel/height/width of every NCHW tensor the CNN builders make (the builders need them for reshapes)."""

    def __init__(self, location: str) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[TensorProto] = []
        self.location = location
        self.offset = 0
        self.count = 0
        self.chw: dict[str, tuple[int, int, int]] = {}

    def name(self, stem: str) -> str:
        self.count += 1
        return f"{stem}_{self.count}"

    def op(self, op_type: str, inputs: Sequence[str], **attrs: object) -> str:
        out = self.name(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=out, **attrs))
        return out

    def weight(self, dims: Sequence[int], data_type: int = TensorProto.FLOAT) -> str:
        """An initializer whose bytes live in the external file (never allocated)."""
        name = self.name("w")
        tensor = TensorProto(name=name, dims=list(dims), data_type=data_type)
        tensor.data_location = TensorProto.EXTERNAL
        size = helper.tensor_dtype_to_np_dtype(data_type).itemsize
        for d in dims:
            size *= d
        for key, value in (("location", self.location), ("offset", str(self.offset)), ("length", str(size))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        self.offset += -(-size // ALIGNMENT) * ALIGNMENT
        self.initializers.append(tensor)
        return name

    def const(self, values: Sequence[int]) -> str:
        """A small int64 constant stored inside the model (shapes, axes)."""
        name = self.name("c")
        self.initializers.append(helper.make_tensor(name, TensorProto.INT64, [len(values)], list(values)))
        return name

    def scalar(self, value: int) -> str:
        name = self.name("c")
        self.initializers.append(helper.make_tensor(name, TensorProto.INT64, [], [value]))
        return name

    def fscalar(self, value: float) -> str:
        name = self.name("c")
        self.initializers.append(helper.make_tensor(name, TensorProto.FLOAT, [], [value]))
        return name

    def conv(self, x: str, cout: int, k: int, s: int = 1, pad: int | None = None, groups: int = 1) -> str:
        """Conv with bias (BatchNorm folded); ``pad`` None = ``k // 2`` on every side."""
        c, h, w = self.chw[x]
        p = k // 2 if pad is None else pad
        out = self.op(
            "Conv",
            [x, self.weight([cout, c // groups, k, k]), self.weight([cout])],
            kernel_shape=[k, k],
            strides=[s, s],
            pads=[p, p, p, p],
            group=groups,
        )
        self.chw[out] = (cout, (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1)
        return out

    def conv_same(self, x: str, cout: int, k: int, s: int = 1, groups: int = 1) -> str:
        """Conv with TensorFlow's SAME padding (``auto_pad=SAME_UPPER``: output = ceil(input / stride))."""
        c, h, w = self.chw[x]
        out = self.op(
            "Conv",
            [x, self.weight([cout, c // groups, k, k]), self.weight([cout])],
            kernel_shape=[k, k],
            strides=[s, s],
            auto_pad="SAME_UPPER",
            group=groups,
        )
        self.chw[out] = (cout, -(-h // s), -(-w // s))
        return out

    def act(self, x: str, op_type: str = "Relu", **attrs: object) -> str:
        out = self.op(op_type, [x], **attrs)
        if x in self.chw:
            self.chw[out] = self.chw[x]
        return out

    def add(self, a: str, b: str) -> str:
        out = self.op("Add", [a, b])
        if a in self.chw:
            self.chw[out] = self.chw[a]
        return out

    def model(self, inputs: list[onnx.ValueInfoProto], outputs: Sequence[str], name: str) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes,
            name,
            inputs,
            [],
            self.initializers,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="onnxroof")
        model.ir_version = IR_VERSION
        # the outputs' types and shapes as ONNX's shape inference gives them (no weight byte is read)
        inferred = {v.name: v for v in onnx.shape_inference.infer_shapes(model).graph.value_info}
        model.graph.output.extend(inferred[o] for o in outputs)
        return model


def _image_input(g: _Graph, size: int) -> tuple[list[onnx.ValueInfoProto], str]:
    g.chw["input"] = (3, size, size)
    return [helper.make_tensor_value_info("input", TensorProto.FLOAT, [BATCH, 3, size, size])], "input"


def _bottleneck(g: _Graph, x: str, width: int, out: int, stride: int, groups: int = 1) -> str:
    """ResNet v1.5 bottleneck: 1x1 → 3x3 (stride here, ``groups`` for ResNeXt) → 1x1, projection shortcut
    when the shape changes, Add, ReLU."""
    y = g.act(g.conv(x, width, 1))
    y = g.act(g.conv(y, width, 3, stride, groups=groups))
    y = g.conv(y, out, 1)
    short = g.conv(x, out, 1, stride) if stride != 1 or g.chw[x][0] != out else x
    return g.act(g.add(y, short))


def _basic(g: _Graph, x: str, out: int, stride: int) -> str:
    """ResNet basic block: 3x3 (stride) → 3x3, projection shortcut when the shape changes, Add, ReLU."""
    y = g.act(g.conv(x, out, 3, stride))
    y = g.conv(y, out, 3)
    short = g.conv(x, out, 1, stride) if stride != 1 or g.chw[x][0] != out else x
    return g.act(g.add(y, short))


def _stem(g: _Graph, x: str) -> str:
    """7x7/2 conv (64) + ReLU, 3x3/2 max pool."""
    y = g.act(g.conv(x, 64, 7, 2))
    c, h, w = g.chw[y]
    out = g.op("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    g.chw[out] = (c, (h - 1) // 2 + 1, (w - 1) // 2 + 1)
    return out


def _resnet50(g: _Graph) -> tuple[list[onnx.ValueInfoProto], list[str]]:
    inputs, x = _image_input(g, 224)
    x = _stem(g, x)
    for i, (blocks, width) in enumerate(((3, 64), (4, 128), (6, 256), (3, 512))):
        for b in range(blocks):
            x = _bottleneck(g, x, width, width * 4, 2 if b == 0 and i > 0 else 1)
    return inputs, [_classifier(g, x, 2048)]


def _resnet18(g: _Graph) -> tuple[list[onnx.ValueInfoProto], list[str]]:
    inputs, x = _image_input(g, 224)
    x = _stem(g, x)
    for i, out in enumerate((64, 128, 256, 512)):
        for b in range(2):
            x = _basic(g, x, out, 2 if b == 0 and i > 0 else 1)
    return inputs, [_classifier(g, x, 512)]


def _classifier(g: _Graph, x: str, channels: int) -> str:
    """Global average pool, Flatten, Gemm to 1000 classes."""
    flat = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    return g.op("Gemm", [flat, g.weight([1000, channels]), g.weight([1000])], transB=1)


def _vgg(layers: Sequence[int]) -> Callable[[_Graph], tuple[list[onnx.ValueInfoProto], list[str]]]:
    """torchvision's VGG: 3x3 convs + ReLU in five stages (64, 128, 256, 512, 512 channels; ``layers`` convs
    each) with 2x2 max pools, then 25088 → 4096 → 4096 → 1000 (Dropout is identity at inference)."""

    def build_vgg(g: _Graph) -> tuple[list[onnx.ValueInfoProto], list[str]]:
        inputs, x = _image_input(g, 224)
        for convs, out in zip(layers, (64, 128, 256, 512, 512), strict=True):
            for _ in range(convs):
                x = g.act(g.conv(x, out, 3))
            c, h, w = g.chw[x]
            pooled = g.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2])
            g.chw[pooled] = (c, h // 2, w // 2)
            x = pooled
        x = g.op("Flatten", [x], axis=1)
        for k, n in ((25088, 4096), (4096, 4096)):
            x = g.op("Relu", [g.op("Gemm", [x, g.weight([n, k]), g.weight([n])], transB=1)])
        return inputs, [g.op("Gemm", [x, g.weight([1000, 4096]), g.weight([1000])], transB=1)]

    return build_vgg


def _mobilenet_v2(g: _Graph) -> tuple[list[onnx.ValueInfoProto], list[str]]:
    """torchvision's MobileNet-v2 (width 1.0): 3x3/2 conv (32), inverted residuals (expand 1x1 + ReLU6,
    depthwise 3x3 + ReLU6, project 1x1; residual Add when stride 1 and channels match) per the paper's table
    (t, c, n, s), 1x1 conv to 1280, pool, 1280 → 1000. ReLU6 as ``Clip(0, 6)``."""
    inputs, x = _image_input(g, 224)
    x = _relu6(g, g.conv(x, 32, 3, 2))
    plan = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1))
    for t, c, n, s in plan:
        for i in range(n):
            cin = g.chw[x][0]
            y = _relu6(g, g.conv(x, cin * t, 1)) if t != 1 else x
            y = _relu6(g, g.conv(y, cin * t, 3, s if i == 0 else 1, groups=cin * t))
            y = g.conv(y, c, 1)
            x = g.add(y, x) if (s if i == 0 else 1) == 1 and cin == c else y
    x = _relu6(g, g.conv(x, 1280, 1))
    return inputs, [_classifier(g, x, 1280)]


def _relu6(g: _Graph, x: str) -> str:
    out = g.op("Clip", [x, g.fscalar(0.0), g.fscalar(6.0)])
    g.chw[out] = g.chw[x]
    return out


def _heads(g: _Graph, maps: Sequence[str], anchors: Sequence[int], classes: int, k: int, stride: int) -> list[str]:
    """Per feature map: box (anchors x 4) and class (anchors x classes) convolutions, each reshaped to
    [N, 4 or classes, boxes] and concatenated over the maps along the boxes axis."""
    locs, confs = [], []
    for m, a in zip(maps, anchors, strict=True):
        loc = g.conv(m, a * 4, k, stride) if k > 1 else g.conv_same(m, a * 4, k, stride)
        conf = g.conv(m, a * classes, k, stride) if k > 1 else g.conv_same(m, a * classes, k, stride)
        locs.append(g.op("Reshape", [loc, g.const([0, 4, -1])]))
        confs.append(g.op("Reshape", [conf, g.const([0, classes, -1])]))
    return [g.op("Concat", locs, axis=2), g.op("Concat", confs, axis=2)]


def _ssd_resnet34(g: _Graph) -> tuple[list[onnx.ValueInfoProto], list[str]]:
    inputs, x = _image_input(g, 1200)
    x = _stem(g, x)
    for i, (blocks, out) in enumerate(((3, 64), (4, 128), (6, 256))):
        for b in range(blocks):
            x = _basic(g, x, out, 2 if b == 0 and i == 1 else 1)  # the third stage keeps stride 1
    maps = [x]
    extras = ((256, 512, 2, 1), (256, 512, 2, 1), (128, 256, 2, 1), (128, 256, 2, 0), (128, 256, 1, 0))
    for mid, out, stride, pad in extras:
        y = g.act(g.conv(maps[-1], mid, 1))
        maps.append(g.act(g.conv(y, out, 3, stride, pad)))
    locs, confs = _heads(g, maps, (4, 6, 6, 6, 4, 4), 81, 3, 3)
    return inputs, _ssd_postprocess(g, locs, confs, 81, 15130, top_k=200, keep_top_k=200, activation="Softmax")


def _ssd_mobilenet(g: _Graph) -> tuple[list[onnx.ValueInfoProto], list[str]]:
    inputs, x = _image_input(g, 300)
    x = g.act(g.conv_same(x, 32, 3, 2), "Relu")
    maps = []
    plan = ((64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)) + ((512, 1),) * 5 + ((1024, 2), (1024, 1))
    for i, (out, stride) in enumerate(plan):
        x = g.act(g.conv_same(x, g.chw[x][0], 3, stride, groups=g.chw[x][0]))  # depthwise 3x3
        x = g.act(g.conv_same(x, out, 1))  # pointwise
        if i in (10, 12):  # conv11 (19x19x512) and conv13 (10x10x1024)
            maps.append(x)
    for mid, out in ((256, 512), (128, 256), (128, 256), (64, 128)):
        y = g.act(g.conv_same(maps[-1], mid, 1))
        maps.append(g.act(g.conv_same(y, out, 3, 2)))
    locs, confs = _heads(g, maps, (3, 6, 6, 6, 6, 6), 91, 1, 1)
    return inputs, _ssd_postprocess(g, locs, confs, 91, 1917, top_k=100, keep_top_k=100, activation="Sigmoid")


def _upsample_add(g: _Graph, top: str, lateral: str) -> str:
    c, h, w = g.chw[lateral]
    n = g.op("Slice", [g.op("Shape", [top]), g.const([0]), g.const([1])])
    sizes = g.op("Concat", [n, g.const([c, h, w])], axis=0)
    up = g.op("Resize", [top, "", "", sizes], mode="nearest")
    g.chw[up] = (c, h, w)
    return g.add(lateral, up)


def _retinanet(g: _Graph) -> tuple[list[onnx.ValueInfoProto], list[str]]:
    inputs, x = _image_input(g, 800)
    x = _stem(g, x)
    stages = []
    for i, (blocks, width) in enumerate(((3, 128), (4, 256), (6, 512), (3, 1024))):
        for b in range(blocks):
            x = _bottleneck(g, x, width, width * 2, 2 if b == 0 and i > 0 else 1, groups=32)
        stages.append(x)
    c3, c4, c5 = stages[1:]
    p5 = g.conv(c5, 256, 1)
    p4 = _upsample_add(g, p5, g.conv(c4, 256, 1))
    p3 = _upsample_add(g, p4, g.conv(c3, 256, 1))
    p3, p4, p5 = (g.conv(p, 256, 3) for p in (p3, p4, p5))
    p6 = g.conv(p5, 256, 3, 2)
    p7 = g.conv(g.act(p6), 256, 3, 2)
    maps = [p3, p4, p5, p6, p7]
    outputs = []
    for width in (9 * 264, 9 * 4):
        # the heads share weights across levels: one set of weights, applied to each map
        shared = [(g.weight([256, 256, 3, 3]), g.weight([256])) for _ in range(4)]
        final = (g.weight([width, 256, 3, 3]), g.weight([width]))
        per_level = []
        for m in maps:
            y = m
            for w, b in shared:
                y = g.act(_conv_with(g, y, w, b, 256))
            z = _conv_with(g, y, final[0], final[1], width)
            per_level.append(g.op("Reshape", [z, g.const([0, width // 9, -1])]))
        outputs.append(g.op("Concat", per_level, axis=2))
    return inputs, _retinanet_postprocess(g, outputs[1], outputs[0], 264, RETINANET_ANCHORS)


RETINANET_ANCHORS = 9 * (100**2 + 50**2 + 25**2 + 13**2 + 7**2)
"""[derived] 9 anchors per position on P3-P7 at 800x800: 9 x (100² + 50² + 25² + 13² + 7²) = 120087."""

EFFICIENT_NMS_CANDIDATES = 4096
"""TensorRT's EfficientNMS plugin: "After sorting, the highest 4096 scores are processed by the EfficientNMS CUDA
kernel" (NVIDIA/TensorRT plugin/efficientNMSPlugin/README.md, "Process Description")."""


def _batch_offsets(g: _Graph, x: str, per_sample: int) -> str:
    """``[N, 1, 1]`` int64: ``n · per_sample`` for each sample ``n`` of ``x``'s batch (to index a flattened
    ``[N · per_sample, ...]`` tensor per sample)."""
    n = g.op("Squeeze", [g.op("Slice", [g.op("Shape", [x]), g.const([0]), g.const([1])]), g.const([0])])
    rows = g.op("Mul", [g.op("Range", [g.scalar(0), n, g.scalar(1)]), g.scalar(per_sample)])
    return g.op("Unsqueeze", [rows, g.const([1, 2])])


def _decode(g: _Graph, deltas: str, priors: str) -> str:
    """Center-size box decoding of ``deltas`` against ``priors`` (same shape, ``[..., 4]`` or ``[N, 4, B]``):
    ``center = d_xy · prior_wh + prior_xy`` and ``size = exp(d_wh) · prior_wh``, written over all four coordinates
    (one Mul, one Add, one Exp and one Mul: 4 operations per coordinate, an upper bound on the 3 the formula needs)."""
    shifted = g.op("Add", [g.op("Mul", [deltas, priors]), priors])
    return g.op("Mul", [g.op("Exp", [shifted]), priors])


def _ssd_postprocess(
    g: _Graph, locs: str, confs: str, classes: int, boxes: int, *, top_k: int, keep_top_k: int, activation: str
) -> list[str]:
    """Per-class NMS as NVIDIA's ``NMS_OPT_TRT`` plugin runs it in its MLPerf SSD engines, in ONNX ops.

    The plugin (NVIDIA's MLPerf Inference v1.1 code, closed/NVIDIA/code/plugin/NMSOptPlugin: decodeBBoxesOpt,
    topKScoresPerClass, allClassNMSOpt, topKScoresPerImage, gatherTopDetections) decodes every box against its
    prior, keeps the ``top_k`` best scores of each class, suppresses within each class, and keeps the ``keep_top_k``
    best detections of the image. SSD-MobileNet: sigmoid scores (confSigmoid=1), 91 classes, topK 100, keepTopK
    100 (closed/NVIDIA/code/ssd-mobilenet/tensorrt/SSDMobileNet.py); SSD-ResNet34: softmax over the 81 classes
    (confSoftmax=1), topK 200, keepTopK 200 (closed/NVIDIA/code/ssd-resnet34/tensorrt/SSDResNet34.py;
    https://github.com/mlcommons/inference_results_v1.1/tree/7fc43356c4d71ed6ec97af9d035a34ed146587b8).

    ONNX ops: the activation over ``[N, C, B]`` scores; the decode (:func:`_decode`) of the ``[N, 4, B]`` deltas;
    ``TopK(top_k)`` per class; a Gather of each class's candidate boxes; ``NonMaxSuppression`` over ``N·C`` batches
    of ``top_k`` boxes and one class each (per-class NMS); ``TopK(keep_top_k)`` over the image's ``C·top_k``
    candidates. The box priors are a ``[1, 4, B]`` constant of the engine."""
    scores = g.op(activation, [confs], axis=1) if activation == "Softmax" else g.op(activation, [confs])
    decoded = g.op("Transpose", [_decode(g, locs, g.weight([1, 4, boxes]))], perm=[0, 2, 1])  # [N, B, 4]
    values = g.name("topk_values")
    indices = g.name("topk_indices")
    g.nodes.append(helper.make_node("TopK", [scores, g.const([top_k])], [values, indices], axis=-1, name=values))
    flat = g.op("Reshape", [decoded, g.const([-1, 4])])  # [N·B, 4]
    picked = g.op("Gather", [flat, g.op("Add", [indices, _batch_offsets(g, confs, boxes)])], axis=0)  # [N, C, K, 4]
    per_class_boxes = g.op("Reshape", [picked, g.const([-1, top_k, 4])])  # [N·C, K, 4]
    per_class_scores = g.op("Reshape", [values, g.const([-1, 1, top_k])])  # [N·C, 1, K]
    selected = g.op("NonMaxSuppression", [per_class_boxes, per_class_scores, g.scalar(keep_top_k)])
    best = g.name("keep_values")
    g.nodes.append(
        helper.make_node(
            "TopK",
            [g.op("Reshape", [values, g.const([0, classes * top_k])]), g.const([keep_top_k])],
            [best, g.name("keep_indices")],
            axis=-1,
            name=best,
        )
    )
    return [selected, best]


def _retinanet_postprocess(g: _Graph, cls_logits: str, box_deltas: str, classes: int, anchors: int) -> list[str]:
    """Class-aware NMS as TensorRT's ``EfficientNMS_TRT`` plugin runs it in NVIDIA's MLPerf RetinaNet engine,
    in ONNX ops.

    NVIDIA patches MLPerf's exported RetinaNet (heads ``cls_logits`` and ``bbox_regression``) with one
    EfficientNMS_TRT node fed the raw logits, the deltas and the anchors: score_threshold 0.05, iou_threshold 0.5,
    max_output_boxes 1000, score_activation on, box_coding 1 (center-size, fused decoder), no background class
    (nvidia_patch_retinanet_efficientnms.py, mlcommons/ck cm-mlops/script/get-ml-model-retinanet-nvidia, "Copyright
    (c) 2022, NVIDIA CORPORATION"). The plugin filters all ``N · A · C`` scores by the threshold, sorts what is
    kept, decodes and suppresses the best :data:`EFFICIENT_NMS_CANDIDATES` (4096), class by class, and applies
    the sigmoid only to the boxes it outputs (NVIDIA/TensorRT plugin/efficientNMSPlugin/README.md, "Algorithm").

    ONNX ops: ``TopK(4096)`` over the ``[N, C·A]`` logits (filter + sort); the candidates' anchor index
    (``Mod A``); a Gather of their deltas and anchors; the decode (:func:`_decode`) of ``[N, 4096, 4]``;
    ``NonMaxSuppression`` over the 4096 boxes as one class (torchvision's batched_nms offsets each class's boxes
    apart, so one suppression is class-aware; the offset's Mul and Add are not written); the sigmoid of the kept
    scores."""
    k = EFFICIENT_NMS_CANDIDATES
    values = g.name("topk_values")
    indices = g.name("topk_indices")
    flat_scores = g.op("Reshape", [cls_logits, g.const([0, classes * anchors])])
    g.nodes.append(helper.make_node("TopK", [flat_scores, g.const([k])], [values, indices], axis=-1, name=values))
    anchor = g.op("Mod", [indices, g.scalar(anchors)])  # [N, K]
    rows = g.op("Add", [g.op("Unsqueeze", [anchor, g.const([2])]), _batch_offsets(g, cls_logits, anchors)])
    deltas = g.op("Reshape", [g.op("Transpose", [box_deltas], perm=[0, 2, 1]), g.const([-1, 4])])  # [N·A, 4]
    picked = g.op("Reshape", [g.op("Gather", [deltas, rows], axis=0), g.const([0, k, 4])])  # [N, K, 4]
    priors = g.op("Gather", [g.weight([anchors, 4]), anchor], axis=0)  # [N, K, 4]
    boxes = _decode(g, picked, priors)
    selected = g.op("NonMaxSuppression", [boxes, g.op("Unsqueeze", [values, g.const([1])]), g.scalar(1000)])
    return [selected, g.op("Sigmoid", [values])]


def _conv_with(g: _Graph, x: str, w: str, b: str, cout: int) -> str:
    """A 3x3/1 conv on given (shared) weights."""
    _, h, wd = g.chw[x]
    out = g.op("Conv", [x, w, b], kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    g.chw[out] = (cout, h, wd)
    return out


def _bert_large(g: _Graph) -> tuple[list[onnx.ValueInfoProto], list[str]]:
    hidden, heads, inter, layers, vocab, positions = 1024, 16, 4096, 24, 30522, 512
    head = hidden // heads
    seq = "S"
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, [BATCH, seq])
        for name in ("input_ids", "segment_ids", "input_mask")
    ]
    words = g.op("Gather", [g.weight([vocab, hidden]), "input_ids"])
    types = g.op("Gather", [g.weight([2, hidden]), "segment_ids"])
    shape = g.op("Shape", ["input_ids"])
    length = g.op("Gather", [shape, g.const([1])], axis=0)
    pos_ids = g.op("Range", [g.scalar(0), g.op("Squeeze", [length]), g.scalar(1)])
    pos = g.op("Gather", [g.weight([positions, hidden]), pos_ids])
    x = g.add(g.add(words, types), pos)
    x = g.op("LayerNormalization", [x, g.weight([hidden]), g.weight([hidden])], axis=-1, epsilon=1e-12)
    # additive mask: (1 - mask) * -10000, [N, 1, 1, S]
    mask = g.op("Cast", [g.op("Unsqueeze", ["input_mask", g.const([1, 2])])], to=TensorProto.FLOAT)
    mask = g.op("Mul", [g.op("Sub", [g.fscalar(1.0), mask]), g.fscalar(-10000.0)])
    split = g.const([0, 0, heads, head])
    merge = g.const([0, 0, hidden])
    for _ in range(layers):
        q, k, v = (
            g.op("Transpose", [g.op("Reshape", [_dense(g, x, hidden, hidden), split])], perm=perm)
            for perm in ([0, 2, 1, 3], [0, 2, 3, 1], [0, 2, 1, 3])
        )
        scores = g.op("Add", [g.op("Div", [g.op("MatMul", [q, k]), g.fscalar(head**0.5)]), mask])
        ctx = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
        ctx = g.op("Reshape", [g.op("Transpose", [ctx], perm=[0, 2, 1, 3]), merge])
        x = _layer_norm(g, g.add(_dense(g, ctx, hidden, hidden), x), hidden)
        ff = _dense(g, g.op("Gelu", [_dense(g, x, hidden, inter)]), inter, hidden)
        x = _layer_norm(g, g.add(ff, x), hidden)
    logits = _dense(g, x, hidden, 2)
    return inputs, [logits]


def _dense(g: _Graph, x: str, k: int, n: int) -> str:
    return g.op("Add", [g.op("MatMul", [x, g.weight([k, n])]), g.weight([n])])


def _layer_norm(g: _Graph, x: str, hidden: int) -> str:
    return g.op("LayerNormalization", [x, g.weight([hidden]), g.weight([hidden])], axis=-1, epsilon=1e-12)


BUILDERS: dict[str, Callable[[_Graph], tuple[list[onnx.ValueInfoProto], list[str]]]] = {
    "resnet50": _resnet50,
    "ssd-mobilenet": _ssd_mobilenet,
    "ssd-resnet34": _ssd_resnet34,
    "retinanet": _retinanet,
    "bert-large": _bert_large,
    "resnet18": _resnet18,
    "vgg16": _vgg((2, 2, 3, 3, 3)),
    "vgg19": _vgg((2, 2, 4, 4, 4)),
    "mobilenet-v2": _mobilenet_v2,
}


def build(shape: str, folder: str | os.PathLike[str]) -> Path:
    """Write ``folder/<shape>.onnx`` and its sparse ``<shape>.weights``; returns the model's path. Reuses files
    already there (the cache under ``benchmarks/_work/``) when the model file is newer than this module."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{shape}.onnx"
    data = folder / f"{shape}.weights"
    if path.exists() and data.exists() and path.stat().st_mtime >= Path(__file__).stat().st_mtime:
        return path
    g = _Graph(data.name)
    inputs, outputs = BUILDERS[shape](g)
    model = g.model(inputs, outputs, shape)
    with open(data, "wb") as f:
        f.truncate(g.offset)  # sparse: no weight byte written
    onnx.save(model, path)
    return path


def published_counts(shape: str, folder: str | os.PathLike[str]) -> dict[str, float]:
    """Parameters and MACs of the built model at batch 1 (and BERT at sequence 384) from onnxroof, beside the
    published figures of :data:`PUBLISHED`."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from onnxroof import analyze

    dims = {BATCH: 1, "S": 384}
    a = analyze(build(shape, folder), "a100", {k: v for k, v in dims.items() if shape == "bert-large" or k == BATCH})
    params, macs, source = PUBLISHED[shape]
    return {
        "params": float(a.totals.params),
        "macs": float(a.totals.macs),
        "published_params": params,
        "published_macs": macs,
        "source": source,  # type: ignore[dict-item]
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--shape", choices=sorted(BUILDERS), action="append")
    args = parser.parse_args(argv)
    for shape in args.shape or sorted(BUILDERS):
        c = published_counts(shape, args.out)
        pp = f"{c['published_params'] / 1e6:.2f} M" if c["published_params"] else "–"
        pm = f"{c['published_macs'] / 1e9:.3f} G" if c["published_macs"] else "–"
        params, macs = c["params"] / 1e6, c["macs"] / 1e9
        print(f"{shape:14s} params {params:8.2f} M (published {pp})  MACs {macs:8.3f} G (published {pm})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
