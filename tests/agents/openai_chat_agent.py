"""A scripted chat agent on the openai SDK: two turns, a tool call, a secret in every message.

Run with the official GenAI instrumentation and ctxscope's completion hook,
or with ctxscope's own instrumentor: the test compares the compositions, and
looks for the secret in every byte exported.
"""

import json

from _harness import HELLO, SYSTEM, ProviderServer, Reply, report

SECRET = "SENTINEL-7f3a9c"  # must never leave the process
TOOLS = [{"type": "function", "function": {"name": "read_file", "description": "Read a file.",
                                           "parameters": {"type": "object",
                                                          "properties": {"path": {"type": "string"}}}}}]

with ProviderServer() as server:
    server.reply(Reply.tool_call("read_file", {"path": "notes.txt"}), Reply.text("done " + SECRET))
    client = server.openai_client()
    messages = [{"role": "system", "content": SYSTEM + " " + SECRET}, {"role": "user", "content": HELLO}]
    first = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    messages += [{"role": "assistant", "content": None,
                  "tool_calls": [{"id": call.id, "type": "function",
                                  "function": {"name": call.function.name, "arguments": call.function.arguments}}]},
                 {"role": "tool", "tool_call_id": call.id, "content": "the notes say " + SECRET}]
    second = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    report(server, [json.loads(call.function.arguments), second.choices[0].message.content])
