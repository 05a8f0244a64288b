"""``ctxscope watch``'s end against a real receiver that answers slowly, and against a closed port.

The watch runs whole (its exit included). The slow receiver takes 0.8 s to answer each request 200,
with an exit budget of 1 s (``CTXSCOPE_SHUTDOWN_TIMEOUT_MS``): after the stop's span flush, the end
makes two exports one after another (the zeros, the meter's final collection), 1.6 s.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _delivery_support import SlowReceiver, closed_port, two_calls

SRC = Path(__file__).resolve().parents[2] / "src"
DELAY_S = 0.8


def _watch(tmp_path: Path, endpoint: str, stop: int, **env: str) -> tuple[list[str], int, float, Path, Path]:
    """A watch of the two calls (``--from-start``) until it says it watches, then ``stop``:
    (its stderr lines, its exit status, the seconds from the stop to the exit, the folder, the state)."""
    folder, state = tmp_path / "projects", tmp_path / "state.json"
    folder.mkdir()
    two_calls(folder / "s.jsonl")
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "CTXSCOPE_"))}
    # No export on a schedule (the batch span processor's 5 s, the meter's 60 s): the requests are the
    # watch's first commit and its end's.
    environ.update({"PYTHONPATH": str(SRC), "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
                    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_METRIC_EXPORT_INTERVAL": "600000",
                    "OTEL_BSP_SCHEDULE_DELAY": "600000", "CTXSCOPE_STORE": "off",
                    "CTXSCOPE_DATA_DIR": str(tmp_path / "data"), **env})
    proc = subprocess.Popen([sys.executable, "-c", "from ctxscope.cli import run; run()", "watch", str(folder),
                             "--from-start", "--notify", "poll", "--state", str(state), "--tokenizer", "chars"],
                            env=environ, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            lines.append(line.rstrip("\n"))
            if line.startswith("ctxscope: watching "):
                ready.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert ready.wait(30), lines
        proc.send_signal(stop)
        stopped = time.monotonic()
        returncode = proc.wait(30)
        took = time.monotonic() - stopped
    finally:
        proc.kill()
    reader.join(10)
    return lines, returncode, took, folder, state


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_watch_stopped_with_a_slow_receiver_delivers_everything_says_nothing_false(tmp_path, stop):
    """Two calls watched from the start, then the stop: the 4 spans (capture-start and the two calls at
    the first commit, the session-end marker at the stop) and 20 metric points (the session's 12 gauges
    and 4 added-tokens histogram points at its end, the gauges at 0; the meter's final 4 histogram
    points) arrive in four requests; stderr is the watch's two lines, exit 0. (Before: the end's two
    exports outlasted the 1 s budget, and the watch printed "ctxscope: ctxscope.Telemetry.shutdown()
    did not finish within 1.0 s (CTXSCOPE_SHUTDOWN_TIMEOUT_MS); the rest is dropped. Is the telemetry
    backend reachable?" and, from the exit's handler, "ctxscope: shutdown can only be called once",
    while every span and point arrived.)"""
    with SlowReceiver(DELAY_S) as receiver:
        lines, returncode, _, folder, state = _watch(tmp_path, receiver.endpoint, stop,
                                                     CTXSCOPE_SHUTDOWN_TIMEOUT_MS="1000")
    assert lines == [f"ctxscope: watching {folder} (polling); exporting to {receiver.endpoint}; state {state}",
                     f"ctxscope: watch stopped after 2 new calls; state saved to {state}"]
    assert returncode == 0
    assert receiver.requests == [("spans", 3), ("spans", 1), ("points", 16), ("points", 4)]
    # Ended before any collection: the session's gauges go out once, at 0, then leave.
    categories = ("system", "prompts", "assistant", "overhead", "unattributed")
    assert receiver.gauges == [{("llm.context.tokens", c): 0 for c in categories}, {}]


def test_a_watch_stopped_with_its_backend_down_says_what_was_lost_once_and_exits_1(tmp_path):
    """A closed port, each export allowed 2 s (the SDK retries once, after about 1 s, and gives up): the
    stop's span flush fails once it has waited, the end's exports are then not attempted, and the last
    line says what was not delivered, all of it (4 spans, 20 points as above), exit 1 as a replay's.
    (Before: exit 0, the end's exports tried in turn until the 3 s budget, and no word on what was lost
    beyond the SDK's own messages.)"""
    endpoint = f"http://127.0.0.1:{closed_port()}"
    lines, returncode, took, _, state = _watch(tmp_path, endpoint, signal.SIGTERM, OTEL_EXPORTER_OTLP_TIMEOUT="2")
    assert lines[-2:] == [f"ctxscope: watch stopped after 2 new calls; state saved to {state}",
                          f"ctxscope: {endpoint} did not take the telemetry: 4 of 4 spans and 20 of 20 metric points "
                          "not delivered, nothing sent at the end after a failed export"], lines
    assert not [line for line in lines if "did not finish" in line or "called once" in line], lines
    assert returncode == 1
    assert took < 3.5, took  # the stop's one export (about 1.2 s), not the end's three
