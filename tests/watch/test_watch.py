"""ctxscope watch: a real session written line by line is emitted once, in order, across pauses,
rotations, idle ends and restarts (in-process and as a subprocess into a real OTLP receiver)."""

from __future__ import annotations

from _paths import TESTS

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxscope.telemetry.processor import ContextSpanProcessor
from ctxscope.telemetry.replay import CallEmitter
from ctxscope.schema import Attr, GenAI, Metric, MetricAttr
from ctxscope.watch import Watcher, WatchState, default_dirs

DATA = TESTS / "data" / "transcripts"
SOURCE = DATA / "claude_4c2ddfdc.jsonl"
SESSION = "4c2ddfdc-b619-4525-8d03-1950fb1b0257"
LINES = SOURCE.read_bytes().splitlines(keepends=True)
# By hand from the file: the 7 calls (first lines 3, 13, 16, 18, 20, 23, 25) and their usage,
# input + cache creation + cache read.
CALL_LINES = [3, 13, 16, 18, 20, 23, 25]
REPORTED = [35069, 35666, 35757, 35998, 36393, 36423, 36526]


class Sinks:
    """An emitter whose spans land in memory, with the context processor and a metric reader."""

    def __init__(self, **emitter: bool) -> None:
        self.reader = InMemoryMetricReader()
        self.meters = MeterProvider(metric_readers=[self.reader])
        self.tracers = TracerProvider()
        self.processor = ContextSpanProcessor(self.meters)
        self.tracers.add_span_processor(self.processor)
        self.exporter = InMemorySpanExporter()
        self.tracers.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.emitter = CallEmitter.for_provider(self.tracers, tokenizer="chars", **emitter)

    def requests(self) -> list:
        return [s for s in self.exporter.get_finished_spans() if s.name.startswith("chat")]

    def reported(self) -> list[int]:
        return [s.attributes[Attr.REPORTED_TOKENS] for s in self.requests()]

    def tokens(self) -> list[float]:
        data = self.reader.get_metrics_data()
        return [p.value for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics
                if m.name == Metric.TOKENS.name for p in m.data.data_points
                if p.attributes.get(MetricAttr.SESSION_ID) == SESSION] if data else []


def watcher(folder: Path, sinks: Sinks, state: Path, **kwargs) -> Watcher:
    return Watcher([str(folder)], sinks.emitter, WatchState.load(state), **kwargs)


def until(predicate, what: str, timeout: float = 30.0) -> None:
    """Poll ``predicate`` until it holds; fail with ``what`` after ``timeout`` seconds (a condition, not a
    sleep: a loaded machine only makes it slower)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} (after {timeout} s)")
        time.sleep(0.02)


def seen(w: Watcher, path: Path, size: int) -> bool:
    """The watcher has checked ``path`` at ``size`` bytes (and emitted what that much completes)."""
    tracked = w._files.get(str(path))
    return tracked is not None and tracked.seen_size == size


def append(path: Path, lines: list[bytes]) -> None:
    with open(path, "ab") as handle:
        for line in lines:
            handle.write(line)


@pytest.mark.parametrize("notify", ["auto", "poll"])
def test_every_call_once_in_order_through_pauses_and_rotations(tmp_path, notify):
    """Line by line, a mid-line pause, a new subagent folder, a replaced file, a truncated rewrite: each call once,
    in order."""
    sinks = Sinks()
    folder = tmp_path / "projects" / "-tmp-private"
    folder.mkdir(parents=True)
    w = watcher(tmp_path / "projects", sinks, tmp_path / "state.json", idle_s=30, poll_s=0.05, notifier=notify)
    ready = threading.Event()
    thread = threading.Thread(target=w.run, kwargs={"ready": ready.set})
    thread.start()
    assert ready.wait(10)
    path = folder / f"{SESSION}.jsonl"  # a new folder and a new file after the watch started
    try:
        for n, line in enumerate(LINES, 1):
            if n == 13:  # the second call's line arrives in two halves
                append(path, [line[:40]])
                until(lambda: seen(w, path, path.stat().st_size), "the half line was never looked at")
                assert sinks.reported() == REPORTED[:1]  # the half line is not read
                append(path, [line[40:]])
            elif n == 15:  # rotation: the file is replaced (new inode) by a copy plus the next line
                tmp = folder / "rewrite.tmp"
                tmp.write_bytes(b"".join(LINES[:n]))
                os.replace(tmp, path)
            elif n == 19:  # a subagent starts: a new folder <session>/subagents/ and its file
                sub = folder / SESSION / "subagents"
                sub.mkdir(parents=True)
                (sub / "agent-36541525.jsonl").write_bytes((DATA / "claude_agent-36541525.jsonl").read_bytes())
                append(path, [line])
            elif n == 21:  # truncated to nothing, then rewritten whole
                with open(path, "r+b") as handle:
                    handle.truncate(0)
                until(lambda: seen(w, path, 0), "the truncation was never seen")
                path.write_bytes(b"".join(LINES[:n]))
            else:
                append(path, [line])
            time.sleep(0.03)
        # Every line read before the stop (a stop ends what was read; anything more would show below).
        until(lambda: len(sinks.requests()) >= 8, "the 8 calls never came")
    finally:
        w.stop()
        thread.join(10)
    main = [s for s in sinks.requests() if s.attributes[GenAI.CONVERSATION_ID] == SESSION]
    agent = [s for s in sinks.requests() if s not in main]
    assert [s.attributes[Attr.REPORTED_TOKENS] for s in main] == REPORTED
    # The subagent's one call (3 + 16,976 cache creation + 0 read), in a session of its own.
    assert [(s.attributes[GenAI.CONVERSATION_ID], s.attributes[Attr.REPORTED_TOKENS]) for s in agent] == \
        [(f"{SESSION}/agent-36541525", 16979)]


def uninterrupted(tmp_path: Path, index: int):
    """The request span of call ``index`` from a watch that read the whole file from the start."""
    whole, folder = Sinks(), tmp_path / "uninterrupted"
    folder.mkdir()
    (folder / "s.jsonl").write_bytes(b"".join(LINES))
    w = watcher(folder, whole, tmp_path / "whole-state.json", from_start=True)
    w.scan()
    w.close()
    span = whole.requests()[index]
    assert span.attributes[Attr.REPORTED_TOKENS] == REPORTED[index]
    return span


def assert_same_call(span, expected) -> None:
    """Same attributes (estimate, categories, baseline...) and the same change events, which exist."""
    assert dict(span.attributes) == dict(expected.attributes)
    assert [dict(e.attributes) for e in span.events] == [dict(e.attributes) for e in expected.events] != []


def test_restart_resumes_where_it_stopped_with_the_context_rebuilt(tmp_path):
    """A second watch emits only calls 4-7; its first is measured against the rebuilt context, not a baseline."""
    path = tmp_path / "s.jsonl"
    first = Sinks()
    w = watcher(tmp_path, first, tmp_path / "state.json", from_start=True)
    path.write_bytes(b"".join(LINES[:17]))
    w.scan()
    w.close()
    assert first.reported() == REPORTED[:3]

    append(path, LINES[17:])
    second = Sinks()
    w = watcher(tmp_path, second, tmp_path / "state.json")
    w.scan()
    w.close()
    assert second.reported() == REPORTED[3:]
    resumed = second.requests()[0]
    assert resumed.attributes[Attr.BASELINE] is False
    # The rebuilt context measures call 4 exactly as a watch that never stopped does: same
    # estimate, same categories, same changes (not a baseline of the whole context).
    assert_same_call(resumed, uninterrupted(tmp_path, 3))
    (capture,) = [s for s in second.exporter.get_finished_spans() if s.name == "capture-start"]
    assert capture.parent.span_id == resumed.context.span_id  # the new recording starts at the resumed call


def test_a_first_watch_treats_what_files_hold_as_history(tmp_path):
    """Existing content is not emitted; the calls written after are, measured on the whole context."""
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(LINES[:17]))
    sinks = Sinks()
    w = watcher(tmp_path, sinks, tmp_path / "state.json")
    w.scan()
    assert sinks.reported() == []
    append(path, LINES[17:19])
    w.check(str(path))
    assert sinks.reported() == [REPORTED[3]]
    assert sinks.requests()[0].attributes[Attr.BASELINE] is False
    # Measured on the whole context: call 4 as a watch that read every call would see it.
    assert_same_call(sinks.requests()[0], uninterrupted(tmp_path, 3))


def test_an_idle_session_ends_its_series_and_frees_its_reader(tmp_path):
    """After the idle time the session's gauges report 0 once, then leave; a later line re-reads silently."""
    path = tmp_path / "s.jsonl"
    sinks = Sinks()
    w = watcher(tmp_path, sinks, tmp_path / "state.json", idle_s=5)
    w.scan()
    append(path, LINES[:17])
    w.check(str(path))
    live = sinks.tokens()
    assert live and sum(live) == REPORTED[2]  # calibrated: the gauges add up to the last reported input
    assert w.active_files() == 1
    w.end_idle(now=time.monotonic() + 6)
    assert w.active_files() == 0
    assert sinks.tokens() == [0] * len(live)
    assert sinks.tokens() == []
    append(path, LINES[17:19])
    w.check(str(path))
    assert sinks.reported() == REPORTED[:4]  # call 4 only is new: the first three were not repeated


def test_default_folders_follow_the_agents_settings(tmp_path):
    """CLAUDE_CONFIG_DIR and CODEX_HOME move the default folders, as they move the agents' own."""
    env = {"CLAUDE_CONFIG_DIR": str(tmp_path / "c"), "CODEX_HOME": str(tmp_path / "x")}
    assert default_dirs(env) == [str(tmp_path / "c" / "projects"), str(tmp_path / "x" / "sessions")]
    home = Path.home()
    assert default_dirs({}) == [str(home / ".claude" / "projects"), str(home / ".codex" / "sessions")]


# ---------------------------------------------------------------------------
# The command, as a subprocess, into a real OTLP receiver
# ---------------------------------------------------------------------------

def start_watch(folder: Path, state: Path, endpoint: str, tmp_path: Path) -> tuple[subprocess.Popen, list[str]]:
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
           "OTEL_METRIC_EXPORT_INTERVAL": "500", "CTXSCOPE_DATA_DIR": str(tmp_path / "data"),
           "OTEL_BSP_SCHEDULE_DELAY": "100"}
    proc = subprocess.Popen([sys.executable, "-c", "from ctxscope.cli import run; run()", "watch", str(folder),
                             "--state", str(state), "--idle", "20", "--tokenizer", "chars"],
                            env=env, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            lines.append(line)
            if "watching" in line:
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    assert ready.wait(30), "".join(lines)
    return proc, lines


def test_watch_subprocess_killed_and_restarted_loses_and_repeats_nothing(tmp_path):
    """SIGKILL after 3 calls, lines written while it is dead, a restart: the receiver gets 7 calls once, in order."""
    pytest.importorskip("oteltest.sink")
    from _otlp_sink import Receiver, attrs, gauge_points, wait_for

    folder = tmp_path / "projects"
    folder.mkdir()
    path = folder / "session.jsonl"
    state = tmp_path / "state.json"
    with Receiver() as receiver:
        def reported() -> list[int]:
            return [attrs(s.attributes)[Attr.REPORTED_TOKENS] for s in receiver.handler.spans()
                    if s.name.startswith("chat")]

        proc, log = start_watch(folder, state, receiver.endpoint, tmp_path)
        try:
            for line in LINES[:17]:
                append(path, [line])
                time.sleep(0.02)
            wait_for(lambda: len(reported()) == 3, what="".join(log))
            # Killed once the round that exported them saved the state (calls 0-2): a kill before the save
            # would send them again, by design (watcher.py), and this test counts them exactly.
            wait_for(lambda: WatchState.load(state).emitted(SESSION) == 2, what="".join(log))
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            append(path, LINES[17:21])  # calls 4 and 5 are written while no watch runs
            proc, log = start_watch(folder, state, receiver.endpoint, tmp_path)
            for line in LINES[21:]:
                append(path, [line])
                time.sleep(0.02)
            wait_for(lambda: len(reported()) >= 7, what="".join(log))
            # The periodic export (every 0.5 s) shows the last call: the gauges add up to its reported input.
            wait_for(lambda: any(sum(v for a, v in gauge_points(r, Metric.TOKENS.name)
                                     if a[MetricAttr.SESSION_ID] == SESSION) == REPORTED[-1]
                                 for r in list(receiver.handler.metrics)), what="no export of the last call")
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(20) == 0, "".join(log)
        assert reported() == REPORTED
        wait_for(lambda: any(gauge_points(r, Metric.TOKENS.name) for r in receiver.handler.metrics))
        exports = [[v for a, v in gauge_points(r, Metric.TOKENS.name) if a[MetricAttr.SESSION_ID] == SESSION]
                   for r in receiver.handler.metrics]
        exports = [e for e in exports if e]
        assert exports[-1] == [0] * len(exports[-1])  # the stop ended the recording


def test_an_idle_codex_session_flushes_the_call_waiting_for_its_usage(tmp_path):
    """Codex call 2 waits for its token_count; idle ends it without reported input, and it is never emitted twice."""
    codex = (DATA / "codex_turn-2.jsonl").read_bytes().splitlines(keepends=True)
    path = tmp_path / "rollout.jsonl"
    sinks = Sinks()
    w = watcher(tmp_path, sinks, tmp_path / "state.json", idle_s=5)
    w.scan()
    append(path, codex[:23])  # the second reply is written, its token_count (line 24) is not
    w.check(str(path))
    assert sinks.reported() == [1024]
    w.end_idle(now=time.monotonic() + 6)
    calls = sinks.requests()
    assert len(calls) == 2 and Attr.REPORTED_TOKENS not in calls[1].attributes
    assert [s.name for s in sinks.exporter.get_finished_spans()][-1] == "session-end"
    append(path, codex[23:])
    w.check(str(path))
    assert len(sinks.requests()) == 2


def test_follow_stays_pure():
    """The file follower imports neither OpenTelemetry nor a provider SDK."""
    code = ("import sys, ctxscope.transcripts.follow; bad = [m for m in sys.modules if m.split('.')[0] in "
            "('opentelemetry', 'openai', 'anthropic')]; print(bad); sys.exit(1 if bad else 0)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_watch_command_errors_are_one_line(tmp_path, capsys):
    """A folder that is not there, or a bad interval: exit 1 with one line, before anything starts."""
    from ctxscope.cli import main

    assert main(["watch", str(tmp_path / "nope")]) == 1
    assert capsys.readouterr().err.strip() == f"ctxscope: {tmp_path / 'nope'}: no such folder"
    assert main(["watch", str(tmp_path), "--idle", "0"]) == 1
    assert capsys.readouterr().err.strip() == "ctxscope: --idle must be a positive number of seconds, got 0.0"


def test_a_file_truncated_while_no_watch_ran_is_read_again_from_the_start(tmp_path):
    """Rewritten shorter during a restart (same inode): re-read whole, calls 1-3 not repeated, call 4 emitted at
    once."""
    import json

    def slim(lines: list[bytes]) -> list[bytes]:  # the same records without cwd, version, gitBranch
        drop = ("cwd", "version", "gitBranch", "userType")
        return [json.dumps({k: v for k, v in json.loads(x).items() if k not in drop}, separators=(",", ":"),
                           ensure_ascii=False).encode() + b"\n" for x in lines]

    path = tmp_path / "s.jsonl"
    first = Sinks()
    w = watcher(tmp_path, first, tmp_path / "state.json", from_start=True)
    path.write_bytes(b"".join(LINES[:17]))
    w.scan()
    w.close()
    with open(path, "r+b") as handle:
        handle.truncate(0)
        handle.write(b"".join(slim(LINES[:18])))  # call 4 (line 18) included
    assert path.stat().st_size < len(b"".join(LINES[:17]))  # below the offset the first watch saved
    second = Sinks()
    w = watcher(tmp_path, second, tmp_path / "state.json")
    w.scan()
    w.close()
    assert first.reported() == REPORTED[:3] and second.reported() == REPORTED[3:4]


def test_past_max_active_the_least_recent_file_is_let_go_and_nothing_repeats(tmp_path):
    """With one active file allowed, a second writer ends the first's session; the first resumes without repeats."""
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    sinks = Sinks()
    w = watcher(tmp_path, sinks, tmp_path / "state.json", max_active=1)
    w.scan()
    append(a, LINES[:17])
    w.check(str(a))
    codex = (DATA / "codex_turn-2.jsonl").read_bytes()
    b.write_bytes(codex)
    w.check(str(b))
    assert w.active_files() == 1
    names = [s.name for s in sinks.exporter.get_finished_spans()]
    assert names.index("session-end") < len(names) - 1  # a's session ended when b came
    append(a, LINES[17:])
    w.check(str(a))
    w.close()
    assert [r for s, r in zip(sinks.requests(), sinks.reported())
            if s.attributes[GenAI.CONVERSATION_ID] == SESSION] == REPORTED
    assert len(sinks.requests()) == 7 + 2


def test_a_call_emitted_by_two_watches_is_the_same_span(tmp_path):
    """With stable ids (watch) a call's trace and span ids come from its session and index: a second
    emitter writes the same ids for the same calls, every call its own; other spans keep random ids."""
    (tmp_path / "s.jsonl").write_bytes(b"".join(LINES))
    runs = []
    for n in range(2):
        sinks = Sinks(stable_ids=True)
        w = watcher(tmp_path, sinks, tmp_path / f"state-{n}.json", from_start=True)
        w.scan()
        w.close()
        live = sinks.tracers.get_tracer("app").start_span("live")
        live.end()
        runs.append(sinks.exporter.get_finished_spans())
    ids = [[(s.name, s.context.trace_id, s.context.span_id) for s in run if s.name != "live"] for run in runs]
    assert ids[0] == ids[1]
    names = [name for name, _, _ in ids[0]]
    # 7 calls (the first with its capture-start child) and the session's end.
    assert names.count("chat claude-sonnet-4-5-20250929") == 7 and names.count("capture-start") == 1
    assert len({span_id for _, _, span_id in ids[0]}) == len(ids[0]) == 9
    assert len({trace_id for name, trace_id, _ in ids[0] if name.startswith("chat")}) == 7
    (capture,) = [s for s in runs[0] if s.name == "capture-start"]
    assert capture.context.trace_id == runs[0][1].context.trace_id  # a call's children share its trace
    live_ids = [s.context.span_id for run in runs for s in run if s.name == "live"]
    assert live_ids[0] != live_ids[1]
    plain = [Sinks(), Sinks()]
    for sinks in plain:
        sinks.emitter.emit(next(iter_calls(tmp_path / "s.jsonl")))
    assert plain[0].requests()[0].context.span_id != plain[1].requests()[0].context.span_id


def iter_calls(path: Path):
    from ctxscope.transcripts.follow import FollowedFile

    followed = FollowedFile(str(path))
    yield from followed.read()


def test_held_spans_leave_at_the_commit_and_a_long_round_commits_on_the_way(tmp_path, monkeypatch):
    """A watch's emitter holds a round's spans: none is written before the commit, all 7 at it; past
    MAX_HELD held calls (3 here) the round commits before reading on: 6 calls out, the state saved with
    call 5 (index) as the session's mark, before the round ends."""
    from ctxscope.watch import watcher as watcher_module

    (tmp_path / "s.jsonl").write_bytes(b"".join(LINES))
    sinks = Sinks(hold=True)
    w = watcher(tmp_path, sinks, tmp_path / "state.json", from_start=True)
    w.scan()
    assert sinks.reported() == [] and sinks.emitter.held == 7
    w.commit()
    assert sinks.reported() == REPORTED and sinks.emitter.held == 0

    monkeypatch.setattr(watcher_module, "MAX_HELD", 3)
    (tmp_path / "again").mkdir()
    (tmp_path / "again" / "s.jsonl").write_bytes(b"".join(LINES).replace(SESSION.encode(), b"other-session"))
    sinks = Sinks(hold=True)
    w = watcher(tmp_path / "again", sinks, tmp_path / "state-2.json", from_start=True)
    w.scan()
    assert len(sinks.requests()) == 6 and sinks.emitter.held == 1
    assert WatchState.load(tmp_path / "state-2.json").sessions == {"other-session": 5}
