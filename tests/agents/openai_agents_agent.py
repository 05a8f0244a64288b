"""The OpenAI Agents SDK: Runner.run and Runner.run_streamed (Responses API; with_streaming_response)."""

import asyncio

import openai
from agents import Agent, Runner, set_default_openai_client, set_tracing_disabled

from _harness import HELLO, SYSTEM, ProviderServer, report

with ProviderServer() as server:
    set_tracing_disabled(True)

    async def main():
        set_default_openai_client(openai.AsyncOpenAI(base_url=server.openai_base_url, api_key="k", max_retries=0),
                                  use_for_tracing=False)
        agent = Agent(name="terse", instructions=SYSTEM, model="gpt-4o")
        result = await Runner.run(agent, HELLO)
        out = [[result.final_output]]
        streamed = Runner.run_streamed(agent, HELLO)
        kinds = []
        async for event in streamed.stream_events():
            kinds.append(event.type)
        out.append([streamed.final_output, sorted(set(kinds))])
        return out

    report(server, asyncio.run(main()))
