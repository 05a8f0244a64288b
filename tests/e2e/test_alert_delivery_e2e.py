"""Alerts delivered: the shipped rules, evaluated by Prometheus and by vmalert, reach a webhook through Alertmanager.

The scripted agent's last turn takes session ``sess-near`` to 9400 of its
10000-token compaction threshold (94% > 90%): Alertmanager must deliver
``CtxscopeContextNearCompactionThreshold`` for it with its labels, summary,
description and a runbook link that resolves (the rules generated with the
docs served by a local HTTP server as ``--docs-url``), and deliver it again
as resolved when the recording ends.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any, Iterator

import pytest

from backends import Alertmanager, DocsServer, Webhook, requires
from ctxscope.schema import MetricAttr
from metric_paths import PATHS, run_path
from prometheus_helpers import SERVICE, rules_for_test, wait_for

ALERT = "CtxscopeContextNearCompactionThreshold"
SESSION_LABEL = MetricAttr.SESSION_ID.replace(".", "_")  # its Prometheus label
PATHS_WITH_EVALUATORS = [p.param() for p in PATHS if p.id in ("sdk-label", "victoriametrics")]


def _near(webhook: Webhook, status: str) -> list[dict[str, Any]]:
    return [a for a in webhook.alerts(status)
            if a["labels"]["alertname"] == ALERT and a["labels"].get(SESSION_LABEL) == "sess-near"]


@pytest.fixture()
def delivery(tmp_path: Path) -> Iterator[tuple[Webhook, DocsServer, Alertmanager]]:
    webhook, docs = Webhook(), DocsServer()
    alertmanager = Alertmanager(tmp_path / "alertmanager", webhook.url,
                                group_by=["alertname", "service_name", SESSION_LABEL])
    try:
        alertmanager.start()
        yield webhook, docs, alertmanager
    finally:
        alertmanager.stop()
        webhook.close()
        docs.close()


@requires("alertmanager")
@pytest.mark.parametrize("path", PATHS_WITH_EVALUATORS)
def test_compaction_alert_is_delivered_with_a_runbook_and_resolves(path: Any, delivery: Any, tmp_path: Path) -> None:
    """Alertmanager delivers the near-compaction alert of sess-near, and its resolution when the recording ends."""
    webhook, docs, alertmanager = delivery
    rules = rules_for_test(tmp_path, docs_url=docs.url)
    with run_path(path, tmp_path / path.id, rules, alertmanager=alertmanager.url) as (agent, _view):
        agent.play_all(upto=-1)
        agent.play_last()
        (firing, *_) = wait_for(lambda: _near(webhook, "firing"), 40)
        # vmalert adds the rule group's name as `alertgroup`; Prometheus adds nothing.
        group = {"alertgroup": "ctxscope-context"} if path.id == "victoriametrics" else {}
        assert firing["labels"] == {"alertname": ALERT, "severity": "warning", "service_name": SERVICE,
                                    SESSION_LABEL: "sess-near", **group}
        notes = firing["annotations"]
        assert notes["summary"] == "Context of session sess-near is close to its compaction threshold"
        # 9400 / 10000, humanizePercentage
        assert notes["description"] == (
            f"Session sess-near of {SERVICE} uses 94% of its automatic compaction threshold: "
            "a compaction (and the loss of detail it brings) is near.")
        assert notes["runbook_url"] == f"{docs.url}/dashboards.md#ctxscopecontextnearcompactionthreshold"
        with urllib.request.urlopen(notes["runbook_url"], timeout=5) as resp:
            page = resp.read().decode()
        assert resp.status == 200 and f"\n### {ALERT}\n" in page
        assert not _near(webhook, "resolved")
        agent.end_recording()
        (resolved, *_) = wait_for(lambda: _near(webhook, "resolved"), 40)
        assert resolved["labels"] == firing["labels"] and resolved["endsAt"] >= firing["startsAt"]
