"""Collected metrics -> an OTLP ``ExportMetricsServiceRequest``, as wire bytes, without the SDK's message tree.

The SDK's encoder (``opentelemetry.exporter.otlp.proto.common``) builds a
protobuf object for every point, attribute and value of a collection, then
serialises the tree: with 64 live sessions (about a thousand gauge points)
that is ~16 ms of CPU an export, ten times the collection itself
(docs/telemetry.md, "Cost of a collection"). This module writes the same
bytes directly, as :mod:`ctxscope.telemetry.otlp_encoding` does for spans.
A series keeps the same attributes object from one collection to the next
(the SDK's aggregation holds it), so a point's encoded attributes are kept
by that object's identity, checked against a copy (an application may change
a dict it handed the SDK), and each export writes only times and values for
the series it saw before: the cost of a collection is not paid again for
every session's attributes.

The bytes are the SDK's, byte for byte (``tests/telemetry/test_otlp_metric_encoding.py``
compares them on every kind of point and value). What this module does not
write (an exponential histogram, a data type the SDK warns about, a value
the SDK's encoder refuses) raises :class:`UnencodableError`, and the
exporter gives that batch to the SDK's encoder, which encodes, logs or
refuses it as it always did.

Field numbers: ``opentelemetry/proto/{collector/metrics,metrics,common,resource}/v1/*.proto``.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.metrics.export import Gauge, Histogram, MetricsData, Sum

from ctxscope.telemetry.otlp_encoding import (
    _CACHE_LIMIT,
    _FIXED64,
    _INT64_MAX,
    _INT64_MIN,
    _LEN,
    _R_ATTRIBUTE,
    _VARINT,
    AttributeEncoder,
    FallbackEncoder,
    UnencodableError,
    _len_field,
    _pack_double,
    _pack_fixed64,
    _string_field,
    _tag,
    _uint_field,
    _varint,
    encode_scope,
)

__all__ = ["MetricEncoder"]

_log = logging.getLogger(__name__)

_pack_sfixed64 = struct.Struct("<q").pack

# ExportMetricsServiceRequest: resource_metrics 1. ResourceMetrics: resource 1, scope_metrics 2, schema_url 3.
# ScopeMetrics: scope 1, metrics 2, schema_url 3.
_REQ_RESOURCE_METRICS = _tag(1, _LEN)
_RM_RESOURCE, _RM_SCOPE_METRICS, _RM_SCHEMA_URL = _tag(1, _LEN), _tag(2, _LEN), _tag(3, _LEN)
_SM_SCOPE, _SM_METRIC, _SM_SCHEMA_URL = _tag(1, _LEN), _tag(2, _LEN), _tag(3, _LEN)
# Metric: name 1, description 2, unit 3, gauge 5, sum 7, histogram 9.
_M_NAME, _M_DESCRIPTION, _M_UNIT = _tag(1, _LEN), _tag(2, _LEN), _tag(3, _LEN)
_M_GAUGE, _M_SUM, _M_HISTOGRAM = _tag(5, _LEN), _tag(7, _LEN), _tag(9, _LEN)
# Gauge: data_points 1. Sum: data_points 1, aggregation_temporality 2, is_monotonic 3.
# Histogram: data_points 1, aggregation_temporality 2.
_D_POINT, _D_TEMPORALITY, _D_MONOTONIC = _tag(1, _LEN), _tag(2, _VARINT), _tag(3, _VARINT)
# NumberDataPoint: start_time_unix_nano 2, time_unix_nano 3, as_double 4, exemplars 5, as_int 6, attributes 7.
_N_START, _N_TIME, _N_DOUBLE = _tag(2, _FIXED64), _tag(3, _FIXED64), _tag(4, _FIXED64)
_N_EXEMPLAR, _N_INT, _N_ATTRIBUTE = _tag(5, _LEN), _tag(6, _FIXED64), _tag(7, _LEN)
# HistogramDataPoint: start_time_unix_nano 2, time_unix_nano 3, count 4, sum 5, bucket_counts 6 (packed),
# explicit_bounds 7 (packed), exemplars 8, attributes 9, min 11, max 12.
_H_START, _H_TIME, _H_COUNT, _H_SUM = _tag(2, _FIXED64), _tag(3, _FIXED64), _tag(4, _FIXED64), _tag(5, _FIXED64)
_H_BUCKETS, _H_BOUNDS, _H_EXEMPLAR, _H_ATTRIBUTE = _tag(6, _LEN), _tag(7, _LEN), _tag(8, _LEN), _tag(9, _LEN)
_H_MIN, _H_MAX = _tag(11, _FIXED64), _tag(12, _FIXED64)
# Exemplar: time_unix_nano 2, as_double 3, span_id 4, trace_id 5, as_int 6, filtered_attributes 7.
_X_TIME, _X_DOUBLE, _X_SPAN_ID, _X_TRACE_ID = _tag(2, _FIXED64), _tag(3, _FIXED64), _tag(4, _LEN), _tag(5, _LEN)
_X_INT, _X_ATTRIBUTE = _tag(6, _FIXED64), _tag(7, _LEN)


def _fixed64(tag: bytes, n: int) -> bytes:
    """A proto3 fixed64 field: absent at 0 (a point's times and count)."""
    return tag + _pack_fixed64(n) if n else b""


def _int64(tag: bytes, value: int) -> bytes:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise UnencodableError(f"integer out of int64 range: {value}")
    return tag + _pack_sfixed64(value)


def _number(int_tag: bytes, double_tag: bytes, value: Any, ints_first: bool) -> tuple[bytes, bytes]:
    """(as_double field, as_int field): one of them empty, by the SDK's own type test.

    Points test ``int`` first; exemplars test ``float`` first, then ``int``,
    and refuse anything else. A bool is an int, which protobuf refuses for
    an int64 field: the SDK's encoder then fails the batch, so it is left to it.
    """
    if isinstance(value, bool):
        raise UnencodableError("a bool value is left to the SDK's encoder")
    if ints_first:
        if isinstance(value, int):
            return b"", _int64(int_tag, value)
        if isinstance(value, float):
            return double_tag + _pack_double(value), b""
    else:
        if isinstance(value, float):
            return double_tag + _pack_double(value), b""
        if isinstance(value, int):
            return b"", _int64(int_tag, value)
    raise UnencodableError(f"a value of type {type(value)} is left to the SDK's encoder")


def _optional_double(tag: bytes, value: Any) -> bytes:
    """An ``optional double`` (a histogram's sum, min, max): written whenever it is set, 0 included."""
    if value is None:
        return b""
    if not isinstance(value, (int, float)):
        raise UnencodableError(f"a value of type {type(value)} is left to the SDK's encoder")
    return tag + _pack_double(value)


class MetricEncoder(FallbackEncoder):
    """Writes ``ExportMetricsServiceRequest`` bytes for the SDK's ``MetricsData``.

    One per exporter (a periodic reader exports one batch at a time; a lost
    cache entry, were two threads to encode at once, is encoded again).
    """

    batch_kind = "metric"
    logger = _log

    def __init__(self, cache_limit: int = _CACHE_LIMIT) -> None:
        self._attributes = AttributeEncoder(cache_limit).encode
        # Per attributes field tag: id of a point's attributes -> (that object, a copy of it, its encoded
        # field, a gauge point's head for them).
        self._points: dict[bytes, dict[int, tuple[Any, dict[str, Any], bytes, bytes]]] = {
            _N_ATTRIBUTE: {}, _H_ATTRIBUTE: {}}
        self._points_limit = cache_limit

    def encode(self, data: MetricsData) -> bytes:
        """The request's bytes, equal to ``encode_metrics(data).SerializeToString()``.

        Raises :class:`UnencodableError` for what the SDK's encoder must take.
        """
        # The SDK's grouping, kept exactly: a resource (equal resources are one key: the later
        # entry's scopes replace the earlier's) -> its scopes (likewise) -> their encoded metrics.
        grouped: dict[Any, dict[Any, list[bytes]]] = {}
        for resource_metrics in data.resource_metrics:
            scopes: dict[Any, list[bytes]] = {}
            grouped[resource_metrics.resource] = scopes
            for scope_metrics in resource_metrics.scope_metrics:
                scopes[scope_metrics.scope] = [self._metric(metric) for metric in scope_metrics.metrics]
        out = []
        for resource, scopes in grouped.items():
            body = [_len_field(_RM_RESOURCE, self._attributes(_R_ATTRIBUTE, resource.attributes))]
            for scope, metrics in scopes.items():
                scope_body = [_len_field(_SM_SCOPE, encode_scope(scope, self._attributes))]
                scope_body.extend(_len_field(_SM_METRIC, metric) for metric in metrics)
                scope_body.append(_string_field(_SM_SCHEMA_URL, scope.schema_url))
                body.append(_len_field(_RM_SCOPE_METRICS, b"".join(scope_body)))
            body.append(_string_field(_RM_SCHEMA_URL, resource.schema_url))
            out.append(_len_field(_REQ_RESOURCE_METRICS, b"".join(body)))
        return b"".join(out)

    # -- parts -----------------------------------------------------------------------

    def _metric(self, metric: Any) -> bytes:
        head = (_string_field(_M_NAME, metric.name) + _string_field(_M_DESCRIPTION, metric.description)
                + _string_field(_M_UNIT, metric.unit))
        data = metric.data
        points = data.data_points
        if not points:  # the SDK sets a metric's data only as it appends a point
            if not isinstance(data, (Gauge, Histogram, Sum)):
                raise UnencodableError(f"data type {type(data).__name__} is left to the SDK's encoder")
            return head
        if isinstance(data, Gauge):
            return head + _len_field(_M_GAUGE, self._gauge_points(points))
        if isinstance(data, Histogram):
            body = b"".join([_len_field(_D_POINT, self._histogram_point(point)) for point in points])
            return head + _len_field(_M_HISTOGRAM, body + _uint_field(_D_TEMPORALITY, data.aggregation_temporality))
        if isinstance(data, Sum):
            body = b"".join([_len_field(_D_POINT, self._number_point(point, True)) for point in points])
            return head + _len_field(_M_SUM, body + _uint_field(_D_TEMPORALITY, data.aggregation_temporality)
                                     + (_D_MONOTONIC + b"\x01" if data.is_monotonic else b""))
        raise UnencodableError(f"data type {type(data).__name__} is left to the SDK's encoder")

    def _point_attributes(self, tag: bytes, attributes: Mapping[str, Any] | None) -> bytes:
        """A point's attributes field, kept by the identity of the SDK's attributes object."""
        if not attributes:
            return b""
        points = self._points[tag]
        known = points.get(id(attributes))
        if known is not None and known[0] is attributes and known[1] == attributes:
            return known[2]
        encoded = self._attributes(tag, attributes)
        if len(points) >= self._points_limit:  # ended series: start again rather than keep them
            points.clear()
        # The last: a gauge point's tag and length, for a time and a value (9 bytes each) before these attributes.
        points[id(attributes)] = (attributes, dict(attributes), encoded, _D_POINT + _varint(18 + len(encoded)))
        return encoded

    def _gauge_points(self, points: Any) -> bytes:
        """A gauge's points: the general :meth:`_number_point`, inlined for its common shape.

        Most of a collection is gauge points of one time, an int64 or float
        value, no exemplar, attributes seen at the last export: those are
        written here from the time field made once and the cached attributes.
        """
        out = []
        known = self._points[_N_ATTRIBUTE]
        last_time, time_field = None, b""
        for point in points:
            attributes = point.attributes
            cached = known.get(id(attributes)) if attributes else None
            if cached is not None and cached[0] is attributes and not point.exemplars and cached[1] == attributes:
                when, value = point.time_unix_nano, point.value
                if when != last_time:
                    last_time, time_field = when, _fixed64(_N_TIME, when)
                kind = value.__class__
                if len(time_field) == 9:  # a time (0 is not written): the cached head's length holds
                    if kind is float:
                        out.append(cached[3] + time_field + _N_DOUBLE + _pack_double(value) + cached[2])
                        continue
                    if kind is int and _INT64_MIN <= value <= _INT64_MAX:
                        out.append(cached[3] + time_field + _N_INT + _pack_sfixed64(value) + cached[2])
                        continue
            out.append(_len_field(_D_POINT, self._number_point(point, False)))
        return b"".join(out)

    def _number_point(self, point: Any, with_start: bool) -> bytes:
        # The SDK gives a gauge's point no start time.
        double, integer = _number(_N_INT, _N_DOUBLE, point.value, ints_first=True)
        return b"".join((
            _fixed64(_N_START, point.start_time_unix_nano) if with_start else b"",
            _fixed64(_N_TIME, point.time_unix_nano),
            double,
            self._exemplars(_N_EXEMPLAR, point.exemplars),
            integer,
            self._point_attributes(_N_ATTRIBUTE, point.attributes),
        ))

    def _histogram_point(self, point: Any) -> bytes:
        counts, bounds = point.bucket_counts, point.explicit_bounds
        return b"".join((
            _fixed64(_H_START, point.start_time_unix_nano),
            _fixed64(_H_TIME, point.time_unix_nano),
            _fixed64(_H_COUNT, point.count),
            _optional_double(_H_SUM, point.sum),
            _len_field(_H_BUCKETS, struct.pack(f"<{len(counts)}Q", *counts)) if counts else b"",
            _len_field(_H_BOUNDS, struct.pack(f"<{len(bounds)}d", *bounds)) if bounds else b"",
            self._exemplars(_H_EXEMPLAR, point.exemplars),
            self._point_attributes(_H_ATTRIBUTE, point.attributes),
            _optional_double(_H_MIN, point.min),
            _optional_double(_H_MAX, point.max),
        ))

    def _exemplars(self, tag: bytes, exemplars: Any) -> bytes:
        if not exemplars:
            return b""
        out = []
        for exemplar in exemplars:
            span_id, trace_id = exemplar.span_id, exemplar.trace_id
            traced = span_id is not None and trace_id is not None
            double, integer = _number(_X_INT, _X_DOUBLE, exemplar.value, ints_first=False)
            out.append(_len_field(tag, b"".join((
                _fixed64(_X_TIME, exemplar.time_unix_nano),
                double,
                _len_field(_X_SPAN_ID, span_id.to_bytes(8, "big")) if traced else b"",
                _len_field(_X_TRACE_ID, trace_id.to_bytes(16, "big")) if traced else b"",
                integer,
                self._attributes(_X_ATTRIBUTE, exemplar.filtered_attributes),
            ))))
        return b"".join(out)
