"""HistogramRecorder: the SDK histogram's points and exemplars, worked out by hand, on its shortcut and off it."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.metrics import Histogram as SdkHistogramKind
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import AggregationTemporality, InMemoryMetricReader
from opentelemetry.sdk.metrics.view import View
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from ctxscope.telemetry.histogram_records import HistogramRecorder

BOUNDARIES = [0, 10, 100, 1000]
A = {"model": "m", "category": "results"}
B = {"model": "m", "category": "prompts"}


def in_span(trace_id: int, span_id: int, sampled: bool = True) -> Any:
    flags = TraceFlags(TraceFlags.SAMPLED if sampled else 0)
    return trace.set_span_in_context(NonRecordingSpan(SpanContext(trace_id, span_id, False, flags)))


def histogram(reader: InMemoryMetricReader, views: tuple[View, ...] = ()) -> Any:
    provider = MeterProvider(metric_readers=[reader], views=list(views), shutdown_on_exit=False)
    return provider.get_meter("test").create_histogram(
        "added", explicit_bucket_boundaries_advisory=BOUNDARIES)


def collected(reader: InMemoryMetricReader) -> dict[frozenset, dict[str, Any]]:
    """{attributes: count, sum, min, max, bucket counts, exemplars as (value, trace id, span id, attributes)}."""
    out: dict[frozenset, dict[str, Any]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data is not None else ():
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    out[frozenset(p.attributes.items())] = {
                        "count": p.count, "sum": p.sum, "min": p.min, "max": p.max,
                        "buckets": list(p.bucket_counts),
                        "exemplars": [(e.value, e.trace_id, e.span_id, e.filtered_attributes) for e in p.exemplars]}
    return out


def record_all(recorder: HistogramRecorder) -> None:
    # Series A: 5 and 30 in span (1, 11), 30 again and 2000 in span (2, 22); B: 7 outside any span.
    for value, context in ((5, in_span(1, 11)), (30, in_span(1, 11)), (30, in_span(2, 22)), (2000, in_span(2, 22))):
        recorder.record(value, "A", lambda: dict(A), context)
    recorder.record(7, "B", lambda: dict(B))


def test_the_points_and_exemplars_are_the_ones_record_gives():
    """Buckets (-inf,0] (0,10] (10,100] (100,1000] (1000,inf): A 0,1,2,0,1; B 0,1,0,0,0; the last value of a
    bucket is its exemplar, with the span it was recorded in (B's: none, it was in no span)."""
    reader = InMemoryMetricReader()
    recorder = HistogramRecorder(histogram(reader))
    record_all(recorder)
    expected = {
        frozenset(A.items()): {"count": 4, "sum": 2065, "min": 5, "max": 2000, "buckets": [0, 1, 2, 0, 1],
                               "exemplars": [(5, 1, 11, {}), (30, 2, 22, {}), (2000, 2, 22, {})]},
        frozenset(B.items()): {"count": 1, "sum": 7, "min": 7, "max": 7, "buckets": [0, 1, 0, 0, 0],
                               "exemplars": []},
    }
    assert collected(reader) == expected
    # The same measurements through the SDK's own record(): the same points.
    sdk_reader = InMemoryMetricReader()
    sdk = histogram(sdk_reader)
    for value, context in ((5, in_span(1, 11)), (30, in_span(1, 11)), (30, in_span(2, 22)), (2000, in_span(2, 22))):
        sdk.record(value, dict(A), context=context)
    sdk.record(7, dict(B))
    assert collected(sdk_reader) == expected
    # Cumulative: a second round adds to the same series (the kept aggregations are the SDK's).
    record_all(recorder)
    again = collected(reader)[frozenset(A.items())]
    assert (again["count"], again["sum"], again["buckets"]) == (8, 4130, [0, 2, 4, 0, 2])


def test_an_unsampled_span_gives_no_exemplar():
    reader = InMemoryMetricReader()
    recorder = HistogramRecorder(histogram(reader))
    recorder.record(50, "A", lambda: dict(A), in_span(3, 33, sampled=False))  # creates the series
    recorder.record(60, "A", lambda: dict(A), in_span(3, 33, sampled=False))  # the shortcut
    point = collected(reader)[frozenset(A.items())]
    assert (point["count"], point["sum"], point["exemplars"]) == (2, 110, [])


def test_each_context_has_its_own_exemplar_decision():
    """Sampled, then unsampled, then sampled again, two measurements each: only the sampled ones' exemplars."""
    reader = InMemoryMetricReader()
    recorder = HistogramRecorder(histogram(reader))
    first, unsampled, third = in_span(1, 11), in_span(2, 22, sampled=False), in_span(3, 33)
    for value, context in ((5, first), (6, first), (50, unsampled), (60, unsampled), (500, third), (600, third)):
        recorder.record(value, "A", lambda: dict(A), context)  # a call's measurements share its context
    assert collected(reader)[frozenset(A.items())]["exemplars"] == [(6, 1, 11, {}), (600, 3, 33, {})]


def test_a_delta_reader_sees_each_collection_alone():
    """Its aggregations are replaced at each collection: record() takes every measurement."""
    reader = InMemoryMetricReader(preferred_temporality={SdkHistogramKind: AggregationTemporality.DELTA})
    recorder = HistogramRecorder(histogram(reader))
    record_all(recorder)
    assert collected(reader)[frozenset(A.items())]["count"] == 4
    recorder.record(40, "A", lambda: dict(A), in_span(1, 11))
    point = collected(reader)[frozenset(A.items())]
    assert (point["count"], point["sum"], point["buckets"]) == (1, 40, [0, 0, 1, 0, 0])


def test_a_view_that_keeps_some_keys_merges_the_series():
    """A view keeping only ``model``: A and B are one series (5 values, sum 2072), as the SDK's record gives."""
    reader = InMemoryMetricReader()
    recorder = HistogramRecorder(histogram(reader, (View(instrument_name="added", attribute_keys={"model"}),)))
    record_all(recorder)
    points = collected(reader)
    assert list(points) == [frozenset({"model": "m"}.items())]
    point = points[frozenset({"model": "m"}.items())]
    assert (point["count"], point["sum"], point["buckets"]) == (5, 2072, [0, 2, 2, 0, 1])
    # The exemplars keep the attributes the view dropped; B's 7, in no span, is not one (trace_based).
    results = {"category": "results"}
    assert point["exemplars"] == [(5, 1, 11, results), (30, 2, 22, results), (2000, 2, 22, results)]


def test_a_negative_value_is_refused_as_record_refuses_it():
    reader = InMemoryMetricReader()
    recorder = HistogramRecorder(histogram(reader))
    recorder.record(5, "A", lambda: dict(A))
    recorder.record(-3, "A", lambda: dict(A))
    assert collected(reader)[frozenset(A.items())]["count"] == 1


def test_an_instrument_that_is_not_the_sdks_is_recorded_through_record():
    noop = NoOpMeterProvider().get_meter("test").create_histogram("added")
    recorder = HistogramRecorder(noop)
    record_all(recorder)  # nothing to collect, nothing raised
    assert recorder.histogram is noop


def test_record_each_gives_what_record_gives_one_by_one():
    """A call's measurements at once: results 30 and prompts 7 in span (1, 11), then results 2000 in span (2, 22).

    Results: buckets 0,0,1,0,1, sum 2030, exemplars 30 (1, 11) and 2000 (2, 22); prompts: 7 in (0,10], its
    exemplar in (1, 11). The series' attributes are built once, at its first measurement.
    """
    reader = InMemoryMetricReader()
    recorder = HistogramRecorder(histogram(reader))
    built: list[str] = []

    def attributes(category: str) -> dict[str, str]:
        built.append(category)
        return {"model": "m", "category": category}

    recorder.record_each({"results": 30, "prompts": 7}, "m", attributes, in_span(1, 11))
    recorder.record_each({"results": 2000}, "m", attributes, in_span(2, 22))
    recorder.record_each({}, "m", attributes, in_span(3, 33))  # nothing to record
    assert collected(reader) == {
        frozenset(A.items()): {"count": 2, "sum": 2030, "min": 30, "max": 2000, "buckets": [0, 0, 1, 0, 1],
                               "exemplars": [(30, 1, 11, {}), (2000, 2, 22, {})]},
        frozenset(B.items()): {"count": 1, "sum": 7, "min": 7, "max": 7, "buckets": [0, 1, 0, 0, 0],
                               "exemplars": [(7, 1, 11, {})]},
    }
    assert built == ["results", "prompts"]


def test_record_each_off_the_shortcut_records_through_record():
    """A delta reader: every measurement through the SDK's record(), the same counts."""
    reader = InMemoryMetricReader(preferred_temporality={SdkHistogramKind: AggregationTemporality.DELTA})
    recorder = HistogramRecorder(histogram(reader))
    recorder.record_each({"results": 30, "prompts": 7}, "m", lambda c: {"model": "m", "category": c}, in_span(1, 11))
    recorder.record_each({"results": 40}, "m", lambda c: {"model": "m", "category": c}, in_span(2, 22))
    points = collected(reader)
    assert (points[frozenset(A.items())]["count"], points[frozenset(A.items())]["sum"]) == (2, 70)
    assert points[frozenset(B.items())]["count"] == 1
