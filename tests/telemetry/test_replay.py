"""ctxscope replay: a real Claude Code session (with a compaction) into a real OTLP receiver, and the library."""

from __future__ import annotations

from _paths import TESTS

import datetime as dt
import json

import pytest

pytest.importorskip("oteltest.sink")
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from _otlp_sink import Receiver, attrs, gauge_points, wait_for  # noqa: E402
from ctxscope.cli import main  # noqa: E402
from ctxscope.telemetry.replay import CallEmitter, replay_files  # noqa: E402
from ctxscope.schema import Attr, GenAI, Metric, MetricAttr, Stage  # noqa: E402

DATA = TESTS / "data" / "transcripts"
COMPACTION = DATA / "claude_624a4a58_compaction.jsonl"
SESSION = "624a4a58-b34c-462d-a70d-13421c8125a8"


def ns(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000) * 1_000_000


# By hand from the file: each call's first assistant line (its usage: input + cache creation + cache read),
# the span from the record before it to that line.
EXPECTED = [
    # (start, end, reported)
    ("2026-01-07T20:55:49.661Z", "2026-01-07T20:55:49.661Z", 13 + 603 + 153337),     # line 1: nothing before
    ("2026-01-07T20:55:49.719Z", "2026-01-07T20:55:54.798Z", 12 + 10826 + 143894),   # lines 2 -> 3
    ("2026-01-07T20:56:45.412Z", "2026-01-07T20:57:16.284Z", 10 + 154235 + 0),       # line 6 -> 7 (5 has no time)
    ("2026-01-07T20:57:17.508Z", "2026-01-07T20:57:23.600Z", 13 + 132474 + 23254),   # lines 10 -> 11
    ("2026-01-07T20:58:27.908Z", "2026-01-07T20:58:33.315Z", 10 + 13277 + 23254),    # lines 15 -> 16, compacted
]


@pytest.fixture
def otlp_env(monkeypatch, tmp_path):
    with Receiver() as receiver:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "3600000")
        monkeypatch.setenv("CTXSCOPE_DATA_DIR", str(tmp_path / "data"))
        monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
        yield receiver


def test_replay_sends_one_span_per_call_with_original_times_and_reported_input(otlp_env, capsys):
    """Five request spans with the file's timestamps and reported input, transcript-observed and partial."""
    assert main(["replay", "--tokenizer", "chars", str(COMPACTION)]) == 0
    assert "replayed 5 calls of 1 session to http://127.0.0.1:" in capsys.readouterr().err
    wait_for(lambda: len([s for s in otlp_env.handler.spans() if s.name.startswith("chat")]) == 5)
    requests = sorted((s for s in otlp_env.handler.spans() if s.name.startswith("chat")),
                      key=lambda s: s.start_time_unix_nano)
    assert [(s.start_time_unix_nano, s.end_time_unix_nano) for s in requests] == \
        [(ns(a), ns(b)) for a, b, _ in EXPECTED]
    # The first call has nothing before it in the file (no text): its breakdown was not recorded.
    coverages = ["unrecorded", "partial", "partial", "partial", "partial"]
    for span, (_, _, reported), coverage in zip(requests, EXPECTED, coverages):
        a = attrs(span.attributes)
        assert span.name == "chat claude-sonnet-4-5-20250929" and span.kind == 3  # SPAN_KIND_CLIENT
        assert a[GenAI.CONVERSATION_ID] == SESSION and a[GenAI.PROVIDER_NAME] == "anthropic"
        assert a[Attr.STAGE] == "transcript-observed" and a[Attr.COVERAGE] == coverage
        assert a[Attr.REPORTED_TOKENS] == reported and a[GenAI.USAGE_INPUT_TOKENS] == reported
    resource = attrs(otlp_env.handler.traces[0].resource_spans[0].resource.attributes)
    assert resource["service.name"] == "ctxscope-replay"


def test_replay_marks_capture_start_and_the_compaction(otlp_env):
    """A capture-start span at the first call; a post-compaction span (auto) under the fifth call."""
    assert main(["replay", "--tokenizer", "chars", str(COMPACTION)]) == 0
    wait_for(lambda: len(otlp_env.handler.spans()) >= 8)
    spans = otlp_env.handler.spans()
    by_name: dict[str, list] = {}
    for span in spans:
        by_name.setdefault(span.name, []).append(span)
    (capture,) = by_name[Stage.CAPTURE_START.value]
    (post,) = by_name[Stage.POST_COMPACTION.value]
    requests = sorted(by_name["chat claude-sonnet-4-5-20250929"], key=lambda s: s.start_time_unix_nano)
    assert capture.parent_span_id == requests[0].span_id and capture.start_time_unix_nano == ns(EXPECTED[0][0])
    assert post.parent_span_id == requests[4].span_id
    assert post.start_time_unix_nano == ns("2026-01-07T20:58:27.908Z")
    p = attrs(post.attributes)
    assert p[Attr.STAGE] == "post-compaction" and p[Attr.COMPACTION_TRIGGER] == "auto"
    assert p[GenAI.CONVERSATION_ID] == SESSION
    assert attrs(requests[4].attributes)[Attr.BASELINE] is True  # a compaction starts a new baseline
    assert attrs(requests[3].attributes)[Attr.BASELINE] is False
    (end,) = by_name["session-end"]
    assert attrs(end.attributes)[GenAI.CONVERSATION_ID] == SESSION


def test_replay_metrics_show_the_last_call_then_end_at_zero(otlp_env):
    """Tokens sum to the last reported input (36,541), then every series of the session reports 0."""
    assert main(["replay", "--tokenizer", "chars", str(COMPACTION)]) == 0

    def session_points(request, name):
        return [(a, v) for a, v in gauge_points(request, name) if a.get(MetricAttr.SESSION_ID) == SESSION]

    wait_for(lambda: sum(1 for r in otlp_env.handler.metrics if session_points(r, Metric.TOKENS.name)) >= 2)
    exports = [r for r in otlp_env.handler.metrics if session_points(r, Metric.TOKENS.name)]
    live, final = exports[0], exports[-1]
    # The calibrated view: estimates below the reported input, unattributed takes the rest.
    assert sum(v for _, v in session_points(live, Metric.TOKENS.name)) == 36541
    assert session_points(live, Metric.REPORTED_TOKENS.name)[0][1] == 36541
    assert {a[MetricAttr.CATEGORY] for a, _ in session_points(live, Metric.TOKENS.name)} >= {"unattributed"}
    assert [v for _, v in session_points(final, Metric.TOKENS.name)] == \
        [0] * len(session_points(live, Metric.TOKENS.name))
    assert [v for _, v in session_points(final, Metric.REPORTED_TOKENS.name)] == [0]
    compactions = [p for r in otlp_env.handler.metrics for rm in r.resource_metrics for sm in rm.scope_metrics
                   for m in sm.metrics if m.name == Metric.COMPACTIONS.name for p in m.sum.data_points]
    assert compactions and compactions[-1].as_int == 1


def in_memory() -> tuple[CallEmitter, InMemorySpanExporter]:
    provider = TracerProvider()
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return CallEmitter.for_provider(provider, tokenizer="chars"), exporter


def test_a_subagent_is_a_session_of_its_own():
    """The subagent file's calls carry their own conversation id, never the parent's."""
    emitter, exporter = in_memory()
    result = replay_files([str(DATA / "claude_4c2ddfdc.jsonl"), str(DATA / "claude_agent-36541525.jsonl")],
                          emitter)
    ids = {s.attributes[GenAI.CONVERSATION_ID] for s in exporter.get_finished_spans() if s.name.startswith("chat")}
    assert ids == {"4c2ddfdc-b619-4525-8d03-1950fb1b0257", "4c2ddfdc-b619-4525-8d03-1950fb1b0257/agent-36541525"}
    assert result.sessions == sorted(ids)


def test_speed_paces_calls_by_their_original_spacing():
    """--speed 2 waits half the gap between the Codex file's two calls (59.5 s -> 29.75 s)."""
    emitter, exporter = in_memory()
    waits: list[float] = []
    result = replay_files([str(DATA / "codex_turn-2.jsonl")], emitter, speed=2.0, sleep=waits.append)
    assert result.calls == 2 and waits == [pytest.approx(29.75)]
    reported = [s.attributes[Attr.REPORTED_TOKENS] for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert reported == [1024, 1100]  # last_token_usage.input_tokens of the two token_count events


def test_bad_input_is_one_line_naming_the_file(tmp_path, capsys, monkeypatch):
    """A missing file and a file with no calls: exit 1, one line each, no traceback."""
    monkeypatch.setenv("CTXSCOPE_DATA_DIR", str(tmp_path / "data"))
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert main(["replay", str(tmp_path / "nope.jsonl")]) == 1
    assert capsys.readouterr().err.strip() == f"ctxscope: {tmp_path / 'nope.jsonl'}: no such file"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"hello": 1}\n')
    assert main(["replay", str(bad)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith(f"ctxscope: {bad}:1: unrecognised transcript format")
    assert err[-1] == f"ctxscope: no provider calls in {bad}"
    assert "Traceback" not in "\n".join(err)


def test_spans_carry_counts_and_identities_not_content():
    """No prompt, tool argument or result text of the transcript reaches a span attribute or event (SPEC 7)."""
    emitter, exporter = in_memory()
    replay_files([str(DATA / "claude_4c2ddfdc.jsonl")], emitter)
    values = []
    for span in exporter.get_finished_spans():
        values.extend(str(v) for v in span.attributes.values())
        values.extend(str(v) for e in span.events for v in e.attributes.values())
    text = "\n".join(values)
    assert len(values) > 100
    for sentinel in ("create hello.py, md and js", "update py with one liner comment", "Hello, World!",
                     "hello.py"):  # a prompt, a prompt, a file body, a path in a tool argument
        assert sentinel not in text


def test_a_replay_faster_than_the_exporter_loses_no_span(otlp_env, tmp_path, monkeypatch):
    """300 calls replayed through a batch span processor whose queue holds 8 spans, on a schedule that
    never fires: without the replay's flushes the SDK drops whatever finds the queue full. Every call
    arrives: 300 chat spans, plus the one capture-start marker at the session's first call."""
    from ctxscope.telemetry.replay import span_flush_interval

    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "8")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "8")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
    assert span_flush_interval() == 2  # a quarter of the queue, in calls: at most 3 spans a call
    lines, parent = [], None
    for n in range(300):
        stamp = f"2026-02-11T10:{n // 60:02d}:{n % 60:02d}.000Z"
        user = {"type": "user", "uuid": f"u{n}", "parentUuid": parent, "sessionId": "fast-session",
                "timestamp": stamp, "message": {"role": "user", "content": f"question {n}"}}
        answer = {"type": "assistant", "uuid": f"a{n}", "parentUuid": f"u{n}", "sessionId": "fast-session",
                  "timestamp": stamp, "requestId": f"req{n}",
                  "message": {"id": f"msg{n}", "role": "assistant", "model": "claude-sonnet-4-5",
                              "content": [{"type": "text", "text": f"answer {n}"}],
                              "usage": {"input_tokens": 100 + n, "output_tokens": 1}}}
        lines += [json.dumps(user), json.dumps(answer)]
        parent = f"a{n}"
    path = tmp_path / "fast-session.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert main(["replay", "--tokenizer", "chars", str(path)]) == 0
    names = [s.name for s in otlp_env.handler.spans()]
    assert names.count("chat claude-sonnet-4-5") == 300
    assert len({attrs(s.attributes)[GenAI.USAGE_INPUT_TOKENS] for s in otlp_env.handler.spans()
                if s.name.startswith("chat")}) == 300  # each call once: 100 .. 399
    assert sum(1 for name in names if "capture" in name) == 1


def test_the_flush_interval_follows_the_queue_size():
    from ctxscope.telemetry.replay import span_flush_interval

    assert span_flush_interval({}) == 512  # the SDK's default queue, 2048
    assert span_flush_interval({"OTEL_BSP_MAX_QUEUE_SIZE": "100"}) == 25
    assert span_flush_interval({"OTEL_BSP_MAX_QUEUE_SIZE": "3"}) == 1
    assert span_flush_interval({"OTEL_BSP_MAX_QUEUE_SIZE": "lots"}) == 512


def test_ending_many_sessions_at_once_loses_no_marker(otlp_env, tmp_path, monkeypatch):
    """30 one-call sessions through an 8-span queue: the 30 session-end markers written when the
    recording ends all arrive, as do the 30 calls."""
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "8")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "8")
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "600000")
    paths = []
    for n in range(30):
        session = f"many-{n}"
        user = {"type": "user", "uuid": f"u{n}", "parentUuid": None, "sessionId": session,
                "timestamp": "2026-02-11T10:00:00.000Z", "message": {"role": "user", "content": "hello"}}
        answer = {"type": "assistant", "uuid": f"a{n}", "parentUuid": f"u{n}", "sessionId": session,
                  "timestamp": "2026-02-11T10:00:01.000Z", "requestId": f"req{n}",
                  "message": {"id": f"msg{n}", "role": "assistant", "model": "claude-sonnet-4-5",
                              "content": [{"type": "text", "text": "hi"}],
                              "usage": {"input_tokens": 100, "output_tokens": 1}}}
        path = tmp_path / f"{session}.jsonl"
        path.write_text(json.dumps(user) + "\n" + json.dumps(answer) + "\n")
        paths.append(str(path))
    assert main(["replay", "--tokenizer", "chars", *paths]) == 0
    spans = otlp_env.handler.spans()
    assert sum(1 for s in spans if s.name == "chat claude-sonnet-4-5") == 30
    ended = {attrs(s.attributes)[GenAI.CONVERSATION_ID] for s in spans
             if attrs(s.attributes).get(Attr.SESSION_ENDED)}
    assert ended == {f"many-{n}" for n in range(30)}


def test_the_spans_are_flushed_only_when_the_batch_queue_is_half_full():
    """Given the batch processor's queue, the replay flushes after a call only when less than half of it
    is free: a queue of 10 holding 5 spans is never flushed over the file's 5 calls, one holding 6 after
    each of them; the SDK's batch processor's own queue (2,048) is found, a simple processor has none."""
    from functools import partial

    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from ctxscope.telemetry.replay import span_queue

    for held, flushes in ((5, 0), (6, 5)):
        emitter, _ = in_memory()
        flushed: list[int] = []
        result = replay_files([str(COMPACTION)], emitter, flush_spans=partial(flushed.append, 1),
                              queue=(["span"] * held, 10))
        assert result.calls == 5
        assert len(flushed) == flushes
    batch = BatchSpanProcessor(InMemorySpanExporter())
    try:
        found = span_queue(batch)
        assert found is not None and found[1] == 2048 and len(found[0]) == 0
    finally:
        batch.shutdown()
    assert span_queue(SimpleSpanProcessor(InMemorySpanExporter())) is None
