"""Light views of one row of a result table: a node or a kernel read off its columns when code asks for it.

A table keeps one array (or tuple) per figure; a :class:`RowView` is two slots (the table and the row number)
whose attributes read the row's entry of each column on access. Nothing is copied per row, so a million-node
analysis holds no million result objects; a view compares equal to another of the same class when every field
is equal, and :meth:`RowView.to_dict` gives its fields as plain data in :attr:`RowView.FIELDS` order.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np


class Column:
    """A field read from the table's column of the same name (``table.<name>[row]``, or
    ``table.<source>.<name>[row]`` for a column kept in a part of the table such as its placed figures), as a
    plain Python value: a float64 as ``float``, NaN as None when ``nan_is_none``."""

    def __init__(self, source: str | None = None, *, nan_is_none: bool = False) -> None:
        self.source = source
        self.nan_is_none = nan_is_none
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, view: RowView | None, owner: type | None = None) -> Any:
        if view is None:
            return self
        table = view._table if self.source is None else getattr(view._table, self.source)
        value = getattr(table, self.name)[view._row]
        if isinstance(value, np.floating):
            value = float(value)
            if self.nan_is_none and math.isnan(value):
                return None
        elif isinstance(value, np.bool_):
            return bool(value)
        return value


class CostColumn:
    """A cost figure (``flops``, ``macs``, ``bytes_read``, ``bytes_written``, ``params``) read from the row's
    :class:`~onnxroof.core.cost.Cost` (``table.costs[row]``), as the rule gave it (an int stays an int)."""

    def __init__(self) -> None:
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, view: RowView | None, owner: type | None = None) -> Any:
        if view is None:
            return self
        return getattr(view._table.costs[view._row], self.name)


class RowView:
    """One row of a result table (module docstring). Subclasses declare their fields as :class:`Column` and
    :class:`CostColumn` attributes and list them in ``FIELDS``."""

    __slots__ = ("_row", "_table")
    FIELDS: ClassVar[tuple[str, ...]] = ()

    def __init__(self, table: Any, row: int) -> None:
        self._table = table
        self._row = row

    @property
    def bytes(self) -> float:
        """Bytes moved: read + written."""
        return self.bytes_read + self.bytes_written  # type: ignore[attr-defined, no-any-return]  # subclasses' columns

    def _plain(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.FIELDS}

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain data."""
        return self._plain()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._plain() == other._plain()

    def __hash__(self) -> int:
        return hash((type(self).__name__, getattr(self, "id", self._row)))

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS)
        return f"{type(self).__name__}({inner})"
