"""Properties of the ledger over random sequences of requests (hypothesis).

Each request is a random list of items drawn from 100 ids x 3 contents, either
fresh objects or the previous request's objects with more appended; some
observations declare a compaction. The checks compare the ledger's running,
incremental totals with a from-scratch recount of the same list.
"""

from __future__ import annotations

from collections import Counter as Multiset

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxscope.core.ledger import SessionLedger
from ctxscope.schema import CATEGORIES, MAX_CHANGES_PER_SPAN, Category, ChangeType, CompactionTrigger, Item
from ctxscope.core.tokens import CharsCounter

ITEM_CATEGORIES = [c for c in CATEGORIES if c is not Category.UNATTRIBUTED]

keys = st.tuples(st.integers(0, 99), st.integers(0, 2))
steps = st.tuples(
    st.sampled_from(["fresh", "extend"]),
    st.lists(keys, max_size=90),
    st.sampled_from([None, None, None, CompactionTrigger.AUTO, CompactionTrigger.MANUAL]),
    st.integers(0, 10**6),  # the reported input, scaled below to the estimate's range
)


def make(key: tuple[int, int], seed: int) -> Item:
    ident, content = key
    size = (ident * 31 + content * 17 + seed) % 121  # 0..120 chars: 0..30 tokens
    category = ITEM_CATEGORIES[ident % len(ITEM_CATEGORIES)]
    return Item(id=f"i{ident}", category=category, part=f"{category.value}/p{ident % 7}",
                chars=size, text="x" * size, digest=f"d{content}")


def expected_change_count(old: list[Item], new: list[Item]) -> int:
    """Removals + additions + replacements, derived from multisets independently of the ledger."""
    old_keys = Multiset((i.id, i.digest) for i in old)
    new_keys = Multiset((i.id, i.digest) for i in new)
    gone, came = old_keys - new_keys, new_keys - old_keys
    gone_ids = Multiset()
    came_ids = Multiset()
    for (ident, _), n in gone.items():
        gone_ids[ident] += n
    for (ident, _), n in came.items():
        came_ids[ident] += n
    paired = sum(min(n, came_ids[ident]) for ident, n in gone_ids.items())
    return sum(gone.values()) + sum(came.values()) - paired


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 1000), sequence=st.lists(steps, min_size=1, max_size=8))
def test_ledger_invariants(seed: int, sequence: list) -> None:
    """Sums match a recount, delta signs hold, changes are capped and accounted, calibration is exact."""
    ledger = SessionLedger("prop", counter=CharsCounter())
    previous: list[Item] = []
    previous_estimate = 0
    for kind, drawn, declared, reported_seed in sequence:
        fresh = [make(k, seed) for k in drawn]
        items = (previous + fresh[:5]) if kind == "extend" else fresh
        snap = ledger.observe(items, model="m", compaction=declared)
        ann = snap.annotation

        # Categories sum to estimated_tokens and equal a from-scratch recount.
        recount: dict[Category, int] = {}
        for item in items:
            recount[item.category] = recount.get(item.category, 0) + -(-item.chars // 4)
        assert ann.categories == recount
        assert sum(ann.categories.values()) == ann.estimated_tokens
        assert sum(snap.parts.values()) == ann.estimated_tokens
        assert all(item.tokens == -(-item.chars // 4) for item in items)

        # Change signs and types.
        for change in ann.changes:
            if change.change_type is ChangeType.REMOVAL:
                assert change.delta_tokens == -change.estimated_tokens <= 0
            elif change.change_type is ChangeType.ADDITION:
                assert change.delta_tokens == change.estimated_tokens >= 0
            elif change.change_type is ChangeType.BASELINE:
                assert ann.baseline and change.delta_tokens == change.estimated_tokens >= 0
            assert (change.change_type is ChangeType.BASELINE) == ann.baseline
        # At most 64, largest first, and the omitted ones make up the rest.
        assert len(ann.changes) <= MAX_CHANGES_PER_SPAN
        deltas = [abs(c.delta_tokens) for c in ann.changes]
        assert deltas == sorted(deltas, reverse=True)
        expected = len(items) if ann.baseline else expected_change_count(previous, items)
        assert len(ann.changes) + ann.omitted_changes == expected
        if not ann.baseline and ann.omitted_changes == 0:
            assert sum(c.delta_tokens for c in ann.changes) == ann.estimated_tokens - previous_estimate
        if declared is not None:
            assert snap.compaction is not None and snap.compaction.declared and ann.baseline

        # Calibration: exact sums, never negative.
        reported = reported_seed % (2 * ann.estimated_tokens + 10)
        ledger.report(snap, reported)
        calibrated = snap.calibrated()
        assert sum(calibrated.values()) == reported
        assert min(calibrated.values()) >= 0
        apportioned = snap.apportioned()
        assert sum(apportioned.values()) == reported
        assert min(apportioned.values(), default=0) >= 0

        previous, previous_estimate = items, ann.estimated_tokens
