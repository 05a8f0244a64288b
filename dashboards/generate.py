"""Generate the ctxscope Grafana dashboards from the contract in ``ctxscope.schema``.

Run ``python dashboards/generate.py`` after changing this file (or the
Prometheus alert rules, of which it writes Grafana-managed copies) and commit
what it writes; ``tests/test_dashboards.py`` fails when the committed JSON
differs from what this script produces. Plain Python on purpose: every metric
and label name comes from ``ctxscope.schema`` (the one source of truth), and
nothing beyond the package itself is needed to rebuild the dashboards.

Prometheus names: series come from ``Metric.<X>.prometheus_name`` (the
Collector's ``prometheus`` exporter); the utilisation gauge is never named,
because its series name differs between the Collector and the SDK's own
Prometheus reader (SPEC section 6): ratios are computed from the token and
limit series instead. Limits are read with ``> 0``: after a model change the
old model's limit series report 0 while the session lives, and a 0 limit
would make a ratio infinite.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from ctxscope.schema import Category, LimitKind, Metric, MetricAttr  # noqa: E402

DASHBOARD_FILES = {"ctxscope-context": HERE / "ctxscope-context.json"}

# Grafana 11 dashboard JSON model.
SCHEMA_VERSION = 39
DS = {"type": "prometheus", "uid": "${datasource}"}
DEFAULT_JAEGER_URL = "http://localhost:16686"


def prom_label(key: str) -> str:
    """An OpenTelemetry attribute key as a Prometheus label (dots and other characters to ``_``)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", key)


# Labels, translated exactly as the Collector and the SDK reader translate them.
SERVICE = prom_label("service.name")  # a resource attribute, promoted to a label
SESSION = prom_label(MetricAttr.SESSION_ID)
MODEL = prom_label(MetricAttr.REQUEST_MODEL)
CATEGORY = prom_label(MetricAttr.CATEGORY)
LIMIT = prom_label(MetricAttr.LIMIT)
WASTE_KIND = prom_label(MetricAttr.WASTE_KIND)
TRIGGER = prom_label(MetricAttr.COMPACTION_TRIGGER)

TOKENS = Metric.TOKENS.prometheus_name
LIMITS = Metric.LIMIT_TOKENS.prometheus_name
REPORTED = Metric.REPORTED_TOKENS.prometheus_name
WASTE = Metric.WASTE_TOKENS.prometheus_name
COMPACTIONS = Metric.COMPACTIONS.prometheus_name

UNATTRIBUTED = Category.UNATTRIBUTED.value

# Label filters: the overview follows service and model; the Context row one session.
F = f'{SERVICE}=~"$service", {MODEL}=~"$model"'
FS = f'{F}, {SESSION}="$session"'
BY_SESSION = f"{SERVICE}, {SESSION}"

# Jaeger UI search for a session's traces: service plus the session id tag
# (the ``tags`` parameter is a URL-encoded JSON object, as the Jaeger UI writes it).
_TAG_OPEN = "%7B%22" + MetricAttr.SESSION_ID + "%22%3A%22"
_TAG_CLOSE = "%22%7D"


def jaeger_search_url(service: str, session: str) -> str:
    return f"${{jaeger_url}}/search?service={service}&tags={_TAG_OPEN}{session}{_TAG_CLOSE}"


# ---------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------

def target(ref: str, expr: str, legend: str = "", *, instant: bool = False,
           table: bool = False) -> dict[str, Any]:
    return {
        "refId": ref,
        "datasource": DS,
        "editorMode": "code",
        "expr": expr,
        "legendFormat": legend or "__auto",
        "instant": instant,
        "range": not instant,
        "format": "table" if table else "time_series",
    }


def panel(pid: int, kind: str, title: str, description: str, unit: str,
          grid: tuple[int, int, int, int], targets: list[dict[str, Any]], *,
          custom: dict[str, Any] | None = None, options: dict[str, Any] | None = None,
          overrides: list[dict[str, Any]] | None = None, links: list[dict[str, Any]] | None = None,
          transformations: list[dict[str, Any]] | None = None, minmax: tuple[float, float] | None = None,
          thresholds: list[tuple[str, float | None]] | None = None) -> dict[str, Any]:
    x, y, w, h = grid
    defaults: dict[str, Any] = {"unit": unit, "custom": custom or {}}
    if links:
        defaults["links"] = links
    if minmax is not None:
        defaults["min"], defaults["max"] = minmax
    steps = thresholds or [("green", None)]
    defaults["thresholds"] = {"mode": "absolute",
                              "steps": [{"color": c, "value": v} for c, v in steps]}
    defaults["color"] = {"mode": "palette-classic"} if kind in ("timeseries", "barchart") else {
        "mode": "thresholds"}
    out: dict[str, Any] = {
        "id": pid,
        "type": kind,
        "title": title,
        "description": description,
        "datasource": DS,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "fieldConfig": {"defaults": defaults, "overrides": overrides or []},
        "options": options or {},
        "targets": targets,
    }
    if transformations:
        out["transformations"] = transformations
    return out


def timeseries_custom(*, stacked: bool = False, fill: int = 10, interpolation: str = "linear") -> dict[str, Any]:
    return {
        "drawStyle": "line",
        "lineWidth": 2,
        "fillOpacity": fill,
        "lineInterpolation": interpolation,
        "showPoints": "never",
        "spanNulls": False,
        "stacking": {"mode": "normal" if stacked else "none", "group": "A"},
        "axisPlacement": "auto",
        "axisSoftMin": 0,
    }


LEGEND = {"legend": {"displayMode": "table", "placement": "right", "calcs": ["lastNotNull"], "showLegend": True},
          "tooltip": {"mode": "multi", "sort": "desc"}}

RATIO_THRESHOLDS = [("green", None), ("orange", 0.8), ("red", 0.9)]


def row(pid: int, title: str, y: int, *, collapsed: bool, panels: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"id": pid, "type": "row", "title": title, "collapsed": collapsed,
            "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": panels or []}


def variables() -> list[dict[str, Any]]:
    def query_var(name: str, label: str, query: str, *, all_: bool) -> dict[str, Any]:
        var: dict[str, Any] = {
            "type": "query", "name": name, "label": label, "datasource": DS,
            "definition": query,
            "query": {"qryType": 1, "query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
            "refresh": 2, "sort": 1, "regex": "", "hide": 0,
            "includeAll": all_, "multi": all_, "current": {},
        }
        if all_:
            var["allValue"] = ".*"
            var["current"] = {"text": "All", "value": "$__all"}
        return var

    return [
        {"type": "datasource", "name": "datasource", "label": "Data source", "query": "prometheus",
         "regex": "", "hide": 0, "refresh": 1, "current": {}},
        query_var("service", "Service", f"label_values({TOKENS}, {SERVICE})", all_=True),
        query_var("model", "Model", f'label_values({TOKENS}{{{SERVICE}=~"$service"}}, {MODEL})', all_=True),
        query_var("session", "Session", f"label_values({TOKENS}{{{F}}}, {SESSION})", all_=False),
        {"type": "textbox", "name": "jaeger_url", "label": "Jaeger UI",
         "query": DEFAULT_JAEGER_URL, "current": {"text": DEFAULT_JAEGER_URL, "value": DEFAULT_JAEGER_URL},
         "hide": 0, "description": "Base URL of the Jaeger UI that holds the traces (links to a session's traces)"},
    ]


# ---------------------------------------------------------------------------
# Panels
# ---------------------------------------------------------------------------

def used(filters: str, by: str = BY_SESSION) -> str:
    """Used context of each session: the sum of its calibrated categories."""
    return f"sum by ({by}) ({TOKENS}{{{filters}}})"


def overview_panels(y: int) -> list[dict[str, Any]]:
    live_used = f"({used(F)} > 0)"
    session_link = [
        {"title": "Traces of session ${__data.fields.%s} in Jaeger" % SESSION,
         "url": jaeger_search_url("${__data.fields.%s}" % SERVICE, "${__value.raw}"), "targetBlank": True},
        {"title": "Context of session ${__value.raw}",
         "url": "/d/ctxscope-context/ctxscope-context-window?${datasource:queryparam}"
                "&var-service=${__data.fields.%s}&var-session=${__value.raw}" % SERVICE},
    ]
    return [
        panel(1, "stat", "Live sessions",
              "Sessions whose latest snapshot holds context (ended sessions report 0 once and leave).",
              "none", (0, y, 4, 8),
              [target("A", f"count({live_used})", "sessions", instant=True)],
              options={"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                       "colorMode": "value", "graphMode": "area", "textMode": "value"}),
        panel(2, "barchart", "Composition of live sessions",
              "Each live session's latest context as one stacked bar by category: "
              "the share of each category in the session's used tokens (calibrated view, unattributed included).",
              "percentunit", (4, y, 20, 8),
              [target("A", f"sum by ({SESSION}, {CATEGORY}) ({TOKENS}{{{F}}})"
                           f" / on ({SESSION}) group_left ()"
                           f" (sum by ({SESSION}) ({TOKENS}{{{F}}}) > 0)",
                      "{{%s}} {{%s}}" % (SESSION, CATEGORY), instant=True, table=True)],
              custom={"fillOpacity": 85, "lineWidth": 0, "stacking": {"mode": "normal", "group": "A"}},
              # groupingToMatrix names its first (string) field "<row>\\<column>"; the bar
              # chart takes the first string field as its axis, so no xField is set.
              options={"orientation": "horizontal", "stacking": "normal", "showValue": "never",
                       "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                       "tooltip": {"mode": "multi", "sort": "desc"}},
              transformations=[{"id": "groupingToMatrix", "options": {
                  "columnField": CATEGORY, "rowField": SESSION, "valueField": "Value", "emptyValue": "zero"}}],
              minmax=(0, 1)),
        panel(3, "table", "Live sessions: used, lowest limit, utilisation, waste",
              "Per live session: used tokens, the lowest known limit (window, effective window or compaction "
              "threshold), utilisation = used / lowest limit, and waste ratio = waste / used. "
              "Click a session for its traces in Jaeger or its Context row.",
              "short", (0, y + 8, 24, 8),
              [target("used", live_used, instant=True, table=True),
               target("limit", f"min by ({BY_SESSION}) ({LIMITS}{{{F}}} > 0)", instant=True, table=True),
               target("utilisation", f"{live_used} / on ({BY_SESSION}) min by ({BY_SESSION}) ({LIMITS}{{{F}}} > 0)",
                      instant=True, table=True),
               target("waste", f"sum by ({BY_SESSION}) ({WASTE}{{{F}}}) / on ({BY_SESSION}) {live_used}",
                      instant=True, table=True)],
              options={"showHeader": True, "sortBy": [{"displayName": "utilisation", "desc": True}]},
              transformations=[
                  {"id": "merge", "options": {}},
                  {"id": "organize", "options": {
                      "excludeByName": {"Time": True},
                      "renameByName": {"Value #used": "used", "Value #limit": "lowest limit",
                                       "Value #utilisation": "utilisation", "Value #waste": "waste ratio"}}}],
              overrides=[
                  {"matcher": {"id": "byName", "options": SESSION},
                   "properties": [{"id": "links", "value": session_link}]},
                  {"matcher": {"id": "byRegexp", "options": "utilisation|waste ratio"},
                   "properties": [{"id": "unit", "value": "percentunit"}]},
              ]),
        panel(4, "timeseries", "Utilisation of live sessions",
              "Used tokens over the lowest known limit of each live session, over time.",
              "percentunit", (0, y + 16, 12, 8),
              [target("A", f"{live_used} / on ({BY_SESSION}) min by ({BY_SESSION}) ({LIMITS}{{{F}}} > 0)",
                      "{{%s}}" % SESSION)],
              custom=timeseries_custom(fill=0), options=LEGEND, thresholds=RATIO_THRESHOLDS),
        panel(5, "timeseries", "Waste ratio of live sessions",
              "Wasted tokens (duplicate, stale, bloat, tool definition overage) over used tokens, per live session.",
              "percentunit", (12, y + 16, 12, 8),
              [target("A", f"sum by ({BY_SESSION}) ({WASTE}{{{F}}}) / on ({BY_SESSION}) {live_used}",
                      "{{%s}}" % SESSION)],
              custom=timeseries_custom(fill=0), options=LEGEND),
    ]


def context_panels(y: int) -> list[dict[str, Any]]:
    limit_lines = [{"matcher": {"id": "byFrameRefID", "options": "limits"}, "properties": [
        {"id": "custom.fillOpacity", "value": 0},
        {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
        {"id": "custom.stacking", "value": {"mode": "none", "group": "A"}}]}]
    unattributed = f'{TOKENS}{{{FS}, {CATEGORY}="{UNATTRIBUTED}"}}'
    return [
        panel(11, "timeseries", "Context by category (tokens)",
              "The session's context over time, one series per category, stacked on one shared axis "
              "(calibrated view: the categories sum to the provider-reported input when it is known).",
              "short", (0, y, 24, 9),
              [target("A", f"sum by ({CATEGORY}) ({TOKENS}{{{FS}}})", "{{%s}}" % CATEGORY)],
              custom=timeseries_custom(stacked=True, fill=60), options=LEGEND),
        panel(12, "timeseries", "Used against window, effective window and compaction threshold",
              "Used tokens of the session with its limits drawn as dashed lines: the model's window, the "
              "harness's effective window and the automatic compaction threshold.",
              "short", (0, y + 9, 12, 8),
              [target("used", f"sum({TOKENS}{{{FS}}})", "used"),
               target("limits", f"max by ({LIMIT}) ({LIMITS}{{{FS}}} > 0)", "{{%s}}" % LIMIT)],
              custom=timeseries_custom(fill=20), options=LEGEND, overrides=limit_lines),
        panel(13, "timeseries", "Utilisation against each limit",
              "Used tokens over each known limit of the session (window, effective window, compaction threshold).",
              "percentunit", (12, y + 9, 12, 8),
              [target("A", f"sum({TOKENS}{{{FS}}}) / on () group_right () max by ({LIMIT}) ({LIMITS}{{{FS}}} > 0)",
                      "of {{%s}}" % LIMIT)],
              custom=timeseries_custom(fill=0), options=LEGEND, thresholds=RATIO_THRESHOLDS),
        panel(14, "timeseries", "Reported against estimated",
              "The provider-reported input against ctxscope's attributed estimate (calibrated) and the "
              "unattributed rest: a large unattributed part is a sign of an unknown system prompt or drift.",
              "short", (0, y + 17, 12, 8),
              [target("A", f"sum({REPORTED}{{{FS}}})", "reported"),
               target("B", f'sum({TOKENS}{{{FS}, {CATEGORY}!="{UNATTRIBUTED}"}})', "attributed"),
               target("C", f"sum({unattributed})", "unattributed")],
              custom=timeseries_custom(fill=0), options=LEGEND),
        panel(15, "timeseries", "Unattributed share",
              "Unattributed tokens over the provider-reported input: what ctxscope could not explain.",
              "percentunit", (12, y + 17, 12, 8),
              [target("A", f"sum({unattributed}) / (sum({REPORTED}{{{FS}}}) > 0)", "unattributed share")],
              custom=timeseries_custom(fill=10), options=LEGEND, thresholds=[("green", None), ("orange", 0.2)]),
        panel(16, "timeseries", "Waste by kind (tokens)",
              "Wasted tokens of the session by kind: duplicate, stale, bloat, tool definition overage.",
              "short", (0, y + 25, 12, 8),
              [target("A", f"sum by ({WASTE_KIND}) ({WASTE}{{{FS}}})", "{{%s}}" % WASTE_KIND)],
              custom=timeseries_custom(stacked=True, fill=60), options=LEGEND),
        panel(17, "timeseries", "Waste ratio",
              "Wasted tokens over used tokens of the session.",
              "percentunit", (12, y + 25, 6, 8),
              [target("A", f"sum({WASTE}{{{FS}}}) / (sum({TOKENS}{{{FS}}}) > 0)", "waste ratio")],
              custom=timeseries_custom(fill=10), options=LEGEND, thresholds=[("green", None), ("orange", 0.3)]),
        panel(18, "timeseries", "Compactions",
              "Compactions of the session so far, by trigger (auto or manual).",
              "none", (18, y + 25, 6, 8),
              [target("A", f"sum by ({TRIGGER}) ({COMPACTIONS}{{{FS}}})", "{{%s}}" % TRIGGER)],
              custom=timeseries_custom(fill=0, interpolation="stepAfter"), options=LEGEND),
    ]


def context_dashboard() -> dict[str, Any]:
    overview = overview_panels(1)
    return {
        "uid": "ctxscope-context",
        "title": "ctxscope: context window",
        "description": "What LLM agents' context windows are made of, and what wastes them (ctxscope, SPEC v1).",
        "tags": ["ctxscope", "llm", "opentelemetry"],
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "timezone": "browser",
        "annotations": {"list": []},
        "links": [
            {"title": "Traces of session $session in Jaeger", "type": "link", "targetBlank": True,
             "icon": "external link", "url": jaeger_search_url("${service}", "${session}")},
        ],
        "templating": {"list": variables()},
        "panels": [
            row(100, "Overview", 0, collapsed=False),
            *overview,
            row(101, "Context", 25, collapsed=True, panels=context_panels(26)),
        ],
    }


def build() -> dict[str, dict[str, Any]]:
    """Every dashboard, keyed by uid."""
    return {"ctxscope-context": context_dashboard()}


def render(dashboard: dict[str, Any]) -> str:
    return json.dumps(dashboard, indent=2, sort_keys=False) + "\n"


# ---------------------------------------------------------------------------
# Grafana-managed copies of the Prometheus alert rules
# ---------------------------------------------------------------------------

PROMETHEUS_RULES = HERE.parent / "prometheus" / "rules" / "ctxscope-alerts.yml"
ALERTING_FILE = HERE / "provisioning" / "alerting" / "ctxscope-alerts.yaml"
# The provisioned Prometheus data source (provisioning/datasources/ctxscope.yaml).
ALERTING_DATASOURCE_UID = "ctxscope-prometheus"
ALERTING_HEADER = """\
# Generated by dashboards/generate.py from prometheus/rules/ctxscope-alerts.yml:
# do not edit; change the Prometheus rules and regenerate.
#
# Grafana-managed copies of the ctxscope alert rules, so that Grafana can
# notify through its contact points. Each rule queries the Prometheus rule's
# own expression (threshold included: only crossing sessions return a series)
# and fires when a series is there. In annotations, Prometheus' $value is
# Grafana's $values.A.Value.
"""


def _grafana_rule(rule: dict[str, Any]) -> dict[str, Any]:
    # Grafana rule uids hold at most 40 characters.
    uid = "ctx-" + re.sub(r"(?<!^)(?=[A-Z])", "-", rule["alert"].removeprefix("Ctxscope")).lower()
    annotations = {k: v.replace("$value", "$values.A.Value") for k, v in rule["annotations"].items()}
    return {
        "uid": uid,
        "title": rule["alert"],
        "condition": "B",
        "data": [
            {"refId": "A", "relativeTimeRange": {"from": 600, "to": 0},
             "datasourceUid": ALERTING_DATASOURCE_UID,
             "model": {"refId": "A", "expr": rule["expr"].strip(), "instant": True, "range": False,
                       "intervalMs": 15000, "maxDataPoints": 43200}},
            {"refId": "B", "relativeTimeRange": {"from": 0, "to": 0}, "datasourceUid": "__expr__",
             "model": {"refId": "B", "type": "threshold", "expression": "A",
                       "datasource": {"type": "__expr__", "uid": "__expr__"},
                       "conditions": [{"type": "query", "evaluator": {"type": "gt", "params": [0]}}]}},
        ],
        "for": rule.get("for", "0m"),
        "labels": dict(rule.get("labels", {})),
        "annotations": annotations,
        "noDataState": "OK",  # no live session crossing the threshold: nothing to say
        "execErrState": "Error",
        "isPaused": False,
    }


def grafana_alerting() -> dict[str, Any]:
    """Grafana alerting provisioning built from the Prometheus rule groups."""
    import yaml  # a dev dependency, needed only to regenerate

    data = yaml.safe_load(PROMETHEUS_RULES.read_text(encoding="utf-8"))
    return {
        "apiVersion": 1,
        "groups": [
            {"orgId": 1, "name": group["name"], "folder": "ctxscope", "interval": "1m",
             "rules": [_grafana_rule(r) for r in group["rules"] if "alert" in r]}
            for group in data["groups"]
        ],
    }


def render_alerting(alerting: dict[str, Any]) -> str:
    import yaml

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> Any:
        # Multi-line PromQL as a block, as in the Prometheus rule file.
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return ALERTING_HEADER + yaml.dump(alerting, Dumper=Dumper, sort_keys=False, width=120,
                                       allow_unicode=True)


def main() -> int:
    for uid, dashboard in build().items():
        DASHBOARD_FILES[uid].write_text(render(dashboard), encoding="utf-8")
        print(f"wrote {DASHBOARD_FILES[uid].relative_to(HERE.parent)}")
    ALERTING_FILE.parent.mkdir(parents=True, exist_ok=True)
    ALERTING_FILE.write_text(render_alerting(grafana_alerting()), encoding="utf-8")
    print(f"wrote {ALERTING_FILE.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
