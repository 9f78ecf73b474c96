"""Renderers for ``onnxroof audit``: the table to a file (Parquet through pyarrow, CSV or JSON records), a
terminal view of its rows, and the one-line summary of how it was made.

Files keep every column in SI units (seconds, FLOPs, bytes, fractions); missing values are empty in CSV and
``null`` in JSON. The terminal view formats them.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from onnxroof.core.errors import OnnxroofError
from onnxroof.core.files import write_atomically
from onnxroof.core.units import percent, seconds, si
from onnxroof.fleet.audit import AuditResult

TABLE_SUFFIXES = (".parquet", ".csv", ".json")
_STYLE = {"ok": "green", "violated": "bold red", "error": "bold magenta"}


def table_bytes(table: Any, suffix: str) -> bytes:
    """The table as a file's content for ``suffix`` (.parquet, .csv or .json)."""
    suffix = suffix.lower()
    if suffix == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise OnnxroofError("writing Parquet needs pyarrow: pip install onnxroof[dask]") from None
        buffer = io.BytesIO()
        table.to_parquet(buffer, index=False, engine="pyarrow")
        return buffer.getvalue()
    if suffix == ".csv":
        return table.to_csv(index=False, lineterminator="\n").encode("utf-8")
    if suffix == ".json":
        records = [{k: _plain(v) for k, v in row.items()} for row in table.to_dict(orient="records")]
        return (json.dumps(records, indent=1) + "\n").encode("utf-8")
    raise OnnxroofError(f"-o: unknown table format {suffix or '(no suffix)'!r}; use .parquet, .csv or .json")


def write_table(table: Any, path: Path) -> None:
    """Write the table to ``path`` (atomically), in the format its suffix names."""
    write_atomically(path, table_bytes(table, path.suffix))


def _plain(value: Any) -> Any:
    """pandas' missing values (NA, NaN) as None; numpy scalars as Python numbers."""
    import pandas as pd

    if value is None or (not isinstance(value, str | list | dict) and pd.isna(value)):
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def summary_line(result: AuditResult) -> str:
    """``audit: 24 rows (12 models × 2 platforms): 20 ok, 2 violated, 2 error; 4 analyzed on ..., 20 from the
    cache (...) in 3.1 s``."""
    table = result.table
    counts = table["status"].value_counts()
    models, platforms = table["model"].nunique(), table["platform"].nunique()
    statuses = ", ".join(f"{int(counts.get(s, 0))} {s}" for s in ("ok", "violated", "error"))
    analyzed = f"{result.analyzed} analyzed on {result.engine}" if result.analyzed else "nothing analyzed (all cached)"
    return (
        f"audit: {len(table)} rows ({_count(models, 'model')} × {_count(platforms, 'platform')}): {statuses}; "
        f"{analyzed}, "
        f"{result.cached} from the cache ({result.cache}) in {result.elapsed_s:.1f} s"
    )


_HEADERS = ("model", "platform", "status", "latency", "FLOPs", "params", "peak act.", "mem-bound", "unsup.")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def render_audit_console(result: AuditResult, console: Console) -> None:
    """One line per row (model, platform, status, the main figures), then the errors and budget violations.

    Only the model column folds on a narrow terminal: figures are never cut."""
    cells: list[list[Text]] = []
    notes: list[Text] = []
    for row in result.table.to_dict(orient="records"):
        status = str(row["status"])
        figures = ["", "", "", "", "", ""]
        if status != "error":
            figures = [
                seconds(row["latency_s"]),
                si(row["flops"]),
                si(row["params"]),
                si(row["peak_activation_bytes"], "B"),
                percent(row["memory_bound_share"]),
                str(row["unsupported_count"]),
            ]
        line = [str(row["name"]), str(row["platform"]), status, *figures]
        cells.append([Text(cell, style=_STYLE.get(status, "") if i == 2 else "") for i, cell in enumerate(line)])
        note = row["error"] if status == "error" else (row["violations"] if status == "violated" else None)
        if _plain(note) is not None:
            notes.append(Text.assemble((f"{row['name']} on {row['platform']}: ", _STYLE[status]), str(note)))
    view = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, padding=(0, 0))
    for i, header in enumerate(_HEADERS):
        width = max([len(header), *(len(line[i]) for line in cells)])
        if i == 0:
            view.add_column(header, overflow="fold", min_width=min(width, 10))
        else:
            view.add_column(header, justify="left" if i < 3 else "right", no_wrap=True, min_width=width)
    for row_cells in cells:
        view.add_row(*row_cells)
    console.print(view)
    for note in notes:
        console.print(note)
