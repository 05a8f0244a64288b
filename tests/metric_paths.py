"""The metric paths from an agent to PromQL that the dashboards and rules must work on.

Each path runs the scripted agent (tests/prometheus_helpers.py: SESSIONS) and
real backends; :func:`run_path` yields the agent and a :class:`PathView`, the
PromQL endpoint to query and the rule evaluator to ask for alerts.

| path | agent telemetry | store | rules | service.name arrives |
|---|---|---|---|---|
| ``sdk-label`` | SDK PrometheusMetricReader, resource filter | Prometheus 2.42 scrape | Prometheus | label |
| ``sdk-target-info`` | ``opentelemetry-instrument``, ``OTEL_METRICS_EXPORTER=prometheus`` | Prometheus 2.42 scrape | Prometheus | target_info |
| ``collector`` | ``opentelemetry-instrument``, OTLP gRPC -> built Collector (collector-config/otelcol.yaml) | Prometheus 2.42 scraping the Collector | Prometheus | label |
| ``collector-remote-write`` | OTLP gRPC -> Collector (otelcol-remotewrite.yaml) | Prometheus 2.42 remote-write receiver | Prometheus | label |
| ``collector-gateway-delta`` | OTLP gRPC, delta temporality -> Collector (otelcol-gateway.yaml) | Prometheus 2.42 remote-write receiver | Prometheus | label |
| ``collector-loadbalanced-delta`` | OTLP gRPC, delta -> load-balancing tier (otelcol-loadbalancer.yaml) -> two gateways | Prometheus 2.42 remote-write receiver | Prometheus | label |
| ``victoriametrics`` | ``opentelemetry-instrument``, OTLP HTTP | VictoriaMetrics OTLP ingestion | vmalert | label |
| ``prometheus3-otlp`` | ``opentelemetry-instrument``, OTLP HTTP | Prometheus 3 OTLP receiver | Prometheus 3 | target_info |
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

from backends import (
    REQUIRED, Collector, InstrumentedAgent, LoadBalancer, VictoriaMetrics, VMAlert, binary_path, requires,
)
from prometheus_helpers import ROOT, SERVICE, AgentScenario, PromAPI, PrometheusServer, free_port

COLLECTOR_CONFIG = ROOT / "collector-config" / "otelcol.yaml"
REMOTE_WRITE_CONFIG = ROOT / "collector-config" / "otelcol-remotewrite.yaml"
GATEWAY_CONFIG = ROOT / "collector-config" / "otelcol-gateway.yaml"
LOADBALANCER_CONFIG = ROOT / "collector-config" / "loadbalancer" / "otelcol-loadbalancer.yaml"


@dataclass
class PathView:
    """Where a path's series are queried and its alerts read."""

    store: PromAPI
    rules: PromAPI
    # After the recording ends, how the series leave: "stale" (scrape paths: gone at
    # the next scrape or the exporter's expiry) or "lookback" (pushed samples: gone
    # when the store's lookback has passed).
    leaves: str = "stale"

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        return self.store.query(expr, at=at)

    def alerts(self) -> list[dict[str, Any]]:
        return self.rules.alerts()


@dataclass(frozen=True)
class MetricPath:
    id: str
    needs: tuple[str, ...]
    service_label: bool  # service.name as a label on every series (else on target_info only)

    def param(self) -> Any:
        prometheus = pytest.mark.skipif(
            PrometheusServer.binary() is None and "prometheus" in self.needs and not REQUIRED,
            reason="prometheus is not on PATH (apt-get install prometheus; .ci/run installs it)")
        built = [n for n in self.needs if n != "prometheus"]
        return pytest.param(self, id=self.id, marks=[prometheus, *([requires(*built)] if built else [])])


PATHS = (
    MetricPath("sdk-label", ("prometheus",), True),
    MetricPath("sdk-target-info", ("prometheus",), False),
    MetricPath("collector", ("prometheus", "otelcol"), True),
    MetricPath("collector-remote-write", ("prometheus", "otelcol"), True),
    MetricPath("collector-gateway-delta", ("prometheus", "otelcol"), True),
    MetricPath("collector-loadbalanced-delta", ("prometheus", "otelcol", "otelcol-lb"), True),
    MetricPath("victoriametrics", ("victoria-metrics", "vmalert"), True),
    MetricPath("prometheus3-otlp", ("prometheus3",), False),
)


def _otlp_http(metrics_url: str) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT": metrics_url, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "http/protobuf",
            "OTEL_METRICS_EXPORTER": "otlp", "OTEL_TRACES_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"}


@contextlib.contextmanager
def run_path(path: MetricPath, workdir: Path, rule_files: list[Path], *,
             alertmanager: str | None = None) -> Iterator[tuple[Any, PathView]]:
    """Start ``path``'s backends and agent; stop them all afterwards (by their process ids)."""
    workdir.mkdir(parents=True, exist_ok=True)
    stack = contextlib.ExitStack()
    with stack:
        def started(process: Any) -> Any:
            stack.callback(process.stop)
            return process.start()

        def agent_with(env: dict[str, str]) -> InstrumentedAgent:
            agent = InstrumentedAgent(workdir / "agent", env, service=SERVICE)
            stack.callback(agent.close)
            return agent

        if path.id == "sdk-label":
            agent: Any = AgentScenario()
            stack.callback(agent.close)
            prom = started(PrometheusServer(workdir, [agent.target], rule_files, alertmanager=alertmanager))
            yield agent, PathView(prom, prom)
        elif path.id == "sdk-target-info":
            port = free_port()
            agent = agent_with({"OTEL_METRICS_EXPORTER": "prometheus", "OTEL_TRACES_EXPORTER": "none",
                                "OTEL_LOGS_EXPORTER": "none",
                                "OTEL_EXPORTER_PROMETHEUS_HOST": "127.0.0.1",
                                "OTEL_EXPORTER_PROMETHEUS_PORT": str(port)})
            prom = started(PrometheusServer(workdir, [f"127.0.0.1:{port}"], rule_files, alertmanager=alertmanager))
            yield agent, PathView(prom, prom)
        elif path.id == "collector":
            # The shipped config as it is, but for how long the exporter keeps a series it
            # no longer receives (2m shipped): the test waits for ended sessions to leave.
            collector = started(Collector(workdir / "otelcol", COLLECTOR_CONFIG,
                                          sets=["exporters::prometheus::metric_expiration=3s"]))
            # honor_labels, as prometheus/prometheus.yml scrapes the Collector.
            prom = started(PrometheusServer(workdir, [collector.scrape_target], rule_files,
                                            alertmanager=alertmanager, honor_labels=True))
            agent = agent_with({"OTEL_EXPORTER_OTLP_ENDPOINT": collector.otlp_grpc,
                                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_INSECURE": "true",
                                "OTEL_TRACES_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"})
            agent.collector = collector
            yield agent, PathView(prom, prom)
        elif path.id in ("collector-remote-write", "collector-gateway-delta"):
            # Remote write into Prometheus: pushed samples, no staleness marker, so a
            # short lookback lets ended sessions leave.
            prom = started(PrometheusServer(workdir, [], rule_files, alertmanager=alertmanager,
                                            args=["--web.enable-remote-write-receiver", "--query.lookback-delta=5s"]))
            gateway = path.id == "collector-gateway-delta"
            collector = started(Collector(workdir / "otelcol", GATEWAY_CONFIG if gateway else REMOTE_WRITE_CONFIG,
                                          remote_write=prom.url + "/api/v1/write"))
            env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.otlp_grpc, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                   "OTEL_EXPORTER_OTLP_INSECURE": "true", "OTEL_TRACES_EXPORTER": "none",
                   "OTEL_LOGS_EXPORTER": "none"}
            if gateway:  # the counter arrives as deltas; the gateway sums them
                env["OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE"] = "delta"
            agent = agent_with(env)
            yield agent, PathView(prom, prom, leaves="lookback")
        elif path.id == "collector-loadbalanced-delta":
            # Two gateway replicas behind the load-balancing tier: each stream's deltas must
            # reach one of them only, or its running sum would be split (and the totals wrong).
            prom = started(PrometheusServer(workdir, [], rule_files, alertmanager=alertmanager,
                                            args=["--web.enable-remote-write-receiver", "--query.lookback-delta=5s"]))
            gateways = [started(Collector(workdir / f"gateway-{n}", GATEWAY_CONFIG,
                                          remote_write=prom.url + "/api/v1/write")) for n in (0, 1)]
            balancer = started(LoadBalancer(workdir / "otelcol-lb", LOADBALANCER_CONFIG,
                                            [g.otlp_grpc.removeprefix("http://") for g in gateways]))
            agent = agent_with({"OTEL_EXPORTER_OTLP_ENDPOINT": balancer.otlp_grpc,
                                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_INSECURE": "true",
                                "OTEL_TRACES_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none",
                                "OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE": "delta"})
            agent.gateways = gateways
            yield agent, PathView(prom, prom, leaves="lookback")
        elif path.id == "victoriametrics":
            vm = started(VictoriaMetrics(workdir / "vm"))
            vmalert = started(VMAlert(workdir / "vmalert", vm.url, rule_files, alertmanager))
            agent = agent_with(_otlp_http(vm.otlp_metrics))
            yield agent, PathView(vm, vmalert, leaves="lookback")
        elif path.id == "prometheus3-otlp":
            prom = started(PrometheusServer(
                workdir, [], rule_files, alertmanager=alertmanager, binary=binary_path("prometheus3"),
                # Pushed samples get no staleness marker: a short lookback lets ended sessions leave.
                args=["--web.enable-otlp-receiver", "--query.lookback-delta=5s"],
                # Prometheus 3 turns service.name into `job` and drops it from target_info unless
                # told to keep it there (docs/dashboards.md: the other choice promotes it to a label).
                config={"otlp": {"keep_identifying_resource_attributes": True}}))
            agent = agent_with(_otlp_http(prom.url + "/api/v1/otlp/v1/metrics"))
            yield agent, PathView(prom, prom, leaves="lookback")
        else:
            raise ValueError(path.id)
