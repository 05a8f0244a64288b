"""Following one transcript file as it grows: the transcripts' one reader stack, set up to follow.

:class:`FollowedFile` is :class:`ctxscope.transcripts.TranscriptFile` with
the defaults a follower wants (``watch``: a read per change; ``replay``: one
read with ``final=True``). It reads the JSONL lines appended since its last
read and returns each provider call with the time span it covers in the
transcript (:class:`TimedCall`). Byte-order marks, truncated and oversize
lines, leading records of unknown types: the same rules as ``analyze``,
because it is the same code (:mod:`ctxscope.transcripts.source`).

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

from typing import Callable

from ctxscope.transcripts import Problem
from ctxscope.transcripts.source import TimedCall, TranscriptFile, file_identity

__all__ = ["FollowedFile", "TimedCall", "file_identity"]


class FollowedFile(TranscriptFile):
    """A transcript file followed as it grows; whole-JSON documents only when ``documents``."""

    def __init__(self, path: str, *, format: str | None = None, documents: bool = False,
                 on_problem: Callable[[str, Problem], None] | None = None) -> None:
        super().__init__(path, format, documents=documents, on_problem=on_problem)
