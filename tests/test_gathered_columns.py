"""Fields nodes share (their NodeCost, precision and placed figures: ``NodeTable.SHARED``) reach the JSON writer as
:class:`~onnxroof.roofline.rows.Gathered` runs, read from each run's distinct source nodes only; the text is the
same as the document's, row for row."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from helpers import write_relu_chain

from onnxroof import analyze
from onnxroof.analysis.document import NODE_FIELDS, finite_column, to_dict
from onnxroof.report.data import dumps_document, json_chunks, json_items
from onnxroof.roofline.rows import Gathered

SAMPLES = Path(__file__).resolve().parent.parent / "samples"


def _chain(tmp_path: Path):
    """Relu × 4 then Neg: the first Relu reads the graph input; the other three read an activation and share one
    row (the second's)."""
    return analyze(write_relu_chain(tmp_path / "chain.onnx", 4), platform="a100")


def test_gathered_runs_expand_to_the_plain_columns(tmp_path: Path) -> None:
    analysis = _chain(tmp_path)
    table = analysis.nodes
    assert table.sources() is not None and table.sources().tolist() == [0, 1, 1, 1, 4]
    plain = list(table.column_chunks(chunk=2, fix=finite_column, fields=NODE_FIELDS))
    gathered = list(table.column_chunks(chunk=2, fix=finite_column, fields=NODE_FIELDS, gather=True))
    assert len(plain) == len(gathered) == 3
    for left, right in zip(plain, gathered, strict=True):
        assert list(right) == list(left)
        for name, values in right.items():
            if name in table.SHARED:
                assert isinstance(values, Gathered), name
                values = [values.values[row] for row in values.rows.tolist()]  # row i: values[rows[i]]
            assert values == left[name], name
    # the run of rows 2:4 (c, d) reads one source node (b): one value per shared field
    assert gathered[1]["latency_s"].values == [plain[0]["latency_s"][1]]
    assert gathered[1]["latency_s"].rows.tolist() == [0, 0]


def test_a_table_without_shared_rows_gives_plain_columns(tmp_path: Path) -> None:
    analysis = analyze(SAMPLES / "tiny_cnn.onnx", platform="xavier", dims={"batch": 1})
    if analysis.nodes.sources() is None:
        chunk = next(analysis.nodes.column_chunks(fields=NODE_FIELDS, gather=True))
        assert not any(isinstance(values, Gathered) for values in chunk.values())
    chunk = next(analysis.kernels.column_chunks(gather=True))
    assert not any(isinstance(values, Gathered) for values in chunk.values())


def test_json_chunks_write_the_document_text(tmp_path: Path) -> None:
    analysis = _chain(tmp_path)
    assert "".join(json_chunks(analysis)) == dumps_document(to_dict(analysis))
    for sample in ("tiny_cnn.onnx", "tiny_transformer.onnx"):
        analysis = analyze(SAMPLES / sample, platform="a100", dims={"batch": 1, "seq": 16})
        assert "".join(json_chunks(analysis)) == dumps_document(to_dict(analysis)), sample


def test_neighbouring_gathered_columns_through_one_map_are_written_together() -> None:
    rows = np.array([1, 0, 1])
    other = np.array([0, 0, 0])
    columns = {
        "id": ["a", "b", "c"],
        "x": Gathered([1.5, 2], rows),
        "y%": Gathered(["p", None], rows),
        "z": Gathered([True], other),
        "w": [0.0, -0.0, 3],
    }
    expected = [
        {"id": "a", "x": 2, "y%": None, "z": True, "w": 0.0},
        {"id": "b", "x": 1.5, "y%": "p", "z": True, "w": -0.0},
        {"id": "c", "x": 2, "y%": None, "z": True, "w": 3},
    ]
    text = "".join(json_items([columns]))
    assert text == ",\n    ".join(json.dumps(row, ensure_ascii=False) for row in expected)
