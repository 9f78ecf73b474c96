"""Node results as columns: :class:`NodeTable` holds one entry per node, :class:`NodeResult` is a light view of
one row (:mod:`onnxroof.roofline.rows`), and :class:`ModelSummary` says what the model is."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from onnxroof.core.cost import Cost
from onnxroof.core.ir import OpView, TensorInfo
from onnxroof.core.node_cost import NodeCost
from onnxroof.roofline.kernels import COST_FIELDS, Placed
from onnxroof.roofline.place import FIGURES, Figures, Floats, Objects
from onnxroof.roofline.rows import Column


def shape_list(shape: tuple[int | None, ...] | None) -> list[int | None] | None:
    """A shape as results give it: a list, None for an unknown rank."""
    return None if shape is None else list(shape)


def _shapes(tensors: tuple[TensorInfo | None, ...]) -> tuple[list[int | None] | None, ...]:
    return tuple(None if t is None else shape_list(t.shape) for t in tensors)


class _OpField:
    """A field read from the row's :class:`~onnxroof.core.ir.OpView` (``table.ops[row].<name>``)."""

    def __init__(self, attribute: str | None = None) -> None:
        self.attribute = attribute
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, view: NodeResult | None, owner: type | None = None) -> Any:
        if view is None:
            return self
        return getattr(view._table.ops[view._row], self.attribute or self.name)


class _CostField(_OpField):
    """A field read from the row's :class:`~onnxroof.costing.control_flow.NodeCost` (``table.node_costs[row]``)."""

    def __get__(self, view: NodeResult | None, owner: type | None = None) -> Any:
        if view is None:
            return self
        return getattr(view._table.node_costs[view._row], self.attribute or self.name)


class NodeResult(Placed):
    """One node: what it is, what it costs, where it sits on the roofline (a view of a :class:`NodeTable` row).

    ``input_shapes`` and ``output_shapes`` hold one list per tensor (None: absent, or rank unknown)."""

    __slots__ = ()
    id = _OpField()
    name = _OpField()
    op_type = _OpField()
    domain = _OpField()
    state = _CostField()
    kind = _CostField()
    """compute | layout | view | metadata | "" (no rule)."""
    dtype = _OpField()
    precision = Column()
    note = _CostField()
    compute_density = Column()
    """Share of the node's dense FLOPs counted under ``skip_compute`` (1: all; see :mod:`onnxroof.analysis.whatif`)."""
    missing_tensor = _CostField()
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

    @property
    def input_shapes(self) -> tuple[list[int | None] | None, ...]:
        return _shapes(self._table.ops[self._row].inputs)

    @property
    def output_shapes(self) -> tuple[list[int | None] | None, ...]:
        return _shapes(self._table.ops[self._row].outputs)

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain data (shapes as lists)."""
        data = self._plain()
        data["input_shapes"] = list(self.input_shapes)
        data["output_shapes"] = list(self.output_shapes)
        return data


@dataclass(frozen=True, eq=False)
class NodeTable(Sequence[NodeResult]):
    """Every node of a model as columns, in the IR's order; indexing or iterating gives :class:`NodeResult`
    views. ``costs``: each node's cost as placed (after ``skip_compute``); ``precision``: the platform precision it
    computes at; ``compute_density``: the share of its dense FLOPs counted."""

    ops: tuple[OpView, ...]
    node_costs: tuple[NodeCost, ...]
    costs: tuple[Cost, ...]
    precision: Objects
    compute_density: tuple[float, ...]
    figures: Figures

    def __len__(self) -> int:
        return len(self.ops)

    @overload
    def __getitem__(self, row: int) -> NodeResult: ...
    @overload
    def __getitem__(self, row: slice) -> tuple[NodeResult, ...]: ...
    def __getitem__(self, row: int | slice) -> NodeResult | tuple[NodeResult, ...]:
        if isinstance(row, slice):
            return tuple(NodeResult(self, i) for i in range(len(self))[row])
        if row < 0:
            row += len(self)
        if not 0 <= row < len(self):
            raise IndexError(row)
        return NodeResult(self, row)

    def __iter__(self) -> Iterator[NodeResult]:
        return (NodeResult(self, i) for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NodeTable):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # unhashable: equality compares the rows

    @property
    def latency_s(self) -> Floats:
        """Each node's predicted time, s (a column)."""
        return self.figures.latency_s


@dataclass(frozen=True)
class ModelSummary:
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
