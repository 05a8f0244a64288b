"""The inferred system+tools prefix, against a session whose system prompt and tools are known.

An agent loop with the real anthropic SDK against ctxscope.testing's fake provider (usage rule:
ceil(len / 4) per string value of system, messages and tools, plus 10 hidden tokens), recorded as
a Claude Code transcript the way Claude Code writes one (the system prompt and tools are not in
it). After 5 calls, the prefix analyze infers is within 5% of what the provider counts for them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("anthropic")
from ctxscope.report.analysis import analyze_file  # noqa: E402
from ctxscope.schema import INFERRED_PREFIX_PART  # noqa: E402
from ctxscope.testing import API_ANTHROPIC, ProviderServer, Reply, reported_input_tokens  # noqa: E402

MODEL = "fake-agent-model"  # not a Claude name: the fake provider counts chars, not Claude tokens
SYSTEM = ("You are a careful coding agent. Read before you edit; run the tests after each change. " * 90)
TOOLS = [
    {"name": name, "description": f"{name}: " + "Use this tool when the task needs it; explain why. " * 25,
     "input_schema": {"type": "object", "properties": {"path": {"type": "string", "description": "a file path"}},
                      "required": ["path"]}}
    for name in ("read_file", "write_file", "run_tests")
]


def record_session(path: Path) -> int:
    """Run 6 calls (5 tool rounds, then an answer), write the transcript; return the true system+tools size."""
    records: list[dict] = []
    parent = None
    messages: list[dict] = []

    def link(kind: str, message: dict, **extra) -> None:
        nonlocal parent
        uuid = f"{kind[0]}{len(records)}"
        records.append({"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "prefix-session",
                        "timestamp": f"2026-02-11T10:00:{len(records):02d}.000Z", "message": message, **extra})
        parent = uuid

    prompt = "Fix the failing test in src/app.py and make sure the whole suite passes."
    messages.append({"role": "user", "content": prompt})
    link("user", {"role": "user", "content": prompt})
    with ProviderServer() as server:
        files = [f"src/module_{i}.py" for i in range(5)]
        server.reply(*[Reply.tool_call("read_file", {"path": f}) for f in files], Reply.text("All tests pass now."))
        client = server.anthropic_client()
        for _ in range(6):
            response = client.messages.create(model=MODEL, max_tokens=512, system=SYSTEM, tools=TOOLS,
                                              messages=messages)
            content = [block.model_dump(exclude_none=True) for block in response.content]
            link("assistant", {"id": response.id, "role": "assistant", "model": MODEL, "content": content,
                               "usage": response.usage.model_dump(exclude_none=True)}, requestId=f"req-{response.id}")
            messages.append({"role": "assistant", "content": content})
            calls = [b for b in content if b["type"] == "tool_use"]
            if not calls:
                break
            results = [{"type": "tool_result", "tool_use_id": b["id"],
                        "content": f"# {b['input']['path']}\n" + "def handler(event):\n    return event\n" * 40}
                       for b in calls]
            messages.append({"role": "user", "content": results})
            link("user", {"role": "user", "content": results})
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return reported_input_tokens({"system": SYSTEM, "tools": TOOLS}, API_ANTHROPIC, overhead=0)


def test_the_inferred_prefix_is_within_5_percent_of_the_true_system_and_tools_after_5_calls(tmp_path):
    """6 recorded calls: the prefix shown on call 5 (learned from calls 0-4) is within 5% of system+tools."""
    path = tmp_path / "session.jsonl"
    true_size = record_session(path)
    assert true_size > 2000  # a prefix worth inferring: most of the first call
    (session,) = analyze_file(str(path), tokenizer="chars").sessions
    assert len(session.rows) == 6
    inferred = session.rows[5].inferred
    assert abs(inferred - true_size) <= 0.05 * true_size, (inferred, true_size)
    assert session.parts[INFERRED_PREFIX_PART] > 0
    # The counted content never includes it: the file does not hold it.
    assert session.rows[0].inferred == 0 and session.rows[0].estimated < 0.1 * true_size
