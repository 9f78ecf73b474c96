"""Models per second of ``onnxroof audit``: sequential vs a Dask LocalCluster, the cache, the scheduler's overhead.

``python benchmarks/bench_audit.py [--copies 8] [--workers 2] [--platform xavier] [--json PATH]``

Models: ``samples/*.onnx`` (3) and the nine ``light_*`` models of the onnx wheel, each copied ``--copies`` times
(default 8: 96 models) into a temporary folder. Every copy gets its own ``doc_string``, so every file has its own
content sha256: the audit cannot share results between copies (as it would between identical files). Dims
batch=1, seq=16; one platform.

Runs, each on a fresh result cache unless said:

* **sequential**: the audit in this process, one model after another (``Engine(serial)``);
* **dask-N**: an embedded ``LocalCluster`` of N worker processes (one thread each), start-up included, and the
  same without start-up (a cluster already running, reached by address; its workers warmed by one audit);
* **cached**: the same folder again on the cache the sequential run filled (nothing analyzed: hashing is
  skipped too, since size and mtime are unchanged);
* **scheduler overhead**: 2,000 no-op tasks through the warm cluster, wall time per task.

It also writes the table to Parquet and reports its bytes per row. Needs ``pip install onnxroof[dask]``; the
temporary folder is removed at exit.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from onnxroof.fleet.audit import AuditOptions, audit  # noqa: E402
from onnxroof.fleet.cache import ResultCache  # noqa: E402
from onnxroof.fleet.engine import Engine, EngineKind  # noqa: E402

LIGHT = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "light"
DIMS = {"batch": 1, "seq": 16}


def build_registry(folder: Path, copies: int) -> list[Path]:
    originals = sorted((ROOT / "samples").glob("*.onnx")) + sorted(LIGHT.glob("light_*.onnx"))
    made = []
    for original in originals:
        model = onnx.load(original, load_external_data=False)
        for i in range(copies):
            model.doc_string = f"bench copy {i}"
            target = folder / f"{original.stem}_{i:02d}.onnx"
            onnx.save(model, target)
            made.append(target)
    return made


def _noop(x: int) -> int:
    return x


def timed(label: str, paths: list[Path], options: AuditOptions, engine: Engine, cache: Path | None) -> dict:
    with ResultCache(cache) as store:
        start = time.perf_counter()
        result = audit(paths, options, engine=engine, cache=store)
        wall = time.perf_counter() - start
    rows = len(result.table)
    errors = int((result.table["status"] == "error").sum())
    print(
        f"{label:<28} {rows:4d} rows  {wall:7.2f} s  {rows / wall:7.1f} models/s  "
        f"(analyzed {result.analyzed}, cached {result.cached}, errors {errors})",
        flush=True,
    )
    return {"run": label, "rows": rows, "wall_s": wall, "models_per_s": rows / wall, "analyzed": result.analyzed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--platform", default="xavier")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    from dask.distributed import Client, LocalCluster

    temp = Path(tempfile.mkdtemp(prefix="bench-audit-"))
    try:
        folder = temp / "registry"
        folder.mkdir()
        paths = build_registry(folder, args.copies)
        print(f"{len(paths)} models, platform {args.platform}, {os.cpu_count()} CPU(s)", flush=True)
        options = AuditOptions((args.platform,), DIMS)
        results = [timed("sequential", [folder], options, Engine(), temp / "cache-seq")]
        local = Engine(EngineKind.dask_local, args.workers)
        results.append(timed(f"dask-{args.workers} (with start-up)", [folder], options, local, None))
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, dashboard_address=":0") as cluster:
            running = Engine(EngineKind.dask, args.workers, cluster.scheduler_address)
            timed("(warm-up)", paths[: args.workers * 2], options, running, None)
            results.append(timed(f"dask-{args.workers} (running cluster)", [folder], options, running, None))
            with Client(cluster) as client:
                client.gather(client.map(_noop, range(200)))
                start = time.perf_counter()
                client.gather(client.map(_noop, range(2000)))
                per_task = (time.perf_counter() - start) / 2000
            print(f"scheduler overhead: {per_task * 1e3:.2f} ms per no-op task (2,000 tasks)", flush=True)
        results.append(timed("cached (second run)", [folder], options, Engine(), temp / "cache-seq"))
        with ResultCache(temp / "cache-seq") as store:
            table = audit([folder], options, engine=Engine(), cache=store).table
        buffer = io.BytesIO()
        table.to_parquet(buffer, index=False)
        per_row = len(buffer.getvalue()) / len(table)
        print(f"parquet: {len(buffer.getvalue())} bytes for {len(table)} rows ({per_row:.0f} B/row)", flush=True)
        if args.json:
            summary = {"runs": results, "scheduler_overhead_s": per_task, "parquet_bytes_per_row": per_row}
            args.json.write_text(json.dumps(summary, indent=1))
    finally:
        shutil.rmtree(temp, ignore_errors=True)


if __name__ == "__main__":
    main()
