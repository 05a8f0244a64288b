"""What the live-path benches run, in one place: the growing conversation and the inner timer.

Standard library only: ``bench/peers/driver.py`` imports it inside each peer's own virtualenv,
where ctxscope is not installed, so every peer is timed on the very conversation that
``bench_overhead.py`` and ``bench_transport.py`` time ctxscope on.
"""

from __future__ import annotations

import time
from typing import Any

ITEMS = 2000


def conversation(items: int = ITEMS, tag: str = "") -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Messages and tools making ``items`` items (1 system + 5 tools + messages).

    A ``tag`` in the system prompt makes each conversation a session of its own.
    """
    tools = [{"type": "function", "function": {
        "name": f"tool_{t}", "description": f"Tool number {t}: does one thing well. " * 4,
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}} for t in range(5)]
    messages: list[dict[str, Any]] = [{"role": "system", "content": f"You are a coding agent {tag}. " * 40}]
    n, i = 1 + len(tools), 0
    while n < items:
        kind = i % 3
        if kind == 0:
            messages.append({"role": "user", "content": f"Step {i}: please look at module {i} next. " * 3})
        elif kind == 1:
            messages.append({"role": "assistant", "content": None, "tool_calls": [{
                "id": f"call_{i}", "type": "function",
                "function": {"name": f"tool_{i % 5}", "arguments": f'{{"path": "src/mod_{i}.py"}}'}}]})
        else:
            size = 200 + (i * 37) % 1800
            body = (f"def f_{i}(x):\n    return x * {i}\n" * (size // 30 + 1))[:size]
            messages.append({"role": "tool", "tool_call_id": f"call_{i - 1}", "content": body})
        n += 1
        i += 1
    return messages, tools


class InnerTimer:
    """A wrapt wrapper keeping the duration of its last call (seconds).

    Installed under an instrumentation's wrapper (around the SDK's ``create`` or the client's
    ``send``): a call's total time minus this inner time is what the layers above add.
    """

    def __init__(self) -> None:
        self.last = 0.0

    def __call__(self, wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return wrapped(*args, **kwargs)
        finally:
            self.last = time.perf_counter() - started
