"""``onnxroof llm`` against published batch-1 measurements of 7–8 B decoders.

``python benchmarks/llm_accuracy.py [--measurements benchmarks/llm_measurements.toml] [--json PATH]``

Reads the measurements (``[[row]]`` tables: model shape, runtime, GPU, the bundled platform that matches it,
precision, batch, prompt, generate, measured TTFT and/or TPOT, source), builds the two decoder shapes with
:func:`llama_shaped.build_llama_shaped` (``kv_cache=True``, fp16, sparse external weights: nothing written) in a
temporary folder:

* ``llama2-7b``: 32 layers, hidden 4096, 32 heads, 32 KV heads, intermediate 11008, vocabulary 32000;
* ``llama3-8b``: 32 layers, hidden 4096, 32 heads, 8 KV heads, intermediate 14336, vocabulary 128256;

then runs :func:`onnxroof.studies.llm.llm` for each row with a ``predict_precision`` on the row's platform,
prompt, generate and batch, and prints a markdown table: measured and predicted TTFT and TPOT and the error
``predicted ÷ measured − 1`` (target: within ±20 %). A row without ``predict_precision`` is listed as not
predicted, with the reason from its ``note``. A row whose analysis fails prints the error in its place.

Nothing here measures anything: the measured side is the published figure, copied with its source.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from llama_shaped import build_llama_shaped  # noqa: E402

from onnxroof.studies.llm import llm  # noqa: E402

MEASUREMENTS = Path(__file__).resolve().parent / "llm_measurements.toml"
TARGET = 0.20
SHAPES: dict[str, dict[str, int]] = {
    "llama2-7b": {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 32, "intermediate": 11008, "vocab": 32000},
    "llama3-8b": {"layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "intermediate": 14336, "vocab": 128256},
}


def load_rows(path: Path) -> list[dict]:
    with open(path, "rb") as f:
        return tomllib.load(f)["row"]


def predict(rows: list[dict], folder: Path) -> list[dict]:
    """Each row with ``ttft_pred_ms`` / ``tpot_pred_ms`` added (or ``skipped`` / ``failed``: the reason)."""
    models: dict[str, Path] = {}
    out = []
    for row in rows:
        row = dict(row)
        if not row.get("predict_precision"):
            row["skipped"] = row.get("note", "not predicted")
            out.append(row)
            continue
        shape = row["shape"]
        if shape not in models:
            models[shape] = build_llama_shaped(folder / f"{shape}.onnx", kv_cache=True, **SHAPES[shape])
        try:
            result = llm(
                models[shape],
                row["platform"],
                prompt=row["prompt"],
                generate=row["generate"],
                batch=row["batch"],
                precision=row["predict_precision"],
                fusion=row.get("fusion"),  # the runtime's profile: graph-captured ones pay one launch per step
            )
        except Exception as exc:  # reported in the table, precisely
            row["failed"] = f"{type(exc).__name__}: {exc}"
            out.append(row)
            continue
        row["ttft_pred_ms"] = result.ttft_s * 1e3
        row["tpot_pred_ms"] = result.tpot_s * 1e3
        row["platform_title"] = result.platform_title
        out.append(row)
    return out


def _error(predicted: float | None, measured: float) -> float | None:
    return predicted / measured - 1 if predicted is not None and measured else None


def _ms(value: float | None) -> str:
    if value is None or value == 0:
        return "–"
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def _pct(error: float | None) -> str:
    if error is None:
        return "–"
    flag = "" if abs(error) <= TARGET else " ✗"
    return f"{error * 100:+.0f}%{flag}"


def table(rows: list[dict]) -> str:
    head = (
        "| # | model | runtime | precision | GPU → platform | N / M | TTFT ms measured | predicted | error "
        "| TPOT ms measured | predicted | error |"
    )
    lines = [head, "|--:|---|---|---|---|---|--:|--:|--:|--:|--:|--:|"]
    for i, row in enumerate(rows, 1):
        runtime = row["runtime"].split(" (")[0]
        precision = row["precision"].split(" (")[0]
        where = f"{row['gpu'].split(' (')[0]} → `{row['platform']}`"
        nm = f"{row['prompt'] or '?'} / {row['generate'] or '?'}"
        ttft, tpot = row.get("ttft_ms") or 0.0, row.get("tpot_ms") or 0.0
        if "skipped" in row or "failed" in row:
            why = "not predicted" if "skipped" in row else f"failed: {row['failed']}"
            cells = [_ms(ttft), why, "–", _ms(tpot), why, "–"]
        else:
            pt = row["ttft_pred_ms"] if ttft else None
            pp = row["tpot_pred_ms"] if tpot else None
            cells = [_ms(ttft), _ms(pt), _pct(_error(pt, ttft)), _ms(tpot), _ms(pp), _pct(_error(pp, tpot))]
        lines.append(f"| {i} | {row['model']} | {runtime} | {precision} | {where} | {nm} | " + " | ".join(cells) + " |")
    errors = [
        abs(e)
        for row in rows
        for e in (
            _error(row.get("ttft_pred_ms") if row.get("ttft_ms") else None, row.get("ttft_ms") or 0.0),
            _error(row.get("tpot_pred_ms") if row.get("tpot_ms") else None, row.get("tpot_ms") or 0.0),
        )
        if e is not None
    ]
    within = sum(e <= TARGET for e in errors)
    lines.append("")
    lines.append(f"{within} of {len(errors)} predicted figures within ±{TARGET:.0%}.")
    lines.append("")
    lines.append("Sources:")
    lines.extend(f"{i}. `{row['id']}`: {row['source']} ({row['date']})" for i, row in enumerate(rows, 1))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--measurements", type=Path, default=MEASUREMENTS)
    parser.add_argument("--json", type=Path, help="also write the rows with their predictions here")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        rows = predict(load_rows(args.measurements), Path(folder))
    print(table(rows))
    print(f"\n({time.perf_counter() - start:.1f} s)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
