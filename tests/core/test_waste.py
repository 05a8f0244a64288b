"""Waste (SPEC section 8): disjoint kinds worked out by hand, the plan, and the incremental tracker."""

from __future__ import annotations

import random

import pytest

from ctxscope.schema import Category, Item, WasteKind
from ctxscope.core.waste import WasteOptions, WasteTracker, analyze, waste_of


def result(ref: str | None, body: str, tokens: int, n: int = 0) -> Item:
    return Item(id=f"r{ref}{body}{n}", category=Category.RESULTS, part="results/Read", chars=0,
                reference=ref, digest=body, tokens=tokens)


def tool(name: str, tokens: int) -> Item:
    return Item(id=name, category=Category.TOOLS, part=f"tools/{name}", chars=0, digest=name, tokens=tokens)


def test_duplicate_stale_bloat_are_disjoint():
    """A: x500, y300, x500 -> dup 500 + stale 300 + bloat 100; B/C share body z1000 -> dup 1000 + bloat 600."""
    items = [result("A", "x", 500, 1), result("A", "y", 300), result("A", "x", 500, 2),
             result("B", "z", 1000), result("C", "z", 1000)]
    waste = waste_of(items)
    assert waste == {WasteKind.DUPLICATE: 1500, WasteKind.STALE: 300, WasteKind.BLOAT: 700,
                     WasteKind.TOOL_DEFINITION_OVERAGE: 0}
    assert sum(waste.values()) <= sum(i.tokens for i in items)


def test_same_body_without_reference_is_duplicate():
    """Two results with the same body and no reference: the later copy (250) is duplicate."""
    assert waste_of([result(None, "b", 250, 1), result(None, "b", 250, 2)])[WasteKind.DUPLICATE] == 250


def test_tool_overage_per_request_with_budget_option():
    """Tools of 700 + 500 tokens over a budget of 1,000 are 200 tokens of overage."""
    waste = waste_of([tool("a", 700), tool("b", 500)], WasteOptions(tool_budget=1000))
    assert waste[WasteKind.TOOL_DEFINITION_OVERAGE] == 200


def test_cap_option_changes_bloat():
    """A kept 1,000-token result is 600 bloat at cap 400, 0 at cap 1,000."""
    assert waste_of([result("A", "x", 1000)])[WasteKind.BLOAT] == 600
    assert waste_of([result("A", "x", 1000)], WasteOptions(result_cap=1000))[WasteKind.BLOAT] == 0


def test_findings_and_plan_saving_match_waste():
    """Findings name the reference and count; the plan's saving equals the total waste here (2,500)."""
    items = [result("A", "x", 500, 1), result("A", "y", 300), result("A", "x", 500, 2),
             result("B", "z", 1000), result("C", "z", 1000)]
    report = analyze(items, total=10000)
    found = {(f.kind, f.reference): (f.count, f.tokens_saved) for f in report.findings}
    assert found[("duplicate", "A")] == (1, 500)
    assert found[("stale", "A")] == (1, 300)
    assert found[("duplicate", "B (same body under other references)")] == (1, 1000)
    assert found[("bloat", "B")] == (1, 600)
    assert report.plan.saving == 2500 == report.wasted
    assert report.ratio == 0.25


def test_aging_result_is_flagged_after_many_calls():
    """A 300-token result unused for 3 calls (aging_calls=2): summarising it to 100 tokens saves 200."""
    tracker = WasteTracker(WasteOptions(aging_calls=2))
    items = [result("A", "x", 300)]
    for n in range(4):
        items = items + [Item(id=f"t{n}", category=Category.ASSISTANT, part="assistant/text", chars=0, digest=str(n),
                              tokens=1)]
        tracker.observe_items(items)
    findings = tracker.report(1000).findings
    assert [(f.kind, f.reference, f.tokens_saved) for f in findings] == [("aging", "A", 200)]


def test_invalid_options_raise():
    """A negative cap is a configuration error at construction."""
    with pytest.raises(ValueError):
        WasteOptions(result_cap=-1)


def test_incremental_tracker_equals_batch_over_random_histories():
    """Appending, rewinding and compacting at random: the tracker always agrees with a fresh count."""
    rng = random.Random(7)
    tracker = WasteTracker()
    context: list[Item] = []
    for step in range(300):
        action = rng.random()
        if action < 0.15:
            body = rng.choice("pq")
            context = context + [Item(id=f"e{step}", category=Category.ENVIRONMENT, part="environment", chars=0,
                                      digest=body, tokens={"p": 20, "q": 60}[body])]
        elif action < 0.7 or not context:
            ref = rng.choice(["A", "B", "C", None])
            body = rng.choice("xyz")  # one body, one size: a digest names its content
            context = context + [result(ref, body, {"x": 100, "y": 450, "z": 900}[body], step)]
        elif action < 0.9:
            context = context[: rng.randrange(len(context))]
        else:
            context = [tool("t", 900)] + context[len(context) // 2:]
        assert tracker.observe_items(context) == waste_of(context)


def test_repeated_text_outside_results_is_duplicate():
    """An environment reminder of 50 tokens injected 3 times: 2 copies, 100 tokens duplicate; 'ok' ignored."""
    def text(part: str, body: str, tokens: int, n: int) -> Item:
        return Item(id=f"{part}{n}", category=Category(part.split("/")[0]), part=part, chars=0, digest=body,
                    tokens=tokens)

    items = [text("environment", "rem", 50, n) for n in range(3)] + [text("prompts/text", "ok", 1, n) for n in range(4)]
    report = analyze(items)
    assert report.waste[WasteKind.DUPLICATE] == 100
    assert [(f.reference, f.count, f.tokens_saved) for f in report.findings] == [("identical environment text", 2, 100)]


def test_reads_appended_one_by_one_keep_the_split_of_the_whole_group():
    """Reads of A with bodies x100, y200, x100, z300, y200, appended a call at a time.

    After each append (worked out by hand, newest kept): x | x y: stale 100 | x y x:
    dup 100 (old x), stale 200 (y) | + z: dup 100, stale 200 + 100 (x newest copy) |
    + y: the old y recurs -> dup 100 + 200, stale 100 (x) + 300 (z).
    """
    reads = [result("A", "x", 100, 1), result("A", "y", 200, 1), result("A", "x", 100, 2),
             result("A", "z", 300, 1), result("A", "y", 200, 2)]
    expected = [(0, 0), (0, 100), (100, 200), (100, 300), (300, 400)]
    tracker = WasteTracker(WasteOptions(result_cap=10_000))
    context: list[Item] = []
    for item, (dup, stale) in zip(reads, expected):
        context = [*context, item]
        totals = tracker.observe_added([item], context)
        assert (totals[WasteKind.DUPLICATE], totals[WasteKind.STALE]) == (dup, stale)
        # The same context from scratch gives the same split.
        fresh = waste_of(context, WasteOptions(result_cap=10_000))
        assert (fresh[WasteKind.DUPLICATE], fresh[WasteKind.STALE]) == (dup, stale)
    # A removal (the oldest x) is worked out from the list again: y dup 200, x stale 100, z stale 300.
    totals = tracker.observe_items(context[1:])
    assert (totals[WasteKind.DUPLICATE], totals[WasteKind.STALE]) == (200, 400)
