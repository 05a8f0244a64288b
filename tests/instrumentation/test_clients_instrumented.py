"""Unmodified agents of each client under ``opentelemetry-instrument``, against ctxscope.testing's server.

Each script in ``tests/agents`` runs twice in a fresh process: bare, and
under ``opentelemetry-instrument`` exporting to a real OTLP receiver. It
prints its results and what the server counted for every request. For each:
the results are the same in both runs, there is exactly one ctxscope span
per model call with the annotation, every span's reported input is what the
server counted, and the first call's categories are worked out by hand
(chars/4: the system prompt "You are terse." 4 tokens, the prompt "hello
there" 3).
"""

from __future__ import annotations

from _paths import TESTS

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("oteltest.sink")

from _otlp_sink import Receiver, attrs, wait_for  # noqa: E402

AGENTS = TESTS / "agents"

# script -> (module it needs, categories of its first call beside overhead, gen_ai.provider.name of each call)
CLIENTS = {
    "litellm_agent": ("litellm", {"system": 4, "prompts": 3}, ["openai"] * 2 + ["anthropic"] * 2
                      + ["openai"] * 2 + ["anthropic"] * 2),
    "google_genai_agent": ("google.genai", {"system": 4, "prompts": 3}, ["gcp.gemini"] * 2),
    # Over aiohttp: google-genai's async client; LiteLLM's aiohttp_openai provider (plain aiohttp) and
    # its default async transport (httpx over aiohttp) to the Anthropic base.
    "google_genai_async_agent": ("google.genai", {"system": 4, "prompts": 3}, ["gcp.gemini"] * 2),
    "litellm_aiohttp_agent": ("litellm", {"system": 4, "prompts": 3}, ["openai"] * 2 + ["anthropic"] * 2),
    "ollama_agent": ("ollama", {"system": 4, "prompts": 3}, ["ollama"] * 2),
    "groq_agent": ("groq", {"system": 4, "prompts": 3}, ["openai"] * 2),
    "mistralai_agent": ("mistralai.client", {"system": 4, "prompts": 3}, ["openai"] * 2),
    "openai_agents_agent": ("agents", {"system": 4, "prompts": 3}, ["openai"] * 2),
    "langchain_agent": ("langchain_openai", {"system": 4, "prompts": 3}, ["openai", "anthropic"]),
}
# Tools of the google-genai agent: read_file's declaration as google-genai sends it, compact JSON:
# {"description":"Read a file.","name":"read_file","parameters":{"properties":{"path":{"type":"STRING"}},
# "type":"OBJECT"}} is 120 chars -> 30 tokens.
GEMINI_TOOLS = 30
# Agents whose first result says the client took its aiohttp path (it is what they are there to test).
ON_AIOHTTP = ("google_genai_async_agent", "litellm_aiohttp_agent")


def _run(script: str, tmp_path: Path, endpoint: str | None) -> dict:
    bin_dir = Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CTXSCOPE_"))}
    env.update({"CTXSCOPE_TOKENIZER": "chars", "CTXSCOPE_DATA_DIR": str(tmp_path / "store"),
                "PYTHONPATH": os.pathsep.join([str(AGENTS), env.get("PYTHONPATH", "")]),
                "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    command = [sys.executable, str(AGENTS / f"{script}.py")]
    if endpoint is not None:
        env.update({"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                    "OTEL_SERVICE_NAME": script,
                    # Other OpenAI instrumentations of the dev extra register "openai": this is about ctxscope's.
                    "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "openai"})
        command = [str(bin_dir / "opentelemetry-instrument"), *command]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("AGENT-RESULT "))
    return json.loads(line[len("AGENT-RESULT "):])


@pytest.mark.parametrize("script", sorted(CLIENTS))
def test_an_unmodified_agent_gets_one_annotated_span_per_call(script, tmp_path):
    """Same results bare and instrumented; one ctxscope span per call, reported input = the server's count."""
    module, first_categories, providers = CLIENTS[script]
    pytest.importorskip(module)
    bare = _run(script, tmp_path, None)
    with Receiver("http/protobuf") as receiver:
        traced = _run(script, tmp_path, receiver.endpoint)
        served = traced["served"]

        def ours():
            return [s for r in receiver.handler.traces for rs in r.resource_spans for ss in rs.scope_spans
                    if ss.scope.name == "ctxscope" for s in ss.spans if s.name.startswith("chat")]

        wait_for(lambda: len(ours()) >= len(served))
    assert traced["results"] == bare["results"]
    if script in ON_AIOHTTP:
        assert bare["results"][0][1] is True, bare["results"][0]
    spans = ours()
    assert len(spans) == len(served) == len(providers), [s.name for s in spans]
    values = [attrs(s.attributes) for s in spans]
    assert all("llm.context.estimated_tokens" in v for v in values)
    assert [v.get("llm.context.reported_tokens") for v in values] == [count for _, count in served]
    assert [v["gen_ai.provider.name"] for v in values] == providers
    first = {k.split(".")[-1]: n for k, n in values[0].items() if k.startswith("llm.context.categories.")}
    expected = dict(first_categories)
    if script.startswith("google_genai"):
        expected["tools"] = GEMINI_TOOLS
    assert {k: v for k, v in first.items() if k != "overhead"} == expected


def test_the_docs_table_names_every_tested_client():
    """docs/instrumentation.md's table of clients names the agent script that tests each (issue 18: the table of
    clients covered, each with how it is reached and what is missing, kept with the tests that prove it)."""
    docs = (TESTS.parent / "docs" / "instrumentation.md").read_text(encoding="utf-8")
    table = [line for line in docs.splitlines() if line.startswith("| ")]
    missing = [script for script in CLIENTS if not any(f"tests/agents/{script}.py" in row for row in table)]
    assert missing == []
