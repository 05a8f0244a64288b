"""Streaming readers of agent transcripts: Claude Code, Codex, message arrays and request bodies.

``TranscriptFile(path).calls()`` yields one :class:`TranscriptCall` per
provider call; :func:`observe_call` feeds one to a
:class:`ctxscope.core.ledger.SessionLedger` as a ``transcript-observed`` snapshot
with ``partial`` coverage (``unrecorded`` for a call without text).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxscope.schema import Stage
from ctxscope.transcripts.detect import UnknownFormat, UnknownFormatError, detect_format, make_reader
from ctxscope.transcripts.model import (FORMAT_CLAUDE_CODE, FORMAT_CODEX, FORMAT_MESSAGES, FORMATS, Compaction,
                    Problem, TranscriptCall)
from ctxscope.transcripts.source import MAX_LINE_BYTES, TimedCall, TranscriptFile

if TYPE_CHECKING:  # pragma: no cover
    from ctxscope.core.ledger import SessionLedger, Snapshot

__all__ = [
    "FORMATS", "FORMAT_CLAUDE_CODE", "FORMAT_CODEX", "FORMAT_MESSAGES", "MAX_LINE_BYTES",
    "Compaction", "Problem", "TimedCall", "TranscriptCall", "TranscriptFile", "UnknownFormat", "UnknownFormatError",
    "detect_format", "make_reader", "observe_call",
]


def observe_call(ledger: "SessionLedger", call: TranscriptCall) -> "Snapshot":
    """The ledger snapshot of one transcript call, with its reported input (SPEC 4, 5)."""
    from ctxscope.core.pipeline import transcript_coverage

    snapshot = ledger.observe(
        call.items, model=call.model, stage=Stage.TRANSCRIPT_OBSERVED, coverage=transcript_coverage(call.items),
        compaction=call.compaction.trigger if call.compaction is not None else None,
        window_tokens=call.window_tokens, timestamp_ns=call.timestamp_ns)
    if call.reported_tokens is not None:
        snapshot = ledger.report(snapshot, call.reported_tokens)
    return snapshot
