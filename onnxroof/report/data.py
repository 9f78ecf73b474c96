"""The analysis document as text: JSON (one long-list item per line) and CSV (one row per node or per kernel)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import groupby
from json.encoder import encode_basestring
from math import copysign
from typing import Any, NamedTuple

import numpy as np

from onnxroof.analysis.analyze import Analysis
from onnxroof.analysis.document import (
    NODE_FIELDS,
    kernel_columns,
    kernel_records,
    node_columns,
    node_records,
    to_dict,
)
from onnxroof.analysis.select import TableLevel
from onnxroof.roofline.kernels import KernelResult
from onnxroof.roofline.rows import Gathered

#: One encoder for every item: ``json.dumps`` with keyword arguments builds a new encoder per call, and the long
#: lists call it once per node and kernel.
_COMPACT = json.JSONEncoder(allow_nan=False, ensure_ascii=False)

#: What separates two items of a long list: each item on a line of its own.
_ITEM_SEPARATOR = ",\n    "

#: The kernel CSV's columns: the JSON kernel fields (``patterns`` written as the ``pattern`` text).
KERNEL_FIELDS = tuple("pattern" if name == "patterns" else name for name in KernelResult.FIELDS)


def render_json(analysis: Analysis) -> str:
    return dumps_document(to_dict(analysis))


def json_chunks(analysis: Analysis) -> Iterator[str]:
    """:func:`render_json`'s text in pieces, the nodes' and kernels' lines written a run of rows at a time from
    the result columns: a file written from these never holds the whole document (a million-node report is
    ~0.8 GB of text, and its node dicts would be another GB)."""
    document = to_dict(analysis, lazy=True)
    document["nodes"] = EncodedItems(json_items(node_columns(analysis, lists=False, gather=True)))
    document["kernels"] = EncodedItems(json_items(kernel_columns(analysis, lists=False)))
    return document_chunks(document)


class EncodedItems(NamedTuple):
    """A long list whose items are already JSON text: runs of items, each run its items' compact text joined
    as the list writes them (one per line); read once, in order."""

    runs: Iterator[str]


def json_items(chunks: Iterable[dict[str, Any]]) -> Iterator[str]:
    """Each run of rows given as columns (field name -> the rows' values, or a :class:`~onnxroof.roofline.rows.
    Gathered` run) as its rows' compact JSON objects, one per line: the text ``_COMPACT.encode`` gives each row's
    dict, made a column at a time (:func:`json_texts`) and put into a row template of the field names.

    Neighbouring gathered fields read through one row map are written together: their ``"name": value`` text
    once per distinct row, then given to each row as one slot of the template."""
    for columns in chunks:
        slots: list[str] = []
        texts: list[list[str]] = []
        for names, values in _runs(columns):
            part = ", ".join(f"{encode_basestring(name).replace('%', '%%')}: %s" for name in names)
            if isinstance(values, Gathered):
                pieces = [json_texts(column) for column in values.values]
                distinct = [part % row for row in zip(*pieces, strict=True)]
                texts.append(list(map(distinct.__getitem__, values.rows.tolist())))
                slots.append("%s")
            else:
                texts.append(json_texts(values))
                slots.append(part)
        template = "{" + ", ".join(slots) + "}"
        yield _ITEM_SEPARATOR.join([template % row for row in zip(*texts, strict=True)])


def _runs(columns: dict[str, Any]) -> Iterator[tuple[list[str], Any]]:
    """The columns in order, a plain column alone (its name and values) and each run of neighbouring
    :class:`Gathered` columns through one row map as one (their names, and a Gathered of their value lists)."""
    for _, run in groupby(columns.items(), key=_run_key):
        names, values = zip(*run, strict=True)
        first = values[0]
        if isinstance(first, Gathered):
            yield list(names), Gathered([v.values for v in values], first.rows)
        else:
            yield list(names), first


def _run_key(item: tuple[str, Any]) -> int | str:
    """What neighbouring columns of one run share: a Gathered column's row map; a plain column's name (alone)."""
    name, values = item
    return id(values.rows) if isinstance(values, Gathered) else name


def json_texts(values: list[Any]) -> list[str]:
    """Each value of a column as compact JSON text (as ``_COMPACT.encode`` writes it), each distinct value
    written once: figures repeat down a column (a decoder's layers are alike: on a 7B-shaped graph, 83 k node
    values hold 5.7 k distinct ones), and writing a float is most of an encoder's time.

    Floats are told apart by their 64 bits (``np.unique`` over them; 0.0 and -0.0 differ), other values by
    value in a column of one type, by value and type in a mixed one (``1``, ``1.0`` and ``True`` are equal
    keys but written differently), by ``repr`` where they are no keys (lists); a mixed column holding a
    negative zero (an equal key to 0.0, written ``-0.0``) is written value by value. Text is escaped as it is."""
    kinds = set(map(type, values))
    if all(issubclass(kind, str) for kind in kinds):
        return list(map(encode_basestring, values))
    if kinds == {float}:
        distinct, inverse = np.unique(np.asarray(values, dtype=np.float64).view(np.int64), return_inverse=True)
        texts = np.array([_COMPACT.encode(value) for value in distinct.view(np.float64).tolist()], dtype=object)
        return texts[inverse].tolist()
    keys: list[Any] = values if len(kinds) == 1 else list(zip(values, map(type, values), strict=True))
    try:
        first = dict(zip(keys, values, strict=True))
    except TypeError:  # lists (shapes, member lists) are no keys; their repr tells them apart
        keys = list(map(repr, values))
        first = dict(zip(keys, values, strict=True))
    else:
        if _negative_zero(first.values(), values):
            return list(map(_COMPACT.encode, values))
    text = {key: _json_text(value) for key, value in first.items()}
    return list(map(text.__getitem__, keys))


def _json_text(value: Any) -> str:
    """``value`` as ``_COMPACT.encode`` writes it; text, and a tuple of text (a kernel's member ids or op types),
    without building an encoder for it."""
    if isinstance(value, str):
        return encode_basestring(value)
    if type(value) is tuple:
        try:
            return "[" + ", ".join(map(encode_basestring, value)) + "]"
        except TypeError:  # not all text (a shape's dims, None)
            pass
    return _COMPACT.encode(value)


def _negative_zero(distinct: Iterable[Any], values: list[Any]) -> bool:
    """Whether ``values`` holds a float -0.0 (``distinct``: one value of each key, to skip columns with no zero)."""
    if not any(isinstance(value, float) and value == 0 for value in distinct):
        return False
    try:
        column = np.asarray(values, dtype=np.float64)  # None reads as NaN
    except (TypeError, ValueError, OverflowError):
        return any(isinstance(value, float) and value == 0 and copysign(1.0, value) < 0 for value in values)
    return bool((np.signbit(column) & (column == 0)).any())


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
        if isinstance(value, EncodedItems):
            yield from _list_chunks(value.runs, str)
        elif isinstance(value, Iterator) or (isinstance(value, list) and value):
            yield from _list_chunks(value, _COMPACT.encode)
        elif isinstance(value, dict) and len(json.dumps(value, allow_nan=False)) > 100:
            yield json.dumps(value, indent=2, allow_nan=False, ensure_ascii=False).replace("\n", "\n  ")
        else:
            yield _COMPACT.encode(value)
    yield "\n}\n"


def _list_chunks(items: Iterable[Any], encode: Callable[[Any], str]) -> Iterator[str]:
    """``[``, one compact item per line, ``]`` (``[]`` when there is none); ``encode`` writes an item (or, for
    :class:`EncodedItems`, returns a run of items' text as it is)."""
    empty = True
    for item in items:
        yield ("[\n    " if empty else _ITEM_SEPARATOR) + encode(item)
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
