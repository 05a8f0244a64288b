"""The Prometheus alert rules: promtool checks, coverage of the tests, names, runbooks, thresholds."""

from __future__ import annotations

from _paths import ROOT

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from ctxscope.schema import Metric
from prometheus_helpers import label_names, metric_names, selects_service_on_both_paths, without_target_info_join

RULES = ROOT / "prometheus" / "rules" / "ctxscope-alerts.yml"
RULE_TESTS = ROOT / "prometheus" / "tests" / "ctxscope-alerts.test.yml"
DOCS = ROOT / "docs" / "dashboards.md"
SEVERITIES = {"info", "warning", "critical"}


def _generator() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("ctxscope_dashboards", ROOT / "dashboards" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _generator()

requires_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool is not on PATH (apt-get install prometheus; .ci/run installs it)")


def _alerts() -> list[dict[str, Any]]:
    data = yaml.safe_load(RULES.read_text(encoding="utf-8"))
    return [rule for group in data["groups"] for rule in group["rules"] if "alert" in rule]


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60)


def _threshold(expr: str) -> float:
    """The number after the last comparison of an expression."""
    match = re.search(r"(?:>=|<=|>|<|==)\s*([0-9.]+)\s*$", expr.strip())
    assert match, expr
    return float(match.group(1))


def _slug(heading: str) -> str:
    """GitHub's anchor for a Markdown heading."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")


@requires_promtool
def test_promtool_check_rules_passes():
    """promtool accepts the rule file."""
    result = _promtool("check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in result.stdout


@requires_promtool
def test_promtool_test_rules_passes():
    """The promtool unit tests of every alert pass."""
    result = _promtool("test", "rules", str(RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@requires_promtool
def test_promtool_tests_fail_when_a_threshold_moves(tmp_path: Path):
    """Raising the compaction alert's threshold from 0.9 to 0.95 makes the unit tests fail."""
    rules_dir = tmp_path / "rules"
    tests_dir = tmp_path / "tests"
    rules_dir.mkdir()
    tests_dir.mkdir()
    text = RULES.read_text(encoding="utf-8")
    assert text.count("          > 0.9\n") == 1
    (rules_dir / RULES.name).write_text(text.replace("          > 0.9\n", "          > 0.95\n"))
    shutil.copy(RULE_TESTS, tests_dir / RULE_TESTS.name)
    result = _promtool("test", "rules", str(tests_dir / RULE_TESTS.name))
    assert result.returncode != 0
    assert "CtxscopeContextNearCompactionThreshold" in result.stdout + result.stderr


def test_every_alert_is_tested_firing_and_not_firing():
    """Each alert has a promtool case where it fires and one where it does not."""
    cases = yaml.safe_load(RULE_TESTS.read_text(encoding="utf-8"))
    assert cases["rule_files"] == ["../rules/" + RULES.name]
    fires: set[str] = set()
    silent: set[str] = set()
    for test in cases["tests"]:
        for case in test.get("alert_rule_test", []):
            (fires if case["exp_alerts"] else silent).add(case["alertname"])
    names = {a["alert"] for a in _alerts()}
    assert names == {"CtxscopeContextNearCompactionThreshold", "CtxscopeContextNearWindow",
                     "CtxscopeWasteRatioHigh", "CtxscopeUnattributedShareHigh",
                     "CtxscopeCompactionsTooFrequent"}
    assert fires == names
    assert silent == names


def test_alerts_have_severity_summary_description_and_runbook():
    """Every alert carries a severity and a summary, a description and a runbook section in the docs."""
    anchors = {_slug(line.lstrip("#")) for line in DOCS.read_text(encoding="utf-8").splitlines()
               if line.startswith("#")}
    for alert in _alerts():
        assert alert["labels"]["severity"] in SEVERITIES, alert["alert"]
        notes = alert["annotations"]
        assert notes["summary"].strip() and notes["description"].strip()
        path, _, anchor = notes["runbook_url"].partition("#")
        # Absolute: docs/ served at the base the file was generated with (generate.py --docs-url).
        assert path == GEN.DEFAULT_DOCS_URL + "/dashboards.md" and anchor == alert["alert"].lower()
        assert anchor in anchors, f"no runbook section for {alert['alert']}"


def test_rules_use_schema_series_and_no_job():
    """Rule expressions name only series ctxscope emits (never utilisation) and select by service_name, not job."""
    allowed = {m.prometheus_name for m in Metric.ALL if m is not Metric.UTILIZATION}
    for alert in _alerts():
        names = metric_names(without_target_info_join(alert["expr"]))
        assert names and names <= allowed, (alert["alert"], names)
        assert all(selects_service_on_both_paths(alert["expr"], n) for n in names), alert["alert"]
        labels = label_names(without_target_info_join(alert["expr"]))
        assert "job" not in labels and "instance" not in labels
        assert {"service_name", "llm_context_session_id"} <= labels, alert["alert"]


def test_committed_rules_are_what_the_generator_writes():
    """The rule file is generate.py's output (the one source of the rules and their Grafana copies)."""
    assert RULES.read_text(encoding="utf-8") == GEN.render_rules()
    assert GEN.render_rules("https://wiki.example/ctx/").count(
        '"https://wiki.example/ctx/dashboards.md#ctxscope') == len(_alerts())


def test_thresholds_are_documented():
    """The docs' threshold table gives each alert the threshold, severity and `for` of the rules file."""
    rows = {}
    for line in DOCS.read_text(encoding="utf-8").splitlines():
        cells = [c.strip().strip("`") for c in line.strip().strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("Ctxscope"):
            rows[cells[0]] = cells
    for alert in _alerts():
        name, severity, _, threshold, for_ = rows[alert["alert"]]
        assert float(threshold) == _threshold(alert["expr"]), name
        assert severity == alert["labels"]["severity"], name
        assert for_ == alert["for"], name
