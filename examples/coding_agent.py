"""A small tool-using coding agent, for the ctxscope demo.

It fixes a bug in a toy repository with the real ``openai`` SDK, talking to
``ctxscope.testing.ProviderServer`` (a local server that answers like OpenAI,
with scripted replies): no network, no key. Along the way its context shows
what ctxscope is for: a large tool result (a whole source file), the same
file read twice, a growing history, and a compaction once the context passes
the agent's threshold, after which the conversation restarts from a summary.

Run it under auto-instrumentation (what ``make demo`` does)::

    opentelemetry-instrument python examples/coding_agent.py
    ctxscope context --session demo-coding-agent

or configure in code with ``--setup`` (calls ``ctxscope.setup()``). With no
OTLP endpoint configured, ctxscope records each call in its local store
(``$CTXSCOPE_DATA_DIR``, default ``~/.local/share/ctxscope``); set
``OTEL_EXPORTER_OTLP_ENDPOINT`` to send spans and metrics to a backend too.

The agent's own code uses two optional ctxscope APIs: ``ctxscope.session``
names the conversation, and ``ctxscope.session.compacting()`` marks its
summariser call, so the compaction is recorded as declared. Without them
ctxscope falls back to a fingerprint of the conversation and infers the
compaction from the rewritten history.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import openai

import ctxscope
from ctxscope.core import limits
from ctxscope.testing import ProviderServer, Reply

SESSION_ID = "demo-coding-agent"
MODEL = "gpt-4o"
# The harness compacts well before the model's window, as coding agents do.
EFFECTIVE_WINDOW = 32_000
COMPACT_AT = 16_000

SYSTEM_PROMPT = """You are a careful coding agent working in a small Python repository.
Use the tools to look before you change anything, keep edits minimal, and run the tests
after every change. Report what you changed and why in one or two sentences."""

TOOLS: list[dict[str, Any]] = [
    {"type": "function", "function": {
        "name": "list_files", "description": "List the files of the repository.",
        "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a whole file of the repository.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "edit_file", "description": "Replace one exact snippet of a file with another.",
        "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
            "required": ["path", "old", "new"]}}},
    {"type": "function", "function": {
        "name": "run_tests", "description": "Run the test suite and return its output.",
        "parameters": {"type": "object", "properties": {}}}},
]


def toy_repository() -> dict[str, str]:
    """A repository whose calc.py is large (the big tool result) and has a bug in add()."""
    helpers = "\n".join(
        f"def helper_{i:03d}(value: float) -> float:\n"
        f"    \"\"\"Scale a value by {i} and clamp it to the unit interval.\"\"\"\n"
        f"    return max(0.0, min(1.0, value * {i} / 1000))\n"
        for i in range(220))
    calc = ("\"\"\"Arithmetic helpers.\"\"\"\n\n\ndef add(a: int, b: int) -> int:\n    return a - b\n\n\n"
            + helpers)
    tests = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
    return {"calc.py": calc, "test_calc.py": tests, "README.md": "# toy\n"}


class Tools:
    """The agent's tools over an in-memory repository."""

    def __init__(self) -> None:
        self.files = toy_repository()

    def run(self, name: str, arguments: dict[str, Any]) -> str:
        if name == "list_files":
            return "\n".join(sorted(self.files))
        if name == "read_file":
            return self.files.get(arguments["path"], f"error: no file {arguments['path']}")
        if name == "edit_file":
            text = self.files.get(arguments["path"], "")
            if arguments["old"] not in text:
                return "error: snippet not found"
            self.files[arguments["path"]] = text.replace(arguments["old"], arguments["new"], 1)
            return "edited"
        if name == "run_tests":
            ok = "return a + b" in self.files["calc.py"]
            return "1 passed" if ok else (
                "FAILED test_calc.py::test_add - assert -1 == 5\n"
                " +  where -1 = add(2, 3)\n1 failed")
        return f"error: unknown tool {name}"


def script() -> list[Reply]:
    """What the local 'model' answers, in order (one reply per model call)."""
    return [
        Reply.tool_call("list_files", {}),
        Reply.tool_call("read_file", {"path": "calc.py"}),
        Reply.tool_call("run_tests", {}),
        Reply.tool_call("read_file", {"path": "calc.py"}),          # the same file again
        Reply.tool_call("edit_file", {"path": "calc.py", "old": "return a - b", "new": "return a + b"}),
        Reply.tool_call("run_tests", {}),
        Reply.text("Fixed add() in calc.py: it subtracted instead of adding. The test passes now."),
        # The summariser call of the compaction:
        Reply.text("Summary: the user asked to fix a failing test. add() in calc.py returned a - b; "
                   "it now returns a + b and test_calc.py passes. calc.py also holds 220 helper_* functions."),
        # After the compaction, a follow-up request:
        Reply.tool_call("read_file", {"path": "test_calc.py"}),
        Reply.tool_call("edit_file", {"path": "test_calc.py", "old": "assert add(2, 3) == 5",
                                      "new": "assert add(2, 3) == 5\n    assert add(-1, 1) == 0"}),
        Reply.tool_call("run_tests", {}),
        Reply.text("Added a test for negative numbers; all tests pass."),
    ]


class Agent:
    def __init__(self, client: openai.OpenAI, tools: Tools) -> None:
        self.client = client
        self.tools = tools
        self.messages: list[Any] = [{"role": "system", "content": SYSTEM_PROMPT}]
        self.calls = 0
        self.last_prompt_tokens = 0

    def ask(self, request: str) -> str:
        """One user request: call the model and run its tools until it answers in text."""
        self.messages.append({"role": "user", "content": request})
        while True:
            response = self.client.chat.completions.create(model=MODEL, messages=self.messages, tools=TOOLS)
            self.calls += 1
            self.last_prompt_tokens = response.usage.prompt_tokens if response.usage else 0
            message = response.choices[0].message
            # The SDK's message object goes back into the history as it is, as many agents do.
            self.messages.append(message)
            if not message.tool_calls:
                return message.content or ""
            for call in message.tool_calls:
                result = self.tools.run(call.function.name, json.loads(call.function.arguments or "{}"))
                self.messages.append({"role": "tool", "tool_call_id": call.id, "content": result})

    def maybe_compact(self) -> bool:
        """Past the threshold, summarise the history and start again from the summary."""
        threshold = limits.limits_for(MODEL, "openai").compact_threshold_tokens or COMPACT_AT
        if self.last_prompt_tokens < threshold:
            return False
        with ctxscope.session.compacting("auto"):
            summary = self.client.chat.completions.create(
                model=MODEL,
                messages=self.messages + [{"role": "user", "content": "Summarise the conversation so far."}])
        self.calls += 1
        # Tagged as a summary, so that ctxscope counts it under "summaries".
        text = f"<summary>\n{summary.choices[0].message.content or ''}\n</summary>"
        self.messages = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": text}]
        return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setup", action="store_true",
                        help="configure telemetry with ctxscope.setup() (instead of opentelemetry-instrument)")
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")
    args = parser.parse_args(argv)
    telemetry = ctxscope.setup(service_name="ctxscope-demo") if args.setup else None
    limits.configure(model=MODEL, effective_window_tokens=EFFECTIVE_WINDOW, compact_threshold_tokens=COMPACT_AT)

    def say(text: str) -> None:
        if not args.quiet:
            print(text)

    with ProviderServer() as server:
        server.reply(*script())
        agent = Agent(server.openai_client(), Tools())
        with ctxscope.session(SESSION_ID):
            say("user: The test in test_calc.py fails. Please fix it.")
            say("agent: " + agent.ask("The test in test_calc.py fails. Please fix it."))
            if agent.maybe_compact():
                say(f"(context compacted at {agent.last_prompt_tokens} tokens)")
            say("user: Add a test for negative numbers.")
            say("agent: " + agent.ask("Add a test for negative numbers."))
        say(f"{agent.calls} model calls, session {SESSION_ID!r}")
        if server.pending():
            print(f"coding_agent: {server.pending()} scripted replies left unused", file=sys.stderr)
            return 1
    if telemetry is not None:
        telemetry.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
