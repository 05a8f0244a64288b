"""The built Collector (make backends) runs the shipped configs: valid, current, exactly its components.

The data path through each config (agent -> Collector -> Prometheus, every
dashboard query and rule) is in test_prometheus_e2e.py (paths ``collector``,
``collector-remote-write``, ``collector-gateway-delta``).
"""

from __future__ import annotations

from _paths import ROOT

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from backends import Collector, binary_path, requires
from prometheus_helpers import wait_for
from test_collector_config import CONFIGS, KNOWN_TYPES

pytestmark = requires("otelcol")

KINDS = ("receivers", "processors", "exporters", "extensions")


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_otelcol_validate_accepts_the_shipped_config(config: Path, tmp_path: Path) -> None:
    """`otelcol validate` passes on each config with its environment set, and fails with one variable unset."""
    collector = Collector(tmp_path, config)
    result = collector.validate()
    assert result.returncode == 0, result.stdout + result.stderr
    # The check can fail: with the endpoint variables unset, validate refuses the config.
    bare = {k: v for k, v in os.environ.items() if not k.startswith("CTXSCOPE_")}
    broken = subprocess.run([binary_path("otelcol"), "validate", f"--config={config}"], capture_output=True,
                            text=True, timeout=60, env=bare)
    assert broken.returncode != 0


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_the_config_starts_without_deprecation_warnings(config: Path, tmp_path: Path) -> None:
    """The Collector starts healthy on each config and logs nothing deprecated (names and settings of v0.165.0)."""
    collector = Collector(tmp_path, config)
    try:
        collector.start()
        # Components log their warnings while starting, before this line.
        wait_for(lambda: "Everything is ready" in collector.output(), 30)
    finally:
        collector.stop()
    log = collector.output()
    assert "Everything is ready" in log, log[-2000:]
    assert "deprecat" not in log.lower(), [line for line in log.splitlines() if "eprecat" in line]


def test_the_built_components_are_exactly_those_the_configs_name() -> None:
    """`otelcol components` lists the KNOWN_TYPES of test_collector_config, no more, no fewer."""
    listed = yaml.safe_load(subprocess.run([binary_path("otelcol"), "components"], capture_output=True,
                                           text=True, timeout=60, check=True).stdout)
    built = {kind: {c["name"] for c in listed.get(kind) or []} for kind in KINDS}
    assert built == KNOWN_TYPES
    named: dict[str, set[str]] = {kind: set() for kind in KINDS}
    for config in CONFIGS:
        data = yaml.safe_load(config.read_text(encoding="utf-8"))
        for kind in KINDS:
            named[kind] |= {name.split("/")[0] for name in data.get(kind) or {}}
    assert built == named


LOADBALANCER_CONFIG = ROOT / "collector-config" / "loadbalancer" / \
    "otelcol-loadbalancer.yaml"


@requires("otelcol-lb")
def test_the_load_balancing_tier_validates_starts_clean_and_has_exactly_its_components(tmp_path: Path) -> None:
    """The gateway recipe's first tier: valid on its own release, no deprecation, otlp -> loadbalancing only."""
    from backends import LoadBalancer

    balancer = LoadBalancer(tmp_path, LOADBALANCER_CONFIG, ["127.0.0.1:4317", "127.0.0.1:4318"])
    result = balancer.validate()
    assert result.returncode == 0, result.stdout + result.stderr
    try:
        balancer.start()
        wait_for(lambda: "Everything is ready" in balancer.output(), 30)
    finally:
        balancer.stop()
    log = balancer.output()
    assert "Everything is ready" in log, log[-2000:]
    assert "deprecat" not in log.lower(), [line for line in log.splitlines() if "eprecat" in line]
    listed = yaml.safe_load(subprocess.run([binary_path("otelcol-lb"), "components"], capture_output=True,
                                           text=True, timeout=60, check=True).stdout)
    built = {kind: {c["name"] for c in listed.get(kind) or []} for kind in KINDS}
    assert built == {"receivers": {"otlp"}, "processors": set(), "exporters": {"load_balancing"},
                     "extensions": {"health_check"}}
