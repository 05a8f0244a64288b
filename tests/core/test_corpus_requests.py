"""Every recorded request body extracts, adds up and loses nothing.

Runs on the small real slices in tests/data always, and on the whole shared
corpus where ../shared is present.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from conftest import CORPUS, DATA, requires_corpus
from ctxscope.core.items import API_ANTHROPIC, API_OPENAI_CHAT, detect_api, items_from_request, tool_definition_text
from ctxscope.core.ledger import SessionLedger
from ctxscope.core.media import read_pdf
from ctxscope.schema import Category, Stage

FILES = {
    API_ANTHROPIC: CORPUS / "api" / "anthropic" / "pydantic-ai-cassettes.requests.jsonl",
    API_OPENAI_CHAT: CORPUS / "api" / "openai_chat" / "pydantic-ai-cassettes.requests.jsonl",
}
FIXTURES = {
    API_ANTHROPIC: DATA / "requests_anthropic.jsonl",
    API_OPENAI_CHAT: DATA / "requests_openai_chat.jsonl",
}

NOISE = {"signature", "encrypted_content", "encrypted_index", "cache_control"}


def _records(path: Path) -> list[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as handle:
        return [(n, json.loads(line)) for n, line in enumerate(handle, 1) if line.strip()]


def _clean(value: Any) -> Any:
    if isinstance(value, dict):
        base64 = value.get("type") == "base64"
        return {k: _clean(v) for k, v in value.items() if k not in NOISE and not (base64 and k == "data")}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _js(value: Any) -> int:
    return len(json.dumps(_clean(value), separators=(",", ":"), ensure_ascii=False))


def _pdf_text_chars(data: str | None) -> int:
    """A base64 PDF adds its extracted text (docs/fidelity.md, "Media": text plus page images)."""
    if not data:
        return 0
    if data.startswith("data:"):
        data = data.partition("base64,")[2]
    elif "://" in data:
        return 0  # a URL: nothing to read
    info = read_pdf(base64.b64decode(data[: len(data) - len(data) % 4]))
    return len(info.text) if info else 0


def _anthropic_block_chars(block: dict[str, Any], in_result: bool = False) -> int:
    kind = block.get("type")
    if kind == "text":
        return len(block["text"])
    if kind == "thinking":
        return len(block["thinking"])
    if kind in ("image", "redacted_thinking"):
        return 0
    if kind == "document":
        source = block["source"]
        if source.get("type") == "base64" and source.get("media_type") == "application/pdf":
            return _pdf_text_chars(source.get("data"))
        return len(source["data"]) if source.get("type") == "text" else 0
    if kind in ("tool_use", "server_tool_use"):
        return len(json.dumps(block["input"], separators=(",", ":"), ensure_ascii=False))
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, str):
            return len(content)
        return sum(_anthropic_block_chars(b, True) for b in content or [])
    if kind.endswith("_tool_result"):
        return _js(block["content"])
    return _js(block)


def anthropic_chars(body: dict[str, Any]) -> int:
    """Characters of the text content of an Anthropic body, by the rules of docs/items.md."""
    total = 0
    system = body.get("system")
    if isinstance(system, str):
        total += len(system)
    for block in system if isinstance(system, list) else []:
        total += len(block["text"])
    total += sum(len(tool_definition_text(API_ANTHROPIC, t)) for t in body.get("tools") or [])
    for msg in body["messages"]:
        content = msg["content"]
        if isinstance(content, str):
            total += len(content)
        else:
            total += sum(_anthropic_block_chars(b) for b in content)
    return total


def _chat_part_chars(part: dict[str, Any]) -> int:
    kind = part.get("type")
    if kind == "text":
        return len(part["text"])
    if kind == "file":
        return _pdf_text_chars((part.get("file") or {}).get("file_data"))
    if kind == "document_url":
        return _pdf_text_chars(part.get("document_url"))
    if kind in ("image_url", "input_audio"):
        return 0
    return _js(part)


def chat_chars(body: dict[str, Any]) -> int:
    """Characters of the text content of a chat-completions body, by the rules of docs/items.md."""
    total = sum(len(tool_definition_text(API_OPENAI_CHAT, t)) for t in body.get("tools") or [])
    for msg in body["messages"]:
        content = msg.get("content")
        if isinstance(content, str):
            total += len(content)
        elif isinstance(content, list):
            total += sum(_chat_part_chars(p) for p in content)
        for key in ("reasoning", "reasoning_content", "refusal"):
            if isinstance(msg.get(key), str):
                total += len(msg[key])
        for detail in msg.get("reasoning_details") or []:
            total += len(detail.get("text") or detail.get("summary") or "")
        for call in msg.get("tool_calls") or []:
            total += len(call["function"]["arguments"])
    return total


CHARS = {API_ANTHROPIC: anthropic_chars, API_OPENAI_CHAT: chat_chars}


def check_nothing_lost(api: str, path: Path) -> None:
    """Each body: detected as its API, unique ids, item chars == text chars counted independently."""
    for line, record in _records(path):
        body = record["request"]
        assert detect_api(body) == api, f"line {line}"
        items = items_from_request(body, api)
        ids = [item.id for item in items]
        assert len(ids) == len(set(ids)), f"line {line}: duplicate ids"
        assert sum(item.chars for item in items) == CHARS[api](body), f"line {line}"
        assert all(len(item.text) == item.chars for item in items), f"line {line}"


def check_categories_sum(api: str, path: Path) -> None:
    """Observed through the ledger, categories add up to estimated_tokens and to the items' tokens."""
    for line, record in _records(path):
        body = record["request"]
        items = items_from_request(body, api)
        ledger = SessionLedger(f"corpus-{line}", tokenizer="chars")
        snapshot = ledger.observe(items, model=body.get("model"), stage=Stage.REQUEST_INPUT)
        annotation = snapshot.annotation
        assert sum(annotation.categories.values()) == annotation.estimated_tokens, f"line {line}"
        assert annotation.estimated_tokens == sum(item.tokens for item in items), f"line {line}"
        assert Category.UNATTRIBUTED not in annotation.categories


@pytest.mark.parametrize("api", sorted(FIXTURES))
def test_fixture_bodies_lose_nothing_and_add_up(api: str) -> None:
    """The real slices in tests/data: nothing lost, categories sum to estimated_tokens."""
    assert len(_records(FIXTURES[api])) >= 13
    check_nothing_lost(api, FIXTURES[api])
    check_categories_sum(api, FIXTURES[api])


@requires_corpus
@pytest.mark.parametrize("api", sorted(FILES))
def test_every_recorded_body_extracts_and_nothing_is_lost(api: str) -> None:
    """Each corpus body: detected as its API, unique ids, item chars == text chars counted independently."""
    assert len(_records(FILES[api])) > 100
    check_nothing_lost(api, FILES[api])


@requires_corpus
@pytest.mark.parametrize("api", sorted(FILES))
def test_categories_sum_to_estimated_tokens(api: str) -> None:
    """Each corpus body observed through the ledger: categories add up to estimated_tokens."""
    check_categories_sum(api, FILES[api])


@requires_corpus
def test_corpus_results_are_labelled_by_their_tool() -> None:
    """Every tool result whose call is in the same request carries the call's tool name."""
    for _, record in _records(FILES[API_OPENAI_CHAT]):
        body = record["request"]
        names = {c["id"]: c["function"]["name"] for m in body["messages"] for c in m.get("tool_calls") or []}
        for item in items_from_request(body, API_OPENAI_CHAT):
            if item.source_kind == "tool_result" and item.source_call_id in names:
                assert item.label == names[item.source_call_id]
                assert item.part == f"results/{names[item.source_call_id]}"
