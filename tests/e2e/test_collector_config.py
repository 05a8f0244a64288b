"""The Collector configs' wiring: defined components, memory limiter first, endpoints from the environment."""

from __future__ import annotations

from _paths import ROOT

import re
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

CONFIG_DIR = ROOT / "collector-config"
CONFIGS = sorted(CONFIG_DIR.glob("*.yaml"))
KINDS = ("receivers", "processors", "exporters")
ENV_REF = re.compile(r"^\$\{env:([A-Z][A-Z0-9_]*)\}$")
# Component types the configs rely on, as Collector v0.165.0 names them: exactly what
# backends/otelcol-builder.yaml builds (tests/e2e/test_collector_e2e.py compares this with
# the built binary's `components`).
KNOWN_TYPES = {
    "receivers": {"otlp"},
    "processors": {"memory_limiter", "batch", "delta_to_cumulative"},
    "exporters": {"prometheus", "prometheus_remote_write", "otlp_grpc"},
    "extensions": {"health_check"},
}


def _load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _endpoints(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            here = f"{path}.{key}" if path else str(key)
            if key == "endpoint":
                yield here, value
            yield from _endpoints(value, here)


def _env_vars(path: Path) -> set[str]:
    return set(re.findall(r"\$\{env:([A-Z][A-Z0-9_]*)\}", path.read_text(encoding="utf-8")))


def test_three_variants_exist():
    """A scrape-endpoint config, a remote-write config and a fleet gateway ship."""
    assert [p.name for p in CONFIGS] == ["otelcol-gateway.yaml", "otelcol-remotewrite.yaml", "otelcol.yaml"]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_pipeline_names_defined_components(path: Path):
    """Each pipeline's receivers, processors and exporters are defined, and each defined one is used."""
    config = _load(path)
    used: dict[str, set[str]] = {kind: set() for kind in KINDS}
    for name, pipeline in config["service"]["pipelines"].items():
        for kind in KINDS:
            for component in pipeline.get(kind, []):
                assert component in (config.get(kind) or {}), f"{path.name}: {name} names undefined {component}"
                used[kind].add(component)
        assert pipeline["receivers"] and pipeline["exporters"], name
    for kind in KINDS:
        assert used[kind] == set(config[kind]), f"{path.name}: unused {kind} {set(config[kind]) - used[kind]}"
        for component in config[kind]:
            assert component.split("/")[0] in KNOWN_TYPES[kind], component
    for extension in config["service"].get("extensions", []):
        assert extension in config["extensions"]
        assert extension.split("/")[0] in KNOWN_TYPES["extensions"]


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_memory_limiter_first_and_batch_last_in_every_pipeline(path: Path):
    """Every pipeline limits memory first and batches last (the gateway sums deltas in between)."""
    for name, pipeline in _load(path)["service"]["pipelines"].items():
        middle = ["delta_to_cumulative"] if path.name == "otelcol-gateway.yaml" and name == "metrics" else []
        assert pipeline["processors"] == ["memory_limiter", *middle, "batch"], name


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_every_endpoint_comes_from_the_environment(path: Path):
    """Every endpoint setting is exactly one ${env:VAR} reference."""
    endpoints = list(_endpoints(_load(path)))
    assert len(endpoints) >= 5
    for where, value in endpoints:
        assert isinstance(value, str) and ENV_REF.match(value), f"{path.name}: {where} = {value!r}"


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_otlp_in_over_grpc_and_http_traces_out_to_jaeger(path: Path):
    """OTLP comes in over gRPC and HTTP; traces go to Jaeger over OTLP."""
    config = _load(path)
    assert set(config["receivers"]["otlp"]["protocols"]) == {"grpc", "http"}
    (exporter,) = config["service"]["pipelines"]["traces"]["exporters"]
    assert exporter.split("/")[0] == "otlp_grpc"
    assert config["exporters"][exporter]["endpoint"] == "${env:CTXSCOPE_JAEGER_OTLP_ENDPOINT}"


def test_metrics_exporters_turn_service_name_into_a_label():
    """Scrape and remote-write exporters put service.name on every series (not the deprecated conversion)."""
    wanted = {"otelcol.yaml": "prometheus", "otelcol-remotewrite.yaml": "prometheus_remote_write",
              "otelcol-gateway.yaml": "prometheus_remote_write"}
    for name, exporter in wanted.items():
        config = _load(CONFIG_DIR / name)
        assert config["service"]["pipelines"]["metrics"]["exporters"] == [exporter]
        settings = config["exporters"][exporter]
        assert settings["resource_constant_labels"] == {"included": ["service.name"]}
        assert "resource_to_telemetry_conversion" not in settings
        assert settings["translation_strategy"] == "UnderscoreEscapingWithSuffixes"


def test_every_variable_is_set_by_compose_and_documented():
    """Each ${env:VAR} of the configs is set for the Collector in compose.yaml and listed in the README."""
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    environment = compose["services"]["otel-collector"]["environment"]
    readme = (CONFIG_DIR / "README.md").read_text(encoding="utf-8")
    names = set().union(*(_env_vars(p) for p in CONFIGS))
    assert len(names) == 6
    for name in names:
        assert name in environment, name
        assert f"`{name}`" in readme, name


def test_readme_pins_the_collector_version_compose_runs_and_the_builder_builds():
    """The README, compose's image, the builder manifest and backends/versions.env name one Collector release."""
    readme = (CONFIG_DIR / "README.md").read_text(encoding="utf-8")
    match = re.search(r"OpenTelemetry Collector v(\d+\.\d+\.\d+)", readme)
    assert match
    version = match.group(1)
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
    image = compose["services"]["otel-collector"]["image"]
    assert image == f"otel/opentelemetry-collector-contrib:{version}"
    manifest = yaml.safe_load((ROOT / "backends" / "otelcol-builder.yaml").read_text(encoding="utf-8"))
    assert manifest["dist"]["version"] == version
    modules = [m["gomod"] for kind in ("receivers", "processors", "exporters", "extensions") for m in manifest[kind]]
    assert modules and all(m.endswith(f" v{version}") for m in modules)
    assert f"OTELCOL_VERSION={version}\n" in (ROOT / "backends" / "versions.env").read_text(encoding="utf-8")
