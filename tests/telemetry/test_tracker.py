"""The tracker and sessions: ids, fingerprints, LRU, listeners, compactions, threads (chars/4 counting)."""

from __future__ import annotations

import threading

import pytest
from opentelemetry import baggage, context
from opentelemetry.sdk.trace import TracerProvider

import ctxscope
from ctxscope.core import conversation as sessions
from ctxscope.core.observation import Usage
from ctxscope.schema import Category, CompactionTrigger, Coverage, GenAI
from ctxscope.telemetry.tracker import Tracker, session_end_time_ns

CHAT = "openai.chat"


def body(*texts: str, system: str = "You are terse.") -> dict:
    """A chat body: the system prompt, then user/assistant turns alternating."""
    messages = [{"role": "system", "content": system}]
    for i, text in enumerate(texts):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return {"model": "gpt-4o", "messages": messages}


@pytest.fixture
def tracker():
    return Tracker(tokenizer="chars", max_sessions=3)


def test_session_id_order_argument_context_span_fingerprint(tracker):
    """Argument beats ctxscope.session(), which beats gen_ai.conversation.id on the span, then the fingerprint."""
    b = body("hello there")
    assert tracker.session_for(b, CHAT, "arg") == "arg"
    with ctxscope.session("ctx"):
        assert tracker.session_for(b, CHAT) == "ctx"
        assert tracker.session_for(b, CHAT, "arg") == "arg"
    tracer = TracerProvider().get_tracer("t")
    with tracer.start_as_current_span("agent", attributes={GenAI.CONVERSATION_ID: "from-span"}):
        assert tracker.session_for(b, CHAT) == "from-span"
    token = context.attach(baggage.set_baggage(GenAI.CONVERSATION_ID, "from-baggage"))
    try:
        assert tracker.session_for(b, CHAT) == "from-baggage"
    finally:
        context.detach(token)
    assert tracker.session_for(b, CHAT) == sessions.fingerprint(b, CHAT)


def test_fingerprint_is_system_and_first_user_only():
    """Later turns do not change the fingerprint; another first message or system prompt does."""
    one = sessions.fingerprint(body("hello there"), CHAT)
    assert sessions.fingerprint(body("hello there", "ok", "more"), CHAT) == one
    assert sessions.fingerprint(body("hello elsewhere"), CHAT) != one
    assert sessions.fingerprint(body("hello there", system="Other."), CHAT) != one
    assert one.startswith("fp-") and "hello" not in one
    # The same conversation through another API shape has the same fingerprint.
    anthropic_body = {"system": "You are terse.", "messages": [{"role": "user", "content": "hello there"}]}
    assert sessions.fingerprint(anthropic_body, "anthropic.messages") == one


def test_observe_request_and_response_by_hand(tracker):
    """System 4 + prompt 3 + overhead 12 = 19 estimated; reported 20 -> unattributed 1 in the calibrated view.

    Overhead (chars/4, OpenAI chat framing): system message 3 + "system" 2, user
    message 3 + "user" 1, reply priming 3: 5 + 4 + 3 = 12.
    """
    seen = []
    tracker.add_listener(seen.append)
    call = tracker.observe_request(body("hello there"), CHAT, provider="openai", session_id="s")
    assert call.first is True
    assert call.snapshot.annotation.categories == {Category.SYSTEM: 4, Category.PROMPTS: 3, Category.OVERHEAD: 12}
    assert call.snapshot.annotation.window_tokens == 128_000
    observation = tracker.observe_response(call, Usage(input_tokens=20, output_tokens=1, reported_input=20),
                                           response_model="gpt-4o-2024")
    assert seen == [observation]
    assert observation.session_id == "s" and observation.provider == "openai"
    assert observation.snapshot.annotation.reported_tokens == 20
    assert observation.snapshot.calibrated()[Category.UNATTRIBUTED] == 1
    second = tracker.observe_request(body("hello there", "ok"), CHAT, provider="openai", session_id="s")
    assert second.first is False


def test_failing_listener_does_not_break_the_call(tracker, caplog):
    """A listener that raises is logged; the next listener still runs."""
    seen = []
    tracker.add_listener(lambda o: 1 / 0)
    tracker.add_listener(seen.append)
    call = tracker.observe_request(body("x"), CHAT, provider="openai", session_id="s")
    tracker.observe_response(call, Usage())
    assert len(seen) == 1
    assert "listener" in caplog.text


def test_lru_bound_and_eviction_listener(tracker):
    """max_sessions=3: a fourth session drops the least recently used, and the listener hears it."""
    evicted = []
    tracker.add_eviction_listener(evicted.append)
    for sid in ("a", "b", "c"):
        tracker.observe_request(body(sid), CHAT, provider="openai", session_id=sid)
    tracker.observe_request(body("a", "again"), CHAT, provider="openai", session_id="a")  # a is fresh now
    tracker.observe_request(body("d"), CHAT, provider="openai", session_id="d")
    assert evicted == ["b"]
    assert tracker.sessions() == ["c", "a", "d"]
    assert tracker.end_session("c") is True and evicted == ["b", "c"]
    # An evicted session comes back as a new recording.
    assert tracker.observe_request(body("b"), CHAT, provider="openai", session_id="b").first is True


def test_declared_compaction_and_compacting_block(tracker):
    """compacting(): the summariser call is a session of its own; the next call is post-compaction."""
    with ctxscope.session("s"):
        tracker.observe_request(body("hello there", "ok", "more"), CHAT, provider="openai")
        with sessions.compacting("auto"):
            summariser = tracker.observe_request(body("hello there", "ok", "more", "Summarise."), CHAT,
                                                 provider="openai")
        after = tracker.observe_request(body("Summary: greeted."), CHAT, provider="openai")
    assert summariser.session_id == "s" + sessions.COMPACTION_SUFFIX
    assert after.snapshot.compaction is not None
    assert after.snapshot.compaction.trigger is CompactionTrigger.AUTO
    assert after.snapshot.compaction.declared is True
    sessions.mark_compaction("manual", session_id="s")
    with ctxscope.session("s"):
        again = tracker.observe_request(body("Summary: greeted twice."), CHAT, provider="openai")
    assert again.snapshot.compaction.trigger is CompactionTrigger.MANUAL


def test_responses_chaining_keeps_the_session(tracker):
    """A Responses request with previous_response_id of a seen response joins its session, partial coverage."""
    first = tracker.observe_request({"model": "gpt-4o", "input": "hello"}, "openai.responses", provider="openai")
    tracker.observe_response(first, Usage(reported_input=11), response_id="resp_1")
    chained = tracker.observe_request({"model": "gpt-4o", "input": "next", "previous_response_id": "resp_1"},
                                      "openai.responses", provider="openai")
    assert chained.session_id == first.session_id
    assert chained.snapshot.annotation.coverage is Coverage.PARTIAL


def test_threads_keep_sessions_apart(tracker):
    """8 threads, 2 sessions each growing by one turn per call: every snapshot adds up."""
    big = Tracker(tokenizer="chars", max_sessions=64)
    errors = []

    def agent(n: int) -> None:
        try:
            turns = []
            for i in range(20):
                turns.append(f"turn {i:02d} of {n}")  # 12-13 chars
                call = big.observe_request(body(*turns), CHAT, provider="openai", session_id=f"t{n}")
                big.observe_response(call, Usage(reported_input=100))
                ann = call.snapshot.annotation
                assert ann.estimated_tokens == sum(ann.categories.values())
        except Exception as exc:  # noqa: BLE001 - collected for the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=agent, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(big.sessions()) == sorted(f"t{n}" for n in range(8))
    # System 4 + 20 turns of ceil(12/4)=3 tokens ("turn ii of 0" is 12 chars), plus the
    # overhead: system 3+2, 10 user turns 3+1, 10 assistant turns 3+3 ("assistant": 9 chars), priming 3.
    latest = big.ledger("t0").latest.annotation
    assert latest.categories[Category.OVERHEAD] == 5 + 10 * 4 + 10 * 6 + 3
    assert latest.estimated_tokens == 4 + 20 * 3 + 108


def test_responses_conversation_object_is_the_session(tracker):
    """Responses with conversation="conv_1" (or {"id": ...}): that id is the session, coverage partial."""
    call = tracker.observe_request({"model": "gpt-4o", "input": "hi", "conversation": "conv_1"},
                                   "openai.responses", provider="openai")
    assert call.session_id == "conv_1"
    assert call.snapshot.annotation.coverage is Coverage.PARTIAL
    other = tracker.session_for({"input": "x", "conversation": {"id": "conv_2"}}, "openai.responses")
    assert other == "conv_2"
    with ctxscope.session("mine"):
        assert tracker.session_for({"input": "x", "conversation": "conv_3"}, "openai.responses") == "mine"


def test_a_failing_waste_tracker_or_framing_is_turned_off_once_and_the_calls_still_count(tracker, monkeypatch,
                                                                                       caplog):
    """Waste and framing are extras on top of the items: when one raises, the session's calls are still
    counted (the items' own tokens, worked out by chars/4), that extra is off for the session, and the
    failure is one warning, not one per call."""
    from ctxscope import faultlog
    from ctxscope.core.framing.incremental import FramingCache
    from ctxscope.core.waste import WasteTracker

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    faultlog.reset()
    monkeypatch.setattr(WasteTracker, "observe", broken)
    monkeypatch.setattr(FramingCache, "framing_items", broken)
    bodies = [body("x" * 40), body("x" * 40, "y" * 80)]
    with caplog.at_level("DEBUG", logger="ctxscope"):
        snapshots = [tracker.observe_request(b, CHAT, provider="openai", session_id="s").snapshot for b in bodies]
    # System "You are terse." (14 chars: 4 tokens), then 40 chars (10), then 80 (20): no framing, no waste.
    assert [s.annotation.estimated_tokens for s in snapshots] == [14, 34]
    assert all(s.annotation.waste is None or s.annotation.waste == {} for s in snapshots)
    warnings = [r.getMessage().splitlines()[0] for r in caplog.records if r.levelname == "WARNING"]
    assert sorted(warnings) == ["ctxscope: provider framing failed; disabling it for session s (logged once; later "
                                "ones at debug)",
                                "ctxscope: waste tracking failed; off for session s (logged once; later ones at "
                                "debug)"], warnings


def test_a_session_a_call_ends_ends_at_that_calls_start():
    """A restart (the history back at its opening) ends the old session at the restarting call's start.

    The listener runs when the call is measured (on the worker, later): its session-end marker keeps that time.
    """
    from ctxscope.core.apis import API_OPENAI_CHAT

    tracker = Tracker(tokenizer="chars")
    ended: list[tuple[str, int | None]] = []
    tracker.add_eviction_listener(lambda session_id: ended.append((session_id, session_end_time_ns())))
    opening = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi there"}]
    grown = [*opening, {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "More"}]
    first = tracker.observe_request({"model": "gpt-4o", "messages": opening}, API_OPENAI_CHAT, provider="openai",
                                    timestamp_ns=1_000)
    tracker.observe_request({"model": "gpt-4o", "messages": grown}, API_OPENAI_CHAT, provider="openai",
                            timestamp_ns=2_000)
    again = tracker.observe_request({"model": "gpt-4o", "messages": opening}, API_OPENAI_CHAT, provider="openai",
                                    timestamp_ns=3_000)
    assert ended == [(first.session_id, 3_000)] and again.session_id == first.session_id + ".2"
    assert session_end_time_ns() is None  # outside an observed call: the listener's "now"
    assert tracker.end_session(again.session_id) and ended[-1] == (again.session_id, None)
