"""Helpers for the tests of dashboards and alert rules against a real Prometheus.

- :func:`metric_names` finds the series names a PromQL expression selects
  (for the structural checks against ``ctxscope.schema``);
- :class:`PrometheusServer` runs the Debian ``prometheus`` binary on a free
  port in a temporary directory and queries its HTTP API;
- :class:`AgentScenario` is a scripted agent: annotated spans through an SDK
  TracerProvider with ctxscope's ContextSpanProcessor, metrics served by the
  SDK's PrometheusMetricReader on a free port (``service.name`` as the
  ``service_name`` label). Its sessions and their final state are worked out
  by hand in :data:`SESSIONS`.

``dashboards/render_picture.py`` uses the same scenario for the README picture.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from ctxscope.schema import (
    Annotation,
    Attr,
    Category,
    Change,
    ChangeType,
    CompactionTrigger,
    Coverage,
    GenAI,
    Stage,
    WasteKind,
)

ROOT = Path(__file__).resolve().parent.parent
DASHBOARDS = ROOT / "dashboards"
PROMETHEUS_DIR = ROOT / "prometheus"
RULES_DIR = PROMETHEUS_DIR / "rules"

# ---------------------------------------------------------------------------
# PromQL: which series names an expression selects
# ---------------------------------------------------------------------------

_PROMQL_WORDS = {
    # aggregations, keywords and the functions our dashboards and rules may use
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile",
    "count_values", "group", "by", "without", "on", "ignoring", "group_left", "group_right",
    "and", "or", "unless", "bool", "offset", "rate", "irate", "increase", "delta", "idelta",
    "changes", "resets", "abs", "ceil", "floor", "round", "clamp", "clamp_min", "clamp_max",
    "scalar", "vector", "time", "timestamp", "absent", "absent_over_time", "label_replace",
    "label_join", "sort", "sort_desc", "histogram_quantile", "last_over_time", "max_over_time",
    "min_over_time", "avg_over_time", "sum_over_time", "count_over_time", "label_values",
    "inf", "nan", "query_result",
}

# The join that brings service.name from target_info (dashboards/generate.py: series()):
# the one place a query may name target_info, job and instance.
TARGET_INFO_JOIN = re.compile(r"\* on \(job, instance\) group_left \(service_name\) target_info(\{[^}]*\})?")


def without_target_info_join(expr: str) -> str:
    """``expr`` with every target_info join removed (for checks on what else it names)."""
    return TARGET_INFO_JOIN.sub("", expr)


def selects_service_on_both_paths(expr: str, metric: str) -> bool:
    """Every selector of ``metric`` comes in pairs: with service_name, and without it joined to target_info."""
    labelled = len(re.findall(re.escape(metric) + r'\{service_name!=""', expr))
    joined = len(re.findall(re.escape(metric) + r'\{service_name=""[^}]*\}( offset \w+)? \* on \(job, instance\) '
                            r"group_left \(service_name\) target_info", expr))
    return labelled == joined


def metric_names(expr: str) -> set[str]:
    """Series names selected by a PromQL expression (Grafana variables allowed)."""
    # Grafana's label_values(selector, label): only the selector names series.
    text = re.sub(r"label_values\((?:(.*),)?\s*\w+\s*\)", r"\1", expr)
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', text)          # string literals
    text = re.sub(r"\{[^}]*\}", "", text)                     # label matchers
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r"\1", text)
    text = re.sub(r"\[[^\]]*\]", "", text)                    # range selectors
    text = re.sub(r"\boffset\s+\S+", "", text)
    text = re.sub(r"\$\{?\w+\}?", "", text)                   # Grafana variables
    names = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", text))
    return {n for n in names if n.lower() not in _PROMQL_WORDS and not re.fullmatch(r"\d+[smhdwy]", n)}


def label_names(expr: str) -> set[str]:
    """Label names an expression filters or groups on."""
    labels: set[str] = set()
    for block in re.findall(r"\{([^}]*)\}", re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)):
        labels.update(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", block))
    for block in re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", expr):
        labels.update(x.strip() for x in block.split(",") if x.strip())
    return labels


# ---------------------------------------------------------------------------
# A real Prometheus
# ---------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 0.25) -> Any:
    """Poll until ``predicate()`` is truthy; return it, or raise TimeoutError."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = predicate()
        except (OSError, ValueError) as exc:  # not up yet
            last = exc
        else:
            if last:
                return last
        time.sleep(interval)
    raise TimeoutError(f"gave up after {timeout}s; last: {last!r}")


def rules_for_test(target_dir: Path, *, for_duration: str = "0s", docs_url: str | None = None) -> list[Path]:
    """Copies of the shipped rule files with every ``for:`` set to ``for_duration``.

    Expressions and thresholds stay as shipped; only the pending time shrinks
    so that a test sees an alert fire within seconds. With ``docs_url`` the
    rules are generated afresh with that runbook base (generate.py --docs-url).
    """
    out = []
    for path in sorted(RULES_DIR.glob("*.yml")):
        text = path.read_text(encoding="utf-8")
        if docs_url is not None:
            text = _generator().render_rules(docs_url)
        data = yaml.safe_load(text)
        for group in data["groups"]:
            group["interval"] = "1s"
            for rule in group["rules"]:
                if "alert" in rule:
                    rule["for"] = for_duration
        copy = target_dir / path.name
        copy.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        out.append(copy)
    return out


def _generator() -> Any:
    """dashboards/generate.py as a module (it is a script, not part of the package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("ctxscope_dashboards", DASHBOARDS / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class PromAPI:
    """Prometheus' HTTP query API at ``self.url`` (Prometheus, VictoriaMetrics, vmalert)."""

    url: str

    def api(self, path: str, **params: Any) -> Any:
        query = urllib.parse.urlencode([(k, v) for k, vs in params.items()
                                        for v in (vs if isinstance(vs, list) else [vs])])
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=5) as resp:
                body = json.load(resp)
        except urllib.error.HTTPError as exc:  # a bad query: say which, with the backend's reason
            raise ValueError(f"{path} {params}: {exc.read().decode(errors='replace')}") from None
        if body.get("status") != "success":
            raise ValueError(f"{path} {params}: {body}")
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> list[dict[str, Any]]:
        """``/api/v1/query``: the instant vector (or raw samples of a range vector)."""
        params: dict[str, Any] = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self.api("query", **params)["result"]

    def label_values(self, label: str, match: str) -> list[str]:
        return self.api(f"label/{label}/values", **{"match[]": match})

    def alerts(self) -> list[dict[str, Any]]:
        return self.api("alerts")["alerts"]


class PrometheusServer(PromAPI):
    """The ``prometheus`` binary on a free port, scraping ``targets`` every second.

    ``binary`` defaults to Debian's on PATH; ``alertmanager`` is an Alertmanager
    URL to send alerts to; ``honor_labels`` keeps the job and instance a
    Collector's exporter sets; ``args`` are extra command-line flags.
    """

    def __init__(self, workdir: Path, targets: Iterable[str], rule_files: Iterable[Path] = (),
                 *, job: str = "ctxscope-e2e", binary: str | None = None, alertmanager: str | None = None,
                 honor_labels: bool = False, args: Iterable[str] = (), config: dict[str, Any] | None = None) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._binary = binary
        self.args = list(args)
        scrape: dict[str, Any] = {"job_name": job, "static_configs": [{"targets": list(targets)}]}
        if honor_labels:
            scrape["honor_labels"] = True
        settings: dict[str, Any] = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"},
            "rule_files": [str(p) for p in rule_files],
            "scrape_configs": [scrape] if targets else [],
        }
        if alertmanager:
            host = urllib.parse.urlsplit(alertmanager).netloc
            settings["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [host]}]}]}
        settings.update(config or {})
        self.config_file = workdir / "prometheus.yml"
        self.config_file.write_text(yaml.safe_dump(settings), encoding="utf-8")
        self.process: subprocess.Popen[bytes] | None = None
        self.log = workdir / "prometheus.log"

    @staticmethod
    def binary() -> str | None:
        return shutil.which("prometheus")

    def start(self, timeout: float = 20.0) -> "PrometheusServer":
        binary = self._binary or self.binary()
        if binary is None:
            raise RuntimeError("prometheus is not on PATH")
        data = self.workdir / "data"
        data.mkdir(exist_ok=True)
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [binary, f"--config.file={self.config_file}", f"--storage.tsdb.path={data}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn", *self.args],
                stdout=log, stderr=subprocess.STDOUT)
        wait_for(self._ready, timeout)
        return self

    def _ready(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"prometheus exited: {self.log.read_text(errors='replace')[-2000:]}")
        with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as resp:
            return resp.status == 200

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def vector(result: list[dict[str, Any]], *, drop: Iterable[str] = ()) -> dict[tuple[tuple[str, str], ...], float]:
    """An instant vector as ``{sorted label items: value}`` (``__name__`` and ``drop`` removed)."""
    skip = {"__name__", *drop}
    return {tuple(sorted((k, v) for k, v in r["metric"].items() if k not in skip)): float(r["value"][1])
            for r in result}


# ---------------------------------------------------------------------------
# The scripted agent
# ---------------------------------------------------------------------------

SERVICE = "ctxscope-e2e-agent"
BASIS = "chars/4"


@dataclass(frozen=True)
class Turn:
    """One annotated span of a session (raw estimates, as the instrumentation writes them)."""

    categories: dict[Category, int]
    reported: int | None = None
    stage: Stage = Stage.REQUEST_INPUT
    waste: dict[WasteKind, int] = field(default_factory=dict)
    trigger: CompactionTrigger | None = None


@dataclass(frozen=True)
class ScriptedSession:
    session_id: str
    model: str
    provider: str
    limits: dict[str, int]  # window_tokens / effective_window_tokens / compact_threshold_tokens
    turns: tuple[Turn, ...]  # the last one is the final state the tests work out by hand


C, W = Category, WasteKind

# Worked out by hand in tests/e2e/test_prometheus_e2e.py; the comments give the
# final state's calibrated view (SPEC section 5).
SESSIONS: tuple[ScriptedSession, ...] = (
    # Final: estimates 9000 < reported 9400 -> unattributed 400, factor 1. Used 9400 of a
    # 10000 compaction threshold (94%): crosses the 90% alert only on its last turn
    # (turn 2: 6600 / 10000 = 66%). Waste 1000 / 9400.
    ScriptedSession("sess-near", "gpt-4o", "openai",
                    {"window_tokens": 128000, "effective_window_tokens": 120000,
                     "compact_threshold_tokens": 10000},
                    (Turn({C.SYSTEM: 1200, C.TOOLS: 2400, C.PROMPTS: 300}, 4100),
                     Turn({C.SYSTEM: 1200, C.TOOLS: 2400, C.PROMPTS: 450, C.ASSISTANT: 900,
                           C.RESULTS: 1500}, 6600, waste={W.DUPLICATE: 300}),
                     Turn({C.SYSTEM: 1200, C.TOOLS: 2400, C.PROMPTS: 600, C.ASSISTANT: 1800,
                           C.RESULTS: 3000}, 9400, waste={W.DUPLICATE: 600, W.BLOAT: 400}))),
    # Final: estimates 8000 > reported 7600 -> scaled by 0.95 exactly (1900, 950, 4750),
    # unattributed 0. Three compactions (2 auto, 1 manual); the summaries of the
    # post-compaction snapshots read 0 in the final one. Waste 3200 / 7600 = 42.1%.
    ScriptedSession("sess-waste", "claude-sonnet-4-5", "anthropic",
                    {"window_tokens": 200000, "compact_threshold_tokens": 160000},
                    (Turn({C.SYSTEM: 2000, C.TOOLS: 1000, C.RESULTS: 3000}, 6000),
                     Turn({C.SYSTEM: 2000, C.TOOLS: 1000, C.SUMMARIES: 500}, 3500,
                          stage=Stage.POST_COMPACTION, trigger=CompactionTrigger.AUTO),
                     Turn({C.SYSTEM: 2000, C.TOOLS: 1000, C.SUMMARIES: 400}, 3400,
                          stage=Stage.POST_COMPACTION, trigger=CompactionTrigger.AUTO),
                     Turn({C.SYSTEM: 2000, C.TOOLS: 1000, C.SUMMARIES: 300}, 3300,
                          stage=Stage.POST_COMPACTION, trigger=CompactionTrigger.MANUAL),
                     Turn({C.SYSTEM: 2000, C.TOOLS: 1000, C.RESULTS: 5000}, 7600,
                          waste={W.DUPLICATE: 2000, W.STALE: 1000, W.TOOL_DEFINITION_OVERAGE: 200}))),
    # Final: estimates 2000 < reported 3000 -> unattributed 1000 (33.3% of the input).
    ScriptedSession("sess-mystery", "gpt-4o", "openai", {"window_tokens": 128000},
                    (Turn({C.SYSTEM: 500, C.PROMPTS: 700}, 1900),
                     Turn({C.SYSTEM: 500, C.PROMPTS: 1500}, 3000))),
)


class AgentScenario:
    """Annotated spans -> ContextSpanProcessor -> PrometheusMetricReader on a free port."""

    def __init__(self, service: str = SERVICE, *, service_label: bool = True, session_key: bool = True) -> None:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from prometheus_client import CollectorRegistry, start_http_server

        from ctxscope.telemetry.processor import ContextSpanProcessor

        resource = Resource.create({"service.name": service})
        self.registry = CollectorRegistry()
        # With service_label, service.name becomes the `service_name` label, as the
        # Collector's resource conversion makes it; without, it is on target_info
        # only, as with OTEL_METRICS_EXPORTER=prometheus and no configuration.
        self.reader = PrometheusMetricReader(
            resource_attribute_filter=(lambda key: key == "service.name") if service_label else None,
            registry=self.registry)
        self.meter_provider = MeterProvider(resource=resource, metric_readers=[self.reader])
        self.processor = ContextSpanProcessor(self.meter_provider, session_key=session_key)
        self.tracer_provider = TracerProvider(resource=resource)
        self.tracer_provider.add_span_processor(self.processor)
        self.tracer = self.tracer_provider.get_tracer("ctxscope-e2e")
        self.port = free_port()
        self.server, self.thread = start_http_server(self.port, addr="127.0.0.1", registry=self.registry)
        self.target = f"127.0.0.1:{self.port}"

    def play(self, session: ScriptedSession, turn: Turn) -> None:
        """One model call (or compaction) of ``session``: a span carrying the annotation."""
        play_turn(self.tracer, session, turn)

    def play_all(self, *, upto: int | None = None, pause: float = 0.0) -> None:
        """Every session's turns (all but the last ``-upto`` when ``upto`` is negative)."""
        play_all(self.tracer, upto=upto, pause=pause)

    def play_turn(self, index: int) -> None:
        """Turn ``index`` of every session that has one."""
        for session in SESSIONS:
            if index < len(session.turns):
                self.play(session, session.turns[index])

    def play_last(self) -> None:
        """Each session's last turn: the one that crosses the alert thresholds."""
        for session in SESSIONS:
            self.play(session, session.turns[-1])

    def end_recording(self) -> None:
        """The recording ends: every session's series report 0 once, then leave."""
        self.processor.stop()

    def close(self) -> None:
        try:
            self.processor.shutdown()
            self.tracer_provider.shutdown()
            self.meter_provider.shutdown()
        finally:
            self.server.shutdown()
            self.server.server_close()


def turn_changes(session: ScriptedSession, turn: Turn) -> list[Change]:
    """The ``llm.context.change`` events of a turn, worked out from the categories.

    A baseline (the first turn, a post-compaction snapshot) lists each category
    as a baseline change; a later turn lists each category that grew as an
    addition of the growth, largest first. Metrics do not read changes; the
    trace test finds these in Jaeger.
    """
    index = session.turns.index(turn)
    before = {} if index == 0 or turn.stage is Stage.POST_COMPACTION else session.turns[index - 1].categories
    kind = ChangeType.BASELINE if not before else ChangeType.ADDITION
    grown = [(c, n, n - before.get(c, 0)) for c, n in turn.categories.items() if n > before.get(c, 0)]
    return [Change(id=f"{session.session_id}/{index}/{c.value}", category=c, estimated_tokens=n,
                   delta_tokens=delta, change_type=kind)
            for c, n, delta in sorted(grown, key=lambda g: -g[2])]


def play_turn(tracer: Any, session: ScriptedSession, turn: Turn) -> None:
    """One model call (or compaction) of ``session``: a span carrying the annotation."""
    annotation = Annotation(changes=turn_changes(session, turn),
        stage=turn.stage, basis=BASIS, coverage=Coverage.COMPLETE,
        baseline=turn is session.turns[0] or turn.stage is Stage.POST_COMPACTION,
        categories=dict(turn.categories), estimated_tokens=sum(turn.categories.values()),
        reported_tokens=turn.reported, model=session.model, waste=dict(turn.waste),
        compaction_trigger=turn.trigger, **session.limits)
    attributes = {
        **annotation.to_attributes(),
        # As ctxscope's own spans for an application-given id (SPEC 2): its key and the GenAI one.
        Attr.SESSION_ID: session.session_id,
        GenAI.CONVERSATION_ID: session.session_id,
        GenAI.REQUEST_MODEL: session.model,
        GenAI.PROVIDER_NAME: session.provider,
    }
    name = "compaction" if turn.stage is Stage.POST_COMPACTION else f"chat {session.model}"
    with tracer.start_as_current_span(name, attributes=attributes) as span:
        for event, attrs in annotation.change_events():
            span.add_event(event, attrs)


def play_all(tracer: Any, *, upto: int | None = None, pause: float = 0.0) -> None:
    """Every session's turns, interleaved (all but the last ``-upto`` when ``upto`` is negative)."""
    longest = max(len(s.turns) for s in SESSIONS)
    for index in range(longest):
        for session in SESSIONS:
            turns = session.turns if upto is None else session.turns[:upto]
            if index < len(turns):
                play_turn(tracer, session, turns[index])
        if pause:
            time.sleep(pause)

