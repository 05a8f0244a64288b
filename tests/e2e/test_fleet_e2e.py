"""Fleet mode (``CTXSCOPE_METRICS_SESSION_KEY=off``) against a real Prometheus scraping the SDK's reader.

The scripted agent's scenario (tests/prometheus_helpers.py: SESSIONS), its
processor in fleet mode: no series carries the session key, and the
dashboard's *What fills a request's context* panel answers per category with
the mean calibrated tokens of the scenario's requests (compaction snapshots
are not requests), worked out by hand:

- sess-near (3 requests): estimates 3900, 6450, 9000 below the reported 4100,
  6600, 9400: unattributed 200, 150, 400;
- sess-waste (2 requests): 6000 = 6000 reported (unattributed 0); 8000 above
  7600: scaled by 0.95 to system 1900, tools 950, results 4750, unattributed 0;
- sess-mystery (2 requests): 1200 and 2000 below 1900 and 3000: unattributed 700, 1000.

system (1200 x 3 + 2000 + 1900 + 500 x 2) / 7 = 8500 / 7; tools (2400 x 3 +
1000 + 950) / 5 = 1830; prompts (300 + 450 + 600 + 700 + 1500) / 5 = 710;
assistant (900 + 1800) / 2 = 1350; results (1500 + 3000 + 3000 + 4750) / 4 =
3062.5; unattributed (200 + 150 + 400 + 0 + 0 + 700 + 1000) / 7 = 350.
"""

from __future__ import annotations

from _paths import ROOT

import importlib.util
from pathlib import Path

import pytest

from prometheus_helpers import AgentScenario, PrometheusServer, vector, wait_for

pytestmark = pytest.mark.skipif(PrometheusServer.binary() is None,
                                reason="prometheus not installed (apt-get install prometheus; .ci/run does)")

WANT = {"system": 8500 / 7, "tools": 1830, "prompts": 710, "assistant": 1350, "results": 3062.5,
        "unattributed": 350}


def _generator():
    spec = importlib.util.spec_from_file_location("ctxscope_dashboards", ROOT / "dashboards" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_fleet_mode_answers_what_fills_the_context_without_session_series(tmp_path: Path):
    """The fleet panel gives the hand-worked means; no ctxscope series has a session label."""
    G = _generator()
    agent = AgentScenario(session_key=False)
    prom = PrometheusServer(tmp_path, [agent.target])
    try:
        prom.start()
        agent.play_all()
        panel = next(p for row in G.context_dashboard()["panels"] for p in row.get("panels", []) if p["id"] == 22)
        expr = panel["targets"][0]["expr"].replace("$service", ".*").replace("$model", ".*")

        def means():
            return {dict(k)[G.CATEGORY]: v for k, v in vector(prom.query(expr)).items()}

        wait_for(lambda: means() and means().keys() == WANT.keys() and means(), 30)
        assert means() == pytest.approx(WANT)
        labelled = prom.query('{__name__=~"llm_context_.*", %s!=""}' % G.SESSION)
        assert labelled == []
        compactions = vector(prom.query(f"sum by ({G.TRIGGER}) ({G.COMPACTIONS})"))
        assert {dict(k)[G.TRIGGER]: v for k, v in compactions.items()} == {"auto": 2, "manual": 1}
    finally:
        prom.stop()
        agent.close()
