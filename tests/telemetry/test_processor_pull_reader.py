"""The end of a recording seen by a pull reader (Prometheus): one scrape serves the zeros.

A PrometheusMetricReader collects when scraped and queues what any other
collection gives it for the next scrape. A recording ended while a scrape is
under way (its collection taken, its answer not yet written) must not hand
that scrape the zeros beside its live values: the same series twice, of which
Prometheus keeps the first sample (the live value) and drops the zeros.
"""

from __future__ import annotations

import re

import pytest

pytest.importorskip("opentelemetry.exporter.prometheus")

from opentelemetry.exporter.prometheus import PrometheusMetricReader  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402

from ctxscope.schema import Category, Metric  # noqa: E402
from ctxscope.telemetry.processor import ContextSpanProcessor  # noqa: E402
from test_processor import annotation, emit  # noqa: E402


def tokens_lines(registry: CollectorRegistry, session: str) -> list[tuple[str, float]]:
    """One scrape of the registry: (category, value) of each ``llm.context.tokens`` sample of ``session``,
    in the order of the exposition (duplicates kept: Prometheus ingests the first of a series)."""
    name = re.escape(Metric.TOKENS.prometheus_sdk_name)
    out = []
    for line in generate_latest(registry).decode().splitlines():
        if re.match(name + r"\{", line) and f'"{session}"' in line:
            category = re.search(r'llm_context_category="([^"]*)"', line)
            out.append((category.group(1) if category else "", float(line.rsplit(" ", 1)[1])))
    return out


def test_a_recording_ended_during_a_scrape_serves_its_zeros_at_the_next_scrape() -> None:
    """stop() lands between a scrape's collection and its answer: that scrape serves the live value once,
    the next one 0, the one after nothing (before: live and 0 in the same answer, then nothing)."""
    registry = CollectorRegistry()
    reader = PrometheusMetricReader(registry=registry)
    mp = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    tp = TracerProvider(shutdown_on_exit=False)
    processor = ContextSpanProcessor(mp)
    tp.add_span_processor(processor)
    emit(tp, "s1", annotation({Category.SYSTEM: 3}))
    assert tokens_lines(registry, "s1") == [("system", 3.0)]

    collect = reader._collector._callback  # noqa: SLF001 - the scrape's own collection

    def collect_then_stop() -> None:
        collect()
        processor.stop()  # the recording ends while this scrape is being answered

    reader._collector._callback = collect_then_stop  # noqa: SLF001
    assert tokens_lines(registry, "s1") == [("system", 3.0)]
    reader._collector._callback = collect  # noqa: SLF001
    assert tokens_lines(registry, "s1") == [("system", 0.0)]
    assert tokens_lines(registry, "s1") == []
    mp.shutdown()
    tp.shutdown()
