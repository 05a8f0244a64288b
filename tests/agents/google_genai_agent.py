"""google-genai: generate_content and generate_content_stream, a system instruction and one function."""

from google.genai import types

from _harness import HELLO, SYSTEM, ProviderServer, report

READ = types.FunctionDeclaration(name="read_file", description="Read a file.",
                                 parameters={"type": "object", "properties": {"path": {"type": "string"}}})

with ProviderServer() as server:
    client = server.gemini_client()
    config = types.GenerateContentConfig(system_instruction=SYSTEM, tools=[types.Tool(function_declarations=[READ])])
    response = client.models.generate_content(model="gemini-2.5-flash", contents=HELLO, config=config)
    results = [[response.text, response.usage_metadata.prompt_token_count, response.response_id]]
    text = "".join(chunk.text or "" for chunk in
                   client.models.generate_content_stream(model="gemini-2.5-flash", contents=HELLO, config=config))
    results.append([text])
    report(server, results)
