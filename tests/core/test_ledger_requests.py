"""The ledger fed by real request extraction (items.RequestExtractor), as the tracker does."""

from __future__ import annotations

import json
from typing import Any

from conftest import CORPUS, requires_corpus

from ctxscope.core.items import API_ANTHROPIC, API_OPENAI_CHAT, RequestExtractor
from ctxscope.core.ledger import SessionLedger
from ctxscope.schema import Category, ChangeType
from ctxscope.core.tokens import CharsCounter


class CountingCounter(CharsCounter):
    """chars/4 that remembers how many texts it counted."""

    def __init__(self) -> None:
        self.calls = 0

    def count(self, text: str) -> int:
        self.calls += 1
        return super().count(text)


def _body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    tools = [{"type": "function", "function": {"name": "Read", "description": "Read a file",
                                               "parameters": {"type": "object", "properties": {}}}}]
    return {"model": "gpt-4o", "messages": list(messages), "tools": tools}


def test_appended_turn_counts_only_new_items() -> None:
    """A tool call and its result appended: two additions, two counts, nothing else recounted."""
    counter = CountingCounter()
    extractor, ledger = RequestExtractor(), SessionLedger("s", counter=counter)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are terse."},
                                      {"role": "user", "content": "Show me app.py"}]
    first = ledger.observe(extractor.extract(_body(messages), API_OPENAI_CHAT), model="gpt-4o")
    counted = counter.calls
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "Read", "arguments": "{\"file_path\": \"app.py\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "print('hello')\n" * 20},
    ]
    snap = ledger.observe(extractor.extract(_body(messages), API_OPENAI_CHAT), model="gpt-4o")
    changes = snap.annotation.changes
    assert {c.change_type for c in changes} == {ChangeType.ADDITION}
    assert {c.category for c in changes} == {Category.ASSISTANT, Category.RESULTS}
    assert counter.calls - counted == len(changes) == 2
    result = next(c for c in changes if c.category is Category.RESULTS)
    assert result.estimated_tokens == -(-len("print('hello')\n" * 20) // 4)  # 300 chars -> 75
    assert snap.annotation.estimated_tokens == first.annotation.estimated_tokens + sum(
        c.delta_tokens for c in changes)


def test_edited_tool_result_is_a_replacement() -> None:
    """The same tool_call_id answered with shorter content: one replacement with a negative delta."""
    extractor, ledger = RequestExtractor(), SessionLedger("s", counter=CharsCounter())
    call = {"role": "assistant", "content": None, "tool_calls": [{
        "id": "call_9", "type": "function", "function": {"name": "Read", "arguments": "{}"}}]}
    base = [{"role": "user", "content": "go"}, call]
    ledger.observe(extractor.extract(_body(base + [{"role": "tool", "tool_call_id": "call_9",
                                                    "content": "x" * 400}]), API_OPENAI_CHAT))
    snap = ledger.observe(extractor.extract(_body(base + [{"role": "tool", "tool_call_id": "call_9",
                                                           "content": "[cleared]"}]), API_OPENAI_CHAT))
    assert [(c.change_type, c.delta_tokens) for c in snap.annotation.changes] == [
        (ChangeType.REPLACEMENT, 3 - 100)]  # 9 chars -> 3 tokens, 400 chars -> 100


@requires_corpus
def test_real_anthropic_requests_calibrate_exactly() -> None:
    """Every recorded Anthropic request: categories sum, calibrated view sums to the reported input."""
    path = next(iter(sorted((CORPUS / "api" / "anthropic").glob("*.jsonl"))))
    checked = 0
    with path.open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            usage = (record.get("response") or {}).get("usage")
            if not usage:
                continue
            reported = (usage.get("input_tokens", 0) + (usage.get("cache_creation_input_tokens") or 0)
                        + (usage.get("cache_read_input_tokens") or 0))
            ledger = SessionLedger(f"r{checked}", counter=CharsCounter())
            snap = ledger.observe(RequestExtractor().extract(record["request"], API_ANTHROPIC),
                                  model=record["request"].get("model"))
            ann = snap.annotation
            assert sum(ann.categories.values()) == ann.estimated_tokens == sum(snap.parts.values())
            ledger.report(snap, reported)
            assert sum(snap.calibrated().values()) == reported
            assert sum(snap.apportioned().values()) == reported
            checked += 1
    assert checked > 0
