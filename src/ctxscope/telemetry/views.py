"""Views that make a collection of the per-session gauges cheap (docs/telemetry.md, "Cost of a collection").

With 64 live sessions a collection reports about a thousand gauge points,
and the Python SDK's own work per point is nearly all of its cost: for
every point of a last-value aggregation it takes the point's lock, asks the
point's exemplar reservoir for its exemplars (a reservoir per point, walked
and reset even when it holds nothing) and builds a ``NumberDataPoint``
through its frozen dataclass ``__init__``. ctxscope's gauges carry no
exemplar: they are set inside the collection, outside any call's context, so
the default ``trace_based`` filter never samples one, and one could not lead
to a call anyway (under ``OTEL_METRICS_EXEMPLAR_FILTER=always_on`` the SDK
would attach one without a trace to every gauge point; the views drop it).
The histograms carry exemplars (``schema.Metric``). :func:`gauge_views`
gives each gauge a last-value aggregation that reports the same points
without that work; everything else the SDK does (delta temporality, the
cardinality limit, forgetting a series) is unchanged.

``setup()`` passes these views to the meter provider it creates, and
:func:`add_gauge_views` adds them to the one the SDK's configurator builds
under ``opentelemetry-instrument`` with ctxscope's configurator. An
application that builds its own ``MeterProvider`` can pass them too
(``MeterProvider(views=gauge_views(), ...)``); without them the SDK's
default aggregation reports the same points, at its own cost.

The aggregation subclasses the SDK's private ``_LastValueAggregation`` (the
SDK's storage makes a gauge of a stream only for that class), so the first
:func:`gauge_views` of a process collects a gauge both ways and compares the
points; an SDK where they differ gets no views (said once), and its default
aggregation.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry.metrics import Synchronous
from opentelemetry.sdk.metrics.view import LastValueAggregation, View

from ctxscope.schema import INSTRUMENTATION_SCOPE, Metric

_log = logging.getLogger(__name__)

try:  # the SDK's private classes: see the module docstring
    from opentelemetry.sdk.metrics import ExemplarReservoir
    from opentelemetry.sdk.metrics._internal.aggregation import AggregationTemporality, _LastValueAggregation
    from opentelemetry.sdk.metrics._internal.point import NumberDataPoint
except ImportError:  # pragma: no cover - an SDK without them
    _LastValueAggregation = None  # type: ignore[assignment,misc]

_new = object.__new__


if _LastValueAggregation is not None:
    _CUMULATIVE = AggregationTemporality.CUMULATIVE

    class _NoExemplars(ExemplarReservoir):
        """Offered nothing worth keeping: the gauges are set outside any call's context. No state: one for all."""

        def offer(self, value: Any, time_unix_nano: int, attributes: Any, context: Any) -> None:
            return None

        def collect(self, point_attributes: Any) -> list[Any]:
            return []

    _NO_EXEMPLARS = _NoExemplars()

    def _no_exemplars(*args: Any, **kwargs: Any) -> ExemplarReservoir:
        return _NO_EXEMPLARS

    class _LeanLastValue(_LastValueAggregation):
        """The SDK's last-value aggregation, collected without the exemplar reservoir or a lock.

        Under cumulative temporality (every reader's default for a gauge) the
        SDK's ``collect`` only reads the value: one attribute read, atomic,
        needs no lock. Delta temporality resets it, so that stays the SDK's.
        """

        def collect(self, collection_aggregation_temporality: Any, collection_start_nano: int) -> Any:
            if collection_aggregation_temporality is not _CUMULATIVE:
                return super().collect(collection_aggregation_temporality, collection_start_nano)
            value = self._value
            if value is None:
                return None
            # The frozen dataclass's __init__ sets each field through object.__setattr__;
            # filling the point's __dict__ is the same point (_fits compares; a point class
            # with slots or other fields fails there) in about half the time.
            point = _new(NumberDataPoint)
            fields = point.__dict__
            fields["attributes"] = self._attributes
            fields["start_time_unix_nano"] = None
            fields["time_unix_nano"] = collection_start_nano
            fields["value"] = value
            fields["exemplars"] = []
            return point

    class _LeanLastValueAggregation(LastValueAggregation):
        """``LastValueAggregation`` whose streams are :class:`_LeanLastValue`."""

        def _create_aggregation(self, instrument: Any, attributes: Any, reservoir_factory: Any,
                                start_time_unix_nano: int) -> Any:
            if not isinstance(instrument, Synchronous):  # only ctxscope's gauges are meant: the SDK's own
                return super()._create_aggregation(instrument, attributes, reservoir_factory, start_time_unix_nano)
            # As the SDK's LastValueAggregation builds its own (a changed signature fails _fits).
            return _LeanLastValue(attributes, reservoir_builder=_no_exemplars, instrument_is_synchronous=True)


def _fits() -> bool:
    """The lean aggregation builds, sets and collects a point exactly as the SDK's own (checked once).

    A gauge set once, collected through the SDK's default aggregation and
    through the lean one: the same kind of data, the same point class and
    the same fields (the collection time aside).
    """
    if _LastValueAggregation is None:
        return False
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        points = []
        for views in ([], [View(instrument_name="g", aggregation=_LeanLastValueAggregation())]):
            reader = InMemoryMetricReader()
            provider = MeterProvider(metric_readers=[reader], views=views, shutdown_on_exit=False)
            provider.get_meter("ctxscope.check").create_gauge("g").set(7, {"k": "v"})
            data = reader.get_metrics_data()
            if data is None:
                return False
            metric = data.resource_metrics[0].scope_metrics[0].metrics[0]
            (point,) = metric.data.data_points
            fields = {k: v for k, v in vars(point).items() if k != "time_unix_nano"}
            points.append((type(metric.data), type(point), fields, point.time_unix_nano > 0))
            provider.shutdown()
        return points[0] == points[1]
    except Exception:  # noqa: BLE001 - an SDK of another shape: its default aggregation
        _log.debug("ctxscope: the lean gauge aggregation does not fit this SDK", exc_info=True)
        return False


_FITS: bool | None = None


def gauge_views() -> list[View]:
    """One view per ``llm.context.*`` gauge of the ``ctxscope`` meter: the same points, collected cheaply.

    Empty when this SDK's aggregation is not the known one (checked once a
    process): its default then reports the same points.
    """
    global _FITS
    if _FITS is None:
        _FITS = _fits()
        if not _FITS:  # said once a process: the data is the same, its cost is not
            _log.info("ctxscope: this OpenTelemetry SDK's last-value aggregation is not the known one: the "
                      "gauges are collected by the SDK's default aggregation (the same points, at its cost)")
    if not _FITS:
        return []
    return [View(instrument_name=spec.name, meter_name=INSTRUMENTATION_SCOPE,
                 aggregation=_LeanLastValueAggregation())
            for spec in Metric.ALL if spec.kind == "gauge"]


def add_gauge_views(meter_provider: Any) -> bool:
    """Give an SDK meter provider built on ctxscope's behalf the gauge views; False where it cannot.

    For the provider the SDK's own configurator builds under
    ``opentelemetry-instrument`` with ctxscope's configurator (``setup.py``):
    it takes no views, and no public API adds one later. The SDK reads its
    configuration's views when an instrument is first measured, so views
    added before ctxscope's gauges are first set apply to them (ctxscope's
    processor sets them at the first collection with a live session). Never
    for a provider the application built: that one keeps its own views.
    """
    views = gauge_views()
    config = getattr(meter_provider, "_sdk_config", None)  # noqa: SLF001 - no public way to add a view
    current = getattr(config, "views", None)
    if not views or not isinstance(current, (list, tuple)):
        return False
    names = {(v._instrument_name, v._meter_name) for v in current}  # noqa: SLF001
    try:
        config.views = (*current, *(v for v in views  # type: ignore[union-attr]
                                    if (v._instrument_name, v._meter_name) not in names))  # noqa: SLF001
    except (AttributeError, TypeError):
        return False
    return True


_NOTED = False


def note_missing_views(meter_provider: Any) -> None:
    """Say once a process (info) that an SDK meter provider collects ctxscope's gauges without their views.

    An application's own provider keeps its own views (:func:`add_gauge_views`
    never adds to it): its collections then cost the SDK's default
    aggregation, about three times the views' (docs/telemetry.md, "Cost of a
    collection"); the line says how to pass them. Nothing is said where the
    provider has them, is not the SDK's, or this SDK gets no views.
    """
    global _NOTED
    if _NOTED:
        return
    config = getattr(meter_provider, "_sdk_config", None)  # noqa: SLF001 - no public way to read the views
    current = getattr(config, "views", None)
    if not isinstance(current, (list, tuple)) or not gauge_views():
        return
    if any(getattr(v, "_meter_name", None) == INSTRUMENTATION_SCOPE  # noqa: SLF001
           and isinstance(getattr(v, "_aggregation", None), _LeanLastValueAggregation) for v in current):
        return
    _NOTED = True
    _log.info("ctxscope: this meter provider has no ctxscope gauge views, so each collection of the "
              "llm.context.* gauges costs the SDK's default aggregation (about three times more); build it with "
              "MeterProvider(views=ctxscope.telemetry.views.gauge_views(), ...)")
