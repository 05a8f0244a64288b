"""LiteLLM acompletion over aiohttp: the aiohttp_openai provider (plain aiohttp), and the default async transport.

``aiohttp_openai/...`` posts with a plain ``aiohttp.ClientSession`` (``json=``):
the transport layer's aiohttp hook measures it. LiteLLM's default async
transport for its own HTTP handler (the Anthropic base here) is
``LiteLLMAiohttpTransport``, httpx over aiohttp: the httpx hook measures it
and the aiohttp hook below passes it on (one span per call), streamed and
not. (``aiohttp_openai`` cannot stream asynchronously in LiteLLM 1.110: it
parses the event stream as JSON and raises, with or without ctxscope.)
"""

import asyncio
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network for the price map

import litellm  # noqa: E402
from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler  # noqa: E402

from _harness import HELLO, SYSTEM, ProviderServer, report  # noqa: E402

litellm.suppress_debug_info = True
MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": HELLO}]

with ProviderServer() as server:
    results: list = [["aiohttp transport", AsyncHTTPHandler.should_use_aiohttp_transport()]]

    async def run() -> None:
        history = list(MESSAGES)
        for turn in range(2):
            response = await litellm.acompletion(model="aiohttp_openai/gpt-4o", messages=history,
                                                 api_base=server.openai_base_url, api_key="k", max_tokens=16)
            answer = response.choices[0].message.content
            results.append(["aiohttp_openai", turn, answer, response.id])
            history += [{"role": "assistant", "content": answer}, {"role": "user", "content": "and then?"}]
        base = server.anthropic_base_url
        response = await litellm.acompletion(model="anthropic/claude-sonnet-4-5", messages=MESSAGES, api_base=base,
                                             api_key="k", max_tokens=16)
        results.append(["anthropic", "acompletion", response.choices[0].message.content,
                        response.usage.prompt_tokens])
        chunks = await litellm.acompletion(model="anthropic/claude-sonnet-4-5", messages=MESSAGES, api_base=base,
                                           api_key="k", max_tokens=16, stream=True)
        text = ""
        async for chunk in chunks:
            if chunk.choices:
                text += chunk.choices[0].delta.content or ""
        results.append(["anthropic", "astream", text])

    asyncio.run(run())
    report(server, results)
