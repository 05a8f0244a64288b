"""The Docker stack's configuration (it cannot run here): mounts exist, ports agree, images pinned."""

from __future__ import annotations

from _paths import ROOT

import json
import re
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import yaml

from backends import binary_path, requires
from prometheus_helpers import free_port



def _compose() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))


def _published(service: dict[str, Any]) -> dict[int, int]:
    """Container port -> host port."""
    out = {}
    for mapping in service.get("ports", []):
        host, _, container = str(mapping).rpartition(":")
        out[int(container)] = int(host)
    return out


def _port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1].split("/")[0])


def test_stack_has_its_services_with_pinned_images():
    """Collector, Prometheus, Grafana, Jaeger and the docs run from images with an explicit version tag."""
    services = _compose()["services"]
    assert set(services) == {"otel-collector", "prometheus", "grafana", "jaeger", "docs"}
    for name, service in services.items():
        image, _, tag = service["image"].rpartition(":")
        assert image and re.fullmatch(r"v?\d+\.\d+(\.\d+)?(-alpine)?", tag), f"{name}: {service['image']}"


def test_images_are_the_releases_the_end_to_end_tests_run():
    """Collector, Prometheus 3 and Jaeger v2 images are the releases backends/versions.env builds; Grafana is 12."""
    versions = dict(line.split("=", 1) for line in (ROOT / "backends/versions.env").read_text().splitlines()
                    if line and not line.startswith("#"))
    images = {name: s["image"] for name, s in _compose()["services"].items()}
    assert images["otel-collector"] == f"otel/opentelemetry-collector-contrib:{versions['OTELCOL_VERSION']}"
    assert images["prometheus"] == f"prom/prometheus:v{versions['PROMETHEUS_VERSION']}"
    assert images["jaeger"] == f"jaegertracing/jaeger:{versions['JAEGER_VERSION']}"
    assert images["grafana"].startswith("grafana/grafana:12.")
    assert "--web.enable-otlp-receiver" in _compose()["services"]["prometheus"]["command"]


def test_every_mounted_file_exists():
    """Every bind mount of the compose file points at a file or directory in the repository."""
    mounts = 0
    for name, service in _compose()["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            assert source.startswith("./"), f"{name}: {volume}"
            assert (ROOT / source).exists(), f"{name}: {source} does not exist"
            mounts += 1
    assert mounts >= 7


def test_collector_ports_agree_with_its_config_and_prometheus():
    """The Collector's listening ports are published; Prometheus scrapes its exporter's port by service name."""
    services = _compose()["services"]
    collector = services["otel-collector"]
    env = collector["environment"]
    published = _published(collector)
    for var in ("CTXSCOPE_OTLP_GRPC_ENDPOINT", "CTXSCOPE_OTLP_HTTP_ENDPOINT",
                "CTXSCOPE_PROMETHEUS_ENDPOINT", "CTXSCOPE_HEALTH_CHECK_ENDPOINT"):
        assert env[var].startswith("0.0.0.0:"), var  # reachable from other containers
        assert _port(env[var]) in published, var
    assert published[4317] == 4317 and published[4318] == 4318  # the OTLP defaults SDKs use
    prom = yaml.safe_load((ROOT / "prometheus/prometheus.yml").read_text(encoding="utf-8"))
    (job,) = prom["scrape_configs"]
    (target,) = job["static_configs"][0]["targets"]
    host, port = target.split(":")
    assert host == "otel-collector" and int(port) == _port(env["CTXSCOPE_PROMETHEUS_ENDPOINT"])
    assert job["honor_labels"] is True


def test_collector_reaches_jaeger_and_prometheus_by_service_name():
    """Traces go to Jaeger's OTLP port; remote write goes to Prometheus, which accepts it."""
    services = _compose()["services"]
    env = services["otel-collector"]["environment"]
    host, port = env["CTXSCOPE_JAEGER_OTLP_ENDPOINT"].split(":")
    assert host in services and int(port) == 4317
    url = urlparse(env["CTXSCOPE_REMOTE_WRITE_URL"])
    assert url.hostname == "prometheus" and url.port == 9090 and url.path == "/api/v1/write"
    assert "--web.enable-remote-write-receiver" in services["prometheus"]["command"]
    assert _published(services["prometheus"])[9090] == 9090


def test_collector_config_choice_is_a_mounted_file():
    """The Collector's --config (default and remote-write variant) names a file mounted into it."""
    collector = _compose()["services"]["otel-collector"]
    (command,) = collector["command"]
    match = re.fullmatch(r"--config=(/etc/otelcol/)\$\{CTXSCOPE_COLLECTOR_CONFIG:-([\w.-]+)\}", command)
    assert match
    targets = {v.split(":")[1] for v in collector["volumes"]}
    assert match.group(1) + match.group(2) in targets
    assert "/etc/otelcol/otelcol-remotewrite.yaml" in targets


def test_prometheus_loads_the_mounted_rules():
    """prometheus.yml's rule_files glob matches where compose mounts prometheus/rules, which holds rules."""
    prom = yaml.safe_load((ROOT / "prometheus/prometheus.yml").read_text(encoding="utf-8"))
    (pattern,) = prom["rule_files"]
    mounts = dict(v.split(":")[:2] for v in _compose()["services"]["prometheus"]["volumes"])
    assert mounts["./prometheus/rules"] == pattern.rsplit("/", 1)[0]
    assert list((ROOT / "prometheus/rules").glob(pattern.rsplit("/", 1)[1]))
    assert mounts["./prometheus/prometheus.yml"] == "/etc/prometheus/prometheus.yml"


def test_grafana_datasources_point_at_the_stack():
    """Grafana's provisioned data sources reach Prometheus and Jaeger at their service names and ports."""
    services = _compose()["services"]
    sources = yaml.safe_load((ROOT / "dashboards/provisioning/datasources/ctxscope.yaml").read_text())
    urls = {d["type"]: urlparse(d["url"]) for d in sources["datasources"]}
    assert (urls["prometheus"].hostname, urls["prometheus"].port) == ("prometheus", 9090)
    assert (urls["jaeger"].hostname, urls["jaeger"].port) == ("jaeger", 16686)
    assert 16686 in _published(services["jaeger"])
    mounts = {v.split(":")[1] for v in services["grafana"]["volumes"]}
    assert {"/etc/grafana/provisioning/datasources", "/etc/grafana/provisioning/dashboards",
            "/etc/grafana/provisioning/alerting"} <= mounts
    home = services["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home.startswith("/var/lib/grafana/dashboards/ctxscope/")
    assert (ROOT / "dashboards" / home.rsplit("/", 1)[1]).is_file()


def test_make_stack_runs_docker_compose_up():
    """`make stack` starts the compose file."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    match = re.search(r"^stack:.*\n\t(.+)$", makefile, re.M)
    assert match
    recipe = match.group(1).replace("$(COMPOSE)", re.search(r"^COMPOSE \?= (.+)$", makefile, re.M).group(1))
    assert recipe == "docker compose -f compose.yaml up"


@requires("prometheus3")
def test_the_stacks_prometheus_config_loads_in_the_pinned_prometheus(tmp_path: Path):
    """prometheus/prometheus.yml (with its otlp block) is accepted by Prometheus 3.16, the release compose runs."""
    port = free_port()
    process = subprocess.Popen(
        [binary_path("prometheus3"), f"--config.file={ROOT / 'prometheus/prometheus.yml'}",
         f"--storage.tsdb.path={tmp_path / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
         "--web.enable-otlp-receiver"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            assert process.poll() is None, process.stdout.read().decode(errors="replace")[-2000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/status/config", timeout=2) as resp:
                    loaded = yaml.safe_load(json.load(resp)["data"]["yaml"])
                break
            except OSError:
                time.sleep(0.25)
        else:
            raise AssertionError("prometheus did not come up")
        assert loaded["otlp"]["promote_resource_attributes"] == ["service.name"]
    finally:
        process.terminate()
        process.wait(timeout=10)
