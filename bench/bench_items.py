"""How long RequestExtractor.extract takes when a long conversation grows by one message.

Run: ``.venv/bin/python bench/bench_items.py``. Prints the median time of one
``extract`` call for a request of N messages that appends one message to
the previous request (the case the instrumentation sees on every turn), for
the three formats, and the time of a full extraction for comparison; and
the Anthropic append that also moves the ``cache_control`` marker (an
in-place edit of the previous message on every turn).
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

from ctxscope.core.classify import classify_text
from ctxscope.core.items import (API_ANTHROPIC, API_OPENAI_CHAT, API_OPENAI_RESPONSES, RequestExtractor,
                                 items_from_request)

N = 2000
ROUNDS = 200


def chat_message(i: int) -> dict[str, Any]:
    if i % 4 == 1:
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{i}", "type": "function",
             "function": {"name": "read_file", "arguments": f'{{"path": "src/f{i}.py"}}'}}]}
    if i % 4 == 2:
        return {"role": "tool", "tool_call_id": f"call_{i - 1}", "content": f"contents of file {i}\n" * 20}
    if i % 4 == 3:
        return {"role": "assistant", "content": f"I read file {i} and it looks fine."}
    return {"role": "user", "content": f"Please look at file {i + 1}."}


def plain_chat_message(i: int) -> dict[str, Any]:
    return {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}: " + "words " * 30}


def anthropic_message(i: int) -> dict[str, Any]:
    if i % 2:
        return {"role": "assistant", "content": [
            {"type": "text", "text": f"Reading file {i}."},
            {"type": "tool_use", "id": f"toolu_{i}", "name": "Read", "input": {"file_path": f"src/f{i}.py"}}]}
    return {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": f"toolu_{i - 1}", "content": f"contents of file {i}\n" * 20}]}


def responses_item(i: int) -> dict[str, Any]:
    if i % 2:
        return {"type": "function_call", "call_id": f"call_{i}", "name": "shell",
                "arguments": f'{{"command": ["bash", "-lc", "cat src/f{i}.py"]}}'}
    return {"type": "function_call_output", "call_id": f"call_{i - 1}", "output": f"contents of file {i}\n" * 20}


def body_of(api: str, messages: list[Any]) -> dict[str, Any]:
    if api == API_ANTHROPIC:
        return {"model": "claude-sonnet-4-5", "system": "You are a coding agent.", "messages": messages,
                "tools": [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}}]}
    if api == API_OPENAI_RESPONSES:
        return {"model": "gpt-5", "instructions": "You are a coding agent.", "input": messages,
                "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}}]}
    return {"model": "gpt-4o", "messages": [{"role": "system", "content": "You are a coding agent."}] + messages,
            "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]}


def measure(api: str, make: Callable[[int], dict[str, Any]], n: int = N) -> tuple[float, float]:
    """Median microseconds of an append-one extract, and of a full extraction."""
    messages = [make(i) for i in range(n - 1)]
    extractor = RequestExtractor()
    extractor.extract(body_of(api, messages), api)
    times = []
    for r in range(ROUNDS):
        messages = messages + [make(n - 1 + r)]  # a new list, as SDK callers build it
        body = body_of(api, messages)
        start = time.perf_counter()
        extractor.extract(body, api)
        times.append(time.perf_counter() - start)
    start = time.perf_counter()
    items_from_request(body_of(api, messages), api)
    full = time.perf_counter() - start
    return statistics.median(times) * 1e6, full * 1e6


def measure_cache_control(n: int = N) -> float:
    """Median microseconds of an Anthropic append that also moves the cache_control marker.

    The prompt-caching idiom: the newest message's last block carries
    ``cache_control`` and the previous one loses it, an in-place edit of the
    second-to-last message on every turn.
    """
    messages = [anthropic_message(i) for i in range(n - 1)]
    messages[-1]["content"][-1]["cache_control"] = {"type": "ephemeral"}
    extractor = RequestExtractor()
    extractor.extract(body_of(API_ANTHROPIC, messages), API_ANTHROPIC)
    times = []
    for r in range(ROUNDS):
        messages[-1]["content"][-1].pop("cache_control", None)
        new = anthropic_message(n - 1 + r)
        new["content"][-1]["cache_control"] = {"type": "ephemeral"}
        messages = messages + [new]
        body = body_of(API_ANTHROPIC, messages)
        start = time.perf_counter()
        extractor.extract(body, API_ANTHROPIC)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def classify_us(text: str, role: str, rounds: int = 200) -> float:
    """Median microseconds of one classify_text call."""
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        classify_text(text, role)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for name, api, make in (("chat, text only", API_OPENAI_CHAT, plain_chat_message),
                            ("chat, tool calls", API_OPENAI_CHAT, chat_message),
                            ("anthropic, blocks", API_ANTHROPIC, anthropic_message),
                            ("responses, calls", API_OPENAI_RESPONSES, responses_item)):
        append_us, full_us = measure(api, make)
        print(f"{name:20s} {N} messages: append one {append_us:8.1f} us   full extraction {full_us:9.1f} us")
        figures[name] = {"append_us": round(append_us, 1), "full_us": round(full_us, 1)}
    moved = measure_cache_control()
    print(f"{'anthropic, cache_control moved':32s} append one {moved:8.1f} us")
    figures["anthropic, cache_control moved"] = {"append_us": round(moved, 1)}
    prose = "Please refactor the parser so that it streams. " * 250
    code = "def f(x):\n    return x < 3  # <b>\n" * 3000
    reminder = code + "<system-reminder>\nWhenever you read a file, check it.\n</system-reminder>\n"
    for name, text, role in (("user prose", prose, "user"), ("tool result, code", code, "tool"),
                             ("tool result + reminder", reminder, "tool")):
        print(f"classify {name:24s} {len(text):7d} chars: {classify_us(text, role):8.1f} us")
    return figures


if __name__ == "__main__":
    main()
