"""Which rows of an analysis's tables a user asked for: ``--op``, ``--exclude-op``, ``--name REGEX``, ``--top N``.

A :class:`RowFilter` picks row positions of the node table or the kernel table; renderers (the console's top
list, the CSV) show those rows. The rules, the same for both tables:

* a row's op type is the node's; a kernel's is its anchor's (its first node, as the op-type table attributes a
  fused kernel's time: ``Conv+BN+Relu`` counts as Conv). An op type matches as written (``MatMul``) or with its
  domain (``com.microsoft::MatMulNBits``);
* ``--op`` keeps the rows of those op types (none given: every row), then ``--exclude-op`` drops its op types;
* ``--name REGEX`` keeps the rows where the regular expression is found (``re.search``) in a node's id or
  name, or in the id of any node a kernel runs;
  A pattern that backtracks without end (nested repetition such as ``(a+)+$`` on a long name) is stopped after
  :data:`MATCH_LIMIT_S` seconds of matching with a :class:`FilterError` naming the row it was on, where a timer
  signal can be used (the main thread of a POSIX process, no interval timer of the caller's running); elsewhere
  matching is not limited;
* ``--top N`` keeps the N rows of largest predicted ``latency_s``, slowest first (ties by position);
  without it the rows keep the table's order.
"""

from __future__ import annotations

import contextlib
import re
import signal
import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from onnxroof.analysis.results import TableLevel
from onnxroof.core.errors import OnnxroofError
from onnxroof.core.frozen import frozen_dataclass

if TYPE_CHECKING:
    from onnxroof.analysis.analyze import Analysis

__all__ = ["RowFilter", "TableLevel"]


#: Seconds of ``--name`` matching over a whole table before it is stopped (the module docstring).
MATCH_LIMIT_S = 10.0


class FilterError(OnnxroofError):
    """A row filter that cannot be applied (a bad regular expression, or one that backtracks without end)."""


class _Overrun(Exception):
    """Raised from the timer signal's handler inside a regular-expression search (``re`` checks for signals)."""


@contextlib.contextmanager
def _match_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`_Overrun` in the block after ``seconds``, through ``SIGALRM`` (restored on leaving), where a timer
    can be used: the main thread of a process that has ``setitimer`` and no interval timer running already."""
    usable = (
        hasattr(signal, "setitimer")
        and threading.current_thread() is threading.main_thread()
        and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    )
    if not usable:
        yield
        return

    def overrun(signum: int, frame: object) -> None:
        raise _Overrun

    previous = signal.signal(signal.SIGALRM, overrun)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@frozen_dataclass(slots=True)
class RowFilter:
    """The rows asked for (module docstring); the default keeps every row in order."""

    ops: tuple[str, ...] = ()
    exclude_ops: tuple[str, ...] = ()
    name: re.Pattern[str] | None = None
    top: int | None = None

    @classmethod
    def of(
        cls,
        ops: Sequence[str] | None = None,
        exclude_ops: Sequence[str] | None = None,
        name: str | None = None,
        top: int | None = None,
    ) -> RowFilter:
        """A filter from command-line values; a regular expression that does not compile is a
        :class:`FilterError` naming ``--name`` (``re`` raises ``re.error`` for bad syntax, ``OverflowError`` for a
        repetition count past its limit, ``a{99999999999}``, and ``RecursionError`` for groups nested too deep)."""
        try:
            pattern = re.compile(name) if name is not None else None
        except (re.error, OverflowError, RecursionError) as exc:
            shown = name if name is None or len(name) <= 80 else f"{name[:77]}..."
            reason = "groups nested too deep" if isinstance(exc, RecursionError) else str(exc)
            raise FilterError(f"--name: {shown!r} is not a regular expression ({reason})") from None
        return cls(tuple(ops or ()), tuple(exclude_ops or ()), pattern, top)

    @property
    def active(self) -> bool:
        """Whether any filter is set (a default filter keeps every row in order)."""
        return bool(self.ops or self.exclude_ops or self.name is not None or self.top is not None)

    def describe(self) -> str:
        """The filter as the options that set it: ``--op Conv --name 'block1'``."""
        parts = [f"--op {op}" for op in self.ops] + [f"--exclude-op {op}" for op in self.exclude_ops]
        if self.name is not None:
            parts.append(f"--name {self.name.pattern!r}")
        if self.top is not None:
            parts.append(f"--top {self.top}")
        return " ".join(parts)

    def _op_kept(self, op_type: str, domain: str) -> bool:
        names = {op_type, f"{domain}::{op_type}"} if domain else {op_type}
        return (not self.ops or bool(names.intersection(self.ops))) and not names.intersection(self.exclude_ops)

    def _ranked(self, rows: list[int], latency: Sequence[float]) -> tuple[int, ...]:
        if self.top is None:
            return tuple(rows)
        return tuple(sorted(rows, key=lambda row: (-latency[row], row))[: self.top])

    def pick(self, analysis: Analysis, level: TableLevel) -> tuple[int, ...] | None:
        """The rows of ``level``'s table kept, None when no filter is set (every row, in order)."""
        if not self.active:
            return None
        return self.kernels(analysis) if level is TableLevel.kernels else self.nodes(analysis)

    def _named(self, texts: Sequence[str]) -> bool:
        """Whether ``--name`` is found in any of ``texts`` (True without ``--name``)."""
        return self.name is None or any(self.name.search(text) for text in texts)

    def _matching(self, candidates: Iterator[tuple[int, Sequence[str]]]) -> list[int]:
        """The rows among ``(row, texts)`` whose texts ``--name`` is found in, matching stopped after
        :data:`MATCH_LIMIT_S` (module docstring) with a :class:`FilterError` naming the row it was on."""
        kept: list[int] = []
        texts: Sequence[str] = ()
        try:
            with _match_limit(MATCH_LIMIT_S):
                for row, texts in candidates:
                    if self._named(texts):
                        kept.append(row)
        except _Overrun:
            pattern = self.name.pattern if self.name is not None else ""
            shown = pattern if len(pattern) <= 80 else f"{pattern[:77]}..."
            raise FilterError(
                f"--name: {shown!r} was still matching after {MATCH_LIMIT_S:g} s, on {texts[0]!r} (nested "
                "repetition such as '(a+)+' backtracks without end); simplify the expression"
            ) from None
        return kept

    def nodes(self, analysis: Analysis) -> tuple[int, ...]:
        """Positions of the node rows kept."""
        table = analysis.nodes
        candidates = (
            (row, (op.id, op.name or "")) for row, op in enumerate(table.ops) if self._op_kept(op.op_type, op.domain)
        )
        return self._ranked(self._matching(candidates), table.figures.latency_s.tolist())

    def kernels(self, analysis: Analysis) -> tuple[int, ...]:
        """Positions of the kernel rows kept (a kernel's op type is its anchor node's)."""
        table = analysis.kernels
        domain_of = {op.id: op.domain for op in analysis.nodes.ops}
        candidates = (
            (row, table.node_ids[row])
            for row in range(len(table))
            if self._op_kept(table.op_types[row][0], domain_of.get(table.node_ids[row][0], ""))
        )
        return self._ranked(self._matching(candidates), table.figures.latency_s.tolist())


def only_for(allowed: bool, rows: RowFilter, level: TableLevel, where: str) -> None:
    """Refuse row filters and ``--level kernels`` where the output format does not apply them (``where``: the
    formats that do), as a :class:`FilterError` naming the first option given."""
    if allowed:
        return
    if rows.active:
        raise FilterError(f"{rows.describe().split(' ')[0]}: row filters apply to the {where} only")
    if level is TableLevel.kernels:
        raise FilterError(f"--level kernels: applies to the {where} only")
