"""The watch's state file: where each followed file was left, what was emitted.

One small JSON document, ``<data dir>/watch-state.json`` (owner-only),
written atomically (a temporary file in the same folder, fsync, rename), so
that a watch killed at any moment finds either the old or the new state.

- ``files``: path -> ``{dev, ino, offset, silent_until}``: the file identity,
  the bytes of complete lines read (never past the first line of a call the
  reader still holds, such as a Codex call waiting for its ``token_count``:
  a restart must see it again), and the offset before which calls are
  history (present when the watch first started) and never emitted.
- ``sessions``: session id -> the highest call index emitted. A call is
  emitted once: only when its index is above its session's mark. Keyed by
  session, not by file, so a file replaced, truncated and rewritten, or
  renamed (rotated) re-reads without counting a call twice.

Bounded: at most :data:`MAX_SESSIONS` sessions (the least recently updated
go first) and only files that still exist.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["FileMark", "MAX_SESSIONS", "STATE_FILE", "WatchState"]

_log = logging.getLogger(__name__)

STATE_FILE = "watch-state.json"
VERSION = 1
MAX_SESSIONS = 10_000


@dataclass(slots=True)
class FileMark:
    dev: int
    ino: int
    offset: int = 0
    silent_until: int = 0


@dataclass
class WatchState:
    path: Path
    files: dict[str, FileMark] = field(default_factory=dict)
    sessions: "OrderedDict[str, int]" = field(default_factory=OrderedDict)
    existed: bool = False  # a state was found: this watch resumes an earlier one

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "WatchState":
        """The saved state, or an empty one (a missing or unreadable file starts afresh, logged)."""
        state = cls(Path(path))
        try:
            data = json.loads(state.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return state
        except (OSError, ValueError) as exc:
            _log.warning("ctxscope: %s is unreadable (%s); starting a new watch state", path, exc)
            return state
        if not isinstance(data, dict) or data.get("version") != VERSION:
            _log.warning("ctxscope: %s has an unknown version; starting a new watch state", path)
            return state
        state.existed = True
        for name, mark in (data.get("files") or {}).items():
            try:
                state.files[name] = FileMark(int(mark["dev"]), int(mark["ino"]), int(mark.get("offset", 0)),
                                             int(mark.get("silent_until", 0)))
            except (KeyError, TypeError, ValueError):
                continue
        for session_id, index in (data.get("sessions") or {}).items():
            if isinstance(index, int):
                state.sessions[str(session_id)] = index
        return state

    def emitted(self, session_id: str) -> int:
        """The highest call index emitted for a session (-1: none)."""
        return self.sessions.get(session_id, -1)

    def mark(self, session_id: str, index: int) -> None:
        if index > self.sessions.get(session_id, -1):
            self.sessions[session_id] = index
        self.sessions.move_to_end(session_id)
        while len(self.sessions) > MAX_SESSIONS:
            self.sessions.popitem(last=False)

    def save(self) -> None:
        """Write the state atomically; an error is logged (the next save retries)."""
        data = {"version": VERSION, "saved_at": time.time(),
                "files": {p: {"dev": m.dev, "ino": m.ino, "offset": m.offset, "silent_until": m.silent_until}
                          for p, m in self.files.items()},
                "sessions": dict(self.sessions)}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(prefix=".watch-state-", dir=self.path.parent)  # mode 0600
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    json.dump(data, handle, separators=(",", ":"))
                    handle.flush()
                    os.fsync(handle.fileno())
                os.replace(tmp, self.path)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
        except OSError as exc:
            _log.warning("ctxscope: could not save the watch state to %s: %s", self.path, exc)
