"""The watch loop: follow transcript folders and emit each new call once.

For every ``*.jsonl`` file under the watched folders (new folders and files,
subagent files included, are picked up as they appear) the watcher keeps a
small record (:class:`~.state.FileMark`) and, while the file is active, a
:class:`~ctxscope.transcripts.follow.FollowedFile` whose reader holds the live context.

Rules (docs/replay-watch.md):

- A call is emitted once: when its index is above its session's mark in the
  state. Files replaced (new inode) or truncated (smaller than the offset
  read) are read again from the start; their calls up to the mark are
  counted silently.
- Files present when a watch first starts are history: their calls are not
  emitted (``from_start`` emits them), but their context is rebuilt when
  they grow, so the next call is measured whole.
- A file idle for ``idle_s`` ends its sessions (their series report 0 once)
  and frees its reader; if it grows again it is re-read silently up to where
  it was (the cost of bounded memory: one re-read of that file).
- After a restart, files are re-read silently up to their marks; only the
  last silent call of a session is counted (its ledger baseline), so the
  cost is parsing the file, not counting every past call.
- Export, then save (:meth:`Watcher.commit`): the round's spans are held by
  the emitter while the round reads, written when it ends, exported (force
  flush), and only then is the state saved. A kill before the export loses
  nothing and repeats nothing (the restart emits those calls); a kill after
  the export and before the save (the export's reply and one state write)
  repeats them, as the same spans: their ids derive from the call
  (:mod:`ctxscope.telemetry.ids`), so a backend keeping one span per id holds
  each call once. No exporter can tell a killed process whether its last
  batch arrived, so no order of the two steps is exactly-once on the wire.
"""

from __future__ import annotations

import logging
import os
import signal
import stat
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ctxscope.telemetry.replay import span_flush_interval
from ctxscope.transcripts.follow import FollowedFile, TimedCall, file_identity
from ctxscope.transcripts import Problem
from ctxscope.watch.notify import Changes, Inotify, Polling, make_notifier
from ctxscope.watch.state import FileMark, WatchState

__all__ = ["DEFAULT_IDLE_S", "DEFAULT_MAX_ACTIVE", "DEFAULT_POLL_S", "DEFAULT_RESCAN_S", "Watcher"]

_log = logging.getLogger(__name__)

DEFAULT_IDLE_S = 600.0
DEFAULT_POLL_S = 2.0
# With notifications, a full stat pass now and then catches anything missed.
DEFAULT_RESCAN_S = 300.0
# Files followed with a reader (their live context) at once; past it the least
# recently grown is let go as if idle, so memory stays bounded however many
# sessions write at the same time.
DEFAULT_MAX_ACTIVE = 64
_SUFFIX = ".jsonl"
# Calls held for export at most: past it the round commits before it reads on
# (a first --from-start watch over a large folder must not hold every call).
# None: replay's flush interval, a quarter of the batch span processor's queue in
# calls, so that releasing them never fills the queue (the SDK drops what finds it full).
MAX_HELD: int | None = None
# The steps of a commit that released calls, in order (a fault hook can stop the process at each).
STEPS = ("released", "exported", "saved")


@dataclass
class _Tracked:
    path: str
    mark: FileMark
    followed: FollowedFile | None = None
    last_growth: float = 0.0
    sessions: set[str] = field(default_factory=set)
    seen_size: int = -1  # the size at the last check (a partial last line is not re-read for nothing)
    unsupported: bool = False


class Watcher:
    """Follows the folders; ``run()`` until ``stop()`` (or a signal when run in the main thread)."""

    def __init__(self, dirs: Iterable[str], emitter: Any, state: WatchState, *,
                 flush: Callable[[], Any] = lambda: None, idle_s: float = DEFAULT_IDLE_S,
                 poll_s: float = DEFAULT_POLL_S, rescan_s: float = DEFAULT_RESCAN_S,
                 notifier: str = "auto", from_start: bool = False, max_active: int = DEFAULT_MAX_ACTIVE,
                 on_problem: Callable[[str, Problem], None] | None = None,
                 on_step: Callable[[str], None] | None = None) -> None:
        if idle_s <= 0 or poll_s <= 0 or rescan_s <= 0:
            raise ValueError("idle, poll and rescan intervals must be positive")
        if max_active < 1:
            raise ValueError("max_active must be at least 1")
        self.max_active = max_active
        self.dirs = [os.path.abspath(os.path.expanduser(d)) for d in dirs]
        self.emitter = emitter
        self.state = state
        self.flush = flush
        self.idle_s = idle_s
        self.poll_s = poll_s
        self.rescan_s = rescan_s
        self.from_start = from_start
        self.on_problem = on_problem
        self.on_step = on_step  # called at each of STEPS (tests stop the process there)
        self.max_held = MAX_HELD if MAX_HELD is not None else span_flush_interval()
        self.notifier: Inotify | Polling = make_notifier(notifier)
        self.emitted = 0
        self._files: dict[str, _Tracked] = {}
        self._stop = threading.Event()
        self._dirty = False
        self._first_scan = True

    # -- control -------------------------------------------------------------------

    def stop(self) -> None:
        self._stop.set()
        self.notifier.wake()

    def run(self, ready: Callable[[], Any] | None = None) -> None:
        """Scan, then follow until stopped; at the end every session ends and the state is saved.

        ``ready`` is called once the first scan is done: files that appear
        after it are new (emitted whole), those found by it may be history.
        """
        try:
            self.scan()
            self.commit()
            if ready is not None:
                ready()
            next_rescan = time.monotonic() + self.rescan_s
            while not self._stop.is_set():
                changes = self.notifier.wait(self._timeout())
                if self._stop.is_set():
                    break
                now = time.monotonic()
                polling = isinstance(self.notifier, Polling) or getattr(self.notifier, "full", False)
                if changes.everything or polling or now >= next_rescan:
                    self.scan()
                    next_rescan = now + self.rescan_s
                else:
                    self._apply(changes)
                self.end_idle()
                self.commit()
        finally:
            self.close()

    def close(self) -> None:
        """End every active file's sessions, export, save the state."""
        for tracked in self._files.values():
            self._deactivate(tracked)
        self.commit(force=True)
        self.notifier.close()

    # -- one round (public for tests and the benchmark) ---------------------------------

    def scan(self) -> None:
        """Walk the folders: watch every directory, check every transcript file."""
        seen: set[str] = set()
        for root in self.dirs:
            for folder, subdirs, names in os.walk(root):
                subdirs.sort()
                self.notifier.watch_dir(folder)
                for name in sorted(names):
                    if name.endswith(_SUFFIX):
                        path = os.path.join(folder, name)
                        seen.add(path)
                        self.check(path)
        for path in [p for p in self._files if p not in seen]:
            self._forget(path)
        if self._first_scan:
            self._first_scan = False
            # Files the state names that are gone: drop them.
            for path in [p for p in self.state.files if p not in seen]:
                del self.state.files[path]
            self._dirty = True

    def check(self, path: str) -> None:
        """Read what a file gained; start anew when it was replaced or truncated."""
        try:
            self._check(path)
        except Exception:  # noqa: BLE001 - one file's trouble must not stop the watch
            _log.warning("ctxscope: could not follow %s", path, exc_info=True)

    def _check(self, path: str) -> None:
        try:
            st = os.stat(path)
        except OSError:
            self._forget(path)
            return
        if not stat.S_ISREG(st.st_mode):
            return  # a FIFO or a device named *.jsonl: opening it could block, reading it never end
        tracked = self._files.get(path)
        identity = file_identity(st)
        if tracked is None:
            tracked = self._track(path, st)
        if (tracked.mark.dev, tracked.mark.ino) != identity or st.st_size < tracked.mark.offset:
            # Replaced or truncated: read it again from the start; the session
            # marks keep the calls already emitted from being emitted again.
            _log.info("ctxscope: %s was replaced or truncated; reading it again", path)
            tracked.mark = FileMark(identity[0], identity[1])
            self.state.files[path] = tracked.mark
            tracked.followed = None
            tracked.unsupported = False
            tracked.seen_size = -1
            self._dirty = True
        if tracked.unsupported or st.st_size == tracked.seen_size:
            return
        if st.st_size > tracked.mark.offset:
            self._read(tracked)
        tracked.seen_size = st.st_size

    def end_idle(self, now: float | None = None) -> None:
        """End the sessions of files idle past ``idle_s`` and free their readers."""
        now = time.monotonic() if now is None else now
        for tracked in self._files.values():
            if tracked.followed is not None and now - tracked.last_growth >= self.idle_s:
                self._deactivate(tracked)

    def commit(self, force: bool = False) -> None:
        """Write the held spans, export them, then save the state (in that order: never lose a call)."""
        if not (self._dirty or force):
            return
        release = getattr(self.emitter, "release", None)
        released = release() if release is not None else 0
        self._step("released", released)
        try:
            self.flush()
        except Exception:  # noqa: BLE001
            _log.warning("ctxscope: export flush failed", exc_info=True)
        self._step("exported", released)
        self.state.save()
        self._dirty = False
        self._step("saved", released)

    def _step(self, name: str, released: int) -> None:
        if released and self.on_step is not None:
            self.on_step(name)

    def active_files(self) -> int:
        return sum(1 for t in self._files.values() if t.followed is not None)

    # -- internals ----------------------------------------------------------------------

    def _timeout(self) -> float:
        timeout = self.poll_s if isinstance(self.notifier, Polling) or getattr(self.notifier, "full", False) \
            else self.rescan_s
        now = time.monotonic()
        for tracked in self._files.values():
            if tracked.followed is not None:
                timeout = min(timeout, max(0.0, tracked.last_growth + self.idle_s - now) + 0.01)
        return timeout

    def _apply(self, changes: Changes) -> None:
        for folder in sorted(changes.dirs):
            for sub, subdirs, names in os.walk(folder):
                subdirs.sort()
                self.notifier.watch_dir(sub)
                for name in sorted(names):
                    if name.endswith(_SUFFIX):
                        self.check(os.path.join(sub, name))
        for path in sorted(changes.files):
            if path.endswith(_SUFFIX):
                self.check(path)

    def _track(self, path: str, st: os.stat_result) -> _Tracked:
        dev, ino = file_identity(st)
        mark = self.state.files.get(path)
        if mark is None or (mark.dev, mark.ino) != (dev, ino):
            mark = FileMark(dev, ino)
            if self._first_scan and not self.state.existed and not self.from_start:
                # A first watch: what the file holds already is history.
                mark.silent_until = mark.offset = st.st_size
            self.state.files[path] = mark
            self._dirty = True
        tracked = self._files[path] = _Tracked(path, mark, last_growth=time.monotonic())
        return tracked

    def _read(self, tracked: _Tracked) -> None:
        if tracked.followed is None:
            self._make_room()
            tracked.followed = FollowedFile(tracked.path, on_problem=self.on_problem)
        followed = tracked.followed
        self._take(tracked, followed.read())
        if followed.unsupported:
            tracked.followed = None
            tracked.unsupported = True  # not a JSONL transcript: left alone until replaced
            return
        tracked.last_growth = time.monotonic()
        # Never past a call the reader still holds: a kill now and a restart re-read it (issue 17).
        resume = followed.resume_offset
        if resume != tracked.mark.offset:
            tracked.mark.offset = resume
            self._dirty = True

    def _take(self, tracked: _Tracked, calls: list[TimedCall]) -> None:
        for timed in calls:
            call = timed.call
            session_id = call.session_id
            tracked.sessions.add(session_id)
            if call.index <= self.state.emitted(session_id) or timed.end_offset <= tracked.mark.silent_until:
                # History: counted without a span, every call of it, so that the next call's
                # context (and the hidden prefix learned from the session's usage) is the one
                # a watch that never stopped would have.
                self.emitter.absorb(timed)
                self.state.mark(session_id, call.index)
                self._dirty = True
                continue
            self.emitter.emit(timed)
            self.emitted += 1
            self.state.mark(session_id, call.index)
            self._dirty = True
            if getattr(self.emitter, "held", 0) >= self.max_held:
                self.commit()

    def _make_room(self) -> None:
        active = [t for t in self._files.values() if t.followed is not None]
        if len(active) >= self.max_active:
            self._deactivate(min(active, key=lambda t: t.last_growth))

    def _deactivate(self, tracked: _Tracked) -> None:
        if tracked.followed is None:
            return
        self._take(tracked, tracked.followed.finish())
        if tracked.mark.offset != tracked.followed.offset:
            tracked.mark.offset = tracked.followed.offset  # the held call is emitted now
            self._dirty = True
        for session_id in tracked.sessions:
            self.emitter.end_session(session_id)
        tracked.sessions.clear()
        tracked.followed = None  # frees the reader; a later growth re-reads the file silently
        self._dirty = True

    def _forget(self, path: str) -> None:
        tracked = self._files.pop(path, None)
        if tracked is not None:
            self._deactivate(tracked)
        if self.state.files.pop(path, None) is not None:
            self._dirty = True


def kill_at(step: str, n: int) -> Callable[[str], None]:
    """An ``on_step`` hook that kills the process with SIGKILL the n-th time it reaches ``step``
    (``CTXSCOPE_WATCH_KILL_AT``: the tests' kill points, exact where a timed kill is luck)."""
    reached = 0

    def hook(name: str) -> None:
        nonlocal reached
        if name == step:
            reached += 1
            if reached == n:
                os.kill(os.getpid(), signal.SIGKILL)

    return hook


def install_signal_handlers(watcher: Watcher) -> None:
    """SIGTERM and SIGINT stop the loop cleanly (the recording ends, the state is saved)."""
    def handler(signum: int, frame: Any) -> None:
        watcher.stop()

    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread
            pass
