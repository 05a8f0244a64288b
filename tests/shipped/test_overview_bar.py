"""The overview's combined bar leaves out sessions whose breakdown was not recorded (issue 19).

Evaluated by Prometheus' own engine (``promtool test rules``, a ``promql_expr_test``) on the
dashboard's very query, variables filled as Grafana fills "All".
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any, Iterator

import pytest
from _paths import ROOT

requires_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None,
    reason="promtool is not on PATH (apt-get install prometheus; .ci/run installs it)")

COMBINED_BAR = "Composition of all live sessions"


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        if panel.get("type") == "row":
            yield from _panels(panel.get("panels", []))
        else:
            yield panel


def _combined_bar_query() -> str:
    dashboard = json.loads((ROOT / "dashboards" / "ctxscope-context.json").read_text(encoding="utf-8"))
    panel = next(p for p in _panels(dashboard["panels"]) if p["title"] == COMBINED_BAR)
    (target,) = panel["targets"]
    return target["expr"].replace("$service", ".*").replace("$model", ".*")


def _series(session: str, category: str, tokens: int) -> dict[str, str]:
    labels = (f'service_name="agent-svc", gen_ai_request_model="gpt-4o", '
              f'llm_context_session_id="{session}", llm_context_category="{category}"')
    return {"series": "llm_context_tokens{%s}" % labels, "values": f"{tokens}x5"}


@requires_promtool
def test_the_combined_bar_leaves_out_a_session_without_a_recorded_breakdown(tmp_path):
    # Session "measured": system 300, prompts 500, unattributed 200 (1,000 tokens). Session
    # "unrecorded" (a foreign span without content: coverage unrecorded) has nothing but its
    # reported 4,000 tokens as unattributed. Left out, the bar is the measured session's shares:
    # 0.3, 0.5, 0.2. Counted in, unattributed would be (200 + 4000) / 5000 = 0.84.
    series = [_series("measured", "system", 300), _series("measured", "prompts", 500),
              _series("measured", "unattributed", 200), _series("unrecorded", "unattributed", 4000)]
    expected = {"system": 0.3, "prompts": 0.5, "unattributed": 0.2}
    test = {
        "rule_files": [],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": series,
            "promql_expr_test": [{
                "expr": _combined_bar_query(),
                "eval_time": "2m",
                "exp_samples": [{"labels": '{llm_context_category="%s"}' % c, "value": v}
                                for c, v in expected.items()],
            }],
        }],
    }
    path = tmp_path / "combined-bar.test.yml"
    path.write_text(json.dumps(test), encoding="utf-8")  # JSON is YAML
    done = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr


@requires_promtool
def test_the_check_fails_when_the_unrecorded_session_is_counted(tmp_path):
    """The same evaluation against the shares with the unrecorded session counted in fails: the test bites."""
    series = [_series("measured", "system", 300), _series("measured", "prompts", 500),
              _series("measured", "unattributed", 200), _series("unrecorded", "unattributed", 4000)]
    wrong = {"system": 300 / 5000, "prompts": 500 / 5000, "unattributed": 4200 / 5000}
    test = {"rule_files": [], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "promql_expr_test": [{"expr": _combined_bar_query(), "eval_time": "2m",
                              "exp_samples": [{"labels": '{llm_context_category="%s"}' % c, "value": v}
                                              for c, v in wrong.items()]}]}]}
    path = tmp_path / "combined-bar-wrong.test.yml"
    path.write_text(json.dumps(test), encoding="utf-8")
    done = subprocess.run(["promtool", "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    # It fails on the values (promtool prints what it got), not on a file it could not read.
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert "exp:" in output and "got:" in output and 'llm_context_category="unattributed"' in output, output
