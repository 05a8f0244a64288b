"""Change-event labels: tool names by default, references (paths, commands) only when opted in (SPEC 7)."""

from __future__ import annotations

import json

import pytest

from ctxscope.config import CTXSCOPE_CAPTURE_LABELS
from ctxscope.core.ledger import SessionLedger
from ctxscope.core.items import items_from_request
from ctxscope.telemetry.tracker import Tracker, capture_labels_from_env

SENTINEL = "secret_dir_7f3a/app.py"
CHAT = "openai.chat"


def body(extra_read: bool = False) -> dict:
    """A chat request with one Read tool call on a sentinel path and its result."""
    messages: list[dict] = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "look at the app"},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "Read", "arguments": json.dumps({"file_path": SENTINEL})}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "print('hi')"},
    ]
    if extra_read:  # a second Read of the same path: an addition of a call and its result
        messages += [{"role": "user", "content": "and again"},
                     {"role": "assistant", "content": None, "tool_calls": [{
                         "id": "call_2", "type": "function",
                         "function": {"name": "Read", "arguments": json.dumps({"file_path": SENTINEL})}}]},
                     {"role": "tool", "tool_call_id": "call_2", "content": "print('hi')"}]
    return {"model": "gpt-4o", "messages": messages}


def labels(snapshot) -> list[str]:
    return [c.label or "" for c in snapshot.annotation.changes]


def test_labels_default_to_tool_names(monkeypatch):
    """Without the opt-in no change label (baseline or addition) holds the path; the tool name is there."""
    monkeypatch.delenv(CTXSCOPE_CAPTURE_LABELS, raising=False)
    tracker = Tracker(tokenizer="chars", framing=False)
    first = tracker.observe_request(body(), CHAT, provider="openai", session_id="s").snapshot
    # Baseline: system and prompt (no label), the Read call and its result (the tool name).
    assert sorted(labels(first)) == ["", "", "Read", "Read"]
    second = tracker.observe_request(body(True), CHAT, provider="openai", session_id="s").snapshot
    # Additions: the prompt, and the second Read call and result, still by tool name only.
    assert {(c.id, c.label) for c in second.annotation.changes if c.label} == {
        ("call_2", "Read"), ("call_2:result", "Read")}
    assert sorted(labels(second)) == ["", "Read", "Read"]


def test_opt_in_puts_the_reference_in_the_label(monkeypatch):
    """CTXSCOPE_CAPTURE_LABELS=true, read when the tracker is built: the call and result labels carry the path."""
    monkeypatch.setenv(CTXSCOPE_CAPTURE_LABELS, "true")
    tracker = Tracker(tokenizer="chars", framing=False)
    monkeypatch.delenv(CTXSCOPE_CAPTURE_LABELS)  # read once: later changes do not matter
    snapshot = tracker.observe_request(body(), CHAT, provider="openai", session_id="s").snapshot
    with_path = [label for label in labels(snapshot) if SENTINEL in label]
    assert with_path and all(label == f"Read:file_path={SENTINEL}" for label in with_path)
    # An item without a reference keeps its label (the user's text has none).
    assert None in [c.label for c in snapshot.annotation.changes if c.category.value == "prompts"]


def test_ledger_option_applies_to_diff_changes():
    """SessionLedger(capture_labels=True) labels an added result by its reference, off by its tool name."""
    for flag, expected in ((False, "Read"), (True, f"Read:file_path={SENTINEL}")):
        ledger = SessionLedger("s", tokenizer="chars", capture_labels=flag)
        base = {"model": "gpt-4o", "messages": body()["messages"][:2]}
        ledger.observe(items_from_request(base, CHAT), model="gpt-4o")
        snap = ledger.observe(items_from_request(body(), CHAT), model="gpt-4o")
        assert {c.label for c in snap.annotation.changes} == {expected}


@pytest.mark.parametrize("raw, expected", [("1", True), ("TRUE", True), ("off", False), ("", False),
                                           ("maybe", False)])
def test_env_values(monkeypatch, raw, expected):
    """The variable takes the usual boolean spellings; anything else keeps labels private."""
    monkeypatch.setenv(CTXSCOPE_CAPTURE_LABELS, raw)
    assert capture_labels_from_env() is expected
