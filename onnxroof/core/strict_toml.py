"""Strict reading of a TOML file: unknown keys refused, required keys required, types checked.

Every problem is one error of the caller's type (:class:`~onnxroof.core.errors.PlatformError`,
``BudgetError``...), one line ``FILE: dotted.key: message``, raised at the first problem found.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

from onnxroof.core.errors import OnnxroofError


def show_toml(value: Any) -> str:
    """A value as TOML spells it, for error messages (``true``, not ``True``); past 80 characters (a 4000-digit
    integer, a long string) it is cut with ``...``, so the message stays one readable line."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:77]}..."


def parse_failure(exc: BaseException) -> str:
    """Why a JSON or TOML parser gave up, as one short line: ``nested too deep`` for a ``RecursionError``,
    else the parser's message (whitespace folded, cut at 160 characters)."""
    if isinstance(exc, RecursionError):
        return "nested too deep"
    text = " ".join(str(exc).split())
    return text if len(text) <= 160 else f"{text[:157]}..."


def dotted(table: str, key: str) -> str:
    """``table.key``, or ``key`` at the top level (``table`` empty)."""
    return f"{table}.{key}" if table else key


class TomlReader(NamedTuple):
    """Validates one file's document; every check raises ``error("FILE: dotted.key: message")``.

    ``show`` renders a wrong value in messages (``repr`` or :func:`show_toml`); ``one_line`` collapses runs of
    whitespace in the message (a multi-line value shown in it stays one line).
    """

    label: str
    error: type[OnnxroofError]
    show: Callable[[Any], str] = repr
    one_line: bool = False

    def fail(self, key: str, message: str) -> OnnxroofError:
        """The error for ``key`` (none: the whole file); the caller raises it."""
        text = f"{self.label}: {key}: {message}" if key else f"{self.label}: {message}"
        return self.error(" ".join(text.split()) if self.one_line else text)

    def where(self, key: str) -> str:
        """``FILE: key``, the prefix of a message written elsewhere (a quantity's parser)."""
        return f"{self.label}: {key}"

    def load(self, data: bytes | str) -> dict[str, Any]:
        """The document; bytes must be UTF-8. ``invalid TOML: ...`` otherwise: a syntax error, an integer of
        more digits than Python converts (``ValueError``), arrays or tables nested past the parser's recursion
        limit (``RecursionError``)."""
        try:
            return tomllib.loads(data.decode("utf-8") if isinstance(data, bytes) else data)
        except (ValueError, RecursionError) as exc:  # TOMLDecodeError and UnicodeDecodeError are ValueErrors
            raise self.fail("", f"invalid TOML: {parse_failure(exc)}") from None

    def refuse_unknown(
        self, table: Mapping[str, Any], allowed: Iterable[str], where: str = "", listed: Iterable[str] = ()
    ) -> None:
        """Every key of ``table`` (at dotted path ``where``) is ``allowed``; the message lists those and ``listed``."""
        allowed = frozenset(allowed)
        for key in table:
            self.known(key, allowed, where, listed)

    def known(self, key: str, allowed: Iterable[str], where: str = "", listed: Iterable[str] = ()) -> None:
        """``key`` (of the table at ``where``) is ``allowed``: ``unknown key (allowed: ...)`` otherwise."""
        allowed = frozenset(allowed)
        if key not in allowed:
            names = ", ".join(sorted(allowed | frozenset(listed)))
            raise self.fail(dotted(where, key), f"unknown key (allowed: {names})")

    def require(self, table: Mapping[str, Any], keys: Iterable[str], where: str = "", hint: str = "") -> None:
        """Every one of ``keys`` is in ``table``: ``missing required key`` (and ``hint``) otherwise."""
        for key in keys:
            if key not in table:
                raise self.fail(dotted(where, key), f"missing required key{hint}")

    def table(self, value: Any, key: str) -> dict[str, Any]:
        """``value`` (found at ``key``) is a table."""
        if not isinstance(value, dict):
            raise self.fail(key, f"must be a table, got {self.show(value)}")
        return value

    def string(self, value: Any, key: str, *, non_empty: bool = False) -> str:
        """``value`` is a string (with a non-blank character if ``non_empty``)."""
        if not isinstance(value, str) or (non_empty and not value.strip()):
            what = "a non-empty string" if non_empty else "a string"
            raise self.fail(key, f"must be {what}, got {self.show(value)}")
        return value

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"must be true or false, got {self.show(value)}")
        return value

    def choice(self, value: Any, key: str, allowed: Iterable[str]) -> str:
        """``value`` is one of ``allowed`` (listed in their order)."""
        allowed = tuple(allowed)
        if not isinstance(value, str) or value not in allowed:
            raise self.fail(key, f"must be one of {', '.join(allowed)}, got {self.show(value)}")
        return value

    def schema(self, value: Any, version: int) -> int:
        """``schema`` is exactly the integer ``version`` (not ``true``, not ``1.0``)."""
        if type(value) is not int or value != version:
            raise self.fail("schema", f"must be {version}, got {self.show(value)}")
        return value
