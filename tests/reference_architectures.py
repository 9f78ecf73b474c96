"""Reference PyTorch definitions of the ONNX "light" models, for independent whole-model counts.

The onnx wheel ships nine "light" models (``onnx/backend/test/data/light/*.onnx``) whose weights are
produced by ``ConstantOfShape`` nodes: shapes are real, values are dummies. This module re-writes seven of
those architectures in PyTorch *from their papers / reference implementations* (not from the ONNX graph),
so that onnxroof's parameter and MAC totals can be checked against numbers computed by a different tool.
The ONNX files were consulted only to choose between published variants (stride placement, conv biases,
grouped convs, pooling round-off); every such choice is marked ``# ONNX variant:`` below.

Counts (plain ``int``):

``torch_params``
    ``sum(p.numel() for p in module.parameters())`` — PyTorch's own count.
``bn_running_stat_elements``
    Σ over BatchNorm layers of ``running_mean.numel() + running_var.numel()``. PyTorch keeps these as
    buffers, not parameters; ONNX ``BatchNormalization`` takes them as inputs (initializers), so an ONNX
    parameter count includes them.
``bn_onnx_affine_fill_elements``
    Σ over *non-affine* BatchNorm layers of ``2 * C``. ONNX ``BatchNormalization`` has mandatory ``scale``
    and ``B`` inputs, so a Caffe ``BatchNorm`` layer (no affine; the affine lives in a separate ``Scale``
    layer) is exported with an identity scale (ones) and bias (zeros) of its own. Zero for every model whose
    BatchNorm is affine.
``expected_onnx_params``
    ``torch_params + bn_running_stat_elements + bn_onnx_affine_fill_elements``.
``conv_linear_macs``
    MACs of the convolution and matrix-multiply ops of one forward pass, measured with
    :class:`torch.utils.flop_counter.FlopCounterMode` on the ``meta`` device (no memory, no compute).
    FlopCounterMode registers formulas only for matmul-like ops (``mm``, ``addmm``, ``bmm``, ``baddbmm``,
    ``convolution`` and its backward, scaled-dot-product attention); pooling, LRN, BatchNorm, ReLU,
    element-wise ops and softmax count zero. It counts 2 FLOPs per multiply-accumulate and does not count
    bias additions, so MACs = FLOPs / 2 is exactly Σ (output elements × input channels per group × kernel
    area) over convolutions plus Σ (M × N × K) over ``nn.Linear``. :func:`conv_linear_macs` checks that no
    other op contributed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

# ----------------------------------------------------------------------------------------- building blocks


class Scale(nn.Module):
    """Caffe's ``Scale`` layer with ``bias_term: true``: y = x * gamma[c] + beta[c]."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels))
        self.bias = nn.Parameter(torch.zeros(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight.view(1, -1, 1, 1) + self.bias.view(1, -1, 1, 1)


def _conv_relu(cin: int, cout: int, kernel: int, stride: int = 1, padding: int = 0, groups: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, padding, groups=groups), nn.ReLU(inplace=True))


# ------------------------------------------------------------------------------------------- ResNet-50


class Bottleneck(nn.Module):
    """He et al. 2016, "Deep Residual Learning", Table 1 / Fig. 5 right: 1×1 reduce, 3×3, 1×1 expand (×4).

    ONNX variant: the stride-2 of the first block of conv3_x..conv5_x sits on the 3×3 convolution
    (``res3_0_branch2b`` has strides [2, 2], ``branch2a`` is stride 1) — the fb.resnet.torch / Caffe2
    convention ("ResNet v1.5"), not the paper's 1×1 stride. Convolutions have no bias (Conv nodes take
    two inputs), each is followed by BatchNorm (affine). Projection shortcuts (option B: 1×1 conv + BN,
    stride 2 where the stage downsamples) only where the shape changes.
    """

    expansion = 4

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * self.expansion
        self.conv1 = nn.Conv2d(cin, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + self.shortcut(x))


class ResNet50(nn.Module):
    """ResNet-50: stem 7×7/2 conv + BN + ReLU + 3×3/2 max pool, stages [3, 4, 6, 3], 7×7 avg pool, fc 1000."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False),
            nn.BatchNorm2d(64),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        blocks: list[nn.Module] = []
        cin = 64
        for width, count, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(count):
                blocks.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = width * Bottleneck.expansion
        self.stages = nn.Sequential(*blocks)
        self.pool = nn.AvgPool2d(7, 1)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.pool(self.stages(self.stem(x)))
        return torch.softmax(self.fc(torch.flatten(x, 1)), dim=1)


# ---------------------------------------------------------------------------------------------- VGG-19


class VGG19(nn.Module):
    """Simonyan & Zisserman 2015, configuration E: 16 3×3/1 pad-1 convs (with bias), 2×2/2 max pools,
    fc 4096-4096-1000 with dropout."""

    CONFIG = (64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M")

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for item in self.CONFIG:
            if item == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers.extend(_conv_relu(cin, int(item), 3, 1, 1))
                cin = int(item)
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(0.5),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(0.5),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.classifier(torch.flatten(self.features(x), 1)), dim=1)


# ------------------------------------------------------------------------------------------ SqueezeNet


class Fire(nn.Module):
    """Iandola et al. 2016, Fire module: 1×1 squeeze, then concat(1×1 expand, 3×3 pad-1 expand), all ReLU."""

    def __init__(self, cin: int, squeeze: int, expand1x1: int, expand3x3: int) -> None:
        super().__init__()
        self.squeeze = _conv_relu(cin, squeeze, 1)
        self.expand1x1 = _conv_relu(squeeze, expand1x1, 1)
        self.expand3x3 = _conv_relu(squeeze, expand3x3, 3, 1, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = self.squeeze(x)
        return torch.cat([self.expand1x1(s), self.expand3x3(s)], dim=1)


class SqueezeNet11(nn.Module):
    """SqueezeNet v1.1 (DeepScale/SqueezeNet repo, v1.1 prototxt).

    ONNX variant: conv1 is 64 filters of 3×3 stride 2 — v1.1 (v1.0 has 96 of 7×7/2). v1.1 also moves the
    max pools to after conv1, fire3 and fire5. Pools are 3×3/2 with Caffe's ceil rounding; at 224×224 every
    pool divides exactly (111→55→27→13), so ceil and floor agree with the ONNX pads of 0.
    """

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential(
            _conv_relu(3, 64, 3, 2),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(64, 16, 64, 64),
            Fire(128, 16, 64, 64),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(128, 32, 128, 128),
            Fire(256, 32, 128, 128),
            nn.MaxPool2d(3, 2, ceil_mode=True),
            Fire(256, 48, 192, 192),
            Fire(384, 48, 192, 192),
            Fire(384, 64, 256, 256),
            Fire(512, 64, 256, 256),
        )
        self.classifier = nn.Sequential(
            nn.Dropout(0.5),
            _conv_relu(512, num_classes, 1),
            nn.AdaptiveAvgPool2d(1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.classifier(self.features(x)), dim=1)


# ---------------------------------------------------------------------------------------- BVLC AlexNet


class BVLCAlexNet(nn.Module):
    """Krizhevsky et al. 2012 as in Caffe's ``models/bvlc_alexnet/deploy.prototxt``.

    conv1 96×11×11/4 → ReLU → LRN(5, 1e-4, 0.75) → max 3×3/2; conv2 256×5×5 pad 2, group 2 → ReLU → LRN →
    max; conv3 384×3×3 pad 1; conv4 384 group 2; conv5 256 group 2 → max; fc 4096-4096-1000. All with bias.
    (In bvlc_alexnet LRN precedes pooling; CaffeNet swaps them — MAC counts are the same either way.)

    ONNX variant: input is 224×224 (not Caffe's 227), and the pools round as the ONNX graph does at that
    size: pool1 and pool2 have no padding (floor: 54→26, 26→12), pool5 has one trailing pad (= Caffe's ceil:
    12→6), giving the 256×6×6 = 9216 inputs of fc6.
    """

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        lrn = {"size": 5, "alpha": 1e-4, "beta": 0.75, "k": 1.0}
        self.features = nn.Sequential(
            _conv_relu(3, 96, 11, 4),
            nn.LocalResponseNorm(**lrn),
            nn.MaxPool2d(3, 2, ceil_mode=False),
            _conv_relu(96, 256, 5, 1, 2, groups=2),
            nn.LocalResponseNorm(**lrn),
            nn.MaxPool2d(3, 2, ceil_mode=False),
            _conv_relu(256, 384, 3, 1, 1),
            _conv_relu(384, 384, 3, 1, 1, groups=2),
            _conv_relu(384, 256, 3, 1, 1, groups=2),
            nn.MaxPool2d(3, 2, ceil_mode=True),
        )
        self.classifier = nn.Sequential(
            nn.Linear(256 * 6 * 6, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(0.5),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(0.5),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.classifier(torch.flatten(self.features(x), 1)), dim=1)


# ---------------------------------------------------------------------------------------- DenseNet-121


def _bn_scale_relu(channels: int) -> list[nn.Module]:
    """Caffe DenseNet's ``BatchNorm`` (statistics only) + ``Scale`` (per-channel affine) + ``ReLU``."""
    return [nn.BatchNorm2d(channels, affine=False), Scale(channels), nn.ReLU(inplace=True)]


class DenseLayer(nn.Module):
    """DenseNet-B layer: BN-ReLU-Conv1×1(4k) - BN-ReLU-Conv3×3(k), output concatenated to the input."""

    def __init__(self, cin: int, growth: int, bn_size: int) -> None:
        super().__init__()
        self.body = nn.Sequential(
            *_bn_scale_relu(cin),
            nn.Conv2d(cin, bn_size * growth, 1, bias=False),
            *_bn_scale_relu(bn_size * growth),
            nn.Conv2d(bn_size * growth, growth, 3, 1, 1, bias=False),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.body(x)], dim=1)


class DenseNet121(nn.Module):
    """Huang et al. 2017, DenseNet-BC-121 (k = 32, blocks 6-12-24-16, compression 0.5), in the Caffe form of
    the reference port (shicai/DenseNet-Caffe, from which the ONNX model comes via Caffe2).

    ONNX variant: Caffe ``BatchNorm`` has no affine; a separate ``Scale`` layer holds gamma/beta — the ONNX
    graph shows BatchNormalization (identity scale/bias) followed by Mul and Add — so BN is non-affine here
    plus :class:`Scale`. Convolutions have no bias; the classifier is a 1×1 convolution with bias (``fc6``)
    after global average pooling. The stem max pool is 3×3/2 pad 1 with floor rounding (112→56).
    """

    def __init__(self, growth: int = 32, blocks: tuple[int, ...] = (6, 12, 24, 16), num_classes: int = 1000) -> None:
        super().__init__()
        bn_size = 4
        layers: list[nn.Module] = [
            nn.Conv2d(3, 2 * growth, 7, 2, 3, bias=False),
            *_bn_scale_relu(2 * growth),
            nn.MaxPool2d(3, 2, 1),
        ]
        channels = 2 * growth
        for index, count in enumerate(blocks):
            for _ in range(count):
                layers.append(DenseLayer(channels, growth, bn_size))
                channels += growth
            if index != len(blocks) - 1:
                layers.extend(_bn_scale_relu(channels))
                layers.append(nn.Conv2d(channels, channels // 2, 1, bias=False))
                layers.append(nn.AvgPool2d(2, 2))
                channels //= 2
        layers.extend(_bn_scale_relu(channels))
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc6 = nn.Conv2d(channels, num_classes, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc6(self.pool(self.features(x)))


# ------------------------------------------------------------------------------- GoogLeNet (Inception v1)


class Inception(nn.Module):
    """Szegedy et al. 2015, Fig. 2(b): 1×1 | 1×1→3×3 | 1×1→5×5 | 3×3/1 max pool→1×1, concatenated."""

    def __init__(self, cin: int, c1: int, c3r: int, c3: int, c5r: int, c5: int, pool_proj: int) -> None:
        super().__init__()
        self.b1 = _conv_relu(cin, c1, 1)
        self.b3 = nn.Sequential(_conv_relu(cin, c3r, 1), _conv_relu(c3r, c3, 3, 1, 1))
        self.b5 = nn.Sequential(_conv_relu(cin, c5r, 1), _conv_relu(c5r, c5, 5, 1, 2))
        self.bp = nn.Sequential(nn.MaxPool2d(3, 1, 1), _conv_relu(cin, pool_proj, 1))
        self.cout = c1 + c3 + c5 + pool_proj

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], dim=1)


class GoogLeNet(nn.Module):
    """BVLC GoogLeNet (Caffe ``models/bvlc_googlenet/deploy.prototxt``; widths of Szegedy et al. Table 1).

    All convolutions have bias; LRN(5, 1e-4, 0.75) after pool1 and after conv2/3x3; no auxiliary classifiers
    (deploy net); dropout 0.4; fc 1024→1000.

    ONNX variant: Caffe rounds the stride-2 max pools up (ceil, 112→56→28→14→7); the ONNX graph has them
    unpadded, i.e. floor (112→55, 55→27, 27→13, 13→6), so ``ceil_mode=False`` here. The final 7×7 average
    pool then sees 6×6 (the ONNX graph pads it by one at the end, excluding pads), i.e. a global average:
    ``AdaptiveAvgPool2d(1)``.
    """

    TABLE = (  # name: (#1×1, #3×3 reduce, #3×3, #5×5 reduce, #5×5, pool proj)
        ("3a", (64, 96, 128, 16, 32, 32)),
        ("3b", (128, 128, 192, 32, 96, 64)),
        ("pool", None),
        ("4a", (192, 96, 208, 16, 48, 64)),
        ("4b", (160, 112, 224, 24, 64, 64)),
        ("4c", (128, 128, 256, 24, 64, 64)),
        ("4d", (112, 144, 288, 32, 64, 64)),
        ("4e", (256, 160, 320, 32, 128, 128)),
        ("pool", None),
        ("5a", (256, 160, 320, 32, 128, 128)),
        ("5b", (384, 192, 384, 48, 128, 128)),
    )

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        lrn = {"size": 5, "alpha": 1e-4, "beta": 0.75, "k": 1.0}
        layers: list[nn.Module] = [
            _conv_relu(3, 64, 7, 2, 3),
            nn.MaxPool2d(3, 2, ceil_mode=False),
            nn.LocalResponseNorm(**lrn),
            _conv_relu(64, 64, 1),
            _conv_relu(64, 192, 3, 1, 1),
            nn.LocalResponseNorm(**lrn),
            nn.MaxPool2d(3, 2, ceil_mode=False),
        ]
        cin = 192
        for _name, widths in self.TABLE:
            if widths is None:
                layers.append(nn.MaxPool2d(3, 2, ceil_mode=False))
                continue
            block = Inception(cin, *widths)
            layers.append(block)
            cin = block.cout
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.4)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.dropout(self.pool(self.features(x)))
        return torch.softmax(self.fc(torch.flatten(x, 1)), dim=1)


# ----------------------------------------------------------------------------------------------- ZFNet


class ZFNet512(nn.Module):
    """Zeiler & Fergus 2014, Fig. 3: conv1 96×7×7/2, conv2 256×5×5/2, conv3-5 3×3/1 pad 1, each of conv1/2
    followed by ReLU, local response normalisation and 3×3/2 max pool; two fc layers; softmax.

    ONNX variant (Caffe2 model zoo "ZFNet-512", which the paper does not define exactly; its Table 2 has a
    widened 512/1024/512 variant): widths read from the ONNX graph — conv3-5 512/512/512 maps, fc6 4096,
    fc7 1024 — and so are the paddings (conv1, conv2 unpadded), the LRN-before-pool order, the LRN
    parameters (size 5, alpha 5e-4, beta 0.75, k 2) and a final 2×2/2 max pool (12→6, so fc6 sees
    512×6×6 = 18432). This model is the least independent of the seven.
    """

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        lrn = {"size": 5, "alpha": 5e-4, "beta": 0.75, "k": 2.0}
        self.features = nn.Sequential(
            _conv_relu(3, 96, 7, 2),
            nn.LocalResponseNorm(**lrn),
            nn.MaxPool2d(3, 2),
            _conv_relu(96, 256, 5, 2),
            nn.LocalResponseNorm(**lrn),
            nn.MaxPool2d(3, 2),
            _conv_relu(256, 512, 3, 1, 1),
            _conv_relu(512, 512, 3, 1, 1),
            _conv_relu(512, 512, 3, 1, 1),
            nn.MaxPool2d(2, 2),
        )
        self.classifier = nn.Sequential(
            nn.Linear(512 * 6 * 6, 4096),
            nn.ReLU(inplace=True),
            nn.Linear(4096, 1024),
            nn.ReLU(inplace=True),
            nn.Linear(1024, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.classifier(torch.flatten(self.features(x), 1)), dim=1)


# ------------------------------------------------------------------------------------------------ counts


@dataclass(frozen=True)
class Reference:
    """A light model's reference architecture and the input it is measured with."""

    build: Callable[[], nn.Module]
    input_shape: tuple[int, ...]  # every light model's ONNX input is float [1, 3, 224, 224]


REFERENCES: dict[str, Reference] = {
    "light_resnet50": Reference(ResNet50, (1, 3, 224, 224)),
    "light_vgg19": Reference(VGG19, (1, 3, 224, 224)),
    "light_squeezenet": Reference(SqueezeNet11, (1, 3, 224, 224)),
    "light_bvlc_alexnet": Reference(BVLCAlexNet, (1, 3, 224, 224)),
    "light_densenet121": Reference(DenseNet121, (1, 3, 224, 224)),
    "light_inception_v1": Reference(GoogLeNet, (1, 3, 224, 224)),
    "light_zfnet512": Reference(ZFNet512, (1, 3, 224, 224)),
}

# The only aten ops FlopCounterMode may report for these models; anything else would mean MACs from an op
# that is not a convolution / matrix product.
MATMUL_LIKE_OPS = frozenset({"convolution", "_convolution", "mm", "addmm", "bmm", "baddbmm", "matmul"})


def build_on_meta(builder: Callable[[], nn.Module]) -> nn.Module:
    """Construct on the meta device: shapes only, no allocation, no initialisation cost."""
    with torch.device("meta"):
        module = builder()
    return module.eval()


def torch_params(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _batchnorms(module: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    return [m for m in module.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


def bn_running_stat_elements(module: nn.Module) -> int:
    return sum(bn.running_mean.numel() + bn.running_var.numel() for bn in _batchnorms(module))


def bn_onnx_affine_fill_elements(module: nn.Module) -> int:
    return sum(2 * bn.num_features for bn in _batchnorms(module) if not bn.affine)


def conv_linear_macs(module: nn.Module, input_shape: tuple[int, ...]) -> int:
    """MACs of convolutions and matrix products in one forward pass (FlopCounterMode FLOPs / 2)."""
    device = next(module.parameters()).device
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        module(torch.empty(input_shape, device=device))
    per_op = counter.get_flop_counts()["Global"]
    names = {getattr(op, "__name__", str(op)).split(".")[0] for op in per_op}
    unexpected = names - MATMUL_LIKE_OPS
    assert not unexpected, f"FlopCounterMode counted non-matmul ops: {sorted(unexpected)}"
    flops = counter.get_total_flops()
    assert flops % 2 == 0
    return flops // 2


@dataclass(frozen=True)
class ReferenceCounts:
    torch_params: int
    bn_running_stat_elements: int
    bn_onnx_affine_fill_elements: int
    conv_linear_macs: int

    @property
    def expected_onnx_params(self) -> int:
        return self.torch_params + self.bn_running_stat_elements + self.bn_onnx_affine_fill_elements


@cache
def reference_counts(name: str) -> ReferenceCounts:
    """Counts for one light model (``"light_resnet50"``...), built once on the meta device."""
    spec = REFERENCES[name]
    module = build_on_meta(spec.build)
    return ReferenceCounts(
        torch_params=torch_params(module),
        bn_running_stat_elements=bn_running_stat_elements(module),
        bn_onnx_affine_fill_elements=bn_onnx_affine_fill_elements(module),
        conv_linear_macs=conv_linear_macs(module, spec.input_shape),
    )


if __name__ == "__main__":
    for light in REFERENCES:
        counts = reference_counts(light)
        print(f"{light:20s} {counts} expected_onnx_params={counts.expected_onnx_params}")
