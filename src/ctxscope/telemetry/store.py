"""The local store: one owner-only JSONL file per session (the embedded default).

With no OTLP endpoint configured, ctxscope keeps a record of every observed
model call here, so that ``ctxscope context`` can report a session. Counts
and part paths only (SPEC section 7): no prompt, result or response text, no
change labels, no item ids.

Layout (``docs/telemetry.md``)::

    <data dir>/sessions/<slug>-<hash>.jsonl     one record per call, oldest first
    <data dir>/calibration/<slug>-<hash>.json   learned self-calibration of a model

The data dir is ``$CTXSCOPE_DATA_DIR``, else ``$XDG_DATA_HOME/ctxscope``,
else ``~/.local/share/ctxscope``. The directories the store creates are
0700 and its files 0600 whatever the umask; a directory it did not create
keeps its mode (a shared ``/tmp`` or a project folder is not ours to
close), and one that others can write and that is not the user's own is
refused (:class:`StoreRefused`), as is a ``sessions`` or ``calibration``
entry that is not the user's own directory.

A session file past :data:`MAX_FILE_BYTES` drops its oldest half (written to
a temporary file, then renamed over the old one); a record larger than half
the cap is refused on its own, the file left as it was. Writers of several
processes take an ``flock`` on the session file, so a rotation never loses a
record appended meanwhile. Temporary files of a writer that died (``kill
-9`` mid-rotation) are removed when the store is next opened and are never
listed. Past :data:`MAX_SESSIONS` files, the least recently written is removed.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import stat
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ctxscope.telemetry import shutdown as _shutdown
from ctxscope.config import read as read_settings
from ctxscope.config import settings
from ctxscope.core.conversation import chat_of
from ctxscope.core.observation import Observation

__all__ = [
    "FORMAT_VERSION",
    "ChatInfo",
    "chats_of",
    "MAX_FILE_BYTES",
    "MAX_SESSIONS",
    "LocalStore",
    "RecordTooLarge",
    "RecordTooLargeError",
    "SessionInfo",
    "StoreRefused",
    "StoreRefusedError",
    "data_dir",
    "record_from_observation",
]

_log = logging.getLogger(__name__)

FORMAT_VERSION = 1
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_SESSIONS = 64
# Observations waiting for the background writer; past this, records are dropped.
MAX_PENDING = 10_000
_SUFFIX = ".jsonl"
# The last record of a file is found by reading its tail; a record is a few KB
# (at most 256 parts a session), so this always holds one whole line.
_TAIL_BYTES = 256 * 1024
# Temporary files: ".tmp-<pid>-<random><suffix>"; the pid tells a live writer's from a dead one's.
_TMP_PREFIX = ".tmp-"
_TMP_RE = re.compile(r"^\.tmp-(\d+)-")
# A temporary file older than this is a dead writer's whatever its pid says (pids are reused).
_TMP_STALE_S = 600.0


class StoreRefusedError(OSError):
    """The data directory is not safe to write to (one line says why)."""


class RecordTooLargeError(ValueError):
    """A record larger than the per-file cap allows; it is refused, the file is left as it was."""


# The 0.1 names, kept for one release.
StoreRefused = StoreRefusedError
RecordTooLarge = RecordTooLargeError


def data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the local store lives (see the module docstring)."""
    return (settings() if environ is None else read_settings(environ)).data_dir


def _slug(name: str) -> str:
    """A file name for any session id or model: readable prefix, hash for uniqueness."""
    digest = hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    prefix = re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:40].strip("._") or "session"
    return f"{prefix}-{digest}"


def _is_open_to_others(st: os.stat_result) -> bool:
    return bool(st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def _prepare_root(path: Path) -> None:
    """The data directory: created 0700 when missing; an existing one keeps its mode.

    Refused when others can write to it and it is not the user's own (another
    user could replace what the store creates there).
    """
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        st = os.stat(path)
        if not stat.S_ISDIR(st.st_mode):
            raise StoreRefusedError(errno.ENOTDIR, "the data directory is not a directory", str(path)) from None
        if _is_open_to_others(st) and st.st_uid != os.geteuid():
            raise StoreRefusedError(errno.EPERM, "the data directory is writable by others and not yours; "
                               "set CTXSCOPE_DATA_DIR to a directory of your own", str(path)) from None
        return
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)  # parents as the umask makes them
        _prepare_root(path)
        return
    # Ours: mkdir's mode was masked by the umask.
    os.chmod(path, 0o700)


def _private_dir(path: Path) -> Path:
    """The store's own subdirectory: created 0700; an existing one must be the user's own directory."""
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid():
            raise StoreRefusedError(errno.EPERM, "not a directory of yours; remove it or choose another "
                               "CTXSCOPE_DATA_DIR", str(path)) from None
        return path
    os.chmod(path, 0o700)  # created here: the umask does not widen it
    return path


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: someone else's live process
        return True
    return True


def _remove_dead_temporaries(folder: Path) -> None:
    """Temporary files left by a writer killed mid-rotation (never by a live writer)."""
    now = time.time()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if not entry.name.startswith(_TMP_PREFIX):
            continue
        match = _TMP_RE.match(entry.name)
        try:
            old = now - entry.stat(follow_symlinks=False).st_mtime > _TMP_STALE_S
            if old or match is None or not _pid_alive(int(match.group(1))):
                os.unlink(entry.path)
        except OSError:
            continue


def _drop_torn_tail(path: Path, fd: int, size: int) -> int:
    """End a session file (``fd`` holds its lock) at its last whole line; its new size.

    Every writer writes under the file's lock, so a last line without its
    newline, seen under the lock, is a record whose writer stopped mid-write: a
    SIGKILL can land between two pages of one ``write``. It was never a record:
    kept, it would sit between two whole ones and make the file unreadable.
    """
    data = os.pread(fd, size, 0)
    whole = data.rfind(b"\n") + 1
    try:
        finished = isinstance(json.loads(data[whole:]), dict)
    except ValueError:
        finished = False
    if finished:  # stopped just before its newline (or written so by hand): the record is whole
        os.write(fd, b"\n")
        return size + 1
    os.ftruncate(fd, whole)
    _log.warning("ctxscope: %s: dropped %d bytes of a record its writer did not finish (stopped mid-write)",
                 path, size - whole)
    return whole


def _temporary(folder: Path, suffix: str) -> tuple[int, str]:
    """A new 0600 temporary file in ``folder`` whose name carries this process's id."""
    while True:
        name = f"{_TMP_PREFIX}{os.getpid()}-{os.urandom(6).hex()}{suffix}"
        path = os.path.join(folder, name)
        try:
            return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), path
        except FileExistsError:
            continue


def _is_session_file(path: Path) -> bool:
    return path.name.endswith(_SUFFIX) and not path.name.startswith(".")


@dataclass(frozen=True)
class SessionInfo:
    """One stored session, as ``ctxscope context --list`` shows it."""

    session_id: str
    path: Path
    last_ns: int
    model: str | None
    provider: str | None
    size_bytes: int


@dataclass(frozen=True)
class ChatInfo:
    """One chat in the store: its conversation's session and its side calls' (``<chat>/compaction``)."""

    chat_id: str
    sessions: tuple[SessionInfo, ...]  # the conversation's first (when stored), then the side calls'
    last_ns: int

    def side_kind(self, info: SessionInfo) -> str | None:
        return chat_of(info.session_id)[1]


def chats_of(sessions: Iterable[SessionInfo]) -> list[ChatInfo]:
    """Stored sessions grouped into chats (:func:`ctxscope.core.conversation.chat_of`), latest first."""
    groups: dict[str, list[SessionInfo]] = {}
    for info in sessions:
        groups.setdefault(chat_of(info.session_id)[0], []).append(info)
    chats = []
    for chat_id, members in groups.items():
        members.sort(key=lambda s: (chat_of(s.session_id)[1] is not None, s.session_id))
        chats.append(ChatInfo(chat_id, tuple(members), max(s.last_ns for s in members)))
    chats.sort(key=lambda c: (c.last_ns, c.chat_id), reverse=True)
    return chats


def record_from_observation(observation: Observation) -> dict[str, Any]:
    """The stored record of one call: counts, identities and part paths only."""
    snapshot = observation.snapshot
    annotation = snapshot.annotation
    ann = annotation.to_json()
    ann.pop("changes", None)  # labels and ids stay out of the store
    # Characters and bytes per part are the ledger's running sums (Snapshot.part_chars, part_bytes),
    # keyed and ordered as ``parts``: this runs for every call (on the replay's thread, or the store's
    # writer for live calls), and summing the items here made a session's cost quadratic in its length.
    part_chars, part_bytes = snapshot.part_chars, snapshot.part_bytes
    if part_chars is None or part_bytes is None:
        # Loud, not a record with empty sizes: LocalStore.record warns once and writes nothing.
        raise ValueError("the snapshot carries no characters or bytes per part: build its ledger with "
                         "part_sizes=True (SessionLedger, SessionAccount, TranscriptAccount) to store it")
    usage = observation.usage
    compaction = snapshot.compaction
    return {
        "v": FORMAT_VERSION,
        "ts": int(observation.timestamp_ns or snapshot.timestamp_ns or 0),
        "session": observation.session_id,
        "provider": observation.provider,
        "request_model": observation.request_model,
        "response_model": observation.response_model,
        "duration_ns": observation.duration_ns,
        "error": observation.error,
        "usage": {
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "cache_read_input_tokens": usage.cache_read_input_tokens,
            "cache_creation_input_tokens": usage.cache_creation_input_tokens,
            "reported_input": usage.reported_input,
        },
        "annotation": ann,
        "parts": dict(snapshot.parts),
        "chars": dict(part_chars),
        "bytes": dict(part_bytes),
        "calibrated": {c.value: int(v) for c, v in snapshot.calibrated().items()},
        "apportioned": dict(snapshot.apportioned()),
        "apportioned_label": snapshot.apportioned_label,
        "compaction": None if compaction is None else {
            "trigger": compaction.trigger.value,
            "declared": compaction.declared,
            "tokens_before": compaction.tokens_before,
            "tokens_after": compaction.tokens_after,
        },
    }


class LocalStore:
    """One JSONL file per session under a private directory. Thread-safe."""

    def __init__(self, directory: str | os.PathLike[str] | None = None, *,
                 max_file_bytes: int = MAX_FILE_BYTES, max_sessions: int = MAX_SESSIONS) -> None:
        if max_file_bytes < 1024:
            raise ValueError(f"max_file_bytes must be at least 1024, got {max_file_bytes}")
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
        self.root = Path(directory) if directory is not None else data_dir()
        self.sessions_dir = self.root / "sessions"
        self.calibration_dir = self.root / "calibration"
        self.max_file_bytes = max_file_bytes
        self.max_sessions = max_sessions
        self._lock = threading.Lock()
        self._listener: Callable[[Observation], None] | None = None
        # Observations from the tracker are written by one background thread,
        # so that a call pays for a queue append, not for file I/O.
        self._pending: deque[Observation] = deque()
        self._busy = 0  # observations taken off the queue and not yet written
        self._cond = threading.Condition()
        self._writer: threading.Thread | None = None
        self._dropped = 0
        self._opened = False  # the directories checked and dead temporaries removed
        self._warned: set[str] = set()  # failure kinds logged once already

    # -- writing -------------------------------------------------------------

    def path_for(self, session_id: str) -> Path:
        return self.sessions_dir / (_slug(session_id) + _SUFFIX)

    def _open(self) -> None:
        """Once per store: the directories made or checked, dead writers' temporaries removed."""
        if self._opened:
            return
        _prepare_root(self.root)
        _private_dir(self.sessions_dir)
        _remove_dead_temporaries(self.sessions_dir)
        self._opened = True

    def append(self, session_id: str, record: Mapping[str, Any]) -> Path:
        """Append one record to a session's file.

        Raises :class:`RecordTooLarge` for a record over half the per-file cap
        (the file is left as it was), :class:`StoreRefused` for an unsafe data
        directory, OSError on I/O failure.
        """
        line = (json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        if len(line) > self.max_file_bytes // 2:
            # A rotation keeps the newest records up to half the cap: this one would not fit.
            raise RecordTooLargeError(f"a record of {len(line):,} bytes is over half the per-file cap "
                                 f"({self.max_file_bytes:,} bytes); not stored")
        with self._lock:
            self._open()
            path = self.path_for(session_id)
            created = not path.exists()
            try:
                fd = self._open_locked(path)
            except FileNotFoundError:  # the directory was removed since the store opened it
                self._opened = False
                self._open()
                fd = self._open_locked(path)
            try:
                os.fchmod(fd, 0o600)
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    size = _drop_torn_tail(path, fd, size)
                if size + len(line) > self.max_file_bytes:
                    # The record goes in with the rotation, one atomic replace: a writer killed at any
                    # moment leaves the file within the cap (written first and rotated after, a kill
                    # between the two left it over the cap until the session's next record).
                    self._drop_oldest_half(path, fd, line)
                else:
                    os.write(fd, line)
            finally:
                os.close(fd)  # releases the flock
            if created:
                self._evict(keep=path)
            return path

    @staticmethod
    def _open_locked(path: Path) -> int:
        """The session file opened for appending under an exclusive flock (shared with other processes).

        A rotation by another process may have replaced the file while we
        waited: then the lock is on the old inode, and we open the new one.
        """
        while True:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                now = os.stat(path, follow_symlinks=False)
                held = os.fstat(fd)
            except FileNotFoundError:
                os.close(fd)
                continue
            except BaseException:
                os.close(fd)
                raise
            if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                return fd
            os.close(fd)

    def record(self, observation: Observation) -> None:
        """Store one observation now (synchronously); errors are logged, never raised."""
        try:
            self.append(observation.session_id, record_from_observation(observation))
        except Exception as exc:  # noqa: BLE001 - the local record must never break the user's call
            self._warn_once(type(exc).__name__, "ctxscope: could not write the local record of session %s: %s",
                            observation.session_id, exc)

    def _warn_once(self, kind: str, message: str, *args: Any) -> None:
        # Once per failure kind, then at debug: a full disk must not log every call.
        # No exc_info: a traceback would keep the caller's frames alive in handlers that keep records.
        level = logging.DEBUG if kind in self._warned else logging.WARNING
        self._warned.add(kind)
        _log.log(level, message, *args)

    def submit(self, observation: Observation) -> None:
        """Queue an observation for the background writer (the tracker's listener)."""
        try:
            with self._cond:
                if len(self._pending) >= MAX_PENDING:
                    self._dropped += 1
                    if self._dropped == 1:
                        _log.warning("ctxscope: the local store is %d calls behind; dropping records",
                                     MAX_PENDING)
                    return
                self._pending.append(observation)
                if self._writer is None:
                    self._writer = threading.Thread(target=self._write_loop, name="ctxscope-store",
                                                    daemon=True)
                    self._writer.start()
                    _shutdown.at_exit(self.flush)
                self._cond.notify()
        except Exception:  # noqa: BLE001
            _log.warning("ctxscope: could not queue a local record", exc_info=True)

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait until every queued observation is written; False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._pending or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def _write_loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending:
                    self._cond.wait()
                observation = self._pending.popleft()
                self._busy += 1
            try:
                self.record(observation)
            finally:
                with self._cond:
                    self._busy -= 1
                    self._cond.notify_all()

    def _drop_oldest_half(self, path: Path, fd: int, line: bytes) -> None:
        """The file and ``line`` after it, keeping the newest records up to half the cap (``fd`` holds its lock)."""
        size = os.fstat(fd).st_size
        data = os.pread(fd, size, 0) + line
        keep = self.max_file_bytes // 2
        lines = data.splitlines(keepends=True)
        kept: list[bytes] = []
        total = 0
        for line in reversed(lines):  # newest first, until half the cap is reached
            if total + len(line) > keep:
                break
            if line.endswith(b"\n"):
                kept.append(line)
                total += len(line)
        tmp_fd, tmp = _temporary(path.parent, _SUFFIX)
        try:
            with os.fdopen(tmp_fd, "wb") as out:
                out.writelines(reversed(kept))
            # Atomic: a reader sees the old file or the new one, never half of one.
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _evict(self, keep: Path) -> None:
        others = [p for p in self.sessions_dir.glob("*" + _SUFFIX) if p != keep and _is_session_file(p)]
        others.sort(key=lambda p: p.stat().st_mtime_ns)
        for old in others[:max(0, len(others) + 1 - self.max_sessions)]:
            old.unlink(missing_ok=True)

    # -- reading -------------------------------------------------------------

    def sessions(self) -> list[SessionInfo]:
        """Stored sessions, most recently written first.

        Only regular files are opened: a FIFO or a symlink to a device named
        ``*.jsonl`` is skipped with one warning (it would block or never end);
        writers' temporary files are never listed.
        """
        out: list[SessionInfo] = []
        if not self.sessions_dir.is_dir():
            return out
        for path in sorted(self.sessions_dir.glob("*" + _SUFFIX)):
            if not _is_session_file(path):
                continue  # a writer's temporary file, not a session
            try:
                st = os.lstat(path)
                if not stat.S_ISREG(st.st_mode):
                    self._warn_once(f"special:{path}", "ctxscope: %s: not a regular file; skipped", path)
                    continue
                last = self._last_record(path)
            except (OSError, ValueError):
                continue
            if last is None:
                continue
            model = last.get("response_model") or last.get("request_model")
            model = model if isinstance(model, str) else None
            provider = last.get("provider") if isinstance(last.get("provider"), str) else None
            ts = last.get("ts")
            last_ns = ts if isinstance(ts, int) and not isinstance(ts, bool) else st.st_mtime_ns
            out.append(SessionInfo(str(last.get("session", "")), path, last_ns, model, provider, st.st_size))
        out.sort(key=lambda s: (s.last_ns, s.path.name), reverse=True)
        return out

    def read(self, session_id: str) -> list[dict[str, Any]]:
        """Every stored record of a session, oldest first ([] if none).

        Raises :class:`ctxscope.errors.UserError` (one line naming the file and
        line) for a record that is not a JSON object within the bounds of
        :mod:`ctxscope.core.bounded_input`, or a file that is not a regular file.
        """
        return [record for _, record in self.read_numbered(session_id)]

    def read_numbered(self, session_id: str, *, max_bytes: int | None = None) -> list[tuple[int, dict[str, Any]]]:
        """:meth:`read` with each record's line number in its file."""
        from ctxscope.core import bounded_input
        from ctxscope.errors import InputError

        path = self.path_for(session_id)
        if not os.path.lexists(path):
            return []
        limit = max_bytes if max_bytes is not None else bounded_input.max_bytes(None)
        data = bounded_input.read_bytes(path, limit)
        records = []
        lines = data.split(b"\n")
        for number, raw in enumerate(lines, 1):
            if not raw.strip():
                continue
            try:
                record = bounded_input.loads(raw, str(path), number)
            except InputError as exc:
                if number == len(lines):
                    # The last line, without its newline, no record: a write in progress (readers take no
                    # lock) or a writer stopped mid-write, whose bytes the next append drops. Not data yet.
                    break
                reason = str(exc).split(": ", 1)[-1]
                raise InputError(str(path), f"not a JSON record ({reason}); a damaged local store file: "
                                 "delete it", number) from None
            if not isinstance(record, dict):
                raise InputError(str(path), "not a JSON record (not an object); a damaged local store file: delete it",
                                 number)
            records.append((number, record))
        return records

    def _last_record(self, path: Path) -> dict[str, Any] | None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return None
            start = max(0, st.st_size - _TAIL_BYTES)
            tail = os.pread(fd, st.st_size - start, start)
        finally:
            os.close(fd)
        for raw in reversed(tail.splitlines()):
            if raw.strip():
                try:
                    record = json.loads(raw)
                except (ValueError, RecursionError):
                    continue
                if isinstance(record, dict):
                    return record
        return None

    # -- learned self-calibration (a sidecar JSON per model) ---------------

    def _calibration_path(self, model: str) -> Path:
        return self.calibration_dir / (_slug(model) + ".json")

    def save_calibration(self, model: str, data: Mapping[str, Any]) -> Path:
        """Keep what was learned about a model's counting (replaced atomically)."""
        with self._lock:
            _prepare_root(self.root)
            _private_dir(self.calibration_dir)
            _remove_dead_temporaries(self.calibration_dir)
            path = self._calibration_path(model)
            fd, tmp = _temporary(self.calibration_dir, ".json")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as out:
                    json.dump({"model": model, **dict(data)}, out)
                os.replace(tmp, path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            return path

    def load_calibration(self, model: str) -> dict[str, Any] | None:
        """What :meth:`save_calibration` kept for a model, or None (also if unreadable)."""
        path = self._calibration_path(model)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("model") != model:
            return None
        return data

    # -- the tracker's observations ---------------------------------------

    def attach(self) -> bool:
        """Subscribe to the tracker's observations. False when no tracker is there."""
        if self._listener is not None:
            return True
        try:
            from ctxscope.telemetry.tracker import get_tracker
        except ImportError:
            _log.debug("ctxscope: no tracker module; the local store records nothing live")
            return False
        listener = self.submit
        tracker = get_tracker()
        tracker.add_listener(listener)
        # Self-calibration learned in earlier runs is restored from here, and saved here.
        tracker.use_calibration_store(self)
        self._listener = listener
        return True

    def detach(self) -> None:
        """Stop recording the tracker's observations."""
        listener, self._listener = self._listener, None
        if listener is None:
            return
        try:
            from ctxscope.telemetry.tracker import get_tracker

            tracker = get_tracker()
            tracker.remove_listener(listener)
            if tracker.calibration_store is self:
                tracker.use_calibration_store(None)  # saves what is not saved yet
        except Exception:  # noqa: BLE001
            _log.debug("ctxscope: could not detach the local store", exc_info=True)
        self.flush()
