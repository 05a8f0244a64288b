"""Traces for real: the scripted agent's spans through the built Collector (collector-config/otelcol.yaml)
into Jaeger v2.

The agent runs under ``opentelemetry-instrument`` and sends OTLP to the
Collector, whose traces pipeline exports to Jaeger v2 (built from the Go
module proxy, in-memory storage). Through Jaeger's query API the test finds
the call spans by service and operation with their ``llm.context.*``
attributes and ``llm.context.change`` events as the scenario wrote them, and
follows the dashboard's trace link template to the session's traces.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any, Iterator

import pytest

from backends import Collector, InstrumentedAgent, Jaeger, requires
from ctxscope.schema import Attr
from metric_paths import COLLECTOR_CONFIG
from prometheus_helpers import ROOT, SERVICE, SESSIONS, turn_changes, wait_for

pytestmark = requires("otelcol", "jaeger")

CHAT = "chat gpt-4o"  # sess-near (3 turns) and sess-mystery (2 turns) call gpt-4o


class Run:
    def __init__(self, jaeger: Jaeger, spans: list[dict[str, Any]]) -> None:
        self.jaeger, self.spans = jaeger, spans  # spans as the agent ended them (trace and span ids)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    workdir = tmp_path_factory.mktemp("jaeger")
    jaeger = Jaeger(workdir / "jaeger")
    collector = Collector(workdir / "otelcol", COLLECTOR_CONFIG, jaeger_otlp=jaeger.otlp_grpc)
    agent = None
    try:
        jaeger.start()
        collector.start()
        agent = InstrumentedAgent(workdir / "agent", {
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.otlp_grpc, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
            "OTEL_EXPORTER_OTLP_INSECURE": "true", "OTEL_LOGS_EXPORTER": "none"}, service=SERVICE)
        agent.play_all(upto=-1)
        agent.play_last()
        spans = agent.spans()
        assert len(spans) == sum(len(s.turns) for s in SESSIONS)
        wait_for(lambda: len(_traces(jaeger, service=SERVICE, operation=CHAT)) == 5, 30)
        yield Run(jaeger, spans)
    finally:
        if agent is not None:
            agent.close()
        collector.stop()
        jaeger.stop()


def _traces(jaeger: Jaeger, **params: str) -> list[dict[str, Any]]:
    return jaeger.api("traces?" + urllib.parse.urlencode({"limit": "100", "lookback": "1h", **params}))["data"]


def _tags(span: dict[str, Any]) -> dict[str, Any]:
    return {t["key"]: t["value"] for t in span["tags"]}


def test_jaeger_lists_the_service_and_its_operations(run: Run) -> None:
    """The agent's service is known to Jaeger with one operation per model and the compaction."""
    assert SERVICE in run.jaeger.api("services")["data"]
    operations = set(run.jaeger.api(f"services/{SERVICE}/operations")["data"])
    assert operations == {"chat gpt-4o", "chat claude-sonnet-4-5", "compaction"}


def test_call_spans_keep_their_context_attributes_and_change_events(run: Run) -> None:
    """sess-near's last call: its categories, reported input, limits and three change events, as played."""
    traces = _traces(run.jaeger, service=SERVICE, operation=CHAT)
    spans = {s["spanID"]: s for t in traces for s in t["spans"]}
    near = [s for s in run.spans if s["session"] == "sess-near"]
    assert {s["span_id"] for s in near} <= set(spans)
    last = spans[near[-1]["span_id"]]
    tags = _tags(last)
    assert tags["gen_ai.conversation.id"] == "sess-near" and tags["gen_ai.request.model"] == "gpt-4o"
    # The last turn as tests/prometheus_helpers.py scripts it.
    assert {k: tags[f"llm.context.categories.{k}"] for k in ("system", "tools", "prompts", "assistant", "results")} == {
        "system": 1200, "tools": 2400, "prompts": 600, "assistant": 1800, "results": 3000}
    assert tags["llm.context.estimated_tokens"] == 9000 and tags["llm.context.reported_tokens"] == 9400
    assert tags["llm.context.compact_threshold_tokens"] == 10000 and tags["llm.context.stage"] == "request-input"
    events = [{f["key"]: f["value"] for f in log["fields"]} for log in last["logs"]]
    assert [e.get("event") for e in events] == ["llm.context.change"] * 3
    session = SESSIONS[0]
    want = [c.to_attributes() for c in turn_changes(session, session.turns[-1])]
    assert [{k: e[k] for k in w} for e, w in zip(events, want)] == want
    # Worked: results 1500 -> 3000, assistant 900 -> 1800, prompts 450 -> 600, largest first.
    assert [(e["category"], e["delta_tokens"]) for e in events] == [
        ("results", 1500), ("assistant", 900), ("prompts", 150)]


def test_the_dashboards_trace_link_finds_the_sessions_traces(run: Run) -> None:
    """The dashboard's "Traces of session" link, filled in, is a Jaeger search that returns exactly sess-near's
    traces."""
    dashboard = json.loads((ROOT / "dashboards" / "ctxscope-context.json").read_text(encoding="utf-8"))
    (link,) = dashboard["links"]
    url = (link["url"].replace("${jaeger_url}", run.jaeger.url).replace("${service}", SERVICE)
           .replace("${session}", "sess-near"))
    parts = urllib.parse.urlsplit(url)
    assert parts.path == "/search"  # the UI page; its API twin takes the same parameters
    params = dict(urllib.parse.parse_qsl(parts.query))
    assert json.loads(params["tags"]) == {Attr.SESSION_ID: "sess-near"}
    traces = _traces(run.jaeger, **params)
    want = {s["trace_id"] for s in run.spans if s["session"] == "sess-near"}
    assert {t["traceID"] for t in traces} == want and len(want) == 3
