"""Every dashboard against a JSON schema of Grafana's own dashboard types.

``make backends`` installs the npm package ``@grafana/schema`` (the Grafana 12
release compose runs, backends/versions.env) and turns its TypeScript
``Dashboard`` type into a JSON schema with ``ts-json-schema-generator``; the
dashboards are validated with ``jsonschema``. No Grafana server can be built
here, so this, the structural checks of test_dashboards.py and the live
queries of test_prometheus_e2e.py are what there is.
"""

from __future__ import annotations

from _paths import ROOT

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from backends import REQUIRED, VERSIONS, backends_dir

SCHEMA = backends_dir() / f"grafana-schema-{VERSIONS['GRAFANA_SCHEMA_VERSION']}" / "dashboard.schema.json"
DASHBOARDS = sorted((ROOT / "dashboards").glob("*.json"))

pytestmark = pytest.mark.skipif(
    not SCHEMA.is_file() and not REQUIRED,
    reason=f"no Grafana dashboard schema at {SCHEMA}: run `make backends` (or `backends/build.sh grafana-schema`)")


def _validator() -> jsonschema.Draft7Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    return jsonschema.Draft7Validator({**schema, "$ref": "#/definitions/Dashboard"})


def _errors(dashboard: dict[str, Any]) -> list[str]:
    return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in _validator().iter_errors(dashboard)]


@pytest.mark.parametrize("path", DASHBOARDS, ids=lambda p: p.name)
def test_dashboard_matches_grafanas_dashboard_schema(path: Path) -> None:
    """The committed dashboard is a valid Grafana 12 Dashboard, rows and panels included."""
    assert _errors(json.loads(path.read_text(encoding="utf-8"))) == []


def test_the_schema_catches_a_broken_dashboard() -> None:
    """A panel without its grid height, a link without a type and a stray key are each reported."""
    dashboard = json.loads(DASHBOARDS[0].read_text(encoding="utf-8"))
    broken = copy.deepcopy(dashboard)
    del broken["panels"][1]["gridPos"]["h"]
    del broken["links"][0]["type"]
    broken["templating"]["list"][1]["definitionn"] = "typo"
    errors = _errors(broken)
    assert any(e.startswith("panels/1") for e in errors), errors
    assert any(e.startswith("links/0") and "'type'" in e for e in errors), errors
    assert any("definitionn" in e for e in errors), errors
