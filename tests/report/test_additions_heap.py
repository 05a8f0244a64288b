"""analyze's heap of a session's largest additions, full, and a call's changes largest first (values by hand)."""

from __future__ import annotations

from types import SimpleNamespace

from ctxscope.report.analysis import ADDITIONS_KEPT, SessionResult, _keep_additions
from ctxscope.schema import Category, Change, ChangeType


def _change(delta: int, change_type: ChangeType = ChangeType.ADDITION, name: str = "x") -> Change:
    return Change(name, Category.RESULTS, abs(delta), delta, change_type)


def test_a_full_heap_takes_a_call_s_larger_additions_past_a_larger_removal():
    """20 additions of 10 tokens fill it; the next call's changes, largest first: a removal of 500 (not an
    addition, no stop), +30 and a replacement growing by 12 (in, the two last 10s out), +10 (a tie, the later
    call: out), +5 (out)."""
    result = SessionResult("s", "p", "claude-code", "anthropic")
    _keep_additions(result, SimpleNamespace(index=0, line=1),
                    [_change(10, name=f"first{k}") for k in range(ADDITIONS_KEPT)])
    assert [a.tokens for a in result.largest_additions] == [10] * ADDITIONS_KEPT
    _keep_additions(result, SimpleNamespace(index=1, line=2),
                    [_change(-500, ChangeType.REMOVAL, "gone"), _change(30, name="big"),
                     _change(12, ChangeType.REPLACEMENT, "grown"), _change(10, name="tie"), _change(5, name="small")])
    kept = result.largest_additions
    assert [(a.tokens, a.item, a.call) for a in kept[:3]] == [(30, "big", 1), (12, "grown", 1), (10, "first0", 0)]
    assert len(kept) == ADDITIONS_KEPT and [a.tokens for a in kept[2:]] == [10] * (ADDITIONS_KEPT - 2)
    assert {a.item for a in kept}.isdisjoint({"gone", "tie", "small"})
