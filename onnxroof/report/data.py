"""The analysis document as text: JSON (one long-list item per line) and CSV (one row per node or per kernel)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from onnxroof.analysis.analyze import Analysis
from onnxroof.analysis.document import NODE_FIELDS, kernel_records, node_records, to_dict
from onnxroof.analysis.select import TableLevel
from onnxroof.roofline.kernels import KernelResult

#: One encoder for every item: ``json.dumps`` with keyword arguments builds a new encoder per call, and the long
#: lists call it once per node and kernel.
_COMPACT = json.JSONEncoder(allow_nan=False, ensure_ascii=False)

#: The kernel CSV's columns: the JSON kernel fields (``patterns`` written as the ``pattern`` text).
KERNEL_FIELDS = tuple("pattern" if name == "patterns" else name for name in KernelResult.FIELDS)


def render_json(analysis: Analysis) -> str:
    return dumps_document(to_dict(analysis))


def json_chunks(analysis: Analysis) -> Iterator[str]:
    """:func:`render_json`'s text in pieces, each node's and kernel's line built as it is written: a file
    written from these never holds the whole document (a million-node report is ~0.8 GB of text, and its
    node dicts would be another GB)."""
    return document_chunks(to_dict(analysis, lazy=True))


def dumps_document(document: dict[str, Any]) -> str:
    """A report document as JSON text: one top-level key per line, small objects indented, and the long lists
    (nodes, kernels...) one compact item per line — as readable and diffable as ``indent=2`` for what people
    read, and written by the C encoder (``indent`` forces the pure-Python one: 5× slower on 2,681 nodes)."""
    return "".join(document_chunks(document))


def document_chunks(document: dict[str, Any]) -> Iterator[str]:
    """:func:`dumps_document`'s text in pieces; a list may also be given as an iterator (read once, in order)."""
    yield "{\n"
    for number, (key, value) in enumerate(document.items()):
        yield (",\n" if number else "") + f"  {json.dumps(key)}: "
        if isinstance(value, Iterator) or (isinstance(value, list) and value):
            yield from _list_chunks(value)
        elif isinstance(value, dict) and len(json.dumps(value, allow_nan=False)) > 100:
            yield json.dumps(value, indent=2, allow_nan=False, ensure_ascii=False).replace("\n", "\n  ")
        else:
            yield _COMPACT.encode(value)
    yield "\n}\n"


def _list_chunks(items: Iterable[Any]) -> Iterator[str]:
    """``[``, one compact item per line, ``]`` (``[]`` when there is none)."""
    empty = True
    for item in items:
        yield ("[\n    " if empty else ",\n    ") + _COMPACT.encode(item)
        empty = False
    yield "[]" if empty else "\n  ]"


def csv_text(fields: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> str:
    """CSV with a header of ``fields`` and one line per row (``None`` written empty, ``\\n`` line ends)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def render_csv(analysis: Analysis, level: TableLevel = TableLevel.nodes, rows: Sequence[int] | None = None) -> str:
    """One row per node (``level`` nodes: the JSON node fields, shapes as JSON text) or per kernel the runtime
    launches (``kernels``: the JSON kernel fields, member lists as JSON text; their ``latency_s`` sum to the
    predicted latency). ``rows``: the positions to write, in that order (a :class:`~onnxroof.analysis.select.
    RowFilter`'s choice); None writes every row in order."""
    if level is TableLevel.kernels:
        records: Iterable[dict[str, Any]] = kernel_records(analysis)
        fields, fix = KERNEL_FIELDS, _KERNEL_LISTS
    else:
        records, fields, fix = node_records(analysis), NODE_FIELDS, _NODE_LISTS
    if rows is not None:
        every = list(records)
        records = (every[row] for row in rows)
    return csv_text(fields, (_json_cells(record, fix) for record in records))


_NODE_LISTS: tuple[str, ...] = ("input_shapes", "output_shapes")
_KERNEL_LISTS: tuple[str, ...] = ("node_ids", "op_types", "folded_nodes")


def _json_cells(row: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    for key in keys:
        row[key] = json.dumps(row[key])
    return row
