"""Render docs/img/prometheus-context.png from the real data of the end-to-end scenario.

Runs the scripted agent of ``tests/prometheus_helpers.py`` (the same sessions
``tests/test_prometheus_e2e.py`` checks) turn by turn, lets the Debian
``prometheus`` binary scrape it every second, and screenshots Prometheus' own
graph page with headless Chromium: session ``sess-near``'s context by category
(stacked) and its utilisation against each of its limits (window, effective
window, compaction threshold), the queries of the dashboard's Context row.

    .venv/bin/python dashboards/render_picture.py [output.png]

Needs ``prometheus`` and ``chromium`` on PATH (``apt-get install prometheus chromium``).
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
from prometheus_helpers import SESSIONS, AgentScenario, PrometheusServer, wait_for  # noqa: E402

OUTPUT = ROOT / "docs" / "img" / "prometheus-context.png"
SESSION = "sess-near"
TURN_PAUSE_S = 5.0
RANGE = "30s"


def graph_url(prom: PrometheusServer) -> str:
    """Prometheus' graph page with two panels over the scenario's session."""
    sel = f'{g.SESSION}="{SESSION}"'
    panels = [
        (f"sum by ({g.CATEGORY}) ({g.TOKENS}{{{sel}}})", True),
        (f"sum({g.TOKENS}{{{sel}}}) / on () group_right () max by ({g.LIMIT}) ({g.LIMITS}{{{sel}}} > 0)", False),
    ]
    params = []
    for i, (expr, stacked) in enumerate(panels):
        params += [(f"g{i}.expr", expr), (f"g{i}.tab", "0"), (f"g{i}.stacked", "1" if stacked else "0"),
                   (f"g{i}.show_exemplars", "0"), (f"g{i}.range_input", RANGE)]
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
    output = Path(argv[1]) if len(argv) > 1 else OUTPUT
    output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        agent = AgentScenario()
        prom = PrometheusServer(workdir, [agent.target])
        try:
            prom.start()
            wait_for(lambda: prom.query("up") and prom.query("up")[0]["value"][1] == "1", 30)
            longest = max(len(s.turns) for s in SESSIONS)
            for index in range(longest):
                for session in SESSIONS:
                    if index < len(session.turns):
                        agent.play(session, session.turns[index])
                time.sleep(TURN_PAUSE_S)
            screenshot(graph_url(prom), output, workdir)
        finally:
            agent.close()
            prom.stop()
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
