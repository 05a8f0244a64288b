"""``__repr__`` and ``__eq__`` written once for ctxscope's dataclasses, not generated per class.

:mod:`dataclasses` compiles the source of every method it generates when the
class is made (``exec``, parser and compiler included): for the dataclasses a
short ``analyze`` imports, their ``__repr__`` and ``__eq__`` were about 45 M
instructions of its ~385 M start-up. A class declared
``@dataclass(slots=True, repr=False, eq=False)`` that derives from
:class:`Record` gets these two instead, with the generated ones' behaviour:
``Name(field=value!r, ...)`` over the fields with ``repr=True`` ("..." for a
recursive one), and equality of the fields with ``compare=True`` between
instances of the same class (``NotImplemented`` otherwise). Instances stay
unhashable, as a non-frozen dataclass with ``eq=True`` is (defining
``__eq__`` here sets ``__hash__`` to None). A frozen class derives from
:class:`FrozenRecord`, whose ``__hash__`` is the generated one's (the hash
of the tuple of the hashed fields' values).
"""

from __future__ import annotations

import reprlib
from dataclasses import fields
from operator import attrgetter
from typing import Any, Callable

# class -> (names shown by __repr__, the compared fields' values as a tuple, the hashed ones'),
# made on a class's first repr, comparison or hash, not at import (most are never compared).
_Key = Callable[[Any], tuple[Any, ...]]
_SHAPES: dict[type, tuple[tuple[str, ...], _Key, _Key]] = {}


def _values(names: list[str]) -> _Key:
    if len(names) == 1:  # attrgetter of one name gives the value, not a 1-tuple
        only = attrgetter(names[0])
        return lambda obj: (only(obj),)
    if names:
        return attrgetter(*names)
    return lambda obj: ()


def _shape(cls: type) -> tuple[tuple[str, ...], _Key, _Key]:
    shape = _SHAPES.get(cls)
    if shape is None:
        every = fields(cls)
        shape = _SHAPES[cls] = (
            tuple(f.name for f in every if f.repr),
            _values([f.name for f in every if f.compare]),
            # dataclasses' rule: a field's hash=None follows its compare.
            _values([f.name for f in every if (f.compare if f.hash is None else f.hash)]))
    return shape


class Record:
    """Base of a ``@dataclass(repr=False, eq=False)`` class: the generated ``__repr__`` and ``__eq__``."""

    __slots__ = ()

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        cls = self.__class__
        shown = _shape(cls)[0]
        return f"{cls.__qualname__}({', '.join(f'{name}={getattr(self, name)!r}' for name in shown)})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            key = _shape(self.__class__)[1]
            return key(self) == key(other)
        return NotImplemented


class FrozenRecord(Record):
    """Base of a ``@dataclass(frozen=True, repr=False, eq=False)`` class: ``__hash__`` too."""

    __slots__ = ()

    def __hash__(self) -> int:
        return hash(_shape(self.__class__)[2](self))
