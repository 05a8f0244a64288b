"""The fast paths of the live per-request path keep behaviour: extraction, diff, span processor.

What each fast path promises (docs/items.md "What is noticed", docs/accounting.md
"Performance", docs/telemetry.md "Cost of on_end") is checked here at the public
surface, against the slow path or values worked out by hand.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from _instr_support import token_gauges

from ctxscope.core import items as items_module
from ctxscope.core.diff import diff_items
from ctxscope.core.items import API_ANTHROPIC, API_OPENAI_CHAT, RequestExtractor, items_from_request
from ctxscope.telemetry.processor import ContextSpanProcessor, reading_from_attributes
from ctxscope.schema import (
    Annotation,
    Attr,
    Category,
    CompactionTrigger,
    Coverage,
    GenAI,
    Item,
    LimitKind,
    Stage,
    WasteKind,
)

WINDOW = items_module.DEEP_CHECK_WINDOW


def _chat(n: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"} for i in range(n)]


def _view(items: list[Item]) -> list[tuple]:
    return [(i.id, i.part, i.chars, i.digest, i.label, i.reference) for i in items]


def _base_view(items: list[Item]) -> list[tuple]:
    return [(i.id.partition("#")[0], *row[1:]) for i, row in zip(items, _view(items))]


# ---------------------------------------------------------------------------
# Extraction
# ---------------------------------------------------------------------------

SWEEP = items_module.SWEEP_PER_CALL


def _calls_until(extractor: RequestExtractor, body: dict, api: str, seen: Any, limit: int) -> int:
    """How many extract calls (at most ``limit``) it takes until ``seen(items)`` holds; ``limit + 1`` if never."""
    for call in range(1, limit + 1):
        if seen(extractor.extract(body, api)):
            return call
    return limit + 1


def test_rebinding_a_field_of_an_old_message_is_seen_within_the_sweep_bound():
    """``msg["content"] = ...`` on message 0, older than the window: seen within ceil(older / SWEEP_PER_CALL) calls."""
    messages = _chat(WINDOW + 3 * SWEEP)
    body = {"model": "gpt-4o", "messages": messages}
    extractor = RequestExtractor()
    first = extractor.extract(body, API_OPENAI_CHAT)
    messages[0]["content"] = "cleared"
    assert _calls_until(extractor, body, API_OPENAI_CHAT, lambda got: got[0].text == "cleared", 3) <= 3
    again = extractor.extract(body, API_OPENAI_CHAT)
    assert _view(again) == _view(items_from_request(body, API_OPENAI_CHAT))
    assert all(a is b for a, b in zip(first[1:], again[1:]))  # the other messages keep their items


def test_nested_edit_of_an_old_message_is_seen_within_the_sweep_bound_and_at_once_in_the_window():
    """A block's text changed in place: at once in the last DEEP_CHECK_WINDOW messages, within the bound before them."""
    messages = [{"role": "user", "content": [{"type": "text", "text": f"block {i}"}]}
                for i in range(WINDOW + 2 * SWEEP)]
    body = {"model": "claude-x", "max_tokens": 5, "messages": messages}
    extractor = RequestExtractor()
    first = extractor.extract(body, API_ANTHROPIC)
    messages[-1]["content"][0]["text"] = "new, edited in place"
    second = extractor.extract(body, API_ANTHROPIC)
    assert second[-1].text == "new, edited in place"                       # inside the window: at once
    assert all(a is b for a, b in zip(first[:-1], second[:-1]))
    messages[10]["content"][0]["text"] = "old, edited in place"
    assert _calls_until(extractor, body, API_ANTHROPIC, lambda got: got[10].text == "old, edited in place", 2) <= 2


def test_moving_cache_control_reextracts_the_last_messages_only():
    """Anthropic's prompt-caching idiom (the marker moves to the newest block) keeps every older item object."""
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": [{"type": "text", "text": f"turn {i}"}]}
                for i in range(200)]
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    body = {"model": "claude-x", "max_tokens": 5, "system": "s", "messages": messages}
    extractor = RequestExtractor()
    first = extractor.extract(body, API_ANTHROPIC)
    del messages[-1]["content"][-1]["cache_control"]
    messages.append({"role": "user", "content": [{"type": "text", "text": "turn 200",
                                                  "cache_control": {"type": "ephemeral"}}]})
    second = extractor.extract(body, API_ANTHROPIC)
    assert all(a is b for a, b in zip(first[:-1], second[:-1]))            # system + turns 0..198
    assert second[-2].text == "turn 199" and second[-2] is not first[-1]  # the edited message, extracted again
    assert _view(second) == _view(items_from_request(body, API_ANTHROPIC))


def test_edit_in_the_middle_keeps_later_messages_and_ids_of_a_fresh_pass():
    """Past an edited message, messages equal at their position keep their items; ids match a fresh extraction."""
    messages = _chat(300)
    messages[150] = {"role": "user", "content": "same text"}
    messages[250] = {"role": "user", "content": "same text"}  # a repeat: its id carries #2
    extractor = RequestExtractor()
    first = extractor.extract({"model": "gpt-4o", "messages": messages}, API_OPENAI_CHAT)
    messages[100]["content"] = "edited"
    body = {"model": "gpt-4o", "messages": messages}
    second = extractor.extract(body, API_OPENAI_CHAT)
    assert _view(second) == _view(items_from_request(body, API_OPENAI_CHAT))
    assert second[250].id.endswith("#2")
    assert second[100] is not first[100]
    assert all(second[i] is first[i] for i in range(300) if i != 100)


def test_dropping_a_tool_call_after_an_edit_forgets_its_name_for_later_results():
    """A call removed from the end releases its call id: a result naming it again is results/unknown, as fresh."""
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}]}
    result = {"role": "tool", "tool_call_id": "c1", "content": "data"}
    messages = [{"role": "user", "content": "go"}, call, result]
    extractor = RequestExtractor()
    assert extractor.extract({"model": "gpt-4o", "messages": messages}, API_OPENAI_CHAT)[2].part == "results/read_file"
    body = {"model": "gpt-4o", "messages": [messages[0], result]}
    again = extractor.extract(body, API_OPENAI_CHAT)
    assert [i.part for i in again] == ["prompts/text", "results/unknown"]
    assert _view(again) == _view(items_from_request(body, API_OPENAI_CHAT))


_WORDS = st.sampled_from(["alpha", "beta", "alpha", "<system-reminder>\nx\n</system-reminder>\nhi", ""])


def _message(draw: Any, i: int) -> dict:
    if draw(st.booleans()):
        return {"role": "user", "content": draw(_WORDS)}
    return {"role": "assistant", "content": [{"type": "text", "text": draw(_WORDS)},
                                             {"type": "tool_use", "id": f"t{i % 3}", "name": "Read",
                                              "input": {"file_path": draw(_WORDS)}}]}


@st.composite
def _histories(draw: Any) -> tuple[list[dict], list[tuple]]:
    messages = [_message(draw, i) for i in range(draw(st.integers(1, 9)))]
    ops = st.sampled_from(["append", "edit", "edit_block", "edit_last_block", "cache_control", "delete", "insert",
                           "rebuild", "system"])
    steps = [(draw(ops), draw(st.integers(0, 20)), _message(draw, 100 + n), draw(_WORDS))
             for n in range(draw(st.integers(1, 8)))]
    return messages, steps


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_histories())
def test_small_window_incremental_matches_fresh(history):
    """Window 2, sweep 1: new objects and window edits give a fresh pass's items at once, any in-place edit within
    the bound."""
    saved = items_module.DEEP_CHECK_WINDOW, items_module.SWEEP_PER_CALL
    items_module.DEEP_CHECK_WINDOW, items_module.SWEEP_PER_CALL = 2, 1  # short histories reach past the window
    try:
        _replay(history)
    finally:
        items_module.DEEP_CHECK_WINDOW, items_module.SWEEP_PER_CALL = saved


def _replay(history: tuple[list[dict], list[tuple]]) -> None:
    messages, steps = history
    extractor = RequestExtractor()
    body = {"model": "claude-x", "max_tokens": 5, "system": "sys", "messages": messages}
    extractor.extract(body, API_ANTHROPIC)
    for op, index, new, words in steps:
        i = index % max(1, len(messages))
        if op == "append" or not messages:
            messages.append(new)
        elif op == "edit":
            messages[i]["content"] = words                          # in place, anywhere
        elif op == "edit_block" and isinstance(messages[i]["content"], list):
            messages[i]["content"][0]["text"] = words + "!"         # nested, in place, anywhere
        elif op == "edit_last_block" and isinstance(messages[-1]["content"], list):
            messages[-1]["content"][0]["text"] = words + "!"        # nested, inside the window
        elif op == "cache_control" and isinstance(messages[-1]["content"], list):
            messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
        elif op == "delete":
            del messages[i]
        elif op == "insert":
            messages.insert(i, new)
        elif op == "rebuild":
            messages[:] = json.loads(json.dumps(messages))          # new, equal objects keep their items
        elif op == "system":
            body["system"] = words + "?"                            # a new head: every message compared
        after = extractor.extract(body, API_ANTHROPIC)
        fresh = _base_view(items_from_request(body, API_ANTHROPIC))
        if op in ("edit", "edit_block"):
            for _ in range(len(messages)):                          # the sweep reaches every older message
                after = extractor.extract(body, API_ANTHROPIC)
        # Ids by their base: a message reused at its position past an edit keeps its
        # occurrence suffix (#2), where a fresh pass may number repeats differently.
        assert _base_view(after) == fresh
        assert len({i.id for i in after}) == len(after)


# ---------------------------------------------------------------------------
# Diff
# ---------------------------------------------------------------------------

def _item(i: int, tokens: int = 0) -> Item:
    return Item(id=f"m{i}", category=Category.PROMPTS, part="prompts/text", chars=4, text="abcd",
                digest=f"d{i}", tokens=tokens)


def test_diff_of_a_long_shared_prefix_with_an_equal_copy_inside_is_one_addition():
    """1,500 shared items (one a new object with the same id and digest, not yet counted) plus one new: one addition."""
    old = [_item(i, tokens=1) for i in range(1500)]
    new = list(old)
    new[1000] = _item(1000)  # equal key, tokens still 0: gets its count from the old item it matches
    new.append(_item(1500))
    diff = diff_items(old, new)
    assert diff.added == [new[1500]] and diff.removed == [] and diff.replaced == []
    assert new[1000].tokens == 1


def test_diff_finds_a_replacement_past_the_first_slice():
    """A changed digest at position 700 (past the first 512-item slice) is a replacement of that item alone."""
    old = [_item(i) for i in range(900)]
    new = list(old)
    new[700] = Item(id="m700", category=Category.PROMPTS, part="prompts/text", chars=4, text="efgh", digest="x")
    diff = diff_items(old, new)
    assert diff.replaced == [(old[700], new[700])] and not diff.added and not diff.removed


# ---------------------------------------------------------------------------
# Span processor
# ---------------------------------------------------------------------------

def _annotation() -> Annotation:
    return Annotation(stage=Stage.POST_COMPACTION, basis="chars/4", coverage=Coverage.COMPLETE, baseline=False,
                      categories={Category.SYSTEM: 30, Category.RESULTS: 70}, estimated_tokens=100,
                      window_tokens=1000, compact_threshold_tokens=0, model="gpt-4o", sample_offset_ns=5,
                      waste={WasteKind.DUPLICATE: 20}, compaction_trigger=CompactionTrigger.MANUAL)


def test_reading_from_attributes_takes_what_the_metrics_need():
    """The reading of a span's attributes: raw categories, positive limits only, waste, trigger, offset."""
    ann = _annotation()
    ann.reported_tokens = 80
    reading = reading_from_attributes(ann.to_attributes())
    assert reading is not None
    assert reading.categories == {Category.SYSTEM: 30, Category.RESULTS: 70}
    assert reading.limits == {LimitKind.WINDOW: 1000}
    assert (reading.stage, reading.trigger, reading.reported, reading.estimated) == (
        Stage.POST_COMPACTION, CompactionTrigger.MANUAL, 80, 100)
    assert reading.waste == {WasteKind.DUPLICATE: 20} and reading.sample_offset_ns == 5
    assert reading_from_attributes({GenAI.CONVERSATION_ID: "s"}) is None


def test_reading_from_attributes_makes_ints_of_other_numbers_and_refuses_an_unknown_stage():
    """A float or bool count is read as its int (30.0 -> 30, True -> 1); a stage outside the spec raises."""
    attrs = {**_annotation().to_attributes(), Attr.category(Category.SYSTEM): 30.0,
             Attr.waste(WasteKind.DUPLICATE): True}
    reading = reading_from_attributes(attrs)
    assert reading is not None
    assert reading.categories == {Category.SYSTEM: 30, Category.RESULTS: 70}
    assert type(reading.categories[Category.SYSTEM]) is int
    assert reading.waste == {WasteKind.DUPLICATE: 1} and type(reading.waste[WasteKind.DUPLICATE]) is int
    with pytest.raises(ValueError):
        reading_from_attributes({**attrs, Attr.STAGE: "request"})


def test_on_end_gauges_are_the_calibrated_view_of_the_span_attributes():
    """An annotated span with reported 80 against estimates 30 + 70 gives system 24, results 56 (SPEC 5 scaling)."""
    reader = InMemoryMetricReader()
    processor = ContextSpanProcessor(MeterProvider(metric_readers=[reader]))
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(processor)
    ann = _annotation()
    ann.stage, ann.compaction_trigger, ann.reported_tokens = Stage.REQUEST_INPUT, None, 80
    attrs = {GenAI.CONVERSATION_ID: "attrs", GenAI.REQUEST_MODEL: "gpt-4o", **ann.to_attributes()}
    tracer_provider.get_tracer("t").start_span("chat gpt-4o", attributes=attrs).end()
    assert token_gauges(reader, "attrs") == {"system": 24, "results": 56, "unattributed": 0}


def test_shared_prefix_counts_leading_identical_items():
    """shared_prefix: 1,200 shared items then a different one gives 1,200; a pure extension gives the old length."""
    from ctxscope.core.diff import shared_prefix

    old = [_item(i) for i in range(1300)]
    new = old[:1200] + [_item(5000)] + old[1201:]
    assert shared_prefix(old, new) == 1200
    assert shared_prefix(old, old + [_item(6000)]) == 1300
    assert shared_prefix([], old) == 0
