"""Builders for tests: an OpView from shapes, without a model file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import onnx
from onnx import helper

from onnxroof.core.cost import Cost
from onnxroof.core.dtypes import itemsize_of
from onnxroof.core.ir import OpView, TensorInfo
from onnxroof.core.protos import node_attributes
from onnxroof.core.registry import evaluate
from onnxroof.core.states import Role
from onnxroof.rules import REGISTRY

TensorSpec = tuple[Sequence[int] | None, str] | tuple[Sequence[int] | None, str, str] | None


def tensor(name: str, spec: TensorSpec, default_role: str) -> TensorInfo | None:
    if spec is None:
        return None
    shape, dtype, *rest = spec
    role = rest[0] if rest else default_role
    return TensorInfo(name, None if shape is None else tuple(shape), dtype, itemsize_of(dtype), role)


def make_op(
    op_type: str,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    opset: int = 17,
    domain: str = "",
    **attrs: Any,
) -> OpView:
    """An OpView whose attributes are completed with schema defaults, as the loader does.

    Each tensor spec is ``(shape, dtype)`` or ``(shape, dtype, role)``; inputs default to
    role ``activation``; use role ``weight`` for constants.
    """
    node = helper.make_node(
        op_type,
        [f"in{i}" if s else "" for i, s in enumerate(inputs)],
        [f"out{i}" for i in range(len(outputs))],
        domain=domain,
        **attrs,
    )
    return OpView(
        id=f"0:{op_type}",
        index=0,
        name="",
        op_type=op_type,
        domain=domain,
        opset=opset,
        inputs=tuple(tensor(f"in{i}", s, Role.ACTIVATION) for i, s in enumerate(inputs)),
        outputs=tuple(tensor(f"out{i}", s, Role.ACTIVATION) for i, s in enumerate(outputs)),
        attrs=MappingProxyType(node_attributes(node, opset)),
    )


def cost_of(op: OpView) -> Cost:
    """Evaluate the registered rule for ``op`` (params included)."""
    entry = REGISTRY.lookup(op.domain, op.op_type)
    assert entry is not None, f"no rule for {op.op_type}"
    return evaluate(op, entry)


W = Role.WEIGHT


def parse_model(text: str) -> onnx.ModelProto:
    """A model from ONNX textual syntax (onnx.parser), checked."""
    model = onnx.parser.parse_model(text)
    onnx.checker.check_model(model)
    return model


def write_relu_chain(path: Path, relus: int) -> Path:
    """A chain ``x → Relu × relus → Neg`` of float[2, 64] tensors written to ``path``: the first Relu reads the
    graph input, the others an activation (they share one cost signature), the Neg closes it."""
    names = [f"r{k}" for k in range(relus)]
    lines = [f"    {out} = Relu({src})" for src, out in zip(["x", *names], names, strict=False)]
    text = (
        '<ir_version: 8, opset_import: ["" : 17]>\n'
        "g (float[2, 64] x) => (float[2, 64] y)\n{\n" + "\n".join(lines) + f"\n    y = Neg({names[-1]})\n}}\n"
    )
    path.write_bytes(parse_model(text).SerializeToString())
    return path


ENERGY_TOML = """
[energy_pj_per_op]
fp32 = { value = 2, source = "test" }
fp16 = { value = 0.5, source = "test" }

[energy_pj_per_byte]
dram = { value = 10, source = "test" }
"""
"""Energy figures for a test platform: 2 pJ per fp32 FLOP, 0.5 per fp16 FLOP, 10 pJ per DRAM byte."""


def write_platform(
    path: Path,
    *,
    peaks: dict[str, float] | None = None,
    bandwidth_gbps: float = 100,
    launch_us: float = 1,
    extra: str = "",
    sparsity: str | None = None,
) -> Path:
    """A platform TOML named after ``path``'s stem with round figures (peaks in TFLOP/s, default fp32 10 and
    fp16 20; no fusion), ``extra`` tables appended."""
    peaks = peaks or {"fp32": 10, "fp16": 20}
    lines = [
        "schema = 1",
        f'name = "{path.stem}"',
        'title = "test platform"',
        'kind = "accelerator"',
        'fusion_profile = "none"',
        *([f'sparsity = "{sparsity}"'] if sparsity else []),
        "[peak_tflops]",
        *(f'{precision} = {{ value = {value}, source = "test" }}' for precision, value in peaks.items()),
        "[memory]",
        f'dram_bandwidth_gbps = {{ value = {bandwidth_gbps}, source = "test" }}',
        "[runtime]",
        f'launch_overhead_us = {{ value = {launch_us}, source = "test" }}',
    ]
    path.write_text("\n".join(lines) + "\n" + extra, encoding="utf-8")
    return path
