"""Fitting a wide table to the terminal: drop the least needed columns, never cut the figures that stay.

Rich lays a ``box.SIMPLE_HEAD`` table with one cell of padding each side of every column and a blank divider
between columns and at both edges, so n columns of content widths w_i take ``Σ w_i + 3n + 1`` characters
(:func:`table_width`). :func:`fit_columns` removes columns by rising need (``keep``: larger goes first, 0
never) until the table fits beside a column of ``reserved`` characters (a name that may be cut).
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import JustifyMethod

from onnxroof.core.frozen import frozen_dataclass


@frozen_dataclass
class Column:
    """A table column: its header, justification, content width (characters) and how much it is needed."""

    name: str
    justify: JustifyMethod
    width: int
    keep: int  # 0: always shown; otherwise the larger, the sooner it is dropped on a narrow terminal


def table_width(widths: Sequence[int]) -> int:
    """Characters a SIMPLE_HEAD table of columns this wide takes: ``Σ w + 3n + 1``."""
    return sum(widths) + 3 * len(widths) + 1


def fit_columns(columns: Sequence[Column], width: int, reserved: int) -> tuple[Column, ...]:
    """The columns, in their order, that fit ``width`` beside a column ``reserved`` wide (dropped by need)."""
    kept = list(columns)
    for column in sorted(columns, key=lambda c: -c.keep):
        if column.keep == 0 or table_width([reserved, *(c.width for c in kept)]) <= width:
            break
        kept.remove(column)
    return tuple(kept)


def short_path(path: str, width: int) -> str:
    """``path`` in at most ``width`` characters, shortened from the left at a folder boundary so the file name
    stays whole: ``/very/long/tree/samples/x.onnx`` in 20 → ``…/samples/x.onnx``. A file name longer than
    ``width`` is kept whole (``…/`` and the name): the name is the part a reader needs."""
    if len(path) <= width:
        return path
    parts = path.replace("\\", "/").split("/")
    kept = parts[-1]
    for part in reversed(parts[:-1]):
        if len(part) + len(kept) + 3 > width:  # "…/" + part + "/" + kept
            break
        kept = f"{part}/{kept}"
    return f"…/{kept}"
