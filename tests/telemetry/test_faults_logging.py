"""Our log records hold nothing of the caller's (issue 17, point 9): abandoned streams still end their spans.

The real OpenAI SDK streams from ``ctxscope.testing``'s server; the failure is
one of ours (reading a stream event raises), as a bug or an unexpected event
would make it. A handler that keeps records, as ``MemoryHandler`` and pytest's
``caplog`` do, used to keep each stream alive through the record's traceback.
"""

from __future__ import annotations

import gc
import logging
import logging.handlers

import pytest

from _instr_support import instrumented
from ctxscope import faultlog
from ctxscope.instrumentation.openai import ChatStreamState, OpenAIInstrumentor
from ctxscope.schema import Attr
from ctxscope.testing import ProviderServer, Reply

MESSAGES = [{"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def server():
    with ProviderServer() as s:
        yield s


@pytest.fixture
def keeping_handler():
    """A MemoryHandler that keeps every ctxscope record (it never flushes below CRITICAL+1)."""
    handler = logging.handlers.MemoryHandler(capacity=100_000, flushLevel=logging.CRITICAL + 1)
    logger = logging.getLogger("ctxscope")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    faultlog.reset()
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        handler.buffer.clear()


def test_abandoned_streams_end_their_spans_while_a_handler_keeps_the_warnings(server, monkeypatch,
                                                                             keeping_handler):
    """20 streams read one chunk each (reading it fails: a warning), then dropped: 20 of 20 spans end
    (0 of 20 on main), with the 7 estimated tokens of the request; one WARNING, the rest at DEBUG, none
    holding an exception or a traceback."""
    def broken(self, chunk):
        raise ValueError("an event we cannot read")

    monkeypatch.setattr(ChatStreamState, "observe", broken)
    with instrumented(server, monkeypatch, OpenAIInstrumentor) as tel:
        client = server.openai_client()
        for _ in range(20):
            server.reply(Reply.text("a b c d"))
            stream = client.chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True)
            next(stream)
            del stream
        gc.collect()
        calls = tel.calls()
    assert len(calls) == 20
    # chars/4 without framing: "hello there" is 11 chars -> 3 tokens, on every call.
    assert [c.attributes[Attr.ESTIMATED_TOKENS] for c in calls] == [3] * 20
    records = [r for r in keeping_handler.buffer if "could not read a stream event" in r.getMessage()]
    assert [r.levelno for r in records] == [logging.WARNING] + [logging.DEBUG] * 19
    assert all(r.exc_info is None and r.exc_text is None for r in records)
    assert "ValueError: an event we cannot read" in records[0].getMessage()  # the traceback, as text
    assert records[1].getMessage().endswith(": ValueError: an event we cannot read")


def test_log_failure_holds_no_reference_to_the_frames(keeping_handler):
    """The record of a failure keeps no object of the failing frame alive (checked with a weak reference)."""
    import weakref

    class Payload:
        pass

    def fail(payload: Payload) -> None:
        raise RuntimeError("boom")

    payload = Payload()
    ref = weakref.ref(payload)
    try:
        fail(payload)
    except RuntimeError:
        faultlog.log_failure(logging.getLogger("ctxscope.test"), "ctxscope: could not %s", "test")
    del payload
    gc.collect()
    assert ref() is None
    assert len(keeping_handler.buffer) == 1
