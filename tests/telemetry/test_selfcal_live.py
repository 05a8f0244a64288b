"""Provider framing and self-calibration on the live path (tracker, spans, metrics, store).

The real openai SDK talks to ``ctxscope.testing``'s server, whose reported
input is documented: 10 hidden tokens (here 500, like a hidden system prompt)
plus ``ceil(len / 4)`` of every string under ``messages``/``tools`` (role
names included). Counting is chars/4, so every value is worked out by hand:

- items: "You are terse." 14 chars -> 4 (system), "hello there" 11 -> 3 (prompts);
- OpenAI chat framing (docs/fidelity.md): 3 + the role's tokens a message
  ("system" 2, "user" 1, "assistant" 3), 3 for the reply priming.

So a two-message request (system + user) has overhead 5 + 4 + 3 = 12, and the
server reports ``500 + 2 + 4 + 1 + ceil(user/4)``: estimate ``4 + ceil(user/4) + 12``,
a constant residual of 500 + 7 - 16 = 491 that self-calibration learns.
"""

from __future__ import annotations

import json
import os
import random
import stat

import pytest

from ctxscope.core import framing
from ctxscope.core.framing.incremental import FramingCache
from ctxscope.instrumentation.openai import OpenAIInstrumentor
from ctxscope.core.observation import Usage
from ctxscope.schema import Attr, Category
from ctxscope.telemetry.store import LocalStore
from ctxscope.testing import ProviderServer
from ctxscope.core.tokens import CharsCounter
from ctxscope.telemetry.tracker import Tracker, calibration_key

from _instr_support import attr, categories, make_telemetry, metered, token_gauges
from conftest import CORPUS, requires_corpus

SYSTEM = {"role": "system", "content": "You are terse."}
HIDDEN = 500
RESIDUAL = HIDDEN + 7 - 16  # see the module docstring: 491
CHAT = "openai.chat"


def turn(text: str) -> list[dict[str, str]]:
    return [SYSTEM, {"role": "user", "content": text}]


@pytest.fixture(scope="module")
def server():
    with ProviderServer(overhead_tokens=HIDDEN) as s:
        yield s


@pytest.fixture
def live(server):
    """Instrumented openai SDK, a chars/4 tracker, and a metric reader behind the span processor."""
    server.reset()
    tel = make_telemetry()
    tel.tracker = Tracker(tokenizer="chars")  # framing on, as in production (make_telemetry's is raw)
    instrumentor = OpenAIInstrumentor()
    with metered(tel) as reader:
        instrumentor.instrument(tracer_provider=tel.provider, tracker=tel.tracker)
        yield tel, reader, server.openai_client()
        instrumentor.uninstrument()


def test_live_span_has_overhead_worked_out_by_hand(live):
    """A chat call through the SDK: system 4, prompts 3, overhead 5 + 4 + 3 = 12; reported 500+2+4+1+3 = 510."""
    tel, reader, client = live
    client.chat.completions.create(model="gpt-4o", messages=turn("hello there"))
    span = tel.one_call()
    assert categories(span) == {"system": 4, "prompts": 3, "overhead": 12}
    assert attr(span, Attr.ESTIMATED_TOKENS) == 19
    assert attr(span, Attr.REPORTED_TOKENS) == 510
    # Nothing learned before the first call: no correction on its span.
    assert attr(span, Attr.LEARNED_CORRECTION_TOKENS) is None
    session = attr(span, Attr.SESSION_ID)
    assert token_gauges(reader, session) == {"system": 4, "prompts": 3, "overhead": 12, "unattributed": 491}


def test_tool_rendering_and_functions_block_live(live):
    """One tool: tools 15 (the rendered TypeScript, 59 chars), overhead 12 + the functions block 6+6+9-4 = 29."""
    tel, _, client = live
    tool = {"type": "function", "function": {
        "name": "read", "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}
    client.chat.completions.create(model="gpt-4o", messages=turn("hello there"), tools=[tool])
    span = tel.one_call()
    # With a system message the functions block is 4 smaller (hmarr/openai-chat-tokens).
    assert categories(span) == {"system": 4, "tools": 15, "prompts": 3, "overhead": 12 + 17}


def test_stream_without_usage_gets_the_learned_correction(live):
    """Three calls teach +491; a stream without include_usage then shows 20 estimated + 491 = 511 calibrated."""
    tel, reader, client = live
    for text in ("hello there", "what is in src/", "read the README file please"):
        client.chat.completions.create(model="gpt-4o", messages=turn(text))
    spans = tel.calls()
    # The second and third calls carry what the earlier ones taught (offset 491).
    assert [attr(s, Attr.LEARNED_CORRECTION_TOKENS) for s in spans] == [None, RESIDUAL, RESIDUAL]
    stream = client.chat.completions.create(model="gpt-4o", messages=turn("stream please"), stream=True)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    assert text == "ok"
    span = tel.calls()[-1]
    # "stream please" is 13 chars: 4; estimate 4 + 4 + 12 = 20; no usage arrived.
    assert attr(span, Attr.ESTIMATED_TOKENS) == 20 and attr(span, Attr.REPORTED_TOKENS) is None
    assert attr(span, Attr.LEARNED_CORRECTION_TOKENS) == RESIDUAL
    # The raw annotation stays unscaled; the calibrated view (metrics) adds the correction:
    # 20 + 491 = 511, what the server would have reported (500 + 2 + 4 + 1 + 4).
    session = attr(span, Attr.SESSION_ID)
    assert token_gauges(reader, session) == {"system": 4, "prompts": 4, "overhead": 12, "unattributed": 491}


def body(text: str, **extra) -> dict:
    return {"model": "gpt-4o", "messages": turn(text), **extra}


def teach(tracker: Tracker, texts, *, session: str = "s", **usage_extra) -> list:
    """Observe a request and its usage per text, with the server's rule for the reported input."""
    calls = []
    for text in texts:
        call = tracker.observe_request(body(text), CHAT, provider="openai", session_id=session)
        reported = call.snapshot.annotation.estimated_tokens + RESIDUAL
        tracker.observe_response(call, Usage(reported_input=reported, **usage_extra))
        calls.append(call)
    return calls


def test_learning_survives_a_new_tracker_through_the_store(tmp_path):
    """Tracker 1 learns +491 and saves it (owner-only file); tracker 2 on the same store knows it at once."""
    store = LocalStore(tmp_path)
    first = Tracker(tokenizer="chars")
    first.use_calibration_store(store)
    teach(first, ["one", "two two", "three three three"])
    first.use_calibration_store(None)  # detaching saves what the save interval held back
    key = calibration_key("gpt-4o", "chars/4")
    saved = store.load_calibration(key)
    assert saved is not None and len(saved["pairs"][0]["pairs"]) == 3
    files = list((tmp_path / "calibration").iterdir())
    assert len(files) == 1 and stat.S_IMODE(os.stat(files[0]).st_mode) == 0o600

    second = Tracker(tokenizer="chars")
    second.use_calibration_store(store)
    call = second.observe_request(body("a brand new session"), CHAT, provider="openai", session_id="n")
    assert call.snapshot.annotation.learned_correction_tokens == RESIDUAL
    # Without the store a new tracker knows nothing.
    bare = Tracker(tokenizer="chars").observe_request(body("x"), CHAT, provider="openai", session_id="n")
    assert bare.snapshot.annotation.learned_correction_tokens is None


def test_failed_partial_and_server_tool_calls_teach_nothing():
    """An error, a chained Responses request and a server-tool run (or an unknown one) are never learned from."""
    tracker = Tracker(tokenizer="chars")
    call = tracker.observe_request(body("boom"), CHAT, provider="openai", session_id="e")
    tracker.observe_response(call, Usage(reported_input=999), error="APIError")
    chained = tracker.observe_request({"model": "gpt-4o", "input": "next", "previous_response_id": "resp_1"},
                                      "openai.responses", provider="openai", session_id="p")
    tracker.observe_response(chained, Usage(reported_input=999))
    assert chained.calibration_key is None  # partial coverage: not even keyed
    search = {"type": "web_search_20250305", "name": "web_search"}
    anthropic = {"model": "claude-sonnet-4-5", "max_tokens": 5, "tools": [search],
                 "messages": [{"role": "user", "content": "find it"}]}
    for usage in (Usage(reported_input=5000), Usage(reported_input=5000, server_tool_calls=2)):
        run = tracker.observe_request(anthropic, "anthropic.messages", provider="anthropic", session_id="w")
        tracker.observe_response(run, usage)
    assert tracker.calibrator.corrections() == []
    # A server-tool request known to have run none is learned, under its own tool set only.
    quiet = tracker.observe_request(anthropic, "anthropic.messages", provider="anthropic", session_id="w")
    tracker.observe_response(quiet, Usage(reported_input=quiet.snapshot.annotation.estimated_tokens + 3000,
                                          server_tool_calls=0))
    assert [(c.tools_key.startswith("s:"), c.offset) for c in tracker.calibrator.corrections()] == [(True, 3000.0)]


def test_framing_off_tracker_has_no_overhead():
    """Tracker(framing=False): the items' raw content only (system 4 + prompts 3)."""
    call = Tracker(tokenizer="chars", framing=False).observe_request(
        body("hello there"), CHAT, provider="openai", session_id="r")
    assert call.snapshot.annotation.categories == {Category.SYSTEM: 4, Category.PROMPTS: 3}


def _key(items):
    return [(i.id, i.category, i.part, i.fixed_tokens, i.digest) for i in items]


def test_incremental_framing_equals_the_whole_body_under_edits():
    """FramingCache over appends, edits, removals, in-place appends and a new tool equals framing.framing_items."""
    count = CharsCounter().count
    rng = random.Random(7)
    for api, model in ((CHAT, "gpt-4o"), (CHAT, "gpt-5"), ("anthropic.messages", "claude-sonnet-4-5")):
        cache = FramingCache()
        messages: list = [SYSTEM] if api == CHAT else []
        tools = [{"type": "function", "function": {"name": "read", "parameters": {}}}] if api == CHAT else \
            [{"name": "read", "input_schema": {"type": "object"}}]
        for step in range(60):
            action = rng.random()
            n = len(messages)
            if action < 0.55 or n < 3:
                messages = messages + _turns(api, step)
            elif action < 0.7:
                messages = messages[: rng.randrange(1, n)]  # rewind
            elif action < 0.8:
                i = rng.randrange(n)
                messages = messages[:i] + [{"role": "user", "content": f"edited {step}"}] + messages[i + 1:]
            elif action < 0.9 and api == "anthropic.messages" and isinstance(messages[-1].get("content"), list):
                messages[-1]["content"].append({"type": "tool_result", "tool_use_id": f"t{step}", "content": "x"})
            else:
                tools = tools + [dict(tools[0])]
                tools[-1] = {**tools[-1], "name": f"tool{step}"} if api != CHAT else \
                    {"type": "function", "function": {"name": f"tool{step}", "parameters": {}}}
            b = {"model": model, "messages": messages, "tools": tools}
            assert _key(cache.framing_items(b, api, count, model=model)) == \
                _key(framing.framing_items(b, api, count, model=model)), (api, step)


def _turns(api: str, step: int) -> list:
    if api == CHAT:
        return [{"role": "assistant", "content": None, "tool_calls": [
                    {"id": f"c{step}", "type": "function", "function": {"name": "read", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": f"c{step}", "content": "result"},
                {"role": "user", "content": f"next {step}", "name": "me"}]
    return [{"role": "assistant", "content": [{"type": "tool_use", "id": f"t{step}", "name": "read",
                                               "input": {"path": f"f{step}.py", "n": step}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{step}", "content": "r"}]}]


@requires_corpus
def test_incremental_framing_equals_the_whole_body_on_the_corpus(tiktoken_ready):
    """Every corpus API recording: the cache's framing of the body (whole, and after its first half) is the same."""
    from ctxscope.core.fidelity import read_recordings
    from ctxscope.core.tokens import counter_for

    paths = sorted((CORPUS / "api").glob("*/*.jsonl"))
    checked = 0
    for recording in read_recordings(paths):
        counter = counter_for(recording.model)
        expected = _key(framing.framing_items(recording.body, recording.api, counter.count, model=recording.model))
        key = "input" if recording.api == "openai.responses" else "messages"
        history = recording.body.get(key)
        cache = FramingCache()
        if isinstance(history, list) and len(history) > 1:
            cache.framing_items({**recording.body, key: history[: len(history) // 2]}, recording.api,
                                counter.count, model=recording.model, counter_key=counter)
        got = cache.framing_items(recording.body, recording.api, counter.count, model=recording.model,
                                  counter_key=counter)
        assert _key(got) == expected, (recording.path, recording.line)
        checked += 1
    assert checked > 300, json.dumps(checked)
