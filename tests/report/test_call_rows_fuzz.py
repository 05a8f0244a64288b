"""CallRows against the list it stands for: random rows, adds and reads interleaved, every read compared.

A compact version of the session-30 review's differential fuzz (CallRows at 54f4d43 against the packed,
pending rows of e9e747c): rows come in by ``add`` and ``append``, in bursts that cross PENDING_ROWS,
with the values the packing treats apart (32- and 64-bit edges, past int64, the None mark, bools, an
int subclass, None, negatives), categories new to the session late, and more than 255 model names.
"""

from __future__ import annotations

import copy
import pickle
import random

import pytest

from ctxscope.report import call_rows
from ctxscope.report.call_rows import PENDING_ROWS, CallRow, CallRows
from ctxscope.report.json_report import _NAMED
from ctxscope.schema import CATEGORIES

_FIELDS = ("index", "line", "timestamp_ns", "model", "estimated", "reported", "inferred", "calibrated", "waste",
           "compaction", "used")
_NULLABLE = {"line", "timestamp_ns", "reported"}


class _Count(int):
    """An int subclass: read back as itself, not as a plain int."""


_ODD = [2 ** 31 - 1, 2 ** 31, -(2 ** 31) - 1, 2 ** 63 - 1, -(2 ** 63) + 1, -(2 ** 63), 2 ** 63, -(2 ** 70),
        True, False, _Count(4), -5, 0]
_NAMES = [f"model-{k}" for k in range(300)]


def _exact(value: object) -> object:
    """A value and its type (True and 1, 4 and _Count(4) are different rows)."""
    if isinstance(value, dict):
        return [(key, _exact(v)) for key, v in value.items()]
    return (type(value), value)


def _fields(row: CallRow) -> list[object]:
    return [_exact(getattr(row, name)) for name in _FIELDS]


def _random_row(r: random.Random, odd: object, where: str, names: int) -> CallRow:
    def value(name: str) -> object:
        if name in _NULLABLE and r.random() < 0.1:
            return None
        return odd if odd is not None and where != "tokens" and r.random() < 0.05 else r.randrange(0, 10 ** 6)

    categories = list(CATEGORIES[:r.randrange(1, len(CATEGORIES) + 1)])  # later ones new to the session late
    if r.random() < 0.3:
        r.shuffle(categories)
    calibrated = {c: (odd if odd is not None and where != "ints" and odd != -(2 ** 63) and r.random() < 0.05
                      else r.choice([0, r.randrange(1, 5000)]))
                  for c in categories if r.random() < 0.6}
    model = r.choice([None, r.choice(_NAMES[:names])])
    values = {name: value(name) for name in _FIELDS if name not in ("model", "calibrated", "compaction")}
    return CallRow(**values, model=model, calibrated=calibrated, compaction=r.choice([None, "auto", "manual"]))


def _int64(rows: list[CallRow]) -> bool:
    def fits(value: object, none: bool) -> bool:
        return (none and value is None) or (type(value) is int and -(2 ** 63) < value < 2 ** 63)  # type: ignore

    return all(fits(getattr(row, name), name in _NULLABLE) for row in rows for name in _INT_NAMES) and all(
        fits(tokens, False) for row in rows for tokens in row.calibrated.values())


_INT_NAMES = [name for name in _FIELDS if name not in ("model", "calibrated", "compaction")]


def _check_reads(r: random.Random, rows: CallRows, given: list[CallRow]) -> None:
    n = len(given)
    assert len(rows) == n
    read = r.randrange(6)
    if read == 0:
        i = r.randrange(-n - 2, n + 2)
        if -n <= i < n:
            assert _fields(rows[i]) == _fields(given[i])
        else:
            with pytest.raises(IndexError):
                rows[i]
    elif read == 1:
        bounds = slice(r.choice([None, r.randrange(-n - 3, n + 3)]), r.choice([None, r.randrange(-n - 3, n + 3)]),
                       r.choice([None, 1, 2, -1]))
        assert [_fields(row) for row in rows[bounds]] == [_fields(row) for row in given[bounds]]
    elif read == 2:
        assert [_fields(row) for row in rows] == [_fields(row) for row in given] and rows == given
    elif read == 3:
        start, stop = r.randrange(-n - 3, n + 3), r.randrange(-n - 3, n + 3)
        expected = [[_exact(getattr(row, name)) for name in _FIELDS] for row in given[start:stop]]
        assert [[_exact(v) for v in fields] for fields in rows.field_tuples(start, stop)] == expected
        shown = [{name: tokens for c, name in _NAMED if (tokens := row.calibrated.get(c))}
                 for row in given[start:stop]]
        got = [fields[7] for fields in rows.field_tuples(start, stop, shown=True)]
        assert [_exact(s) for s in got] == [_exact(s) for s in shown]
    elif read == 4:
        assert rows.int64 == _int64(given)
        assert rows.max_used() == max((row.used for row in given), default=0)
    else:
        assert [_fields(row) for row in pickle.loads(pickle.dumps(rows))] == [_fields(row) for row in given]
        assert [_fields(row) for row in copy.copy(rows)] == [_fields(row) for row in given]


@pytest.mark.parametrize("spill_rows", [4096, 0, 50])
@pytest.mark.parametrize("seed", range(len(_ODD) + 1))
def test_call_rows_read_as_the_list_of_their_rows_whatever_the_order_of_adds_and_reads(seed, spill_rows,
                                                                                      monkeypatch):
    """Also with rows spilled to the scratch file past 0 and 50 of them (SPILL_ROWS), not only past 4,096."""
    monkeypatch.setattr(call_rows, "SPILL_ROWS", spill_rows)
    r = random.Random(seed)
    odd = [None, *_ODD][seed]  # one kind of odd value a session, most rows plain
    names = r.choice([3, 300])
    where = r.choice(["ints", "tokens", "both"])  # an odd int field sends every later row value by value
    rows, given = CallRows(), []
    for _ in range(20):
        if r.random() < 0.7:
            for _ in range(r.choice([1, 1, 5, 40, PENDING_ROWS + 3])):
                row = _random_row(r, odd, where, names)
                if r.random() < 0.5:
                    rows.append(row)
                else:
                    rows.add(*(getattr(row, name) for name in _FIELDS))
                given.append(row)
        else:
            _check_reads(r, rows, given)
    assert [_fields(row) for row in rows] == [_fields(row) for row in given]
    assert rows.int64 == _int64(given)
