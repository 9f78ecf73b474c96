"""``onnxroof audit``: a registry × platforms into one table on Dask, with a result cache.

One LocalCluster of two workers serves the module (its address is handed to the audit as a running
scheduler); one test starts the embedded cluster through the CLI, one a real ``dask scheduler`` and ``dask
worker`` in subprocesses on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pandas as pd
import pytest
from typer.testing import CliRunner

pytest.importorskip("dask.distributed")
pytest.importorskip("pyarrow")

from onnxroof.cli.commands import app
from onnxroof.fleet.audit import AuditOptions, audit
from onnxroof.fleet.cache import ResultCache
from onnxroof.fleet.engine import Engine, EngineKind
from onnxroof.fleet.task import analyze_task

ROOT = Path(__file__).resolve().parent.parent
LIGHT = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"
PLATFORMS = ("xavier", "xeon-8380")
DIMS = {"batch": 1, "seq": 16}
FIGURES = ("latency_s", "flops", "macs", "params", "weight_bytes", "peak_activation_bytes", "memory_bound_share")


@pytest.fixture(scope="module")
def cluster():
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as local:
        yield Engine(EngineKind.dask, 2, local.scheduler_address)


@pytest.fixture(scope="module")
def registry(tmp_path_factory) -> Path:
    """The three samples, two light models and a corrupt file."""
    folder = tmp_path_factory.mktemp("registry")
    for path in sorted((ROOT / "samples").glob("*.onnx")):
        shutil.copy(path, folder / path.name)
    for name in ("light_bvlc_alexnet", "light_squeezenet"):
        if (LIGHT / f"{name}.onnx").exists():
            shutil.copy(LIGHT / f"{name}.onnx", folder / f"{name}.onnx")
    (folder / "corrupt.onnx").write_bytes((ROOT / "samples" / "tiny_cnn.onnx").read_bytes()[:300])
    return folder


@pytest.fixture(scope="module")
def first_run(cluster, registry, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    with ResultCache(cache) as store:
        result = audit([registry], AuditOptions(PLATFORMS, DIMS), engine=cluster, cache=store)
    return result, cache


def report_totals(path: str, platform: str, dims: str) -> dict:
    options = [arg for item in (dims or "").split() for arg in ("-d", item)]
    done = CliRunner().invoke(app, ["report", path, "-p", platform, *options, "-f", "json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)["totals"]


def test_a_row_per_model_and_platform(first_run, registry) -> None:
    result, _ = first_run
    table = result.table
    models = sorted(str(p) for p in registry.glob("*.onnx"))
    assert len(table) == len(models) * len(PLATFORMS)
    assert list(table["model"]) == [m for m in models for _ in PLATFORMS]
    assert set(table["platform"]) == set(PLATFORMS)
    assert result.analyzed == len(table) and result.cached == 0
    assert not table["cached"].any()
    assert table["sha256"].str.len().eq(64).all()
    assert table.loc[table["name"] == "tiny_cnn", "dims"].eq("batch=1").all()  # --dim seq: not its symbol
    assert result.exit_code == 1  # the corrupt file


def test_figures_are_those_of_report(first_run) -> None:
    table = first_run[0].table
    ok = table[table["status"] == "ok"]
    assert len(ok) >= 6
    for row in ok.to_dict(orient="records"):
        totals = report_totals(row["model"], row["platform"], row["dims"])
        for figure in FIGURES:
            assert row[figure] == totals[figure], (row["model"], row["platform"], figure)
        assert row["unsupported_count"] == 0


def test_a_bad_model_is_an_error_row(first_run) -> None:
    rows = first_run[0].table.set_index(["name", "platform"])
    for platform in PLATFORMS:
        row = rows.loc[("corrupt", platform)]
        assert row["status"] == "error"
        assert "not a readable ONNX model" in row["error"]
        assert pd.isna(row["latency_s"])


def test_a_second_run_analyzes_nothing(first_run, registry) -> None:
    first, cache = first_run
    never = Engine(EngineKind.dask, 1, "tcp://127.0.0.1:9")  # no scheduler there: must not be needed
    with ResultCache(cache) as store:
        again = audit([registry], AuditOptions(PLATFORMS, DIMS), engine=never, cache=store)
    assert again.analyzed == 0 and again.cached == len(first.table)
    assert again.table["cached"].all()
    columns = [c for c in first.table.columns if c != "cached"]
    pd.testing.assert_frame_equal(again.table[columns], first.table[columns])


def test_the_cache_key_follows_content_platform_and_options(first_run, registry, tmp_path) -> None:
    _, cache = first_run
    changed = tmp_path / "tiny_cnn.onnx"
    model = onnx.load(registry / "tiny_cnn.onnx")
    model.doc_string = "changed"
    onnx.save(model, changed)
    serial = Engine()
    with ResultCache(cache) as store:
        same_content = audit([registry / "tiny_lstm.onnx"], AuditOptions(PLATFORMS, DIMS), engine=serial, cache=store)
        new_content = audit([changed], AuditOptions(("xavier",), DIMS), engine=serial, cache=store)
        other_options = audit(
            [registry / "tiny_lstm.onnx"], AuditOptions(("xavier",), DIMS, "fp16"), engine=serial, cache=store
        )
        unused_dim = audit(
            [registry / "tiny_cnn.onnx"], AuditOptions(("xavier",), {"batch": 1, "seq": 99}), engine=serial, cache=store
        )
    assert (same_content.analyzed, same_content.cached) == (0, 2)
    assert (new_content.analyzed, new_content.cached) == (1, 0)
    assert (other_options.analyzed, other_options.cached) == (1, 0)
    assert (unused_dim.analyzed, unused_dim.cached) == (0, 1)  # seq is not a symbol of tiny_cnn


def test_a_manifest_gives_dims_and_budgets(registry, cluster, tmp_path) -> None:
    (tmp_path / "tight.toml").write_text('schema = 1\nmax_latency = "1 us"\n')
    (tmp_path / "loose.toml").write_text('schema = 1\nmax_latency = "1 s"\n')
    (tmp_path / "models.toml").write_text(
        f'[[model]]\npath = "{registry / "tiny_transformer.onnx"}"\ndims = {{ batch = 1, seq = 8 }}\n'
        f'budget = "tight.toml"\n\n[[model]]\npath = "{registry / "tiny_cnn.onnx"}"\nname = "cnn"\n'
    )
    (tmp_path / "models.csv").write_text(f"path,dims,budget\n{registry / 'tiny_lstm.onnx'},batch=1 seq=4,loose.toml\n")
    paths = [tmp_path / "models.toml", tmp_path / "models.csv"]
    result = audit(paths, AuditOptions(("xavier",), {"batch": 2}), engine=cluster)
    rows = result.table.set_index("name")
    assert rows.loc["tiny_transformer", "dims"] == "batch=1 seq=8"
    assert rows.loc["tiny_transformer", "status"] == "violated"
    assert rows.loc["tiny_transformer", "violations"].startswith("max_latency")
    assert rows.loc["cnn", "dims"] == "batch=2" and pd.isna(rows.loc["cnn", "budget"])
    assert rows.loc["tiny_lstm", "budget"] == "pass" and rows.loc["tiny_lstm", "status"] == "ok"
    assert result.exit_code == 1


def test_a_manifest_gives_whole_input_shapes(cluster, tmp_path) -> None:
    """Per-model shapes bind anonymous dims (Paddle2ONNX writes '?'): the figures equal report's for the shape."""
    from onnx import TensorProto, helper

    import onnxroof

    weight = helper.make_tensor("w", TensorProto.FLOAT, (8, 3, 3, 3), [0.0] * 216)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
        "ocr",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["?", 3, "?", "?"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["?", 8, "?", "?"])],
        [weight],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "ocr.onnx")
    (tmp_path / "models.csv").write_text("path,shapes\nocr.onnx,x=1x3x48x192\n")
    (tmp_path / "models.toml").write_text(
        '[[model]]\npath = "ocr.onnx"\nname = "wide"\nshapes = { x = [2, 3, 32, 320] }\n'
    )
    csv_rows = audit([tmp_path / "models.csv"], AuditOptions(("xavier",)), engine=cluster).table
    toml_rows = audit([tmp_path / "models.toml"], AuditOptions(("xavier",)), engine=cluster).table
    assert csv_rows.loc[0, "macs"] == 1 * 8 * 48 * 192 * 27
    assert toml_rows.loc[0, "macs"] == 2 * 8 * 32 * 320 * 27
    report = onnxroof.analyze(tmp_path / "ocr.onnx", "xavier", shapes={"x": (1, 3, 48, 192)})
    assert csv_rows.loc[0, "latency_s"] == report.totals.latency_s


def test_a_worker_that_cannot_read_a_model_says_why(tmp_path) -> None:
    figures = analyze_task(str(tmp_path / "elsewhere.onnx"), "xavier", {}, None, None)
    assert figures["error_kind"] == "unreadable"
    assert "shared filesystem" in figures["error"]


def test_cli_embedded_cluster_writes_parquet(registry, tmp_path) -> None:
    out = tmp_path / "table.parquet"
    models = [str(registry / "tiny_cnn.onnx"), str(registry / "tiny_lstm.onnx")]
    args = ["audit", *models, "-p", "xavier", "-d", "batch=1", "-d", "seq=16", "--workers", "2"]
    done = CliRunner().invoke(app, [*args, "--cache", str(tmp_path / "c"), "-o", str(out)])
    assert done.exit_code == 0, done.output
    table = pd.read_parquet(out)
    assert list(table["status"]) == ["ok", "ok"] and table["flops"].gt(0).all()
    assert "2 analyzed" in done.stderr
    again = CliRunner().invoke(app, [*args, "--cache", str(tmp_path / "c"), "-o", str(tmp_path / "t.csv")])
    assert again.exit_code == 0 and "nothing analyzed (all cached)" in again.stderr
    assert len(pd.read_csv(tmp_path / "t.csv")) == 2


def test_without_the_extra_audit_says_how_to_get_it(monkeypatch, registry) -> None:
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    done = CliRunner().invoke(app, ["audit", str(registry / "tiny_cnn.onnx"), "--no-cache"])
    assert done.exit_code == 2
    assert "pip install onnxroof[dask]" in done.output and "Traceback" not in done.output


def test_check_runs_on_the_same_engine(cluster, registry) -> None:
    model = str(registry / "tiny_cnn.onnx")
    args = ["check", model, str(registry / "corrupt.onnx"), "-d", "batch=1", "--max-latency", "1s", "-f", "json"]
    done = CliRunner().invoke(app, [*args, "--scheduler", cluster.scheduler])
    assert done.exit_code == 2, done.output
    statuses = [m["status"] for m in json.loads(done.stdout)["models"]]
    assert statuses == ["pass", "error"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_audit_on_a_real_scheduler_and_worker(registry, tmp_path) -> None:
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env, "cwd": tmp_path}
    dask = [sys.executable, "-m", "dask"]
    processes = [
        subprocess.Popen([*dask, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"], **quiet)
    ]
    try:
        _wait_for_port(port, 30)
        worker = [
            *dask,
            "worker",
            address,
            "--nworkers",
            "1",
            "--nthreads",
            "1",
            "--no-dashboard",
            "--host",
            "127.0.0.1",
        ]
        processes.append(subprocess.Popen(worker, **quiet))
        from dask.distributed import Client

        with Client(address, timeout="20s") as client:
            client.wait_for_workers(1, timeout=30)
        out = tmp_path / "table.json"
        args = ["audit", str(registry / "tiny_lstm.onnx"), "-p", "xavier", "-p", "xeon-8380", "-d", "batch=1"]
        done = CliRunner().invoke(app, [*args, "-d", "seq=16", "--scheduler", address, "--no-cache", "-o", str(out)])
        assert done.exit_code == 0, done.output
        rows = json.loads(out.read_text())
        assert [r["platform"] for r in rows] == list(PLATFORMS)
        assert rows[0]["flops"] == report_totals(str(registry / "tiny_lstm.onnx"), "xavier", "batch=1 seq=16")["flops"]
        assert f"on Dask scheduler {address}" in done.stderr
    finally:
        for process in reversed(processes):
            process.terminate()
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)


def _wait_for_port(port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"the Dask scheduler did not open port {port} within {timeout_s} s")


def test_the_dask_engine_keeps_a_bounded_window(cluster, monkeypatch) -> None:
    from onnxroof.fleet import engine as engine_module

    monkeypatch.setattr(engine_module, "MAX_IN_FLIGHT", 3)
    done = dict(engine_module.run(abs, [(-i,) for i in range(10)], cluster))
    assert done == {i: i for i in range(10)}


def test_external_data_is_identified_not_read(tmp_path) -> None:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    weight = numpy_helper.from_array(np.ones((16, 8), dtype=np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        [weight],
    )
    path = tmp_path / "ext.onnx"
    onnx.save(helper.make_model(graph), path, save_as_external_data=True, location="w.bin", size_threshold=0)
    options = AuditOptions(("xavier",), {"batch": 4, "seq": 3})

    def once():
        with ResultCache(tmp_path / "cache") as store:
            return audit([path], options, engine=Engine(), cache=store)

    first = once()
    assert first.table.loc[0, "status"] == "ok" and first.table.loc[0, "dims"] == "batch=4"
    assert first.table.loc[0, "params"] == 16 * 8
    second = once()
    assert (second.analyzed, second.cached) == (0, 1)
    stamp = (tmp_path / "w.bin").stat().st_mtime_ns
    os.utime(tmp_path / "w.bin", ns=(stamp + 10**9, stamp + 10**9))  # the weights changed: analyze again
    assert once().analyzed == 1


def test_a_bad_manifest_is_bad_usage(tmp_path) -> None:
    (tmp_path / "models.toml").write_text('[[model]]\npath = "a.onnx"\nshape = "x:1,3"\n')
    done = CliRunner().invoke(app, ["audit", str(tmp_path / "models.toml"), "--no-cache"])
    assert done.exit_code == 2
    assert "models.toml: model[0]: unknown key(s) ['shape']" in done.output
