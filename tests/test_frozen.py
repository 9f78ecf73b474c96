"""``core.frozen.frozen_dataclass`` against ``dataclasses.dataclass(frozen=True)``: the same equality, hash,
repr, immutability and dataclass API, class by class, including every value class of the package."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import pkgutil
from dataclasses import FrozenInstanceError, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import onnxroof
from onnxroof.core.frozen import frozen_dataclass


def _shape(decorate: Any) -> type[Any]:
    """A class of four fields made by ``decorate``: one out of the comparison, one out of the hash, one out of the
    repr."""

    @decorate
    class Shape:
        """A value."""

        name: str
        dims: tuple[int, ...] = ()
        note: str = field(default="", compare=False)
        extra: float = field(default=0.0, hash=False, repr=False)

    return Shape


def _pair(slots: bool = False) -> tuple[type[Any], type[Any]]:
    """The same class made by ``frozen_dataclass`` and by ``dataclass(frozen=True)``."""
    return _shape(frozen_dataclass(slots=slots)), _shape(dataclasses.dataclass(frozen=True, slots=slots))


values = st.tuples(
    st.sampled_from(["a", "b"]),
    st.lists(st.integers(0, 3), max_size=2).map(tuple),
    st.sampled_from(["", "x"]),
    st.sampled_from([0.0, 1.0, math.nan]),
)


@pytest.mark.parametrize("slots", [False, True])
@given(left=values, right=values)
def test_equality_hash_and_repr_are_those_of_a_frozen_dataclass(
    slots: bool, left: tuple[Any, ...], right: tuple[Any, ...]
) -> None:
    ours, theirs = _pair(slots)
    a, b, x, y = ours(*left), ours(*right), theirs(*left), theirs(*right)
    assert (a == b) is (x == y)
    assert (a != b) is (x != y)
    assert hash(a) == hash(x)
    assert repr(a) == repr(x)
    assert (a == a) is (x == x)  # a NaN field: the same object compares equal inside the tuple, as there


def test_a_value_of_another_class_is_not_equal_even_with_the_same_fields() -> None:
    ours, theirs = _pair()
    assert ours("a") != theirs("a")
    assert ours("a").__eq__(theirs("a")) is NotImplemented


@pytest.mark.parametrize("slots", [False, True])
def test_it_is_a_frozen_dataclass(slots: bool) -> None:
    ours, _ = _pair(slots)
    value = ours("a", (1, 2))
    with pytest.raises(FrozenInstanceError):
        value.name = "b"
    with pytest.raises(FrozenInstanceError):
        del value.name
    assert dataclasses.is_dataclass(value)
    assert [f.name for f in dataclasses.fields(value)] == ["name", "dims", "note", "extra"]
    assert dataclasses.replace(value, name="b") == ours("b", (1, 2))
    assert dataclasses.asdict(value) == {"name": "a", "dims": (1, 2), "note": "", "extra": 0.0}
    assert hasattr(value, "__slots__") is slots


def test_eq_false_and_repr_false_keep_identity_and_object_repr() -> None:
    @frozen_dataclass(eq=False, repr=False)
    class Node:
        name: str

    a, b = Node("a"), Node("a")
    assert a != b and a == a
    assert hash(a) == object.__hash__(a)
    assert repr(a).startswith("<")


def test_methods_the_class_body_defines_are_kept() -> None:
    @frozen_dataclass
    class Named:
        name: str

        def __repr__(self) -> str:
            return f"<{self.name}>"

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Named) and other.name.lower() == self.name.lower()

        def __hash__(self) -> int:
            return hash(self.name.lower())

    assert repr(Named("A")) == "<A>"
    assert Named("A") == Named("a")
    assert hash(Named("A")) == hash(Named("a"))


def test_an_eq_without_a_hash_gets_the_fields_hash_as_dataclass_gives_it() -> None:
    def make(decorate: Any) -> Any:
        class Named:
            name: str

            def __eq__(self, other: object) -> bool:
                return isinstance(other, type(self))

        return decorate(Named)

    ours, theirs = make(frozen_dataclass), make(dataclasses.dataclass(frozen=True))
    assert hash(ours("a")) == hash(theirs("a")) == hash(("a",))


def test_a_value_that_contains_itself_repr_ends() -> None:
    @frozen_dataclass
    class Box:
        items: list[Any]

    box = Box([])
    box.items.append(box)
    assert repr(box) == "test_a_value_that_contains_itself_repr_ends.<locals>.Box(items=[...])"


def _package_value_classes() -> list[type[Any]]:
    found = []
    for info in pkgutil.walk_packages(onnxroof.__path__, "onnxroof."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for cls in vars(module).values():
            if inspect.isclass(cls) and cls.__module__ == info.name and dataclasses.is_dataclass(cls):
                found.append(cls)
    return found


def test_every_frozen_value_class_of_the_package_is_made_by_frozen_dataclass() -> None:
    """One way to declare a value: a class made by ``dataclass(frozen=True)`` directly would compile its own
    methods again; the two mutable dataclasses (a cost cache, a fleet plan) are not values."""
    classes = _package_value_classes()
    assert len(classes) > 100
    direct = [
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in classes
        if cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
        and cls.__dataclass_params__.eq  # type: ignore[attr-defined]  # ours pass eq=False to dataclass
    ]
    assert direct == []
    mutable = sorted(cls.__qualname__ for cls in classes if not cls.__dataclass_params__.frozen)  # type: ignore[attr-defined]
    assert mutable == ["CostCache", "_Plan"]


def test_values_of_the_package_pickle_and_copy_as_before() -> None:
    """Dask and process pools move values between processes by pickling them."""
    import copy
    import pickle

    from onnxroof.core.cost import Cost
    from onnxroof.core.ir import TensorInfo
    from onnxroof.core.states import Role

    tensor = TensorInfo("x", (1, 3, 224, 224), "float32", 4, Role.ACTIVATION)  # slots=True
    cost = Cost(flops=2.0, macs=1.0)
    for value in (tensor, cost):
        again = pickle.loads(pickle.dumps(value))
        assert again == value and hash(again) == hash(value) and repr(again) == repr(value)
        assert copy.deepcopy(value) == value
