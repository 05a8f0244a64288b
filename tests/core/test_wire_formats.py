"""One conformance suite for every wire format (ctxscope.apis): detection, items, reported input, fingerprint.

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
from ctxscope import apis
from ctxscope.conversation import fingerprint
from ctxscope.items import items_from_request
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


CASES = list(_recordings()) + _sdk_responses_bodies()


def _expected_reported(api: str, usage: Any) -> int | None:
    """SPEC section 4, worked from the raw JSON."""
    if not isinstance(usage, dict):
        return None
    if api == "openai.chat":
        return usage.get("prompt_tokens")
    if api == "openai.responses":
        return usage.get("input_tokens")
    sent = usage["iterations"][0] if usage.get("iterations") else usage
    if sent.get("input_tokens") is None:
        return None
    return sent["input_tokens"] + (sent.get("cache_creation_input_tokens") or 0) + \
        (sent.get("cache_read_input_tokens") or 0)


def test_every_format_is_exercised():
    seen = {apis.for_path(urlparse(record["uri"]).path) for _, record in CASES}
    assert seen >= set(apis.APIS), seen


@pytest.mark.parametrize("name,record", CASES, ids=[name for name, _ in CASES])
def test_format_conformance(name: str, record: dict[str, Any]):
    body, response = record["request"], record.get("response")
    by_path = apis.for_path(urlparse(record["uri"]).path)
    assert by_path in apis.APIS, record["uri"]

    # Detection: the body's shape names the API its URL names.
    api = apis.detect(body)
    assert api == by_path
    wire = apis.get(api)
    assert wire.id == api and wire.provider in ("openai", "anthropic")

    # Items: every item has a category of the contract and counts its characters.
    items = items_from_request(body, api)
    assert items, name
    assert all(isinstance(i.category, Category) and i.chars >= 0 and i.part for i in items)

    # Reported input: SPEC section 4, as worked out above.
    usage = response.get("usage") if isinstance(response, dict) else None
    assert apis.reported_input(api, response) == _expected_reported(api, usage)

    # Fingerprint: one session key for the body on the live path and read as a transcript,
    # and the same key once the conversation grew (only system and first user message seed it).
    key = fingerprint(body, api)
    calls = MessagesReader().feed({"request": body, "response": response}, 1)
    assert [c.session_id for c in calls] == [key]
    grown = dict(body)
    messages_key = "input" if api == "openai.responses" else "messages"
    if isinstance(body.get(messages_key), list):
        grown[messages_key] = [*body[messages_key], {"role": "user", "content": "and one more thing"}]
        assert fingerprint(grown, api) == key
