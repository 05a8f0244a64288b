"""ctxscope._record: the shared __repr__, __eq__ and __hash__ behave as dataclasses' generated ones."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from ctxscope._record import FrozenRecord, Record
from ctxscope.schema import Category, Item


@dataclass(slots=True, repr=False, eq=False)
class _Plain(Record):
    a: int
    b: str = field(default="x", repr=False)
    c: list[object] = field(default_factory=list, compare=False)


@dataclass(slots=True)
class _Generated:
    a: int
    b: str = field(default="x", repr=False)
    c: list[object] = field(default_factory=list, compare=False)


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class _Frozen(FrozenRecord):
    a: int
    b: str = field(default="x", hash=False)


@dataclass(frozen=True, slots=True, repr=False, eq=False)
class _One(FrozenRecord):
    a: int


def test_repr_is_the_generated_one():
    assert repr(_Plain(1, "y", [2])) == "_Plain(a=1, c=[2])"
    assert repr(_Plain(1, "y", [2])) == repr(_Generated(1, "y", [2])).replace("_Generated", "_Plain")
    item = Item("r1", Category.RESULTS, "results", 3, text="abc", digest="d")
    assert repr(item) == ("Item(id='r1', category=<Category.RESULTS: 'results'>, part='results', chars=3, "
                          "fixed_tokens=None, label=None, source_kind=None, source_call_id=None, digest='d', "
                          "tokens=0, released=False)")


def test_a_recursive_repr_stops():
    plain = _Plain(1)
    plain.c.append(plain)
    assert repr(plain) == "_Plain(a=1, c=[...])"


def test_equality_is_by_compared_fields_and_class():
    assert _Plain(1, "y", [1]) == _Plain(1, "y", [2])  # c is compare=False
    assert _Plain(1, "y") != _Plain(1, "z")
    assert _Plain(1) != _Generated(1)  # another class: NotImplemented both ways, then identity
    assert _Plain(1).__eq__(1) is NotImplemented
    assert _One(3) == _One(3) and _One(3) != _One(4)


def test_hash():
    with pytest.raises(TypeError):
        hash(_Plain(1))  # unhashable, as a non-frozen dataclass with eq=True
    assert hash(_Frozen(1, "y")) == hash((1,))  # b is hash=False
    assert hash(_One(3)) == hash((3,))
    assert {_Frozen(1, "y"), _Frozen(1, "y")} == {_Frozen(1, "y")}
