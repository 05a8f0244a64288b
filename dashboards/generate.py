"""Generate the ctxscope Grafana dashboards from the contract in ``ctxscope.schema``.

Run ``python dashboards/generate.py`` after changing this file (or the
Prometheus alert rules, of which it writes Grafana-managed copies) and commit
what it writes; ``tests/shipped/test_dashboards.py`` fails when the committed JSON
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

Resource attributes: ``service.name`` reaches Prometheus either as a
``service_name`` label on every series (the Collector's resource conversion,
an OTLP backend's resource promotion, an SDK reader given a
``resource_attribute_filter``) or only on ``target_info`` (the plain SDK
reader, Prometheus 3's OTLP receiver). Every selector is written by
:func:`series`, which takes the label where it is and joins ``target_info``
(``group_left``) where it is not, so the dashboards and the alert rules (also
written here, ``prometheus/rules/ctxscope-alerts.yml``) read the same on
every path.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, NamedTuple

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
ADDED = Metric.ADDED_TOKENS.prometheus_name
REQUEST = Metric.REQUEST_TOKENS.prometheus_name

UNATTRIBUTED = Category.UNATTRIBUTED.value

# Resource attributes on Prometheus' target_info, and the labels it shares with every
# series of its target: the scrape target's job and instance, or, through an OTLP
# receiver, the job and instance made of service.name and service.instance.id.
TARGET_INFO = "target_info"
TARGET_JOIN = "job, instance"

# A session is (service, conversation id): the key of rules and per-session panels.
BY_SESSION = f"{SERVICE}, {SESSION}"
# Label filters: the overview follows model (and service); the Context row one session.
FM = f'{MODEL}=~"$model"'
FS = f'{FM}, {SESSION}="$session"'


def series(metric: str, matchers: str = "", *, service: str | None = None, offset: str = "") -> str:
    """``metric`` selected with ``service_name`` as a label, wherever the resource put it.

    Series carrying ``service_name`` are taken as they are; series without it
    take it from their target's ``target_info`` (``group_left`` on job and
    instance). ``service`` is a regex the service must match (the dashboards'
    ``$service``); ``offset`` a PromQL offset applied to every selector.
    """
    extra = f", {matchers}" if matchers else ""
    shift = f" offset {offset}" if offset else ""
    wanted = f', {SERVICE}=~"{service}"' if service is not None else ""
    info = f'{{{SERVICE}=~"{service}"}}' if service is not None else ""
    labelled = f'{metric}{{{SERVICE}!=""{wanted}{extra}}}{shift}'
    joined = (f'{metric}{{{SERVICE}=""{extra}}}{shift}'
              f" * on ({TARGET_JOIN}) group_left ({SERVICE}) {TARGET_INFO}{info}{shift}")
    return f"({labelled} or ({joined}))"


def S(metric: str, matchers: str = FM) -> str:
    """A dashboard selector: ``metric`` of the chosen services, filtered by ``matchers``."""
    return series(metric, matchers, service="$service")

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
           table: bool = False, exemplar: bool = False) -> dict[str, Any]:
    out = {
        "refId": ref,
        "datasource": DS,
        "editorMode": "code",
        "expr": expr,
        "legendFormat": legend or "__auto",
        "instant": instant,
        "range": not instant,
        "format": "table" if table else "time_series",
    }
    if exemplar:  # Grafana asks query_exemplars for the query's series: links to the trace
        out["exemplar"] = True
    return out


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


def values_of(label: str, selector: str) -> tuple[str, str]:
    """A variable listing the values of ``label`` among ``selector``'s series.

    ``label_values()`` takes a series selector only, and the service may be on
    ``target_info`` alone, so the variable is a query result (one series per
    value) with a regex that picks the value out of each result line.
    """
    return f"query_result(group by ({label}) ({selector}))", f'/{label}="([^"]+)"/'


def variables() -> list[dict[str, Any]]:
    def query_var(name: str, label: str, query: tuple[str, str], *, all_: bool) -> dict[str, Any]:
        definition, regex = query
        var: dict[str, Any] = {
            "type": "query", "name": name, "label": label, "datasource": DS,
            # Query type 3: a query result, one value per series, picked out by `regex`.
            "query": {"qryType": 3, "query": definition, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
            "refresh": 2, "sort": 1, "regex": regex, "hide": 0,
            "includeAll": all_, "multi": all_, "current": {"text": "", "value": ""},
        }
        if all_:
            var["allValue"] = ".*"
            var["current"] = {"text": "All", "value": "$__all"}
        return var

    return [
        {"type": "datasource", "name": "datasource", "label": "Data source", "query": "prometheus",
         "regex": "", "hide": 0, "refresh": 1, "current": {"text": "", "value": ""}},
        query_var("service", "Service", values_of(SERVICE, series(TOKENS)), all_=True),
        query_var("model", "Model", values_of(MODEL, series(TOKENS, service="$service")), all_=True),
        query_var("session", "Session", values_of(SESSION, S(TOKENS)), all_=False),
        {"type": "textbox", "name": "jaeger_url", "label": "Jaeger UI",
         "query": DEFAULT_JAEGER_URL, "current": {"text": DEFAULT_JAEGER_URL, "value": DEFAULT_JAEGER_URL},
         "hide": 0, "description": "Base URL of the Jaeger UI that holds the traces (links to a session's traces)"},
    ]


# ---------------------------------------------------------------------------
# Panels
# ---------------------------------------------------------------------------

def used(filters: str, by: str = BY_SESSION) -> str:
    """Used context of each session: the sum of its calibrated categories."""
    return f"sum by ({by}) ({S(TOKENS, filters)})"


def overview_panels(y: int) -> list[dict[str, Any]]:
    live_used = f"({used(FM)} > 0)"
    # The category series of live sessions whose breakdown was recorded (some category
    # other than unattributed holds tokens).
    recorded = (f"{S(TOKENS)} and on ({BY_SESSION}) "
                f'(sum by ({BY_SESSION}) ({S(TOKENS, f"{FM}, {CATEGORY}!={chr(34)}{UNATTRIBUTED}{chr(34)}")}) > 0)')
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
        panel(6, "barchart", "Composition of all live sessions",
              "The latest composition of every live session together, as one bar: each category's share of "
              "the tokens measured in those sessions (their latest snapshots, not a sum over a time window). "
              "Sessions whose breakdown was not recorded (nothing but unattributed tokens) are left out.",
              "percentunit", (4, y, 6, 8),
              [target("A", f"sum by ({CATEGORY}) ({recorded})"
                           f" / on () group_left () (sum({recorded}) > 0)",
                      "{{%s}}" % CATEGORY, instant=True, table=True)],
              custom={"fillOpacity": 85, "lineWidth": 0, "stacking": {"mode": "normal", "group": "A"}},
              options={"orientation": "horizontal", "stacking": "normal", "showValue": "never",
                       "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                       "tooltip": {"mode": "multi", "sort": "desc"}},
              # One row of category columns: the bar chart stacks them into the one bar.
              transformations=[{"id": "groupingToMatrix", "options": {
                  "columnField": CATEGORY, "rowField": "Time", "valueField": "Value", "emptyValue": "zero"}}],
              minmax=(0, 1)),
        panel(2, "barchart", "Composition of live sessions",
              "Each live session's latest context as one stacked bar by category: "
              "the share of each category in the session's used tokens (calibrated view, unattributed included).",
              "percentunit", (10, y, 14, 8),
              [target("A", f"sum by ({SESSION}, {CATEGORY}) ({S(TOKENS)})"
                           f" / on ({SESSION}) group_left ()"
                           f" (sum by ({SESSION}) ({S(TOKENS)}) > 0)",
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
               target("limit", f"min by ({BY_SESSION}) ({S(LIMITS)} > 0)", instant=True, table=True),
               target("utilisation", f"{live_used} / on ({BY_SESSION}) min by ({BY_SESSION}) ({S(LIMITS)} > 0)",
                      instant=True, table=True),
               target("waste", f"sum by ({BY_SESSION}) ({S(WASTE)}) / on ({BY_SESSION}) {live_used}",
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
              [target("A", f"{live_used} / on ({BY_SESSION}) min by ({BY_SESSION}) ({S(LIMITS)} > 0)",
                      "{{%s}}" % SESSION)],
              custom=timeseries_custom(fill=0), options=LEGEND, thresholds=RATIO_THRESHOLDS),
        panel(5, "timeseries", "Waste ratio of live sessions",
              "Wasted tokens (duplicate, stale, bloat, tool definition overage) over used tokens, per live session.",
              "percentunit", (12, y + 16, 12, 8),
              [target("A", f"sum by ({BY_SESSION}) ({S(WASTE)}) / on ({BY_SESSION}) {live_used}",
                      "{{%s}}" % SESSION)],
              custom=timeseries_custom(fill=0), options=LEGEND),
    ]


def context_panels(y: int) -> list[dict[str, Any]]:
    limit_lines = [{"matcher": {"id": "byFrameRefID", "options": "limits"}, "properties": [
        {"id": "custom.fillOpacity", "value": 0},
        {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
        {"id": "custom.stacking", "value": {"mode": "none", "group": "A"}}]}]
    unattributed = S(TOKENS, f'{FS}, {CATEGORY}="{UNATTRIBUTED}"')
    attributed = S(TOKENS, f'{FS}, {CATEGORY}!="{UNATTRIBUTED}"')
    return [
        panel(11, "timeseries", "Context by category (tokens)",
              "The session's context over time, one series per category, stacked on one shared axis "
              "(calibrated view: the categories sum to the provider-reported input when it is known).",
              "short", (0, y, 24, 9),
              [target("A", f"sum by ({CATEGORY}) ({S(TOKENS, FS)})", "{{%s}}" % CATEGORY)],
              custom=timeseries_custom(stacked=True, fill=60), options=LEGEND),
        panel(12, "timeseries", "Used against window, effective window and compaction threshold",
              "Used tokens of the session with its limits drawn as dashed lines: the model's window, the "
              "harness's effective window and the automatic compaction threshold.",
              "short", (0, y + 9, 12, 8),
              [target("used", f"sum({S(TOKENS, FS)})", "used"),
               target("limits", f"max by ({LIMIT}) ({S(LIMITS, FS)} > 0)", "{{%s}}" % LIMIT)],
              custom=timeseries_custom(fill=20), options=LEGEND, overrides=limit_lines),
        panel(13, "timeseries", "Utilisation against each limit",
              "Used tokens over each known limit of the session (window, effective window, compaction threshold).",
              "percentunit", (12, y + 9, 12, 8),
              [target("A", f"sum({S(TOKENS, FS)}) / on () group_right () max by ({LIMIT}) ({S(LIMITS, FS)} > 0)",
                      "of {{%s}}" % LIMIT)],
              custom=timeseries_custom(fill=0), options=LEGEND, thresholds=RATIO_THRESHOLDS),
        panel(14, "timeseries", "Reported against estimated",
              "The provider-reported input against ctxscope's attributed estimate (calibrated) and the "
              "unattributed rest: a large unattributed part is a sign of an unknown system prompt or drift.",
              "short", (0, y + 17, 12, 8),
              [target("A", f"sum({S(REPORTED, FS)})", "reported"),
               target("B", f"sum({attributed})", "attributed"),
               target("C", f"sum({unattributed})", "unattributed")],
              custom=timeseries_custom(fill=0), options=LEGEND),
        panel(15, "timeseries", "Unattributed share",
              "Unattributed tokens over the provider-reported input: what ctxscope could not explain.",
              "percentunit", (12, y + 17, 12, 8),
              [target("A", f"sum({unattributed}) / (sum({S(REPORTED, FS)}) > 0)", "unattributed share")],
              custom=timeseries_custom(fill=10), options=LEGEND, thresholds=[("green", None), ("orange", 0.2)]),
        panel(16, "timeseries", "Waste by kind (tokens)",
              "Wasted tokens of the session by kind: duplicate, stale, bloat, tool definition overage.",
              "short", (0, y + 25, 12, 8),
              [target("A", f"sum by ({WASTE_KIND}) ({S(WASTE, FS)})", "{{%s}}" % WASTE_KIND)],
              custom=timeseries_custom(stacked=True, fill=60), options=LEGEND),
        panel(17, "timeseries", "Waste ratio",
              "Wasted tokens over used tokens of the session.",
              "percentunit", (12, y + 25, 6, 8),
              [target("A", f"sum({S(WASTE, FS)}) / (sum({S(TOKENS, FS)}) > 0)", "waste ratio")],
              custom=timeseries_custom(fill=10), options=LEGEND, thresholds=[("green", None), ("orange", 0.3)]),
        panel(18, "timeseries", "Compactions",
              "Compactions of the session so far, by trigger (auto or manual).",
              "none", (18, y + 25, 6, 8),
              [target("A", f"sum by ({TRIGGER}) ({S(COMPACTIONS, FS)})", "{{%s}}" % TRIGGER)],
              custom=timeseries_custom(fill=0, interpolation="stepAfter"), options=LEGEND),
    ]


def additions_panels(y: int) -> list[dict[str, Any]]:
    """The way from a number to the call: additions with exemplars, and fleet mode's composition."""
    # Cumulative buckets since the start, no rate(): the bucket holding the largest addition.
    largest = f"histogram_quantile(1, sum by (le, {CATEGORY}) ({S(ADDED + '_bucket')}))"
    fleet_mean = (f"sum by ({CATEGORY}) ({S(REQUEST + '_sum')})"
                  f" / on ({CATEGORY}) (sum by ({CATEGORY}) ({S(REQUEST + '_count')}) > 0)")
    return [
        panel(21, "timeseries", "Largest additions, with the calls that made them",
              "Per category, the upper bound of the histogram bucket that holds the largest addition "
              "(tokens a call added to the category over the session's previous call) since the start. "
              "The dots are exemplars: each is one call's addition, carrying its trace_id; hover a dot and "
              "open the trace in the trace data source (Jaeger or Tempo, configured on the Prometheus data "
              "source as exemplarTraceIdDestinations). Needs Prometheus with --enable-feature=exemplar-storage "
              "and an OTLP or OpenMetrics path that keeps exemplars (docs/dashboards.md).",
              "short", (0, y, 24, 9),
              [target("A", largest, "{{%s}}" % CATEGORY, exemplar=True)],
              custom=timeseries_custom(fill=0, interpolation="stepAfter"), options=LEGEND),
        panel(22, "barchart", "What fills a request's context, per category (fleet mode)",
              "Fleet mode (CTXSCOPE_METRICS_SESSION_KEY=off) records each request's calibrated context per "
              "category as a histogram without the session key: the mean tokens per request of each category "
              "since the start, for the chosen services and models. Empty when sessions are kept.",
              "short", (0, y + 9, 24, 8),
              [target("A", fleet_mean, "{{%s}}" % CATEGORY, instant=True, table=True)],
              custom={"fillOpacity": 85, "lineWidth": 0, "stacking": {"mode": "normal", "group": "A"}},
              options={"orientation": "horizontal", "stacking": "normal", "showValue": "auto",
                       "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                       "tooltip": {"mode": "multi", "sort": "desc"}},
              transformations=[{"id": "groupingToMatrix", "options": {
                  "columnField": CATEGORY, "rowField": "Time", "valueField": "Value", "emptyValue": "zero"}}]),
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
             "icon": "external link", "url": jaeger_search_url("${service}", "${session}"),
             "asDropdown": False, "includeVars": False, "keepTime": True, "tags": [], "tooltip": ""},
        ],
        "templating": {"list": variables()},
        "panels": [
            row(100, "Overview", 0, collapsed=False),
            *overview,
            row(101, "Context", 25, collapsed=True, panels=context_panels(26)),
            row(102, "Additions and fleet", 26, collapsed=True, panels=additions_panels(27)),
        ],
    }


def build() -> dict[str, dict[str, Any]]:
    """Every dashboard, keyed by uid."""
    return {"ctxscope-context": context_dashboard()}


def render(dashboard: dict[str, Any]) -> str:
    return json.dumps(dashboard, indent=2, sort_keys=False) + "\n"


# ---------------------------------------------------------------------------
# Alert rules: Prometheus rule groups, and Grafana-managed copies of them
# ---------------------------------------------------------------------------

PROMETHEUS_RULES = HERE.parent / "prometheus" / "rules" / "ctxscope-alerts.yml"
ALERTING_FILE = HERE / "provisioning" / "alerting" / "ctxscope-alerts.yaml"
RUNBOOK_PAGE = "dashboards.md"
# Where docs/ is served, for the rules' absolute runbook links: the stack's `docs`
# service (compose.yaml). Deployments regenerate with their own:
#   python dashboards/generate.py --docs-url https://wiki.example.com/ctxscope
DEFAULT_DOCS_URL = "http://localhost:8000"
# Grafana reads these from its environment when it loads the provisioning file
# (compose.yaml sets them): the Prometheus data source the copies query, and docs/.
GRAFANA_DATASOURCE_ENV = "CTXSCOPE_PROMETHEUS_DATASOURCE_UID"
GRAFANA_DOCS_URL_ENV = "CTXSCOPE_DOCS_URL"


# A NamedTuple, not a dataclass: the tests load this script without registering it as a module.
class Alert(NamedTuple):
    name: str
    why: str  # the comment above the rule: its threshold and what crossing it means
    expr: str  # the threshold is the number after the last comparison
    for_: str
    severity: str
    summary: str
    description: str

    @property
    def anchor(self) -> str:
        """The runbook's anchor in docs/dashboards.md (GitHub's slug of the heading)."""
        return self.name.lower()


def _near_limit(limit: str, threshold: float) -> str:
    return (f"sum by ({BY_SESSION}) ({series(TOKENS)})\n"
            f"  / on ({BY_SESSION})\n"
            f'max by ({BY_SESSION}) ({series(LIMITS, f"{LIMIT}={chr(34)}{limit}{chr(34)}")} > 0)\n'
            f"> {threshold}")


def _share(part: str, whole: str, threshold: float) -> str:
    return (f"sum by ({BY_SESSION}) ({part})\n"
            f"  / on ({BY_SESSION})\n"
            f"sum by ({BY_SESSION}) ({whole})\n"
            f"> {threshold}")


def _recorded_share(part: str, whole: str, threshold: float) -> str:
    """:func:`_share` over the sessions whose breakdown was recorded (a category besides unattributed)."""
    recorded = series(TOKENS, f'{CATEGORY}!="{UNATTRIBUTED}"')
    return (f"(\n  sum by ({BY_SESSION}) ({part})\n"
            f"    / on ({BY_SESSION})\n"
            f"  sum by ({BY_SESSION}) ({whole})\n"
            f"  and on ({BY_SESSION})\n"
            f"  sum by ({BY_SESSION}) ({recorded}) > 0\n"
            f")\n"
            f"> {threshold}")


SESSION_OF = "{{ $labels.%s }}" % SESSION
SERVICE_OF = "{{ $labels.%s }}" % SERVICE
VALUE_PCT = "{{ $value | humanizePercentage }}"

ALERTS: tuple[Alert, ...] = (
    Alert("CtxscopeContextNearCompactionThreshold",
          "threshold 0.9: used context at 90% of the automatic compaction threshold",
          _near_limit(LimitKind.COMPACT_THRESHOLD.value, 0.9), "1m", "warning",
          f"Context of session {SESSION_OF} is close to its compaction threshold",
          f"Session {SESSION_OF} of {SERVICE_OF} uses {VALUE_PCT} of its automatic compaction threshold: "
          "a compaction (and the loss of detail it brings) is near."),
    Alert("CtxscopeContextNearWindow",
          "threshold 0.95: used context at 95% of the model's hard context window",
          _near_limit(LimitKind.WINDOW.value, 0.95), "1m", "critical",
          f"Context of session {SESSION_OF} is close to the model's window",
          f"Session {SESSION_OF} of {SERVICE_OF} uses {VALUE_PCT} of the model's context window: "
          "the next requests may be rejected or truncated."),
    Alert("CtxscopeWasteRatioHigh",
          "threshold 0.3: 30% of the used context is duplicate, stale, bloat or tool definition overage",
          _share(series(WASTE), series(TOKENS), 0.3), "10m", "warning",
          f"Session {SESSION_OF} wastes much of its context",
          f"{VALUE_PCT} of the context of session {SESSION_OF} of {SERVICE_OF} is waste "
          "(duplicate, stale, bloat, tool definition overage)."),
    Alert("CtxscopeUnattributedShareHigh",
          "threshold 0.2: 20% of the provider-reported input is not explained by ctxscope's estimate",
          # Only sessions whose breakdown was recorded (some category other than unattributed):
          # a call without content (coverage unrecorded) is all unattributed and explains nothing.
          _recorded_share(series(TOKENS, f'{CATEGORY}="{UNATTRIBUTED}"'), series(REPORTED), 0.2),
          "10m", "warning",
          f"Much of session {SESSION_OF}'s input is unattributed",
          f"{VALUE_PCT} of the provider-reported input of session {SESSION_OF} of {SERVICE_OF} is not "
          "explained by the items ctxscope saw: an unknown system prompt, a hidden tool catalog or counting drift."),
    Alert("CtxscopeCompactionsTooFrequent",
          "threshold 3: three or more compactions of one session within 30 minutes.\n"
          "Counted as the counter's rise over 30m; a series born inside the\n"
          "window counts from 0 (`or ... * 0`), so its first compactions count too.",
          f"sum by ({BY_SESSION}) (\n"
          f"  {series(COMPACTIONS)}\n"
          f"    - ({series(COMPACTIONS, offset='30m')} or {series(COMPACTIONS)} * 0)\n"
          f")\n"
          f">= 3", "0m", "warning",
          f"Session {SESSION_OF} compacts too often",
          f"Session {SESSION_OF} of {SERVICE_OF} compacted {{{{ $value }}}} times in 30 minutes: "
          "its working set does not fit the window."),
)

RULES_HEADER = f"""\
# Generated by dashboards/generate.py: do not edit; change ALERTS there and regenerate.
#
# ctxscope alert rules (Prometheus rule groups), also evaluated by vmalert.
#
# Series and labels follow SPEC section 6. service.name is read as the
# {SERVICE} label where the path puts it on every series (the Collector's
# resource conversion, OTLP resource promotion) and from {TARGET_INFO} (group_left
# on {TARGET_JOIN}) where it does not (the SDK's Prometheus reader, Prometheus'
# OTLP receiver). Ratios are computed from {TOKENS} and {LIMITS}: the utilisation
# series is named differently on different paths.
#
# A session is ({BY_SESSION}). An ended session reports 0 once, which makes
# every ratio below 0/0 (NaN) or 0, so ended sessions never alert. Limits are
# read with `> 0`: after a model change the old model's limit series report 0,
# which must not read as an infinite ratio.
#
# Thresholds: the number after the last comparison of each `expr`, listed
# with their reasons in docs/dashboards.md ("Alert thresholds"). The promtool
# tests in prometheus/tests/ pin them. runbook_url is absolute: docs/ served at
# the --docs-url the file was generated with.
"""


def runbook_url(alert: Alert, docs_url: str) -> str:
    return f"{docs_url.rstrip('/')}/{RUNBOOK_PAGE}#{alert.anchor}"


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def render_rules(docs_url: str = DEFAULT_DOCS_URL, *, group: str = "ctxscope-context") -> str:
    """The Prometheus rule file, commented, with absolute runbook links under ``docs_url``."""
    out = [RULES_HEADER, "groups:", f"  - name: {group}", "    rules:"]
    for index, alert in enumerate(ALERTS):
        if index:
            out.append("")
        out.append(f"      - alert: {alert.name}")
        out.extend(f"        # {line}" for line in alert.why.splitlines())
        out.append("        expr: |")
        out.extend(f"          {line}" for line in alert.expr.splitlines())
        out += [f"        for: {alert.for_}",
                "        labels:",
                f"          severity: {alert.severity}",
                "        annotations:",
                f"          summary: {_quoted(alert.summary)}",
                f"          description: {_quoted(alert.description)}",
                f"          runbook_url: {_quoted(runbook_url(alert, docs_url))}"]
    return "\n".join(out) + "\n"


ALERTING_HEADER = """\
# Generated by dashboards/generate.py (ALERTS, the source of
# prometheus/rules/ctxscope-alerts.yml too): do not edit; regenerate.
#
# Grafana-managed copies of the ctxscope alert rules, so that Grafana can
# notify through its contact points. Each rule queries the Prometheus rule's
# own expression (threshold included: only crossing sessions return a series)
# and fires when a series is there. In annotations, Prometheus' $$value is
# Grafana's $$values.A.Value.
#
# Grafana fills ${%s} (the uid of the Prometheus data source to query) and
# ${%s} (where docs/ is served, for runbook links) from its environment when
# it loads this file; every literal dollar of a template is written $$ so that
# Grafana's environment expansion leaves it alone.
""" % (GRAFANA_DATASOURCE_ENV, GRAFANA_DOCS_URL_ENV)


def _grafana_escape(text: str) -> str:
    # Grafana expands $NAME and ${NAME} in provisioning files; $$ is a literal $.
    return text.replace("$", "$$")


def _grafana_rule(alert: Alert) -> dict[str, Any]:
    # Grafana rule uids hold at most 40 characters.
    uid = "ctx-" + re.sub(r"(?<!^)(?=[A-Z])", "-", alert.name.removeprefix("Ctxscope")).lower()
    notes = {"summary": alert.summary, "description": alert.description}
    annotations = {k: _grafana_escape(v.replace("$value", "$values.A.Value")) for k, v in notes.items()}
    annotations["runbook_url"] = runbook_url(alert, "${%s}" % GRAFANA_DOCS_URL_ENV)
    return {
        "uid": uid,
        "title": alert.name,
        "condition": "B",
        "data": [
            {"refId": "A", "relativeTimeRange": {"from": 600, "to": 0},
             "datasourceUid": "${%s}" % GRAFANA_DATASOURCE_ENV,
             "model": {"refId": "A", "expr": alert.expr, "instant": True, "range": False,
                       "intervalMs": 15000, "maxDataPoints": 43200}},
            {"refId": "B", "relativeTimeRange": {"from": 0, "to": 0}, "datasourceUid": "__expr__",
             "model": {"refId": "B", "type": "threshold", "expression": "A",
                       "datasource": {"type": "__expr__", "uid": "__expr__"},
                       "conditions": [{"type": "query", "evaluator": {"type": "gt", "params": [0]}}]}},
        ],
        "for": alert.for_,
        "labels": {"severity": alert.severity},
        "annotations": annotations,
        "noDataState": "OK",  # no live session crossing the threshold: nothing to say
        "execErrState": "Error",
        "isPaused": False,
    }


def grafana_alerting() -> dict[str, Any]:
    """Grafana alerting provisioning: one copy of each rule of :data:`ALERTS`."""
    return {
        "apiVersion": 1,
        "groups": [{"orgId": 1, "name": "ctxscope-context", "folder": "ctxscope", "interval": "1m",
                    "rules": [_grafana_rule(a) for a in ALERTS]}],
    }


def render_alerting(alerting: dict[str, Any]) -> str:
    import yaml  # a dev dependency, needed only to regenerate

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> Any:
        # Multi-line PromQL as a block, as in the Prometheus rule file.
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return ALERTING_HEADER + yaml.dump(alerting, Dumper=Dumper, sort_keys=False, width=120,
                                       allow_unicode=True)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs-url", default=DEFAULT_DOCS_URL,
                        help="where docs/ is served, for the rules' runbook links (default: %(default)s)")
    args = parser.parse_args(argv)
    for uid, dashboard in build().items():
        DASHBOARD_FILES[uid].write_text(render(dashboard), encoding="utf-8")
        print(f"wrote {DASHBOARD_FILES[uid].relative_to(HERE.parent)}")
    PROMETHEUS_RULES.write_text(render_rules(args.docs_url), encoding="utf-8")
    print(f"wrote {PROMETHEUS_RULES.relative_to(HERE.parent)}")
    ALERTING_FILE.parent.mkdir(parents=True, exist_ok=True)
    ALERTING_FILE.write_text(render_alerting(grafana_alerting()), encoding="utf-8")
    print(f"wrote {ALERTING_FILE.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
