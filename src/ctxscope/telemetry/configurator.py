"""The ``opentelemetry_configurator`` entry point ``ctxscope`` (``opentelemetry-instrument``).

Apart from :mod:`ctxscope.telemetry.setup` because it derives from the SDK's
configurator, whose module imports the SDK's whole configuration (its log
pipeline, ``logging.config``): :func:`ctxscope.setup` and ``ctxscope replay``
do not need it. The entry point still names
``ctxscope.telemetry.setup:CtxscopeConfigurator``, which imports this module
on first use. What it configures is kept in :mod:`ctxscope.telemetry.setup`
(``_configured``), which :func:`~ctxscope.telemetry.setup.configure_beside_other_configurator` reads.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import metrics as otel_metrics
from opentelemetry import trace as otel_trace
from opentelemetry.environment_variables import OTEL_METRICS_EXPORTER, OTEL_TRACES_EXPORTER
from opentelemetry.sdk._configuration import _BaseConfigurator, _OTelSDKConfigurator
from opentelemetry.sdk.environment_variables import (
    OTEL_EXPORTER_OTLP_ENDPOINT,
    OTEL_EXPORTER_OTLP_METRICS_ENDPOINT,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
    OTEL_SDK_DISABLED,
)

from ctxscope.config import otel, set_default
from ctxscope.telemetry import setup as _setup
from ctxscope.telemetry.processor import ensure_processor

__all__ = ["CtxscopeConfigurator"]


class CtxscopeConfigurator(_BaseConfigurator):
    """``opentelemetry_configurator`` entry point ``ctxscope``.

    With exporters or an OTLP endpoint configured through ``OTEL_*``, the
    SDK's own configuration runs (every standard variable honoured; the
    exporters default to ``otlp`` when only an endpoint is given, as
    opentelemetry-distro does) and ctxscope's processor is added to its tracer
    provider. Otherwise the embedded mode: providers without exporters and the
    local store.
    """

    def _configure(self, **kwargs: Any) -> None:
        env = None  # the process environment, read through ctxscope.config
        if (otel(env, OTEL_SDK_DISABLED) or "").lower() == "true":
            return
        endpoint = otel(env, OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
                        OTEL_EXPORTER_OTLP_METRICS_ENDPOINT)
        named = otel(env, OTEL_TRACES_EXPORTER, OTEL_METRICS_EXPORTER)
        if endpoint or named:
            if endpoint:
                set_default(OTEL_TRACES_EXPORTER, "otlp")
                set_default(OTEL_METRICS_EXPORTER, "otlp")
            _OTelSDKConfigurator()._configure(**kwargs)  # noqa: SLF001 - the SDK's standard path
            tracer_provider = otel_trace.get_tracer_provider()
            meter_provider = otel_metrics.get_meter_provider()  # its gauge views: offer_gauge_views
            processor = ensure_processor(tracer_provider, meter_provider, max_sessions=_setup._max_sessions(env))  # noqa: SLF001
            local = _setup._attach_store(None, exporting=_setup._endpoint_configured(env),  # noqa: SLF001
                                         data_dir=None, environ=env)
            _setup._configured = _setup.Telemetry(_setup.MODE_OTLP, tracer_provider, meter_provider,  # noqa: SLF001
                                                  processor, local, owns_providers=False)
            return
        _setup._configured = _setup.setup(instrument=False)  # noqa: SLF001 - the instrumentors: opentelemetry-instrument's
