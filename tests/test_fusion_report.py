"""Fusion as users see it: folds on a real model, the savings in the report, the reasons for misses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import onnx
import pytest
from helpers import parse_model
from typer.testing import CliRunner

import onnxroof
from onnxroof.cli.commands import app
from onnxroof.core.profiles import FusionProfile
from onnxroof.core.units import seconds

RESNET = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light" / "light_resnet50.onnx"


@pytest.fixture(scope="module")
def resnet() -> onnxroof.Analysis:
    return onnxroof.analyze(RESNET, platform="xeon-8380", fusion="ort-cpu")


def test_every_batchnorm_of_resnet50_folds_with_ort_cpu(resnet) -> None:
    batchnorms = {n.id for n in resnet.nodes if n.op_type == "BatchNormalization"}
    folded = {node for kernel in resnet.kernels for node in kernel.folded_nodes}
    assert len(batchnorms) == 53
    assert batchnorms <= folded
    # Folding removes BatchNorm's FLOPs and all of its traffic (the conv's output is written once).
    bn_flops = sum(n.flops for n in resnet.nodes if n.op_type == "BatchNormalization")
    assert resnet.totals.fused.flops == pytest.approx(resnet.totals.unfused.flops - bn_flops, rel=1e-9)


def test_bounds_are_ordered(resnet) -> None:
    t = resnet.totals
    assert t.ideal.latency_s <= t.fused.latency_s < t.unfused.latency_s
    assert t.ideal.bytes <= t.fused.bytes < t.unfused.bytes
    assert t.latency_s == t.fused.latency_s


def test_report_shows_what_fusion_saves(resnet) -> None:
    result = CliRunner().invoke(
        app, ["report", str(RESNET), "--platform", "xeon-8380", "--fusion", "ort-cpu"], env={"COLUMNS": "140"}
    )
    assert result.exit_code == 0, result.output
    saved = seconds(resnet.totals.unfused.latency_s - resnet.totals.fused.latency_s)
    assert "Fusion saves" in result.output and saved in result.output
    data = json.loads(
        CliRunner().invoke(app, ["report", str(RESNET), "-p", "xeon-8380", "--fusion", "ort-cpu", "-f", "json"]).stdout
    )
    assert data["totals"]["unfused"]["bytes"] - data["totals"]["fused"]["bytes"] == pytest.approx(
        resnet.totals.unfused.bytes - resnet.totals.fused.bytes
    )
    assert sum(1 for k in data["kernels"] if "conv_bn" in k["pattern"]) == 53


CONV_RELU_BN = """
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 4, 8, 8] x) => (float[1, 4, 8, 8] y) {
    w = Constant <value = float[4, 4, 1, 1] {1,0,0,0, 0,1,0,0, 0,0,1,0, 0,0,0,1}> ()
    s = Constant <value = float[4] {1, 1, 1, 1}> ()
    b = Constant <value = float[4] {0, 0, 0, 0}> ()
    c = Conv(x, w)
    r = Relu(c)
    y = BatchNormalization(r, s, b, b, s)
}"""


@pytest.mark.parametrize("profile", ["ort-cpu", "tensorrt"])
def test_explain_fusion_says_why_conv_relu_bn_does_not_fold(tmp_path, profile) -> None:
    path = tmp_path / "crb.onnx"
    onnx.save(parse_model(CONV_RELU_BN), path)
    result = CliRunner().invoke(
        app, ["report", str(path), "--fusion", profile, "--explain-fusion"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 0, result.output
    assert "does not directly follow a Conv" in result.output
    analysis = onnxroof.analyze(path, fusion=profile)
    assert any("BatchNormalization" in m.reason for m in analysis.fusion_misses)
    assert not any(kernel.folded_nodes for kernel in analysis.kernels)


def test_unknown_fusion_profile_is_a_one_line_error() -> None:
    result = CliRunner().invoke(app, ["report", "samples/tiny_cnn.onnx", "-d", "batch=1", "--fusion", "magic"])
    assert result.exit_code == 2
    assert "unknown fusion profile 'magic'" in result.output and "ort-cpu" in result.output


def test_fusion_help_names_every_profile():
    result = CliRunner().invoke(app, ["report", "--help"], env={"COLUMNS": "300"})
    assert result.exit_code == 0
    named = result.stdout.split("--fusion", 1)[1].split("--", 1)[0]
    assert all(profile in named for profile in FusionProfile), named
