"""The groq SDK: chat completions, not streamed and streamed."""

import groq

from _harness import HELLO, SYSTEM, ProviderServer, report

MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": HELLO}]

with ProviderServer() as server:
    client = groq.Groq(base_url=server.base_url, api_key="k", max_retries=0)  # posts /openai/v1/chat/completions
    response = client.chat.completions.create(model="llama-3.3-70b-versatile", messages=MESSAGES)
    results = [[response.choices[0].message.content, response.usage.prompt_tokens, response.id]]
    # Groq's streams carry the usage in the last chunk's x_groq (the server does as Groq does).
    stream = client.chat.completions.create(model="llama-3.3-70b-versatile", messages=MESSAGES, stream=True)
    results.append(["".join((c.choices[0].delta.content or "") for c in stream if c.choices)])
    report(server, results)
