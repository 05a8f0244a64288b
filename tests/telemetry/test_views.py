"""ctxscope's gauge views: the same points as the SDK's default aggregation, collected cheaply."""

from __future__ import annotations

from _paths import ROOT  # noqa: F401 - puts src/ on sys.path

import logging
from typing import Any

import pytest
from opentelemetry.sdk.metrics import AlwaysOnExemplarFilter, MeterProvider
from opentelemetry.sdk.metrics import _Gauge  # the SDK exports its synchronous gauge under this name
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.metrics.view import LastValueAggregation, View

import ctxscope.telemetry.views as views_module
from ctxscope.schema import INSTRUMENTATION_SCOPE, Annotation, Attr, Category, Coverage, Metric, MetricAttr, Stage
from ctxscope.telemetry.processor import ContextSpanProcessor
from ctxscope.telemetry.setup import setup
from ctxscope.telemetry.views import gauge_views

C = Category


def call(processor: ContextSpanProcessor, session: str, categories: dict[Category, int], *,
         model: str = "gpt-4o", reported: int | None = None, at: int = 0) -> None:
    ann = Annotation(stage=Stage.REQUEST_INPUT, basis="chars/4", coverage=Coverage.COMPLETE, baseline=False,
                     categories=categories, estimated_tokens=sum(categories.values()), reported_tokens=reported,
                     window_tokens=128000, model=model)
    processor.observe_call({Attr.SESSION_ID: session, **ann.to_attributes()}, at)


def collected(reader: InMemoryMetricReader) -> list[tuple[str, tuple, Any, int]]:
    """Every point of ctxscope's gauges and counter: (instrument, attributes, value, exemplars), sorted."""
    out = []
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data is not None else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                if metric.name not in {spec.name for spec in Metric.ALL}:
                    continue
                for p in metric.data.data_points:
                    out.append((metric.name, tuple(sorted(p.attributes.items())), p.value, len(p.exemplars)))
    return sorted(out)


def scenario(views: list[Any], temporality: dict | None = None) -> list[list[tuple[str, tuple, Any, int]]]:
    """Calls, a category that leaves, a model change, an end, a restart and 40 sessions of churn; each collection."""
    reader = InMemoryMetricReader(preferred_temporality=temporality or {})
    provider = MeterProvider(metric_readers=[reader], views=views, shutdown_on_exit=False)
    processor = ContextSpanProcessor(provider, max_sessions=4)
    steps = [
        lambda: call(processor, "a", {C.SYSTEM: 100, C.PROMPTS: 50}, at=1),
        lambda: call(processor, "b", {C.SYSTEM: 100, C.RESULTS: 300}, reported=500, at=2),
        lambda: call(processor, "a", {C.SYSTEM: 100}, at=3),  # prompts leaves: 0 once
        lambda: None,  # nothing changed: the same values again
        lambda: call(processor, "a", {C.SYSTEM: 120}, model="gpt-4.1", at=4),  # the old model's series: 0 once
        lambda: processor.end_session("b"),
        lambda: call(processor, "b", {C.TOOLS: 7}, at=5),  # restarted under the same id
    ]
    steps += [lambda n=n: call(processor, f"churn{n}", {C.SYSTEM: n + 1}, at=10 + n) for n in range(40)]
    out = []
    for step in steps:
        step()
        out.append(collected(reader))
    for session in processor.sessions():  # as the end of a recording does, without its own collection
        processor.end_session(session)
    out.append(collected(reader))  # the zeros
    out.append(collected(reader))  # and then nothing
    processor.shutdown()
    provider.shutdown()
    return out


def test_one_view_per_gauge_of_the_ctxscope_meter():
    """Five views: llm.context.tokens, limit, reported, utilization, waste; the counter keeps the SDK's default."""
    views = gauge_views()
    names = [v._instrument_name for v in views]  # noqa: SLF001 - View keeps its criteria private
    assert names == ["llm.context.tokens", "llm.context.limit.tokens", "llm.context.reported.tokens",
                     "llm.context.utilization", "llm.context.waste.tokens"]
    assert {v._meter_name for v in views} == {INSTRUMENTATION_SCOPE}  # noqa: SLF001
    assert Metric.COMPACTIONS.name not in names


def test_the_views_report_the_same_points_as_the_sdk_default():
    """Collection after collection, every series, value and (absent) exemplar is the SDK default's."""
    default, lean = scenario([]), scenario(gauge_views())
    assert lean == default
    # The comparison compares something, values worked by hand: after step 3, a's prompts reports 0 once.
    tokens = {dict(a)[MetricAttr.CATEGORY]: v for n, a, v, _ in lean[2]
              if n == Metric.TOKENS.name and dict(a)[MetricAttr.SESSION_ID] == "a"}
    assert tokens == {"system": 100, "prompts": 0}
    b_tokens = {dict(a)[MetricAttr.CATEGORY]: v for n, a, v, _ in lean[1]
                if n == Metric.TOKENS.name and dict(a)[MetricAttr.SESSION_ID] == "b"}
    assert b_tokens == {"system": 100, "results": 300, "unattributed": 100}  # reported 500 - 400 estimated
    # The 4 live churn sessions end: system, the window and utilization, each 0 once.
    assert len(lean[-2]) == 4 * 3 and {value for *_, value, _ in lean[-2]} == {0}
    assert lean[-1] == []
    assert all(exemplars == 0 for step in lean for *_, exemplars in step)


def test_delta_temporality_for_gauges_stays_the_sdks():
    """A reader asking delta temporality for gauges sees a series only after it changed, as with the default."""
    delta = {_Gauge: AggregationTemporality.DELTA}
    default, lean = scenario([], delta), scenario(gauge_views(), delta)
    assert lean == default
    assert lean[3] == []  # step 4 changed nothing: no gauge point under delta


def test_setup_gives_its_meter_provider_the_views():
    """The provider setup() creates carries one view per gauge (the application's own provider: its own views)."""
    telemetry = setup(store=False, instrument=False, set_global=False, environ={})
    try:
        views = telemetry.meter_provider._sdk_config.views  # noqa: SLF001 - no public accessor
        assert [v._instrument_name for v in views] == [v._instrument_name for v in gauge_views()]  # noqa: SLF001
    finally:
        telemetry.shutdown()


def test_an_sdk_the_lean_aggregation_does_not_fit_gets_no_views(monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture):
    """When the check against the SDK's own collection fails, no views (said once): the SDK's default reports."""
    monkeypatch.setattr(views_module, "_FITS", None)
    monkeypatch.setattr(views_module, "_LastValueAggregation", None)  # as when the SDK's class is gone
    with caplog.at_level(logging.INFO, logger="ctxscope.telemetry.views"):
        assert gauge_views() == [] and gauge_views() == []
    assert [r.getMessage().count("not the known one") for r in caplog.records] == [1]


def always_on_points(provider_views: list[Any], **reader: Any) -> tuple[list[tuple[str, int, int]], tuple]:
    """The gauge points of one call, (category, value, exemplars), when the SDK offers every measurement.

    The views keep no exemplar; the SDK's default aggregation attaches one to
    every gauge point under ``always_on``: the exemplars tell which collected.
    Also the provider's views after the collection.
    """
    reader_ = InMemoryMetricReader(**reader)
    provider = MeterProvider(metric_readers=[reader_], views=provider_views,
                             exemplar_filter=AlwaysOnExemplarFilter(), shutdown_on_exit=False)
    processor = ContextSpanProcessor(provider)
    call(processor, "a", {C.SYSTEM: 100, C.PROMPTS: 50}, at=1)
    points = collected(reader_)
    views = provider._sdk_config.views  # noqa: SLF001 - no public accessor
    processor.shutdown()
    provider.shutdown()
    return [(dict(a).get(MetricAttr.CATEGORY, n), v, x) for n, a, v, x in points if n != Metric.COMPACTIONS.name], views


GAUGE_NAMES = ["llm.context.tokens", "llm.context.limit.tokens", "llm.context.reported.tokens",
               "llm.context.utilization", "llm.context.waste.tokens"]
# One call of 150 tokens in a 128,000-token window: prompts, system, the window, 150 / 128,000.
ONE_CALL = [("llm.context.limit.tokens", 128000), ("llm.context.utilization", 150 / 128000), ("prompts", 50),
            ("system", 100)]


def test_a_provider_built_without_the_views_is_given_them_before_the_gauges_are_set():
    """An application's own provider, or the SDK configurator's: the same points, through the views."""
    points, views = always_on_points([])
    assert sorted((c, v) for c, v, _ in points) == ONE_CALL
    assert [x for *_, x in points] == [0, 0, 0, 0]  # the views' aggregation: no exemplar
    assert [v._instrument_name for v in views] == GAUGE_NAMES  # noqa: SLF001


def test_where_the_views_do_not_fit_the_sdks_default_collects(monkeypatch: pytest.MonkeyPatch):
    """The same points through the SDK's default aggregation (an exemplar each under always_on), nothing added."""
    monkeypatch.setattr(views_module, "_FITS", False)
    points, views = always_on_points([])
    assert sorted((c, v) for c, v, _ in points) == ONE_CALL
    assert [x for *_, x in points] == [1, 1, 1, 1] and list(views) == []


def test_a_provider_with_the_views_gets_nothing_more(caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.INFO, logger="ctxscope.telemetry.views"):
        points, views = always_on_points(gauge_views())
    assert [x for *_, x in points] == [0, 0, 0, 0]
    assert [v._instrument_name for v in views] == GAUGE_NAMES and caplog.text == ""  # noqa: SLF001


@pytest.mark.parametrize("own_view", [View(instrument_name="llm.context.tokens", attribute_keys={
    MetricAttr.SESSION_ID, MetricAttr.CATEGORY, "gen_ai.request.model"}), View(instrument_name="*")],
    ids=["one-gauge", "wildcard"])
def test_a_view_of_the_applications_on_a_gauge_keeps_the_providers_views_as_they_are(
        own_view: View, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture):
    """That view decides its gauge's stream: nothing added (said once a process), the SDK's default collects."""
    monkeypatch.setattr(views_module, "_NOTED", False)
    with caplog.at_level(logging.INFO, logger="ctxscope.telemetry.views"):
        for _ in range(2):
            points, views = always_on_points([own_view])
            assert list(views) == [own_view]
            assert sorted((c, v) for c, v, _ in points) == ONE_CALL
            assert [x for *_, x in points] == [1, 1, 1, 1]
    assert caplog.text.count("keeps its configuration: 1 view(s) of its own match") == 1
    assert "gauge_views() are the views to add beside yours" in caplog.text


def test_a_reader_with_its_own_gauge_aggregation_keeps_it(monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture):
    """A view would override a reader's preferred aggregation for gauges: none added, said once."""
    monkeypatch.setattr(views_module, "_NOTED", False)
    with caplog.at_level(logging.INFO, logger="ctxscope.telemetry.views"):
        points, views = always_on_points([], preferred_aggregation={_Gauge: LastValueAggregation()})
    assert list(views) == [] and [x for *_, x in points] == [1, 1, 1, 1]
    assert "1 of its metric readers choose their own aggregation for gauges" in caplog.text
