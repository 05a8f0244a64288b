"""`ctxscope watch` killed with SIGKILL (issue 17, point 1): every call exported exactly once, into a real receiver.

The Codex fixture (``codex_stage0_small_cli0.146.jsonl``, Codex CLI 0.146) has
8 calls of which only call 2 has a ``token_count``: the last call waits for
one that never comes. Before the fix the watch saved an offset past it, and
a watch killed and restarted on the unchanged file never exported it.
"""

from __future__ import annotations

from _paths import TESTS

import difflib
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from ctxscope.schema import Attr, GenAI
from ctxscope.watch import WatchState

DATA = TESTS / "data" / "transcripts"
CODEX = DATA / "codex_stage0_small_cli0.146.jsonl"
CLAUDE = DATA / "claude_4c2ddfdc.jsonl"
CODEX_SESSION = "019fc8be-3658-7ca3-9e29-000000000000"
CLAUDE_SESSION = "4c2ddfdc-b619-4525-8d03-1950fb1b0257"

pytest.importorskip("oteltest.sink")


def start_watch(folder: Path, state: Path, endpoint: str, tmp_path: Path, *extra: str) -> tuple[subprocess.Popen,
                                                                                                 list[str]]:
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
           "OTEL_METRICS_EXPORTER": "none", "CTXSCOPE_DATA_DIR": str(tmp_path / "data"),
           "OTEL_BSP_SCHEDULE_DELAY": "50"}
    proc = subprocess.Popen([sys.executable, "-c", "from ctxscope.cli import run; run()", "watch", str(folder),
                             "--from-start", "--state", str(state), "--tokenizer", "chars", *extra],
                            env=env, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        for line in proc.stderr:  # type: ignore[union-attr]
            lines.append(line)
            if "watching" in line:
                ready.set()

    threading.Thread(target=read, daemon=True).start()
    assert ready.wait(60), "".join(lines)
    return proc, lines


def calls(receiver) -> list[tuple[str, int, bool, bool]]:
    """(session, estimated tokens, has reported input, usage_missing) of every chat span received: a call's
    identity here."""
    from _otlp_sink import attrs

    out = []
    for span in receiver.handler.spans():
        if span.name.startswith("chat"):
            a = attrs(span.attributes)
            out.append((a[GenAI.CONVERSATION_ID], a[Attr.ESTIMATED_TOKENS], Attr.REPORTED_TOKENS in a,
                        a.get(Attr.USAGE_MISSING, False)))
    return out


def by_span_id(receiver) -> tuple[Counter, Counter]:
    """The chat spans received once per (trace id, span id), as calls() names them, and how often each id
    came. Asserts what makes a repeat harmless: one id is one call, every copy the same span."""
    from _otlp_sink import attrs

    first: dict[tuple[bytes, bytes], object] = {}
    copies: Counter = Counter()
    for span in receiver.handler.spans():
        if not span.name.startswith("chat"):
            continue
        key = (span.trace_id, span.span_id)
        copies[key] += 1
        if key in first:
            assert span == first[key], "a repeated span id carries another span:\n" + "\n".join(
                difflib.unified_diff(str(first[key]).splitlines(), str(span).splitlines(), lineterm=""))
        first[key] = span
    once = Counter()
    for span in first.values():
        a = attrs(span.attributes)  # type: ignore[attr-defined]
        once[(a[GenAI.CONVERSATION_ID], a[Attr.ESTIMATED_TOKENS], Attr.REPORTED_TOKENS in a,
              a.get(Attr.USAGE_MISSING, False))] += 1
    return once, copies


def expected_calls(paths: list[Path]) -> Counter:
    """The calls an uninterrupted watch exports for these files (in-process, chars/4), as calls() names them."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from ctxscope.telemetry.replay import CallEmitter
    from ctxscope.transcripts.follow import FollowedFile

    exporter = InMemorySpanExporter()
    tracers = TracerProvider()
    tracers.add_span_processor(SimpleSpanProcessor(exporter))
    emitter = CallEmitter.for_provider(tracers, tokenizer="chars")
    for path in paths:
        followed = FollowedFile(str(path))
        for timed in followed.read() + followed.finish():
            emitter.emit(timed)
    return Counter((s.attributes[GenAI.CONVERSATION_ID], s.attributes[Attr.ESTIMATED_TOKENS],
                    Attr.REPORTED_TOKENS in s.attributes, s.attributes.get(Attr.USAGE_MISSING, False))
                   for s in exporter.get_finished_spans() if s.name.startswith("chat"))


def test_a_codex_call_without_token_count_survives_a_kill_and_restart(tmp_path):
    """The reported case: the file copied in, watch killed -9 after it read all, restarted, stopped with TERM.

    Was 7 of 8 calls; now 8, the last without reported input, none twice.
    """
    from _otlp_sink import Receiver, wait_for

    folder = tmp_path / "sessions"
    folder.mkdir()
    state = tmp_path / "state.json"
    (folder / CODEX.name).write_bytes(CODEX.read_bytes())
    with Receiver() as receiver:
        proc, log = start_watch(folder, state, receiver.endpoint, tmp_path)
        wait_for(lambda: len(calls(receiver)) == 7, what="".join(log))
        # Past the round's state save (calls 0-6 marked): a kill between the export and the save sends
        # them again, by design (watcher.py), and this test counts them exactly.
        wait_for(lambda: WatchState.load(state).emitted(CODEX_SESSION) == 6, what="".join(log))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        proc, log = start_watch(folder, state, receiver.endpoint, tmp_path)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0, "".join(log)
        got = calls(receiver)
    assert Counter(got) == expected_calls([CODEX])
    assert len(got) == 8 and got[-1][0] == CODEX_SESSION
    assert got[-1][2:] == (False, True)  # no reported input, and the span says its usage is missing
    assert [c[3] for c in got].count(False) == 1  # only call 2 has a token_count


def test_20_sigkills_while_a_writer_appends_every_call_exactly_once(tmp_path):
    """A writer appends a Claude Code session (7 calls) and a Codex rollout (8 calls, the last without its
    token_count) line by line while `watch` is killed with SIGKILL 20 times at random moments and restarted;
    a last watch stops with TERM. The receiver holds each of the 15 calls exactly once.

    Exactly once on the wire is luck for a kill that falls between an export and the state's save (a
    few milliseconds a round; 1 run in ~10 under load caught one): there a call is sent again, as the
    same span (same ids, same attributes). So the calls are counted once per span id, and a repeat
    must be that same span (test_a_kill_at_each_step_... makes each case exact)."""
    from _otlp_sink import Receiver

    folder = tmp_path / "projects"
    folder.mkdir()
    state = tmp_path / "state.json"
    sources = {folder / "claude" / "4c2ddfdc.jsonl": CLAUDE, folder / "codex" / "rollout.jsonl": CODEX}
    pending = {dest: src.read_bytes().splitlines(keepends=True) for dest, src in sources.items()}
    for dest in sources:
        dest.parent.mkdir()
        dest.touch()
    rng = random.Random(1717)
    done = threading.Event()

    def writer() -> None:
        # 145 lines over ~12 s, the two files interleaved, a few lines at a time.
        while any(pending.values()):
            for dest, lines in pending.items():
                with open(dest, "ab") as handle:
                    for _ in range(min(len(lines), rng.randint(1, 4))):
                        handle.write(lines.pop(0))
            time.sleep(rng.uniform(0.05, 0.25))
        done.set()

    with Receiver() as receiver:
        thread = threading.Thread(target=writer, daemon=True)
        thread.start()
        for _ in range(20):
            proc, log = start_watch(folder, state, receiver.endpoint, tmp_path)
            time.sleep(rng.uniform(0.0, 0.4))
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        assert done.wait(60), "the writer did not finish"
        proc, log = start_watch(folder, state, receiver.endpoint, tmp_path)
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, "".join(log)
        once, copies = by_span_id(receiver)
    expected = expected_calls([CLAUDE, CODEX])
    assert sum(expected.values()) == 15
    assert once == expected, (sorted(once.items()), sorted(expected.items()))
    assert len(copies) == 15  # and no call under two ids


def run_killed(folder: Path, state: Path, endpoint: str, tmp_path: Path, step: str | None) -> None:
    """One watch: killed by its own fault hook at ``step`` of its first commit that releases calls (it dies
    before it says it is watching), or with no step, run until it watches and stopped with TERM."""
    env = {**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
           "OTEL_METRICS_EXPORTER": "none", "CTXSCOPE_DATA_DIR": str(tmp_path / "data")}
    env.pop("OTEL_BSP_SCHEDULE_DELAY", None)  # the SDK's 5 s: nothing leaves before the commit's flush
    if step is None:
        proc, log = start_watch(folder, state, endpoint, tmp_path)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, "".join(log)
        return
    env["CTXSCOPE_WATCH_KILL_AT"] = step
    proc = subprocess.run([sys.executable, "-c", "from ctxscope.cli import run; run()", "watch", str(folder),
                           "--from-start", "--state", str(state), "--tokenizer", "chars"],
                          env=env, stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr


# Each file in three parts of whole lines, by hand from the files: Claude Code's calls end on lines 3, 13,
# 16, 18, 20, 23, 25, so lines 1-15, 16-22, 23-25 complete calls 0-1, 2-4, 5-6; Codex's calls are complete
# on lines 12, 14, 22 (its token_count), 26, 47, 69, 111, and call 7 only when the watch stops (no
# token_count), so lines 1-22, 23-69, 70-118 give calls 0-2, 3-5, 6 (and 7 at the last watch's stop).
CUTS = {CLAUDE: (15, 22), CODEX: (22, 69)}


@pytest.mark.parametrize("step", ["released", "exported", "saved"])
def test_a_kill_at_each_step_repeats_nothing_or_repeats_the_same_span(tmp_path, step):
    """Part one is read and saved by a watch killed after its save; parts two and three each by a watch
    killed at ``step`` of the commit that exports them; a last watch stops with TERM.

    released (spans written, not exported) and saved: every call exactly once on the wire. exported
    (sent, the state not saved): the killed commits' calls are sent again by the next watch, the same
    spans: part two's 6 calls come 3 times (its own watch, part three's, the last), part three's 3 calls
    twice, part one's 5 and Codex's call 7 (at the last stop) once; counted per span id, every call once."""
    from _otlp_sink import Receiver

    folder = tmp_path / "projects"
    folder.mkdir()
    state = tmp_path / "state.json"
    lines = {src: src.read_bytes().splitlines(keepends=True) for src in CUTS}
    parts = {src: (lines[src][:a], lines[src][a:b], lines[src][b:]) for src, (a, b) in CUTS.items()}
    dests = {CLAUDE: folder / "claude" / "4c2ddfdc.jsonl", CODEX: folder / "codex" / "rollout.jsonl"}
    for dest in dests.values():
        dest.parent.mkdir()
    with Receiver() as receiver:
        for part, kill in enumerate(("saved", step, step)):
            for src, dest in dests.items():
                with open(dest, "ab") as handle:
                    handle.writelines(parts[src][part])
            run_killed(folder, state, receiver.endpoint, tmp_path, kill)
        run_killed(folder, state, receiver.endpoint, tmp_path, None)
        once, copies = by_span_id(receiver)
        raw = Counter(calls(receiver))
    expected = expected_calls([CLAUDE, CODEX])
    assert once == expected, (sorted(once.items()), sorted(expected.items()))
    assert len(copies) == 15
    if step == "exported":
        assert sorted(copies.values()) == [1] * 6 + [2] * 3 + [3] * 6, copies
    else:
        assert raw == expected and set(copies.values()) == {1}
