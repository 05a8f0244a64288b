"""A histogram's measurements handed straight to the SDK's aggregations, where that is what ``record`` does.

``Histogram.record`` in the SDK (1.45) checks the value, builds a
``Measurement`` (cleaning its attributes into a new dict), asks the exemplar
filter, and then, in every reader's storage and every view's match, copies
the attributes, hashes them into the series key, looks the series'
aggregation up and calls its ``aggregate``. A replay records about 3.4
measurements a call on ``llm.context.added.tokens`` (dense50: 18,863), each
on one of a handful of series, so :class:`HistogramRecorder` keeps each
series' cleaned attributes and key and makes only the last steps: the same
``Measurement`` fields, the same filter decision, the same ``aggregate``
calls in the same order, so the points and exemplars are the SDK's.
:meth:`HistogramRecorder.record_each` takes a call's measurements at once
(they share its context): the SDK's storage is looked up once for all of them.

It goes the SDK's own way (``record``) wherever the result could differ or
the SDK does more: an instrument that is not the SDK's own histogram (a
proxy of the global meter provider, another SDK), a disabled meter, a value
that is not a finite number of at least 0, a view that keeps only some
attribute keys, a delta reader (its aggregations are replaced at each
collection), and a series that has no aggregation yet in some storage (the
SDK creates it, and applies the cardinality limit). Any other surprise
(internals of another SDK release) turns the shortcut off for good.
"""

from __future__ import annotations

import logging
import math
from functools import partial
from time import time_ns
from typing import Any, Callable, Hashable, Mapping

from opentelemetry.context import get_current
from opentelemetry.sdk.metrics import TraceBasedExemplarFilter as _TraceBasedFilter

__all__ = ["HistogramRecorder"]

_log = logging.getLogger(__name__)

# Series kept (a few per model and provider); past it the table starts again.
_MAX_SERIES = 1024

_SdkHistogram: Any = None
try:  # the SDK's private parts the shortcut uses (1.45); without them, record() always
    from opentelemetry.attributes import _clean_attribute_value
    from opentelemetry.sdk.metrics._internal._view_instrument_match import (  # noqa: PLC2701
        _hash_attributes,
    )
    from opentelemetry.sdk.metrics._internal.instrument import _Histogram  # noqa: PLC2701
    from opentelemetry.sdk.metrics._internal.measurement import Measurement

    _SdkHistogram = _Histogram
except ImportError:  # pragma: no cover - another SDK release
    pass

_new_measurement = object.__new__


class _Plan:
    """What a call's measurements share: the series tables of every reader's matches, the context."""

    __slots__ = ("tables", "context", "exemplar_filter")

    def __init__(self, tables: list[Any], context: Any, exemplar_filter: Any) -> None:
        self.tables = tables  # each match's series key -> aggregation (the SDK's _attributes_aggregation)
        self.context = context
        self.exemplar_filter = exemplar_filter


class HistogramRecorder:
    """``histogram.record(value, attributes, context=context)``, faster where the SDK would do the same."""

    def __init__(self, histogram: Any) -> None:
        self.histogram = histogram
        self._fast = _SdkHistogram is not None and type(histogram) is _SdkHistogram
        # series -> (the attributes as given, as the SDK cleans them, the SDK's series key)
        self._series: dict[Hashable, tuple[Mapping[str, Any], dict[str, Any], Any]] = {}
        # The exemplar filter's last decision and the context it was made in.
        self._sampled_context: Any = None
        self._sampled = False

    def record(self, value: int | float, series: Hashable, attributes: Callable[[], Mapping[str, Any]],
               context: Any = None) -> None:
        """Record ``value`` on the series ``series`` names, whose attributes ``attributes()`` builds."""
        self._record(self._plan(context), value, series, attributes, context)

    def record_each(self, values: Mapping[Any, int | float], group: Hashable,
                    attributes: Callable[[Any], Mapping[str, Any]], context: Any = None) -> None:
        """:meth:`record` of each ``name: value`` of ``values``, in order, on the series ``(group, name)``
        whose attributes are ``attributes(name)``: one call's measurements, which share its context, so
        the SDK's storage is looked up once for all of them."""
        if not values:
            return
        plan = self._plan(context)
        known = self._series
        for name, value in values.items():
            series = (group, name)
            entry = known.get(series)
            if entry is None:  # a new series: its attributes built, then as record() does
                self._record(plan, value, series, partial(attributes, name), context)
            elif plan is None or not self._aggregated(plan, value, entry[1], entry[2]):
                self.histogram.record(value, entry[0], context=context)

    def _record(self, plan: _Plan | None, value: int | float, series: Hashable,
                attributes: Callable[[], Mapping[str, Any]], context: Any) -> None:
        entry = self._series.get(series)
        if entry is None:
            given = attributes()
            if not self._fast:
                self.histogram.record(value, given, context=context)
                return
            cleaned = _clean_attribute_value(given, None)
            if len(self._series) >= _MAX_SERIES:
                self._series.clear()
            entry = self._series[series] = (given, cleaned, _hash_attributes(cleaned))
        if plan is None or not self._aggregated(plan, value, entry[1], entry[2]):
            self.histogram.record(value, entry[0], context=context)

    def _plan(self, context: Any) -> _Plan | None:
        """The SDK's storage of this histogram where the shortcut applies to it; None: record() must."""
        if not self._fast:
            return None
        histogram = self.histogram
        try:
            if not histogram._is_enabled():  # noqa: SLF001
                return None
            consumer = histogram._measurement_consumer  # noqa: SLF001
            tables = []
            for storage in consumer._reader_storages.values():  # noqa: SLF001
                matches = storage._instrument_view_instrument_matches.get(histogram)  # noqa: SLF001
                if not matches:
                    return None
                for match in matches:
                    if match._reset_on_collect or match._view._attribute_keys is not None:  # noqa: SLF001
                        return None
                    tables.append(match._attributes_aggregation)  # noqa: SLF001
            return _Plan(tables, context or get_current(), consumer._sdk_config.exemplar_filter)  # noqa: SLF001
        except (AttributeError, TypeError):
            self._internals_differ()
            return None

    def _internals_differ(self) -> None:
        _log.debug("ctxscope: this SDK's histogram internals differ; recording through record()", exc_info=True)
        self._fast = False

    def _aggregated(self, plan: _Plan, value: Any, attributes: dict[str, Any], key: Any) -> bool:
        """The measurement aggregated as the SDK's record would; False: nothing done, record() must."""
        kind = value.__class__
        if not (value >= 0 if kind is int else kind is float and value >= 0 and math.isfinite(value)):
            return False
        aggregations = []
        for table in plan.tables:
            aggregation = table.get(key)
            if aggregation is None:
                return False
            aggregations.append(aggregation)
        context = plan.context
        now = time_ns()
        try:
            # The SDK's Measurement, its attributes the dict the SDK's cleaning gives (shared:
            # the aggregation and the exemplar reservoir only read them). Its fields are set
            # at once in its __dict__ (a frozen dataclass: no __setattr__, one call for each).
            measurement = _new_measurement(Measurement)
            measurement.__dict__.update(value=value, time_unix_nano=now, instrument=self.histogram,
                                        context=context, attributes=attributes)
            exemplar_filter = plan.exemplar_filter
            if context is self._sampled_context and type(exemplar_filter) is _TraceBasedFilter:
                # The SDK's trace-based filter decides on the context alone: a call's
                # measurements (one context) share the decision of its first.
                sample = self._sampled
            else:
                sample = exemplar_filter.should_sample(value, now, attributes, context)
                self._sampled_context, self._sampled = context, sample
        except (AttributeError, TypeError):
            self._internals_differ()
            return False
        for aggregation in aggregations:
            aggregation.aggregate(measurement, sample)
        return True
