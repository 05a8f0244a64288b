"""LiteLLM completion and acompletion, OpenAI-compatible and Anthropic bases, streamed and not."""

import asyncio
import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no network for the price map

import litellm  # noqa: E402

from _harness import HELLO, SYSTEM, ProviderServer, report  # noqa: E402

litellm.suppress_debug_info = True
MESSAGES = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": HELLO}]

with ProviderServer() as server:
    bases = {"openai/gpt-4o": server.openai_base_url, "anthropic/claude-sonnet-4-5": server.anthropic_base_url}
    results = []
    for model, base in bases.items():
        extra = {"max_tokens": 16}
        response = litellm.completion(model=model, messages=MESSAGES, api_base=base, api_key="k", **extra)
        results.append([model, "completion", response.choices[0].message.content, response.usage.prompt_tokens])
        # An agent that wants usage from a stream asks for it (OpenAI's rule; Anthropic always sends it).
        chunks = litellm.completion(model=model, messages=MESSAGES, api_base=base, api_key="k", stream=True,
                                    stream_options={"include_usage": True}, **extra)
        results.append([model, "stream", "".join((c.choices[0].delta.content or "") for c in chunks if c.choices)])

    async def run_async():
        for model, base in bases.items():
            response = await litellm.acompletion(model=model, messages=MESSAGES, api_base=base, api_key="k",
                                                 max_tokens=16)
            results.append([model, "acompletion", response.choices[0].message.content])
            chunks = await litellm.acompletion(model=model, messages=MESSAGES, api_base=base, api_key="k",
                                               stream=True, stream_options={"include_usage": True}, max_tokens=16)
            text = ""
            async for chunk in chunks:
                if chunk.choices:
                    text += chunk.choices[0].delta.content or ""
            results.append([model, "astream", text])

    asyncio.run(run_async())
    report(server, results)
