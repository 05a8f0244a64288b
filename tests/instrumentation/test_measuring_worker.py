"""The measuring worker: the composition measured off the call path, in order, nothing lost (issue 16)."""

from __future__ import annotations

import logging
import threading

import pytest

pytest.importorskip("openai")
pytest.importorskip("wrapt")

from _instr_support import attr, categories, instrumented  # noqa: E402
from ctxscope.core.conversation import mark_compaction, session  # noqa: E402
from ctxscope.instrumentation import _worker  # noqa: E402
from ctxscope.instrumentation.openai import OpenAIInstrumentor  # noqa: E402
from ctxscope.schema import Attr  # noqa: E402
from ctxscope.testing import ProviderServer, Reply, wait_for_measurements  # noqa: E402


@pytest.fixture(scope="module")
def server():
    with ProviderServer(default=Reply.text("ok")) as s:
        yield s


def test_jobs_run_in_submission_order_and_a_full_queue_runs_inline_after_the_rest(caplog):
    """A queue of two full while the worker is held: the third runs inline after the two; said once."""
    worker = _worker.MeasuringWorker(max_pending=2)
    ran: list[int] = []
    gate = threading.Event()
    worker.submit(gate.wait, "gate")  # the worker thread blocks here
    while worker.pending != 1 or len(worker._jobs):  # noqa: SLF001 - wait until the gate job runs
        pass
    caplog.set_level(logging.WARNING, logger="ctxscope.instrumentation")
    for n in range(2):
        worker.submit(lambda n=n: ran.append(n), "job")
    runner = threading.Thread(target=lambda: worker.submit(lambda: ran.append(2), "job"))
    runner.start()
    while worker.inline_runs != 1:  # the third is waiting to run inline
        pass
    gate.set()
    runner.join(10)
    worker.submit(lambda: ran.append(3), "job")  # room again: queued
    assert worker.drain(10)
    assert ran == [0, 1, 2, 3]
    assert worker.inline_runs == 1
    assert sum("measuring on the caller's thread" in r.getMessage() for r in caplog.records) == 1


def test_a_failing_job_is_logged_and_the_next_one_runs(caplog):
    worker = _worker.MeasuringWorker()
    ran: list[str] = []
    caplog.set_level(logging.WARNING, logger="ctxscope.instrumentation")
    worker.submit(lambda: 1 / 0, "boom")
    worker.submit(lambda: ran.append("after"), "next")
    assert worker.drain(10)
    assert ran == ["after"]
    assert any("measuring a call failed (boom)" in r.getMessage() for r in caplog.records)


def test_a_drain_inside_a_job_does_not_run_the_jobs_after_it():
    worker = _worker.MeasuringWorker()
    ran: list[str] = []
    gate = threading.Event()
    worker.submit(gate.wait, "gate")  # both jobs are queued before either runs
    worker.submit(lambda: ran.append(f"first, drained {worker.drain(1)}"), "a")
    worker.submit(lambda: ran.append("second"), "b")
    gate.set()
    assert worker.drain(10)
    assert ran == ["first, drained False", "second"]


def test_the_history_appended_after_the_call_returns_is_not_measured(server, monkeypatch):
    """The agent appends to the very list it sent: the span still measures the list as sent (2 messages)."""
    with instrumented(server, monkeypatch, OpenAIInstrumentor) as tel:
        client = server.openai_client()
        messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello there"}]
        with session("appends"):
            client.chat.completions.create(model="gpt-4o", messages=messages)
            messages.append({"role": "assistant", "content": "x" * 4000})  # before the worker may have run
        call = tel.one_call()
    # chars/4 without framing: "You are terse." 14 -> 4, "hello there" 11 -> 3.
    assert categories(call) == {"system": 4, "prompts": 3}
    assert attr(call, Attr.ESTIMATED_TOKENS) == 7


def test_the_first_call_of_a_long_session_carries_its_composition(server, monkeypatch):
    """A 600-message history's first call: the composition (baseline, every category) is on that call's span."""
    with instrumented(server, monkeypatch, OpenAIInstrumentor) as tel:
        client = server.openai_client()
        messages = [{"role": "system", "content": "You are terse."}]
        messages += [{"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n:04d}"}
                     for n in range(600)]
        with session("long"):
            client.chat.completions.create(model="gpt-4o", messages=messages)
        call = tel.one_call()
    # "turn 0000" is 9 chars -> 3 tokens each; 300 user and 300 assistant turns; the system prompt 4.
    assert categories(call) == {"system": 4, "prompts": 900, "assistant": 900}
    assert attr(call, Attr.BASELINE) is True
    assert attr(call, Attr.SESSION_ID) == "long"


def test_a_compaction_declared_after_a_call_returns_belongs_to_the_next_call(server, monkeypatch):
    """mark_compaction right after call 1 returns, its measurement maybe still pending: call 2 is post-compaction."""
    with instrumented(server, monkeypatch, OpenAIInstrumentor) as tel:
        client = server.openai_client()
        first = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "a" * 400}]
        with session("compacts"):
            client.chat.completions.create(model="gpt-4o", messages=first)
            mark_compaction("manual")
            client.chat.completions.create(model="gpt-4o", messages=[first[0], {"role": "user", "content": "b"}])
        assert wait_for_measurements()
        calls = tel.calls()
        post = tel.spans("post-compaction")
    assert [attr(c, Attr.SESSION_ID) for c in calls] == ["compacts", "compacts"]
    assert len(post) == 1 and post[0].parent.span_id == calls[1].context.span_id
    assert attr(post[0], "llm.context.compaction.trigger") == "manual"


def test_each_of_two_compactions_declared_before_either_call_is_measured_reaches_its_call(server, monkeypatch):
    """The worker measures calls after they return: a second declaration does not replace the first.

    Calls 2 and 3 each follow a declared compaction (manual, then auto) and
    nothing is measured before the last call returns (the worker is held
    until then): two post-compaction spans, on calls 2 and 3, with their own triggers.
    """
    with instrumented(server, monkeypatch, OpenAIInstrumentor) as tel:
        client = server.openai_client()
        system = {"role": "system", "content": "You are terse."}
        gate = threading.Event()
        _worker.worker().submit(gate.wait, "gate")  # the calls below queue behind it, unmeasured
        with session("twice"):
            client.chat.completions.create(model="gpt-4o", messages=[system, {"role": "user", "content": "a" * 400}])
            mark_compaction("manual")
            client.chat.completions.create(model="gpt-4o", messages=[system, {"role": "user", "content": "b" * 40}])
            mark_compaction("auto")
            client.chat.completions.create(model="gpt-4o", messages=[system, {"role": "user", "content": "c"}])
        assert _worker.worker().pending >= 6  # three requests, three responses: none measured yet
        gate.set()
        assert wait_for_measurements()
        calls = tel.calls()
        post = tel.spans("post-compaction")
    assert len(calls) == 3
    by_parent = {p.parent.span_id: attr(p, "llm.context.compaction.trigger") for p in post}
    assert by_parent == {calls[1].context.span_id: "manual", calls[2].context.span_id: "auto"}


def test_a_job_queued_without_a_wake_runs_with_no_one_draining():
    """The call path queues silently (wake=False): the worker finds the job by itself, in order, on its thread."""
    worker = _worker.MeasuringWorker()
    worker.start()
    ran: list[tuple[str, str]] = []
    done = threading.Event()
    worker.submit(lambda: ran.append(("request", threading.current_thread().name)), "request", wake=False)
    worker.submit(lambda: (ran.append(("response", threading.current_thread().name)), done.set()), "response",
                  wake=False)
    assert done.wait(10 * _worker.LOOK_EVERY_S + 5)  # one look every LOOK_EVERY_S; generous on a busy machine
    assert ran == [("request", "ctxscope-measure"), ("response", "ctxscope-measure")]
