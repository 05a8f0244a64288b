"""Real backends for the end-to-end tests, each started on free ports in a temporary directory.

Binaries come from ``make backends`` (backends/build.sh), which builds or
fetches them into a cache directory outside the clone; this module looks in
the same place (``CTXSCOPE_BACKENDS_DIR``, else
``${XDG_CACHE_HOME:-~/.cache}/ctxscope-backends``). Where one is absent a
test skips with a reason naming the make target; CI's ``.ci/run`` builds
them all first, so there nothing skips.

- :class:`Collector`: the built ``otelcol-ctxscope`` running a shipped config;
- :class:`VictoriaMetrics` and :class:`VMAlert`: Debian trixie's binaries;
- :class:`Alertmanager` (Debian's) with a :class:`Webhook` receiver;
- :class:`Jaeger`: Jaeger v2 built from the module proxy, in-memory storage;
- :class:`DocsServer`: ``docs/`` over HTTP, where the runbook links point;
- :class:`InstrumentedAgent`: tests/scripted_agent.py under ``opentelemetry-instrument``.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any, Iterable

import pytest
import yaml

from prometheus_helpers import ROOT, PromAPI, free_port, wait_for

VERSIONS = dict(line.split("=", 1) for line in (ROOT / "backends" / "versions.env").read_text().splitlines()
                if line and not line.startswith("#"))


def backends_dir() -> Path:
    if os.environ.get("CTXSCOPE_BACKENDS_DIR"):
        return Path(os.environ["CTXSCOPE_BACKENDS_DIR"])
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "ctxscope-backends"


def _otelcol_build(manifest_name: str = "otelcol-builder.yaml", dist: str = "otelcol-ctxscope",
                   version: str = "OTELCOL_VERSION") -> str:
    # As backends/build.sh names it: the release and the manifest's hash, so that a
    # binary built from an older manifest is not taken for the current one.
    manifest = (ROOT / "backends" / manifest_name).read_bytes()
    return f"bin/{dist}-{VERSIONS[version]}-{hashlib.sha256(manifest).hexdigest()[:12]}"


BINARIES = {
    # name: (path under the cache directory, the part of backends/build.sh that makes it)
    "otelcol": (_otelcol_build(), "otelcol"),
    "otelcol-lb": (_otelcol_build("otelcol-lb-builder.yaml", "otelcol-ctxscope-lb", "OTELCOL_LB_VERSION"),
                   "otelcol-lb"),
    "jaeger": (f"bin/jaeger-{VERSIONS['JAEGER_MODULE_VERSION']}", "jaeger"),
    "prometheus3": (f"bin/prometheus-{VERSIONS['PROMETHEUS_MODULE_VERSION']}-nosd", "prometheus3"),
    "victoria-metrics": (f"victoria-metrics-{VERSIONS['VICTORIAMETRICS_DEBIAN_VERSION']}/usr/bin/victoria-metrics",
                         "victoriametrics"),
    "vmalert": (f"victoria-metrics-{VERSIONS['VICTORIAMETRICS_DEBIAN_VERSION']}/usr/bin/vmalert", "victoriametrics"),
}


def binary(name: str) -> Path | None:
    if name == "alertmanager":
        found = shutil.which("prometheus-alertmanager")
        return Path(found) if found else None
    path = backends_dir() / BINARIES[name][0]
    return path if path.is_file() and os.access(path, os.X_OK) else None


# Set by .ci/run: a missing backend is then a failure, not a skip.
REQUIRED = os.environ.get("CTXSCOPE_REQUIRE_BACKENDS", "") not in ("", "0")


def requires(*names: str) -> pytest.MarkDecorator:
    """Skip unless every named backend is there, saying which make target provides it."""
    missing = [] if REQUIRED else [n for n in names if binary(n) is None]
    parts = sorted({BINARIES[n][1] if n in BINARIES else "alertmanager" for n in missing})
    return pytest.mark.skipif(
        bool(missing),
        reason=f"{', '.join(missing)} not built: run `make backends` (or `backends/build.sh {' '.join(parts)}`), "
               f"which puts them in {backends_dir()}; .ci/run does")


def binary_path(name: str) -> str:
    found = binary(name)
    if found is None:  # only where CTXSCOPE_REQUIRE_BACKENDS turned the skip off
        raise RuntimeError(f"{name} is not built: run `make backends` (looked in {backends_dir()})")
    return str(found)


def _get(url: str, timeout: float = 2) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


class Process:
    """A backend binary run from a temporary directory, its output in a log file there."""

    name = "backend"

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.log = workdir / f"{self.name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def command(self) -> list[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        raise NotImplementedError

    def environment(self) -> dict[str, str]:
        return dict(os.environ)

    def start(self, timeout: float = 30.0) -> "Process":
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                            cwd=self.workdir, env=self.environment())
        wait_for(self._ready, timeout)
        return self

    def _ready(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"{self.name} exited: {self.output()[-3000:]}")
        return self.ready()

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


# ---------------------------------------------------------------------------
# The Collector
# ---------------------------------------------------------------------------

class Collector(Process):
    """``otelcol-ctxscope --config=<shipped config>``, every endpoint on a free port.

    ``sets`` are ``--set`` overrides (only for what a test must shorten, such as
    the exporter's metric expiration).
    """

    name = "otelcol"

    def __init__(self, workdir: Path, config: Path, *, jaeger_otlp: str | None = None,
                 remote_write: str | None = None, sets: Iterable[str] = ()) -> None:
        super().__init__(workdir)
        self.config = config
        # The Collector's own metrics listen on localhost:8888 by default: off here, so
        # that Collectors of parallel tests (and of other jobs on the machine) do not collide.
        self.sets = ["service::telemetry::metrics::level=none", *sets]
        self.grpc_port, self.http_port = free_port(), free_port()
        self.prometheus_port, self.health_port = free_port(), free_port()
        self.env = {
            "CTXSCOPE_OTLP_GRPC_ENDPOINT": f"127.0.0.1:{self.grpc_port}",
            "CTXSCOPE_OTLP_HTTP_ENDPOINT": f"127.0.0.1:{self.http_port}",
            "CTXSCOPE_PROMETHEUS_ENDPOINT": f"127.0.0.1:{self.prometheus_port}",
            "CTXSCOPE_HEALTH_CHECK_ENDPOINT": f"127.0.0.1:{self.health_port}",
            # No trace backend in a metrics test: a port nobody listens on (the exporter retries, quietly).
            "CTXSCOPE_JAEGER_OTLP_ENDPOINT": jaeger_otlp or f"127.0.0.1:{free_port()}",
            "CTXSCOPE_REMOTE_WRITE_URL": remote_write or f"http://127.0.0.1:{free_port()}/api/v1/write",
        }
        self.scrape_target = f"127.0.0.1:{self.prometheus_port}"
        self.otlp_grpc = f"http://127.0.0.1:{self.grpc_port}"

    def environment(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def command(self) -> list[str]:
        return [binary_path("otelcol"), f"--config={self.config}", *(f"--set={s}" for s in self.sets)]

    def validate(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run([binary_path("otelcol"), "validate", f"--config={self.config}"],
                              capture_output=True, text=True, timeout=60, env=self.environment())

    def ready(self) -> bool:
        return json.loads(_get(f"http://127.0.0.1:{self.health_port}/")).get("status") == "Server available"


class LoadBalancer(Collector):
    """The gateway recipe's first tier (``otelcol-ctxscope-lb``), routing each stream to one of ``gateways``."""

    name = "otelcol-lb"

    def __init__(self, workdir: Path, config: Path, gateways: Iterable[str]) -> None:
        super().__init__(workdir, config)
        # One variable, a YAML list: the Collector parses a value that is the whole expansion.
        self.env["CTXSCOPE_GATEWAY_OTLP_HOSTNAMES"] = "[" + ", ".join(gateways) + "]"

    def command(self) -> list[str]:
        return [binary_path("otelcol-lb"), f"--config={self.config}", *(f"--set={s}" for s in self.sets)]

    def validate(self) -> subprocess.CompletedProcess[str]:
        return subprocess.run([binary_path("otelcol-lb"), "validate", f"--config={self.config}"],
                              capture_output=True, text=True, timeout=60, env=self.environment())


# ---------------------------------------------------------------------------
# VictoriaMetrics and vmalert
# ---------------------------------------------------------------------------

class VictoriaMetrics(Process, PromAPI):
    """Single-node VictoriaMetrics: OTLP at /opentelemetry/v1/metrics, PromQL at /api/v1/query."""

    name = "victoria-metrics"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.otlp_metrics = f"{self.url}/opentelemetry/v1/metrics"

    def command(self) -> list[str]:
        return [binary_path("victoria-metrics"), f"-storageDataPath={self.workdir / 'data'}",
                f"-httpListenAddr=127.0.0.1:{self.port}",
                # OTLP names as Prometheus' translation writes them (llm_context_compactions_total, ...)
                "-opentelemetry.usePrometheusNaming",
                # Samples are visible to queries at once, not after the default 30s.
                "-search.latencyOffset=0s", "-search.disableCache", "-loggerLevel=WARN",
                # Pushed series get no staleness marker: an ended session leaves queries after 5s.
                "-search.maxStalenessInterval=5s"]

    def ready(self) -> bool:
        return _get(self.url + "/health") == b"OK"


class VMAlert(Process, PromAPI):
    """vmalert evaluating Prometheus rule files against a PromQL data source every second."""

    name = "vmalert"

    def __init__(self, workdir: Path, datasource: str, rule_files: Iterable[Path],
                 alertmanager: str | None = None) -> None:
        super().__init__(workdir)
        self.datasource, self.rule_files, self.alertmanager = datasource, list(rule_files), alertmanager
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        notifier = [f"-notifier.url={self.alertmanager}"] if self.alertmanager else ["-notifier.blackhole"]
        return [binary_path("vmalert"), f"-datasource.url={self.datasource}",
                *(f"-rule={p}" for p in self.rule_files), f"-httpListenAddr=127.0.0.1:{self.port}",
                "-evaluationInterval=1s", *notifier, "-loggerLevel=WARN",
                # Evaluate at the present, not 30s back (the default, for ingestion delay).
                "-rule.evalDelay=0s"]

    def ready(self) -> bool:
        return _get(self.url + "/health") == b"OK"


# ---------------------------------------------------------------------------
# Alertmanager, a webhook receiver, the docs
# ---------------------------------------------------------------------------

class Webhook:
    """An HTTP receiver of Alertmanager's webhook notifications (kept in ``self.notifications``)."""

    def __init__(self) -> None:
        notifications: list[dict[str, Any]] = []
        self.notifications = notifications

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                notifications.append(json.loads(body))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def alerts(self, status: str | None = None) -> list[dict[str, Any]]:
        """Every alert of every notification so far, in order (``status``: firing or resolved)."""
        return [a for n in self.notifications for a in n["alerts"] if status is None or a["status"] == status]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class DocsServer:
    """``docs/`` over HTTP: the base the alert rules' runbook links are generated with."""

    def __init__(self) -> None:
        handler = lambda *a, **k: _QuietFiles(*a, directory=str(ROOT / "docs"), **k)  # noqa: E731
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _QuietFiles(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


class Alertmanager(Process):
    """Debian's Alertmanager routing every alert to one webhook, grouped per alert and session."""

    name = "alertmanager"

    def __init__(self, workdir: Path, webhook: str, *, group_by: Iterable[str]) -> None:
        super().__init__(workdir)
        self.port, self.cluster_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "route": {"receiver": "webhook", "group_by": list(group_by),
                      "group_wait": "0s", "group_interval": "1s", "repeat_interval": "1h"},
            "receivers": [{"name": "webhook", "webhook_configs": [{"url": webhook, "send_resolved": True}]}],
        }
        self.config_file = workdir / "alertmanager.yml"
        self.config_file.write_text(yaml.safe_dump(config), encoding="utf-8")

    def command(self) -> list[str]:
        return [binary_path("alertmanager"), f"--config.file={self.config_file}",
                f"--storage.path={self.workdir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
                f"--cluster.listen-address=127.0.0.1:{self.cluster_port}", "--log.level=warn"]

    def ready(self) -> bool:
        return _get(self.url + "/-/ready") is not None


# ---------------------------------------------------------------------------
# Jaeger v2
# ---------------------------------------------------------------------------

class Jaeger(Process):
    """Jaeger v2 with in-memory storage: OTLP gRPC in, the query API (/api/traces) out."""

    name = "jaeger"

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir)
        self.otlp_port, self.query_port, self.health_port = free_port(), free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.query_port}"
        self.otlp_grpc = f"127.0.0.1:{self.otlp_port}"
        config = {
            "service": {"extensions": ["jaeger_storage", "jaeger_query", "healthcheckv2"],
                        "pipelines": {"traces": {"receivers": ["otlp"], "processors": [],
                                                 "exporters": ["jaeger_storage_exporter"]}},
                        "telemetry": {"metrics": {"level": "none"}}},
            "extensions": {
                "healthcheckv2": {"use_v2": True, "http": {"endpoint": f"127.0.0.1:{self.health_port}"}},
                "jaeger_query": {"storage": {"traces": "memstore"},
                                 "http": {"endpoint": f"127.0.0.1:{self.query_port}"},
                                 "grpc": {"endpoint": f"127.0.0.1:{free_port()}"}},
                "jaeger_storage": {"backends": {"memstore": {"memory": {"max_traces": 10000}}}},
            },
            "receivers": {"otlp": {"protocols": {"grpc": {"endpoint": self.otlp_grpc}}}},
            "exporters": {"jaeger_storage_exporter": {"trace_storage": "memstore"}},
        }
        self.config_file = workdir / "jaeger.yaml"
        self.config_file.write_text(yaml.safe_dump(config), encoding="utf-8")

    def command(self) -> list[str]:
        return [binary_path("jaeger"), f"--config={self.config_file}"]

    def ready(self) -> bool:
        _get(f"http://127.0.0.1:{self.health_port}/status")
        return True

    def api(self, path: str) -> Any:
        return json.loads(_get(f"{self.url}/api/{path}", timeout=5))


# ---------------------------------------------------------------------------
# The agent under opentelemetry-instrument
# ---------------------------------------------------------------------------

class InstrumentedAgent:
    """tests/scripted_agent.py under ``opentelemetry-instrument``, telemetry set by ``env``.

    The methods mirror :class:`prometheus_helpers.AgentScenario` so that one
    test body drives either.
    """

    def __init__(self, workdir: Path, env: dict[str, str], *, service: str) -> None:
        bindir = Path(sys.executable).parent
        self.log = workdir / "agent.log"
        workdir.mkdir(parents=True, exist_ok=True)
        self.env = {
            **os.environ,
            "OTEL_PYTHON_CONFIGURATOR": "ctxscope",
            "OTEL_SERVICE_NAME": service,
            "OTEL_METRIC_EXPORT_INTERVAL": "500",
            "OTEL_BSP_SCHEDULE_DELAY": "200",
            "CTXSCOPE_STORE": "off",
            "PYTHONUNBUFFERED": "1",
            **env,
        }
        self.target = env.get("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1") + ":" + env.get(
            "OTEL_EXPORTER_PROMETHEUS_PORT", "")
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [str(bindir / "opentelemetry-instrument"), sys.executable,
                 str(Path(__file__).parent / "scripted_agent.py")],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=self.env, cwd=workdir,
                text=True, bufsize=1)

    def command(self, command: str, timeout: float = 30.0) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line.startswith(f"ok {command}"):
            raise RuntimeError(f"agent: {command} -> {line!r}; log: {self.log.read_text(errors='replace')[-3000:]}")
        return line[len(f"ok {command}"):].strip()

    def play_all(self, *, upto: int | None = None) -> None:
        assert upto == -1, "the scripted agent plays all but the last turn, then the last"
        self.command("all-but-last")

    def play_last(self) -> None:
        self.command("last")

    def play_turn(self, index: int) -> None:
        """Turn ``index`` of every session that has one."""
        self.command(f"turn {index}")

    def end_recording(self) -> None:
        self.command("end")

    def spans(self) -> list[dict[str, Any]]:
        return json.loads(self.command("traces"))

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.command("quit")
                self.process.wait(timeout=15)
            except Exception:  # noqa: BLE001 - a test failed already; make sure the process goes
                self.process.kill()
                self.process.wait(timeout=10)
