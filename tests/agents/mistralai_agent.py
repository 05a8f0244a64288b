"""The mistralai SDK: chat.complete."""

from mistralai.client import Mistral

from _harness import HELLO, SYSTEM, ProviderServer, report

MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": HELLO}]

with ProviderServer() as server:
    client = Mistral(api_key="k", server_url=server.base_url)
    response = client.chat.complete(model="mistral-small-latest", messages=MESSAGES)
    results = [[response.choices[0].message.content, response.usage.prompt_tokens, response.id]]
    response = client.chat.complete(model="mistral-small-latest", messages=MESSAGES + [
        {"role": "assistant", "content": response.choices[0].message.content}, {"role": "user", "content": "again"}])
    results.append([response.choices[0].message.content, response.usage.prompt_tokens])
    report(server, results)
