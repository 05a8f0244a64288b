"""The instruments of SPEC section 6, created from :class:`ctxscope.schema.Metric`.

The per-session gauges are synchronous: the span processor sets a series when
its value changes, so a collection only reads the SDK's storage (one data
point a live series) instead of handing the SDK every series of every session
again (docs/telemetry.md, "Cost of a collection"). A synchronous gauge under
cumulative temporality (every reader's default) reports its last value at
every collection until the series is removed. The compaction counter is an
observable counter reporting each session's cumulative total, so that a
session's series can leave later exports once it has ended (a synchronous
counter would be exported for ever); its callback is also the processor's
hook into every collection (:data:`Callback`).

Names, units and descriptions come from ``schema.Metric``: never retyped here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation

from ctxscope import __version__
from ctxscope.schema import INSTRUMENTATION_SCOPE, GenAIMetric, InstrumentSpec, Metric

Callback = Callable[[CallbackOptions], Iterable[Observation]]


def get_meter(meter_provider: MeterProvider | None = None) -> Meter:
    """The ``ctxscope`` meter of a provider (the global one by default)."""
    return metrics.get_meter(INSTRUMENTATION_SCOPE, __version__, meter_provider=meter_provider)


@dataclass(frozen=True)
class Instruments:
    """The created instruments, one attribute per ``schema.Metric`` entry."""

    tokens: object | None
    limit_tokens: object | None
    reported_tokens: object | None
    utilization: object | None
    waste_tokens: object | None
    compactions: object | None


def _create(meter: Meter, spec: InstrumentSpec, callback: Callback) -> object:
    if spec.kind == "counter":
        return meter.create_observable_counter(
            spec.name, callbacks=[callback], unit=spec.unit, description=spec.description)
    if spec.kind == "gauge":
        return meter.create_gauge(spec.name, unit=spec.unit, description=spec.description)
    raise ValueError(f"unknown instrument kind {spec.kind!r} of {spec.name}")


def create_instruments(meter: Meter, collection: Callback) -> Instruments:
    """Create the instruments of ``schema.Metric.ALL``: synchronous gauges, and the observable counter.

    ``collection`` is the compaction counter's callback, which the SDK calls
    at the start of every collection of every reader. Fleet mode (no session
    key) creates none of them: :func:`create_fleet_counter`.
    """
    made = {spec: _create(meter, spec, collection) for spec in Metric.ALL}
    return Instruments(
        tokens=made[Metric.TOKENS],
        limit_tokens=made[Metric.LIMIT_TOKENS],
        reported_tokens=made[Metric.REPORTED_TOKENS],
        utilization=made[Metric.UTILIZATION],
        waste_tokens=made[Metric.WASTE_TOKENS],
        compactions=made[Metric.COMPACTIONS],
    )


def create_histogram(meter: Meter, spec: InstrumentSpec) -> Any:
    """A token histogram of ``schema.Metric.HISTOGRAMS``, with the GenAI conventions' token buckets."""
    return meter.create_histogram(spec.name, unit=spec.unit, description=spec.description,
                                  explicit_bucket_boundaries_advisory=list(GenAIMetric.TOKEN_BUCKETS))


def create_fleet_counter(meter: Meter) -> Any:
    """Fleet mode's compaction counter: synchronous, without the session key (docs/dashboards.md, "A fleet")."""
    spec = Metric.COMPACTIONS
    return meter.create_counter(spec.name, unit=spec.unit, description=spec.description)


@dataclass(frozen=True)
class GenAIInstruments:
    """The GenAI conventions' client histograms (``schema.GenAIMetric``)."""

    operation_duration: object
    token_usage: object


def create_genai_instruments(meter: Meter) -> GenAIInstruments:
    """``gen_ai.client.operation.duration`` and ``gen_ai.client.token.usage``, as util-genai creates them."""
    return GenAIInstruments(
        operation_duration=meter.create_histogram(
            GenAIMetric.OPERATION_DURATION, unit=GenAIMetric.OPERATION_DURATION_UNIT,
            description="Duration of GenAI client operation",
            explicit_bucket_boundaries_advisory=list(GenAIMetric.DURATION_BUCKETS)),
        token_usage=meter.create_histogram(
            GenAIMetric.TOKEN_USAGE, unit=GenAIMetric.TOKEN_USAGE_UNIT,
            description="Number of input and output tokens used by GenAI clients",
            explicit_bucket_boundaries_advisory=list(GenAIMetric.TOKEN_BUCKETS)))
