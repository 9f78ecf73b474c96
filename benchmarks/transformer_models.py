"""Transformer models for the CPU accuracy benchmark, written in PyTorch and exported offline to ONNX.

``python benchmarks/transformer_models.py OUT_DIR [--models vit_b16,...]`` writes ``OUT_DIR/<name>.onnx``;
``bench_accuracy.py`` calls ``export(name, path)`` itself when a file is missing. Weights are random (seed 0):
latency does not depend on their values. Each is exported with PyTorch's TorchScript exporter
(``torch.onnx.export(..., dynamo=False)``, opset 17), which needs nothing beyond ``torch``, in eval mode at
batch 1 with static shapes.

The modules follow the published architectures layer for layer (widths, depths, heads, activations, norm
placement, how attention is written), not their code:

- ``vit_b16``: torchvision's ``vit_b_16`` (Dosovitskiy et al. 2021, ViT-B/16): 224×224, a 16×16 stride-16
  patch convolution to 768 channels, a class token, learned positions, 12 pre-LayerNorm blocks of 12-head
  ``nn.MultiheadAttention`` (batch-first, as torchvision) and a 3072-wide erf-GELU MLP, the head on the class
  token. 86.6 M parameters, 17.6 GMACs.
- ``whisper_tiny_encoder``: the encoder of OpenAI's Whisper tiny (Radford et al. 2022; HF ``WhisperEncoder``):
  an 80×3000 log-mel input, Conv1d 80→384 k3 + GELU, Conv1d 384→384 k3 stride 2 + GELU, sinusoidal positions
  (1500), 4 pre-LayerNorm layers of 6-head attention (q scaled by head_dim^-0.5, k without bias, explicit
  MatMul–Softmax–MatMul as the eager HF code) and a 1536-wide GELU MLP, a final LayerNorm.
- ``mobilevit_s``: MobileViT-S (Mehta & Rastegari 2022; timm ``mobilevit_s``): 256×256, MobileNetV2 blocks
  (SiLU), three MobileViT blocks (d = 144, 192, 240; 2, 4, 3 transformer layers of 4 heads, FFN 2d with SiLU,
  2×2 patches unfolded and folded by Reshape/Transpose), 1×1 to 640, pooled head. 5.6 M parameters.
- ``detr_r18``: a DETR-style detector (Carion et al. 2020) kept small for a 2-core host: a ResNet-18 backbone
  at 320×320 (stride 32: 10×10 = 100 tokens), a 1×1 projection to 256, 2 encoder and 2 decoder layers of 8-head
  ``nn.MultiheadAttention`` with a 1024-wide ReLU FFN, 50 object queries, class and box heads.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

OPSET = 17


def _torch():
    import torch
    from torch import nn

    return torch, nn


def vit_b16():
    torch, nn = _torch()

    class Block(nn.Module):
        def __init__(self, d: int, heads: int, mlp: int) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(d, eps=1e-6)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.ln_2 = nn.LayerNorm(d, eps=1e-6)
            self.mlp = nn.Sequential(nn.Linear(d, mlp), nn.GELU(), nn.Linear(mlp, d))

        def forward(self, x):
            y = self.ln_1(x)
            y, _ = self.attn(y, y, y, need_weights=False)
            x = x + y
            return x + self.mlp(self.ln_2(x))

    class ViT(nn.Module):
        def __init__(self, d: int = 768, layers: int = 12, heads: int = 12, mlp: int = 3072) -> None:
            super().__init__()
            self.conv_proj = nn.Conv2d(3, d, 16, 16)
            self.class_token = nn.Parameter(torch.zeros(1, 1, d))
            self.pos = nn.Parameter(torch.randn(1, 197, d) * 0.02)
            self.layers = nn.Sequential(*[Block(d, heads, mlp) for _ in range(layers)])
            self.ln = nn.LayerNorm(d, eps=1e-6)
            self.head = nn.Linear(d, 1000)

        def forward(self, x):
            x = self.conv_proj(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.class_token.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
            x = self.ln(self.layers(x))
            return self.head(x[:, 0])

    return ViT(), (1, 3, 224, 224)


def whisper_tiny_encoder():
    torch, nn = _torch()

    class Attention(nn.Module):
        def __init__(self, d: int, heads: int) -> None:
            super().__init__()
            self.heads, self.head_dim = heads, d // heads
            self.q_proj = nn.Linear(d, d)
            self.k_proj = nn.Linear(d, d, bias=False)
            self.v_proj = nn.Linear(d, d)
            self.out_proj = nn.Linear(d, d)

        def _split(self, x):
            b, t, _ = x.shape
            return x.view(b, t, self.heads, self.head_dim).transpose(1, 2)

        def forward(self, x):
            b, t, d = x.shape
            q = self._split(self.q_proj(x) * self.head_dim**-0.5)
            k = self._split(self.k_proj(x))
            v = self._split(self.v_proj(x))
            w = torch.softmax(q @ k.transpose(-1, -2), dim=-1)
            return self.out_proj((w @ v).transpose(1, 2).reshape(b, t, d))

    class Layer(nn.Module):
        def __init__(self, d: int, heads: int, ffn: int) -> None:
            super().__init__()
            self.self_attn_layer_norm = nn.LayerNorm(d)
            self.self_attn = Attention(d, heads)
            self.final_layer_norm = nn.LayerNorm(d)
            self.fc1, self.fc2, self.act = nn.Linear(d, ffn), nn.Linear(ffn, d), nn.GELU()

        def forward(self, x):
            x = x + self.self_attn(self.self_attn_layer_norm(x))
            return x + self.fc2(self.act(self.fc1(self.final_layer_norm(x))))

    class Encoder(nn.Module):
        def __init__(self, mels: int = 80, d: int = 384, layers: int = 4, heads: int = 6, ffn: int = 1536) -> None:
            super().__init__()
            self.conv1 = nn.Conv1d(mels, d, 3, padding=1)
            self.conv2 = nn.Conv1d(d, d, 3, stride=2, padding=1)
            self.register_buffer("embed_positions", _sinusoids(1500, d, torch))
            self.layers = nn.Sequential(*[Layer(d, heads, ffn) for _ in range(layers)])
            self.layer_norm = nn.LayerNorm(d)
            self.act = nn.GELU()

        def forward(self, x):
            x = self.act(self.conv2(self.act(self.conv1(x)))).permute(0, 2, 1)
            return self.layer_norm(self.layers(x + self.embed_positions))

    return Encoder(), (1, 80, 3000)


def _sinusoids(length: int, channels: int, torch):
    increment = math.log(10000) / (channels // 2 - 1)
    inv = torch.exp(-increment * torch.arange(channels // 2))
    scaled = torch.arange(length)[:, None] * inv[None, :]
    return torch.cat([torch.sin(scaled), torch.cos(scaled)], dim=1)


def mobilevit_s():
    torch, nn = _torch()

    def conv_bn(cin: int, cout: int, k: int = 1, stride: int = 1, groups: int = 1, act: bool = True):
        layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
        return nn.Sequential(*layers, nn.SiLU()) if act else nn.Sequential(*layers)

    class MV2(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int, expand: int = 4) -> None:
            super().__init__()
            hidden = cin * expand
            self.residual = stride == 1 and cin == cout
            self.block = nn.Sequential(
                conv_bn(cin, hidden), conv_bn(hidden, hidden, 3, stride, hidden), conv_bn(hidden, cout, act=False)
            )

        def forward(self, x):
            return x + self.block(x) if self.residual else self.block(x)

    class Layer(nn.Module):
        def __init__(self, d: int, heads: int) -> None:
            super().__init__()
            self.norm1 = nn.LayerNorm(d)
            self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
            self.norm2 = nn.LayerNorm(d)
            self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.SiLU(), nn.Linear(2 * d, d))

        def forward(self, x):
            y = self.norm1(x)
            x = x + self.attn(y, y, y, need_weights=False)[0]
            return x + self.mlp(self.norm2(x))

    class MobileViTBlock(nn.Module):
        def __init__(self, c: int, d: int, depth: int, heads: int = 4, patch: int = 2) -> None:
            super().__init__()
            self.patch = patch
            self.conv_kxk = conv_bn(c, c, 3)
            self.conv_1x1 = nn.Conv2d(c, d, 1, bias=False)
            self.transformer = nn.Sequential(*[Layer(d, heads) for _ in range(depth)])
            self.norm = nn.LayerNorm(d)
            self.conv_proj = conv_bn(d, c)
            self.conv_fusion = conv_bn(2 * c, c, 3)

        def forward(self, x):
            shortcut = x
            x = self.conv_1x1(self.conv_kxk(x))
            b, d, h, w = x.shape
            p, nh, nw = self.patch, h // self.patch, w // self.patch
            # unfold: [B, d, nh*p, nw*p] -> [B*p*p, nh*nw, d]
            x = x.reshape(b * d * nh, p, nw, p).transpose(1, 2).reshape(b, d, nh * nw, p * p)
            x = x.transpose(1, 3).reshape(b * p * p, nh * nw, d)
            x = self.norm(self.transformer(x))
            # fold back
            x = x.reshape(b, p * p, nh * nw, d).transpose(1, 3).reshape(b * d * nh, nw, p, p)
            x = x.transpose(1, 2).reshape(b, d, h, w)
            return self.conv_fusion(torch.cat([shortcut, self.conv_proj(x)], dim=1))

    class MobileViT(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.features = nn.Sequential(
                conv_bn(3, 16, 3, 2),
                MV2(16, 32, 1),
                MV2(32, 64, 2),
                MV2(64, 64, 1),
                MV2(64, 64, 1),
                MV2(64, 96, 2),
                MobileViTBlock(96, 144, 2),
                MV2(96, 128, 2),
                MobileViTBlock(128, 192, 4),
                MV2(128, 160, 2),
                MobileViTBlock(160, 240, 3),
                conv_bn(160, 640),
            )
            self.head = nn.Linear(640, 1000)

        def forward(self, x):
            return self.head(self.features(x).mean((2, 3)))

    return MobileViT(), (1, 3, 256, 256)


def detr_r18():
    torch, nn = _torch()

    class Basic(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            y = self.bn2(self.conv2(torch.relu(self.bn1(self.conv1(x)))))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    class DETR(nn.Module):
        def __init__(self, d: int = 256, heads: int = 8, ffn: int = 1024, queries: int = 50) -> None:
            super().__init__()
            stages = []
            cin = 64
            for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
                stages += [Basic(cin, cout, stride), Basic(cout, cout, 1)]
                cin = cout
            self.backbone = nn.Sequential(
                nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1), *stages
            )
            self.proj = nn.Conv2d(512, d, 1)
            self.pos = nn.Parameter(torch.randn(1, 100, d) * 0.02)
            self.query = nn.Parameter(torch.randn(1, queries, d) * 0.02)
            self.transformer = nn.Transformer(d, heads, 2, 2, ffn, dropout=0.0, batch_first=True, norm_first=False)
            self.cls = nn.Linear(d, 92)
            self.box = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 4))

        def forward(self, x):
            x = self.proj(self.backbone(x)).flatten(2).transpose(1, 2) + self.pos
            h = self.transformer(x, self.query.expand(x.shape[0], -1, -1))
            return self.cls(h), torch.sigmoid(self.box(h))

    return DETR(), (1, 3, 320, 320)


BUILDERS = {
    "vit_b16": vit_b16,
    "whisper_tiny_encoder": whisper_tiny_encoder,
    "mobilevit_s": mobilevit_s,
    "detr_r18": detr_r18,
}


def export(name: str, path: Path) -> Path:
    """Export model ``name`` to ``path`` (random weights, seed 0, eval mode, batch 1)."""
    torch, _ = _torch()
    torch.manual_seed(0)
    model, shape = BUILDERS[name]()
    model.eval()
    # nn.MultiheadAttention's inference fast path is one fused aten op the exporter cannot write: take the
    # decomposed path (in-projection MatMul, Softmax, MatMul, out-projection), as a training-mode export does.
    torch.backends.mha.set_fastpath_enabled(False)
    path.parent.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        torch.onnx.export(model, (torch.randn(*shape),), str(path), dynamo=False, opset_version=OPSET)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--models", default=",".join(BUILDERS))
    args = parser.parse_args(argv)
    for name in args.models.split(","):
        print(export(name, args.out / f"{name}.onnx"))
    return 0


if __name__ == "__main__":
    import warnings

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    sys.exit(main())
