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


def test_the_pipeline_and_calibration_records_keep_the_generated_behaviour():
    """CallFacts and Correction (on analyze's path) use Record's methods, with the generated ones' results."""
    from ctxscope.core.learned_correction import Correction
    from ctxscope.core.pipeline import CallFacts

    assert CallFacts.__repr__ is Record.__repr__ and Correction.__hash__ is FrozenRecord.__hash__
    facts = CallFacts([], model="m", window_tokens=10)
    assert repr(facts) == ("CallFacts(items=[], model='m', provider=None, stage=<Stage.REQUEST_INPUT: "
                           "'request-input'>, coverage=<Coverage.COMPLETE: 'complete'>, compaction=None, "
                           "window_tokens=10, timestamp_ns=None, sample_offset_ns=None, added=None, reported=None)")
    assert facts == CallFacts([], model="m", window_tokens=10) and facts != CallFacts([], model="n")
    with pytest.raises(TypeError):
        hash(facts)  # not frozen: unhashable, as before
    learned = Correction("m", "*", "offset", 12.0, 1.0, 3, 0.5)
    assert repr(learned) == ("Correction(model='m', tools_key='*', mode='offset', offset=12.0, ratio=1.0, "
                             "pairs=3, median_abs_error=0.5)")
    assert learned == Correction("m", "*", "offset", 12.0, 1.0, 3, 0.5)
    assert hash(learned) == hash(("m", "*", "offset", 12.0, 1.0, 3, 0.5))


def test_the_waste_records_have_their_own_docstrings():
    """A dataclass without a docstring gets inspect.signature() text made at import (~0.36 M instructions)."""
    from ctxscope.core.waste import Finding, Report, WasteOptions

    for cls in (WasteOptions, Finding, Report):
        assert cls.__doc__ and not cls.__doc__.startswith(cls.__name__ + "(")
