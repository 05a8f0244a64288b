"""One conformance suite for every wire format (ctxscope.core.apis): detection, items, reported input, fingerprint.

Each format runs through the same checks on real requests: the recordings in
``../shared/corpus/api`` (chat completions and Anthropic Messages; CI has
them), the small slices of them in ``tests/data`` (everywhere), and, for the
Responses API, of which the corpus holds no recording, the bodies the real
``openai`` SDK sends to ``ctxscope.testing``'s server. The expected reported
input is worked out here from the raw JSON by SPEC section 4's table, not
by the code under test.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest

from conftest import CORPUS, DATA
from ctxscope.core import apis
from ctxscope.core import framing
from ctxscope.core.framing.incremental import FramingCache
from ctxscope.core.conversation import fingerprint
from ctxscope.core.items import items_from_request
from ctxscope.schema import Category
from ctxscope.testing import ProviderServer
from ctxscope.transcripts.messages import MessagesReader


def _recordings() -> Iterator[tuple[str, dict[str, Any]]]:
    files = sorted(DATA.glob("requests_*.jsonl"))
    if CORPUS.is_dir():
        files += sorted((CORPUS / "api").rglob("*.requests.jsonl"))
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            yield f"{path.name}:{number}", json.loads(line)


def _sdk_responses_bodies() -> list[tuple[str, dict[str, Any]]]:
    """Responses bodies as the real openai SDK writes them, with the server's answer."""
    out = []
    with ProviderServer() as server:
        client = server.openai_client()
        calls = [
            dict(model="gpt-4o", input="Say hi."),
            dict(model="gpt-4o", instructions="You are terse.", input=[{"role": "user", "content": "Plan a trip."}],
                 tools=[{"type": "function", "name": "search", "description": "Search the web.",
                         "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}]),
            dict(model="gpt-5", input=[{"role": "developer", "content": "Be exact."},
                                       {"role": "user", "content": [{"type": "input_text", "text": "2+2?"}]}]),
        ]
        for index, kwargs in enumerate(calls):
            response = client.responses.create(**kwargs)
            request = server.requests[-1]
            out.append((f"sdk-responses:{index}", {"uri": "http://local" + request.path, "request": request.body,
                                                  "response": response.model_dump(mode="json")}))
    return out


def _client_bodies() -> list[tuple[str, dict[str, Any]]]:
    """Gemini and Ollama bodies as their real clients (google-genai, ollama) write them, with the answer."""
    out: list[tuple[str, dict[str, Any]]] = []
    with ProviderServer() as server:
        try:
            from google.genai import types
        except ImportError:  # pragma: no cover - the dev extra installs it
            types = None
        if types is not None:
            config = types.GenerateContentConfig(system_instruction="You are terse.")
            client = server.gemini_client()  # held: the client closes its connection pool when collected
            answer = client.models.generate_content(model="gemini-2.5-flash", contents="Say hi.", config=config)
            request = server.requests[-1]
            out.append(("google-genai:0", {"uri": "http://local" + request.path, "request": request.body,
                                           "response": answer.model_dump(mode="json", by_alias=True)}))
        try:
            import ollama  # noqa: F401
        except ImportError:  # pragma: no cover
            pass
        else:
            answer = server.ollama_client().chat(model="llama3.2", stream=False, messages=[
                {"role": "system", "content": "Be exact."}, {"role": "user", "content": "2+2?"}])
            request = server.requests[-1]
            out.append(("ollama:0", {"uri": "http://local" + request.path, "request": request.body,
                                     "response": answer.model_dump(mode="json")}))
    return out


def count(text: str) -> int:
    return -(-len(text) // 4)  # chars/4, rounded up: the counting basis does not matter here


CASES = list(_recordings()) + _sdk_responses_bodies() + _client_bodies()


def _expected_reported(api: str, usage: Any) -> int | None:
    """SPEC section 4, worked from the raw JSON."""
    if not isinstance(usage, dict):
        return None
    if api == "openai.chat":
        return usage.get("prompt_tokens")
    if api == "openai.responses":
        return usage.get("input_tokens")
    if api == "gemini.generate_content":
        return usage.get("promptTokenCount")
    if api == "ollama.chat":
        return usage.get("prompt_eval_count")
    # The context the model saw: the first "message" sampling of usage.iterations, else the usage.
    sent = next((i for i in usage.get("iterations") or () if i.get("type") == "message"), usage)
    if sent.get("input_tokens") is None:
        return None
    return sent["input_tokens"] + (sent.get("cache_creation_input_tokens") or 0) + \
        (sent.get("cache_read_input_tokens") or 0)


def test_every_format_is_exercised():
    seen = {apis.for_path(urlparse(record["uri"]).path) for _, record in CASES}
    assert seen == {wire.id for wire in apis.WIRE_FORMATS}, seen


@pytest.mark.parametrize("name,record", CASES, ids=[name for name, _ in CASES])
def test_format_conformance(name: str, record: dict[str, Any]):
    body, response = record["request"], record.get("response")
    by_path = apis.for_path(urlparse(record["uri"]).path)
    assert by_path is not None, record["uri"]

    # Detection: the body's shape names the API its URL names (Ollama's native body is chat-shaped:
    # its URL alone tells it apart).
    api = by_path
    assert apis.detect(body) == (api if api != "ollama.chat" else "openai.chat")
    wire = apis.get(api)
    assert wire.id == api and wire.provider in ("openai", "anthropic", "gcp.gemini", "ollama")

    # Items: every item has a category of the contract and counts its characters.
    items = items_from_request(body, api)
    assert items, name
    assert all(isinstance(i.category, Category) and i.chars >= 0 and i.part for i in items)

    # Reported input: SPEC section 4, as worked out above.
    usage = response.get("usage") if isinstance(response, dict) else None
    if api == "gemini.generate_content":
        usage = response.get("usageMetadata")
    elif api == "ollama.chat":
        usage = response
    assert apis.reported_input(api, response) == _expected_reported(api, usage)

    # Fingerprint: one session key for the body on the live path and read as a transcript,
    # and the same key once the conversation grew (only system and first user message seed it).
    key = fingerprint(body, api)
    if api in apis.APIS:  # the message-array transcript reader reads these three
        calls = MessagesReader().feed({"request": body, "response": response}, 1)
        assert [c.session_id for c in calls] == [key]
    grown = dict(body)
    messages_key = {"openai.responses": "input", "gemini.generate_content": "contents"}.get(api, "messages")

    # The format's own answers for its items and framing: where the conversation is, and that it is
    # walked (one message at a time, as the live path extends a session) into the same items.
    assert wire.conversation_field == messages_key
    conversation = wire.conversation(body)
    if isinstance(body.get(messages_key), list):
        # Anthropic drops what precedes a compaction block; nothing else is left out.
        assert 0 < len(conversation) <= len(body[messages_key]) or not body[messages_key]
    framed = framing.framing_items(body, api, count)
    assert framed and all(i.fixed_tokens is not None and i.fixed_tokens >= 0 for i in framed), name
    assert [(i.part, i.fixed_tokens) for i in FramingCache().framing_items(body, api, count)] == \
        [(i.part, i.fixed_tokens) for i in framed]
    if isinstance(body.get(messages_key), list):
        more = {"role": "user", "parts": [{"text": "and one more"}]} if api == "gemini.generate_content" else \
            {"role": "user", "content": "and one more thing"}
        grown[messages_key] = [*body[messages_key], more]
        assert fingerprint(grown, api) == key


@pytest.mark.parametrize("name,record", CASES, ids=[name for name, _ in CASES])
def test_format_answers_the_live_path(name: str, record: dict[str, Any]):
    """What the transport layer, content capture and the tracker ask each format, on its real bodies:
    the body has the shape its endpoint takes, its messages are captured one for one, and only a
    format that keeps state at the provider (Responses) names any."""
    body = record["request"]
    api = apis.for_path(urlparse(record["uri"]).path)
    assert api is not None
    wire = apis.get(api)
    assert wire.body_fits(body), name
    assert not wire.body_fits({"model": "m"}), name  # no conversation: not a body of this API

    system, messages, tools = wire.input_content(body)
    conversation = body.get(wire.conversation_field)
    assert len(messages) == (len(conversation) if isinstance(conversation, list) else 1), name
    assert all(isinstance(m["role"], str) and isinstance(m["parts"], list) for m in messages)
    assert all(isinstance(p, dict) and isinstance(p.get("type"), str) for m in messages for p in m["parts"])
    assert all(p["type"] == "text" for p in system)

    if not wire.server_state:
        assert wire.provider_conversation(body) is None and wire.previous_response(body) is None
        assert wire.stored_context(body) is False


def test_responses_names_the_state_the_provider_keeps():
    """Responses: a conversation object (an id or ``{"id"}``) and an earlier response are state kept at
    the provider; either makes the body a partial view. Worked by hand from the API's documented fields."""
    wire = apis.get(apis.API_OPENAI_RESPONSES)
    assert wire.server_state
    plain = {"model": "gpt-4o", "input": "hi"}
    assert (wire.provider_conversation(plain), wire.previous_response(plain), wire.stored_context(plain)) == \
        (None, None, False)
    for conversation in ("conv_123", {"id": "conv_123"}):
        body = {**plain, "conversation": conversation}
        assert wire.provider_conversation(body) == "conv_123" and wire.stored_context(body)
    assert wire.provider_conversation({**plain, "conversation": ""}) is None
    chained = {**plain, "previous_response_id": "resp_1"}
    assert wire.previous_response(chained) == "resp_1" and wire.stored_context(chained)
    assert wire.provider_conversation(chained) is None
    # A conversation object without an id still tells that the provider prepends context.
    odd = {**plain, "conversation": {"name": "x"}}
    assert wire.provider_conversation(odd) is None and wire.stored_context(odd)
