"""Structural checks of the Grafana dashboards and their provisioning files.

The queries themselves run against a real Prometheus in test_prometheus_e2e.py.
"""

from __future__ import annotations

from _paths import ROOT

import importlib.util
import json
import re
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from ctxscope.schema import Metric
from prometheus_helpers import label_names, metric_names, selects_service_on_both_paths, without_target_info_join

DASHBOARDS = ROOT / "dashboards"
DS_REF = {"type": "prometheus", "uid": "${datasource}"}


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("ctxscope_dashboards", DASHBOARDS / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _files() -> list[Path]:
    return sorted(DASHBOARDS.glob("*.json"))


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))


def _queries(dashboard: dict[str, Any]) -> Iterator[str]:
    for panel in _panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            yield target["expr"]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            yield var["query"]["query"]


def _walk(node: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict):
        for k, v in node.items():
            yield k, v
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


SCHEMA_SERIES = {name for m in (*Metric.ALL, *Metric.HISTOGRAMS) for name in m.prometheus_series}
UTILISATION_SERIES = {Metric.UTILIZATION.prometheus_name, Metric.UTILIZATION.prometheus_sdk_name}


def test_committed_json_is_what_the_generator_builds():
    """Each committed dashboard equals generate.py's output: regenerate after a change."""
    gen = _generator()
    built = gen.build()
    assert {p.stem for p in _files()} == set(built)
    for path in _files():
        assert path.read_text(encoding="utf-8") == gen.render(built[path.stem]), path.name


def test_dashboards_are_valid_json_with_unique_uids():
    """Every dashboard file loads as JSON; dashboard uids and panel ids are unique."""
    dashboards = [_load(p) for p in _files()]
    assert dashboards
    uids = [d["uid"] for d in dashboards]
    assert len(uids) == len(set(uids))
    for d in dashboards:
        ids = [p["id"] for p in _panels(d["panels"])]
        assert len(ids) == len(set(ids)), d["uid"]


def test_metric_names_come_from_the_schema():
    """Every series a query names is one ctxscope emits, with the same name on both paths."""
    for path in _files():
        names = set().union(*(metric_names(without_target_info_join(q)) for q in _queries(_load(path))))
        assert names, path.name
        assert names <= SCHEMA_SERIES, names - SCHEMA_SERIES
        # The utilisation series differs between Collector and SDK reader: never named.
        assert not names & UTILISATION_SERIES
        for name in names:
            spec = next(m for m in (*Metric.ALL, *Metric.HISTOGRAMS) if name in m.prometheus_series)
            assert spec.prometheus_name == spec.prometheus_sdk_name
            assert name in (spec.prometheus_name, *spec.prometheus_series)


def test_metric_name_check_can_fail():
    """The name extraction finds a misspelt series and skips labels, functions and variables."""
    expr = ('sum by (llm_context_category) (llm_context_tokenz{a=~"$service"}) '
            '/ on () group_right () max(llm_context_limit_tokens offset 5m > 0)')
    assert metric_names(expr) == {"llm_context_tokenz", "llm_context_limit_tokens"}
    assert label_names(expr) == {"llm_context_category", "a"}
    assert metric_names('label_values(llm_context_tokens{service_name=~"$service"}, gen_ai_request_model)') == {
        "llm_context_tokens"}


def test_no_hard_coded_datasource_or_job():
    """Every datasource reference is the ${datasource} variable; no query mentions `job`."""
    for path in _files():
        dashboard = _load(path)
        refs = [v for k, v in _walk(dashboard["panels"]) if k == "datasource"]
        assert refs and all(r == DS_REF for r in refs), path.name
        for var in dashboard["templating"]["list"]:
            if var["type"] == "query":
                assert var["datasource"] == DS_REF
        for query in _queries(dashboard):
            rest = without_target_info_join(query)
            assert "job" not in label_names(rest), query
            assert "instance" not in label_names(rest), query
            assert "target_info" not in rest, query


def test_every_selector_reads_service_from_a_label_or_target_info():
    """Each ctxscope series is selected twice: with service_name, and without it joined to target_info."""
    for path in _files():
        for query in _queries(_load(path)):
            for name in metric_names(without_target_info_join(query)):
                assert selects_service_on_both_paths(query, name), query
    # The check fails on a bare selector.
    assert not selects_service_on_both_paths('sum(llm_context_tokens{service_name!=""})', "llm_context_tokens")


def test_variables_are_datasource_then_service_model_session():
    """Variables start with the datasource, then service, model and session, all from the token series."""
    gen = _generator()
    for path in _files():
        variables = _load(path)["templating"]["list"]
        assert [v["name"] for v in variables[:4]] == ["datasource", "service", "model", "session"]
        assert variables[0]["type"] == "datasource" and variables[0]["query"] == "prometheus"
        for var, label in zip(variables[1:4], (gen.SERVICE, gen.MODEL, gen.SESSION)):
            query = var["query"]["query"]
            assert query.startswith(f"query_result(group by ({label}) ("), query
            assert var["regex"] == f'/{label}="([^"]+)"/' and var["query"]["qryType"] == 3


def test_every_panel_has_a_description_a_unit_and_queries():
    """Every non-row panel has a description, a unit and at least one query."""
    for path in _files():
        for panel in _panels(_load(path)["panels"]):
            if panel["type"] == "row":
                continue
            assert panel.get("description", "").strip(), panel["title"]
            assert panel["fieldConfig"]["defaults"].get("unit"), panel["title"]
            assert panel["targets"], panel["title"]


def test_layout_overview_expanded_and_context_row_collapsed():
    """The overview row is open with the composition bar; the collapsed Context row holds the session panels."""
    gen = _generator()
    dashboard = _load(DASHBOARDS / "ctxscope-context.json")
    rows = [p for p in dashboard["panels"] if p["type"] == "row"]
    assert [(r["title"], r["collapsed"]) for r in rows] == [("Overview", False), ("Context", True),
                                                            ("Additions and fleet", True)]
    bar = next(p for p in dashboard["panels"] if p["type"] == "barchart")
    assert bar["options"]["stacking"] == "normal" and bar["fieldConfig"]["defaults"]["unit"] == "percentunit"
    context = rows[1]["panels"]
    assert context and all("$session" in t["expr"] for p in context for t in p["targets"])
    by_category = context[0]
    assert by_category["fieldConfig"]["defaults"]["custom"]["stacking"]["mode"] == "normal"
    assert f"sum by ({gen.CATEGORY})" in by_category["targets"][0]["expr"]
    # utilisation against the limits, reported against estimated, waste by kind, compactions
    exprs = " ".join(t["expr"] for p in context for t in p["targets"])
    for name in (gen.LIMITS, gen.REPORTED, gen.WASTE, gen.COMPACTIONS, gen.LIMIT, gen.WASTE_KIND):
        assert name in exprs, name


def test_largest_additions_panel_asks_for_exemplars_that_open_the_trace():
    """The additions panel queries the bucket series with exemplars on; the data source sends trace_id to Jaeger."""
    gen = _generator()
    dashboard = _load(DASHBOARDS / "ctxscope-context.json")
    additions = next(p for p in _all_panels(dashboard) if p["id"] == 21)
    (query,) = additions["targets"]
    assert query["exemplar"] is True and gen.ADDED + "_bucket" in query["expr"]
    sources = yaml.safe_load((DASHBOARDS / "provisioning/datasources/ctxscope.yaml").read_text())
    prometheus = next(d for d in sources["datasources"] if d["type"] == "prometheus")
    jaeger = next(d for d in sources["datasources"] if d["type"] == "jaeger")
    assert prometheus["jsonData"]["exemplarTraceIdDestinations"] == [
        {"name": "trace_id", "datasourceUid": jaeger["uid"]}]


def _all_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [q for p in dashboard["panels"] for q in (p.get("panels") or [p])]


def test_sessions_link_to_their_traces_in_jaeger_by_session_id():
    """The dashboard and the live-sessions table link to Jaeger searching llm.context.session.id."""
    dashboard = _load(DASHBOARDS / "ctxscope-context.json")
    (link,) = dashboard["links"]
    assert link["url"].startswith("${jaeger_url}/search?service=${service}")
    assert "llm.context.session.id" in link["url"] and "${session}" in link["url"]
    table_links = [v for k, v in _walk(dashboard["panels"]) if k == "value" and isinstance(v, list)
                   and v and isinstance(v[0], dict) and "url" in v[0]]
    assert any("llm.context.session.id" in link["url"] and "${__value.raw}" in link["url"]
               for links in table_links for link in links)
    jaeger = next(v for v in dashboard["templating"]["list"] if v["name"] == "jaeger_url")
    assert jaeger["type"] == "textbox" and jaeger["query"].startswith("http")


def test_provisioning_files_point_at_the_dashboards():
    """The Grafana provisioning files parse; the dashboard provider path is where compose mounts the JSON."""
    providers = yaml.safe_load((DASHBOARDS / "provisioning/dashboards/ctxscope.yaml").read_text())
    (provider,) = providers["providers"]
    assert provider["type"] == "file"
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    assert f"./dashboards:{provider['options']['path']}:ro" in mounts
    sources = yaml.safe_load((DASHBOARDS / "provisioning/datasources/ctxscope.yaml").read_text())
    assert {d["type"] for d in sources["datasources"]} == {"prometheus", "jaeger"}


@pytest.mark.parametrize("path", _files(), ids=lambda p: p.name)
def test_panels_fit_the_24_column_grid(path: Path):
    """No panel sticks out of Grafana's 24-column grid."""
    for panel in _panels(_load(path)["panels"]):
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["w"] > 0 and grid["h"] > 0, panel["title"]


def test_grafana_alerting_is_generated_from_the_prometheus_rules():
    """Grafana's provisioned alert rules are the Prometheus rules: same expression, for, labels; committed as
    generated."""
    gen = _generator()
    alerting_file = DASHBOARDS / "provisioning" / "alerting" / "ctxscope-alerts.yaml"
    assert alerting_file.read_text(encoding="utf-8") == gen.render_alerting(gen.grafana_alerting())
    provisioned = yaml.safe_load(alerting_file.read_text(encoding="utf-8"))
    prometheus = yaml.safe_load((ROOT / "prometheus" / "rules" / "ctxscope-alerts.yml").read_text())
    source = {r["alert"]: r for g in prometheus["groups"] for r in g["rules"] if "alert" in r}
    rules = [r for g in provisioned["groups"] for r in g["rules"]]
    assert {r["title"] for r in rules} == set(source)
    uids = [r["uid"] for r in rules]
    assert len(set(uids)) == len(uids) and all(len(u) <= 40 for u in uids)
    for rule in rules:
        original = source[rule["title"]]
        query, condition = rule["data"]
        # The data source comes from Grafana's environment (compose.yaml sets it), not a fixed uid.
        assert query["datasourceUid"] == "${CTXSCOPE_PROMETHEUS_DATASOURCE_UID}"
        assert query["model"]["expr"] == original["expr"].strip()
        assert condition["refId"] == rule["condition"] and condition["model"]["expression"] == "A"
        assert rule["for"] == original["for"] and rule["labels"] == original["labels"]
        notes = rule["annotations"]
        # Grafana expands $NAME in provisioning files: template dollars are doubled.
        assert "$$values.A.Value" in notes["description"] or "$value" not in original["annotations"]["description"]
        assert re.sub(r"\$\$", "", notes["description"] + notes["summary"]).count("$") == 0
        assert notes["runbook_url"] == "${CTXSCOPE_DOCS_URL}/dashboards.md#" + rule["title"].lower()


def test_compose_gives_grafana_the_alerting_inputs():
    """compose.yaml sets the two environment variables the alert copies read, to the provisioned uid."""
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    env = compose["services"]["grafana"]["environment"]
    datasources = yaml.safe_load((DASHBOARDS / "provisioning/datasources/ctxscope.yaml").read_text())
    prom_uid = next(d["uid"] for d in datasources["datasources"] if d["type"] == "prometheus")
    assert env["CTXSCOPE_PROMETHEUS_DATASOURCE_UID"] == prom_uid
    assert env["CTXSCOPE_DOCS_URL"].startswith("http")
