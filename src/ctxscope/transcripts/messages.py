"""Message arrays and request bodies (OpenAI chat, Anthropic Messages) -> calls.

Accepted shapes, as one JSON document or as JSONL (one per line):

- a request body (``{"model", "messages", "tools", "system"...}``): one call;
- a recorded pair ``{"request": body, "response": answer}``: one call whose
  reported input is the answer's usage (OpenAI ``prompt_tokens``; Anthropic
  ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens``);
- an exported history (a bare message array, ``{"messages": [...]}`` with a
  final ``usage`` but no request semantics, or SWE-agent's ``history``): one
  call per assistant message, whose context is the messages before it.

Calls are grouped into sessions by the SPEC fingerprint: the system prompt and
the first user message. Items come from the live path's request extractor
(:mod:`ctxscope.core.items`): OpenAI's ``developer`` role counts as system,
``reasoning_content`` as assistant thinking, tool definitions as tools, and
OpenAI Responses bodies (``input``) are read too.
"""

from __future__ import annotations

from typing import Any, Mapping

from ctxscope.core import apis
from ctxscope.core.items import detect_api
from ctxscope.core.observation import Usage
from ctxscope.schema import Item
from ctxscope.core.conversation import fingerprint
from ctxscope.transcripts.model import FORMAT_MESSAGES, Problem, TranscriptCall


class MessagesReader:
    """Incremental reader: each record is a body, a pair, or a history."""

    format = FORMAT_MESSAGES

    def __init__(self, name: str = "") -> None:
        self.name = name
        self.records = 0
        self.problems: list[Problem] = []
        self._sessions: dict[str, int] = {}
        self._previous: dict[str, list[Item]] = {}

    def feed(self, record: Any, line: int) -> list[TranscriptCall]:
        if isinstance(record, list):
            self.records += 1
            return self._history(record, None, None, line)
        if not isinstance(record, dict):
            self.problems.append(Problem(line, f"expected a JSON object or array, got {type(record).__name__}"))
            return []
        if isinstance(record.get("request"), dict):
            self.records += 1
            return self._call(record["request"], record.get("response"), line)
        if isinstance(record.get("history"), list):
            self.records += 1
            return self._history(record["history"], None, record.get("model"), line)
        if isinstance(record.get("messages"), list):
            self.records += 1
            messages = record["messages"]
            last = messages[-1] if messages else None
            # A request ends with what the model must answer; an exported
            # transcript ends with the model's answer (or carries its usage).
            if "usage" in record or (isinstance(last, dict) and last.get("role") == "assistant"
                                     and "max_tokens" not in record and "stream" not in record):
                # An exported transcript: a history, its usage (if any) for the last call.
                return self._history(record["messages"], record, record.get("model"), line)
            return self._call(record, None, line)
        if "input" in record and isinstance(record.get("input"), (list, str)):
            self.records += 1  # an OpenAI Responses request body
            return self._call(record, record.get("response"), line)
        self.problems.append(Problem(line, "no messages, input, request or history in this record, skipped"))
        return []

    def finish(self) -> list[TranscriptCall]:
        return []

    # -- calls -----------------------------------------------------------------

    def _call(self, body: Mapping[str, Any], response: Any, line: int) -> list[TranscriptCall]:
        try:
            items, provider = body_items(body)
        except Exception as exc:  # noqa: BLE001 - a malformed body is a problem of that line
            self.problems.append(Problem(line, f"not a usable request body ({_why(exc)})"))
            return []
        usage = _usage(response.get("usage") if isinstance(response, dict) else None)
        model = body.get("model")
        return [self._emit(body, items, provider, model if isinstance(model, str) else None, usage, line)]

    def _history(self, messages: list[Any], body: Mapping[str, Any] | None, model: Any,
                 line: int) -> list[TranscriptCall]:
        from ctxscope.core.items import RequestExtractor

        base = dict(body) if body is not None else {}
        extractor = RequestExtractor()  # each prefix reuses the items of the one before
        out: list[TranscriptCall] = []
        for index, message in enumerate(messages):
            if isinstance(message, dict) and message.get("role") == "assistant" and index > 0:
                base["messages"] = messages[:index]
                try:
                    items, provider = body_items(base, extractor)
                except Exception as exc:  # noqa: BLE001 - as in _call
                    self.problems.append(Problem(line, f"unusable message history ({_why(exc)})"))
                    return out
                out.append(self._emit(base, items, provider, model if isinstance(model, str) else None, None,
                                      line))
        if body is not None and out:
            out[-1].usage = _usage(body.get("usage"))
        return out

    def _emit(self, body: Mapping[str, Any], items: list[Item], provider: str, model: str | None,
              usage: Usage | None, line: int) -> TranscriptCall:
        # The live path's rule (SPEC section 1), so a body gets one session id on both paths.
        session = fingerprint(body, detect_api(body))
        index = self._sessions.get(session, 0)
        self._sessions[session] = index + 1
        previous = self._previous.get(session, [])
        # Append-only growth keeps the same objects in place: the new items are the tail.
        prefix = len(previous) <= len(items) and all(a is b for a, b in zip(previous, items))
        self._previous[session] = items
        return TranscriptCall(session_id=session, index=index, items=items,
                              added=items[len(previous):] if prefix and index else items,
                              reset=not (prefix and index), provider=provider, model=model,
                              usage=usage, line=line)


def body_items(body: Mapping[str, Any], extractor: Any = None) -> tuple[list[Item], str]:
    """The items of a request body or message list, and its provider (its wire format's gen_ai.provider.name).

    The request extractor of the live path (:mod:`ctxscope.core.items`) does the
    work, so a transcript and an instrumented call give the same items; an
    ``extractor`` (``items.RequestExtractor``) reuses the items of messages
    seen in the session's previous call.
    """
    from ctxscope.core.items import RequestExtractor, detect_api

    api = detect_api(body)
    items = (extractor or RequestExtractor()).extract(body, api)
    return items, apis.get(api).provider


def _usage(usage: Any) -> Usage | None:
    # An exported transcript does not say which API wrote its usage: its shape does.
    return apis.usage_by_shape(usage) if isinstance(usage, dict) else None


def _why(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:120]


__all__ = ["MessagesReader", "body_items"]
