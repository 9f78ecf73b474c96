"""The analysis document as text: JSON (one long-list item per line) and CSV (one row per node)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from onnxroof.analysis.analyze import Analysis, NodeResult
from onnxroof.analysis.document import NODE_FIELDS, node_fields, to_dict


def render_json(analysis: Analysis) -> str:
    return dumps_document(to_dict(analysis))


def dumps_document(document: dict[str, Any]) -> str:
    """A report document as JSON text: one top-level key per line, small objects indented, and the long lists
    (nodes, kernels...) one compact item per line — as readable and diffable as ``indent=2`` for what people
    read, and written by the C encoder (``indent`` forces the pure-Python one: 5× slower on 2,681 nodes)."""
    parts = []
    for key, value in document.items():
        if isinstance(value, list) and value:
            items = ",\n".join("    " + json.dumps(item, allow_nan=False, ensure_ascii=False) for item in value)
            text = f"[\n{items}\n  ]"
        elif isinstance(value, dict) and len(json.dumps(value, allow_nan=False)) > 100:
            text = json.dumps(value, indent=2, allow_nan=False, ensure_ascii=False).replace("\n", "\n  ")
        else:
            text = json.dumps(value, allow_nan=False, ensure_ascii=False)
        parts.append(f"  {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def csv_text(fields: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> str:
    """CSV with a header of ``fields`` and one line per row (``None`` written empty, ``\\n`` line ends)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def render_csv(analysis: Analysis) -> str:
    """One row per node, the JSON node fields as columns (shapes as JSON text)."""
    return csv_text(NODE_FIELDS, (_csv_node(node) for node in analysis.nodes))


def _csv_node(node: NodeResult) -> dict[str, Any]:
    row = node_fields(node)
    row["input_shapes"] = json.dumps(row["input_shapes"])
    row["output_shapes"] = json.dumps(row["output_shapes"])
    return row
