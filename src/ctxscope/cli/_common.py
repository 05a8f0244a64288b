"""What several commands share: transcript options and paths, problem lines, the exporting set-up.

Not a command (``cli.COMMANDS`` does not list it).
"""

from __future__ import annotations

import os

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ctxscope.core.bounded_input import check_regular
from ctxscope.errors import UserError
from ctxscope.core.tokens import TOKENIZERS
from ctxscope.transcripts import FORMATS

if TYPE_CHECKING:  # pragma: no cover
    from ctxscope.telemetry.setup import Telemetry
    from ctxscope.telemetry.replay import CallEmitter
    from ctxscope.transcripts.model import Problem

MAX_PROBLEMS_SHOWN = 20


def add_transcript_options(parser: argparse.ArgumentParser) -> None:
    """``--format`` and ``--tokenizer``, as every command reading transcripts takes them."""
    parser.add_argument("--format", choices=FORMATS, help="force a format instead of sniffing it")
    add_tokenizer(parser)


def add_tokenizer(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tokenizer", choices=TOKENIZERS, default="auto",
                        help="counting basis: auto (tiktoken, chars/4 offline), chars, bytes, tiktoken")


def transcript_paths(files: list[str], *, subagents: bool) -> list[str]:
    """The files to read: each given one (which must exist and be a file), then its subagent files."""
    from ctxscope.cli.analyze import subagent_files

    paths: list[str] = []
    for path in files:
        if not os.path.exists(path):
            raise UserError(f"{path}: no such file")
        if os.path.isdir(path):
            raise UserError(f"{path}: is a directory; pass the transcript files")
        check_regular(path)  # a FIFO would block and a device never end: refused unread
        paths.append(path)
        if subagents:
            paths.extend(p for p in subagent_files(path) if p not in paths)
    return paths


def print_problem(path: str, problem: "Problem") -> None:
    """One line on stderr: ``ctxscope: path:line: message``."""
    where = f"{path}:{problem.line}" if problem.line is not None else path
    print(f"ctxscope: {where}: {problem.message}", file=sys.stderr)


def check_ratio(value: float | None) -> None:
    """``--fail-over-ratio`` is a share (0-1) when given."""
    if value is not None and not 0 <= value <= 1:
        raise UserError(f"--fail-over-ratio must be between 0 and 1, got {value}")


def export_setup(service_name: str, timeout_s: float | None = None) -> "Telemetry":
    """``ctxscope.setup()`` for a command that exports calls it reads (no instrumentation, not global).

    ``OTEL_SERVICE_NAME``, when set, names the service; otherwise the command does. ``timeout_s``: each
    export's, retries included (None: the exporters' own, ``OTEL_EXPORTER_OTLP_*TIMEOUT``).
    """
    from opentelemetry.sdk.environment_variables import OTEL_SERVICE_NAME

    from ctxscope.config import otel
    from ctxscope.telemetry.setup import setup

    try:
        return setup(None if otel(None, OTEL_SERVICE_NAME) else service_name, instrument=False,
                     set_global=False, timeout_s=timeout_s)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def emitter_for(telemetry: "Telemetry", tokenizer: str, *, stable_ids: bool = False,
                hold: bool = False) -> "CallEmitter":
    """The call emitter writing to ``telemetry``, and to its local store when there is one
    (``stable_ids``, ``hold``: see :class:`~ctxscope.telemetry.replay.CallEmitter`)."""
    from ctxscope.telemetry.replay import CallEmitter

    store: Any = telemetry.store
    return CallEmitter.for_provider(telemetry.tracer_provider, tokenizer=tokenizer,
                                    listener=store.record if store is not None else None,
                                    stable_ids=stable_ids, hold=hold)
