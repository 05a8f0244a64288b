"""The session ledger: baselines, diffs, compaction, caps and calibration, values by hand.

Counts use chars/4 unless a test says otherwise, so every number below is
ceil(len(text) / 4) per item.
"""

from __future__ import annotations

from typing import Any

import pytest

from ctxscope.core.ledger import NAMED_PARTS_CAP, SessionLedger
from ctxscope.schema import (
    BASIS_BYTES,
    BASIS_CHARS,
    MAX_CHANGES_PER_SPAN,
    MAX_PARTS_PER_SESSION,
    Annotation,
    Category,
    ChangeType,
    CompactionTrigger,
    Coverage,
    Item,
    Stage,
)
from ctxscope.core.tokens import CharsCounter

SYS, TOOLS, PROMPTS, ASSIST, RESULTS, SUMMARIES = (
    Category.SYSTEM, Category.TOOLS, Category.PROMPTS, Category.ASSISTANT, Category.RESULTS,
    Category.SUMMARIES)
_PARTS = {SYS: "system", TOOLS: "tools/Read", PROMPTS: "prompts/text", ASSIST: "assistant/text",
          RESULTS: "results/Read", SUMMARIES: "summaries"}


def item(id_: str, tokens: int, category: Category = PROMPTS, *, digest: str | None = None,
         part: str | None = None, **extra: Any) -> Item:
    """An item of exactly ``tokens`` chars/4 tokens (4 chars each)."""
    text = "abcd" * tokens
    return Item(id=id_, category=category, part=part or _PARTS[category], chars=len(text), text=text,
                digest=digest if digest is not None else f"{id_}:{tokens}", **extra)


def ledger() -> SessionLedger:
    return SessionLedger("s1", counter=CharsCounter())


def kinds(snapshot: Any) -> dict[str, tuple[str, int]]:
    return {c.id: (c.change_type.value, c.delta_tokens) for c in snapshot.annotation.changes}


class CountingCounter(CharsCounter):
    """chars/4 that remembers how many texts it was asked to count."""

    def __init__(self) -> None:
        self.calls = 0

    def count(self, text: str) -> int:
        self.calls += 1
        return super().count(text)


def test_first_observation_is_a_baseline() -> None:
    """First request: baseline, every item a baseline change (delta = its size), categories sum."""
    snap = ledger().observe([item("sys", 10, SYS), item("u1", 3)], model="gpt-4o")
    ann = snap.annotation
    assert snap.first and ann.baseline
    assert ann.stage is Stage.REQUEST_INPUT and ann.basis == BASIS_CHARS
    assert ann.categories == {SYS: 10, PROMPTS: 3}
    assert ann.estimated_tokens == 13
    assert kinds(snap) == {"sys": ("baseline", 10), "u1": ("baseline", 3)}
    assert [c.id for c in ann.changes] == ["sys", "u1"]  # largest first
    assert snap.parts == {"system": 10, "prompts/text": 3}


@pytest.mark.parametrize(("tokenizer", "basis", "tokens"), [
    ("chars", BASIS_CHARS, 1 + 2),  # '日本語' 3 chars -> 1, 'héllo' 5 chars -> 2
    ("bytes", BASIS_BYTES, 3 + 2),  # 9 bytes -> 3, 6 bytes -> 2
])
def test_ledger_bases(tokenizer: str, basis: str, tokens: int) -> None:
    """The ledger counts with the chosen basis and its annotation names it."""
    items = [Item("a", PROMPTS, "prompts/text", 3, text="日本語", digest="a"),
             Item("b", PROMPTS, "prompts/text", 5, text="héllo", digest="b")]
    snap = SessionLedger("s", tokenizer=tokenizer).observe(items, model="gpt-4o")
    assert snap.annotation.basis == basis
    assert snap.annotation.estimated_tokens == tokens


def test_unknown_tokenizer_fails_when_built() -> None:
    """A misspelt tokenizer is a ValueError at construction, not on the first request."""
    with pytest.raises(ValueError, match="unknown tokenizer"):
        SessionLedger("s", tokenizer="tiktokn")


def test_ledger_tiktoken_basis(tiktoken_ready: None) -> None:
    """With tiktoken, 'Hello, world!' (4) and '日本語' (2) under o200k_base give 6."""
    items = [Item("a", PROMPTS, "prompts/text", 13, text="Hello, world!", digest="a"),
             Item("b", PROMPTS, "prompts/text", 3, text="日本語", digest="b")]
    snap = SessionLedger("s").observe(items, model="gpt-4o-mini")
    assert snap.annotation.basis == "tiktoken/o200k_base"
    assert [i.tokens for i in items] == [4, 2] and snap.annotation.estimated_tokens == 6


def test_item_tokens_are_set_and_fixed_tokens_win() -> None:
    """item.tokens is the count; an image with fixed_tokens=1600 counts 1600 whatever its text."""
    text_item = item("u1", 7)
    image = Item(id="img", category=PROMPTS, part="prompts/media/image", chars=0,
                 text="A" * 40000, fixed_tokens=1600, digest="img")
    snap = ledger().observe([text_item, image], model="m")
    assert (text_item.tokens, image.tokens) == (7, 1600)
    assert snap.annotation.categories == {PROMPTS: 1607}
    assert snap.parts == {"prompts/text": 7, "prompts/media/image": 1600}


def test_addition() -> None:
    """One new assistant message of 5 tokens: an addition of +5, no baseline."""
    led = ledger()
    first = [item("sys", 10, SYS), item("u1", 3)]
    led.observe(first, model="m")
    snap = led.observe(first + [item("a1", 5, ASSIST, label="reply")], model="m")
    ann = snap.annotation
    assert not snap.first and not ann.baseline
    assert kinds(snap) == {"a1": ("addition", 5)}
    change = ann.changes[0]
    assert (change.category, change.estimated_tokens, change.chars, change.label) == (ASSIST, 5, 20, "reply")
    assert ann.categories == {SYS: 10, PROMPTS: 3, ASSIST: 5} and ann.estimated_tokens == 18


def test_removal() -> None:
    """Dropping a 3-token message: a removal of -3 and the category leaves the annotation."""
    led = ledger()
    led.observe([item("sys", 10, SYS), item("u1", 3)], model="m")
    snap = led.observe([item("sys", 10, SYS)], model="m")
    assert kinds(snap) == {"u1": ("removal", -3)}
    assert snap.annotation.categories == {SYS: 10}
    assert snap.parts == {"system": 10}


def test_replacement_same_id_new_digest() -> None:
    """A tool result with the same call id and new content (4 -> 9 tokens): replacement +5."""
    led = ledger()
    led.observe([item("sys", 10, SYS), item("call_1", 4, RESULTS, source_call_id="call_1")], model="m")
    snap = led.observe([item("sys", 10, SYS), item("call_1", 9, RESULTS, source_call_id="call_1")],
                       model="m")
    assert kinds(snap) == {"call_1": ("replacement", 5)}
    change = snap.annotation.changes[0]
    assert change.estimated_tokens == 9 and change.source_call_id == "call_1"
    assert snap.annotation.categories == {SYS: 10, RESULTS: 9}


def test_replacement_that_shrinks_is_negative() -> None:
    """A result cleared from 40 to 2 tokens under the same id: replacement of -38."""
    led = ledger()
    led.observe([item("call_1", 40, RESULTS)], model="m")
    snap = led.observe([item("call_1", 2, RESULTS)], model="m")
    assert kinds(snap) == {"call_1": ("replacement", -38)}


def test_content_hash_ids_edit_is_removal_plus_addition() -> None:
    """Without a provider id the id is the content hash: an edited message is a removal and an addition."""
    led = ledger()
    led.observe([item("h(old)", 6)], model="m")
    snap = led.observe([item("h(new)", 8)], model="m")
    assert kinds(snap) == {"h(new)": ("addition", 8), "h(old)": ("removal", -6)}
    assert [c.id for c in snap.annotation.changes] == ["h(new)", "h(old)"]  # |8| before |-6|


def test_duplicate_ids_are_a_multiset() -> None:
    """Two identical 'continue' messages, one dropped: one removal of -2, the other stays."""
    led = ledger()
    led.observe([item("sys", 10, SYS), item("same", 2), item("a", 5, ASSIST), item("same", 2)], model="m")
    snap = led.observe([item("sys", 10, SYS), item("a", 5, ASSIST), item("same", 2)], model="m")
    assert [(c.id, c.change_type, c.delta_tokens) for c in snap.annotation.changes] == [
        ("same", ChangeType.REMOVAL, -2)]
    assert snap.annotation.categories == {SYS: 10, PROMPTS: 2, ASSIST: 5}


def test_moved_items_are_not_changes() -> None:
    """The same items in another order: no change, same totals."""
    led = ledger()
    a, b, c = item("a", 1), item("b", 2), item("c", 3)
    led.observe([a, b, c], model="m")
    snap = led.observe([c, a, b], model="m")
    assert snap.annotation.changes == [] and snap.annotation.omitted_changes == 0
    assert snap.annotation.estimated_tokens == 6


def test_shared_objects_are_not_counted_again() -> None:
    """Appending to a list of the same objects counts only the new item; re-built equal items neither."""
    counter = CountingCounter()
    led = SessionLedger("s", counter=counter)
    items = [item(f"m{i}", 2) for i in range(100)]
    led.observe(items, model="m")
    assert counter.calls == 100
    led.observe(items + [item("new", 3)], model="m")
    assert counter.calls == 101
    rebuilt = [item("tool", 5, TOOLS)] + [item(f"m{i}", 2) for i in range(100)] + [item("new", 3)]
    snap = led.observe(rebuilt, model="m")  # new objects, same ids and digests: cache hits
    assert counter.calls == 102  # only "tool"
    assert kinds(snap) == {"tool": ("addition", 5)}
    assert all(i.tokens == 2 for i in rebuilt[1:101])


def test_a_body_seen_again_under_another_id_is_counted_once() -> None:
    """A file read again (new call id, same body and digest) costs no second count, and has its tokens."""
    counter = CountingCounter()
    led = SessionLedger("s", counter=counter)
    seed = item("prompt", 2)
    led.observe([seed], model="m")  # the first observation: the cold count
    first = item("call_1:result", 7, RESULTS, digest="body-a")
    led.observe([seed, first], model="m")
    again = item("call_2:result", 7, RESULTS, digest="body-a")
    other = item("call_3:result", 7, RESULTS, digest="body-b")
    snap = led.observe([seed, first, again, other], model="m")
    assert counter.calls == 3  # prompt, body-a once, body-b
    assert (again.tokens, other.tokens) == (7, 7)
    assert snap.annotation.categories[RESULTS] == 21


def test_model_change_starts_a_new_baseline() -> None:
    """Switching model: baseline again, every item a baseline change, no growth claimed."""
    led = ledger()
    items = [item("sys", 10, SYS), item("u1", 3)]
    led.observe(items, model="gpt-4o")
    same = led.observe(items + [item("a1", 1, ASSIST)], model="gpt-4o")
    assert not same.annotation.baseline
    switched = led.observe(items + [item("a1", 1, ASSIST), item("u2", 2)], model="gpt-4.1")
    ann = switched.annotation
    assert ann.baseline and ann.model == "gpt-4.1" and not switched.first
    assert kinds(switched) == {"sys": ("baseline", 10), "u1": ("baseline", 3),
                               "u2": ("baseline", 2), "a1": ("baseline", 1)}
    assert ann.estimated_tokens == 16
    assert switched.compaction is None


def test_model_change_recounts_with_the_new_encoding(tiktoken_ready: None) -> None:
    """gpt-4o (o200k_base) to gpt-4 (cl100k_base): '日本語' goes from 2 to 4 tokens."""
    led = SessionLedger("s")
    text = "日本語"
    first = led.observe([Item("u", PROMPTS, "prompts/text", 3, text=text, digest="d")], model="gpt-4o")
    assert first.annotation.basis == "tiktoken/o200k_base" and first.annotation.estimated_tokens == 2
    second = led.observe([Item("u", PROMPTS, "prompts/text", 3, text=text, digest="d")], model="gpt-4")
    assert second.annotation.basis == "tiktoken/cl100k_base"
    assert second.annotation.estimated_tokens == 4 and second.annotation.baseline


def test_declared_compaction() -> None:
    """A manual compaction: 3 messages (30 tokens) out, a 4-token summary in, on its own annotation."""
    led = ledger()
    head = [item("sys", 10, SYS)]
    conv = [item("u1", 5), item("a1", 15, ASSIST), item("r1", 10, RESULTS)]
    led.observe(head + conv, model="m")
    summary = item("sum", 4, SUMMARIES)
    snap = led.observe(head + [summary], model="m", compaction=CompactionTrigger.MANUAL)
    record = snap.compaction
    assert record is not None
    assert (record.trigger, record.declared) == (CompactionTrigger.MANUAL, True)
    assert (record.tokens_before, record.tokens_after) == (40, 14)
    assert [i.id for i in record.removed] == ["u1", "a1", "r1"] and [i.id for i in record.added] == ["sum"]
    post = record.annotation
    assert post.stage is Stage.POST_COMPACTION and post.compaction_trigger is CompactionTrigger.MANUAL
    assert {c.id: (c.change_type.value, c.delta_tokens) for c in post.changes} == {
        "a1": ("removal", -15), "r1": ("removal", -10), "u1": ("removal", -5), "sum": ("addition", 4)}
    assert post.categories == {SYS: 10, SUMMARIES: 4} and post.estimated_tokens == 14
    assert post.item_stage is Stage.REQUEST_INPUT  # the items were attributed on the request
    # The request itself starts a new baseline.
    assert snap.annotation.baseline and kinds(snap) == {"sys": ("baseline", 10), "sum": ("baseline", 4)}
    assert led.compactions == 1


def test_inferred_compaction_summary_replaces_history() -> None:
    """Not declared: conversation items removed while a summary appears is an auto compaction."""
    led = ledger()
    led.observe([item("sys", 10, SYS), item("u1", 5), item("a1", 6, ASSIST)], model="m")
    snap = led.observe([item("sys", 10, SYS), item("sum", 2, SUMMARIES), item("u2", 1)], model="m")
    record = snap.compaction
    assert record is not None
    assert (record.trigger, record.declared) == (CompactionTrigger.AUTO, False)
    assert (record.tokens_before, record.tokens_after) == (21, 13)
    assert snap.annotation.baseline


def test_inferred_compaction_oldest_turns_dropped_is_a_trim() -> None:
    """No summary, the four oldest conversation items gone and the newest kept: a sliding window, ``trim``."""
    led = ledger()
    conv = [item(f"m{i}", 10) for i in range(6)]
    led.observe([item("sys", 50, SYS)] + conv, model="m")
    snap = led.observe([item("sys", 50, SYS)] + conv[4:], model="m")  # 60 -> 20 conversation tokens
    record = snap.compaction
    assert record is not None and not record.declared and record.trigger is CompactionTrigger.TRIM
    assert not snap.restarted
    assert (record.tokens_before, record.tokens_after) == (50 + 60, 50 + 20)
    assert [i.id for i in record.removed] == ["m0", "m1", "m2", "m3"] and record.added == []


def test_one_oldest_message_dropped_is_no_compaction() -> None:
    """A trim takes a turn at least (two items): one message less is an edit."""
    led = ledger()
    conv = [item(f"m{i}", 10) for i in range(6)]
    led.observe([item("sys", 50, SYS)] + conv, model="m")
    snap = led.observe([item("sys", 50, SYS)] + conv[1:], model="m")
    assert snap.compaction is None and not snap.restarted


def test_history_cut_back_to_its_opening_is_a_restart_not_a_compaction() -> None:
    """The first message kept, all after it gone (60 -> 10 tokens), no summary: a new conversation."""
    led = ledger()
    conv = [item(f"m{i}", 10) for i in range(6)]
    led.observe([item("sys", 50, SYS)] + conv, model="m")
    snap = led.observe([item("sys", 50, SYS), conv[0], item("other", 10)], model="m")
    assert snap.compaction is None and snap.restarted
    assert kinds(snap)["other"] == ("addition", 10) and kinds(snap)["m5"] == ("removal", -10)


def test_a_short_cut_at_the_end_is_an_edit() -> None:
    """The newest two of six items gone (kept 40 of 60 tokens, over half): neither a restart nor a compaction."""
    led = ledger()
    conv = [item(f"m{i}", 10) for i in range(6)]
    led.observe([item("sys", 50, SYS)] + conv, model="m")
    snap = led.observe([item("sys", 50, SYS)] + conv[:4], model="m")
    assert snap.compaction is None and not snap.restarted


def test_a_tool_call_and_its_result_taken_from_the_middle_is_no_compaction() -> None:
    """Two items out of the middle, the first and the newest kept: an edit."""
    led = ledger()
    conv = [item("u1", 10), item("call", 10, ASSIST), item("result", 40, RESULTS), item("a1", 10, ASSIST),
            item("u2", 10)]
    led.observe([item("sys", 50, SYS)] + conv, model="m")
    snap = led.observe([item("sys", 50, SYS), conv[0], conv[3], conv[4], item("u3", 5)], model="m")
    assert snap.compaction is None and not snap.restarted
    assert kinds(snap) == {"call": ("removal", -10), "result": ("removal", -40), "u3": ("addition", 5)}


def test_partial_coverage_never_infers_compaction() -> None:
    """A transcript view (partial coverage) losing its history is not taken for a compaction."""
    led = ledger()
    partial = dict(stage=Stage.TRANSCRIPT_OBSERVED, coverage=Coverage.PARTIAL)
    led.observe([item("u1", 5), item("a1", 6, ASSIST)], model="m", **partial)
    snap = led.observe([item("sum", 2, SUMMARIES)], model="m", **partial)
    assert snap.compaction is None and not snap.annotation.baseline
    declared = led.observe([item("sum2", 1, SUMMARIES)], model="m", compaction=CompactionTrigger.AUTO,
                           **partial)
    assert declared.compaction is not None and declared.compaction.declared


def test_emptied_history_is_not_compaction() -> None:
    """Every conversation item gone and nothing in its place is a new start, not a compaction."""
    led = ledger()
    led.observe([item("sys", 5, SYS), item("u1", 10), item("a1", 10, ASSIST)], model="m")
    snap = led.observe([item("sys", 5, SYS)], model="m")
    assert snap.compaction is None
    assert kinds(snap) == {"u1": ("removal", -10), "a1": ("removal", -10)}


def test_sliding_window_is_not_compaction() -> None:
    """Dropping the oldest message of six (60 -> 50 conversation tokens) is a plain removal."""
    led = ledger()
    conv = [item(f"m{i}", 10) for i in range(6)]
    led.observe(conv, model="m")
    snap = led.observe(conv[1:] + [item("m6", 10)], model="m")
    assert snap.compaction is None and not snap.annotation.baseline
    assert kinds(snap) == {"m0": ("removal", -10), "m6": ("addition", 10)}


def test_shrinking_system_is_not_compaction() -> None:
    """Removing tools (not conversation) never counts as compaction, however large."""
    led = ledger()
    led.observe([item("t1", 500, TOOLS), item("u1", 2)], model="m")
    snap = led.observe([item("u1", 2)], model="m")
    assert snap.compaction is None


def test_report_above_and_below() -> None:
    """Estimates 10+30=40: reported 20 scales to 5/15 (factor 0.5); reported 50 leaves 10 unattributed."""
    led = ledger()
    snap = led.observe([item("sys", 10, SYS), item("u1", 30)], model="m")
    assert snap.calibrated() == {SYS: 10, PROMPTS: 30}  # no measurement yet
    assert snap.apportioned_label == "estimated" and snap.apportioned() == snap.parts
    led.report(snap, 20)
    ann = snap.annotation
    assert (ann.reported_tokens, ann.calibration_factor) == (20, 0.5)
    assert ann.categories == {SYS: 10, PROMPTS: 30}  # raw estimates never scaled
    assert snap.calibrated() == {SYS: 5, PROMPTS: 15, Category.UNATTRIBUTED: 0}
    assert snap.apportioned() == {"system": 5, "prompts/text": 15}
    assert snap.apportioned_label == "apportioned"
    led.report(snap, 50)
    assert snap.annotation.calibration_factor == 1.0
    assert snap.calibrated() == {SYS: 10, PROMPTS: 30, Category.UNATTRIBUTED: 10}
    assert snap.apportioned() == {"system": 10, "prompts/text": 30, "unattributed": 10}


def test_apportioned_parts_add_up_to_the_measurement() -> None:
    """Parts 3 and 6 of prompts and 1 of system against 5 reported: 2, 2, 1 (largest remainder)."""
    led = ledger()
    snap = led.observe([item("sys", 1, SYS), item("i", 3, part="prompts/media/image"), item("t", 6)],
                       model="m")
    led.report(snap, 5)
    # factor 0.5: system 0.5 -> 0 or 1, prompts 4.5; equal remainders go to the larger weight (prompts).
    assert snap.calibrated() == {SYS: 0, PROMPTS: 5, Category.UNATTRIBUTED: 0}
    # prompts' 5 split 3:6 -> 1.67 and 3.33 -> 2 and 3.
    assert snap.apportioned() == {"system": 0, "prompts/media/image": 2, "prompts/text": 3}


def test_used_and_free() -> None:
    """Window 100, 30 estimated: free 70; once 45 is reported, free 55."""
    led = ledger()
    snap = led.observe([item("u", 30)], model="m", window_tokens=100)
    assert (snap.used, snap.free()) == (30, 70)
    led.report(snap, 45)
    assert (snap.used, snap.free()) == (45, 55)


def test_parts_cap() -> None:
    """300 distinct tool parts: the first ones keep their names, the rest go to tools/other; <= 256 parts."""
    led = ledger()
    items = [item(f"t{i}", 1, TOOLS, part=f"tools/t{i}") for i in range(300)]
    snap = led.observe(items, model="m")
    assert len(snap.parts) == NAMED_PARTS_CAP + 1 <= MAX_PARTS_PER_SESSION
    assert snap.parts["tools/other"] == 300 - NAMED_PARTS_CAP
    assert snap.parts["tools/t0"] == 1 and "tools/t299" not in snap.parts
    # A part admitted earlier keeps its name; new ones keep overflowing, in other categories too.
    more = led.observe(items + [item("x", 2, RESULTS, part="results/Grep")], model="m")
    assert more.parts["results/other"] == 2 and more.parts["tools/t0"] == 1
    assert len(more.parts) <= MAX_PARTS_PER_SESSION


def test_change_cap_and_omitted() -> None:
    """100 additions of 1..100 tokens: the 64 largest (100 down to 37) are kept, 36 omitted."""
    led = ledger()
    base = [item("sys", 1, SYS)]
    led.observe(base, model="m")
    snap = led.observe(base + [item(f"a{n}", n) for n in range(1, 101)], model="m")
    ann = snap.annotation
    assert len(ann.changes) == MAX_CHANGES_PER_SPAN and ann.omitted_changes == 36
    assert [c.delta_tokens for c in ann.changes] == list(range(100, 36, -1))


def test_change_ties_keep_list_order() -> None:
    """Equal deltas: removals first in the old order, then additions in the new order."""
    led = ledger()
    led.observe([item("x", 2), item("y", 2)], model="m")
    snap = led.observe([item("p", 2), item("q", 2)], model="m")
    assert [c.id for c in snap.annotation.changes] == ["x", "y", "p", "q"]


def test_baseline_cap_lists_the_largest_items() -> None:
    """A 70-item baseline lists the 64 largest and omits 6."""
    snap = ledger().observe([item(f"i{n}", n) for n in range(70)], model="m")
    assert len(snap.annotation.changes) == 64 and snap.annotation.omitted_changes == 6
    assert snap.annotation.changes[0].id == "i69" and snap.annotation.changes[-1].id == "i6"


def test_capture_start_annotation() -> None:
    """The first snapshot gives a capture-start copy: same counts, item_stage request-input."""
    snap = ledger().observe([item("u", 4)], model="m", sample_offset_ns=1500, timestamp_ns=42)
    start = snap.annotation_for(Stage.CAPTURE_START)
    assert snap.first and start.stage is Stage.CAPTURE_START
    assert start.item_stage is Stage.REQUEST_INPUT
    assert start.estimated_tokens == 4 and start.baseline
    assert snap.annotation.stage is Stage.REQUEST_INPUT  # the original is untouched
    assert snap.annotation.sample_offset_ns == 1500 and snap.timestamp_ns == 42


def test_transcript_observation_and_limits_pass_through() -> None:
    """Stage, coverage and limits given to observe land on the annotation and its attributes."""
    snap = ledger().observe([item("u", 4)], model="claude-x", stage=Stage.TRANSCRIPT_OBSERVED,
                            coverage=Coverage.PARTIAL, window_tokens=200000,
                            effective_window_tokens=180000, compact_threshold_tokens=160000)
    attrs = snap.annotation.to_attributes()
    again = Annotation.from_attributes(attrs, snap.annotation.change_events())
    assert again.stage is Stage.TRANSCRIPT_OBSERVED and again.coverage is Coverage.PARTIAL
    assert (again.window_tokens, again.effective_window_tokens, again.compact_threshold_tokens) == (
        200000, 180000, 160000)
    assert again.model == "claude-x" and again.changes == snap.annotation.changes


@pytest.mark.parametrize("size", [0, 1])
def test_empty_and_tiny_requests(size: int) -> None:
    """An empty request is 0 tokens with no categories; then one item is an addition."""
    led = ledger()
    snap = led.observe([item("u", 1)] * size, model="m")
    assert snap.annotation.estimated_tokens == size and snap.annotation.baseline
    nxt = led.observe([item("u", 1)] * size + [item("v", 2)], model="m")
    assert kinds(nxt) == {"v": ("addition", 2)}


def test_long_sliding_session_keeps_memory_bounded() -> None:
    """5,000 requests of a 10-message sliding window: totals stay right, the text-count cache stays small."""
    led = ledger()
    window = [item(f"m{i}", 1 + i % 5) for i in range(10)]
    for n in range(10, 5010):
        window = window[1:] + [item(f"m{n}", 1 + n % 5)]
        snap = led.observe(window, model="m")
    assert snap.annotation.estimated_tokens == sum(1 + n % 5 for n in range(5000, 5010))
    assert len(led._text_counts) <= 2 * 11 + 1024 + 1


def test_pure_modules_import_no_telemetry_or_sdk() -> None:
    """ledger, diff, views, tokens, schema, waste, incremental framing, transcripts: no OTel, no SDK loaded."""
    import subprocess
    import sys

    # The pure modules of docs/ARCHITECTURE.md not already checked by test_items and test_framing.
    code = ("import sys, ctxscope.core.ledger, ctxscope.core.diff, ctxscope.core.views, ctxscope.core.tokens, "
            "ctxscope.schema, ctxscope.core.waste, ctxscope.core.framing.incremental, "
            "ctxscope.transcripts.claude_code, "
            "ctxscope.transcripts.codex, ctxscope.transcripts.messages, ctxscope.transcripts.detect; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('opentelemetry', 'openai', 'anthropic')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_field_orders_the_ledger_builds_positionally():
    """SessionLedger builds Annotation and Snapshot positionally (once a call, no keyword dict): a field
    added or moved in either class must be met by the call in ledger.py, which this makes fail first."""
    from dataclasses import fields

    from ctxscope.core.ledger import Snapshot
    from ctxscope.schema import Annotation

    # The 18 it passes; those after them (waste, compaction_trigger, version) keep their defaults.
    assert [f.name for f in fields(Annotation)][:18] == [
        "stage", "basis", "coverage", "baseline", "categories", "estimated_tokens", "item_stage",
        "sample_offset_ns", "reported_tokens", "window_tokens", "effective_window_tokens",
        "compact_threshold_tokens", "model", "calibration_factor", "learned_correction_tokens",
        "basis_fallback", "omitted_changes", "changes"]
    assert [f.name for f in fields(Snapshot)] == [
        "annotation", "parts", "items", "compaction", "timestamp_ns", "first", "session_id", "restarted",
        "part_chars", "part_bytes"]
