"""The one reader stack: a transcript file, read or followed line by line, in constant memory.

:class:`TranscriptFile` opens a file, finds its format (unless forced), and
hands each well-formed JSON record to the format's reader. ``analyze``,
``replay`` and ``watch`` all read through it, so a byte-order mark, a
truncated last line, an oversize line or leading records of unknown types
are handled the same way everywhere:

- Bad input never raises: each problem becomes a :class:`~.model.Problem`
  (a line number and a one-line message), passed to ``on_problem`` or, without
  one, kept in ``problems``; the rest of the file is still read. The readers' own
  problems (a record without a type) join the same list.
- ``poll()`` reads what was appended since the last call; a last line
  without its newline is left for the next poll (it may be half-written)
  until ``final`` (the end of an analysis or replay) takes it as it is: a
  truncated last line is then reported once and skipped.
- No file handle stays open between polls (a watcher follows hundreds).
- ``identity`` (device, inode) and ``offset`` let a follower notice a file
  replaced or truncated and start anew.
- A whole-JSON document (a message array, a request body) is read at once
  when ``documents`` is True; a follower (``documents=False``) refuses it
  once and marks the file ``unsupported``.

Each call comes as a :class:`TimedCall` from :meth:`TranscriptFile.timed`:
its span starts at the timestamp of the last record before the call's first
record (the request was sent once its context was written) and ends at the
call's own timestamp. Without an earlier timestamp, or with one after the
call's, the span has no length.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable, Iterator

from ctxscope._record import Record
from ctxscope.transcripts.detect import UnknownFormatError, detect_format, make_reader
from ctxscope.transcripts.model import Problem, Reader, TranscriptCall, loads, parse_timestamp_ns

MAX_LINE_BYTES = 32 * 1024 * 1024  # a longer line is reported and skipped
_CHUNK = 1 << 20
# Format detection reads past leading records of unknown types within this much of the file.
HEAD_BYTES = 1 << 20
# Whole-document JSON (a message array, a request body) is read at once: such
# files are small; bigger ones are refused rather than filling the memory.
MAX_DOCUMENT_BYTES = 512 * 1024 * 1024
# A reader may hand a call back some lines after it began (Codex waits for
# its token_count): the time before each of the lines this recent is kept.
_MAX_LINE_TIMES = 4096
_BOM = b"\xef\xbb\xbf"
_SPACE = frozenset(b" \t\n\r\x0b\x0c")  # the bytes bytes.isspace() takes for blank space


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class TimedCall(Record):
    """A call of the transcript and the nanosecond times its span covers."""

    call: TranscriptCall
    start_ns: int | None
    end_ns: int | None
    end_offset: int  # byte offset just past the line that completed the call


def file_identity(st: os.stat_result) -> tuple[int, int]:
    return (st.st_dev, st.st_ino)


class LineSource:
    """The lines of the file a reader is fed from, read again by their byte offset.

    A reader that lets go of links (``ClaudeCodeReader``: what a compaction or a
    rewind cut off) keeps only their lines' offsets, and reads a line back here
    when a later record walks into it (``transcripts/spill.py``). Only a regular
    file gets one (a pipe cannot be read twice); a followed file only grows, so
    an offset stays valid. A file replaced since (another inode) is not read:
    :meth:`record` answers None, and the reader's own check (the line's uuid)
    catches one rewritten in place.
    """

    __slots__ = ("path", "identity", "_handle")

    def __init__(self, path: str, identity: tuple[int, int]) -> None:
        self.path = path
        self.identity = identity
        self._handle: BinaryIO | None = None

    def record(self, offset: int) -> Any:
        """The JSON record of the line at ``offset``, or None when it cannot be read as one."""
        handle = self._handle
        if handle is None:
            try:
                handle = open(self.path, "rb")
                if file_identity(os.fstat(handle.fileno())) != self.identity:
                    handle.close()
                    return None
            except OSError:
                return None
            self._handle = handle
        try:
            handle.seek(offset)
            raw = handle.readline(MAX_LINE_BYTES + 1)
        except OSError:
            return None
        if offset == 0 and raw.startswith(_BOM):
            raw = raw[3:]
        try:
            return loads(raw.strip())
        except ValueError:
            return None

    def close(self) -> None:
        """Let the handle go (a walk's reads are done; a watcher follows hundreds of files)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None


class TranscriptFile:
    """A transcript file being read: the reader's state, the byte offset and line reached."""

    def __init__(self, path: str, format: str | None = None, *, documents: bool = True,
                 on_problem: Callable[[str, Problem], None] | None = None,
                 progress: Callable[[int, int], None] | None = None) -> None:
        self.path = path
        self.forced_format = format
        self.format: str | None = format
        self.reader: Reader | None = None
        self.identity: tuple[int, int] | None = None
        self.offset = 0  # bytes consumed: the start of the first line not yet read
        self.line = 0  # lines consumed
        self.problems: list[Problem] = []
        self.records = 0
        self.unsupported = False  # nothing to follow here (not a transcript, or a document a follower refuses)
        self.documents = documents
        self._on_problem = on_problem
        self._progress = progress
        self._document = False
        self._document_read = False
        self._last_ts: Any = None  # the raw timestamp of the last record that had one
        # line -> (raw timestamp of the record before it, byte offset where the line starts), recent lines
        self._before: dict[int, tuple[Any, int]] = {}
        # The reader told where each line starts, to let go of links it can read again (spill_from).
        self._offsets_to: Any = None

    # -- public -------------------------------------------------------------

    def calls(self) -> Iterator[TranscriptCall]:
        """Every call of the file from the current offset to its end, then the pending ones.

        Without their time spans (``analyze`` keeps each call's own timestamp only).
        """
        return self._calls(final=True, timing=False)

    def poll(self, final: bool = False) -> Iterator[TranscriptCall]:
        """Calls completed by the lines appended since the last poll (``final``: and the pending ones)."""
        return self._calls(final)

    def read(self, final: bool = False) -> list[TimedCall]:
        """:meth:`timed` as a list (a watcher's read of what was appended)."""
        return list(self.timed(final))

    def iter_calls(self, final: bool = False) -> Iterator[TimedCall]:
        """:meth:`timed` (the name replay uses)."""
        return self.timed(final)

    def timed(self, final: bool = False) -> Iterator[TimedCall]:
        """Calls completed since the last read, one at a time, each with its time span.

        With ``final`` the last line is taken even without a newline and the
        reader's pending calls are flushed (the end of an analysis or replay).
        """
        timed = self._timed
        # Timed as each call comes: ``self.offset`` is then just past the line that completed it.
        for call in self._calls(final):
            yield timed(call)

    def _calls(self, final: bool, timing: bool = True) -> Iterator[TranscriptCall]:
        # ``timing``: keep what :meth:`_timed` and :attr:`resume_offset` read (the time
        # before each recent line, the last timestamp); ``calls()`` needs neither.
        if self.unsupported:
            return
        try:
            # A 1 MB buffer: lines run to tens of KB, and readline through the default
            # 8 KB buffer joins several reads for each (a third of the reading time).
            handle = open(self.path, "rb", buffering=_CHUNK)
        except OSError as exc:
            self._problem(None, f"cannot read: {exc.strerror or exc}")
            return
        with handle:
            size = _size(handle)
            if self.identity is None:
                try:
                    self.identity = file_identity(os.fstat(handle.fileno()))
                except OSError:
                    pass
            if self.reader is None and not self._start(handle, size, final):
                return
            if self._document:
                if not self._document_read:
                    self._document_read = True
                    yield from self._read_document(handle, size)
            else:
                handle.seek(self.offset)
                yield from self._read_lines(handle, size, final, timing)
            if final and self.reader is not None:
                yield from self._guard(self.reader.finish, None)
        self._take_reader_problems()
        self.records = self.reader.records if self.reader is not None else 0

    @property
    def resume_offset(self) -> int:
        """Where a follower that saves its place may say it got to without losing a call the reader holds.

        Before the first line of a call the reader still holds (a Codex call waiting
        for its ``token_count``), else :attr:`offset`; 0 when that line's start is no
        longer known (a restart then reads the file from its start).
        """
        held = getattr(self.reader, "held_line", None)
        if held is None:
            return self.offset
        seen = self._before.get(held)
        return seen[1] if seen is not None else 0

    def finish(self) -> list[TimedCall]:
        """The calls the reader still holds (a Codex call waiting for its usage), without a partial line."""
        if self.reader is None:
            return []
        calls = [self._timed(call) for call in self._guard(self.reader.finish, None)]
        self._take_reader_problems()
        return calls

    # -- internals ------------------------------------------------------------

    def _start(self, handle: BinaryIO, size: int, final: bool) -> bool:
        # The whole first line (it may be long: a pasted image) and up to HEAD_BYTES more.
        head = handle.readline(MAX_LINE_BYTES)
        if not final and not head.endswith(b"\n"):
            handle.seek(0)
            return False  # the first record is still being written
        head += handle.read(HEAD_BYTES)
        seen_all = handle.tell() >= size
        handle.seek(0)
        if head.startswith(_BOM):
            head = head[3:]
        if not head.strip():
            if not final:
                return False  # empty so far: wait for a record
            if size == 0 or not head:
                self._problem(None, "empty file: no transcript records")
            else:
                self._problem(None, "file holds only blank space: no transcript records")
            self.unsupported = True
            return False
        complete = head if final else head[:head.rfind(b"\n") + 1]
        # Binary: a NUL or bytes that are not UTF-8 in the first line (a corrupt
        # later line is reported on its own and the rest still read).
        if _binary(complete.lstrip().split(b"\n", 1)[0][:8192]):
            self._problem(None, "binary file, not a JSON or JSONL transcript")
            self.unsupported = True
            return False
        try:
            fmt, document = detect_format(complete, self.forced_format)
        except UnknownFormatError as exc:
            if not final and seen_all and exc.undecided:
                return False  # only records of unknown types so far: the next ones may tell
            self._problem(1, str(exc))
            self.unsupported = True
            return False
        if document and not self.documents:
            self._problem(None, "a JSON document, not a JSONL session: only JSONL transcripts are followed")
            self.unsupported = True
            return False
        self.format = fmt
        self._document = document
        self.reader = make_reader(fmt, os.path.basename(self.path), self.path)
        spill_from = getattr(self.reader, "spill_from", None)
        if spill_from is not None and not document and self.identity is not None and _regular(handle):
            # A file read again by offset (not a pipe): the reader may free what it can find there.
            spill_from(LineSource(self.path, self.identity))
            self._offsets_to = self.reader
        return True

    def _read_document(self, handle: BinaryIO, size: int) -> Iterator[TranscriptCall]:
        if size > MAX_DOCUMENT_BYTES:
            self._problem(None, f"JSON document of {size} bytes is too large (at most {MAX_DOCUMENT_BYTES}); use JSONL")
            return
        data = handle.read()
        if data.startswith(_BOM):
            data = data[3:]
        self.offset = size
        self.line = data.count(b"\n") + 1
        try:
            record = loads(data)
        except ValueError as exc:
            self._problem(_error_line(data, exc), f"invalid JSON: {_short(exc)}")
            return
        reader = self.reader
        assert reader is not None
        yield from self._guard(lambda: reader.feed(record, 1), 1)

    def _read_lines(self, handle: BinaryIO, size: int, final: bool,
                    timing: bool = True) -> Iterator[TranscriptCall]:
        reader = self.reader
        assert reader is not None
        progress = self._progress
        next_report = 0
        before = self._before
        reader_problems = reader.problems
        readline = handle.readline
        offsets_to = self._offsets_to
        # The lines read here, not through a generator of (line, complete, oversize):
        # this loop runs for every line of the file.
        while True:
            raw = readline(MAX_LINE_BYTES + 1)
            if not raw:
                break
            complete = raw[-1] == 10  # ends with its newline (b"\n")
            if not complete:
                if len(raw) > MAX_LINE_BYTES:
                    _skip_rest_of_line(readline)  # an oversize line is skipped to its end, not kept
                    self.line += 1
                    self.offset = handle.tell()
                    self._problem(self.line, f"line longer than {MAX_LINE_BYTES // (1024 * 1024)} MB, skipped")
                    continue
                if not final:
                    return  # a half-written last line: wait for the rest
            self.line = lineno = self.line + 1
            start = self.offset
            self.offset = start + len(raw)
            text = raw
            if start == 0 and raw.startswith(_BOM):
                text = raw = raw[3:]  # a byte-order mark some editors write
            # JSON parsers skip surrounding whitespace: only blank lines need a look
            # (stripping every line would copy the whole file once more).
            if len(raw) < 3 or raw[0] in _SPACE:
                text = raw.strip()
                if not text:
                    continue
            try:
                record = loads(text)
            except ValueError as exc:
                what = "truncated last line" if not complete else "invalid JSON"
                self._problem(lineno, f"{what}: {_short(exc)}")
                continue
            if not isinstance(record, dict):
                self._problem(lineno, f"expected a JSON object, got {type(record).__name__}")
                continue
            if timing:
                # A reader may hand a call back some lines after it began (Codex waits
                # for its token_count): keep the time before, and the start of, each recent line.
                before[lineno] = (self._last_ts, start)
                # The line numbers of the last _MAX_LINE_TIMES lines, by key: taking the dict's
                # oldest entry (next(iter(...))) scans the slots freed before it, on every line.
                before.pop(lineno - _MAX_LINE_TIMES, None)
            if offsets_to is not None:
                offsets_to.line_offset = start
            # _guard written out: this runs for every line.
            try:
                calls = reader.feed(record, lineno)
            except Exception as exc:  # noqa: BLE001 - bad input must not stop the analysis
                self._problem(lineno, f"unreadable record ({type(exc).__name__}: {_short(exc)})")
                calls = []
            if calls:  # most lines start no call: no iterator over an empty list
                yield from calls
            if reader_problems:
                self._take_reader_problems()
            if timing:
                timestamp = record.get("timestamp")
                if timestamp is not None:
                    self._last_ts = timestamp
            if progress is not None and self.offset >= next_report:
                progress(self.offset, size)
                next_report = self.offset + size // 200 + 1
        if progress is not None:
            progress(self.offset, size)

    def _timed(self, call: TranscriptCall) -> TimedCall:
        end = call.timestamp_ns
        seen = self._before.get(call.line) if call.line is not None else None
        before = parse_timestamp_ns(seen[0]) if seen is not None and seen[0] is not None else None
        start = before if (before is not None and end is not None and before <= end) else end
        if end is None:
            start = end = parse_timestamp_ns(self._last_ts)
        return TimedCall(call, start, end, self.offset)

    def _guard(self, step: Callable[[], list[TranscriptCall]], lineno: int | None) -> list[TranscriptCall]:
        # A record that breaks a reader is reported, never raised: the rest still counts.
        try:
            return list(step())
        except Exception as exc:  # noqa: BLE001 - bad input must not stop the analysis
            self._problem(lineno, f"unreadable record ({type(exc).__name__}: {_short(exc)})")
            return []

    def _problem(self, line: int | None, message: str) -> None:
        self._report(Problem(line, message))

    def _report(self, problem: Problem) -> None:
        # Handed to ``on_problem`` when there is one (a watch runs for days: nothing
        # piles up here), else kept in ``problems``.
        if self._on_problem is not None:
            self._on_problem(self.path, problem)
        else:
            self.problems.append(problem)

    def _take_reader_problems(self) -> None:
        problems = self.reader.problems if self.reader is not None else []
        for problem in problems:
            self._report(problem)
        problems.clear()  # taken over: the reader's list does not grow with the file


def _skip_rest_of_line(readline: Callable[[int], bytes]) -> None:
    """Read to the end of a long line without keeping it."""
    while True:
        chunk = readline(_CHUNK)
        if not chunk or chunk.endswith(b"\n"):
            break


def _binary(first_line: bytes) -> bool:
    if b"\x00" in first_line:
        return True
    try:
        first_line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(first_line) - 4  # a multi-byte character cut at the 8 KB edge is text
    return False


def _regular(handle: BinaryIO) -> bool:
    try:
        return stat.S_ISREG(os.fstat(handle.fileno()).st_mode)
    except OSError:
        return False


def _size(handle: BinaryIO) -> int:
    try:
        return os.fstat(handle.fileno()).st_size
    except OSError:
        return 0


def _short(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:160]


def _error_line(data: bytes, exc: BaseException) -> int | None:
    pos: Any = getattr(exc, "pos", None)
    if isinstance(pos, int):
        return data.count(b"\n", 0, pos) + 1
    return None
