"""A local HTTP server that answers like OpenAI and Anthropic, for tests and demos.

The real ``openai`` and ``anthropic`` SDKs talk to any base URL, so pointing
them at :class:`ProviderServer` exercises their own code paths (JSON and
server-sent-event streams included) with no network and no key::

    from ctxscope.testing import ProviderServer, Reply

    with ProviderServer() as server:
        server.reply(Reply.tool_call("read_file", {"path": "app.py"}), Reply.text("done"))
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="test", max_retries=0)
        ...
        assert server.requests[0].body["model"] == "gpt-4o"

Endpoints: ``POST /v1/chat/completions`` and ``POST /v1/responses`` (OpenAI),
``POST /v1/messages`` (Anthropic); ``"stream": true`` answers with the
provider's event stream (OpenAI chat chunks end with a usage chunk only when
``stream_options.include_usage`` is set, as the real API does). Gemini:
``POST /v1beta/models/{model}:generateContent`` and ``:streamGenerateContent``
(server-sent events with ``?alt=sse``, as ``google-genai`` asks, else a
streamed JSON array), ``usageMetadata`` on every chunk. Ollama: ``POST
/api/chat``, streamed as JSON lines unless ``"stream": false``, the counts
(``prompt_eval_count``, ``eval_count``) on the last (``"done": true``).
For ``google-genai`` use ``base_url`` :attr:`ProviderServer.base_url`; for
``ollama``, ``host`` the same.

Usage rule (deterministic, so tests can work values out by hand):

* **reported input** = ``sum(ceil(len(s) / 4))`` over every string value
  (keys not counted) found under the request's context fields - chat:
  ``messages`` and ``tools``; Responses: ``instructions``, ``input`` and
  ``tools``; Anthropic: ``system``, ``messages`` and ``tools`` - plus
  :data:`HIDDEN_OVERHEAD_TOKENS` (the provider's hidden framing). See
  :func:`reported_input_tokens`.
* **output** = ``ceil(len(text) / 4)`` plus ``ceil(len(arguments) / 4)`` per
  tool call (arguments as compact JSON).
* A reply may declare ``cache_read_tokens`` / ``cache_creation_tokens``: OpenAI
  reports the read part as ``cached_tokens`` inside the prompt total; Anthropic
  splits the total into ``input_tokens`` + ``cache_creation_input_tokens`` +
  ``cache_read_input_tokens``, as the providers do.
* Groq (requests under ``/openai/v1``, its SDK's base path): a chat stream
  carries the usage in its last chunk's ``x_groq``, as Groq's API does.
* Server tools: a reply may declare ``server_tool_use`` (Anthropic: the usage's
  ``server_tool_use`` counters, zeros in ``message_start`` and the values in the
  final ``message_delta`` of a stream, as the API sends them) and
  ``server_calls`` (Responses: output item types such as ``web_search_call``,
  one completed item each, before the reply's message).

Provider-side context management (as the APIs report it):

* ``Reply(compaction="summary")``: a server-side compaction during the call.
  Anthropic: the content starts with a ``compaction`` block holding the
  summary, ``usage.iterations`` lists the ``compaction`` sampling (input: the
  whole request; output: ``ceil(len(summary) / 4)``) and then the ``message``
  sampling, whose input is the compacted context (``system``, ``tools`` and the
  summary block, by the rule above) and which the top-level usage repeats.
  Responses: the output starts with a ``compaction`` item whose
  ``encrypted_content`` is opaque; the usage is the request's, by the rule above.
* ``Reply(clear_tool_results=n)``: Anthropic context editing
  (``clear_tool_uses_20250919``) clears the oldest ``n`` ``tool_result``
  blocks: their ``content`` leaves the reported input, and
  ``context_management.applied_edits`` reports ``cleared_tool_uses`` and
  ``cleared_input_tokens`` (the content's tokens by the rule above).
* An Anthropic request whose history holds a ``compaction`` block is read from
  that block on, as the API does (what precedes it is dropped).

Errors answer with the provider's status and error JSON and the header
``x-should-retry: false``, so the SDKs raise at once instead of retrying.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Mapping
from ctxscope.core import apis
from ctxscope.core.apis import API_ANTHROPIC, API_GEMINI, API_OLLAMA, API_OPENAI_CHAT, API_OPENAI_RESPONSES
from ctxscope.core.apis.anthropic_messages import after_compaction

__all__ = [
    "HIDDEN_OVERHEAD_TOKENS",
    "ProviderServer",
    "RecordedRequest",
    "Reply",
    "ToolCall",
    "output_tokens",
    "reported_input_tokens",
    "wait_for_measurements",
]

HIDDEN_OVERHEAD_TOKENS = 10
"""Tokens the fake provider adds to every prompt, like a provider's hidden framing."""


def wait_for_measurements(timeout_s: float = 10.0) -> bool:
    """Wait until every model call made so far is measured: its span ended and annotated, its metrics updated.

    ctxscope measures a call's composition off the caller's thread (the live
    path's worker, docs/instrumentation.md), so a test that reads spans or
    metrics right after a call waits here first (the tracer provider's
    ``force_flush()`` does the same and then flushes the exporters). False
    when ``timeout_s`` passed first.
    """
    from ctxscope.telemetry import shutdown

    return shutdown.drain_pending(timeout_s) >= 0

CREATED = 1_700_000_000  # a fixed timestamp, so recorded answers are reproducible

_CONTEXT_FIELDS = {
    API_OPENAI_CHAT: ("messages", "tools"),
    API_OPENAI_RESPONSES: ("instructions", "input", "tools"),
    API_ANTHROPIC: ("system", "messages", "tools"),
    API_GEMINI: ("systemInstruction", "contents", "tools"),
    API_OLLAMA: ("messages", "tools"),
}


def _ceil4(n: int) -> int:
    return -(-n // 4)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


def reported_input_tokens(body: Mapping[str, Any], api: str, overhead: int = HIDDEN_OVERHEAD_TOKENS) -> int:
    """The input the server reports for a request body (the rule in the module docstring)."""
    total = overhead
    for name in _CONTEXT_FIELDS[api]:
        total += sum(_ceil4(len(s)) for s in _strings(body.get(name)))
    return total


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    id: str | None = None  # default: a sequential provider-style id

    def arguments_json(self) -> str:
        return json.dumps(self.arguments, separators=(",", ":"))


def output_tokens(text: str, tool_calls: Iterable[ToolCall] = ()) -> int:
    """The output the server reports for a reply (the rule in the module docstring)."""
    return _ceil4(len(text)) + sum(_ceil4(len(c.arguments_json())) for c in tool_calls)


@dataclass(frozen=True)
class Reply:
    """One scripted answer. Build with :meth:`text`, :meth:`tool_call` or :meth:`error`."""

    content: str = "ok"
    tool_calls: tuple[ToolCall, ...] = ()
    status: int = 200
    error_message: str = ""
    error_type: str | None = None
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    model: str | None = None  # response model; default: the request's
    stream_error: bool = False  # a streamed answer breaks off with the provider's error event
    delay_s: float = 0.0
    server_tool_use: Mapping[str, int] | None = None  # Anthropic usage.server_tool_use
    server_calls: tuple[str, ...] = ()  # Responses: server tool output item types
    # Transport tests: the connection drops after this many bytes of the body (a reset mid-stream),
    # and a streamed answer's events are sent this far apart (the whole stream is never one write).
    reset_after_bytes: int | None = None
    stream_interval_s: float = 0.0
    compaction: str | None = None  # a server-side compaction's summary (module docstring)
    clear_tool_results: int = 0  # Anthropic context editing: the oldest tool results cleared

    @classmethod
    def text(cls, content: str, **options: Any) -> "Reply":
        return cls(content=content, **options)

    @classmethod
    def tool_call(cls, name: str, arguments: Mapping[str, Any] | None = None, *, id: str | None = None,
                  content: str = "", **options: Any) -> "Reply":
        return cls(content=content, tool_calls=(ToolCall(name, dict(arguments or {}), id),), **options)

    @classmethod
    def tool_calls_(cls, calls: Iterable[ToolCall], content: str = "", **options: Any) -> "Reply":
        return cls(content=content, tool_calls=tuple(calls), **options)

    @classmethod
    def error(cls, status: int, message: str = "scripted error", *, type: str | None = None) -> "Reply":
        return cls(content="", status=status, error_message=message, error_type=type)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    api: str | None


_OPENAI_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                       404: "not_found_error", 429: "rate_limit_exceeded", 500: "server_error", 503: "server_error"}
_ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                          404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                          500: "api_error", 529: "overloaded_error"}


def _pieces(text: str) -> list[str]:
    """Stream deltas: one word with its trailing space each."""
    return re.findall(r"\S+\s*|\s+", text)


def _sse(data: Mapping[str, Any], event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + json.dumps(data, separators=(",", ":")) + "\n\n").encode()


class _Ids:
    def __init__(self) -> None:
        self._n = 0
        self._lock = threading.Lock()

    def next(self, prefix: str) -> str:
        with self._lock:
            self._n += 1
            return f"{prefix}{self._n:06d}"


# ---------------------------------------------------------------------------
# Answers per API
# ---------------------------------------------------------------------------

class _Answer:
    """Builds the JSON body or the event stream of one reply to one request."""

    def __init__(self, body: Mapping[str, Any], api: str, reply: Reply, ids: _Ids, overhead: int) -> None:
        self.body = body
        self.api = api
        self.reply = reply
        self.ids = ids
        self.model = reply.model or str(body.get("model") or "unknown-model")
        self.applied_edits: list[dict[str, Any]] = []
        self.compaction_iteration: dict[str, Any] | None = None
        seen = body
        wire = apis.get(api)
        # Server-side compaction and context editing: what the provider itself does to the context.
        if wire.context_management and isinstance(body.get("messages"), list):
            seen = {**body, "messages": list(after_compaction(body["messages"]))}
            if reply.clear_tool_results:
                seen = self._clear_tool_results(seen, reply.clear_tool_results)
        self.input_tokens = reported_input_tokens(seen, api, overhead)
        if reply.compaction is not None and wire.context_management:
            summary_block = {"role": "assistant", "content": [{"type": "compaction", "content": reply.compaction}]}
            self.compaction_iteration = {"type": "compaction", "input_tokens": self.input_tokens,
                                         "output_tokens": _ceil4(len(reply.compaction)),
                                         "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
            self.input_tokens = reported_input_tokens({**seen, "messages": [summary_block]}, api, overhead)
        self.output_tokens = output_tokens(reply.content, reply.tool_calls)
        self.calls = [(c, c.id or ids.next(wire.call_id_prefix)) for c in reply.tool_calls]

    def _clear_tool_results(self, body: dict[str, Any], n: int) -> dict[str, Any]:
        """Context editing: the oldest ``n`` tool results' content cleared (and reported)."""
        cleared_uses = cleared_tokens = 0
        messages = []
        for message in body["messages"]:
            content = message.get("content") if isinstance(message, Mapping) else None
            if isinstance(content, list):
                blocks = []
                for block in content:
                    if (isinstance(block, Mapping) and block.get("type") == "tool_result"
                            and cleared_uses < n):
                        cleared_uses += 1
                        cleared_tokens += sum(_ceil4(len(s)) for s in _strings(block.get("content")))
                        block = {**block, "content": []}
                    blocks.append(block)
                message = {**message, "content": blocks}
            messages.append(message)
        if cleared_uses:
            self.applied_edits.append({"type": "clear_tool_uses_20250919", "cleared_tool_uses": cleared_uses,
                                       "cleared_input_tokens": cleared_tokens})
        return {**body, "messages": messages}

    # -- OpenAI chat ---------------------------------------------------------

    def _chat_usage(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.input_tokens,
            "completion_tokens": self.output_tokens,
            "total_tokens": self.input_tokens + self.output_tokens,
            "prompt_tokens_details": {"cached_tokens": self.reply.cache_read_tokens, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                          "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
        }

    def chat_json(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.reply.content or None, "refusal": None}
        if self.calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json()}}
                for c, cid in self.calls]
        return {
            "id": self.ids.next("chatcmpl-"), "object": "chat.completion", "created": CREATED,
            "model": self.model, "system_fingerprint": None, "service_tier": "default",
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": "tool_calls" if self.calls else "stop"}],
            "usage": self._chat_usage(),
        }

    def chat_stream(self) -> Iterable[bytes]:
        cid = self.ids.next("chatcmpl-")

        def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
            return _sse({"id": cid, "object": "chat.completion.chunk", "created": CREATED, "model": self.model,
                         "system_fingerprint": None, "service_tier": "default",
                         "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
                         **extra})

        yield chunk({"role": "assistant", "content": "", "refusal": None})
        for piece in _pieces(self.reply.content):
            yield chunk({"content": piece})
        if self.reply.stream_error:
            yield _sse({"error": {"message": self.reply.error_message or "stream broke off",
                                  "type": "server_error", "param": None, "code": None}})
            return
        for index, (call, call_id) in enumerate(self.calls):
            yield chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                         "function": {"name": call.name, "arguments": ""}}]})
            yield chunk({"tool_calls": [{"index": index, "function": {"arguments": call.arguments_json()}}]})
        if self.groq:  # Groq: the usage rides on the last chunk, under x_groq
            yield chunk({}, "tool_calls" if self.calls else "stop",
                        x_groq={"id": "req_" + cid, "usage": self._chat_usage()})
            yield b"data: [DONE]\n\n"
            return
        yield chunk({}, "tool_calls" if self.calls else "stop")
        if (self.body.get("stream_options") or {}).get("include_usage"):
            yield _sse({"id": cid, "object": "chat.completion.chunk", "created": CREATED, "model": self.model,
                        "system_fingerprint": None, "service_tier": "default", "choices": [],
                        "usage": self._chat_usage()})
        yield b"data: [DONE]\n\n"

    # -- OpenAI Responses ------------------------------------------------------

    def _responses_output(self) -> list[dict[str, Any]]:
        output: list[dict[str, Any]] = [
            {"type": kind, "id": self.ids.next("ws_"), "status": "completed"} for kind in self.reply.server_calls]
        if self.reply.compaction is not None:
            opaque = base64.b64encode(self.reply.compaction.encode()).decode()  # stands for the encrypted state
            output.insert(0, {"type": "compaction", "id": self.ids.next("cmp_"), "encrypted_content": opaque})
        if self.reply.content or not self.calls:
            output.append({"type": "message", "id": self.ids.next("msg_"), "status": "completed",
                           "role": "assistant",
                           "content": [{"type": "output_text", "text": self.reply.content, "annotations": [],
                                        "logprobs": []}]})
        for call, call_id in self.calls:
            output.append({"type": "function_call", "id": self.ids.next("fc_"), "call_id": call_id,
                           "name": call.name, "arguments": call.arguments_json(), "status": "completed"})
        return output

    def _response(self, rid: str, status: str, output: list[dict[str, Any]], usage: bool) -> dict[str, Any]:
        return {
            "id": rid, "object": "response", "created_at": CREATED, "status": status, "model": self.model,
            "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "text": {"format": {"type": "text"}}, "error": None, "incomplete_details": None,
            "instructions": None, "metadata": {}, "temperature": 1.0, "top_p": 1.0,
            "previous_response_id": self.body.get("previous_response_id"),
            "usage": {
                "input_tokens": self.input_tokens,
                "input_tokens_details": {"cached_tokens": self.reply.cache_read_tokens},
                "output_tokens": self.output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": self.input_tokens + self.output_tokens,
            } if usage else None,
        }

    def responses_json(self) -> dict[str, Any]:
        return self._response(self.ids.next("resp_"), "completed", self._responses_output(), True)

    def responses_stream(self) -> Iterable[bytes]:
        rid = self.ids.next("resp_")
        seq = iter(range(1_000_000))

        def event(kind: str, **data: Any) -> bytes:
            return _sse({"type": kind, "sequence_number": next(seq), **data}, kind)

        yield event("response.created", response=self._response(rid, "in_progress", [], False))
        yield event("response.in_progress", response=self._response(rid, "in_progress", [], False))
        output = self._responses_output()
        for index, item in enumerate(output):
            if item["type"] == "message":
                started = {**item, "status": "in_progress", "content": []}
                yield event("response.output_item.added", output_index=index, item=started)
                empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                yield event("response.content_part.added", item_id=item["id"], output_index=index,
                            content_index=0, part=empty)
                for piece in _pieces(self.reply.content):
                    yield event("response.output_text.delta", item_id=item["id"], output_index=index,
                                content_index=0, delta=piece, logprobs=[])
                if self.reply.stream_error:
                    yield event("error", code="server_error", message=self.reply.error_message or "stream broke off",
                                param=None)
                    return
                yield event("response.output_text.done", item_id=item["id"], output_index=index,
                            content_index=0, text=self.reply.content, logprobs=[])
                yield event("response.content_part.done", item_id=item["id"], output_index=index,
                            content_index=0, part=item["content"][0])
            elif item["type"] in self.reply.server_calls:
                yield event("response.output_item.added", output_index=index,
                            item={**item, "status": "in_progress"})
            else:
                started = {**item, "status": "in_progress", "arguments": ""}
                yield event("response.output_item.added", output_index=index, item=started)
                yield event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                            delta=item["arguments"])
                yield event("response.function_call_arguments.done", item_id=item["id"], output_index=index,
                            name=item["name"], arguments=item["arguments"])
            yield event("response.output_item.done", output_index=index, item=item)
        yield event("response.completed", response=self._response(rid, "completed", output, True))

    # -- Anthropic -------------------------------------------------------------

    def _anthropic_usage(self, output: int, final: bool = True) -> dict[str, Any]:
        read, write = self.reply.cache_read_tokens, self.reply.cache_creation_tokens
        usage: dict[str, Any] = {"input_tokens": max(0, self.input_tokens - read - write),
                                 "cache_creation_input_tokens": write, "cache_read_input_tokens": read,
                                 "output_tokens": output, "service_tier": "standard"}
        if self.reply.server_tool_use is not None:
            usage["server_tool_use"] = (dict(self.reply.server_tool_use) if final
                                        else {k: 0 for k in self.reply.server_tool_use})
        if self.compaction_iteration is not None and final:
            message = {k: usage[k] for k in ("input_tokens", "cache_creation_input_tokens",
                                             "cache_read_input_tokens", "output_tokens")}
            usage["iterations"] = [self.compaction_iteration, {"type": "message", **message}]
        return usage

    def _anthropic_content(self) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = []
        if self.reply.compaction is not None:
            content.append({"type": "compaction", "content": self.reply.compaction})
        if self.reply.content or not self.calls:
            content.append({"type": "text", "text": self.reply.content})
        for call, call_id in self.calls:
            content.append({"type": "tool_use", "id": call_id, "name": call.name, "input": dict(call.arguments)})
        return content

    def _message(self, mid: str, content: list[dict[str, Any]], stop: str | None, output: int,
                 final: bool = True) -> dict[str, Any]:
        message = {"id": mid, "type": "message", "role": "assistant", "model": self.model, "content": content,
                   "stop_reason": stop, "stop_sequence": None, "usage": self._anthropic_usage(output, final)}
        if self.applied_edits and final:
            message["context_management"] = {"applied_edits": self.applied_edits}
        return message

    def anthropic_json(self) -> dict[str, Any]:
        stop = "tool_use" if self.calls else "end_turn"
        return self._message(self.ids.next("msg_"), self._anthropic_content(), stop, self.output_tokens)

    def anthropic_stream(self) -> Iterable[bytes]:
        mid = self.ids.next("msg_")

        def event(kind: str, **data: Any) -> bytes:
            return _sse({"type": kind, **data}, kind)

        yield event("message_start", message=self._message(mid, [], None, 1, final=False))
        for index, block in enumerate(self._anthropic_content()):
            if block["type"] == "compaction":
                yield event("content_block_start", index=index, content_block={"type": "compaction", "content": None})
                yield event("content_block_delta", index=index,
                            delta={"type": "compaction_delta", "content": block["content"]})
            elif block["type"] == "text":
                yield event("content_block_start", index=index, content_block={"type": "text", "text": ""})
                if index == 0:
                    yield event("ping")
                for piece in _pieces(block["text"]):
                    yield event("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
                if self.reply.stream_error:
                    yield event("error", error={"type": "overloaded_error",
                                                "message": self.reply.error_message or "stream broke off"})
                    return
            else:
                yield event("content_block_start", index=index,
                            content_block={"type": "tool_use", "id": block["id"], "name": block["name"],
                                           "input": {}})
                yield event("content_block_delta", index=index,
                            delta={"type": "input_json_delta", "partial_json": json.dumps(block["input"],
                                                                                          separators=(",", ":"))})
            yield event("content_block_stop", index=index)
        stop = "tool_use" if self.calls else "end_turn"
        delta_usage: dict[str, Any] = {"output_tokens": self.output_tokens}
        if self.reply.server_tool_use is not None:
            delta_usage["server_tool_use"] = dict(self.reply.server_tool_use)
        if self.compaction_iteration is not None:
            delta_usage.update(self._anthropic_usage(self.output_tokens))
            delta_usage.pop("service_tier", None)
        extra = {"context_management": {"applied_edits": self.applied_edits}} if self.applied_edits else {}
        yield event("message_delta", delta={"stop_reason": stop, "stop_sequence": None}, usage=delta_usage, **extra)
        yield event("message_stop")

    # -- Gemini ----------------------------------------------------------------

    sse = True  # Gemini streams: server-sent events (alt=sse), else a JSON array
    groq = False  # Groq's base path (/openai/v1): chat stream usage under x_groq

    def _gemini_usage(self, output: int) -> dict[str, Any]:
        usage = {"promptTokenCount": self.input_tokens, "candidatesTokenCount": output,
                 "totalTokenCount": self.input_tokens + output}
        if self.reply.cache_read_tokens:
            usage["cachedContentTokenCount"] = self.reply.cache_read_tokens
        return usage

    def _gemini_chunk(self, parts: list[dict[str, Any]], finish: str | None, output: int, rid: str) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        if finish:
            candidate["finishReason"] = finish
        return {"candidates": [candidate], "usageMetadata": self._gemini_usage(output),
                "modelVersion": self.model, "responseId": rid}

    def _gemini_calls(self) -> list[dict[str, Any]]:
        return [{"functionCall": {"name": c.name, "args": dict(c.arguments)}} for c, _ in self.calls]

    def gemini_json(self) -> dict[str, Any]:
        parts = ([{"text": self.reply.content}] if self.reply.content or not self.calls else []) + self._gemini_calls()
        return self._gemini_chunk(parts, "STOP", self.output_tokens, self.ids.next("gemresp-"))

    def gemini_stream(self) -> Iterable[bytes]:
        rid = self.ids.next("gemresp-")
        chunks = [self._gemini_chunk([{"text": piece}], None, 0, rid) for piece in _pieces(self.reply.content)]
        if self.reply.stream_error:
            chunks.append({"error": {"code": 500, "message": self.reply.error_message or "stream broke off",
                                     "status": "INTERNAL"}})
        else:
            last = self._gemini_calls()
            chunks.append(self._gemini_chunk(last, "STOP", self.output_tokens, rid))
        if self.sse:
            for chunk in chunks:
                yield ("data: " + json.dumps(chunk, separators=(",", ":")) + "\r\n\r\n").encode()
            return
        # The REST stream without alt=sse: one JSON array, an element at a time.
        for index, chunk in enumerate(chunks):
            yield (("[" if index == 0 else ",\r\n") + json.dumps(chunk)).encode()
        yield b"]"

    # -- Ollama ----------------------------------------------------------------

    def _ollama_final(self, message: dict[str, Any]) -> dict[str, Any]:
        return {"model": self.model, "created_at": "2023-11-14T22:13:20Z", "message": message,
                "done_reason": "stop", "done": True, "total_duration": 1000, "load_duration": 10,
                "prompt_eval_count": self.input_tokens, "prompt_eval_duration": 100,
                "eval_count": self.output_tokens, "eval_duration": 200}

    def _ollama_calls(self) -> list[dict[str, Any]]:
        return [{"function": {"name": c.name, "arguments": dict(c.arguments)}} for c, _ in self.calls]

    def ollama_json(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.reply.content}
        if self.calls:
            message["tool_calls"] = self._ollama_calls()
        return self._ollama_final(message)

    def ollama_stream(self) -> Iterable[bytes]:
        def line(data: Mapping[str, Any]) -> bytes:
            return (json.dumps(data, separators=(",", ":")) + "\n").encode()

        for piece in _pieces(self.reply.content):
            yield line({"model": self.model, "created_at": "2023-11-14T22:13:20Z",
                        "message": {"role": "assistant", "content": piece}, "done": False})
        if self.reply.stream_error:
            yield line({"error": self.reply.error_message or "stream broke off"})
            return
        final: dict[str, Any] = {"role": "assistant", "content": ""}
        if self.calls:
            final["tool_calls"] = self._ollama_calls()
        yield line(self._ollama_final(final))

    # -- dispatch --------------------------------------------------------------

    @property
    def stream_content_type(self) -> str:
        framing = apis.get(self.api).stream_framing
        if framing == "ndjson":
            return "application/x-ndjson"
        if framing == "json-array" and not self.sse:  # Gemini streams a JSON array unless asked for alt=sse
            return "application/json"
        return "text/event-stream"

    def json(self) -> dict[str, Any]:
        return {API_OPENAI_CHAT: self.chat_json, API_OPENAI_RESPONSES: self.responses_json,
                API_ANTHROPIC: self.anthropic_json, API_GEMINI: self.gemini_json,
                API_OLLAMA: self.ollama_json}[self.api]()

    def stream(self) -> Iterable[bytes]:
        return {API_OPENAI_CHAT: self.chat_stream, API_OPENAI_RESPONSES: self.responses_stream,
                API_ANTHROPIC: self.anthropic_stream, API_GEMINI: self.gemini_stream,
                API_OLLAMA: self.ollama_stream}[self.api]()


_GEMINI_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                  429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 503: "UNAVAILABLE"}


def _gemini_error(reply: Reply) -> dict[str, Any]:
    return {"error": {"code": reply.status, "message": reply.error_message,
                      "status": reply.error_type or _GEMINI_STATUS.get(reply.status, "UNKNOWN")}}


def _anthropic_error(reply: Reply) -> dict[str, Any]:
    kind = reply.error_type or _ANTHROPIC_ERROR_TYPES.get(reply.status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": reply.error_message}}


def _openai_error(reply: Reply) -> dict[str, Any]:
    kind = reply.error_type or _OPENAI_ERROR_TYPES.get(reply.status, "server_error")
    return {"error": {"message": reply.error_message, "type": kind, "param": None,
                      "code": kind if reply.status == 429 else None}}


# Each API's error body (chat completions and Responses share OpenAI's).
_ERROR_BODIES: dict[str, Callable[[Reply], dict[str, Any]]] = {
    API_GEMINI: _gemini_error, API_OLLAMA: lambda reply: {"error": reply.error_message},
    API_ANTHROPIC: _anthropic_error, API_OPENAI_CHAT: _openai_error, API_OPENAI_RESPONSES: _openai_error}


def _error_body(api: str, reply: Reply) -> dict[str, Any]:
    return _ERROR_BODIES[api](reply)


def _api_for(path: str) -> str | None:
    return apis.for_path(path)  # the routes the fake provider answers: every wire format's URL


# ---------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------

class ProviderServer:
    """A local server answering like OpenAI and Anthropic; a context manager.

    ``reply(...)`` queues scripted answers, used in order by the next requests
    (any endpoint); with the queue empty the server answers ``default``
    (``Reply.text("ok")`` unless given). ``requests`` records what arrived.
    """

    def __init__(self, *, default: Reply | None = None, overhead_tokens: int = HIDDEN_OVERHEAD_TOKENS,
                 host: str = "127.0.0.1", port: int = 0,
                 responder: Callable[[RecordedRequest], Reply | None] | None = None) -> None:
        self.default = default or Reply()
        self.overhead_tokens = overhead_tokens
        self.responder = responder  # called when the queue is empty; None falls back to default
        self.requests: list[RecordedRequest] = []
        self.record_requests = True  # benchmarks turn this off to keep memory flat
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._ids = _Ids()
        self._request_ids = _Ids()
        self._host, self._port = host, port
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle ------------------------------------------------------------

    def start(self) -> "ProviderServer":
        if self._httpd is not None:
            return self
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = ThreadingHTTPServer((self._host, self._port), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="ctxscope-provider-server",
                                        daemon=True, kwargs={"poll_interval": 0.05})
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(5)
        self._httpd = None
        self._thread = None

    def __enter__(self) -> "ProviderServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses -------------------------------------------------------------

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the server is not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """For ``openai.OpenAI(base_url=...)`` (the SDK appends ``/chat/completions``)."""
        return self.base_url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        """For ``anthropic.Anthropic(base_url=...)`` (the SDK appends ``/v1/messages``)."""
        return self.base_url

    # -- script ----------------------------------------------------------------

    def reply(self, *replies: Reply) -> None:
        """Queue answers for the next requests, in order."""
        with self._lock:
            self._queue.extend(replies)

    def pending(self) -> int:
        """Scripted answers not used yet."""
        with self._lock:
            return len(self._queue)

    def clear(self) -> None:
        """Forget queued answers and recorded requests."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()

    def reset(self) -> None:
        """:meth:`clear`, and ids start again: the same script then gives the same answers."""
        self.clear()
        self._ids = _Ids()

    def _next(self, request: RecordedRequest) -> Reply:
        with self._lock:
            if self.record_requests:
                self.requests.append(request)
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            reply = self.responder(request)
            if reply is not None:
                return reply
        return self.default

    # -- clients (the SDKs are imported only when asked for) --------------------

    def openai_client(self, *, async_: bool = False, **options: Any) -> Any:
        import openai

        options.setdefault("api_key", "test-key")
        options.setdefault("max_retries", 0)
        cls = openai.AsyncOpenAI if async_ else openai.OpenAI
        return cls(base_url=self.openai_base_url, **options)

    def anthropic_client(self, *, async_: bool = False, **options: Any) -> Any:
        import anthropic

        options.setdefault("api_key", "test-key")
        options.setdefault("max_retries", 0)
        cls = anthropic.AsyncAnthropic if async_ else anthropic.Anthropic
        return cls(base_url=self.anthropic_base_url, **options)


    def gemini_client(self, **options: Any) -> Any:
        """A ``google-genai`` client of this server (``client.models`` / ``client.aio.models``)."""
        from google import genai
        from google.genai import types

        options.setdefault("api_key", "test-key")
        return genai.Client(http_options=types.HttpOptions(base_url=self.base_url), **options)

    def ollama_client(self, *, async_: bool = False, **options: Any) -> Any:
        import ollama

        cls = ollama.AsyncClient if async_ else ollama.Client
        return cls(host=self.base_url, **options)


class _Handler(BaseHTTPRequestHandler):
    owner: ProviderServer
    protocol_version = "HTTP/1.1"  # keep-alive: the SDKs reuse connections, as with the real API

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # quiet: tests read the records, not a log

    def _send(self, status: int, body: bytes | list[bytes], content_type: str, headers: Mapping[str, str] = {},
              reply: Reply | None = None) -> None:
        pieces = body if isinstance(body, list) else [body]
        total = sum(len(p) for p in pieces)
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(total))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        cut = reply.reset_after_bytes if reply is not None else None
        interval = reply.stream_interval_s if reply is not None else 0.0
        sent = 0
        for index, piece in enumerate(pieces):
            if cut is not None and sent + len(piece) >= cut:
                self.wfile.write(piece[:max(0, cut - sent)])
                self._reset()
                return
            if interval and index:
                self.wfile.flush()
                time.sleep(interval)
            self.wfile.write(piece)
            sent += len(piece)

    def _reset(self) -> None:
        """Drop the connection mid-body: the client sees fewer bytes than content-length said."""
        import socket

        self.wfile.flush()
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        api = _api_for(self.path)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        request = RecordedRequest("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body, api)
        if api is None:
            self._send(404, json.dumps({"error": {"message": f"no route {self.path}", "type": "not_found_error",
                                                  "param": None, "code": None}}).encode(), "application/json")
            return
        reply = self.owner._next(request)  # noqa: SLF001 - the handler is the server's own half
        if reply.delay_s:
            time.sleep(reply.delay_s)
        request_id = self.owner._request_ids.next("req_")  # noqa: SLF001 - the handler is the server's own half
        if reply.status >= 400:
            self._send(reply.status, json.dumps(_error_body(api, reply)).encode(), "application/json",
                       {"x-should-retry": "false", "x-request-id": request_id, "request-id": request_id})
            return
        wire = apis.get(api)
        path_model = wire.path_model(self.path)  # Gemini names the model in the URL
        answer_body = {**body, "model": path_model} if path_model else body
        streamed = wire.streamed(self.path, body)
        ids = self.owner._ids  # noqa: SLF001 - the handler is the server's own half
        answer = _Answer(answer_body, api, reply, ids, self.owner.overhead_tokens)
        answer.sse = "alt=sse" in self.path
        answer.groq = self.path.startswith("/openai/v1/")
        if streamed:
            # The event stream is sent with a length: the SDKs still parse it event by event.
            self._send(200, list(answer.stream()), answer.stream_content_type,
                       {"x-request-id": request_id, "request-id": request_id}, reply)
        else:
            self._send(200, json.dumps(answer.json()).encode(), "application/json",
                       {"x-request-id": request_id, "request-id": request_id}, reply)
