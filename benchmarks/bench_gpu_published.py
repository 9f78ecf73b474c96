"""onnxroof's GPU time models against published TensorRT measurements (MLPerf Inference, NVIDIA's submissions).

``python benchmarks/bench_gpu_published.py [--measurements PATH] [--rows ID,ID] [--json PATH] [--work DIR] [--fit]``

Reads the measurements (``benchmarks/gpu_measurements.toml``: model, batch, precision, runtime, GPU, the bundled
platform, the measured SingleStream latency or Offline throughput, the source), builds each model once with
:mod:`gpu_models` (weights in a sparse external file: nothing is downloaded or allocated; cached under
``benchmarks/_work/gpu/``), and predicts every row with each time model that this onnxroof has:

* ``roofline``: :class:`onnxroof.roofline.place.RooflineTime`, the lower bound (every kernel at the platform's
  sustained roofs);
* ``gpu``: the shape-aware GPU model (issue 22), when the installed onnxroof has one (a column of ``–``
  otherwise).

How a row is asked: ``analyze(model, platform, dims={"N": batch}, whatif=WhatIf(precision="int8"))`` (the
``--precision int8`` what-if: every tensor restated as int8, as NVIDIA's INT8 engines run with calibrated
per-tensor scales; the graphs are float32 without Q/DQ nodes), run as its stages (read once; bind, cost and fuse
once per shape; place per row and time model). A BERT row is asked at many sequence lengths and averaged over the
lengths of the features MLPerf runs (:func:`bert_batch_time`, :data:`LENGTHS`), as NVIDIA's harness runs them.
When the installed onnxroof has runtime profiles (``onnxroof.runtime``), a row whose harness replays a CUDA graph
(``cuda_graph = true``) runs under :data:`RUNTIME_GRAPH` and the others under :data:`RUNTIME_KERNEL`; otherwise
under the platform's default.

Figures compared (nothing is fitted per row; one constant per GPU generation, the library kernels' fixed cycles on
Volta and Turing, is fitted by ``--fit`` on the declared training split, :func:`training_ids`, and the summary
reports the held-out rows apart from all rows):

* SingleStream: predicted latency = the analysis's latency (``totals.latency_s``), against the mean latency.
* Offline: predicted throughput = ``batch / predicted latency of one batch``, against samples/s.
* error = ``predicted time ÷ measured time − 1`` of one batch (for Offline, measured time = ``batch ÷
  throughput``), so that the sign means the same on every row: negative = predicted too fast, positive = too
  slow (an Offline row at −20 % predicts 1 / 0.8 = 1.25× the measured throughput). The summary gives the median
  |error| and the share of rows within ±20 % per time model.

A row whose platform is not bundled (``xavier-nx`` and ``orin-nx`` come with the gpu time model's platform
files) or whose analysis fails is kept in the table with the reason in place of its prediction.
"""

from __future__ import annotations

import argparse
import bisect
import importlib
import inspect
import json
import statistics
import sys
import time
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_models import build  # noqa: E402

from onnxroof import analyze  # noqa: E402
from onnxroof.analysis.analyze import place  # noqa: E402
from onnxroof.analysis.stages import bind, cost, fuse, read  # noqa: E402
from onnxroof.analysis.whatif import WhatIf  # noqa: E402
from onnxroof.platform.lookup import load_platform  # noqa: E402
from onnxroof.roofline.place import ROOFLINE  # noqa: E402
from onnxroof.runtime import runtime_for  # noqa: E402

MEASUREMENTS = Path(__file__).resolve().parent / "gpu_measurements.toml"
WORK = Path(__file__).resolve().parent / "_work" / "gpu"
TARGET = 0.20
SEQUENCE_MAX = 384  # MLPerf BERT's max_seq_length: what the engine is built for, and the padded shape
LENGTHS = Path(__file__).resolve().parent / "data" / "squad_v1.1_dev_lengths.toml"
"""The histogram (length → count) of the unpadded lengths of the 10,833 features MLPerf BERT runs (SQuAD v1.1
dev at max_seq_length 384, max_query_length 64, doc_stride 128), made by ``benchmarks/squad_lengths.py`` (its
provenance in the file): mean 178.49 tokens, median 164, 53.5 % of a padded batch's tokens padding. That the
harness removes the padding in every scenario: NVIDIA's MLPerf v1.1 BERT README, "Variable Sequence Lengths: We
truncate the padded part of the input sequences and concatenate the truncated sequences when forming a batch"
(https://github.com/mlcommons/inference_results_v1.1/blob/7fc43356c4d71ed6ec97af9d035a34ed146587b8/closed/NVIDIA/
code/bert/tensorrt/README.md; its one network builder, bert_var_seqlen.py, serves every scenario)."""
LENGTH_STEP = 8
"""Tokens between the lengths a BERT row is analyzed at (:func:`length_weights`)."""
GRAPH_LENGTH_STEP = 4
"""With CUDA graphs at batch 1, NVIDIA's harness replays the graph captured for the next total length up, graphs
being captured at 4, 8, ..., 380 and 384 tokens when the largest batch is ≤ 8: ``BERTCoreVS::InitializeGraphSpecs``
("add graph specs for batch size = 1 if max batch size <= 8", step 4) and ``BERTCoreVS::infer``
(``GetClosestGraphSpec``), https://github.com/mlcommons/inference_results_v3.0/blob/
dad59af09e9e62eceec4bee48794e201d6cf9170/closed/NVIDIA/code/harness/harness_bert/bert_core_vs.cc: the packed
input (the GEMMs' tokens) is that length; the attention kernels read the real one from the sequence offsets."""
RUNTIME_GRAPH = "tensorrt-cudagraph"
RUNTIME_KERNEL = "tensorrt"
TIME_MODELS = ("roofline", "gpu")


def load_rows(path: Path = MEASUREMENTS) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        rows: list[dict[str, Any]] = tomllib.load(f)["row"]
    return rows


def training_ids(rows: Iterable[dict[str, Any]]) -> frozenset[str]:
    """The declared training split for any constant fitted on these rows: within each platform, the rows sorted
    by id, every other one from the first (positions 0, 2, 4, ...). Every other row is held out; a fitted
    constant is reported on the held-out rows only."""
    by_platform: dict[str, list[str]] = {}
    for row in rows:
        by_platform.setdefault(str(row["platform"]), []).append(str(row["id"]))
    return frozenset(i for ids in by_platform.values() for i in sorted(ids)[::2])


def time_model(name: str) -> object | None:
    """The time model called ``name`` in this onnxroof (``roofline``; ``gpu``: :data:`onnxroof.roofline.gpu.GPU`
    where the installed onnxroof has it), or None."""
    if name == "roofline":
        return ROOFLINE
    try:
        gpu = importlib.import_module("onnxroof.roofline.gpu")
    except ImportError:
        return None
    model = getattr(gpu, name.upper(), None)
    return model if hasattr(model, "times") and not isinstance(model, type) else None


def _runtime_for(row: dict[str, Any]) -> str | None:
    """The runtime profile a row runs under, when this onnxroof has runtime profiles and ``analyze`` takes one."""
    if "runtime" not in inspect.signature(analyze).parameters:
        return None
    try:
        runtime = importlib.import_module("onnxroof.runtime")
    except ImportError:
        return None
    name = RUNTIME_GRAPH if row.get("cuda_graph") else RUNTIME_KERNEL
    return name if name in runtime.runtime_names() else None


def _platform_exists(name: str) -> bool:
    from onnxroof.platform.lookup import load_platform

    try:
        load_platform(name)
    except Exception:  # any failure to load means the row cannot be predicted
        return False
    return True


def load_lengths(path: Path = LENGTHS) -> dict[int, int]:
    """The histogram in ``path``'s ``[counts]`` table: unpadded length (tokens) → number of features."""
    with open(path, "rb") as f:
        return {int(length): int(count) for length, count in tomllib.load(f)["counts"].items()}


def graph_lengths(counts: dict[int, int], step: int = GRAPH_LENGTH_STEP) -> dict[int, int]:
    """``counts`` with each length rounded up to the next multiple of ``step`` (the length of the CUDA graph the
    harness replays for it, :data:`GRAPH_LENGTH_STEP`): ``L → ⌈L / step⌉ · step``."""
    out: dict[int, int] = {}
    for length, count in counts.items():
        up = -(-length // step) * step
        out[up] = out.get(up, 0) + count
    return out


def length_weights(counts: dict[int, int], step: int = LENGTH_STEP) -> dict[int, float]:
    """The lengths to analyze and the weight of each, so that ``Σ weight · t(length)`` is the mean of ``t`` over
    the histogram ``counts`` with ``t`` interpolated linearly between the analyzed lengths.

    The analyzed lengths (the grid ``g``): the shortest length, every multiple of ``step`` above it and below the
    longest, and the longest. A length ``L`` with ``n`` features on a grid point puts ``n / N`` on it (``N`` the
    features in all); between grid points ``a < L < b`` it puts ``n (b − L) / ((b − a) N)`` on ``a`` and ``n (L −
    a) / ((b − a) N)`` on ``b`` (the exact weights of the linear interpolation ``t(L) ≈ t(a) + (t(b) − t(a)) (L −
    a) / (b − a)``). The weights sum to 1; a histogram of one length gives ``{L: 1.0}``, the one-length
    prediction; the weighted mean of the grid lengths is the histogram's mean length. Grid points of weight 0
    (no length within ``step`` of them) are left out."""
    total = sum(counts.values())
    low, high = min(counts), max(counts)
    grid = sorted({low, high, *range(-(-low // step) * step, high, step)})
    weights = dict.fromkeys(grid, 0.0)
    for length, count in counts.items():
        i = bisect.bisect_left(grid, length)
        if grid[i] == length:
            weights[length] += count / total
            continue
        a, b = grid[i - 1], grid[i]
        weights[a] += count * (b - length) / ((b - a) * total)
        weights[b] += count * (length - a) / ((b - a) * total)
    return {length: weight for length, weight in weights.items() if weight > 0}


def bert_weights(row: dict[str, Any], counts: dict[int, int] | None = None) -> dict[int, float]:
    """The lengths a BERT row is analyzed at and their weights (:func:`length_weights`) over the histogram
    (:data:`LENGTHS`), rounded up to the replayed CUDA graph's length at batch 1 with graphs (:func:`graph_lengths`).

    SingleStream: each query is one feature drawn at random from the 10,833 (MLPerf's performance sample set
    for BERT is the whole dev set), run at its own length; the mean latency is ``E_L[t(1, L)]``. Offline: the
    harness sorts the query's samples by length, longest first, and cuts the sorted list into batches of
    ``gpu_batch_size`` (``BERTServer::IssueQuery``, "Sort samples in the descending order of sentence length",
    https://github.com/mlcommons/inference_results_v3.1/blob/eaf622a25c00f2b4b1d2c4f5b4f430570429d24a/closed/
    NVIDIA/code/harness/harness_bert/bert_server.cc, the same in earlier rounds), so a batch holds ``B``
    features of (nearly) one length: an Offline query holds tens of thousands of samples (MLPerf's 600 s minimum
    run at the measured throughput), so one batch of 8 to 1,280 spans under 5 % of the sorted list. Each batch is
    taken as ``B`` sequences of one length ``L`` (GEMMs over ``B · L`` tokens, attention per sequence over ``L²``),
    ``L`` distributed as the histogram: the time per batch is ``E_L[t(B, L)]``, the throughput ``B / E_L[t(B, L)]``.
    Not modelled: a batch straddling two lengths (taken as the mix of both), and Offline CUDA graphs (none of the
    Offline rows replays one)."""
    counts = load_lengths() if counts is None else counts
    if row.get("cuda_graph") and row["batch"] == 1:
        counts = graph_lengths(counts)
    return length_weights(counts)


_READ: dict[Path, Any] = {}
_FUSED: dict[tuple[Any, ...], Any] = {}


def _fused(model_path: Path, dims: dict[str, int], precision: str, profile: str) -> Any:
    """The model bound at ``dims`` under the precision what-if, costed and fused under ``profile``: once per
    (model, dims, precision, profile) in a run (the stages of :func:`onnxroof.analyze`, placement left out)."""
    key = (model_path, tuple(sorted(dims.items())), precision, profile)
    if key not in _FUSED:
        if model_path not in _READ:
            _READ[model_path] = read(model_path)
        bound = bind(_READ[model_path], dims, None, WhatIf(precision=precision))
        _FUSED[key] = fuse(cost(bound), profile)
    return _FUSED[key]


def _latency(row: dict[str, Any], model_path: Path, dims: dict[str, int], model: object, runtime: str | None) -> float:
    """``totals.latency_s`` of ``analyze(model_path, row's platform, dims, precision what-if, model, runtime)``."""
    target = load_platform(row["platform"])
    target.peak(row["precision"])  # raises PlatformError naming what the platform has
    chosen = runtime_for(target, runtime, None)
    fused = _fused(model_path, dims, row["precision"], chosen.fusion_profile)
    return float(place(fused, target, model, chosen).totals.latency_s)  # type: ignore[arg-type]


def bert_batch_time(
    row: dict[str, Any], model_path: Path, model: object, runtime: str | None, weights: dict[int, float]
) -> float:
    """The predicted time of one batch of a BERT row: ``Σ_L w_L · t(batch, L)`` over :func:`bert_weights`
    (SingleStream: the mean latency; Offline: the mean time of one sorted batch), ``t(N, L)`` the analysis's
    ``totals.latency_s`` at ``{"N": N, "S": L}``."""
    return sum(w * _latency(row, model_path, {"N": row["batch"], "S": s}, model, runtime) for s, w in weights.items())


def predict_row(
    row: dict[str, Any], model_path: Path, models: dict[str, object], counts: dict[int, int] | None = None
) -> dict[str, Any]:
    """``row`` with ``pred`` added: per time model name, the predicted latency of one batch (s), the predicted
    figure in the row's metric, and its error; or ``skipped`` / ``failed`` with the reason. A BERT row is the
    mean over the lengths of ``counts`` (default :data:`LENGTHS`; :func:`bert_batch_time`)."""
    out = dict(row)
    if not _platform_exists(row["platform"]):
        out["skipped"] = f"platform {row['platform']!r} is not bundled in this onnxroof"
        return out
    bert = row["shape"] == "bert-large"
    weights = bert_weights(row, counts) if bert else {}
    if bert:
        out["lengths"] = {"analyzed": len(weights), "mean": sum(s * w for s, w in weights.items())}
    runtime = _runtime_for(row)
    out["runtime_profile"] = runtime or "platform default"
    out["pred"] = {}
    for name, model in models.items():
        try:
            if bert:
                latency = bert_batch_time(row, model_path, model, runtime, weights)
            else:
                latency = _latency(row, model_path, {"N": row["batch"]}, model, runtime)
        except Exception as exc:  # reported in the table, precisely
            out["pred"][name] = {"failed": f"{type(exc).__name__}: {exc}"}
            continue
        if row["metric"] == "latency_ms":
            figure = latency * 1e3
        else:
            figure = row["batch"] / latency if latency > 0 else float("inf")
        out["pred"][name] = {
            "latency_s": latency,
            "figure": figure,
            "error": latency / measured_batch_time(row) - 1,
        }
    return out


def measured_batch_time(row: dict[str, Any]) -> float:
    """The measured time of one batch (s): the mean latency (SingleStream), or ``batch / throughput`` (Offline:
    the time the GPU spends per batch when batches follow one another)."""
    if row["metric"] == "latency_ms":
        return float(row["measured"]) / 1e3
    return float(row["batch"]) / float(row["measured"])


def predict(rows: Iterable[dict[str, Any]], work: Path = WORK) -> tuple[list[dict[str, Any]], list[str]]:
    """Every row predicted under every time model this onnxroof has; returns the rows and the model names."""
    models = {name: m for name in TIME_MODELS if (m := time_model(name)) is not None}
    paths: dict[str, Path] = {}
    out = []
    for row in rows:
        if row["shape"] not in paths:
            paths[row["shape"]] = build(row["shape"], work)
        out.append(predict_row(row, paths[row["shape"]], models))
    return out, list(models)


FIT_GENERATIONS = ("volta", "turing")
"""Tensor-core generations whose library kernels' fixed cost (cycles) is fitted on the training rows: Volta and
Turing, where the H200-fitted cost does not carry (docs/accuracy.md: measured time per ResNet-50 kernel 33 µs on
Xavier, 18 µs on T4, against 6–11 µs on Ampere and Ada). Ampere, Ada and Hopper keep the H200 kernels' figure (an
independent fit); tried on the training rows only, Ada's 3 training rows (all Offline, batch 2–32, where a fixed
kernel cost hardly matters) asked for 72,000 cycles, a fit to RetinaNet's missing NMS and BERT's miss rather than
to a kernel cost, and Ampere's 9 asked for 6,000 (near the H200's 8,052), so neither is fitted."""
FIT_GRID = tuple(range(2000, 80001, 2000))
"""Cycles tried for each generation (2,000 to 80,000 in steps of 2,000)."""


def _generation(platform: str) -> str:
    from onnxroof.platform.lookup import load_platform

    gpu = load_platform(platform).gpu
    return gpu.tensor_cores if gpu is not None else "none"


def fit_library_cycles(rows: list[dict[str, Any]], work: Path = WORK) -> dict[str, tuple[float, float, int]]:
    """Per generation of :data:`FIT_GENERATIONS`: the cycles of :data:`FIT_GRID` that minimize the median
    |error| of the ``gpu`` model over that generation's **training** rows (:func:`training_ids`) only, with that
    median and the number of rows; the held-out rows play no part."""
    from onnxroof.roofline.gpu import GpuTime

    train = training_ids(rows)
    paths = {shape: build(shape, work) for shape in {str(row["shape"]) for row in rows}}
    out = {}
    for generation in FIT_GENERATIONS:
        picked = [r for r in rows if r["id"] in train and _generation(str(r["platform"])) == generation]
        if not picked:
            continue
        scores = []
        for cycles in FIT_GRID:
            model = {"gpu": GpuTime(library_cycles=((generation, float(cycles)),))}
            errors = [predict_row(r, paths[r["shape"]], model)["pred"]["gpu"]["error"] for r in picked]
            scores.append((statistics.median(abs(e) for e in errors), cycles))
        best, cycles = min(scores)
        out[generation] = (float(cycles), best, len(picked))
    return out


def _fmt(value: float, metric: str) -> str:
    if metric == "latency_ms":
        return f"{value:.3g} ms" if value < 100 else f"{value:.0f} ms"
    return f"{value:.4g}/s" if value < 1e4 else f"{value:.0f}/s"


def _cell(pred: dict[str, Any] | None, metric: str) -> tuple[str, str]:
    if pred is None:
        return "–", "–"
    if "failed" in pred:
        return f"failed: {pred['failed']}", "–"
    flag = "" if abs(pred["error"]) <= TARGET else " ✗"
    return _fmt(pred["figure"], metric), f"{pred['error'] * 100:+.0f}%{flag}"


def summary(rows: list[dict[str, Any]], models: list[str], held_out: bool = False) -> dict[str, dict[str, float]]:
    """Per time model: rows predicted, median |error|, share within ±20 %, and the median signed error; over the
    held-out rows only (those not in :func:`training_ids`) when ``held_out``."""
    out = {}
    train = training_ids(rows) if held_out else frozenset()
    for name in models:
        errors = [
            row["pred"][name]["error"]
            for row in rows
            if "error" in row.get("pred", {}).get(name, {}) and row["id"] not in train
        ]
        if not errors:
            continue
        out[name] = {
            "rows": len(errors),
            "median_abs_error": statistics.median(abs(e) for e in errors),
            "within_20": sum(abs(e) <= TARGET for e in errors) / len(errors),
            "median_error": statistics.median(errors),
        }
    return out


def groups(rows: list[dict[str, Any]], models: list[str], key: str) -> str:
    """A markdown table of the median signed error per value of ``key`` (platform, shape, scenario) and model."""
    values = sorted({str(row[key]) for row in rows})
    lines = [f"| {key} | rows | " + " | ".join(f"{m} median error" for m in models) + " |"]
    lines.append("|---|--:|" + "--:|" * len(models))
    for value in values:
        picked = [row for row in rows if str(row[key]) == value and "pred" in row]
        cells = []
        for name in models:
            errors = [row["pred"][name]["error"] for row in picked if "error" in row["pred"].get(name, {})]
            cells.append(f"{statistics.median(errors) * 100:+.0f}%" if errors else "–")
        lines.append(f"| {value} | {len(picked)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table(rows: list[dict[str, Any]], models: list[str]) -> str:
    """A markdown table: one line per row, a measured figure and each time model's prediction and error."""
    head = "| # | id | model | batch | GPU → platform | launch | measured |"
    rule = "|--:|---|---|--:|---|---|--:|"
    for name in models:
        head += f" {name} | error |"
        rule += "--:|--:|"
    lines = [head, rule]
    train = training_ids(rows)
    for i, row in enumerate(rows, 1):
        launch = "graph" if row.get("cuda_graph") else "per-kernel"
        cells = [
            str(i),
            f"`{row['id']}`" + (" (train)" if row["id"] in train else ""),
            row["model"].split(" (")[0],
            str(row["batch"]),
            f"{row['gpu'].split(' (')[0]} → `{row['platform']}`",
            launch,
            _fmt(row["measured"], row["metric"]),
        ]
        for name in models:
            if "skipped" in row:
                cells.extend(["not predicted", "–"])
            else:
                cells.extend(_cell(row["pred"].get(name), row["metric"]))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for label, held_out in (("held-out rows", True), ("all rows, training rows included", False)):
        for name, s in summary(rows, models, held_out).items():
            lines.append(
                f"`{name}` ({label}): {s['rows']:.0f} rows, median |error| {s['median_abs_error'] * 100:.0f}%, "
                f"{s['within_20'] * 100:.0f}% within ±{TARGET:.0%}, median signed error "
                f"{s['median_error'] * 100:+.0f}%."
            )
    skipped = [row for row in rows if "skipped" in row]
    if skipped:
        lines.append(f"Not predicted: {', '.join(row['id'] for row in skipped)} ({skipped[0]['skipped']}, ...).")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measurements", type=Path, default=MEASUREMENTS)
    parser.add_argument("--rows", help="comma-separated row ids (default: all)")
    parser.add_argument("--work", type=Path, default=WORK, help="where the built models are cached")
    parser.add_argument("--json", type=Path, help="also write the rows with their predictions here")
    parser.add_argument(
        "--fit", action="store_true", help="fit the library kernels' cycles per generation on the training rows"
    )
    args = parser.parse_args(argv)
    rows = load_rows(args.measurements)
    if args.fit:
        for generation, (cycles, error, count) in fit_library_cycles(rows, args.work).items():
            print(f"{generation}: {cycles:.0f} cycles (training median |error| {error:.1%} over {count} rows)")
        return 0
    if args.rows:
        wanted = set(args.rows.split(","))
        rows = [row for row in rows if row["id"] in wanted]
    start = time.perf_counter()
    predicted, models = predict(rows, args.work)
    print(table(predicted, models))
    for key in ("platform", "shape", "scenario"):
        print()
        print(groups(predicted, models, key))
    print(f"\n({time.perf_counter() - start:.1f} s)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "models": models,
            "summary_held_out": summary(predicted, models, held_out=True),
            "summary": summary(predicted, models),
            "training_ids": sorted(training_ids(predicted)),
            "rows": predicted,
        }
        args.json.write_text(json.dumps(document, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
