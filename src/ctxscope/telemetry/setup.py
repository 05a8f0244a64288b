"""Setting up telemetry: ``ctxscope.setup()`` in code, or ``opentelemetry-instrument``.

Two modes (docs/telemetry.md):

- **OTLP**: an endpoint is configured (argument or ``OTEL_EXPORTER_OTLP_*``):
  spans go through a ``BatchSpanProcessor`` and metrics through a
  ``PeriodicExportingMetricReader`` to OTLP exporters (gRPC or HTTP/protobuf),
  and the context span processor turns annotated spans into the
  ``llm.context.*`` metrics.
- **Embedded** (the default): no endpoint. No exporter is built, so there are
  no connection errors and no network attempts; every call is kept in the
  local store (:mod:`ctxscope.telemetry.store`) for ``ctxscope context``.

:class:`CtxscopeConfigurator` is the ``opentelemetry_configurator`` entry
point: under ``opentelemetry-instrument`` it delegates to the SDK's standard
configuration when exporters or an endpoint are configured, else it sets up
the embedded mode.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from opentelemetry import metrics as otel_metrics
from opentelemetry import trace as otel_trace
from opentelemetry.environment_variables import OTEL_METRICS_EXPORTER, OTEL_TRACES_EXPORTER
from opentelemetry.sdk.environment_variables import (
    OTEL_EXPORTER_OTLP_ENDPOINT,
    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
    OTEL_EXPORTER_OTLP_METRICS_PROTOCOL,
    OTEL_EXPORTER_OTLP_PROTOCOL,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
    OTEL_SDK_DISABLED,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from ctxscope.telemetry import shutdown as _shutdown
from ctxscope.config import otel, settings
from ctxscope.config import read as read_settings
from ctxscope.telemetry.processor import ContextSpanProcessor, ensure_processor
from ctxscope.telemetry.views import gauge_views

if TYPE_CHECKING:  # pragma: no cover
    from ctxscope.telemetry.store import LocalStore

__all__ = ["CtxscopeConfigurator", "Telemetry", "setup"]  # noqa: F822 - CtxscopeConfigurator: __getattr__

_log = logging.getLogger(__name__)

PROTOCOL_GRPC = "grpc"
PROTOCOL_HTTP = "http/protobuf"
# The Python SDK's default for OTLP (opentelemetry-instrument picks gRPC too).
DEFAULT_PROTOCOL = PROTOCOL_GRPC

MODE_OTLP = "otlp"
MODE_EMBEDDED = "embedded"
MODE_EXISTING = "existing"  # the application had configured the SDK already



@dataclass
class Telemetry:
    """What :func:`setup` built; ``shutdown()`` ends the recording and flushes."""

    mode: str
    tracer_provider: Any
    meter_provider: Any
    processor: ContextSpanProcessor | None
    store: LocalStore | None = None
    traces_endpoint: str | None = None
    metrics_endpoint: str | None = None
    protocol: str | None = None
    owns_providers: bool = True
    # What setup() built to export (None otherwise): the span processor, the exporters.
    span_processor: Any = None
    span_exporter: Any = None
    metric_exporter: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _done: bool = field(default=False, repr=False)

    def force_flush(self, timeout_millis: int = 10000) -> bool:
        """Export what is pending; False when something could not be flushed in time."""
        ok = True
        for provider in (self.tracer_provider, self.meter_provider):
            try:
                ok = bool(provider.force_flush(timeout_millis)) and ok
            except Exception:  # noqa: BLE001
                _log.warning("ctxscope: flush failed", exc_info=True)
                ok = False
        return ok

    def shutdown(self, *, exporting: Callable[[], bool] | None = None, warn: bool = True) -> bool:
        """End the recording (live values, then zeros), export it, shut down. Idempotent. False: not finished.

        Bounded by ctxscope's shutdown budget (``CTXSCOPE_SHUTDOWN_TIMEOUT_MS``,
        :mod:`ctxscope.telemetry.shutdown`): with the backend down, what is left past it is dropped.
        A command whose job is the export (``replay``, ``watch``: :meth:`~ctxscope.telemetry.delivery.Delivery.end`)
        passes ``exporting`` (an export is under way): the exports' own time,
        each bounded by its timeout, is then not counted against the budget; and ``warn=False``
        when it says itself what was not delivered (:func:`~ctxscope.telemetry.shutdown.run_within`).
        """
        with self._lock:
            if self._done:
                return True
            self._done = True
        if self.store is not None:
            self.store.detach()
        steps = []
        if self.processor is not None:
            steps.append(self.processor.stop)  # final values and zeros exported before any shutdown
        if self.owns_providers:
            # Shut down here, once: should this be left behind past the budget, the exit's handler
            # must not shut them down again (the SDK's "shutdown can only be called once").
            for provider in (self.tracer_provider, self.meter_provider):
                _shutdown.take_exit_handler(provider)
            steps += [self.tracer_provider.shutdown, self.meter_provider.shutdown]
        if not steps:
            return True
        return _shutdown.run_within(steps, _shutdown.budget_s(), "ctxscope.Telemetry.shutdown()",
                                    exporting=exporting, warn=warn)


# ---------------------------------------------------------------------------
# Configuration read once from arguments and the environment
# ---------------------------------------------------------------------------

def _protocol(value: str | None, signal: str) -> str:
    protocol = (value or DEFAULT_PROTOCOL).strip().lower()
    if protocol == "http":
        protocol = PROTOCOL_HTTP
    if protocol not in (PROTOCOL_GRPC, PROTOCOL_HTTP):
        raise ValueError(f"unsupported OTLP protocol {value!r} for {signal}: use grpc or http/protobuf")
    return protocol


def _http_url(base: str, path: str) -> str:
    return base.rstrip("/") + path


def _exporter_kwargs(headers: Mapping[str, str] | None, timeout_s: float | None) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if headers:
        kwargs["headers"] = dict(headers)
    if timeout_s is not None:
        kwargs["timeout"] = timeout_s
    return kwargs


def _span_exporter(protocol: str, endpoint: str, is_base: bool, headers: Mapping[str, str] | None,
                   timeout_s: float | None):
    # The SDK's exporters, encoding the spans with ctxscope's encoder (the same bytes, a third of the CPU).
    kwargs = _exporter_kwargs(headers, timeout_s)
    if protocol == PROTOCOL_GRPC:
        from ctxscope.telemetry.grpc_span_exporter import GrpcSpanExporter
        return GrpcSpanExporter(endpoint=endpoint, **kwargs)
    from ctxscope.telemetry.http_span_exporter import HttpSpanExporter
    return HttpSpanExporter(endpoint=_http_url(endpoint, "/v1/traces") if is_base else endpoint, **kwargs)


def _metric_exporter(protocol: str, endpoint: str, is_base: bool, headers: Mapping[str, str] | None,
                     timeout_s: float | None):
    # The SDK's exporters, encoding the points with ctxscope's encoder (the same bytes, a tenth of the CPU).
    kwargs = _exporter_kwargs(headers, timeout_s)
    if protocol == PROTOCOL_GRPC:
        from ctxscope.telemetry.grpc_metric_exporter import GrpcMetricExporter
        return GrpcMetricExporter(endpoint=endpoint, **kwargs)
    from ctxscope.telemetry.http_metric_exporter import HttpMetricExporter
    return HttpMetricExporter(endpoint=_http_url(endpoint, "/v1/metrics") if is_base else endpoint, **kwargs)


def _endpoint(explicit: str | None, environ: Mapping[str, str] | None, signal_var: str) -> tuple[str | None, bool]:
    """(endpoint, whether it is a base URL to which HTTP adds ``/v1/<signal>``)."""
    if explicit:
        return explicit, True
    per_signal = otel(environ, signal_var)
    if per_signal:
        return per_signal, False  # the SDK uses a per-signal URL as given
    return otel(environ, OTEL_EXPORTER_OTLP_ENDPOINT), True


def _store_wanted(store: bool | None, exporting: bool, environ: Mapping[str, str] | None) -> bool:
    if store is not None:
        return store
    setting = (settings() if environ is None else read_settings(environ)).store
    return not exporting if setting == "auto" else setting == "on"


def _max_sessions(environ: Mapping[str, str] | None) -> int:
    return (settings() if environ is None else read_settings(environ)).max_sessions


def _instrument(tracer_provider: Any, meter_provider: Any) -> None:
    """Turn on ctxscope's own instrumentors (those whose library is installed)."""
    from importlib.metadata import entry_points

    for entry_point in entry_points(group="opentelemetry_instrumentor"):
        if not entry_point.value.startswith("ctxscope."):
            continue
        try:
            instrumentor = entry_point.load()()
            if not instrumentor.is_instrumented_by_opentelemetry:
                instrumentor.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)
        except Exception:  # noqa: BLE001 - an instrumentor that cannot load costs its data only
            _log.debug("ctxscope: instrumentor %s not enabled", entry_point.name, exc_info=True)


# ---------------------------------------------------------------------------
# setup()
# ---------------------------------------------------------------------------

def setup(service_name: str | None = None, *, endpoint: str | None = None, protocol: str | None = None,
          headers: Mapping[str, str] | None = None, timeout_s: float | None = None,
          export_interval_millis: float | None = None,
          store: bool | None = None, data_dir: str | os.PathLike[str] | None = None,
          resource_attributes: Mapping[str, Any] | None = None, instrument: bool = True,
          set_global: bool = True, max_sessions: int | None = None,
          environ: Mapping[str, str] | None = None) -> Telemetry:
    """Set up tracing, metrics and ctxscope's span processor in one call.

    Arguments win over the standard variables: ``endpoint`` over
    ``OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT`` and
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` (a base URL: ``/v1/traces`` and
    ``/v1/metrics`` are added for HTTP), ``protocol`` over
    ``OTEL_EXPORTER_OTLP_[SIGNAL_]PROTOCOL`` (``grpc``, the default, or
    ``http/protobuf``), ``timeout_s`` (per export, retries included) over
    ``OTEL_EXPORTER_OTLP_[SIGNAL_]TIMEOUT``, ``export_interval_millis`` over
    ``OTEL_METRIC_EXPORT_INTERVAL``; ``service_name`` over ``OTEL_SERVICE_NAME``.
    Headers, timeout, compression and certificates follow the exporters' own
    ``OTEL_EXPORTER_OTLP_*`` variables. With no endpoint anywhere, nothing is
    exported and the local store keeps every call (``store=False`` turns it
    off; ``CTXSCOPE_STORE`` sets the default).

    If the application already installed an SDK tracer provider globally,
    ``setup`` adds ctxscope's processor to it and builds nothing else.

    Raises ``ValueError`` for an unsupported protocol.
    """
    env = environ  # None: the process environment, read through ctxscope.config
    sessions = max_sessions if max_sessions is not None else _max_sessions(env)
    current = otel_trace.get_tracer_provider()
    if set_global and isinstance(current, TracerProvider):
        meter_provider = otel_metrics.get_meter_provider()
        processor = ensure_processor(current, meter_provider, max_sessions=sessions)
        local = _attach_store(store, exporting=True, data_dir=data_dir, environ=env)
        if instrument:
            _instrument(current, meter_provider)
        return Telemetry(MODE_EXISTING, current, meter_provider, processor, local, owns_providers=False)

    traces_endpoint, traces_base = _endpoint(endpoint, env, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
    metrics_endpoint, metrics_base = _endpoint(endpoint, env, OTEL_EXPORTER_OTLP_METRICS_ENDPOINT)
    traces_protocol = _protocol(protocol or otel(env, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL,
                                                 OTEL_EXPORTER_OTLP_PROTOCOL), "traces")
    metrics_protocol = _protocol(protocol or otel(env, OTEL_EXPORTER_OTLP_METRICS_PROTOCOL,
                                                  OTEL_EXPORTER_OTLP_PROTOCOL), "metrics")
    # OTEL_TRACES_EXPORTER / OTEL_METRICS_EXPORTER = none turn a signal's export off.
    if (otel(env, OTEL_TRACES_EXPORTER) or "").lower() == "none":
        traces_endpoint = None
    if (otel(env, OTEL_METRICS_EXPORTER) or "").lower() == "none":
        metrics_endpoint = None

    attributes: dict[str, Any] = dict(resource_attributes or {})
    if service_name:
        attributes[SERVICE_NAME] = service_name
    resource = Resource.create(attributes)  # merges OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME

    readers = []
    metric_exporter = span_exporter = span_processor = None
    if metrics_endpoint:
        metric_exporter = _metric_exporter(metrics_protocol, metrics_endpoint, metrics_base, headers, timeout_s)
        readers.append(PeriodicExportingMetricReader(metric_exporter, export_interval_millis=export_interval_millis))
    # The gauges collected without the SDK's per-point exemplar work (telemetry/views.py).
    meter_provider = MeterProvider(resource=resource, metric_readers=readers, views=gauge_views())
    tracer_provider = TracerProvider(resource=resource)
    if traces_endpoint:
        span_exporter = _span_exporter(traces_protocol, traces_endpoint, traces_base, headers, timeout_s)
        span_processor = BatchSpanProcessor(span_exporter)
        tracer_provider.add_span_processor(span_processor)
    processor = ensure_processor(tracer_provider, meter_provider, max_sessions=sessions)
    exporting = bool(traces_endpoint or metrics_endpoint)
    if set_global:
        otel_trace.set_tracer_provider(tracer_provider)
        otel_metrics.set_meter_provider(meter_provider)
    local = _attach_store(store, exporting=exporting, data_dir=data_dir, environ=env)
    if instrument:
        _instrument(tracer_provider, meter_provider)
    return Telemetry(MODE_OTLP if exporting else MODE_EMBEDDED, tracer_provider, meter_provider, processor,
                     local, traces_endpoint, metrics_endpoint,
                     traces_protocol if traces_endpoint else (metrics_protocol if metrics_endpoint else None),
                     span_processor=span_processor, span_exporter=span_exporter, metric_exporter=metric_exporter)


def _attach_store(store: bool | None, *, exporting: bool, data_dir: Any,
                  environ: Mapping[str, str] | None) -> LocalStore | None:
    if not _store_wanted(store, exporting, environ):
        return None
    # Imported only when a store is kept (an exporting replay never needs it).
    from ctxscope.telemetry.store import LocalStore

    try:
        local = LocalStore(data_dir)
        local.attach()
        return local
    except Exception:  # noqa: BLE001
        _log.warning("ctxscope: the local store is off", exc_info=True)
        return None


# ---------------------------------------------------------------------------
# opentelemetry-instrument
# ---------------------------------------------------------------------------

_configured: Telemetry | None = None


def __getattr__(name: str) -> Any:
    """``CtxscopeConfigurator`` (the entry point's name here) from :mod:`ctxscope.telemetry.configurator`.

    Imported on first use: the SDK's configuration module it derives from, and
    the SDK's log pipeline that module imports, are only needed under
    ``opentelemetry-instrument``, not by :func:`setup` (``ctxscope replay``).
    """
    if name == "CtxscopeConfigurator":
        from ctxscope.telemetry.configurator import CtxscopeConfigurator

        return CtxscopeConfigurator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _endpoint_configured(environ: Mapping[str, str] | None) -> bool:
    """The store's ``auto`` rule: an OTLP endpoint is configured for some signal."""
    return bool(otel(environ, OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
                     OTEL_EXPORTER_OTLP_METRICS_ENDPOINT))


_AUTO_INSTRUMENTATION = "opentelemetry.instrumentation.auto_instrumentation"
_beside_lock = threading.Lock()


def configure_beside_other_configurator() -> Telemetry | None:
    """Under ``opentelemetry-instrument`` when another configurator won (opentelemetry-distro's): what ours adds.

    ``opentelemetry-instrument`` runs one configurator, the first it finds,
    then the instrumentors: when ctxscope's did not run, the instrumentors
    call this, and the processor goes on the providers that configurator
    built, the local store by the same rule as ours (``CTXSCOPE_STORE``;
    ``auto``: on unless an OTLP endpoint is configured). Idempotent; None
    when ours ran or this is not auto-instrumentation (an application's own
    set-up decides for itself, or calls :func:`setup`).
    """
    global _configured
    if _configured is not None or _AUTO_INSTRUMENTATION not in sys.modules:
        return None
    with _beside_lock:
        if _configured is not None:
            return None
        env = None  # the process environment, read through ctxscope.config
        if (otel(env, OTEL_SDK_DISABLED) or "").lower() == "true":
            return None
        tracer_provider = otel_trace.get_tracer_provider()
        meter_provider = otel_metrics.get_meter_provider()
        processor = ensure_processor(tracer_provider, meter_provider, max_sessions=_max_sessions(env))
        local = _attach_store(None, exporting=_endpoint_configured(env), data_dir=None, environ=env)
        _configured = Telemetry(MODE_EXISTING, tracer_provider, meter_provider, processor, local,
                                owns_providers=False)
        _log.info("ctxscope: providers set up by another configurator (%s); ctxscope's processor added%s",
                  type(tracer_provider).__name__, ", local store on" if local is not None else "")
        return _configured
