"""``frozen_dataclass``: how the package declares its frozen value classes.

It is ``dataclasses.dataclass(frozen=True)`` with the same fields, ``__init__``, immutability, ``fields``,
``replace`` and ``asdict``, and the same equality, hash and repr. The difference is where the last three come from.
On Python 3.11 ``dataclass`` writes each method as source text and compiles it, seven per frozen class, and that
compiling is most of what a class costs to define. ``frozen_dataclass`` lets ``dataclass`` compile ``__init__`` and
the frozen guards only, and gives every class the three shared functions below, which read the class's field names:

* ``__eq__``: an instance of the very same class, compared field by field as a tuple (the fields with
  ``compare=True``); anything else is ``NotImplemented``.
* ``__hash__``: the hash of the tuple of the fields with ``hash=True``, or with ``hash=None`` and ``compare=True``;
  left alone when the class body defines its own.
* ``__repr__``: ``QualName(field=repr, ...)`` over the fields with ``repr=True``, ``...`` for a value that
  contains itself.

That is what ``dataclass`` itself does with ``eq=True``, ``frozen=True``, ``unsafe_hash=False`` (the hash action
table of ``dataclasses._hash_action``), so the values, hashes and text are the same as before. Every method a
class body defines itself is kept, as ``dataclass`` keeps it. ``eq=False`` keeps identity equality and
``object.__hash__``; ``repr=False`` keeps ``object.__repr__``; ``slots=True`` is passed on. One difference can be
seen: a class's ``__dataclass_params__`` reads ``eq=False, repr=False``, what ``dataclass`` itself was asked for.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")

_Key = Callable[[Any], tuple[Any, ...]]


@overload
def frozen_dataclass(cls: type[T], /) -> type[T]: ...


@overload
def frozen_dataclass(*, slots: bool = False, eq: bool = True, repr: bool = True) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def frozen_dataclass(
    cls: type[T] | None = None, /, *, slots: bool = False, eq: bool = True, repr: bool = True
) -> type[T] | Callable[[type[T]], type[T]]:
    """``cls`` as a frozen dataclass (``@frozen_dataclass`` or ``@frozen_dataclass(slots=True, ...)``): see the
    module's docstring for what it shares between classes."""

    def wrap(cls: type[T]) -> type[T]:
        made: Any = dataclasses.dataclass(cls, frozen=True, slots=slots, eq=False, repr=False)
        fields = dataclasses.fields(made)
        own = made.__dict__
        if repr and "__repr__" not in own:
            made._frozen_repr_fields = tuple(f.name for f in fields if f.repr)
            made.__repr__ = _repr
        if eq:
            class_hash = own.get("__hash__", dataclasses.MISSING)
            explicit_hash = not (class_hash is dataclasses.MISSING or (class_hash is None and "__eq__" in own))
            if "__eq__" not in own:
                made._frozen_eq_key = _key(tuple(f.name for f in fields if f.compare))
                made.__eq__ = _eq
            if not explicit_hash:
                made._frozen_hash_key = _key(tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash)))
                made.__hash__ = _hash
        return made  # type: ignore[no-any-return]  # the dataclass made of cls

    return wrap if cls is None else wrap(cls)


def _key(names: tuple[str, ...]) -> _Key:
    """A function of an instance to the tuple of its ``names`` fields (always a tuple, even of one field or none,
    as ``dataclass`` compares and hashes them)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        one = attrgetter(names[0])
        return lambda instance: (one(instance),)
    return lambda instance: ()


def _eq(self: Any, other: Any) -> object:  # a bool, or NotImplemented (as any __eq__)
    if other.__class__ is self.__class__:
        key: _Key = self.__class__._frozen_eq_key
        return key(self) == key(other)
    return NotImplemented


def _hash(self: Any) -> int:
    key: _Key = self.__class__._frozen_hash_key
    return hash(key(self))


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    cls = self.__class__
    fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in cls._frozen_repr_fields)
    return f"{cls.__qualname__}({fields})"
