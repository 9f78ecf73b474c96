"""Node results as columns: :class:`NodeTable` holds one entry per node, :class:`NodeResult` is a light view of
one row (:mod:`onnxroof.roofline.rows`), and :class:`ModelSummary` says what the model is."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt

from onnxroof.core.cost import Cost
from onnxroof.core.frozen import frozen_dataclass
from onnxroof.core.ir import OpView
from onnxroof.core.node_cost import NodeCost
from onnxroof.roofline.kernels import COST_FIELDS, Placed
from onnxroof.roofline.place import FIGURES, Figures, Floats, Objects
from onnxroof.roofline.rows import Column, Field, ItemField, RowTable


def shape_list(shape: tuple[int | None, ...] | None) -> list[int | None] | None:
    """A shape as results give it: a list, None for an unknown rank."""
    return None if shape is None else list(shape)


class Shapes(Field):
    """The shapes of a node's inputs or outputs (``tensors``), one per tensor (None: absent, or rank unknown),
    read from the row's op (``table.ops[row].<tensors>``): a view gives each shape as a list; a column gives
    the IR's tuples (:meth:`NodeResult.plain_columns` makes them lists)."""

    def __init__(self, tensors: str) -> None:
        super().__init__()
        self.tensors = tensors

    def read(self, table: Any, row: int) -> tuple[list[int | None] | None, ...]:
        return tuple(
            [None if t is None or t.shape is None else list(t.shape) for t in getattr(table.ops[row], self.tensors)]
        )

    def column(self, table: Any, start: int, stop: int) -> list[Any]:
        name = self.tensors
        return [tuple([None if t is None else t.shape for t in getattr(op, name)]) for op in table.ops[start:stop]]


class NodeResult(Placed):
    """One node: what it is, what it costs, where it sits on the roofline (a view of a :class:`NodeTable` row).

    ``input_shapes`` and ``output_shapes`` hold one list per tensor (None: absent, or rank unknown)."""

    __slots__ = ()
    id = ItemField("ops")
    name = ItemField("ops")
    op_type = ItemField("ops")
    domain = ItemField("ops")
    state = ItemField("node_costs")
    kind = ItemField("node_costs")
    """compute | layout | view | metadata | "" (no rule)."""
    dtype = ItemField("ops")
    precision = Column()
    note = ItemField("node_costs")
    compute_density = Column()
    """Share of the node's dense FLOPs counted under ``skip_compute`` (1: all; see :mod:`onnxroof.analysis.whatif`)."""
    missing_tensor = ItemField("node_costs")
    """The tensor without a static shape that kept the node from being costed (state ``unknown_shape``)."""

    FIELDS = (
        "id",
        "name",
        "op_type",
        "domain",
        "state",
        "kind",
        "dtype",
        "precision",
        "input_shapes",
        "output_shapes",
        "note",
        "compute_density",
        "missing_tensor",
        *COST_FIELDS,
        *FIGURES,
    )

    input_shapes = Shapes("inputs")
    output_shapes = Shapes("outputs")

    @classmethod
    def plain_columns(cls, columns: dict[str, list[Any]], lists: bool = True) -> dict[str, list[Any]]:
        """Shapes as lists of lists (with ``lists``)."""
        for name in ("input_shapes", "output_shapes"):
            if lists and name in columns:
                columns[name] = [[None if s is None else list(s) for s in shapes] for shapes in columns[name]]
        return columns


Rows = npt.NDArray[np.intp]
"""Row numbers (a column)."""


class TableLevel(StrEnum):
    """Which table a data export writes: one row per node (as the graph holds them) or per kernel (as the
    runtime launches them: the kernels' ``latency_s`` sum to the predicted latency)."""

    nodes = "nodes"
    kernels = "kernels"


@frozen_dataclass(eq=False)
class NodeTable(RowTable[NodeResult]):
    """Every node of a model as columns, in the IR's order; indexing or iterating gives :class:`NodeResult`
    views. ``costs``: each node's cost as placed (after ``skip_compute``); ``precision``: the platform precision it
    computes at; ``compute_density``: the share of its dense FLOPs counted."""

    ops: tuple[OpView, ...]
    node_costs: tuple[NodeCost, ...]
    costs: tuple[Cost, ...]
    precision: Objects
    compute_density: tuple[float, ...]
    figures: Figures
    shared: tuple[Rows, Rows] | None = None
    """The nodes placed and each node's row among them (:func:`onnxroof.analysis.analyze.shared_rows`): a node
    shares its NodeCost and figures with its row's node. None: every node was placed on its own."""

    VIEW = NodeResult
    SHARED = frozenset(("op_type", "domain", "dtype", "state", "kind", "note", "precision", *COST_FIELDS, *FIGURES))
    """What a node holds as the node it shares its row with does (:attr:`shared`): its NodeCost (state, kind, note,
    cost), precision and placed figures; and its op type, domain and dtype, which both keys the cost stage shares
    a row by hold (:func:`~onnxroof.costing.node.cost_signature`, :func:`~onnxroof.costing.node.folded_signature`;
    not its shapes: folded nodes of one type and dtype share a row whatever their shapes)."""

    def __len__(self) -> int:
        return len(self.ops)

    def sources(self) -> Rows | None:
        """The node each node shares its NodeCost and figures with (its row's placed node; itself when it has
        its own), None when every node was placed on its own."""
        if self.shared is None:
            return None
        placed, inverse = self.shared
        return placed[inverse]

    def distinct(self) -> tuple[list[int], list[int]]:
        """The distinct nodes (the rows placed, in order) and how many nodes share each: what sums over the
        nodes read, each distinct node once with its count."""
        if self.shared is None:
            return list(range(len(self))), [1] * len(self)
        placed, inverse = self.shared
        return placed.tolist(), np.bincount(inverse, minlength=len(placed)).tolist()

    @property
    def latency_s(self) -> Floats:
        """Each node's predicted time, s (a column)."""
        return self.figures.latency_s


@frozen_dataclass
class ModelSummary:
    """What the analyzed model is: its file, graph, producer, opset, node count, the dims bound and the graph's
    inputs and outputs as ``(name, shape, dtype)``."""

    path: str | None
    graph_name: str
    producer: str
    ir_version: int
    opset: int
    nodes: int
    dims: Mapping[str, int]
    inputs: tuple[tuple[str, list[int | None] | None, str], ...]
    outputs: tuple[tuple[str, list[int | None] | None, str], ...]
    subgraph_nodes: tuple[str, ...]  # If/Loop/Scan node ids (their bodies are costed, see control_flow)
