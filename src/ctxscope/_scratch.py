"""An unnamed scratch file: bytes moved out of memory, appended and read back by offset.

What a long analysis would otherwise hold for the session's length goes here
(issue 14: memory flat in the session's size; ``report.call_rows``). The file
has no name from the start (Linux ``O_TMPFILE`` in ``TMPDIR``, else ``/tmp``:
:func:`ctxscope.config.scratch_dir`; where that fails,
:func:`tempfile.TemporaryFile`, unlinked at once or deleted on close), so
nothing is left behind whatever ends the process, and it is closed when its
holder goes. ``tempfile`` is imported only where ``O_TMPFILE`` fails: it
brings ``shutil``, ``random``, ``bz2`` and ``lzma`` with it.
"""

from __future__ import annotations

import io
import os
from typing import Any

__all__ = ["ScratchFile"]


class ScratchFile:
    """Bytes appended at the end of an unnamed file, read back by offset and size."""

    __slots__ = ("_handle", "size")

    def __init__(self) -> None:
        self._handle = _open()
        self.size = 0  # bytes written: the next append's offset

    def append(self, data: bytes | bytearray) -> int:
        """Write ``data`` at the end; where it starts."""
        at = self.size
        handle = self._handle
        handle.seek(at)
        view = memoryview(data)
        while view:  # a raw write may take less than it was given
            view = view[handle.write(view):]
        self.size = at + len(data)
        return at

    def read(self, at: int, size: int) -> bytearray:
        """``size`` bytes from offset ``at`` (bytes this file was given: OSError if it no longer has them)."""
        handle = self._handle
        handle.seek(at)
        out = bytearray(size)
        view = memoryview(out)
        while view:
            got = handle.readinto(view)
            if not got:
                raise OSError(f"scratch file ends at {at + size - len(view)} of {at + size} bytes")
            view = view[got:]
        return out

    def close(self) -> None:
        self._handle.close()

    def __del__(self) -> None:
        handle = getattr(self, "_handle", None)  # None: the file could not be made
        if handle is not None:
            handle.close()

    def __reduce__(self) -> tuple[Any, tuple[bytes]]:
        # A copy (copy.deepcopy, pickle) is a file of its own with the same bytes: two holders of one
        # descriptor would each close it.
        return _with_bytes, (bytes(self.read(0, self.size)),)


def _with_bytes(data: bytes) -> ScratchFile:
    scratch = ScratchFile()
    if data:
        scratch.append(data)
    return scratch


def _open() -> io.FileIO:
    flag = getattr(os, "O_TMPFILE", 0)
    if flag:
        from ctxscope.config import scratch_dir

        try:
            fd = os.open(scratch_dir(), flag | os.O_RDWR, 0o600)
        except OSError:
            pass  # a file system or kernel without it: tempfile's way below
        else:
            return io.FileIO(fd, "r+")
    import tempfile

    return tempfile.TemporaryFile(buffering=0)  # a FileIO where unbuffered
