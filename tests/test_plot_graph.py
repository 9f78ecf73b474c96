"""Static roofline plots and annotated graphs (Netron attachment, annotated ONNX, DOT/SVG), and their CLI."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import xml.dom.minidom
from pathlib import Path

import onnx
import pytest
from hostile import ALL, build_hostile, fuse_first_kernels
from typer.testing import CliRunner

from onnxroof.analysis.analyze import analyze
from onnxroof.cli.commands import app
from onnxroof.core.states import NodeState
from onnxroof.report import graph
from onnxroof.report.graph import annotated_model, netron_attachment, render_dot, render_netron
from onnxroof.report.plot import render_plot

ROOT = Path(__file__).resolve().parents[1]
CNN = ROOT / "samples" / "tiny_cnn.onnx"
TRANSFORMER = ROOT / "samples" / "tiny_transformer.onnx"
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
SIGNATURES = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-", "svg": b"<?xml"}


def invoke(*args: object):
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "200", "NO_COLOR": "1"})


@pytest.fixture(scope="module")
def cnn():
    return analyze(CNN, "xavier", {"batch": 1})


@pytest.fixture(scope="module")
def hostile_path(tmp_path_factory) -> Path:
    return build_hostile(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def hostile(hostile_path):
    return analyze(hostile_path, "xavier")


def _llama(folder: Path, **config) -> Path:
    spec = importlib.util.spec_from_file_location("llama_shaped", ROOT / "benchmarks" / "llama_shaped.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    small = dict(layers=1, hidden=64, heads=4, kv_heads=2, intermediate=128, vocab=100)
    return module.build_llama_shaped(folder / "llama.onnx", **(small | config))


# ----------------------------------------------------------------------------------------------- plots


@pytest.mark.parametrize("fmt", ["png", "svg", "pdf"])
def test_plot_formats_with_hostile_names(hostile, fmt: str) -> None:
    data = render_plot([hostile], fmt)  # "$x^2$"-style names never reach mathtext
    assert data.startswith(SIGNATURES[fmt])
    if fmt == "svg":
        svg = data.decode()
        xml.dom.minidom.parseString(svg)
        assert "<script" not in svg.lower() and "<img" not in svg.lower()


def test_several_platforms_in_one_chart(tmp_path: Path) -> None:
    out = tmp_path / "roofline.svg"
    result = invoke("plot", CNN, "-d", "batch=1", "-p", "xavier", "-p", "h100", "-p", "rpi5", "-o", out)
    assert result.exit_code == 0, result.output
    text = out.read_text(encoding="utf-8")
    for title in ("Jetson AGX Xavier", "H100", "Raspberry Pi 5"):
        assert title in text  # one legend entry (and roof) per platform
    assert "3 platforms" in text


@pytest.mark.parametrize("command", ["plot", "graph"])
def test_commands_are_documented(command: str) -> None:
    result = invoke(command, "--help")
    assert result.exit_code == 0 and "--platform" in result.output and "--dim" in result.output


def test_plot_rejects_an_unknown_suffix(tmp_path: Path) -> None:
    result = invoke("plot", CNN, "-d", "batch=1", "-o", tmp_path / "roofline.gif")
    assert result.exit_code == 2 and "unknown plot format '.gif'" in result.output
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------------------------------------- netron


def test_netron_attachment_covers_every_node(cnn) -> None:
    document = json.loads(render_netron(cnn))
    assert document == json.loads(json.dumps(netron_attachment(cnn)))
    assert document["signature"] == "netron:attachment"
    rows = document["metadata"] + document["metrics"]
    assert all(set(row) == {"kind", "target", "name", "value", "type"} for row in rows)
    model = onnx.load(CNN, load_external_data=False)
    names = {n.name for n in model.graph.node}
    tensors = {o for n in model.graph.node for o in n.output}
    by_node = {
        row["value"]: (row["kind"], row["target"]) for row in document["metadata"] if row["name"] == "onnxroof node"
    }
    assert set(by_node) == {n.id for n in cnn.nodes}
    for node in cnn.nodes:
        kind, target = by_node[node.id]
        assert target in (names if kind == "node" else tensors)
        metrics = {
            row["name"]: row["value"] for row in document["metrics"] if (row["kind"], row["target"]) == (kind, target)
        }
        assert {"FLOPs", "bytes read", "bytes written", "intensity (FLOP/B)", "predicted time (µs)"} <= set(metrics)
        assert metrics["FLOPs"] == node.flops
    assert {"predicted latency (µs)", "FLOPs"} <= {r["name"] for r in document["metrics"] if r["kind"] == "model"}


def test_netron_targets_unnamed_and_duplicate_nodes_by_output(hostile) -> None:
    document = netron_attachment(hostile)
    targets = {
        row["value"]: (row["kind"], row["target"]) for row in document["metadata"] if row["name"] == "onnxroof node"
    }
    assert len(targets) == len(hostile.nodes)
    assert targets["7:Sigmoid"][0] == "value"  # no name
    assert targets["5:</title><script>window.__pwned=1</script>"][0] == "value"  # the name is shared
    assert all("\n" not in target for _, target in targets.values())  # Netron matches up to the first newline


# -------------------------------------------------------------------------------------------- ONNX copy


def test_annotated_onnx_passes_the_checker_and_keeps_weights(tmp_path: Path) -> None:
    source = LIGHT / "light_squeezenet.onnx"
    out = tmp_path / "annotated.onnx"
    result = invoke("graph", source, "--format", "onnx", "-o", out)
    assert result.exit_code == 0, result.output
    onnx.checker.check_model(str(out), full_check=True)
    original, annotated = onnx.load(source), onnx.load(out)
    assert [t.SerializeToString() for t in annotated.graph.initializer] == [
        t.SerializeToString() for t in original.graph.initializer
    ]
    analysis = analyze(source, "xavier")
    assert len(annotated.graph.node) == len(analysis.nodes)
    for node, result_node in zip(annotated.graph.node, analysis.nodes, strict=True):
        props = {p.key: p.value for p in node.metadata_props}
        assert {
            "onnxroof.flops",
            "onnxroof.bytes_read",
            "onnxroof.intensity",
            "onnxroof.bound",
            "onnxroof.latency_s",
            "onnxroof.kernel",
            "onnxroof.summary",
        } <= set(props)
        assert float(props["onnxroof.flops"]) == result_node.flops
        if result_node.state == NodeState.COSTED:
            assert props["onnxroof.kernel"] == analysis.kernel_of(result_node.id).id
    model_props = {p.key: p.value for p in annotated.metadata_props}
    assert model_props["onnxroof.platform"] == "xavier"
    assert float(model_props["onnxroof.latency_s"]) == pytest.approx(analysis.totals.latency_s)


def test_annotated_onnx_keeps_external_data_references(tmp_path: Path) -> None:
    model = _llama(tmp_path)
    out = tmp_path / "annotated.onnx"
    result = invoke("graph", model, "-d", "batch=1", "-d", "seq=8", "-o", out)
    assert result.exit_code == 0, result.output
    annotated = onnx.load(out, load_external_data=False)
    original = onnx.load(model, load_external_data=False)
    assert [t.SerializeToString() for t in annotated.graph.initializer] == [
        t.SerializeToString() for t in original.graph.initializer
    ]
    assert graph.external_data_files(annotated) == ["llama.weights"]
    # no weight bytes were pulled in: the copy (figures and value_info) is well under the weights' size
    assert out.stat().st_size < (tmp_path / "llama.weights").stat().st_size / 2
    onnx.checker.check_model(str(out))  # resolves llama.weights next to it

    elsewhere = tmp_path / "sub"
    elsewhere.mkdir()
    result = invoke("graph", model, "-d", "batch=1", "-d", "seq=8", "-o", elsewhere / "annotated.onnx")
    assert result.exit_code == 0 and "llama.weights" in result.output  # warned: keep it next to its weights


def test_annotated_onnx_carries_the_inferred_shapes(tmp_path: Path) -> None:
    """Netron shows value_info shapes on the edges: every value a node produces (graph outputs keep their own
    declaration) carries the shape inferred under the bound dims, read back with onnx itself."""
    source = tmp_path / "cnn.onnx"
    model = onnx.load(CNN)
    stale = onnx.helper.make_tensor_value_info("/stem/Conv_output_0", onnx.TensorProto.FLOAT, ["batch", 16, 32, 32])
    model.graph.value_info.append(stale)  # a declaration the exporter left: replaced, not duplicated
    onnx.save(model, source)
    out = tmp_path / "annotated.onnx"
    result = invoke("graph", source, "-d", "batch=2", "-p", "xavier", "-o", out)
    assert result.exit_code == 0, result.output
    annotated = onnx.load(out)
    onnx.checker.check_model(annotated, full_check=True)
    infos = {v.name: v.type.tensor_type for v in annotated.graph.value_info}
    assert len(infos) == len(annotated.graph.value_info)
    # the stem: a 3×3 stride-2 Conv of 16 channels on the 2×3×64×64 image → 2×16×32×32
    stem = infos["/stem/Conv_output_0"]
    assert [d.dim_value for d in stem.shape.dim] == [2, 16, 32, 32] and stem.elem_type == onnx.TensorProto.FLOAT
    outputs = {v.name for v in annotated.graph.output}
    analysis = analyze(source, "xavier", {"batch": 2})
    produced = 0
    for node, result_node in zip(annotated.graph.node, analysis.nodes, strict=True):
        for name, shape in zip(node.output, result_node.output_shapes, strict=True):
            if name in outputs:
                assert name not in infos
                continue
            produced += 1
            assert [d.dim_value for d in infos[name].shape.dim] == shape, name
    assert produced == len(infos) == 29  # 30 nodes, one writes the graph's output


def test_annotating_re_annotates_and_keeps_foreign_metadata(cnn, tmp_path: Path) -> None:
    model = onnx.load(CNN)
    entry = model.graph.node[0].metadata_props.add()
    entry.key, entry.value = "mine", "kept"
    copy = tmp_path / "cnn.onnx"
    onnx.save(model, copy)
    once = annotated_model(analyze(copy, "xavier", {"batch": 1}))
    onnx.save(once, copy)
    twice = annotated_model(analyze(copy, "xavier", {"batch": 1}))
    keys = [p.key for p in twice.graph.node[0].metadata_props]
    assert keys[0] == "mine" and len(keys) == len(set(keys))
    assert len([k for k in keys if k.startswith("onnxroof.")]) == len(keys) - 1


# ------------------------------------------------------------------------------------------------- DOT


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pydot's use of old pyparsing names
def test_dot_parses_colours_by_bound_and_clusters_fused_kernels(cnn) -> None:
    pydot = pytest.importorskip("pydot", reason="pydot is not installed (pip install pydot)")
    fused = fuse_first_kernels(cnn, 2)
    (parsed,) = pydot.graph_from_dot_data(render_dot(fused))
    loose = [n for n in parsed.get_nodes() if re.fullmatch(r"n\d+", n.get_name())]
    clusters = {c.get_name(): c.get_nodes() for c in parsed.get_subgraphs()}
    several = [k for k in fused.kernels if len(k.node_ids) > 1]
    assert set(clusters) == {f"cluster_{k.id}" for k in several}  # one cluster per kernel of several nodes
    assert len(clusters["cluster_kfused"]) == len(fused.kernels[0].node_ids)
    inside = [n for members in clusters.values() for n in members]
    assert len(loose) + len(inside) == len(cnn.nodes)
    fills = {n.get_attributes()["fillcolor"].strip('"') for n in [*loose, *inside]}
    assert {graph._FILL["memory"][0], graph._FILL["compute"][0]} <= fills
    assert len(parsed.get_edges()) == cnn.graph.number_of_edges()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_dot_of_hostile_names_still_parses(hostile) -> None:
    pydot = pytest.importorskip("pydot", reason="pydot is not installed (pip install pydot)")
    text = render_dot(hostile)
    (parsed,) = pydot.graph_from_dot_data(text)
    names = {n.get_name() for n in parsed.get_nodes()}
    names |= {n.get_name() for cluster in parsed.get_subgraphs() for n in cluster.get_nodes()}
    assert {f"n{i}" for i in range(len(hostile.nodes))} <= names
    assert "evil" not in names  # the injected edge did not become a node
    assert len(parsed.get_edges()) == hostile.graph.number_of_edges()


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz 'dot' is not installed")
def test_svg_through_graphviz(hostile_path: Path, tmp_path: Path) -> None:
    out = tmp_path / "graph.svg"
    result = invoke("graph", hostile_path, "-o", out)
    assert result.exit_code == 0, result.output
    svg = out.read_text(encoding="utf-8")
    xml.dom.minidom.parseString(svg)
    assert "<script" not in svg.lower() and "<img" not in svg.lower()
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in svg


def test_svg_without_graphviz_is_one_clear_error(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(graph.shutil, "which", lambda name: None)
    result = invoke("graph", CNN, "-d", "batch=1", "--format", "svg", "-o", tmp_path / "g.svg")
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Graphviz 'dot' program is not installed" in lines[0]
    assert not list(tmp_path.iterdir())


def test_graph_cli_formats_and_errors(tmp_path: Path) -> None:
    for suffix, check in (
        (".json", lambda t: json.loads(t)["signature"] == "netron:attachment"),
        (".dot", lambda t: t.startswith("digraph onnxroof {")),
    ):
        out = tmp_path / f"g{suffix}"
        result = invoke("graph", TRANSFORMER, "-d", "batch=1", "-d", "seq=16", "-o", out)
        assert result.exit_code == 0, result.output
        assert check(out.read_text(encoding="utf-8"))
    result = invoke("graph", CNN, "-d", "batch=1", "--format", "dot")
    assert result.exit_code == 0 and result.stdout.startswith("digraph onnxroof {")  # stdout
    assert invoke("graph", CNN, "-d", "batch=1").exit_code == 2  # no format, no suffix to take it from
    assert invoke("graph", CNN, "-d", "batch=1", "-o", tmp_path / "g.txt").exit_code == 2
    result = invoke("graph", CNN, "-d", "batch=1", "--format", "onnx")
    assert result.exit_code == 2 and "give -o FILE.onnx" in result.output


def test_every_hostile_string_is_escaped_in_dot(hostile) -> None:
    text = render_dot(hostile)
    for line in text.splitlines()[4:-1]:  # node, cluster and edge statements: every quote is escaped or paired
        unescaped = line.replace("\\\\", "").replace('\\"', "")
        assert unescaped.count('"') % 2 == 0, line
    for text_ in ALL:
        if "\n" not in text_:
            assert text_ not in text or ('"' not in text_ and "\\" not in text_)
