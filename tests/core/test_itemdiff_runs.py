"""itemdiff.ItemRun: a growing context handed over in O(1), and diffs that start where two runs part."""

from __future__ import annotations

from ctxscope.core.diff import ItemRun, diff_items
from ctxscope.schema import Category, Item


def item(name: str, digest: str = "d") -> Item:
    return Item(id=name, category=Category.PROMPTS, part="prompts/text", chars=1, digest=digest, tokens=1)


def test_a_run_is_a_sequence_that_never_changes():
    """A run of [a, b] with tail (p,) reads a, b, p, and stays so after its list grows."""
    a, b, c, p = item("a"), item("b"), item("c"), item("p")
    base = [a, b]
    run = ItemRun(base).with_tail(p)
    base.append(c)
    assert list(run) == [a, b, p] and len(run) == 3
    assert run[0] is a and run[-1] is p and run[2] is p
    assert run[1:] == [b, p] and run[:2] == [a, b]
    assert run == [a, b, p]


def test_diff_of_two_runs_equals_the_diff_of_the_lists():
    """[a, b] + (p, x) then [a, b, c] + (p2,): p and x removed... worked out by hand, as the full diff."""
    a, b, c = item("a"), item("b"), item("c")
    p, p2, x = item("p", "1"), item("p", "2"), item("x")
    base = [a, b]
    old = ItemRun(base).with_tail(p, x)
    base.append(c)
    new = ItemRun(base).with_tail(p2)
    fast = diff_items(old, new)
    full = diff_items(list(old), list(new))
    assert fast.added == full.added == [c]
    assert fast.replaced == full.replaced == [(p, p2)]
    assert fast.removed == full.removed == [x]


def test_items_a_run_grew_by_that_share_an_id_with_the_old_tail_take_the_full_diff():
    """[a] + (p,) then [a, p2, c] + (q,): the grown p2 replaces the old tail's p, as in the lists' diff."""
    a, c = item("a"), item("c")
    p, p2, q = item("p", "1"), item("p", "2"), item("q")
    base = [a]
    old = ItemRun(base).with_tail(p)
    base.extend([p2, c])
    new = ItemRun(base).with_tail(q)
    fast = diff_items(old, new)
    assert fast.replaced == [(p, p2)]
    assert fast.added == [c, q] and fast.removed == []


def test_a_run_that_only_grew_lists_the_new_items_first_then_the_tails_diff():
    """[a] + (p, x) then [a, b, c] + (p,): b and c added, p unchanged, x removed, as in the lists' diff."""
    a, b, c, x = item("a"), item("b"), item("c"), item("x")
    p = item("p")
    base = [a]
    old = ItemRun(base).with_tail(p, x)
    base.extend([b, c])
    new = ItemRun(base).with_tail(p)
    fast = diff_items(old, new)
    assert fast.added == [b, c] and fast.removed == [x] and fast.replaced == []
    assert fast == diff_items(list(old), list(new))


def test_short_and_long_scans_find_the_same_first_difference():
    """Shared prefix and suffix of 3 (short loop) and of 20 (C scan) with a different item in the middle:
    the diff is that one replacement, and the items around it are taken as shared, from both ends."""
    from ctxscope.core.diff import shared_prefix

    for shared in (3, 20):
        head = [item(f"h{k}") for k in range(shared)]
        tail = [item(f"t{k}") for k in range(shared)]
        old_mid, new_mid = item("m", "1"), item("m", "2")
        old, new = [*head, old_mid, *tail], [*head, new_mid, *tail]
        assert shared_prefix(old, new) == shared
        diff = diff_items(old, new)
        assert diff.replaced == [(old_mid, new_mid)] and not diff.added and not diff.removed
        grown = diff_items(old, [*head, old_mid, item("n"), *tail])  # one added between the shared ends
        assert [i.id for i in grown.added] == ["n"] and not grown.removed and not grown.replaced
