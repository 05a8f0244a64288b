"""Render the docs' pictures from the real data of the end-to-end scenario, one per metric path.

Runs the scripted agent of ``tests/prometheus_helpers.py`` (the same sessions
``tests/e2e/test_prometheus_e2e.py`` checks) turn by turn through one metric path
(tests/metric_paths.py) and screenshots Prometheus' own graph page with
headless Chromium: session ``sess-near``'s context by category (stacked) and
its utilisation against each of its limits, with the dashboard's own
selectors (``service_name`` from a label or from ``target_info``).

    .venv/bin/python dashboards/render_picture.py [sdk-target-info|collector|victoriametrics] [output.png]

- ``sdk-target-info``: the agent under ``opentelemetry-instrument`` with
  ``OTEL_METRICS_EXPORTER=prometheus``, scraped by Prometheus 2.42;
- ``collector``: OTLP to the built Collector (collector-config/otelcol.yaml),
  Prometheus 2.42 scraping its exporter;
- ``victoriametrics``: OTLP straight into VictoriaMetrics; the graph page is
  that of a Prometheus 2.42 federating the series from VictoriaMetrics'
  ``/federate`` (VictoriaMetrics' own UI is not in Debian's package).

Needs ``prometheus`` and ``chromium`` on PATH, and ``make backends`` for the
Collector and VictoriaMetrics.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT / "dashboards")]

import generate as g  # noqa: E402
from metric_paths import PATHS, run_path  # noqa: E402
from prometheus_helpers import SESSIONS, PrometheusServer, wait_for  # noqa: E402

OUTPUTS = {"sdk-target-info": ROOT / "docs" / "img" / "prometheus-context.png",
           "collector": ROOT / "docs" / "img" / "prometheus-context-collector.png",
           "victoriametrics": ROOT / "docs" / "img" / "prometheus-context-victoriametrics.png"}
SESSION = "sess-near"
TURN_PAUSE_S = 5.0
RANGE = "30s"


def graph_url(prom: PrometheusServer, range_: str = RANGE) -> str:
    """Prometheus' graph page with two panels over the scenario's session (the Context row's queries)."""
    sel = f'{g.SESSION}="{SESSION}"'
    tokens, limits = g.series(g.TOKENS, sel), g.series(g.LIMITS, sel)
    panels = [
        (f"sum by ({g.CATEGORY}) ({tokens})", True),
        (f"sum({tokens}) / on () group_right () max by ({g.LIMIT}) ({limits} > 0)", False),
    ]
    params = []
    for i, (expr, stacked) in enumerate(panels):
        params += [(f"g{i}.expr", expr), (f"g{i}.tab", "0"), (f"g{i}.stacked", "1" if stacked else "0"),
                   (f"g{i}.show_exemplars", "0"), (f"g{i}.range_input", range_)]
    return f"{prom.url}/graph?{urllib.parse.urlencode(params)}"


def screenshot(url: str, output: Path, workdir: Path) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium is not on PATH (apt-get install chromium)")
    subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={workdir / 'chromium'}", f"--screenshot={output}",
         "--window-size=1400,1620", "--hide-scrollbars", "--virtual-time-budget=8000", url],
        check=True, capture_output=True, timeout=120)


def main(argv: list[str]) -> int:
    path_id = argv[1] if len(argv) > 1 else "sdk-target-info"
    output = Path(argv[2]) if len(argv) > 2 else OUTPUTS[path_id]
    output.parent.mkdir(parents=True, exist_ok=True)
    path = next(p for p in PATHS if p.id == path_id)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        with run_path(path, workdir, []) as (agent, view):
            prom = view.store
            if path_id == "victoriametrics":  # Prometheus' graph page over what VictoriaMetrics ingested
                host = prom.url.removeprefix("http://")
                (workdir / "federate").mkdir()
                prom = PrometheusServer(workdir / "federate", [], config={"scrape_configs": [{
                    "job_name": "victoriametrics", "honor_labels": True, "metrics_path": "/federate",
                    "params": {"match[]": ['{__name__=~"llm_context_.*|target_info"}']},
                    "static_configs": [{"targets": [host]}]}]})
                prom.start()
                # Its first scrape comes seconds after start: wait for it, so the first turn is drawn.
                wait_for(lambda: prom.query("up") and prom.query("up")[0]["value"][1] == "1", 30)
            try:
                longest = max(len(s.turns) for s in SESSIONS)
                for index in range(longest):
                    agent.play_turn(index)
                    # VictoriaMetrics makes a new series searchable a few seconds after its
                    # first sample; federation sees only the latest: give each turn longer.
                    time.sleep(TURN_PAUSE_S * (2 if path_id == "victoriametrics" else 1))
                wait_for(lambda: prom.query(f'{g.TOKENS}{{{g.SESSION}="{SESSION}"}}'), 30)
                screenshot(graph_url(prom, "1m" if path_id == "victoriametrics" else RANGE), output, workdir)
            finally:
                if prom is not view.store:
                    prom.stop()
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
