"""File change notifications: Linux inotify through ctypes, else polling.

inotify is used directly (``ctypes``, no dependency): one descriptor, one
watch per directory, and ``select`` with a timeout, so an idle watch sleeps
in the kernel and costs no CPU. Elsewhere (macOS, Windows, or when inotify
is unavailable or its watch limit is reached) :class:`Polling` makes the
watcher stat its files every poll interval.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import logging
import os
import select
import struct
import sys
import threading
from dataclasses import dataclass, field

__all__ = ["Changes", "Inotify", "Polling", "make_notifier"]

_log = logging.getLogger(__name__)

IN_MODIFY = 0x00000002
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ISDIR = 0x40000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = getattr(os, "O_CLOEXEC", 0o2000000)
_MASK = (IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
         | IN_DELETE_SELF | IN_MOVE_SELF)
_EVENT = struct.Struct("iIII")


@dataclass
class Changes:
    """What changed since the last wait; ``everything`` asks for a full check (polling, overflow)."""

    files: set[str] = field(default_factory=set)
    dirs: set[str] = field(default_factory=set)  # new directories: watch and scan them
    everything: bool = False


class Polling:
    """No notifications: every wait ends at its timeout and asks for a full check."""

    name = "polling"

    def __init__(self) -> None:
        self._woken = threading.Event()

    def watch_dir(self, path: str) -> bool:
        return True

    def wait(self, timeout: float) -> Changes:
        self._woken.wait(max(0.0, timeout))
        self._woken.clear()
        return Changes(everything=True)

    def wake(self) -> None:
        """End the current wait now (a stop request; safe from a signal handler)."""
        self._woken.set()

    def close(self) -> None:
        pass


class Inotify:
    """inotify(7) through libc: watches directories, reports changed files and new directories."""

    name = "inotify"

    def __init__(self) -> None:
        libc_name = ctypes.util.find_library("c") or "libc.so.6"
        self._libc = ctypes.CDLL(libc_name, use_errno=True)
        self._libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        fd = self._libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            raise OSError(ctypes.get_errno(), "inotify_init1 failed")
        self.fd = fd
        # A stop request writes to this pipe: select returns at once (a signal
        # alone would not end the wait, as Python retries select after EINTR).
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._dirs: dict[int, str] = {}
        self._by_path: dict[str, int] = {}
        self.full = False  # the watch limit was reached: the caller must poll too

    def watch_dir(self, path: str) -> bool:
        if path in self._by_path:
            return True
        wd = self._libc.inotify_add_watch(self.fd, os.fsencode(path), _MASK)
        if wd < 0:
            err = ctypes.get_errno()
            if err == errno.ENOSPC:
                if not self.full:
                    _log.warning("ctxscope: the inotify watch limit is reached (fs.inotify.max_user_watches); "
                                 "polling the rest")
                self.full = True
            return False
        self._dirs[wd] = path
        self._by_path[path] = wd
        return True

    def wait(self, timeout: float) -> Changes:
        changes = Changes()
        try:
            ready, _, _ = select.select([self.fd, self._wake_r], [], [], max(0.0, timeout))
        except InterruptedError:
            return changes
        if self._wake_r in ready:
            try:
                os.read(self._wake_r, 512)
            except OSError:
                pass
        if self.fd not in ready:
            return changes
        while True:
            try:
                data = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                break
            except InterruptedError:
                continue
            if not data:
                break
            self._parse(data, changes)
        return changes

    def _parse(self, data: bytes, changes: Changes) -> None:
        pos = 0
        while pos + _EVENT.size <= len(data):
            wd, mask, _cookie, length = _EVENT.unpack_from(data, pos)
            raw = data[pos + _EVENT.size:pos + _EVENT.size + length].rstrip(b"\0")
            pos += _EVENT.size + length
            if mask & IN_Q_OVERFLOW:
                changes.everything = True
                continue
            folder = self._dirs.get(wd)
            if mask & IN_IGNORED:
                if folder is not None:
                    self._dirs.pop(wd, None)
                    self._by_path.pop(folder, None)
                continue
            if folder is None or not raw:
                continue
            path = os.path.join(folder, os.fsdecode(raw))
            if mask & IN_ISDIR:
                if mask & (IN_CREATE | IN_MOVED_TO):
                    changes.dirs.add(path)
            else:
                changes.files.add(path)

    def wake(self) -> None:
        """End the current wait now (a stop request; safe from a signal handler)."""
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def close(self) -> None:
        for fd in (self.fd, self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass


def make_notifier(kind: str = "auto") -> Inotify | Polling:
    """``auto``: inotify on Linux when it works, else polling; ``poll`` forces polling."""
    if kind == "poll" or not sys.platform.startswith("linux"):
        return Polling()
    try:
        return Inotify()
    except (OSError, AttributeError) as exc:
        _log.warning("ctxscope: inotify unavailable (%s); polling", exc)
        return Polling()
