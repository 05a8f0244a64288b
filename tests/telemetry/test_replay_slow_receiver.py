"""``ctxscope replay`` to a receiver that answers every request, slowly: everything delivered, nothing said.

The process is run whole (its exit included) against a real HTTP receiver that takes 1.5 s to answer
each request 200: within the replay's export timeout (3 s), but the end of the replay makes three
exports one after another (the zeros, the last span, the meter's final collection), 4.5 s.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

from _delivery_support import SlowReceiver, two_calls

SRC = Path(__file__).resolve().parents[2] / "src"
DELAY_S = 1.5


def test_replay_to_a_slow_receiver_delivers_everything_says_nothing_and_exits_0(tmp_path):
    """Two calls to a receiver answering each request 200 after 1.5 s: the 4 spans (capture-start, two
    calls, session-end) and 36 metric points (16 live values: 4 added-tokens histogram points and 12
    gauges; the same 16 at zero; the meter's final 4 histogram points) arrive, in five requests; the
    only line is the summary; exit 0. (Before: the end's three exports outlasted the 3 s exit budget,
    and replay printed "ctxscope: ctxscope: ctxscope.Telemetry.shutdown() did not finish within 3.0 s
    (CTXSCOPE_SHUTDOWN_TIMEOUT_MS); the rest is dropped. Is the telemetry backend reachable?" and
    "ctxscope: shutdown can only be called once", exit 0, while every span and point arrived.)"""
    with SlowReceiver(DELAY_S) as receiver:
        endpoint = receiver.endpoint
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("OTEL_", "CTXSCOPE_"))}
        # No export on a schedule (the batch span processor's 5 s, the meter's 60 s): the five requests
        # are the replay's own, the last three its end's.
        env.update({"PYTHONPATH": str(SRC), "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "CTXSCOPE_STORE": "off",
                    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_METRIC_EXPORT_INTERVAL": "600000",
                    "OTEL_BSP_SCHEDULE_DELAY": "600000"})
        done = subprocess.run([sys.executable, "-c", "from ctxscope.cli import run; run()", "replay",
                               "--tokenizer", "chars", str(two_calls(tmp_path / "s.jsonl"))],
                              env=env, capture_output=True, text=True, timeout=60)
    assert done.stderr.splitlines() == [f"replayed 2 calls of 1 session to {endpoint}"], done.stderr
    assert done.returncode == 0, done.stderr
    assert receiver.requests == [("spans", 3), ("points", 16), ("points", 16), ("spans", 1), ("points", 4)]
    live, zeros = receiver.gauges[0], receiver.gauges[1]
    # The second call's context by chars/4: "question 0" and "question 1" 3 each, "answer 0" 2, framing 1;
    # the 101 input tokens it reported less those 9 are the unseen system part, 92.
    assert live == {("llm.context.tokens", "system"): 92, ("llm.context.tokens", "prompts"): 6,
                    ("llm.context.tokens", "assistant"): 2, ("llm.context.tokens", "overhead"): 1,
                    ("llm.context.tokens", "unattributed"): 0}
    assert zeros == {key: 0 for key in live}
    assert receiver.gauges[2] == {}


def test_the_budget_spares_the_time_an_export_is_under_way_and_no_more(caplog):
    """``run_within(..., exporting=...)``: a 0.6 s step during which an export is under way finishes
    within a 0.2 s budget; the same step with no export under way is left at about 0.2 s, and with
    ``warn=False`` nothing is logged (the caller says what was lost)."""
    from ctxscope.telemetry.shutdown import run_within

    under_way = threading.Event()

    def exporting_step() -> None:
        time.sleep(0.6)  # the export's own round trip
        under_way.clear()

    under_way.set()  # under way from the start, as the batch span processor's own export can be
    assert run_within([exporting_step], 0.2, "an export", exporting=under_way.is_set, warn=False)
    hung = threading.Event()
    started = time.monotonic()
    with caplog.at_level("WARNING", logger="ctxscope.telemetry.shutdown"):
        assert not run_within([lambda: hung.wait(5.0)], 0.2, "our own work", exporting=under_way.is_set,
                              warn=False)
    waited = time.monotonic() - started
    hung.set()
    assert 0.2 <= waited < 1.5, waited
    assert caplog.records == []


LEFT_BEHIND = '''
import sys
from ctxscope.telemetry.setup import setup
telemetry = setup("left-behind", endpoint=sys.argv[1], protocol="http/protobuf", instrument=False,
                  set_global=False, store=False)
telemetry.meter_provider.get_meter("m").create_counter("c").add(1)
print("finished" if telemetry.shutdown() else "left behind", flush=True)
'''


def test_an_end_left_behind_is_not_shut_down_again_by_the_exit():
    """``Telemetry.shutdown()`` within a 0.3 s budget while the meter's final export takes 1 s: it is left
    behind with its one warning, and the exit's handler does not shut the meter provider down a second
    time (before: the SDK's "shutdown can only be called once" followed the warning; replay's end, once
    left behind, took the same path). The point was sent before the process left (its answer was not)."""
    with SlowReceiver(1.0) as receiver:
        env = {key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "CTXSCOPE_"))}
        env.update({"PYTHONPATH": str(SRC), "CTXSCOPE_SHUTDOWN_TIMEOUT_MS": "300",
                    "OTEL_METRIC_EXPORT_INTERVAL": "600000"})
        done = subprocess.run([sys.executable, "-c", LEFT_BEHIND, receiver.endpoint], env=env,
                              capture_output=True, text=True, timeout=60)
    assert done.stdout == "left behind\n"
    said = done.stderr.splitlines()
    assert len(said) == 1 and re.fullmatch(  # the seconds as waited: 0.3 and a busy machine's lateness
        r"ctxscope: ctxscope\.Telemetry\.shutdown\(\) did not finish within \d\.\d s "
        r"\(CTXSCOPE_SHUTDOWN_TIMEOUT_MS\); the rest is dropped\. Is the telemetry backend reachable\?",
        said[0]), done.stderr
    assert done.returncode == 0
    assert receiver.requests == [("points", 1)]
