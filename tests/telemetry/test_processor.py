"""ContextSpanProcessor: hand-built annotated spans in, metric values worked out by hand out."""

from __future__ import annotations

from _paths import ROOT

import logging
import math
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    InMemoryMetricReader,
    MetricExporter,
    MetricExportResult,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import NoOpTracerProvider

from ctxscope.telemetry.processor import ContextSpanProcessor, calibrated_view, ensure_processor
from ctxscope.schema import (
    Annotation,
    Attr,
    Category,
    CompactionTrigger,
    Coverage,
    GenAI,
    Metric,
    MetricAttr,
    Stage,
    WasteKind,
)

C = Category


def annotation(categories: dict[Category, int], *, reported: int | None = None, window: int | None = None,
               threshold: int | None = None, stage: Stage = Stage.REQUEST_INPUT,
               waste: dict[WasteKind, int] | None = None,
               trigger: CompactionTrigger | None = None) -> Annotation:
    return Annotation(stage=stage, basis="chars/4", coverage=Coverage.COMPLETE, baseline=False,
                      categories=categories, estimated_tokens=sum(categories.values()),
                      reported_tokens=reported, window_tokens=window, compact_threshold_tokens=threshold,
                      model="gpt-4o", waste=waste or {}, compaction_trigger=trigger)


def emit(tp: TracerProvider, session: str, ann: Annotation | None = None, *, model: str = "gpt-4o",
         extra: dict[str, Any] | None = None) -> None:
    """Open a span as the instrumentation does: the annotation is set while it is open."""
    attrs: dict[str, Any] = {GenAI.CONVERSATION_ID: session, GenAI.REQUEST_MODEL: model,
                             GenAI.PROVIDER_NAME: "openai"}
    if ann is not None:
        attrs.update(ann.to_attributes())
    attrs.update(extra or {})
    with tp.get_tracer("test").start_as_current_span("chat " + model, attributes=attrs) as span:
        if ann is not None:
            for name, event_attrs in ann.change_events():
                span.add_event(name, event_attrs)


def points(data: Any) -> dict[tuple[str, frozenset], float]:
    """{(instrument, attributes): value} of one collection."""
    out: dict[tuple[str, frozenset], float] = {}
    if data is None:
        return out
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    if hasattr(p, "value"):  # the gauges and the counter (histograms: histogram_points)
                        out[(metric.name, frozenset(p.attributes.items()))] = p.value
    return out


def tokens_of(pts: dict, session: str, model: str = "gpt-4o") -> dict[str, float]:
    out = {}
    for (name, attrs), value in pts.items():
        a = dict(attrs)
        if name == Metric.TOKENS.name and a[MetricAttr.SESSION_ID] == session \
                and a.get(MetricAttr.REQUEST_MODEL) == model:
            out[a[MetricAttr.CATEGORY]] = value
    return out


def series(pts: dict, name: str, session: str) -> dict[frozenset, float]:
    return {attrs: v for (n, attrs), v in pts.items()
            if n == name and dict(attrs)[MetricAttr.SESSION_ID] == session}


# Both ways the gauges are collected: the SDK's default aggregation and ctxscope's views (gauge_views_or_none).
@pytest.fixture
def env(gauge_views_or_none):
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader], shutdown_on_exit=False, views=gauge_views_or_none)
    tp = TracerProvider(shutdown_on_exit=False)
    processor = ContextSpanProcessor(mp, max_sessions=3)
    tp.add_span_processor(processor)
    yield tp, reader, processor
    processor.shutdown()
    mp.shutdown()


def test_calibrated_tokens_limits_reported_utilization(env):
    """Reported above estimates: categories raw, unattributed = 4000 - 3500, utilization 4000/100000."""
    tp, reader, _ = env
    emit(tp, "s1", annotation({C.SYSTEM: 1000, C.TOOLS: 2000, C.PROMPTS: 500}, reported=4000,
                              window=128000, threshold=100000))
    pts = points(reader.get_metrics_data())
    assert tokens_of(pts, "s1") == {"system": 1000, "tools": 2000, "prompts": 500, "unattributed": 500}
    limits = {dict(a)[MetricAttr.LIMIT]: v for a, v in series(pts, Metric.LIMIT_TOKENS.name, "s1").items()}
    assert limits == {"window": 128000, "compact_threshold": 100000}
    assert list(series(pts, Metric.REPORTED_TOKENS.name, "s1").values()) == [4000]
    assert list(series(pts, Metric.UTILIZATION.name, "s1").values()) == [pytest.approx(0.04)]
    attrs = dict(next(iter(series(pts, Metric.REPORTED_TOKENS.name, "s1"))))
    # A span keyed by gen_ai.conversation.id alone (another instrumentation): both keys carry it.
    assert attrs == {MetricAttr.SESSION_ID: "s1", GenAI.CONVERSATION_ID: "s1", GenAI.REQUEST_MODEL: "gpt-4o",
                     GenAI.PROVIDER_NAME: "openai"}


def test_estimates_above_reported_are_scaled_and_missing_category_reports_zero(env):
    """Estimates 4000 > reported 3000: factor 0.75; prompts and unattributed from the older call report 0."""
    tp, reader, _ = env
    emit(tp, "s1", annotation({C.SYSTEM: 1000, C.TOOLS: 2000, C.PROMPTS: 500}, reported=4000, window=100000))
    reader.get_metrics_data()
    emit(tp, "s1", annotation({C.SYSTEM: 1000, C.TOOLS: 2000, C.RESULTS: 1000}, reported=3000, window=100000))
    pts = points(reader.get_metrics_data())
    assert tokens_of(pts, "s1") == {"system": 750, "tools": 1500, "results": 750, "prompts": 0, "unattributed": 0}
    assert list(series(pts, Metric.UTILIZATION.name, "s1").values()) == [pytest.approx(0.03)]


def test_largest_remainder_rounding_sums_to_reported():
    """333/333/334 scaled to 500: 166.5/166.5/167 -> 167/166/167 (tie to the first in report order)."""
    view = calibrated_view({C.SYSTEM: 333, C.TOOLS: 333, C.PROMPTS: 334}, 500)
    assert view == {C.SYSTEM: 167, C.TOOLS: 166, C.PROMPTS: 167, C.UNATTRIBUTED: 0}


def test_no_measurement_keeps_estimates_and_no_utilization_without_limit(env):
    """Without reported tokens the gauges carry the raw estimates; no limit known, no utilization series."""
    tp, reader, _ = env
    emit(tp, "s2", annotation({C.SYSTEM: 10, C.PROMPTS: 7}))
    pts = points(reader.get_metrics_data())
    assert tokens_of(pts, "s2") == {"system": 10, "prompts": 7}
    assert series(pts, Metric.UTILIZATION.name, "s2") == {}
    assert series(pts, Metric.REPORTED_TOKENS.name, "s2") == {}


def test_end_session_reports_zero_once_then_leaves(env):
    """end_session: every gauge series of the session is 0 in the next collection, absent in the one after."""
    tp, reader, processor = env
    emit(tp, "s1", annotation({C.SYSTEM: 1000, C.PROMPTS: 500}, reported=2000, window=10000,
                              waste={WasteKind.BLOAT: 300}))
    emit(tp, "s2", annotation({C.SYSTEM: 5}))
    reader.get_metrics_data()
    assert processor.end_session("s1") is True
    pts = points(reader.get_metrics_data())
    ended = {k: v for k, v in pts.items() if dict(k[1])[MetricAttr.SESSION_ID] == "s1"}
    assert len(ended) == 3 + 1 + 1 + 1 + 1  # 3 categories, window, reported, utilization, bloat
    assert set(ended.values()) == {0}
    assert tokens_of(pts, "s2") == {"system": 5}
    pts = points(reader.get_metrics_data())
    assert not any(dict(k[1])[MetricAttr.SESSION_ID] == "s1" for k in pts)
    assert tokens_of(pts, "s2") == {"system": 5}
    assert processor.end_session("s1") is False


def test_lru_eviction_zeroes_the_least_recently_used(env):
    """max_sessions=3: a fourth session ends the least recently used one (s2, as s1 was used again)."""
    tp, reader, processor = env
    for sid in ("s1", "s2", "s3"):
        emit(tp, sid, annotation({C.SYSTEM: 100}))
    emit(tp, "s1", annotation({C.SYSTEM: 200}))
    reader.get_metrics_data()
    emit(tp, "s4", annotation({C.SYSTEM: 400}))
    assert processor.sessions() == ["s3", "s1", "s4"]
    pts = points(reader.get_metrics_data())
    assert tokens_of(pts, "s2") == {"system": 0}
    assert tokens_of(pts, "s1") == {"system": 200}
    assert tokens_of(points(reader.get_metrics_data()), "s2") == {}


def test_compaction_counter_and_waste(env):
    """Two auto and one manual post-compaction spans count 2 and 1; waste per kind, a missing kind 0."""
    tp, reader, processor = env
    emit(tp, "s1", annotation({C.SYSTEM: 100}, waste={WasteKind.DUPLICATE: 40, WasteKind.STALE: 10}))
    reader.get_metrics_data()  # a series reports 0 when missing once it has been exported
    for trigger in (CompactionTrigger.AUTO, CompactionTrigger.MANUAL, None):
        emit(tp, "s1", annotation({C.SUMMARIES: 50}, stage=Stage.POST_COMPACTION, trigger=trigger,
                                  waste={WasteKind.DUPLICATE: 5}))
    pts = points(reader.get_metrics_data())
    counts = {dict(a)[MetricAttr.COMPACTION_TRIGGER]: v for a, v in series(pts, Metric.COMPACTIONS.name, "s1").items()}
    assert counts == {"auto": 2, "manual": 1}
    waste = {dict(a)[MetricAttr.WASTE_KIND]: v for a, v in series(pts, Metric.WASTE_TOKENS.name, "s1").items()}
    assert waste == {"duplicate": 5, "stale": 0}
    assert tokens_of(pts, "s1") == {"system": 0, "summaries": 50}
    processor.end_session("s1")
    pts = points(reader.get_metrics_data())
    counts = {dict(a)[MetricAttr.COMPACTION_TRIGGER]: v for a, v in series(pts, Metric.COMPACTIONS.name, "s1").items()}
    assert counts == {"auto": 2, "manual": 1}  # a counter never goes down: its final total once more
    assert series(points(reader.get_metrics_data()), Metric.COMPACTIONS.name, "s1") == {}


def test_older_span_ending_late_does_not_replace_newer_state(env):
    """Concurrent calls: the state follows the observation time, not the order spans end in."""
    tp, reader, _ = env
    tracer = tp.get_tracer("test")
    base = {GenAI.CONVERSATION_ID: "s1", GenAI.REQUEST_MODEL: "gpt-4o"}
    old = tracer.start_span("old", attributes={**base, **annotation({C.SYSTEM: 1}).to_attributes()})
    new = tracer.start_span("new", attributes={**base, **annotation({C.SYSTEM: 2}).to_attributes()})
    new.end()
    old.end()
    assert tokens_of(points(reader.get_metrics_data()), "s1") == {"system": 2}


def test_session_ended_span_ends_the_session(env):
    """A span carrying llm.context.session_ended ends its session like end_session."""
    tp, reader, processor = env
    emit(tp, "s1", annotation({C.SYSTEM: 9}))
    reader.get_metrics_data()
    emit(tp, "s1", extra={Attr.SESSION_ENDED: True})
    assert processor.sessions() == []
    assert tokens_of(points(reader.get_metrics_data()), "s1") == {"system": 0}


def test_bad_annotation_is_logged_not_raised(env, caplog):
    """An unreadable annotation (unknown stage) logs a warning; the user's span ends normally."""
    tp, reader, processor = env
    with caplog.at_level(logging.WARNING, logger="ctxscope"):
        emit(tp, "s1", extra={Attr.STAGE: "bogus", Attr.ESTIMATED_TOKENS: 1, Attr.BASIS: "chars/4",
                              Attr.COVERAGE: "complete", Attr.BASELINE: True})
    assert "could not read the context annotation" in caplog.text
    assert processor.sessions() == []


def test_a_negative_reported_count_is_refused_at_its_call(env, caplog):
    """The calibrated view is made when a collection reads it, but a negative reported count (which
    it cannot calibrate to) is still refused at its call: logged, and the session keeps the view of the
    call before (system 1000, tools 2000, unattributed 4000 - 3000 = 1000)."""
    tp, reader, processor = env
    emit(tp, "s1", annotation({C.SYSTEM: 1000, C.TOOLS: 2000}, reported=4000))
    with caplog.at_level(logging.WARNING, logger="ctxscope"):
        emit(tp, "s1", annotation({C.SYSTEM: 5000}, reported=-1))
    assert "could not read the context annotation" in caplog.text
    assert tokens_of(points(reader.get_metrics_data()), "s1") == {"system": 1000, "tools": 2000,
                                                                 "unattributed": 1000}


def test_spans_without_annotation_are_ignored(env):
    """A plain span (an HTTP call, say) produces no series."""
    tp, reader, processor = env
    with tp.get_tracer("t").start_as_current_span("GET /", attributes={"http.method": "GET"}):
        pass
    assert processor.sessions() == []
    assert points(reader.get_metrics_data()) == {}


def test_every_reader_sees_the_final_zero_once():
    """Two metric readers: each collection of each reader sees the zeros once, then nothing."""
    r1, r2 = InMemoryMetricReader(), InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[r1, r2], shutdown_on_exit=False)
    tp = TracerProvider(shutdown_on_exit=False)
    processor = ContextSpanProcessor(mp)
    tp.add_span_processor(processor)
    emit(tp, "s1", annotation({C.SYSTEM: 3}))
    processor.end_session("s1")
    assert tokens_of(points(r1.get_metrics_data()), "s1") == {"system": 0}
    assert tokens_of(points(r2.get_metrics_data()), "s1") == {"system": 0}
    assert tokens_of(points(r1.get_metrics_data()), "s1") == {}
    assert tokens_of(points(r2.get_metrics_data()), "s1") == {}
    mp.shutdown()


class _Capture(MetricExporter):
    """Keeps every batch a real PeriodicExportingMetricReader exports."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[Any] = []

    def export(self, metrics_data, timeout_millis: float = 10_000, **kwargs) -> MetricExportResult:
        self.batches.append(metrics_data)
        return MetricExportResult.SUCCESS

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs) -> None:
        pass


@pytest.mark.parametrize("meter_first", [False, True])
def test_shutdown_exports_the_zeros_in_either_order(meter_first):
    """Whichever provider shuts down first, the last export holds 0 for the recording's series."""
    exporter = _Capture()
    mp = MeterProvider(metric_readers=[PeriodicExportingMetricReader(exporter, export_interval_millis=math.inf)],
                       shutdown_on_exit=False)
    tp = TracerProvider(shutdown_on_exit=False)
    tp.add_span_processor(ContextSpanProcessor(mp))
    emit(tp, "s1", annotation({C.SYSTEM: 1000, C.PROMPTS: 24}, reported=1100))
    mp.force_flush()
    assert tokens_of(points(exporter.batches[-1]), "s1") == {"system": 1000, "prompts": 24, "unattributed": 76}
    if meter_first:
        mp.shutdown()
        tp.shutdown()
    else:
        tp.shutdown()
        mp.shutdown()
    last_with_s1 = [b for b in exporter.batches if tokens_of(points(b), "s1")][-1]
    assert tokens_of(points(last_with_s1), "s1") == {"system": 0, "prompts": 0, "unattributed": 0}


def test_ensure_processor_is_idempotent_and_skips_non_sdk_providers():
    """Two calls install one processor; a no-op provider gets none."""
    tp = TracerProvider(shutdown_on_exit=False)
    mp = MeterProvider(shutdown_on_exit=False)
    first = ensure_processor(tp, mp)
    assert first is not None and ensure_processor(tp, mp) is first
    assert [p for p in tp._active_span_processor._span_processors if isinstance(p, ContextSpanProcessor)] == [first]
    assert ensure_processor(NoOpTracerProvider()) is None


def test_docs_list_every_instrument_with_its_prometheus_names():
    """docs/telemetry.md's table names every schema.Metric, its unit and both Prometheus names."""

    text = (ROOT / "docs" / "telemetry.md").read_text()
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| `llm.context.")}
    for spec in Metric.ALL:
        row = rows[f"`{spec.name}`"]
        assert f"`{spec.unit}`" in row and f"`{spec.prometheus_name}`" in row
        assert f"`{spec.prometheus_sdk_name}`" in row and f"| {spec.kind} |" in row


def histogram_points(data: Any, name: str) -> dict[frozenset, tuple[int, float]]:
    """{attributes: (count, sum)} of one histogram in one collection."""
    out: dict[frozenset, tuple[int, float]] = {}
    for rm in data.resource_metrics if data is not None else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name == name:
                    for p in metric.data.data_points:
                        out[frozenset(p.attributes.items())] = (p.count, p.sum)
    return out


def test_a_category_that_leaves_reports_zero_once_then_leaves(env):
    """prompts in the first call only: 7, then 0 once, then no series; system stays 10 throughout."""
    tp, reader, _ = env
    emit(tp, "s1", annotation({C.SYSTEM: 10, C.PROMPTS: 7}))
    assert tokens_of(points(reader.get_metrics_data()), "s1") == {"system": 10, "prompts": 7}
    emit(tp, "s1", annotation({C.SYSTEM: 10}))
    assert tokens_of(points(reader.get_metrics_data()), "s1") == {"system": 10, "prompts": 0}
    assert tokens_of(points(reader.get_metrics_data()), "s1") == {"system": 10}
    emit(tp, "s1", annotation({C.SYSTEM: 10, C.PROMPTS: 3}))  # back: reported again
    assert tokens_of(points(reader.get_metrics_data()), "s1") == {"system": 10, "prompts": 3}


def test_an_idle_session_is_in_every_collection_with_its_values(env):
    """s1 calls once, then only s2 calls: every collection still holds s1's 10/7, unchanged, beside s2's growth."""
    tp, reader, _ = env
    emit(tp, "s1", annotation({C.SYSTEM: 10, C.PROMPTS: 7}, window=100))
    for n in range(1, 4):
        emit(tp, "s2", annotation({C.SYSTEM: 5, C.PROMPTS: n}))
        pts = points(reader.get_metrics_data())
        assert tokens_of(pts, "s1") == {"system": 10, "prompts": 7}
        assert tokens_of(pts, "s2") == {"system": 5, "prompts": n}
        assert series(pts, Metric.UTILIZATION.name, "s1") == {
            frozenset({MetricAttr.SESSION_ID: "s1", MetricAttr.CONVERSATION_ID: "s1",
                       MetricAttr.REQUEST_MODEL: "gpt-4o", MetricAttr.PROVIDER_NAME: "openai"}.items()): 0.17}


def test_a_session_ended_and_restarted_before_a_collection_reports_its_new_values(env):
    """s1 ends at 10/7 and restarts at 4 before anything collects: the collection sees system 4, prompts 0 once."""
    tp, reader, processor = env
    emit(tp, "s1", annotation({C.SYSTEM: 10, C.PROMPTS: 7}))
    processor.end_session("s1")
    emit(tp, "s1", annotation({C.SYSTEM: 4}))
    assert tokens_of(points(reader.get_metrics_data()), "s1") == {"system": 4, "prompts": 0}
    assert tokens_of(points(reader.get_metrics_data()), "s1") == {"system": 4}


def test_many_ended_sessions_leave_the_sdk_storage(gauge_views_or_none):
    """300 sessions of 8 categories come and go (2,400 series, past the SDK's 2,000 limit): the 301st is its own."""
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader], shutdown_on_exit=False, views=gauge_views_or_none)
    processor = ContextSpanProcessor(mp, max_sessions=4)
    cats = {c: 10 for c in list(Category)[:8]}
    for n in range(300):
        processor.observe_call({Attr.SESSION_ID: f"s{n}", **annotation(cats).to_attributes()}, n)
        reader.get_metrics_data()
        processor.end_session(f"s{n}")
        reader.get_metrics_data()  # the zeros
    processor.observe_call({Attr.SESSION_ID: "last", **annotation({C.SYSTEM: 42}).to_attributes()}, 301)
    pts = points(reader.get_metrics_data())
    assert tokens_of(pts, "last") == {"system": 42}
    assert not any("otel.metric.overflow" in dict(attrs) for _, attrs in pts)
    assert {dict(a)[MetricAttr.SESSION_ID] for n, a in pts if n == Metric.TOKENS.name} == {"last"}
    processor.shutdown()
    mp.shutdown()


def test_added_tokens_are_the_growth_of_each_category_over_the_previous_call(env):
    """Baseline 100/50 records nothing; then prompts +30 and results +200 (system shrinks: nothing); sums add."""
    tp, reader, _ = env
    emit(tp, "s1", Annotation(stage=Stage.REQUEST_INPUT, basis="chars/4", coverage=Coverage.COMPLETE, baseline=True,
                    categories={C.SYSTEM: 100, C.PROMPTS: 50}, estimated_tokens=150, model="gpt-4o"))
    assert histogram_points(reader.get_metrics_data(), Metric.ADDED_TOKENS.name) == {}
    emit(tp, "s1", annotation({C.SYSTEM: 90, C.PROMPTS: 80, C.RESULTS: 200}))
    emit(tp, "s1", annotation({C.SYSTEM: 90, C.PROMPTS: 100, C.RESULTS: 200}))
    added = {dict(a)[MetricAttr.CATEGORY]: v
             for a, v in histogram_points(reader.get_metrics_data(), Metric.ADDED_TOKENS.name).items()}
    assert added == {"prompts": (2, 50), "results": (1, 200)}  # prompts 30 then 20


def test_fleet_mode_drops_the_session_key_and_records_request_histograms():
    """session_key=False: no per-session gauge; per request and category a histogram point; compactions counted."""
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    tp = TracerProvider(shutdown_on_exit=False)
    processor = ContextSpanProcessor(mp, session_key=False)
    tp.add_span_processor(processor)
    emit(tp, "s1", annotation({C.SYSTEM: 1000, C.PROMPTS: 500}, reported=2000))
    emit(tp, "s2", annotation({C.SYSTEM: 3000}, reported=3000))
    emit(tp, "s2", annotation({C.SUMMARIES: 50}, stage=Stage.POST_COMPACTION, trigger=CompactionTrigger.MANUAL))
    data = reader.get_metrics_data()
    names = {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert not names & {m.name for m in Metric.ALL if m.kind == "gauge"}
    request = {dict(a)[MetricAttr.CATEGORY]: v
               for a, v in histogram_points(data, Metric.REQUEST_TOKENS.name).items()}
    # s1 calibrated: 1000/500 and unattributed 2000 - 1500 = 500; s2: 3000 and unattributed 0.
    assert request == {"system": (2, 4000), "prompts": (1, 500), "unattributed": (2, 500)}
    assert not any(MetricAttr.SESSION_ID in dict(a) for a in histogram_points(data, Metric.REQUEST_TOKENS.name))
    counts = {dict(a)[MetricAttr.COMPACTION_TRIGGER]: v for (n, a), v in points(data).items()
              if n == Metric.COMPACTIONS.name}
    assert counts == {"manual": 1}
    processor.shutdown()
    mp.shutdown()


def test_fleet_mode_setting_is_read_from_the_environment(monkeypatch, caplog):
    """CTXSCOPE_METRICS_SESSION_KEY: unset on, off is fleet mode, a bad value one line and the default."""
    from ctxscope import config

    assert config.read({}).metrics_session_key is True
    assert config.read({"CTXSCOPE_METRICS_SESSION_KEY": "off"}).metrics_session_key is False
    with caplog.at_level(logging.WARNING, logger="ctxscope"):
        assert config.read({"CTXSCOPE_METRICS_SESSION_KEY": "maybe"}).metrics_session_key is True
    assert "ignoring CTXSCOPE_METRICS_SESSION_KEY='maybe'" in caplog.text


def test_an_sdk_storage_that_cannot_forget_is_said_once(monkeypatch, caplog):
    """Without the SDK's series key, ended series stay (reporting 0): one warning for two ended sessions."""
    import ctxscope.telemetry.processor as processor_module

    monkeypatch.setattr(processor_module, "_hash_attributes", None)
    monkeypatch.setattr(processor_module, "_storage_warned", processor_module.threading.Event())
    reader = InMemoryMetricReader()
    mp = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    processor = ContextSpanProcessor(mp, max_sessions=4)
    with caplog.at_level(logging.WARNING, logger="ctxscope.telemetry.processor"):
        for n in range(2):
            processor.observe_call({Attr.SESSION_ID: f"s{n}", **annotation({C.SYSTEM: 10}).to_attributes()}, n)
            reader.get_metrics_data()
            processor.end_session(f"s{n}")
            reader.get_metrics_data()  # the zeros
            reader.get_metrics_data()  # would forget them
    pts = points(reader.get_metrics_data())
    assert tokens_of(pts, "s0") == {"system": 0} and tokens_of(pts, "s1") == {"system": 0}
    warnings = [r for r in caplog.records if "metric storage is not the known one" in r.getMessage()]
    assert len(warnings) == 1
    processor.shutdown()
    mp.shutdown()
