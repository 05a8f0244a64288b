"""The transport layer's readers: request bodies parsed from where they grew, response framings split anywhere."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxscope.instrumentation.http._bodies import BodyCache
from ctxscope.instrumentation.http._frames import JsonArray, JsonLines, ServerSentEvents, WholeJson

TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
MESSAGE = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool"]), "content": TEXT})
STEP = st.one_of(
    st.tuples(st.just("append"), st.lists(MESSAGE, min_size=1, max_size=3)),
    st.tuples(st.just("rewrite-last"), MESSAGE),
    st.tuples(st.just("edit-first"), MESSAGE),
    st.tuples(st.just("tools"), st.lists(TEXT, max_size=2)),
    st.tuples(st.just("toggle-tools"), st.none()),  # the field after the array comes and goes
)


@settings(max_examples=150, deadline=None)
@given(st.lists(STEP, min_size=1, max_size=12), st.booleans(), st.booleans())
def test_every_body_parses_to_what_json_says(steps, ascii_only, compact):
    """Appends, a rewritten last message, an edited history, new tools: the cache always gives json.loads' value."""
    cache = BodyCache()
    messages = [{"role": "system", "content": "sys"}]
    tools: list | None = None
    separators = (",", ":") if compact else (", ", ": ")
    for kind, value in steps:
        if kind == "append":
            messages = messages + value
        elif kind == "rewrite-last":
            messages = messages[:-1] + [value]
        elif kind == "edit-first":
            messages = [value] + messages[1:]
        elif kind == "toggle-tools":
            tools = [{"d": [{"name": "x"}]}] if tools is None else None
        else:
            tools = value
        body = {"model": "m", "messages": messages}
        if tools is not None:
            body["tools"] = tools
        raw = json.dumps(body, ensure_ascii=ascii_only, separators=separators).encode()
        expected = json.loads(raw)
        fields = cache.peek(raw, "messages")  # the caller's thread: the fields around the conversation
        if fields is not None:  # exact for each field it has; it misses a field put right before a short tail
            assert fields["messages"] == [] and all(expected[k] == v for k, v in fields.items() if k != "messages")
        assert cache.parse(raw, "messages") == expected  # the worker: the whole body


def test_an_appended_body_keeps_the_old_message_objects():
    """The next body of a growing conversation: the old messages are the last call's objects, the new ones parsed."""
    cache = BodyCache()
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello there"}]
    first = cache.parse(json.dumps({"model": "m", "messages": messages, "tools": []}).encode(), "messages")
    messages.append({"role": "assistant", "content": "ok"})
    second = cache.parse(json.dumps({"model": "m", "messages": messages, "tools": []}).encode(), "messages")
    assert second["messages"] == messages
    assert second["messages"][0] is first["messages"][0] and second["messages"][1] is first["messages"][1]
    # A client moving its cache marker to the newest message rewrites the one before: all but it are kept.
    messages[-1] = {**messages[-1], "cache_control": {"type": "ephemeral"}}
    messages.append({"role": "user", "content": "next"})
    third = cache.parse(json.dumps({"model": "m", "messages": messages, "tools": []}).encode(), "messages")
    assert third["messages"] == messages and third["messages"][1] is first["messages"][1]
    assert third["messages"][2] is not second["messages"][2]


def test_the_callers_thread_peeks_at_a_known_conversations_next_body():
    """peek: the fields around the conversation of a body whose ends are a remembered body's, without reading the
    conversation (``[]`` in its place); None for a new conversation or a changed field. The worker's parse then
    gives the whole body, its old messages the last call's objects."""
    cache = BodyCache()
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "hello there"}]
    tools = [{"type": "function", "function": {"name": "t"}}]
    first_raw = json.dumps({"model": "m", "messages": messages, "tools": tools, "stream": True}).encode()
    assert cache.peek(first_raw, "messages") is None  # nothing remembered yet
    first = cache.parse_whole(first_raw, "messages")
    messages = messages + [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "more"}]
    grown = json.dumps({"model": "m", "messages": messages, "tools": tools, "stream": True}).encode()
    fields = cache.peek(grown, "messages")
    assert fields == {"model": "m", "messages": [], "tools": tools, "stream": True}
    assert fields["tools"] is first["tools"]  # the remembered objects: nothing parsed
    assert cache.peek(json.dumps({"model": "other", "messages": messages, "tools": tools}).encode(),
                      "messages") is None  # the model is before the array: the head differs
    assert cache.peek(json.dumps({"model": "m", "messages": messages, "tools": [], "stream": True}).encode(),
                      "messages") is None  # new tools: the tail differs
    whole = cache.parse(grown, "messages")
    assert whole == json.loads(grown) and whole["messages"][1] is first["messages"][1]
    # The ends of the last body, a middle that is not messages (a field put right before its tail): the peek
    # has the ends' fields, the worker's parse the truth, the field the peek could not see included.
    odd = grown.replace(b'], "tools"', b'], "extra": [1], "tools"', 1)
    assert cache.peek(odd, "messages") == fields
    assert cache.parse(odd, "messages") == json.loads(odd) and json.loads(odd)["extra"] == [1]


def test_a_body_without_the_array_is_parsed_whole():
    cache = BodyCache()
    assert cache.parse(b'{"model": "m", "prompt": "hi"}', "messages") == {"model": "m", "prompt": "hi"}


def _split_everywhere(data: bytes, reader_class) -> list[list]:
    """The documents a reader gives for ``data`` cut into two pieces at every offset."""
    results = []
    for cut in range(len(data) + 1):
        reader = reader_class()
        out = reader.feed(data[:cut]) + reader.feed(data[cut:]) + reader.close()
        results.append(out)
    return results


def test_server_sent_events_split_anywhere():
    """CRLF or LF, [DONE], multi-line data, a comment: the same documents wherever the bytes are cut."""
    data = (b'event: a\r\ndata: {"n": 1}\r\n\r\n: comment\n\ndata: {"n":\ndata: 2}\n\ndata: [DONE]\n\n')
    for out in _split_everywhere(data, ServerSentEvents):
        assert out == [{"n": 1}, {"n": 2}]


def test_a_json_array_stream_split_anywhere():
    """Gemini without alt=sse: elements handed out whole, braces inside strings ignored."""
    data = b'[{"a": "}{\\"", "b": [1, {"c": 2}]}\r\n,\r\n{"a": 3}]'
    for out in _split_everywhere(data, JsonArray):
        assert out == [{"a": '}{"', "b": [1, {"c": 2}]}, {"a": 3}]


def test_json_lines_and_whole_json_split_anywhere():
    for out in _split_everywhere(b'{"a": 1}\n{"b": 2}\n', JsonLines):
        assert out == [{"a": 1}, {"b": 2}]
    for out in _split_everywhere(b'{"a": [1, 2]}', WholeJson):
        assert out == [{"a": [1, 2]}]


def test_a_tail_that_only_looks_the_same_is_not_trusted():
    """Old body ends in "]}" after its messages; the new one adds a field whose value ends in "]}" too."""
    cache = BodyCache()
    old = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    cache.parse(json.dumps(old).encode(), "contents")
    new = {**old, "tools": [{"functionDeclarations": [{"name": "read"}]}]}
    assert cache.parse(json.dumps(new).encode(), "contents") == new
