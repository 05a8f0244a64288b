"""The scripted agent of the end-to-end tests, as a program run under ``opentelemetry-instrument``.

Telemetry is whatever the ``OTEL_*`` environment configures (with
``OTEL_PYTHON_CONFIGURATOR=ctxscope``, ctxscope's span processor sits on the
global tracer provider): the SDK's Prometheus reader, OTLP to a Collector or
straight to a backend. The agent plays :data:`prometheus_helpers.SESSIONS`
(the scenario whose values the tests work out by hand) on commands read from
stdin, one a line, and answers each with ``ok <command>`` once done:

- ``all-but-last``: every session's turns but its last;
- ``last``: each session's last turn (the one that crosses the thresholds);
- ``turn N``: turn N (from 0) of each session that has one (for pictures, turn by turn);
- ``end``: the recording ends (every session's series report 0 once, then leave);
- ``traces``: the trace id of each span played so far, as JSON (``ok traces {...}``);
- ``quit``: exit (the SDK flushes on exit).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor  # noqa: E402

from ctxscope.telemetry.processor import installed_processor  # noqa: E402
from prometheus_helpers import SESSIONS, play_all, play_turn  # noqa: E402


class _Ids(SpanProcessor):
    """Keeps (session, span name, trace id, span id) of every ended span, for the trace tests."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []

    def on_end(self, span: ReadableSpan) -> None:
        ctx = span.get_span_context()
        self.spans.append({"session": span.attributes.get("gen_ai.conversation.id"), "name": span.name,
                           "trace_id": format(ctx.trace_id, "032x"), "span_id": format(ctx.span_id, "016x")})


def main() -> int:
    provider = trace.get_tracer_provider()
    ids = _Ids()
    provider.add_span_processor(ids)
    tracer = provider.get_tracer("ctxscope-e2e")
    processor = installed_processor(provider)
    if processor is None:
        print("error: no ctxscope processor on the tracer provider (OTEL_PYTHON_CONFIGURATOR=ctxscope?)", flush=True)
        return 1
    for line in sys.stdin:
        command = line.strip()
        reply = ""
        if command == "all-but-last":
            play_all(tracer, upto=-1)
        elif command == "last":
            for session in SESSIONS:
                play_turn(tracer, session, session.turns[-1])
        elif command.startswith("turn "):
            index = int(command.split()[1])
            for session in SESSIONS:
                if index < len(session.turns):
                    play_turn(tracer, session, session.turns[index])
        elif command == "end":
            processor.stop()
        elif command == "traces":
            provider.force_flush()
            reply = " " + json.dumps(ids.spans)
        elif command == "quit":
            print("ok quit", flush=True)
            return 0
        else:
            print(f"error: unknown command {command!r}", flush=True)
            continue
        print(f"ok {command}{reply}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
