"""Following one transcript file as it grows: complete lines -> timed calls.

:class:`FollowedFile` reads the JSONL lines appended since its last read,
feeds them to the format's reader (:mod:`ctxscope.transcripts`) and returns
each provider call with the time span it covers in the transcript. Used by
``replay`` (one read, ``final=True``) and ``watch`` (a read per change).

- A last line without its newline is not taken: it may be half written. It
  is read again, whole, once its newline arrives (``final`` takes it as is).
- No file handle stays open between reads (hundreds of files are watched).
- ``identity`` (device, inode) and ``offset`` let the caller notice a file
  replaced (new inode) or truncated (size below the offset) and start anew.
- ``resume_offset`` is where a follower that saves its place may say it got
  to: before the first line of a call the reader still holds (a Codex call
  waiting for its ``token_count``), else ``offset``.

A call's time span: it starts at the timestamp of the last record before
the call's first record (the request was sent once its context was written)
and ends at the call's own timestamp (the response's first record). Without
an earlier timestamp, or with one after the call's, the span has no length.

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterator

from .transcripts import MAX_LINE_BYTES, Problem, TranscriptCall, UnknownFormat, detect_format, make_reader
from .transcripts.model import Reader, loads, parse_timestamp_ns

__all__ = ["FollowedFile", "TimedCall", "file_identity"]

# The sniffing needs the first record; read this much of the file at most to find it.
_HEAD_BYTES = 1 << 20
_MAX_LINE_TIMES = 4096


@dataclass(slots=True)
class TimedCall:
    """A call of the transcript and the nanosecond times its span covers."""

    call: TranscriptCall
    start_ns: int | None
    end_ns: int | None
    end_offset: int  # byte offset just past the line that completed the call


def file_identity(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


class FollowedFile:
    """The reading state of one transcript file: reader, byte offset, line number."""

    def __init__(self, path: str, *, format: str | None = None, documents: bool = False,
                 on_problem: Callable[[str, Problem], None] | None = None) -> None:
        self.path = path
        self.forced_format = format
        self.format: str | None = None
        self.reader: Reader | None = None
        self.identity: tuple[int, int] | None = None
        self.offset = 0  # bytes of complete lines consumed
        self.line = 0
        self.unsupported = False  # not a JSONL transcript: never read again
        self.documents = documents  # read a whole-JSON transcript (a replay) instead of refusing it
        self._last_ts: int | None = None
        self._before: dict[int, int | None] = {}  # line -> timestamp of the record before it
        self._starts: dict[int, int] = {}  # line -> byte offset of its start (recent lines)
        self._on_problem = on_problem
        self._problems_seen = 0
        self._document_calls: list[TimedCall] = []

    def read(self, final: bool = False) -> list[TimedCall]:
        """Calls completed by the lines appended since the last read (``final``: and the pending ones)."""
        return list(self.iter_calls(final))

    def iter_calls(self, final: bool = False) -> Iterator[TimedCall]:
        """:meth:`read` one call at a time: a replay of a long file holds one call's context, not all."""
        if self.unsupported:
            return
        try:
            handle = open(self.path, "rb")
        except OSError as exc:
            self._problem(None, f"cannot read: {exc.strerror or exc}")
            return
        with handle:
            st = os.fstat(handle.fileno())
            if self.identity is None:
                self.identity = file_identity(st)
            if self.reader is None and not self._start(handle, final):
                yield from self._document_calls
                self._document_calls = []
                return
            handle.seek(self.offset)
            yield from self._read_lines(handle, final)
            if final and self.reader is not None:
                for call in self._guard(self.reader.finish, None):
                    yield self._timed(call)
        self._report_reader_problems()

    @property
    def resume_offset(self) -> int:
        """The offset a restart may resume from without losing a call the reader holds (0: from the start)."""
        held = getattr(self.reader, "held_line", None)
        if held is None:
            return self.offset
        return self._starts.get(held, 0)

    def finish(self) -> list[TimedCall]:
        """The calls the reader still holds (e.g. a Codex call waiting for its usage), without a partial line."""
        if self.reader is None:
            return []
        return [self._timed(call) for call in self._guard(self.reader.finish, None)]

    # -- internals -------------------------------------------------------------

    def _start(self, handle, final: bool) -> bool:  # type: ignore[no-untyped-def]
        head = handle.readline(_HEAD_BYTES)
        if not head.endswith(b"\n") and not final:
            return False  # the first record is still being written
        if not head.strip():
            return False  # empty so far: wait for a record
        try:
            fmt, document = detect_format(head, self.forced_format)
        except UnknownFormat as exc:
            self._problem(1, str(exc))
            self.unsupported = True
            return False
        if document:
            self.unsupported = True
            if self.documents:
                self._document_calls = self._read_document()
            else:
                self._problem(None, "a JSON document, not a JSONL session: only JSONL transcripts are followed")
            return False
        self.format = fmt
        self.reader = make_reader(fmt, os.path.basename(self.path), self.path)
        return True

    def _read_document(self) -> list[TimedCall]:
        # A message array or request body: small, read whole by the transcripts module.
        from .transcripts import TranscriptFile

        source = TranscriptFile(self.path, self.forced_format)
        calls = [TimedCall(call, call.timestamp_ns, call.timestamp_ns, 0) for call in source.calls()]
        for problem in source.problems:
            self._problem(problem.line, problem.message)
        return calls

    def _read_lines(self, handle, final: bool) -> Iterator[TimedCall]:  # type: ignore[no-untyped-def]
        reader = self.reader
        assert reader is not None
        while True:
            raw = handle.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            complete = raw.endswith(b"\n")
            if not complete and len(raw) > MAX_LINE_BYTES:
                while True:  # skip the rest of an oversize line without keeping it
                    chunk = handle.readline(1 << 20)
                    if not chunk:
                        return  # still being written: the next read starts at its beginning again
                    if chunk.endswith(b"\n"):
                        break
                self.offset = handle.tell()
                self.line += 1
                self._problem(self.line, f"line longer than {MAX_LINE_BYTES // (1024 * 1024)} MB, skipped")
                continue
            if not complete and not final:
                return  # half written: wait for its end
            start = self.offset
            self.offset += len(raw)
            self.line += 1
            text = raw.strip()
            if not text:
                continue
            try:
                record = loads(text)
            except ValueError:
                self._problem(self.line, "invalid JSON, skipped")
                continue
            if not isinstance(record, dict):
                continue
            timestamp = parse_timestamp_ns(record.get("timestamp"))
            lineno = self.line
            # A reader may hand a call back some lines after it began (Codex waits
            # for its token_count): keep the time before each recent line.
            self._before[lineno] = self._last_ts
            self._starts[lineno] = start
            if len(self._before) > _MAX_LINE_TIMES:
                del self._before[next(iter(self._before))]
                del self._starts[next(iter(self._starts))]
            calls = self._guard(lambda: reader.feed(record, lineno), lineno)
            for call in calls:
                yield self._timed(call)
            if timestamp is not None:
                self._last_ts = timestamp

    def _timed(self, call: TranscriptCall) -> TimedCall:
        end = call.timestamp_ns
        before = self._before.get(call.line) if call.line is not None else None
        start = before if (before is not None and end is not None and before <= end) else end
        if end is None:
            start = end = self._last_ts
        return TimedCall(call, start, end, self.offset)

    def _guard(self, step, lineno: int | None) -> list[TranscriptCall]:  # type: ignore[no-untyped-def]
        # A record that breaks a reader is reported, never raised: the rest still counts.
        try:
            return list(step())
        except Exception as exc:  # noqa: BLE001
            self._problem(lineno, f"unreadable record ({type(exc).__name__})")
            return []

    def _problem(self, line: int | None, message: str) -> None:
        if self._on_problem is not None:
            self._on_problem(self.path, Problem(line, message))

    def _report_reader_problems(self) -> None:
        problems = getattr(self.reader, "problems", None)
        if not problems or self._on_problem is None:
            return
        for problem in problems[self._problems_seen:]:
            self._on_problem(self.path, problem)
        self._problems_seen = len(problems)
