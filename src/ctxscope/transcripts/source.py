"""Reading transcript files line by line, in constant memory, resumable from a byte offset.

:class:`TranscriptFile` opens a file, sniffs its format (unless forced), and
hands each well-formed JSON record to the format's reader. Bad input never
raises: each problem becomes a :class:`~.model.Problem` (a line number and a
one-line message) and the rest of the file is still read. ``poll()`` reads
what was appended since the last call, so a live viewer can follow a growing
file; a last line without its newline is left for the next poll (it may be
half-written) until ``finish()``.
"""

from __future__ import annotations

import os
from typing import Any, BinaryIO, Callable, Iterator

from .detect import UnknownFormat, detect_format, make_reader
from .model import Problem, Reader, TranscriptCall, loads

MAX_LINE_BYTES = 32 * 1024 * 1024  # a longer line is reported and skipped
_CHUNK = 1 << 20
# Whole-document JSON (a message array, a request body) is read at once: such
# files are small; bigger ones are refused rather than filling the memory.
MAX_DOCUMENT_BYTES = 512 * 1024 * 1024


class TranscriptFile:
    """A transcript file being read: the reader's state and the byte offset reached."""

    def __init__(self, path: str, format: str | None = None, *,
                 progress: Callable[[int, int], None] | None = None) -> None:
        self.path = path
        self.forced_format = format
        self.format: str | None = format
        self.reader: Reader | None = None
        self.offset = 0  # bytes consumed: the start of the first line not yet read
        self.line = 0  # lines consumed
        self.problems: list[Problem] = []
        self.records = 0
        self._progress = progress
        self._document = False

    # -- public -------------------------------------------------------------

    def calls(self) -> Iterator[TranscriptCall]:
        """Every call of the file from the current offset to its end, then the pending ones."""
        yield from self.poll(final=True)

    def poll(self, final: bool = False) -> Iterator[TranscriptCall]:
        """Calls completed by the lines appended since the last poll.

        With ``final`` the last line is taken even without a newline and the
        reader's pending calls are flushed (the end of a replay).
        """
        try:
            handle = open(self.path, "rb")
        except OSError as exc:
            self.problems.append(Problem(None, f"cannot read: {exc.strerror or exc}"))
            return
        with handle:
            size = _size(handle)
            if self.reader is None:
                if not self._start(handle, size):
                    return
            if self._document:
                if self.offset == 0:
                    yield from self._read_document(handle, size)
            else:
                handle.seek(self.offset)
                yield from self._read_lines(handle, size, final)
            if final and self.reader is not None:
                yield from self._guard(self.reader.finish, None)
        self.records = self.reader.records if self.reader is not None else 0

    # -- internals ------------------------------------------------------------

    def _start(self, handle: BinaryIO, size: int) -> bool:
        # The whole first line (it may be long) and a little more: enough to sniff.
        head = handle.readline(MAX_LINE_BYTES) + handle.read(65536)
        handle.seek(0)
        if not head.strip():
            if size == 0 or not head:
                self.problems.append(Problem(None, "empty file: no transcript records"))
            else:
                self.problems.append(Problem(None, "file holds only blank space: no transcript records"))
            return False
        # Binary: a NUL or bytes that are not UTF-8 in the first line (a corrupt
        # later line is reported on its own and the rest still read).
        if _binary(head.lstrip().split(b"\n", 1)[0][:8192]):
            self.problems.append(Problem(None, "binary file, not a JSON or JSONL transcript"))
            return False
        try:
            fmt, document = detect_format(head, self.forced_format)
        except UnknownFormat as exc:
            self.problems.append(Problem(1, str(exc)))
            return False
        self.format = fmt
        self._document = document
        self.reader = make_reader(fmt, os.path.basename(self.path), self.path)
        return True

    def _read_document(self, handle: BinaryIO, size: int) -> Iterator[TranscriptCall]:
        if size > MAX_DOCUMENT_BYTES:
            self.problems.append(Problem(None, f"JSON document of {size} bytes is too large "
                                               f"(at most {MAX_DOCUMENT_BYTES}); use JSONL"))
            return
        data = handle.read()
        self.offset = len(data)
        self.line = data.count(b"\n") + 1
        try:
            record = loads(data)
        except ValueError as exc:
            self.problems.append(Problem(_error_line(data, exc), f"invalid JSON: {_short(exc)}"))
            return
        assert self.reader is not None
        yield from self._guard(lambda: self.reader.feed(record, 1), 1)  # type: ignore[union-attr]

    def _read_lines(self, handle: BinaryIO, size: int, final: bool) -> Iterator[TranscriptCall]:
        reader = self.reader
        assert reader is not None
        progress = self._progress
        next_report = 0
        for raw, complete, oversize in _lines(handle):
            if not complete and not final:
                return  # a half-written last line: wait for the rest
            self.line += 1
            lineno = self.line
            self.offset += len(raw)
            if oversize:
                self.offset = handle.tell()
                self.problems.append(Problem(lineno, f"line longer than {MAX_LINE_BYTES // (1024 * 1024)} MB, skipped"))
                continue
            # JSON parsers skip surrounding whitespace: only blank lines need a look
            # (stripping every line would copy the whole file once more).
            text = raw
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                text = raw = raw[3:]  # a byte-order mark some editors write
            if len(raw) < 3 or raw[:1].isspace():
                text = raw.strip()
                if not text:
                    continue
            try:
                record = loads(text)
            except ValueError as exc:
                what = "truncated last line" if not complete else "invalid JSON"
                self.problems.append(Problem(lineno, f"{what}: {_short(exc)}"))
                continue
            if not isinstance(record, dict):
                self.problems.append(Problem(lineno, f"expected a JSON object, got {type(record).__name__}"))
                continue
            yield from self._guard(lambda: reader.feed(record, lineno), lineno)
            if progress is not None and self.offset >= next_report:
                progress(self.offset, size)
                next_report = self.offset + size // 200 + 1
        if progress is not None:
            progress(self.offset, size)

    def _guard(self, step: Callable[[], list[TranscriptCall]], lineno: int | None) -> list[TranscriptCall]:
        # A record that breaks a reader is reported, never raised: the rest still counts.
        try:
            return step()
        except Exception as exc:  # noqa: BLE001 - bad input must not stop the analysis
            self.problems.append(Problem(lineno, f"unreadable record ({type(exc).__name__}: {_short(exc)})"))
            return []


def _lines(handle: BinaryIO) -> Iterator[tuple[bytes, bool, bool]]:
    """``(line, ends_with_newline, oversize)``; an oversize line is skipped to its end, not kept."""
    readline = handle.readline
    while True:
        raw = readline(MAX_LINE_BYTES + 1)
        if not raw:
            return
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while True:  # drain the rest of the long line without keeping it
                chunk = readline(_CHUNK)
                if not chunk or chunk.endswith(b"\n"):
                    break
            yield b"", True, True
            continue
        yield raw, raw.endswith(b"\n"), False


def _binary(first_line: bytes) -> bool:
    if b"\x00" in first_line:
        return True
    try:
        first_line.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(first_line) - 4  # a multi-byte character cut at the 8 KB edge is text
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
