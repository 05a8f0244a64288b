"""google-genai's async client (client.aio) with aiohttp installed: generate_content and its stream, over aiohttp."""

import asyncio

from google.genai import types

from _harness import HELLO, SYSTEM, ProviderServer, report

READ = types.FunctionDeclaration(name="read_file", description="Read a file.",
                                 parameters={"type": "object", "properties": {"path": {"type": "string"}}})

with ProviderServer() as server:
    client = server.gemini_client()
    config = types.GenerateContentConfig(system_instruction=SYSTEM, tools=[types.Tool(function_declarations=[READ])])
    # The path under test: google-genai sends its async requests with aiohttp when it is installed.
    results: list = [["aiohttp", client._api_client._use_aiohttp()]]

    async def run() -> None:
        response = await client.aio.models.generate_content(model="gemini-2.5-flash", contents=HELLO, config=config)
        results.append([response.text, response.usage_metadata.prompt_token_count, response.response_id])
        text = ""
        async for chunk in await client.aio.models.generate_content_stream(model="gemini-2.5-flash", contents=HELLO,
                                                                           config=config):
            text += chunk.text or ""
        results.append([text])
        await client.aio.aclose()

    asyncio.run(run())
    report(server, results)
