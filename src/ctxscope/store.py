"""The local store: one owner-only JSONL file per session (the embedded default).

With no OTLP endpoint configured, ctxscope keeps a record of every observed
model call here, so that ``ctxscope context`` can report a session. Counts
and part paths only (SPEC section 7): no prompt, result or response text, no
change labels, no item ids.

Layout (``docs/telemetry.md``)::

    <data dir>/sessions/<slug>-<hash>.jsonl     one record per call, oldest first
    <data dir>/calibration/<slug>-<hash>.json   learned self-calibration of a model

The data dir is ``$CTXSCOPE_DATA_DIR``, else ``$XDG_DATA_HOME/ctxscope``,
else ``~/.local/share/ctxscope``. Directories are 0700 and files 0600
whatever the umask. A session file past :data:`MAX_FILE_BYTES` drops its
oldest half (written to a temporary file, then renamed over the old one);
past :data:`MAX_SESSIONS` files, the least recently written is removed.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from .config import read as read_settings
from .config import settings
from .observation import Observation

__all__ = [
    "FORMAT_VERSION",
    "MAX_FILE_BYTES",
    "MAX_SESSIONS",
    "LocalStore",
    "SessionInfo",
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


def data_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Where the local store lives (see the module docstring)."""
    return (settings() if environ is None else read_settings(environ)).data_dir


def _slug(name: str) -> str:
    """A file name for any session id or model: readable prefix, hash for uniqueness."""
    digest = hashlib.blake2b(name.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    prefix = re.sub(r"[^A-Za-z0-9._-]+", "_", name)[:40].strip("._") or "session"
    return f"{prefix}-{digest}"


def _private_dir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    # mkdir's mode is masked by the umask and ignored for an existing directory.
    os.chmod(path, 0o700)
    return path


@dataclass(frozen=True)
class SessionInfo:
    """One stored session, as ``ctxscope context --list`` shows it."""

    session_id: str
    path: Path
    last_ns: int
    model: str | None
    provider: str | None
    size_bytes: int


def record_from_observation(observation: Observation) -> dict[str, Any]:
    """The stored record of one call: counts, identities and part paths only."""
    snapshot = observation.snapshot
    annotation = snapshot.annotation
    ann = annotation.to_json()
    ann.pop("changes", None)  # labels and ids stay out of the store
    parts = dict(snapshot.parts)
    # This runs on the caller's thread for every call: one tight pass over the
    # items, then the rare paths the ledger renamed (past the parts cap, or
    # placed under their category) are folded into the part it counted them in.
    by_path: defaultdict[tuple[Any, str], int] = defaultdict(int)
    for item in snapshot.items:
        by_path[item.category, item.part] += item.chars
    chars: dict[str, int] = {}
    for (category, path), count in by_path.items():
        if path not in parts:
            nested = f"{category.value}/{path}" if path else category.value
            path = nested if nested in parts else f"{category.value}/other"
        chars[path] = chars.get(path, 0) + int(count)
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
        "parts": parts,
        "chars": chars,
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

    # -- writing -------------------------------------------------------------

    def path_for(self, session_id: str) -> Path:
        return self.sessions_dir / (_slug(session_id) + _SUFFIX)

    def append(self, session_id: str, record: Mapping[str, Any]) -> Path:
        """Append one record to a session's file (raises OSError on I/O failure)."""
        line = (json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        with self._lock:
            _private_dir(self.root)
            _private_dir(self.sessions_dir)
            path = self.path_for(session_id)
            created = not path.exists()
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.fchmod(fd, 0o600)
                os.write(fd, line)
                size = os.fstat(fd).st_size
            finally:
                os.close(fd)
            if size > self.max_file_bytes:
                self._drop_oldest_half(path)
            if created:
                self._evict(keep=path)
            return path

    def record(self, observation: Observation) -> None:
        """Store one observation now (synchronously); errors are logged, never raised."""
        try:
            self.append(observation.session_id, record_from_observation(observation))
        except Exception:  # noqa: BLE001 - the local record must never break the user's call
            _log.warning("ctxscope: could not write the local record of session %s",
                         observation.session_id, exc_info=True)

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
                    atexit.register(self.flush)
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

    def _drop_oldest_half(self, path: Path) -> None:
        data = path.read_bytes()
        keep = self.max_file_bytes // 2
        lines = data.splitlines(keepends=True)
        kept: list[bytes] = []
        total = 0
        for line in reversed(lines):  # newest first, until half the cap is reached
            if total + len(line) > keep:
                break
            kept.append(line)
            total += len(line)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=_SUFFIX)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.writelines(reversed(kept))
            # Atomic: a reader sees the old file or the new one, never half of one.
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _evict(self, keep: Path) -> None:
        others = [p for p in self.sessions_dir.glob("*" + _SUFFIX) if p != keep]
        others.sort(key=lambda p: p.stat().st_mtime_ns)
        for old in others[:max(0, len(others) + 1 - self.max_sessions)]:
            old.unlink(missing_ok=True)

    # -- reading -------------------------------------------------------------

    def sessions(self) -> list[SessionInfo]:
        """Stored sessions, most recently written first."""
        out: list[SessionInfo] = []
        if not self.sessions_dir.is_dir():
            return out
        for path in self.sessions_dir.glob("*" + _SUFFIX):
            try:
                last = self._last_record(path)
                stat = path.stat()
            except (OSError, ValueError):
                continue
            if last is None:
                continue
            model = last.get("response_model") or last.get("request_model")
            out.append(SessionInfo(str(last.get("session", "")), path, int(last.get("ts") or stat.st_mtime_ns),
                                   model, last.get("provider"), stat.st_size))
        out.sort(key=lambda s: (s.last_ns, s.path.stat().st_mtime_ns), reverse=True)
        return out

    def read(self, session_id: str) -> list[dict[str, Any]]:
        """Every stored record of a session, oldest first ([] if none).

        Raises :class:`ctxscope.errors.InputError` naming the file and line of
        a record that is not JSON.
        """
        from .errors import InputError

        path = self.path_for(session_id)
        if not path.exists():
            return []
        records = []
        with path.open("rb") as handle:
            for number, raw in enumerate(handle, 1):
                if not raw.strip():
                    continue
                try:
                    records.append(json.loads(raw))
                except ValueError:
                    raise InputError(str(path), "not a JSON record (a damaged local store file: "
                                     "delete it)", number) from None
        return records

    def _last_record(self, path: Path) -> dict[str, Any] | None:
        with path.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - _TAIL_BYTES))
            tail = handle.read()
        for raw in reversed(tail.splitlines()):
            if raw.strip():
                try:
                    return json.loads(raw)
                except ValueError:
                    continue
        return None

    # -- learned self-calibration (a sidecar JSON per model) ---------------

    def _calibration_path(self, model: str) -> Path:
        return self.calibration_dir / (_slug(model) + ".json")

    def save_calibration(self, model: str, data: Mapping[str, Any]) -> Path:
        """Keep what was learned about a model's counting (replaced atomically)."""
        with self._lock:
            _private_dir(self.root)
            _private_dir(self.calibration_dir)
            path = self._calibration_path(model)
            fd, tmp = tempfile.mkstemp(dir=self.calibration_dir, prefix=".tmp-", suffix=".json")
            try:
                os.fchmod(fd, 0o600)
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
            from .tracker import get_tracker
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
            from .tracker import get_tracker

            tracker = get_tracker()
            tracker.remove_listener(listener)
            if tracker.calibration_store is self:
                tracker.use_calibration_store(None)  # saves what is not saved yet
        except Exception:  # noqa: BLE001
            _log.debug("ctxscope: could not detach the local store", exc_info=True)
        self.flush()
