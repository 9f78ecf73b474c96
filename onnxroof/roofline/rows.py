"""Light views of one row of a result table: a node or a kernel read off its columns when code asks for it.

A table keeps one array (or tuple) per figure; a :class:`RowView` is two slots (the table and the row number)
whose attributes read the row's entry of each column on access. Nothing is copied per row, so a million-node
analysis holds no million result objects; a view compares equal to another of the same class when every field
is equal, and :meth:`RowView.to_dict` gives its fields as plain data in :attr:`RowView.FIELDS` order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any, ClassVar, NamedTuple, TypeVar, overload

import numpy as np
import numpy.typing as npt


class Field:
    """A field of a :class:`RowView`, named by the attribute it is assigned to; :meth:`read` gives the row's value."""

    def __init__(self) -> None:
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, view: RowView | None, owner: type | None = None) -> Any:
        if view is None:
            return self
        return self.read(view._table, view._row)

    def read(self, table: Any, row: int) -> Any:
        raise NotImplementedError

    def column(self, table: Any, start: int, stop: int) -> list[Any]:
        """The values of rows ``start:stop``, as :meth:`read` gives each (subclasses read a column at once)."""
        return [self.read(table, row) for row in range(start, stop)]

    def at(self, table: Any, rows: list[int]) -> list[Any]:
        """The values of ``rows`` (any rows, in that order), as :meth:`read` gives each."""
        return [self.read(table, row) for row in rows]


class Column(Field):
    """A field read from the table's column of the same name (``table.<name>[row]``, or
    ``table.<source>.<name>[row]`` for a column kept in a part of the table such as its placed figures), as a
    plain Python value: a float64 as ``float``, NaN as None when ``nan_is_none``."""

    def __init__(self, source: str | None = None, *, nan_is_none: bool = False) -> None:
        super().__init__()
        self.source = source
        self.nan_is_none = nan_is_none

    def column(self, table: Any, start: int, stop: int) -> list[Any]:
        part = table if self.source is None else getattr(table, self.source)
        values = getattr(part, self.name)[start:stop]
        return self._nulled(values.tolist() if isinstance(values, np.ndarray) else list(values))

    def at(self, table: Any, rows: list[int]) -> list[Any]:
        part = table if self.source is None else getattr(table, self.source)
        values = getattr(part, self.name)
        listed = values[rows].tolist() if isinstance(values, np.ndarray) else list(map(values.__getitem__, rows))
        return self._nulled(listed)

    def _nulled(self, listed: list[Any]) -> list[Any]:
        if self.nan_is_none:
            return [None if value != value else value for value in listed]  # NaN is the one value unequal to itself
        return listed

    def read(self, table: Any, row: int) -> Any:
        part = table if self.source is None else getattr(table, self.source)
        value = getattr(part, self.name)[row]
        if isinstance(value, np.floating):
            value = float(value)
            if self.nan_is_none and math.isnan(value):
                return None
        elif isinstance(value, np.bool_):
            return bool(value)
        return value


class CostColumn(Field):
    """A cost figure (``flops``, ``macs``, ``bytes_read``, ``bytes_written``, ``params``) read from the row's
    :class:`~onnxroof.core.cost.Cost` (``table.costs[row]``), as the rule gave it (an int stays an int)."""

    def read(self, table: Any, row: int) -> Any:
        return getattr(table.costs[row], self.name)

    def column(self, table: Any, start: int, stop: int) -> list[Any]:
        name = self.name
        return [getattr(cost, name) for cost in table.costs[start:stop]]

    def at(self, table: Any, rows: list[int]) -> list[Any]:
        name, costs = self.name, table.costs
        return [getattr(costs[row], name) for row in rows]


class ItemField(Field):
    """A field read from the row's entry of one of the table's tuples of objects
    (``getattr(table.<items>[row], attribute or name)``): an op's id, a node cost's state."""

    def __init__(self, items: str, attribute: str | None = None) -> None:
        super().__init__()
        self.items = items
        self.attribute = attribute

    def read(self, table: Any, row: int) -> Any:
        return getattr(getattr(table, self.items)[row], self.attribute or self.name)

    def column(self, table: Any, start: int, stop: int) -> list[Any]:
        name = self.attribute or self.name
        return [getattr(item, name) for item in getattr(table, self.items)[start:stop]]

    def at(self, table: Any, rows: list[int]) -> list[Any]:
        name, items = self.attribute or self.name, getattr(table, self.items)
        return [getattr(items[row], name) for row in rows]


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
        columns = self.plain_columns({name: [value] for name, value in self._plain().items()})
        return {name: values[0] for name, values in columns.items()}

    @classmethod
    def plain_columns(cls, columns: dict[str, list[Any]], lists: bool = True) -> dict[str, list[Any]]:
        """Columns of fields (each a list with one value per row, in ``FIELDS`` order, or a subset of them) with
        each value as :meth:`to_dict` gives it (subclasses turn patterns into text, tuples into lists...), a
        column at a time. ``lists=False`` leaves sequences as the table holds them, tuples included: for a
        writer to whom a tuple and a list are the same (JSON), and which can then tell equal ones apart by
        hashing them."""
        return columns

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._plain() == other._plain()

    def __hash__(self) -> int:
        return hash((type(self).__name__, getattr(self, "id", self._row)))

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.FIELDS)
        return f"{type(self).__name__}({inner})"


View = TypeVar("View", bound=RowView)


class Gathered(NamedTuple):
    """A run of a column given as the values of the distinct rows it reads (``values``) and each row's place among
    them (``rows``): row ``i`` of the run holds ``values[rows[i]]``. What :meth:`RowTable.column_chunks` gives
    with ``gather`` for a field the table shares between rows (:attr:`RowTable.SHARED`)."""

    values: list[Any]
    rows: npt.NDArray[np.intp]


def _column(view: type[RowView], name: str, table: Any, start: int, stop: int) -> list[Any]:
    """Rows ``start:stop`` of field ``name``: a column read at once for a :class:`Field`, else (a computed
    property) row by row through views."""
    field = getattr(view, name)
    if isinstance(field, Field):
        return field.column(table, start, stop)
    return [getattr(view(table, row), name) for row in range(start, stop)]


class RowTable(Sequence[View]):
    """Columns of rows read as views: a subclass names its view class (``VIEW``) and its length; indexing and
    iterating build :class:`RowView` s on demand; two tables are equal when their rows are."""

    VIEW: ClassVar[type[RowView]]
    SHARED: ClassVar[frozenset[str]] = frozenset()
    """The fields whose value in a row is the value in its source row (:meth:`sources`)."""

    def __len__(self) -> int:
        raise NotImplementedError

    def sources(self) -> npt.NDArray[np.intp] | None:
        """Each row's source row, whose :attr:`SHARED` fields it holds too (rows placed once and given to
        several); None when every row is its own."""
        return None

    @overload
    def __getitem__(self, row: int) -> View: ...
    @overload
    def __getitem__(self, row: slice) -> tuple[View, ...]: ...
    def __getitem__(self, row: int | slice) -> View | tuple[View, ...]:
        if isinstance(row, slice):
            return tuple(self._view(i) for i in range(len(self))[row])
        if row < 0:
            row += len(self)
        if not 0 <= row < len(self):
            raise IndexError(row)
        return self._view(row)

    def __iter__(self) -> Iterator[View]:
        return (self._view(i) for i in range(len(self)))

    def column_chunks(
        self,
        chunk: int = 4096,
        fix: Callable[[list[Any]], list[Any]] | None = None,
        fields: Sequence[str] | None = None,
        lists: bool = True,
        gather: bool = False,
    ) -> Iterator[dict[str, Any]]:
        """The rows' fields as plain columns, ``chunk`` rows at a time: for each run of rows, a dict from field
        name to the list of those rows' values, as :meth:`RowView.to_dict` gives them (the view's
        :meth:`RowView.plain_columns`). Each column is read at once, without a view and a descriptor call per
        field and row, and no more than ``chunk`` rows' values are held at once. ``fix``, when given, maps each
        column's values before they are made plain (e.g. non-finite floats to None, once per column rather
        than per value); ``fields``: which fields, in that order (default: the view's ``FIELDS``); ``lists``: as
        :meth:`RowView.plain_columns` takes it. ``gather``: a :attr:`SHARED` field of a table whose rows share
        sources (:meth:`sources`) comes as a :class:`Gathered` run, read from the run's distinct source rows
        only (for a writer that handles each distinct value once)."""
        view = self.VIEW
        names = view.FIELDS if fields is None else tuple(fields)
        sources = self.sources() if gather else None
        shared = [name for name in names if name in self.SHARED] if sources is not None else []
        for start in range(0, len(self), chunk):
            stop = min(start + chunk, len(self))
            columns: dict[str, Any] = {
                name: _column(view, name, self, start, stop) for name in names if name not in shared
            }
            if fix is not None:
                columns = {name: fix(values) for name, values in columns.items()}
            columns = view.plain_columns(columns, lists)
            if not shared:
                yield columns
                continue
            assert sources is not None
            distinct, rows = np.unique(sources[start:stop], return_inverse=True)
            read = distinct.tolist()
            values = {name: getattr(view, name).at(self, read) for name in shared}
            if fix is not None:
                values = {name: fix(column) for name, column in values.items()}
            gathered = {name: Gathered(column, rows) for name, column in view.plain_columns(values, lists).items()}
            yield {name: columns[name] if name in columns else gathered[name] for name in names}

    def records(
        self,
        chunk: int = 4096,
        fix: Callable[[list[Any]], list[Any]] | None = None,
        fields: Sequence[str] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Every row's fields as a dict (the view's :meth:`RowView.to_dict`), made from :meth:`column_chunks`
        (same arguments): what a renderer of all rows reads."""
        for columns in self.column_chunks(chunk, fix, fields):
            names = tuple(columns)
            for row in zip(*columns.values(), strict=True):
                yield dict(zip(names, row, strict=True))

    def _view(self, row: int) -> View:
        return self.VIEW(self, row)  # type: ignore[return-value]  # VIEW is the subclass's View

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # tables are compared by value
