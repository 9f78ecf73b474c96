"""benchmarks/gpu_measurements.toml, the models benchmarks/gpu_models.py builds for it, and
benchmarks/bench_gpu_published.py on two rows (no network; the models are built in a temporary folder)."""

from __future__ import annotations

import sys
from pathlib import Path

import onnx
import pytest

from onnxroof import analyze
from onnxroof.analysis.whatif import WhatIf
from onnxroof.platform.lookup import bundled_platform_names

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import bench_gpu_published as bench  # noqa: E402
import gpu_models  # noqa: E402

FIELDS = {
    "id": str,
    "model": str,
    "shape": str,
    "input": str,
    "scenario": str,
    "batch": int,
    "precision": str,
    "runtime": str,
    "cuda_graph": bool,
    "streams": int,
    "gpu": str,
    "power": str,
    "platform": str,
    "metric": str,
    "measured": float,
    "source": str,
    "config": str,
    "date": str,
    "note": str,
}


SOURCES = ("https://github.com/mlcommons/inference_results_v", "https://github.com/NVIDIA-AI-IOT/torch2trt/blob/")


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return bench.load_rows()


def test_rows_parse_with_every_field_and_a_source(rows: list[dict]) -> None:
    assert len(rows) >= 30
    assert len({row["id"] for row in rows}) == len(rows)
    for row in rows:
        assert set(row) == set(FIELDS), row["id"]
        for key, kind in FIELDS.items():
            assert isinstance(row[key], kind), (row["id"], key)
        assert row["source"].startswith(SOURCES), row["id"]
        assert (".txt : '" in row["source"]) or (".md : '" in row["source"]), row["id"]
        assert row["shape"] in gpu_models.BUILDERS, row["id"]
        assert (row["scenario"], row["metric"]) in {("SingleStream", "latency_ms"), ("Offline", "throughput_sps")}
        assert row["measured"] > 0 and row["batch"] >= 1
        assert row["scenario"] == "Offline" or row["batch"] == 1, row["id"]


def test_every_platform_is_bundled(rows: list[dict]) -> None:
    assert {row["platform"] for row in rows} <= set(bundled_platform_names())


def test_rows_cover_five_gpus_two_of_them_jetson(rows: list[dict]) -> None:
    platforms = {row["platform"] for row in rows}
    assert len(platforms) >= 5
    assert len(platforms & {"xavier", "xavier-nx", "agx-orin", "orin-nx", "orin-nano", "jetson-nano"}) >= 2


def test_summary_figures_match_their_source_quote(rows: list[dict]) -> None:
    """``measured`` is the figure quoted in ``source``: the mean latency in ns ÷ 1e6, samples/s as printed, or
    torch2trt's 'Latency (TensorRT)' in ms."""
    for row in rows:
        quoted = row["source"].split(" : '", 1)[1]
        if "torch2trt" in row["source"]:
            assert f"Latency (TensorRT) {row['measured']:g} |" in quoted, row["id"]
        elif row["metric"] == "latency_ms":
            ns = int(quoted.split("Mean latency (ns) : ")[1].split("'")[0])
            assert row["measured"] == pytest.approx(ns / 1e6, rel=1e-5), row["id"]
        else:
            sps = float(quoted.split("Samples per second: ")[1].split("'")[0])
            assert row["measured"] == pytest.approx(sps, rel=1e-9), row["id"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gpu_models")


def _counts(shape: str, folder: Path, **dims: int) -> tuple[float, float, onnx.ModelProto]:
    path = gpu_models.build(shape, folder)
    a = analyze(path, "a100", dims)
    return a.totals.params, a.totals.macs, onnx.load(path, load_external_data=False)


def _boxes(model: onnx.ModelProto) -> list[int]:
    """The box count of each head: axis 2 of the outputs of the Concats along axis 2 (boxes, then scores)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    shapes = {v.name: v.type.tensor_type.shape for v in inferred.graph.value_info}
    heads = [n.output[0] for n in model.graph.node if n.op_type == "Concat" and n.attribute[0].i == 2]
    return [shapes[h].dim[2].dim_value for h in heads]


def _post_costs(shape: str, folder: Path, batch: int) -> dict[str, list[tuple[float, list]]]:
    """FLOPs and output shapes of the post-processing nodes (TopK, NonMaxSuppression) at ``batch``."""
    a = analyze(gpu_models.build(shape, folder), "a100", {"N": batch})
    out: dict[str, list[tuple[float, list]]] = {}
    for node in a.nodes:
        if node.op_type in ("TopK", "NonMaxSuppression"):
            out.setdefault(node.op_type, []).append((node.flops, node.output_shapes[0]))
    return out


@pytest.mark.parametrize(
    ("shape", "params", "gmacs"),
    [("resnet18", 11_689_512, 1.81), ("vgg16", 138_357_544, 15.47), ("vgg19", 143_667_240, 19.63)],
)
def test_torchvision_models_match_torchvision_counts(folder: Path, shape: str, params: int, gmacs: float) -> None:
    """torchvision's model tables (num_params, GFLOPS as multiply-adds); ResNet-18 has BatchNorm's 2 per
    channel where the folded graph has 1 bias: 4,800 fewer; VGG has no BatchNorm."""
    got, macs, _ = _counts(shape, folder, N=1)
    assert got == params - (4_800 if shape == "resnet18" else 0)
    assert macs == pytest.approx(gmacs * 1e9, rel=0.003)


def test_resnet50_matches_the_published_counts(folder: Path) -> None:
    """torchvision: 25,557,032 parameters (with BatchNorm's 2 per channel where the folded graph has 1 bias
    per channel: 26,560 fewer) and 4.09 G multiply-adds."""
    params, macs, _ = _counts("resnet50", folder, N=1)
    assert params == 25_557_032 - 26_560
    assert macs == pytest.approx(4.09e9, rel=0.002)


def test_ssd_models_match_mlperf_counts_and_box_counts(folder: Path) -> None:
    """MLPerf Inference paper, Table I: SSD-MobileNet-v1 2.47 GOPS, SSD-ResNet-34 433 GOPS per input (2 ops per
    MAC); boxes 19²·3 + (10² + 5² + 3² + 2² + 1²)·6 = 1917 and 50²·4 + (25² + 13² + 7²)·6 + (3² + 3²)·4 = 15130."""
    _, macs, model = _counts("ssd-mobilenet", folder, N=1)
    assert macs == pytest.approx(2.47e9 / 2, rel=0.01)
    assert _boxes(model) == [1917, 1917]
    _, macs, model = _counts("ssd-resnet34", folder, N=1)
    assert macs == pytest.approx(433e9 / 2, rel=0.01)
    assert _boxes(model) == [15130, 15130]


def test_retinanet_anchor_count(folder: Path) -> None:
    """Anchors: 9 per position of P3-P7 at 800x800: 9 · (100² + 50² + 25² + 13² + 7²) = 120087."""
    _, _, model = _counts("retinanet", folder, N=1)
    assert _boxes(model) == [120087, 120087]


@pytest.mark.parametrize("batch", [1, 2])
def test_retinanet_post_processing_is_efficient_nms_in_onnx_ops(folder: Path, batch: int) -> None:
    """TensorRT's EfficientNMS as NVIDIA's RetinaNet engine runs it: the best 4096 of the N · 264 · 120087 logits
    (TopK: one compare per element per ⌈log2 4096⌉ = 12 heap levels), then one class-aware suppression of 4096
    boxes per image (NonMaxSuppression: 4096 areas · 3 + 4096 · log2 4096 + 13 · 4096 · 4095 / 2 per image)."""
    costs = _post_costs("retinanet", folder, batch)
    ((topk, shape),) = costs["TopK"]
    assert shape == [batch, 4096]
    assert topk == batch * 264 * 120087 * 12
    ((nms, _),) = costs["NonMaxSuppression"]
    assert nms == pytest.approx(batch * (4096 * 3 + 4096 * 12 + 13 * 4096 * 4095 / 2))


@pytest.mark.parametrize(
    ("shape", "classes", "boxes", "top_k"), [("ssd-mobilenet", 91, 1917, 100), ("ssd-resnet34", 81, 15130, 200)]
)
def test_ssd_post_processing_is_per_class_nms_in_onnx_ops(
    folder: Path, shape: str, classes: int, boxes: int, top_k: int
) -> None:
    """NVIDIA's NMS_OPT_TRT plugin (MLPerf v1.1): the top_k best boxes per class (TopK over the B boxes, ⌈log2
    top_k⌉ compares each), per-class suppression (NonMaxSuppression over N · C batches of top_k boxes), then the
    keep_top_k = top_k best of the image's C · top_k candidates."""
    import math

    costs = _post_costs(shape, folder, 2)
    (per_class, per_class_shape), (per_image, per_image_shape) = costs["TopK"]
    levels = math.ceil(math.log2(top_k))
    assert per_class_shape == [2, classes, top_k]
    assert per_class == 2 * classes * boxes * levels
    assert per_image_shape == [2, top_k]
    assert per_image == 2 * classes * top_k * levels
    ((nms, _),) = costs["NonMaxSuppression"]
    pairs = top_k * (top_k - 1) / 2
    assert nms == pytest.approx(2 * classes * (top_k * 3 + top_k * math.log2(top_k) + 13 * pairs))


def test_bert_large_closed_form(folder: Path) -> None:
    """Parameters V·h + P·h + 2·h + 2·h + L·(4·(h² + h) + 2·h·i + i + h + 4·h) + 2·h + 2 (plus the int64 shape
    constants, a few dozen elements); MACs L·(4·S·h² + 2·S·i·h + 2·S²·h) + 2·S·h at S = 384."""
    h, i, vocab, positions, layers, s = 1024, 4096, 30522, 512, 24, 384
    params, macs, _ = _counts("bert-large", folder, N=1, S=s)
    closed = vocab * h + positions * h + 4 * h + layers * (4 * (h * h + h) + 2 * h * i + i + 5 * h) + 2 * h + 2
    assert closed <= params <= closed + 64
    assert macs == layers * (4 * s * h * h + 2 * s * i * h + 2 * s * s * h) + 2 * s * h


def test_builds_write_no_weight_bytes(folder: Path) -> None:
    """The weights file is sparse: its size is the weights' but (almost) no block is allocated."""
    gpu_models.build("resnet50", folder)
    data = folder / "resnet50.weights"
    assert data.stat().st_size >= 4 * 25_000_000
    assert data.stat().st_blocks * 512 < 1_000_000


def test_script_predicts_two_rows(rows: list[dict], folder: Path) -> None:
    """One SingleStream and one Offline row: the predicted figures follow from the analysis's latency
    (latency in ms; batch ÷ latency), the error is predicted time ÷ measured time − 1, and the table lists both."""
    picked = [r for r in rows if r["id"] in ("xavier-resnet50-ss", "t4-resnet50-off")]
    assert len(picked) == 2
    predicted, models = bench.predict(picked, folder)
    assert models[0] == "roofline"
    single, offline = predicted
    assert single["runtime_profile"] == "tensorrt-cudagraph"  # MLPerf's use_graphs: one replay per run
    assert offline["runtime_profile"] == "tensorrt"
    assert set(models) == {"roofline", "gpu"}
    p = single["pred"]["roofline"]
    assert p["figure"] == pytest.approx(p["latency_s"] * 1e3)
    assert p["error"] == pytest.approx(p["latency_s"] / (single["measured"] / 1e3) - 1)
    q = offline["pred"]["roofline"]
    assert q["figure"] == pytest.approx(256 / q["latency_s"])
    assert q["error"] == pytest.approx(q["latency_s"] / (256 / offline["measured"]) - 1)
    text = bench.table(predicted, models)
    assert "`xavier-resnet50-ss`" in text and "`t4-resnet50-off`" in text
    summary = bench.summary(predicted, models)["roofline"]
    assert summary["rows"] == 2
    assert summary["median_abs_error"] == pytest.approx((abs(p["error"]) + abs(q["error"])) / 2)


def test_the_training_split_is_every_other_row_by_id_within_each_platform() -> None:
    rows = [{"id": i, "platform": p} for p, i in [("a", "a3"), ("a", "a1"), ("b", "b1"), ("a", "a2"), ("b", "b2")]]
    # a: a1 a2 a3 → a1, a3 train; b: b1 b2 → b1 train
    assert bench.training_ids(rows) == {"a1", "a3", "b1"}


def test_the_held_out_summary_leaves_the_training_rows_out() -> None:
    def row(i: str, error: float) -> dict:
        return {"id": i, "platform": "p", "pred": {"gpu": {"error": error}}}

    rows = [row("r1", 0.5), row("r2", 0.1), row("r3", -0.9), row("r4", -0.3)]  # r1, r3 train
    held = bench.summary(rows, ["gpu"], held_out=True)["gpu"]
    assert held["rows"] == 2 and held["median_abs_error"] == pytest.approx(0.2) and held["within_20"] == 0.5
    assert bench.summary(rows, ["gpu"])["gpu"]["rows"] == 4
    assert bench.summary(rows, ["gpu"])["gpu"]["median_abs_error"] == pytest.approx(0.4)


def test_the_length_histogram_is_mlperfs_10833_features() -> None:
    """MLPerf BERT's QSL holds 10,833 features (SQuAD v1.1 dev at 384/64/128); the committed histogram sums to
    them, its mean and padding share are the file's header, and every length lies between the shortest possible
    feature and max_seq_length."""
    import tomllib

    counts = bench.load_lengths()
    with open(bench.LENGTHS, "rb") as f:
        header = tomllib.load(f)
    total = sum(counts.values())
    tokens = sum(length * count for length, count in counts.items())
    assert total == header["features"] == 10_833
    assert tokens == header["tokens"]
    assert tokens / total == pytest.approx(header["mean"], abs=1e-4)
    assert header["mean"] == pytest.approx(178.494, abs=1e-3)
    assert 1 - tokens / (total * bench.SEQUENCE_MAX) == pytest.approx(header["padding_share"], abs=1e-4)
    assert min(counts) == header["min"] and max(counts) == header["max"] == bench.SEQUENCE_MAX
    assert all(count > 0 for count in counts.values())


def test_length_weights_are_the_exact_linear_interpolation() -> None:
    """Lengths 10 (×1), 13 (×2), 16 (×1) on a grid of step 8: the grid is 10, 16 (the shortest, the multiples of
    8 between, the longest); 13 sits 3/6 of the way from 10 to 16, so each end gets half of its 2 features:
    10 → (1 + 1) / 4, 16 → (1 + 1) / 4."""
    weights = bench.length_weights({10: 1, 13: 2, 16: 1}, step=8)
    assert weights == pytest.approx({10: 0.5, 16: 0.5})
    assert sum(weights.values()) == pytest.approx(1)
    # 20 lies between grid points 16 and 24: 4/8 each way; 30 is the last grid point
    weights = bench.length_weights({10: 2, 20: 1, 30: 1}, step=8)
    assert weights == pytest.approx({10: 0.5, 16: 0.125, 24: 0.125, 30: 0.25})
    # the weighted mean of the grid is the histogram's mean: a linear t(L) is averaged exactly
    assert sum(s * w for s, w in weights.items()) == pytest.approx((2 * 10 + 20 + 30) / 4)


def test_graph_rows_round_lengths_up_to_the_captured_graph() -> None:
    assert bench.graph_lengths({41: 1, 44: 2, 45: 3, 384: 1}) == {44: 3, 48: 3, 384: 1}
    counts = bench.load_lengths()
    rounded = bench.graph_lengths(counts)
    assert sum(rounded.values()) == sum(counts.values())
    assert all(length % 4 == 0 for length in rounded)
    ss, graph = {"batch": 1, "cuda_graph": False}, {"batch": 1, "cuda_graph": True}
    assert bench.bert_weights(ss, counts) == bench.length_weights(counts)
    assert bench.bert_weights(graph, counts) == bench.length_weights(rounded)


@pytest.mark.parametrize("row_id", ["xavier-bert-ss", "t4-bert-off"])
def test_a_one_length_histogram_is_the_one_length_prediction(rows: list[dict], folder: Path, row_id: str) -> None:
    """A histogram of one length L predicts exactly what ``analyze`` gives at ``{"N": batch, "S": L}``; two
    lengths give the count-weighted mean of the two analyses (SingleStream: the mean latency; Offline: the mean
    time of a sorted batch, throughput = batch ÷ that)."""
    (row,) = [r for r in rows if r["id"] == row_id]
    path = gpu_models.build("bert-large", folder)
    model = bench.time_model("gpu")
    runtime = bench._runtime_for(row)

    def direct(length: int) -> float:
        extra = {"runtime": runtime} if runtime else {}
        a = analyze(path, row["platform"], {"N": row["batch"], "S": length}, whatif=WhatIf(precision="int8"),
                    time_model=model, **extra)  # fmt: skip
        return a.totals.latency_s

    one = bench.predict_row(row, path, {"gpu": model}, counts={177: 5})
    assert one["pred"]["gpu"]["latency_s"] == pytest.approx(direct(177), rel=1e-12)
    assert one["lengths"] == {"analyzed": 1, "mean": 177.0}
    two = bench.predict_row(row, path, {"gpu": model}, counts={120: 3, 256: 1})["pred"]["gpu"]
    assert two["latency_s"] == pytest.approx((3 * direct(120) + direct(256)) / 4, rel=1e-12)
    if row["metric"] == "throughput_sps":
        assert two["figure"] == pytest.approx(row["batch"] / two["latency_s"])
    assert direct(120) < direct(256)  # the two lengths do differ


def test_the_fit_uses_training_rows_only_and_picks_the_grids_best(
    rows: list[dict], folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from onnxroof.roofline.gpu import GpuTime

    ids = ("xavier-resnet18-torch2trt", "xavier-resnet50-ss", "xavier-resnet50-torch2trt")
    picked = [r for r in rows if r["id"] in ids]
    # sorted by id: resnet18-torch2trt (train), resnet50-ss (held out), resnet50-torch2trt (train)
    assert bench.training_ids(picked) == {"xavier-resnet18-torch2trt", "xavier-resnet50-torch2trt"}
    monkeypatch.setattr(bench, "FIT_GENERATIONS", ("volta",))
    monkeypatch.setattr(bench, "FIT_GRID", (2000, 40000))
    cycles, error, count = bench.fit_library_cycles(picked, folder)["volta"]
    assert count == 2
    train = [r for r in picked if r["id"] != "xavier-resnet50-ss"]

    def median_error(c: float) -> float:
        model = {"gpu": GpuTime(library_cycles=(("volta", c),))}
        errors = [
            abs(bench.predict_row(r, gpu_models.build(r["shape"], folder), model)["pred"]["gpu"]["error"])
            for r in train
        ]
        return sorted(errors)[0] / 2 + sorted(errors)[1] / 2

    assert error == pytest.approx(median_error(cycles))
    assert error <= median_error(2000 if cycles == 40000 else 40000)
