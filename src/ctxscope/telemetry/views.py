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
ctxscope's processor gives them to any other SDK meter provider before it
first sets its gauges (:func:`offer_gauge_views`): the one the SDK's
configurator builds under ``opentelemetry-instrument``, or an application's
own, unless a view or a reader of the application's decides the gauges'
aggregation (then the SDK's default reports the same points, at its cost).

The aggregation subclasses the SDK's private ``_LastValueAggregation`` (the
SDK's storage makes a gauge of a stream only for that class), so the first
:func:`gauge_views` of a process collects a gauge both ways and compares the
points; an SDK where they differ gets no views (said once), and its default
aggregation.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable

from opentelemetry.metrics import Synchronous
from opentelemetry.sdk.metrics.view import DefaultAggregation, LastValueAggregation, View

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


def offer_gauge_views(meter_provider: Any, gauges: Iterable[Any], readers: Iterable[Any]) -> bool:
    """Before ctxscope's gauges are first set, give an SDK meter provider their views; True where they apply.

    The views change no point (``_fits`` checks that once), only the SDK's
    work to build one, so every SDK provider gets them where nothing else
    decides the gauges' streams: the one ``setup()`` creates has them, and the
    one the SDK's configurator builds under ``opentelemetry-instrument`` or an
    application's own provider built without them are given them here (about
    three times cheaper a collection: docs/telemetry.md, "Cost of a
    collection"). The SDK reads its configuration's views when an
    instrument is first measured, and no public API adds one, so they join
    the provider's configuration; ctxscope's processor calls this once, just
    before it first sets its gauges. ``gauges``: the processor's instruments
    (proxies resolve to the SDK's own); ``readers``: the provider's metric
    readers.

    Left as it is, and said once a process at info level: a provider with a
    view of the application's own matching one of the gauges (that view
    decides its stream), or a reader with its own aggregation for gauges
    (``preferred_aggregation``). Nothing is done or said for a provider that
    is not the SDK's, or where this SDK gets no views.
    """
    views = gauge_views()
    config = getattr(meter_provider, "_sdk_config", None)  # noqa: SLF001 - no public way to add a view
    current = getattr(config, "views", None)
    if not views or not isinstance(current, (list, tuple)):
        return False
    instruments = [getattr(g, "_real_instrument", None) or g for g in gauges]  # a proxy's SDK instrument
    try:
        own = [v for v in current if not _is_ctxscope_view(v) and any(v._match(i) for i in instruments)]  # noqa: SLF001
        # Gauges a view of ctxscope's already covers (the provider setup() creates, a call before this one).
        covered = [i for i in instruments if any(v._match(i) for v in current)]  # noqa: SLF001
        missing = [view for view in views if not any(view._match(i) for i in covered)]  # noqa: SLF001
        readers_own = _readers_with_own_gauge_aggregation(readers, instruments)
    except Exception:  # noqa: BLE001 - an SDK of another shape: its configuration as it is
        _log.debug("ctxscope: could not read this meter provider's views", exc_info=True)
        return False
    if own or readers_own:
        _note_own_views(own, readers_own)
        return False
    if missing:
        config.views = (*current, *missing)  # type: ignore[union-attr]
    return True


def _is_ctxscope_view(view: Any) -> bool:
    return (getattr(view, "_meter_name", None) == INSTRUMENTATION_SCOPE  # noqa: SLF001
            and isinstance(getattr(view, "_aggregation", None), _LeanLastValueAggregation))  # noqa: SLF001


def _readers_with_own_gauge_aggregation(readers: Iterable[Any], instruments: list[Any]) -> int:
    """Readers whose ``preferred_aggregation`` for a gauge's class is not the default (a view would override it)."""
    own = 0
    for reader in readers:
        chosen = reader._instrument_class_aggregation  # noqa: SLF001 - no public accessor
        own += any(not isinstance(chosen.get(type(i), DefaultAggregation()), DefaultAggregation) for i in instruments)
    return own


_NOTED = False


def _note_own_views(own: list[Any], readers: int) -> None:
    global _NOTED
    if _NOTED:
        return
    _NOTED = True
    why = (f"{len(own)} view(s) of its own match ctxscope's llm.context.* gauges" if own
           else f"{readers} of its metric readers choose their own aggregation for gauges")
    _log.info("ctxscope: this meter provider keeps its configuration: %s, so ctxscope does not add its gauge views "
              "and each collection of the gauges costs that aggregation (the SDK's default: about three times "
              "more); ctxscope.telemetry.views.gauge_views() are the views to add beside yours", why)
