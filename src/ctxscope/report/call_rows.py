"""A session's per-call rows, packed: the report's one structure that grows with every call.

``analyze`` keeps one row of numbers per call for the growth table (issue 14:
memory flat in the session's size). As objects a row cost about 550 bytes (a
slotted :class:`CallRow`, its category dict, its ints); :class:`CallRows`
keeps the same values in typed arrays, one per field (74 bytes a row on a
dense generated session: below), and builds a :class:`CallRow` only when one is asked for. It reads like the
list it replaces (``len``, index, iterate, ``append``), so renderers and tests
see :class:`CallRow` objects as before.

Exact whatever the input says: a column starts as narrow as its usual
values allow (counts and line numbers in 32 bits, the names' codes in 8) and
widens to 64 bits at the first value it cannot hold (``array.append`` raises
``OverflowError``, caught: the common case pays nothing); a value an ``int64``
cannot hold (a corrupt count, a line number beyond it) turns its column into
a plain list, never raises and never rounds; :attr:`CallRows.int64` says
whether every value fits (the streamed JSON report relies on it). All in 64
bits a row took 155 bytes; narrow, 74 (issue 14: a compacting session's rows
are most of what still grows with it).

Rows come in packed (one ``struct`` call a row, not an array append a value:
an append converts its value through ``PyArg_Parse``) and reach the columns
:data:`PENDING_ROWS` at a time, or at the first read.

Flat in the session's length: the columns take the first :data:`SPILL_ROWS`
rows (about 300 KB); the rows after them go, each batch packed as it came, to
an unnamed scratch file (:class:`ctxscope._scratch.ScratchFile`), and a read
brings back one batch at a time (:meth:`CallRows._batch`, the last one kept).
On a 200 MB compacting session the rows were most of what still grew with it
(22,392 calls, 2 MB live). A session shorter than that never opens the file.
A row the packed path cannot take (a value past int64, a bool) brings the
spilled rows back into the columns first (:meth:`CallRows._unspill`): such a
session stays in memory, in order, exact.
"""

from __future__ import annotations

import copy
import struct
from array import array
from functools import lru_cache
from itertools import accumulate, chain, islice
from collections.abc import Iterator, MutableSequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

from ctxscope._record import Record
from ctxscope.schema import CATEGORIES, Category

if TYPE_CHECKING:  # pragma: no cover
    from ctxscope._scratch import ScratchFile

__all__ = ["CallRow", "CallRows"]


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class CallRow(Record):
    index: int
    line: int | None
    timestamp_ns: int | None
    model: str | None
    estimated: int  # counted content plus the inferred prefix
    reported: int | None
    inferred: int  # the inferred prefix's share of ``estimated``
    calibrated: dict[Category, int]
    waste: int
    compaction: str | None  # trigger when a compaction happened just before this call
    used: int  # the sum of ``calibrated``: summed once, not again by every view that shows it


# The integer fields of a row, in CallRow's order: one column each.
_INT_FIELDS = ("index", "line", "timestamp_ns", "estimated", "reported", "inferred", "waste", "used")
# None in an int column (line, timestamp_ns, reported): the one int64 no count or time takes.
# A value equal to it is stored exactly all the same: its column becomes a list.
_NONE = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_NO_NAME = -1  # None in a name column (model, compaction)
# The one type add() appends a row's category tokens as in C: exactly int (a bool, or another int
# subclass, an array would read back as a plain int).
_INT_ONLY = frozenset((int,))

# A pending row (CallRows._pending_rows): the int fields in _INT_FIELDS' order, the model's and the
# compaction's name codes, the number of its (category, tokens) pairs; native int64s.
_ROW = struct.Struct("11q")
_ROW_FIELDS = 11
_ROW_ITEMSIZE = 8
# Rows kept packed before the columns take them: a batch's working set (~100 KB on a dense session).
PENDING_ROWS = 1024
# Rows the columns hold; the later ones go to the scratch file a batch at a time (the module's docstring).
SPILL_ROWS = 4096

_REPORT_ORDER = {category: rank for rank, category in enumerate(CATEGORIES)}  # field_tuples(shown=True)

Column = MutableSequence[Any]  # array('i'), then array('q'), or a list once a value does not fit
# Each int column's first type: 32 bits, but the times (nanoseconds since 1970 need 64).
_FIRST_TYPE = {name: "q" if name == "timestamp_ns" else "i" for name in _INT_FIELDS}


class CallRows:
    """The rows of one session's calls, in order, packed into arrays (see the module's docstring)."""

    __slots__ = ("_ints", "_packed", "_model", "_compaction", "_names", "_name_codes",
                 "_cat_codes", "_cat_values", "_cat_ends", "_categories", "_category_codes",
                 "_pending", "_pending_rows", "_pending_codes", "_pending_values", "_codes_of",
                 "_spill", "_batches", "_spilled_rows", "_spilled_used", "_loaded")

    def __init__(self, rows: list[CallRow] | None = None) -> None:
        self._ints: list[Column] = [array(_FIRST_TYPE[name]) for name in _INT_FIELDS]
        self._packed = True  # every int column still an array (add's row in C)
        # model and compaction trigger: codes into ``_names`` (a session has a few distinct ones).
        self._model: Column = array("b")
        self._compaction: Column = array("b")
        self._names: list[str] = []
        self._name_codes: dict[str, int] = {}
        # calibrated: (category code, tokens) pairs of every row, one after another, in the
        # row's own order; row i's pairs end at _cat_ends[i].
        self._cat_codes: Column = array("B")
        self._cat_values: Column = array("i")
        self._cat_ends: Column = array("i")
        self._categories: list[Category] = []
        self._category_codes: dict[Category, int] = {}
        # Rows added but not yet in the columns (at most PENDING_ROWS): each row's ints, name codes and
        # pair count packed as int64 (_ROW), its pairs' codes and tokens. An array's append converts
        # a value through PyArg_Parse (~900 instructions on this Python, ~25 a row); struct packs a
        # row in one call, and the columns take the rows a batch at a time (_flush).
        self._pending = 0
        self._pending_rows = bytearray()
        self._pending_codes = bytearray()
        self._pending_values = bytearray()
        self._codes_of: dict[tuple[Category, ...], bytes] = {}  # a row's categories -> their codes
        # Rows past the columns' SPILL_ROWS, in the scratch file: each batch (its first row, rows, offset,
        # and the sizes of its rows', codes' and tokens' bytes) as _flush had it pending. _spill is False
        # once the file failed (the rows stay in memory); _loaded is the batch read last (_batch).
        self._spill: ScratchFile | bool | None = None
        self._batches: list[tuple[int, int, int, int, int, int]] = []
        self._spilled_rows = 0
        self._spilled_used: int | None = None  # the largest ``used`` of the spilled rows
        self._loaded: tuple[int, CallRows] | None = None
        for row in rows or ():
            self.append(row)

    # -- the list's surface ------------------------------------------------

    def append(self, row: CallRow) -> None:
        self.add(row.index, row.line, row.timestamp_ns, row.model, row.estimated, row.reported, row.inferred,
                 row.calibrated, row.waste, row.compaction, row.used)

    def add(self, index: int, line: int | None, timestamp_ns: int | None, model: str | None, estimated: int,
            reported: int | None, inferred: int, calibrated: dict[Category, int], waste: int,
            compaction: str | None, used: int) -> None:
        """``append(CallRow(...))`` without the row object: analyze adds one row a call."""
        values = (index, line, timestamp_ns, estimated, reported, inferred, waste, used)
        # The usual row, packed as it is, without a range test a value: every value exactly an int (a
        # bool is an int an array reads back as 1 or 0) or None where a row may lack one, none the
        # sentinel itself, every column still an array, the tokens exactly ints. A value past int64
        # (struct.error) and the rest take the value-by-value path.
        if (self._packed and type(index) is type(estimated) is type(inferred) is type(waste) is type(used) is int
                and (line is None or type(line) is int) and (timestamp_ns is None or type(timestamp_ns) is int)
                and (reported is None or type(reported) is int) and _NONE not in values
                and type(self._cat_values) is array and _INT_ONLY.issuperset(map(type, calibrated.values()))):
            codes = self._codes_of.get(tuple(calibrated))
            if codes is None:
                codes = self._row_codes(calibrated)
            name_codes = self._name_codes
            model_code = _NO_NAME if model is None else name_codes.get(model)
            if model_code is None:
                model_code = self._name_code(model)
            compaction_code = _NO_NAME if compaction is None else name_codes.get(compaction)
            if compaction_code is None:
                compaction_code = self._name_code(compaction)
            try:
                row = _ROW.pack(index, _NONE if line is None else line,
                                _NONE if timestamp_ns is None else timestamp_ns, estimated,
                                _NONE if reported is None else reported, inferred, waste, used,
                                model_code, compaction_code, len(codes))
                tokens = _int64s(len(codes)).pack(*calibrated.values())
            except struct.error:
                pass  # past int64: value by value, below
            else:
                self._pending_rows += row
                self._pending_codes += codes
                self._pending_values += tokens
                self._pending += 1
                if self._pending >= PENDING_ROWS:
                    self._flush()
                return
        self._flush()  # the rows before this one first
        if self._batches:
            self._unspill()  # this row goes to the columns: every row before it too
        self._add_ints(values)
        try:
            self._model.append(self._name_code(model))
        except OverflowError:  # the 128th name
            self._model = array("l", self._model)
            self._model.append(self._name_code(model))
        try:
            self._compaction.append(self._name_code(compaction))
        except OverflowError:
            self._compaction = array("l", self._compaction)
            self._compaction.append(self._name_code(compaction))
        self._add_categories(calibrated)
        try:
            self._cat_ends.append(len(self._cat_codes))
        except OverflowError:
            self._cat_ends = array("q", self._cat_ends)
            self._cat_ends.append(len(self._cat_codes))

    def _row_codes(self, calibrated: dict[Category, int]) -> bytes:
        """The codes of a row's categories, in its order (a category new to the session gets the next code)."""
        for category in calibrated:
            if category not in self._category_codes:
                self._category_codes[category] = len(self._categories)
                self._categories.append(category)
        codes = bytes([self._category_codes[c] for c in calibrated])  # ValueError past 255: not here
        self._codes_of[tuple(calibrated)] = codes
        return codes

    def _flush(self) -> None:
        """The pending rows into the columns, or past SPILL_ROWS of them to the scratch file."""
        if not self._pending:
            return
        if (self._batches or len(self._cat_ends) >= SPILL_ROWS) and self._spill is not False:
            try:
                self._spill_pending()
                return
            except OSError:  # no scratch file (a full disk, no temporary folder): rows stay in memory
                self._unspill()
                self._spill = False
        self._flush_columns()

    def _flush_columns(self) -> None:
        """The pending rows into the columns, a column at a time (each widens as a value needs)."""
        rows = self._pending
        if not rows:
            return
        packed = array("q")
        packed.frombytes(self._pending_rows)
        ints = self._ints
        for column in range(len(ints)):
            _extend(ints, column, packed[column::_ROW_FIELDS])
        names = [self._model, self._compaction]
        _extend(names, 0, packed[8::_ROW_FIELDS])
        _extend(names, 1, packed[9::_ROW_FIELDS])
        self._model, self._compaction = names
        # Each row's pairs end where the previous row's do plus its count (the first after the columns' last).
        ends = array("q")
        counts = packed[10::_ROW_FIELDS]
        ends.frombytes(_int64s(rows).pack(*islice(accumulate(counts, initial=len(self._cat_codes)), 1, None)))
        holder = [self._cat_ends]
        _extend(holder, 0, ends)
        self._cat_ends = holder[0]
        codes = self._cat_codes
        assert isinstance(codes, array)  # codes stay an array: one byte each, whatever the row
        codes.frombytes(self._pending_codes)
        tokens = array("q")
        tokens.frombytes(self._pending_values)
        holder = [self._cat_values]
        _extend(holder, 0, tokens)
        self._cat_values = holder[0]
        self._pending = 0
        self._pending_rows = bytearray()
        self._pending_codes = bytearray()
        self._pending_values = bytearray()

    def _spill_pending(self) -> None:
        """The pending rows to the scratch file as one batch, their bytes as they are packed."""
        from ctxscope._scratch import ScratchFile

        if not isinstance(self._spill, ScratchFile):
            self._spill = ScratchFile()
        rows, packed, codes, tokens = self._pending, self._pending_rows, self._pending_codes, self._pending_values
        offset = self._spill.append(packed + codes + tokens)
        values = array("q")
        values.frombytes(packed)
        used = max(values[7::_ROW_FIELDS])
        if self._spilled_used is None or used > self._spilled_used:
            self._spilled_used = used
        self._batches.append((len(self) - rows, rows, offset, len(packed), len(codes), len(tokens)))
        self._spilled_rows += rows
        self._pending = 0
        self._pending_rows = bytearray()
        self._pending_codes = bytearray()
        self._pending_values = bytearray()

    def _read_batch(self, batch: tuple[int, int, int, int, int, int]) -> tuple[int, bytearray, bytearray, bytearray]:
        """A spilled batch's rows, and its rows', codes' and tokens' bytes."""
        _, rows, offset, packed, codes, tokens = batch
        assert not isinstance(self._spill, bool) and self._spill is not None
        data = self._spill.read(offset, packed + codes + tokens)
        return rows, data[:packed], data[packed:packed + codes], data[packed + codes:]

    def _batch(self, i: int) -> CallRows:
        """Spilled batch ``i`` as rows of their own (the session's names and categories), kept till the next."""
        loaded = self._loaded
        if loaded is not None and loaded[0] == i:
            return loaded[1]
        batch = CallRows()
        batch._names, batch._categories = self._names, self._categories  # the codes are the session's
        batch._pending, batch._pending_rows, batch._pending_codes, batch._pending_values = \
            self._read_batch(self._batches[i])
        batch._flush_columns()
        self._loaded = (i, batch)
        return batch

    def _unspill(self) -> None:
        """Every spilled row back into the columns, in order; the pending rows stay pending, after them."""
        batches, pending = self._batches, (self._pending, self._pending_rows, self._pending_codes,
                                           self._pending_values)
        for batch in batches:
            self._pending, self._pending_rows, self._pending_codes, self._pending_values = self._read_batch(batch)
            self._flush_columns()
        self._pending, self._pending_rows, self._pending_codes, self._pending_values = pending
        self._batches, self._spilled_rows, self._spilled_used, self._loaded = [], 0, None, None
        spill, self._spill = self._spill, None
        if spill:
            spill.close()  # type: ignore[union-attr]

    def _add_ints(self, values: tuple[Any, ...]) -> None:
        """A row's int values one by one: a column widens, or becomes a list, for a value it cannot hold."""
        ints = self._ints
        for column, value in enumerate(values):
            target = ints[column]
            # _push's common case written out (an array column, a value it holds exactly).
            if type(target) is array:
                if value is None:
                    _append(ints, column, _NONE)  # the sentinel needs 64 bits
                    continue
                if type(value) is int and -_INT64_MAX <= value <= _INT64_MAX:
                    try:
                        target.append(value)
                    except OverflowError:  # past 32 bits: the column is 64 bits wide from now on
                        _append(ints, column, value)
                    continue
            _push(ints, column, _NONE if value is None else value, value is None)
        self._packed = all(type(c) is array for c in ints)

    def _add_categories(self, calibrated: dict[Category, int]) -> None:
        """A row's (category, tokens) pairs one by one: a new category gets its code, a column widens."""
        codes, values = self._cat_codes, self._cat_values
        for category, tokens in calibrated.items():
            code = self._category_codes.get(category)
            if code is None:
                code = self._category_codes[category] = len(self._categories)
                self._categories.append(category)
            codes.append(code)
            if isinstance(values, array) and (type(tokens) is not int or not -_INT64_MAX <= tokens <= _INT64_MAX):
                values = self._cat_values = list(values)
            try:
                values.append(tokens)
            except OverflowError:  # past 32 bits
                values = self._cat_values = array("q", values)
                values.append(tokens)

    def __len__(self) -> int:
        return len(self._cat_ends) + self._spilled_rows + self._pending

    @overload
    def __getitem__(self, i: int) -> CallRow: ...

    @overload
    def __getitem__(self, i: slice) -> list[CallRow]: ...

    def __getitem__(self, i: int | slice) -> CallRow | list[CallRow]:
        self._flush()
        if isinstance(i, slice):
            return [self._row(k) for k in range(*i.indices(len(self)))]
        n = len(self)
        k = i + n if i < 0 else i
        if not 0 <= k < n:
            raise IndexError("call row index out of range")
        return self._row(k)

    def __iter__(self) -> Iterator[CallRow]:
        self._flush()
        return (self._row(k) for k in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (CallRows, list)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    # Mutable, like the list it stands for: unhashable.
    __hash__ = None  # type: ignore[assignment]

    def __copy__(self) -> CallRows:
        # Rows of its own, as a list's copy: the default copy would share the columns and the pending
        # bytes, and a row added to one would reach the other's bytes but not its count.
        return copy.deepcopy(self)

    def __repr__(self) -> str:
        return f"CallRows({len(self)} rows)"

    # -- columns without building rows ----------------------------------------

    def field_tuples(self, start: int, stop: int, shown: bool = False) -> Iterator[tuple[Any, ...]]:
        """Rows ``start`` to ``stop`` (a slice's bounds) as tuples of :class:`CallRow`'s fields in its order.

        What ``rows[start:stop]`` holds, without a CallRow each: every column sliced once (in C), the
        JSON report's growth table reads them (built row by row, ~10,000 instructions a row).
        ``shown``: each row's ``calibrated`` as the report shows it instead, ``{category value: tokens}``
        in report order (:data:`~ctxscope.schema.CATEGORIES`), the categories without tokens left out.
        """
        self._flush()
        start, stop, _ = slice(start, stop).indices(len(self))
        stop = max(start, stop)  # no rows when stop comes first, as in a slice
        columns = len(self._cat_ends)
        if stop <= columns:
            return self._column_tuples(start, stop, shown)
        # The columns' part, then each spilled batch's (its rows of their own, read one at a time).
        parts = [self._column_tuples(start, columns, shown)] if start < columns else []
        batches = self._batches
        for i in range(_batch_of(batches, max(start, columns)), len(batches)):
            first, rows = batches[i][:2]
            if first >= stop:
                break
            parts.append(self._batch(i).field_tuples(max(start, first) - first, min(stop, first + rows) - first,
                                                     shown))
        return chain.from_iterable(parts)

    def _column_tuples(self, start: int, stop: int, shown: bool) -> Iterator[tuple[Any, ...]]:
        """field_tuples of rows the columns hold (``0 <= start <= stop <= len(self._cat_ends)``)."""
        ints = self._ints
        index, line, timestamp_ns, estimated, reported, inferred, waste, used = (c[start:stop] for c in ints)
        # _row's _value, a column at a time: the sentinel is None while the column is an array.
        line, timestamp_ns, reported = (_values(ints[i], stored) for i, stored in
                                        ((1, line), (2, timestamp_ns), (4, reported)))
        names = self._names
        model = [None if code == _NO_NAME else names[code] for code in self._model[start:stop]]
        compaction = [None if code == _NO_NAME else names[code] for code in self._compaction[start:stop]]
        calibrated = self._shown(start, stop) if shown else self._calibrated(start, stop)
        return zip(index, line, timestamp_ns, model, estimated, reported, inferred, calibrated, waste, compaction,
                   used)

    def _calibrated(self, start: int, stop: int) -> list[dict[Category, int]]:
        categories, codes, values, ends = self._categories, self._cat_codes, self._cat_values, self._cat_ends
        calibrated = []
        first = ends[start - 1] if start else 0
        for end in ends[start:stop]:
            calibrated.append({categories[code]: tokens for code, tokens in zip(codes[first:end], values[first:end])})
            first = end
        return calibrated

    def _shown(self, start: int, stop: int) -> list[dict[str, int]]:
        # A session's rows share a few category layouts (which categories, in which order): each is
        # worked out once, and a row in report order without a 0 (analyze leaves 0s out) is its
        # names zipped with its tokens.
        codes, values, ends = self._cat_codes, self._cat_values, self._cat_ends
        plain = type(values) is array  # ints only: 0 is the one falsy value
        layouts: dict[bytes, tuple[tuple[str, ...], tuple[int, ...] | None]] = {}
        shown = []
        first = ends[start - 1] if start else 0
        for end in ends[start:stop]:
            key = codes[first:end].tobytes()  # type: ignore[attr-defined]
            layout = layouts.get(key)
            if layout is None:
                layout = layouts[key] = self._layout(key)
            names, order = layout
            tokens = values[first:end]
            if order is None and plain and 0 not in tokens:
                shown.append(dict(zip(names, tokens)))
            else:
                shown.append({name: value for name, i in zip(names, order or range(len(names)))
                              if (value := tokens[i])})
            first = end
        return shown

    def _layout(self, codes: bytes) -> tuple[tuple[str, ...], tuple[int, ...] | None]:
        """A row's categories (their codes) in report order: their names, and their places in the row
        (None: the row's own order already)."""
        row = [self._categories[code] for code in codes]
        ranked = sorted((_REPORT_ORDER[category], place) for place, category in enumerate(row)
                        if category in _REPORT_ORDER)
        names = tuple(CATEGORIES[rank].value for rank, _ in ranked)
        order = tuple(place for _, place in ranked)
        return names, None if order == tuple(range(len(row))) else order

    @property
    def int64(self) -> bool:
        """Whether every integer holds in a signed 64-bit int (every column still an array)."""
        self._flush()
        return all(isinstance(c, array) for c in (*self._ints, self._cat_values))

    def max_used(self) -> int:
        """The largest ``used`` of the rows, 0 without rows (the session's peak)."""
        self._flush()
        used = max(self._ints[7], default=None)
        if self._spilled_used is not None and (used is None or self._spilled_used > used):
            used = self._spilled_used
        return 0 if used is None else used

    # -- internals ------------------------------------------------------------

    def _name_code(self, name: str | None) -> int:
        if name is None:
            return _NO_NAME
        code = self._name_codes.get(name)
        if code is None:
            code = self._name_codes[name] = len(self._names)
            self._names.append(name)
        return code

    def _row(self, k: int) -> CallRow:
        if k >= len(self._cat_ends):  # a spilled row
            i = _batch_of(self._batches, k)
            return self._batch(i)[k - self._batches[i][0]]
        index, line, timestamp_ns, estimated, reported, inferred, waste, used = (c[k] for c in self._ints)
        start = self._cat_ends[k - 1] if k else 0
        categories = self._categories
        calibrated = {categories[code]: tokens for code, tokens in
                      zip(self._cat_codes[start:self._cat_ends[k]], self._cat_values[start:self._cat_ends[k]])}
        model, compaction = self._model[k], self._compaction[k]
        return CallRow(index, _value(self._ints[1], line), _value(self._ints[2], timestamp_ns),
                       None if model == _NO_NAME else self._names[model], estimated,
                       _value(self._ints[4], reported), inferred, calibrated, waste,
                       None if compaction == _NO_NAME else self._names[compaction], used)


def _batch_of(batches: list[tuple[int, int, int, int, int, int]], k: int) -> int:
    """Which of the spilled ``batches`` (CallRows._batches, in order) holds row ``k``, one of theirs.

    A bisection written out: ``bisect`` would load its C module (a shared library) for one search.
    """
    low, high = 0, len(batches)
    while high - low > 1:
        middle = (low + high) // 2
        if batches[middle][0] <= k:
            low = middle
        else:
            high = middle
    return low


@lru_cache(maxsize=None)
def _int64s(count: int) -> struct.Struct:
    """``count`` native int64s (a row's category tokens; a batch's ends)."""
    return struct.Struct(f"{count}q")


def _extend(columns: list[Column], column: int, values: array) -> None:
    """Append int64 ``values`` (an ``array('q')``) to an array column, widening it to 64 bits if one needs it."""
    target = columns[column]
    if target.itemsize == _ROW_ITEMSIZE:  # type: ignore[attr-defined]  # 'q' (or 'l'): the bytes as they are
        target.frombytes(values.tobytes())  # type: ignore[attr-defined]
        return
    try:
        target.frombytes(struct.pack(f"{len(values)}{target.typecode}", *values))  # type: ignore[attr-defined]
    except struct.error:  # a value past the column's width: 64 bits wide from now on
        target = columns[column] = array("q", target)
        target.frombytes(values.tobytes())


def _append(ints: list[Column], column: int, value: int) -> None:
    """Append an int64 value to an array column, widening a 32-bit one first."""
    target = ints[column]
    if target.typecode != "q":  # type: ignore[attr-defined]
        target = ints[column] = array("q", target)
    target.append(value)


def _push(ints: list[Column], column: int, value: Any, none: bool) -> None:
    """Append to an int column; a value an array cannot hold exactly turns the column into a list."""
    target = ints[column]
    if isinstance(target, array):
        # The sentinel itself, stored for a real value, would read back as None.
        # bool is an int an array would read back as 1 or 0: a list keeps it as it came.
        if not none and (type(value) is not int or not -_INT64_MAX <= value <= _INT64_MAX):
            target = ints[column] = [None if v == _NONE else v for v in target]
        else:
            target.append(value)
            return
    target.append(None if none else value)


def _values(column: Column, stored: Column) -> Column:
    """:func:`_value` of each of ``stored`` (a slice of ``column``)."""
    if isinstance(column, array) and _NONE in stored:
        return [None if v == _NONE else v for v in stored]
    return stored


def _value(column: Column, stored: Any) -> Any:
    """A stored int back as the row's value: the sentinel is None while the column is an array."""
    return None if isinstance(column, array) and stored == _NONE else stored
