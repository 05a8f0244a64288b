"""The ollama client: chat, not streamed and streamed (its default)."""

from _harness import HELLO, SYSTEM, ProviderServer, report

MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": HELLO}]

with ProviderServer() as server:
    client = server.ollama_client()
    response = client.chat(model="llama3.2", messages=MESSAGES, stream=False)
    results = [[response.message.content, response.prompt_eval_count]]
    results.append(["".join(c.message.content for c in client.chat(model="llama3.2", messages=MESSAGES, stream=True))])
    report(server, results)
