"""A breakdown that was not recorded says so (coverage ``unrecorded``), with no invented overhead.

A foreign GenAI span without content and a transcript without text keep their
reported totals; no provider framing, no inferred system prompt is made up.
"""

from __future__ import annotations

from _paths import TESTS

import json
from pathlib import Path
from typing import Iterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from ctxscope.interop.processor import ForeignSpanProcessor
from ctxscope.report.analysis import analyze_file
from ctxscope.report.json_report import session_json
from ctxscope.schema import Attr, GenAI, Metric, MetricAttr
from ctxscope.telemetry.tracker import Tracker

DATA = TESTS / "data" / "transcripts"


@pytest.fixture
def pipe() -> Iterator[tuple[TracerProvider, InMemorySpanExporter, InMemoryMetricReader]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    # Provider framing on (the default): a content-less call must still get none.
    provider.add_span_processor(ForeignSpanProcessor(provider, meters, tracker=Tracker(tokenizer="chars")))
    yield provider, exporter, reader
    provider.shutdown()
    meters.shutdown()


def _token_series(reader: InMemoryMetricReader) -> dict[str, float]:
    out: dict[str, float] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == Metric.TOKENS.name:
                    for point in metric.data.data_points:
                        out[point.attributes[MetricAttr.CATEGORY]] = point.value
    return out


def test_foreign_span_without_content_is_unrecorded_with_its_total(pipe):
    """Usage only (55 in): coverage unrecorded, estimated 0, no overhead; the 55 stay the session's total."""
    provider, exporter, reader = pipe
    span = provider.get_tracer("opentelemetry.instrumentation.openai_v2").start_span(
        "chat gpt-4o", kind=SpanKind.CLIENT,
        attributes={GenAI.OPERATION_NAME: "chat", GenAI.PROVIDER_NAME: "openai", GenAI.REQUEST_MODEL: "gpt-4o",
                    GenAI.USAGE_INPUT_TOKENS: 55, GenAI.USAGE_OUTPUT_TOKENS: 1})
    span.end()
    companion, = [s for s in exporter.get_finished_spans() if s.name.startswith("ctxscope.context")]
    attrs = companion.attributes
    assert attrs[Attr.COVERAGE] == "unrecorded"
    assert attrs[Attr.ESTIMATED_TOKENS] == 0
    assert attrs[Attr.REPORTED_TOKENS] == 55
    assert not [k for k in attrs if k.startswith(Attr.CATEGORIES_PREFIX)]  # no category, overhead included
    # Dashboards keep it in the totals (used = the sum of the series) and leave it out of the
    # composition overview (nothing but unattributed: dashboards/generate.py).
    assert _token_series(reader) == {"unattributed": 55}


def _without_text(source: Path, target: Path) -> None:
    """A real Claude Code transcript with every text emptied: what an export that kept only usage holds."""
    lines = []
    for line in source.read_text().splitlines():
        record = json.loads(line)
        message = record.get("message")
        if isinstance(message, dict):
            message["content"] = "" if isinstance(message.get("content"), str) else []
        lines.append(json.dumps(record))
    target.write_text("\n".join(lines) + "\n")


def test_transcript_without_text_is_unrecorded_and_infers_nothing(tmp_path):
    """claude_4c2ddfdc without its texts: coverage unrecorded, no inferred prefix, used = the reported input."""
    stripped = tmp_path / "no-text.jsonl"
    _without_text(DATA / "claude_4c2ddfdc.jsonl", stripped)
    session, = analyze_file(str(stripped), tokenizer="chars").sessions
    doc = session_json(session)
    assert doc["coverage"] == "unrecorded"
    assert doc["inferred_prefix_tokens"] == 0
    # The last assistant record's usage: 6 + 132 + 36,388 = 36,526, all of it unattributed.
    last = session.rows[-1]
    assert last.reported == 36_526
    assert {c.value: v for c, v in last.calibrated.items() if v} == {"unattributed": 36_526}
    assert session.used == 36_526


def test_transcript_with_text_stays_partial(tmp_path):
    """The same transcript as written: coverage partial, the prefix inferred as before."""
    session, = analyze_file(str(DATA / "claude_4c2ddfdc.jsonl"), tokenizer="chars").sessions
    doc = session_json(session)
    assert doc["coverage"] == "partial"
    assert doc["inferred_prefix_tokens"] > 0
