"""CallRows: analyze's per-call rows packed into arrays read back exactly as they were appended."""

from __future__ import annotations

import pytest

from ctxscope.report.call_rows import CallRow, CallRows
from ctxscope.schema import Category


def _row(index: int, **over) -> CallRow:
    values = dict(index=index, line=10 + index, timestamp_ns=1_700_000_000_000_000_000 + index, model="m1",
                  estimated=100 + index, reported=None, inferred=7, calibrated={Category.PROMPTS: 60 + index,
                                                                                Category.RESULTS: 40},
                  waste=3, compaction=None, used=100 + index)
    values.update(over)
    return CallRow(**values)


def test_rows_read_back_field_for_field_with_none_and_the_category_order_kept():
    """None in line/reported/model/compaction and each row's own category order survive the packing."""
    given = [_row(0), _row(1, line=None, reported=250, model=None, compaction="manual",
                             calibrated={Category.RESULTS: 5, Category.UNATTRIBUTED: 9, Category.PROMPTS: 1}),
             _row(2, calibrated={}, used=0, estimated=0)]
    rows = CallRows(given)
    assert len(rows) == 3 and rows == given
    assert rows[1].line is None and rows[1].reported == 250 and rows[1].model is None
    assert rows[1].compaction == "manual" and rows[-1].calibrated == {}
    assert list(rows[1].calibrated) == [Category.RESULTS, Category.UNATTRIBUTED, Category.PROMPTS]
    assert [r.index for r in rows[1:]] == [1, 2]
    assert rows.max_used() == 101 and rows.int64
    with pytest.raises(IndexError):
        rows[3]


def test_a_value_no_int64_holds_is_kept_exact_and_said():
    """2**70, the int64 minimum (the None mark) and a bool come back as given; int64 says False."""
    rows = CallRows([_row(0)])
    rows.append(_row(1, reported=2 ** 70, line=-(2 ** 63), waste=True,
                     calibrated={Category.PROMPTS: 2 ** 64}))
    rows.append(_row(2))
    assert rows[1].reported == 2 ** 70 and rows[1].line == -(2 ** 63)
    assert rows[1].waste is True and rows[1].calibrated == {Category.PROMPTS: 2 ** 64}
    assert rows[0].reported is None and rows[2].reported is None and rows[2].line == 12
    assert not rows.int64
    assert CallRows().max_used() == 0 and not CallRows()


def test_columns_widen_past_32_bits_and_past_127_names_without_losing_a_value():
    """2**31 (one past int32) in a count, a line and a category, and 130 model names: all read back, int64 holds."""
    given = [_row(0), _row(1, estimated=2 ** 31, line=2 ** 31 + 5, calibrated={Category.PROMPTS: 2 ** 31},
                          used=-(2 ** 31) - 1)]
    given += [_row(k, model=f"m{k}", compaction="auto" if k % 2 else None) for k in range(2, 132)]
    given.append(_row(132, reported=-(2 ** 63) + 1, waste=2 ** 62))
    rows = CallRows(given)
    assert rows == given
    assert rows[1].estimated == 2 ** 31 and rows[1].line == 2 ** 31 + 5 and rows[1].used == -(2 ** 31) - 1
    assert rows[1].calibrated == {Category.PROMPTS: 2 ** 31}
    assert [r.model for r in rows[129:132]] == ["m129", "m130", "m131"]
    assert rows[132].reported == -(2 ** 63) + 1 and rows[0].reported is None and rows.int64
    assert rows.max_used() == 132 + 100


def _fields(row: CallRow) -> tuple:
    return (row.index, row.line, row.timestamp_ns, row.model, row.estimated, row.reported, row.inferred,
            row.calibrated, row.waste, row.compaction, row.used)


def test_field_tuples_are_the_rows_fields_in_order_for_any_bounds():
    """field_tuples(start, stop) gives what rows[start:stop] holds, None marks and widened columns included."""
    given = [_row(0), _row(1, line=None, reported=250, model=None, compaction="manual",
                             calibrated={Category.RESULTS: 5, Category.PROMPTS: 1}),
             _row(2, calibrated={}, used=0), _row(3, reported=2 ** 70, line=-(2 ** 63)), _row(4)]
    rows = CallRows(given)
    assert list(rows.field_tuples(1, 3)) == [
        (1, None, 1_700_000_000_000_000_001, None, 101, 250, 7, {Category.RESULTS: 5, Category.PROMPTS: 1},
         3, "manual", 101),
        (2, 12, 1_700_000_000_000_000_002, "m1", 102, None, 7, {}, 3, None, 0)]
    for start, stop in ((0, 5), (0, 1024), (3, 5), (4, 4), (-2, 5)):
        assert list(rows.field_tuples(start, stop)) == [_fields(r) for r in given[start:stop]]
    assert list(rows.field_tuples(3, 4))[0][1:6:4] == (-(2 ** 63), 2 ** 70)  # list columns: values as given
    assert list(CallRows().field_tuples(0, 10)) == []
    packed = CallRows(given[:3])  # line and reported still arrays, None as their mark
    assert packed.int64 and [t[1:6:4] for t in packed.field_tuples(0, 3)] == [(10, None), (None, 250), (12, None)]


def test_a_row_that_fails_part_way_in_c_is_added_whole_value_by_value():
    """A category new to the session after a known one, and a token count past 32 bits after a small one:
    each row reads back exactly, and the rows after it too (nothing half-added is left behind)."""
    given = [_row(0),
             _row(1, calibrated={Category.PROMPTS: 5, Category.TOOLS: 6}),  # TOOLS unseen: codes part-way
             _row(2, calibrated={Category.PROMPTS: 7, Category.RESULTS: 2 ** 31}),  # tokens part-way
             _row(3, line=None, reported=2 ** 40)]  # None and a 64-bit value in 32-bit columns
    rows = CallRows(given)
    assert rows == given
    assert rows[1].calibrated == {Category.PROMPTS: 5, Category.TOOLS: 6}
    assert rows[2].calibrated == {Category.PROMPTS: 7, Category.RESULTS: 2 ** 31}
    assert rows[3].line is None and rows[3].reported == 2 ** 40 and rows.int64
    assert [r.index for r in rows] == [0, 1, 2, 3]


def test_rows_added_in_batches_read_back_across_the_batches_edges():
    """2,500 rows (more than two batches of PENDING_ROWS): a 32-bit overflow, a None line and a bool between
    batches and inside one; every row reads back as given, the peak is the largest used."""
    from ctxscope.report.call_rows import PENDING_ROWS

    given = [_row(k) for k in range(2500)]
    given[PENDING_ROWS - 1] = _row(PENDING_ROWS - 1, estimated=2 ** 31)  # the last row of the first batch
    given[PENDING_ROWS + 7] = _row(PENDING_ROWS + 7, line=None, used=5_000)  # the second batch
    given[2 * PENDING_ROWS + 3] = _row(2 * PENDING_ROWS + 3, waste=True)  # value by value: flushes first
    rows = CallRows()
    for k, row in enumerate(given):
        rows.append(row)
        if k == PENDING_ROWS + 100:
            assert len(rows) == PENDING_ROWS + 101 and rows[-1] == row  # a read in the middle of a batch
    assert len(rows) == 2500 and rows == given
    assert rows[PENDING_ROWS - 1].estimated == 2 ** 31 and rows[PENDING_ROWS + 7].line is None
    assert rows[2 * PENDING_ROWS + 3].waste is True and rows.max_used() == 5_000
    assert not rows.int64  # the bool: its column is a list


def test_shown_categories_are_in_report_order_by_value_without_zeros():
    """{results 5, unattributed 0, prompts 1} shows prompts then results; a row in report order as it is; {} as {}."""
    rows = CallRows([_row(0, calibrated={Category.RESULTS: 5, Category.UNATTRIBUTED: 0, Category.PROMPTS: 1}),
                     _row(1, calibrated={Category.SYSTEM: 3, Category.TOOLS: 4}),
                     _row(2, calibrated={}),
                     _row(3, calibrated={Category.SYSTEM: 0, Category.TOOLS: 4})])
    shown = [fields[7] for fields in rows.field_tuples(0, 4, shown=True)]
    assert shown == [{"prompts": 1, "results": 5}, {"system": 3, "tools": 4}, {}, {"tools": 4}]
    assert list(shown[0]) == ["prompts", "results"]


def test_a_copy_is_rows_of_its_own_as_a_list_s_copy_is():
    """copy.copy of 3 rows (2 still pending, 1 in the columns): a row added to either afterwards is that
    one's alone; each reads back its own 4 rows (a copy sharing the pending bytes could not be read)."""
    import copy

    rows = CallRows([_row(0, waste=True), _row(1), _row(2)])  # the bool row: value by value, then 2 packed
    copied = copy.copy(rows)
    rows.append(_row(3))
    copied.append(_row(30, model="m2"))
    assert len(rows) == 4 and [r.index for r in rows] == [0, 1, 2, 3]
    assert len(copied) == 4 and [r.index for r in copied] == [0, 1, 2, 30] and copied[3].model == "m2"
    assert rows[3].model == "m1" and copied[0].waste is True


def _spilling(monkeypatch) -> None:
    """Batches of 2 rows; past 3 rows in the columns, the next batches go to the scratch file."""
    from ctxscope.report import call_rows

    monkeypatch.setattr(call_rows, "PENDING_ROWS", 2)
    monkeypatch.setattr(call_rows, "SPILL_ROWS", 3)


def test_rows_past_spill_rows_go_to_the_scratch_file_a_batch_at_a_time_and_read_back(monkeypatch):
    """9 rows: 0-3 in the columns (two batches, the columns still under 3 before the second), 4-5, 6-7 and
    8 (flushed by the read) to the file; a batch is 88 bytes a row (11 int64s), 2 codes and 2 tokens of
    8 bytes a row: 212 bytes for two rows. Reads across the columns' and the batches' edges are the rows."""
    _spilling(monkeypatch)
    given = [_row(k) for k in range(9)]
    given[6] = _row(6, used=9_000)  # the largest used is in the file
    rows = CallRows(given)
    assert len(rows) == 9 and rows == given
    assert len(rows._cat_ends) == 4
    assert rows._batches == [(4, 2, 0, 176, 4, 32), (6, 2, 212, 176, 4, 32), (8, 1, 424, 88, 2, 16)]
    assert rows.max_used() == 9_000 and rows.int64
    assert [fields[0] for fields in rows.field_tuples(3, 7)] == [3, 4, 5, 6]
    assert [fields[7] for fields in rows.field_tuples(7, 9, shown=True)] == [{"prompts": 67, "results": 40},
                                                                             {"prompts": 68, "results": 40}]
    assert rows[-1].index == 8 and rows[5] == given[5] and rows[2:6] == given[2:6]


def test_a_row_only_the_columns_take_brings_the_spilled_rows_back_first(monkeypatch):
    """A bool after 9 rows, 5 of them in the file: every row back in the columns, in order, the file gone."""
    _spilling(monkeypatch)
    given = [_row(k) for k in range(9)] + [_row(9, waste=True)]
    rows = CallRows(given)
    assert rows._batches == [] and rows._spill is None and len(rows._cat_ends) == 10
    assert rows == given and rows[9].waste is True and not rows.int64


def test_a_scratch_file_that_fails_leaves_the_rows_in_memory(monkeypatch):
    """The file takes the first batch (rows 4-5) and refuses the second: rows 4-7 end in the columns, in
    order, and no later batch tries the file again."""
    from ctxscope import _scratch

    _spilling(monkeypatch)
    append = _scratch.ScratchFile.append
    calls = []

    def fail_second(self, data):
        calls.append(len(data))
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        return append(self, data)

    monkeypatch.setattr(_scratch.ScratchFile, "append", fail_second)
    given = [_row(k) for k in range(11)]
    rows = CallRows(given)
    assert rows == given and rows._spill is False and rows._batches == [] and len(rows._cat_ends) == 11
    assert calls == [212, 212]


def test_a_copy_of_spilled_rows_has_a_file_of_its_own(monkeypatch):
    """copy.copy of 9 rows, 5 in the file: each side then adds its own row and reads back its own 10."""
    import copy

    _spilling(monkeypatch)
    rows = CallRows([_row(k) for k in range(9)])
    copied = copy.copy(rows)
    assert copied._spill is not rows._spill
    rows.append(_row(9))
    copied.append(_row(90))
    del rows._spill  # the original's file closed: the copy reads its own
    assert [r.index for r in copied] == [*range(9), 90]
