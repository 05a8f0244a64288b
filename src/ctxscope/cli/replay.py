"""``ctxscope replay FILE...``: a transcript's spans and metrics, as if observed live.

Exports through the standard ``OTEL_*`` settings (``ctxscope.setup()``); with
no OTLP endpoint the calls go to the local store (``ctxscope context``).
The recording ends when the replay ends: every series reports 0 once.
Problems in a file are printed one a line (``path:line: message``).
"""

from __future__ import annotations

import argparse
import os
import sys

from ..errors import UserError
from ..tokens import TOKENIZERS
from ..transcripts import FORMATS

SERVICE_NAME = "ctxscope-replay"
MAX_PROBLEMS_SHOWN = 20


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "replay", help="emit a transcript's spans and metrics through OTLP, with its original timestamps",
        description="Replay agent transcripts (Claude Code, Codex) as telemetry: one span per provider "
                    "call with the transcript's timestamps, stage transcript-observed, partial coverage "
                    "and the provider-reported input; compaction and capture-start spans; the "
                    "llm.context.* metrics, reset to 0 when the replay ends. Exporters follow the "
                    "OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL, ...).")
    parser.add_argument("files", nargs="+", metavar="FILE", help="transcript files (JSONL)")
    parser.add_argument("--format", choices=FORMATS, help="force a format instead of sniffing it")
    parser.add_argument("--tokenizer", choices=TOKENIZERS, default="auto",
                        help="counting basis: auto (tiktoken, chars/4 offline), chars, bytes, tiktoken")
    parser.add_argument("--speed", type=float, default=0.0, metavar="X",
                        help="pace calls at X times their original spacing (1 = real time); "
                             "default 0: as fast as possible")
    parser.add_argument("--no-subagents", action="store_true",
                        help="do not add the subagent files found beside a Claude Code session")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..replay import CallEmitter, replay_files
    from .analyze import subagent_files

    if args.speed < 0:
        raise UserError(f"--speed must be 0 (as fast as possible) or more, got {args.speed}")
    paths: list[str] = []
    for path in args.files:
        if not os.path.exists(path):
            raise UserError(f"{path}: no such file")
        if os.path.isdir(path):
            raise UserError(f"{path}: is a directory; pass the transcript files")
        paths.append(path)
        if not args.no_subagents:
            paths.extend(p for p in subagent_files(path) if p not in paths)
    telemetry = _setup()
    try:
        store = telemetry.store
        emitter = CallEmitter.for_provider(telemetry.tracer_provider, tokenizer=args.tokenizer,
                                           listener=store.record if store is not None else None)
        result = replay_files(paths, emitter, format=args.format, speed=args.speed or None)
        telemetry.force_flush()  # the last values go out before the recording ends
        emitter.end_all()
    finally:
        telemetry.shutdown()  # final zeros, then the providers' own shutdown
    for path, problem in result.problems[:MAX_PROBLEMS_SHOWN]:
        where = f"{path}:{problem.line}" if problem.line is not None else path
        print(f"ctxscope: {where}: {problem.message}", file=sys.stderr)
    where = (f"to {telemetry.traces_endpoint or telemetry.metrics_endpoint}" if telemetry.mode == "otlp"
             else "to the local store (no OTLP endpoint set)" if telemetry.store is not None else "nowhere")
    sessions = len(result.sessions)
    print(f"replayed {result.calls} call{'s' * (result.calls != 1)} of {sessions} "
          f"session{'s' * (sessions != 1)} {where}", file=sys.stderr)
    if not result.calls:
        raise UserError("no provider calls in " + ", ".join(args.files))
    return 0


def _setup():  # type: ignore[no-untyped-def]
    from ..export import setup

    try:
        # OTEL_SERVICE_NAME, when set, names the service; otherwise this command does.
        return setup(None if os.environ.get("OTEL_SERVICE_NAME") else SERVICE_NAME, instrument=False,
                     set_global=False)
    except ValueError as exc:
        raise UserError(str(exc)) from None
