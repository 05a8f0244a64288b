"""A CallEmitter's listener (a local store) set late: refused at once, not a store that stays empty.

A session's ledger keeps the characters and bytes per part that a store's
record needs only when a listener is there as the session begins (its texts
are let go once counted). Before session 31 a listener set after a session
began was taken, and the store warned once and wrote none of that session's
calls, the later ones included.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider

from ctxscope.telemetry.replay import CallEmitter
from ctxscope.telemetry.store import LocalStore
from ctxscope.transcripts import TranscriptFile
from ctxscope.transcripts.follow import TimedCall

SESSION = Path(__file__).resolve().parent.parent / "data" / "transcripts" / "claude_624a4a58_compaction.jsonl"
CALLS = list(TranscriptFile(str(SESSION)).calls())  # 5 calls of one session
SESSION_ID = CALLS[0].session_id


def emitter(**kwargs) -> CallEmitter:
    return CallEmitter(TracerProvider().get_tracer("test"), tokenizer="chars", **kwargs)


def timed(index: int) -> TimedCall:
    return TimedCall(CALLS[index], None, None, 0)


def test_a_listener_set_after_a_session_began_is_refused_naming_the_session(tmp_path):
    """One call emitted without a listener: setting the store's is a ValueError naming the session and the
    way out; the emitter keeps no listener (before: taken, and the store wrote none of the 5 calls)."""
    store = LocalStore(tmp_path)
    late = emitter()
    late.emit(timed(0))
    with pytest.raises(ValueError, match=f"1 session\\(s\\) began without one \\({SESSION_ID}\\).*listener=") as info:
        late.listener = store.record
    assert "could not be stored" in str(info.value)
    assert late.listener is None
    for index in range(1, 5):
        late.emit(timed(index))
    assert store.read(SESSION_ID) == []


def test_a_listener_set_before_the_first_call_stores_every_call(tmp_path):
    """Set after the emitter is built but before any call: the 5 calls are stored, as with listener=."""
    store, given = LocalStore(tmp_path / "set"), LocalStore(tmp_path / "given")
    early = emitter()
    early.listener = store.record
    built = emitter(listener=given.record)
    for index in range(5):
        early.emit(timed(index))
        built.emit(timed(index))
    records = store.read(SESSION_ID)
    assert len(records) == 5 and any(r["chars"] for r in records)
    assert [{**r, "ts": 0} for r in records] == [{**r, "ts": 0} for r in given.read(SESSION_ID)]


def test_held_calls_of_an_ended_session_refuse_a_listener_until_released(tmp_path):
    """hold: a session emitted and ended, its call still held: refused (it would reach the store without
    sizes at release); once released, nothing unsized is left and a listener is taken."""
    store = LocalStore(tmp_path)
    held = emitter(hold=True)
    held.emit(timed(0))
    held.end_session(SESSION_ID)
    assert held.sessions() == [] and held.held == 2  # the call and the session's end
    with pytest.raises(ValueError, match=SESSION_ID):
        held.listener = store.record
    assert held.release() == 2
    held.listener = store.record
    held.emit(timed(0))  # a new recording of the session, with its sizes
    held.release()
    assert len(store.read(SESSION_ID)) == 1
