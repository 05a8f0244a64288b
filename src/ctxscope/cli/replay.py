"""``ctxscope replay FILE...``: a transcript's spans and metrics, as if observed live.

Exports through the standard ``OTEL_*`` settings (``ctxscope.setup()``); with
no OTLP endpoint the calls go to the local store (``ctxscope context``).
The recording ends when the replay ends: every series reports 0 once.
Telemetry not delivered (an export failed, e.g. the endpoint unreachable) is one line and exit 1.
Problems in a file are printed one a line (``path:line: message``).
"""

from __future__ import annotations

import argparse
import sys

from ctxscope.errors import UserError
from ctxscope.gc_pause import cyclic_gc_paused
from ctxscope.cli._common import (MAX_PROBLEMS_SHOWN, add_transcript_options, emitter_for, export_setup, print_problem,
                      transcript_paths)

SERVICE_NAME = "ctxscope-replay"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "replay", help="emit a transcript's spans and metrics through OTLP, with its original timestamps",
        description="Replay agent transcripts (Claude Code, Codex) as telemetry: one span per provider "
                    "call with the transcript's timestamps, stage transcript-observed, partial coverage "
                    "and the provider-reported input; compaction and capture-start spans; the "
                    "llm.context.* metrics, reset to 0 when the replay ends. Exporters follow the "
                    "OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL, ...). "
                    "Each export may take CTXSCOPE_REPLAY_EXPORT_TIMEOUT_MS (default 3000) unless "
                    "OTEL_EXPORTER_OTLP_TIMEOUT is set; after an export that failed once its retries had "
                    "waited (the endpoint unreachable) nothing more is sent; a batch rejected at once "
                    "costs that batch only; one line says what was not delivered, and the exit status is 1.")
    parser.add_argument("files", nargs="+", metavar="FILE", help="transcript files (JSONL)")
    add_transcript_options(parser)
    parser.add_argument("--speed", type=float, default=0.0, metavar="X",
                        help="pace calls at X times their original spacing (1 = real time); "
                             "default 0: as fast as possible")
    parser.add_argument("--no-subagents", action="store_true",
                        help="do not add the subagent files found beside a Claude Code session")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    # The collector paused for the whole command, the set-up's imports and the exports and
    # shutdown after the reading included, then what the replay made frozen, not scanned:
    # it lives until the process ends (gc_pause).
    with cyclic_gc_paused(freeze=True):
        return _run(args)


def export_timeout_s() -> float | None:
    """Each export's time, retries included: ``CTXSCOPE_REPLAY_EXPORT_TIMEOUT_MS`` (0: the exporters'
    own), unless an ``OTEL_EXPORTER_OTLP[_TRACES|_METRICS]_TIMEOUT`` sets the exporters' own."""
    from opentelemetry.sdk.environment_variables import (
        OTEL_EXPORTER_OTLP_METRICS_TIMEOUT,
        OTEL_EXPORTER_OTLP_TIMEOUT,
        OTEL_EXPORTER_OTLP_TRACES_TIMEOUT,
    )

    from ctxscope.config import otel, settings

    if otel(None, OTEL_EXPORTER_OTLP_TIMEOUT, OTEL_EXPORTER_OTLP_TRACES_TIMEOUT, OTEL_EXPORTER_OTLP_METRICS_TIMEOUT):
        return None
    return settings().replay_export_timeout_ms / 1000 or None


def _run(args: argparse.Namespace) -> int:
    from ctxscope.telemetry.delivery import Delivery
    from ctxscope.telemetry.replay import replay_files, span_queue

    if args.speed < 0:
        raise UserError(f"--speed must be 0 (as fast as possible) or more, got {args.speed}")
    paths = transcript_paths(args.files, subagents=not args.no_subagents)
    telemetry = export_setup(SERVICE_NAME, timeout_s=export_timeout_s())
    # A replay's job is the export: after one that failed waiting it sends nothing more, and says so once (delivery).
    delivery = Delivery.watch(telemetry)
    with delivery.quiet():
        try:
            emitter = emitter_for(telemetry, args.tokenizer)
            result = replay_files(paths, emitter, format=args.format, speed=args.speed or None,
                                  flush_spans=telemetry.tracer_provider.force_flush,
                                  queue=span_queue(telemetry.span_processor))
            telemetry.force_flush()  # the last values go out before the recording ends
            emitter.end_all(flush_spans=telemetry.tracer_provider.force_flush)
        finally:
            # Final zeros, then the providers' own shutdown, the exports under way waited for: only
            # what was really not delivered is said, once (delivery).
            delivery.end(telemetry)
    for path, problem in result.problems[:MAX_PROBLEMS_SHOWN]:
        print_problem(path, problem)
    where = (f"to {telemetry.traces_endpoint or telemetry.metrics_endpoint}" if telemetry.mode == "otlp"
             else "to the local store (no OTLP endpoint set)" if telemetry.store is not None else "nowhere")
    sessions = len(result.sessions)
    print(f"replayed {result.calls} call{'s' * (result.calls != 1)} of {sessions} "
          f"session{'s' * (sessions != 1)} {where}", file=sys.stderr)
    if not result.calls:
        raise UserError("no provider calls in " + ", ".join(args.files))
    undelivered = delivery.problem()
    if undelivered is not None:
        raise UserError(undelivered)
    return 0
