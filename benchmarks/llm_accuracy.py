"""``onnxroof llm`` against published measurements of 7–8 B decoders, before and after runtime profiles.

``python benchmarks/llm_accuracy.py [--measurements benchmarks/llm_measurements.toml] [--json PATH]``

Reads the measurements (``[[row]]`` tables: model shape, runtime and its onnxroof profile, GPU, the bundled
platform that matches it, the weights' bit width and group size, batch, prompt, generate, measured TTFT, TPOT
and/or batched throughput, source) and builds, in a temporary folder, the ONNX file each deployment would use:
the GenAI-builder layout of :mod:`genai_shaped` (``GroupQueryAttention``, ``MatMul`` with fp16 weights or
``MatMulNBits`` at the row's bit width and group size, sparse external weights: nothing written). Each row is
predicted twice, in one run:

* **before**: today's prediction (main before the runtime profiles): the platform's roofline and its default
  fusion profile (the row's ``fusion`` override where it has one), the file alone (no ``genai_config.json``
  beside it, so the KV cache is charged as the graph writes it: a full copy);
* **after**: the same file under the row's runtime profile (``runtime_profile``: ``--runtime``), which brings
  that runtime's fusions, launch or graph replay, KV-cache write policy and kernel-class efficiencies.

Figures: TTFT, TPOT, and the aggregate throughput of a batched run, predicted as
``batch × generate ÷ (TTFT + Σ decode)`` (:attr:`LLMResult.tokens_per_s` × batch). Error = predicted ÷ measured
− 1 (for throughput: measured ÷ predicted − 1, so that a positive error always means "predicted slower").
The summary gives, for before and after, the median |error| and the share within ±20 %; rows with ``fit =
true`` (a runtime efficiency was fitted on them) are listed but left out of the "after" summary. A row whose
analysis fails prints the error in its place.

Nothing here measures anything: the measured side is the published figure, copied with its source.
"""

from __future__ import annotations

import argparse
import inspect
import json
import statistics
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from genai_shaped import build_genai_shaped  # noqa: E402

from onnxroof.studies.llm import LLMResult, llm  # noqa: E402

MEASUREMENTS = Path(__file__).resolve().parent / "llm_measurements.toml"
TARGET = 0.20
#: Figures of a row: (field, label, predicted from a result, error sign). Throughput's error is inverted so that
#: "+" always means the prediction is slower than the measurement.
FIGURES: tuple[tuple[str, str, Callable[[LLMResult, dict], float], bool], ...] = (
    ("ttft_ms", "TTFT ms", lambda r, row: r.ttft_s * 1e3, False),
    ("tpot_ms", "TPOT ms", lambda r, row: r.tpot_s * 1e3, False),
    ("throughput_tok_s", "out tok/s", lambda r, row: r.tokens_per_s * row["batch"], True),
)
BITS = {"fp16": None, "int4": 4, "int8": 8}


def load_rows(path: Path) -> list[dict]:
    with open(path, "rb") as f:
        return tomllib.load(f)["row"]


def runtime_argument(profile: str) -> str:
    """A bundled profile's name as is; a path (``benchmarks/runtimes/x.toml``) made absolute from the repo."""
    return str(REPO / profile) if profile.endswith(".toml") else profile


def supports_runtime() -> bool:
    """Whether this onnxroof's :func:`llm` takes ``runtime=`` (the runtime-profile interface)."""
    return "runtime" in inspect.signature(llm).parameters


def _model(row: dict, folder: Path, cache: dict[tuple, Path], config: bool = True) -> Path:
    """The row's file; ``config=False``: without the ``genai_config.json`` beside it (what today's code reads)."""
    key = (row["shape"], row["weights"], row["group"], config)
    if key not in cache:
        name = "-".join(str(k) for k in key)
        cache[key] = build_genai_shaped(
            folder / name / "model.onnx",
            row["shape"],
            bits=BITS[row["weights"]],
            block_size=row["group"] or 128,
            config=config,
        )
    return cache[key]


def _run(model: Path, row: dict, **extra: object) -> LLMResult:
    return llm(
        model,
        row["platform"],
        prompt=row["prompt"],
        generate=row["generate"],
        batch=row["batch"],
        precision=row.get("whatif_precision") or None,
        **extra,  # type: ignore[arg-type]
    )


def predict(rows: list[dict], folder: Path) -> list[dict]:
    """Each row with ``before`` and ``after`` added: {figure: predicted} or {"failed": reason}."""
    models: dict[tuple, Path] = {}
    with_runtime = supports_runtime()
    out = []
    for row in rows:
        row = dict(row)
        runs: dict[str, tuple[Path, dict[str, object]]] = {
            "before": (_model(row, folder, models, config=False), {"fusion": row.get("fusion")})
        }
        if with_runtime:
            runs["after"] = (_model(row, folder, models), {"runtime": runtime_argument(row["runtime_profile"])})
        for phase, (model, extra) in runs.items():
            try:
                result = _run(model, row, **extra)
            except Exception as exc:  # reported in the table, precisely
                row[phase] = {"failed": f"{type(exc).__name__}: {exc}"}
                continue
            row[phase] = {field: fn(result, row) for field, _, fn, _ in FIGURES if row.get(field)}
        out.append(row)
    return out


def error(predicted: float | None, measured: float, inverted: bool = False) -> float | None:
    """Predicted ÷ measured − 1 (inverted: measured ÷ predicted − 1, for throughputs)."""
    if predicted is None or not measured or not predicted:
        return None
    return measured / predicted - 1 if inverted else predicted / measured - 1


def _num(value: float | None) -> str:
    if value is None or value == 0:
        return "–"
    return f"{value:.3g}" if value < 100 else f"{value:,.0f}"


def _pct(err: float | None) -> str:
    if err is None:
        return "–"
    return f"{err * 100:+.0f}%" + ("" if abs(err) <= TARGET else " ✗")


def figures(rows: list[dict]) -> list[dict]:
    """One entry per published figure: row, figure label, measured, and before / after predictions and errors."""
    entries = []
    for i, row in enumerate(rows, 1):
        for field, label, _, inverted in FIGURES:
            if not row.get(field):
                continue
            entry = {"n": i, "row": row, "label": label, "measured": row[field]}
            for phase in ("before", "after"):
                got = row.get(phase, {})
                value = got.get(field) if isinstance(got, dict) and "failed" not in got else None
                entry[phase] = value
                entry[f"{phase}_error"] = error(value, row[field], inverted)
                entry[f"{phase}_failed"] = got.get("failed") if isinstance(got, dict) else None
            entries.append(entry)
    return entries


def summary(entries: list[dict], phase: str, skip_fit: bool) -> str:
    kept = [e for e in entries if e[f"{phase}_error"] is not None and not (skip_fit and e["row"].get("fit"))]
    errors = [abs(e[f"{phase}_error"]) for e in kept]
    if not errors:
        return f"{phase}: no figure predicted"
    within = sum(e <= TARGET for e in errors)
    fitted = " (rows with fit = true left out)" if skip_fit else ""
    return (
        f"{phase}: median |error| {statistics.median(errors) * 100:.1f} %, {within} of {len(errors)} figures "
        f"({within / len(errors) * 100:.0f} %) within ±{TARGET:.0%}{fitted}"
    )


def table(rows: list[dict]) -> str:
    entries = figures(rows)
    head = (
        "| # | row | runtime → profile | precision | GPU → platform | B / N / M | figure | measured "
        "| before | error | after | error |"
    )
    lines = [head, "|--:|---|---|---|---|---|---|--:|--:|--:|--:|--:|"]
    for e in entries:
        row = e["row"]
        profile = row["runtime_profile"].removeprefix("benchmarks/runtimes/").removesuffix(".toml")
        where = f"{row['gpu'].split(' (')[0]} → `{row['platform']}`"
        cells = []
        for phase in ("before", "after"):
            if e[f"{phase}_failed"]:
                cells += [f"failed: {e[f'{phase}_failed']}", "–"]
            else:
                cells += [_num(e[phase]), _pct(e[f"{phase}_error"])]
        fit = " (fit)" if row.get("fit") else ""
        lines.append(
            f"| {e['n']} | `{row['id']}`{fit} | {row['runtime'].split(' (')[0]} → `{profile}` | "
            f"{row['precision'].split(' (')[0]} | {where} | {row['batch']} / {row['prompt']} / {row['generate']} | "
            f"{e['label']} | {_num(e['measured'])} | " + " | ".join(cells) + " |"
        )
    lines += ["", summary(entries, "before", skip_fit=False), summary(entries, "after", skip_fit=True), ""]
    lines.append("Sources:")
    lines.extend(f"{i}. `{row['id']}`: {row['source']} ({row['date']})" for i, row in enumerate(rows, 1))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--measurements", type=Path, default=MEASUREMENTS)
    parser.add_argument("--json", type=Path, help="also write the rows with their predictions here")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        rows = predict(load_rows(args.measurements), Path(folder))
    print(table(rows))
    if not supports_runtime():
        print("\n(this onnxroof's llm() takes no runtime=: the 'after' column needs the runtime profiles)")
    print(f"\n({time.perf_counter() - start:.1f} s)")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
