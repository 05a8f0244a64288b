"""Waste (SPEC section 8): disjoint kinds worked out by hand, the plan, and the incremental tracker."""

from __future__ import annotations

import random

import pytest

from ctxscope.schema import Category, Item, WasteKind
from ctxscope.core.waste import Report, WasteOptions, WasteTracker, analyze, waste_of


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


def _history_step(rng: random.Random, step: int, context: list[Item]) -> list[Item]:
    """One call's context: 1-3 items appended (results with and without a reference, tool calls,
    repeated texts), or a rewind, or a compaction that keeps the tools and the newer half."""
    action = rng.random()
    if action < 0.12 and context:
        return context[: rng.randrange(len(context))]
    if action < 0.18:
        return [tool("t", 900)] + [i for i in context[len(context) // 2:] if i.category is not Category.TOOLS]
    added: list[Item] = []
    for n in range(rng.randint(1, 3)):
        kind = rng.random()
        ref = rng.choice(["A", "B", "C", None])
        if kind < 0.55:
            body = rng.choice("xyzw")  # one body, one size ("w" is an empty result): a digest names its content
            item = result(ref, body, {"x": 100, "y": 450, "z": 900, "w": 0}[body], step * 10 + n)
            item.label = rng.choice(["Read", "Bash"])  # names a body-keyed group (its newest result)
        elif kind < 0.8:
            item = Item(id=f"c{step}.{n}", category=Category.ASSISTANT, part="assistant/tool_call", chars=0,
                        reference=ref, digest=f"call{ref}{rng.randrange(2)}", tokens=rng.choice([5, 30]))
        else:
            body = rng.choice("pq")
            item = Item(id=f"e{step}.{n}", category=Category.ENVIRONMENT, part="environment", chars=0,
                        digest=body, tokens={"p": 20, "q": 60}[body])
        added.append(item)
    return context + added


def test_tracker_over_random_histories_against_each_context_from_scratch():
    """Random histories (several results a call, rewinds, compactions, body-keyed and empty results):

    after every call the totals equal a fresh count of the context; over the session the
    session view's tokens x calls of each kind equal the sum of that kind's waste after each
    call; and a kept result with its own body is aging exactly when its reference was last
    added (a result or a tool call, after the prefix kept by identity) more than ``aging_calls``
    calls before the last call.
    """
    options = WasteOptions(result_cap=300, aging_calls=3)
    kinds = (WasteKind.DUPLICATE, WasteKind.STALE, WasteKind.BLOAT)
    for seed in range(8):
        rng = random.Random(seed)
        tracker = WasteTracker(options)
        context: list[Item] = []
        summed = dict.fromkeys(kinds, 0)
        last_added: dict[str, int] = {}
        for step in range(100):
            old = context
            context = _history_step(rng, step, context)
            if len(context) > len(old) and context[: len(old)] == old:  # appended only: the readers' path
                totals = tracker.observe_added(context[len(old):], context)
            else:
                totals = tracker.observe_items(context)
            fresh = waste_of(context, options)
            assert totals == fresh, (seed, step)
            for kind in kinds:
                summed[kind] += fresh[kind]
            shared = next((n for n, (a, b) in enumerate(zip(old, context)) if a is not b), min(len(old), len(context)))
            for item in context[shared:]:  # what the call added, as the tracker finds it (by identity)
                if item.reference and item.category in (Category.RESULTS, Category.ASSISTANT):
                    last_added[item.reference] = step
        by_kind = dict.fromkeys(kinds, 0)
        for (kind, _), tokens_calls in tracker.token_calls().items():
            by_kind[WasteKind(kind)] += tokens_calls
        assert by_kind == summed, seed
        # Aging, for the kept results whose body no other kept result has (those are duplicates instead).
        kept = {i.reference: i for i in context if i.category is Category.RESULTS and i.reference}
        digests = [i.digest for i in {(i.reference or "body:" + i.digest): i
                                      for i in context if i.category is Category.RESULTS}.values()]
        aging = {f.reference for f in tracker.report(10_000).findings if f.kind == "aging"}
        for ref, item in kept.items():
            if digests.count(item.digest) == 1 and item.tokens > 0:
                assert (ref in aging) == (last_added[ref] <= tracker.calls - 1 - options.aging_calls), (seed, ref)


def test_report_counts_after_a_rewind_and_a_compaction():
    """The report's counts of a group follow removals, not only appends (worked out by hand).

    A: x100, y450, x100, z900 -> dup 1 (the old x, 100), stale 2 (x 100, y 450).
    Rewind the z and read y again in the same call -> x100 y450 x100 y450: dup 2 (y 450 and
    the old x 100), stale 1 (the newer x, 100). Compaction to the newest x and y -> stale 1 (x, 100).
    """
    def counts(report: Report) -> dict[str, tuple[int, int]]:
        return {f.kind: (f.count, f.tokens_saved) for f in report.findings
                if f.reference == "A" and f.kind in ("duplicate", "stale")}

    options = WasteOptions(result_cap=10_000)
    x1, y1, x2, z = result("A", "x", 100, 1), result("A", "y", 450, 1), result("A", "x", 100, 2), result("A", "z", 900)
    tracker = WasteTracker(options)
    tracker.observe_items([x1, y1, x2, z])
    assert counts(tracker.report(10_000)) == {"duplicate": (1, 100), "stale": (2, 550)}
    y2 = result("A", "y", 450, 2)
    tracker.observe_items([x1, y1, x2, y2])
    assert counts(tracker.report(10_000)) == {"duplicate": (2, 550), "stale": (1, 100)}
    tracker.observe_items([x2, y2])
    assert counts(tracker.report(10_000)) == {"stale": (1, 100)}
    # The same contexts from scratch agree.
    assert counts(analyze([x1, y1, x2, y2], 10_000, options)) == {"duplicate": (2, 550), "stale": (1, 100)}
