"""Every environment variable ctxscope reads, and the only parsers of their values.

Configuration is read into a frozen :class:`Settings` at start (an
instrumentor turned on, a processor or tracker built, a CLI command run),
never per request: :func:`settings` parses the environment once for a given
set of values and hands the same object back until one of ctxscope's
variables changes (tests and long-lived shells change them; a request never
sees a half-read configuration).

A value that cannot be parsed keeps the documented default and is logged
once, as one line naming the variable and the value: configuration read at
run time never breaks the program.

The OpenTelemetry variables that ctxscope's own :func:`ctxscope.setup` reads
(endpoints and protocols) are the SDK's; their names come from the SDK's
``environment_variables`` modules, and :func:`otel` is the one place they are
read.
"""

from __future__ import annotations

from ctxscope._blake2b import blake2b
from ctxscope._record import FrozenRecord
import fnmatch
import logging
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "agent_session_dirs",
    "scratch_dir",
    "excluded_hosts",
    "HttpClientEnvironment",
    "http_client_environment",
    "CAPTURE_CONTENT_VALUES",
    "CTXSCOPE_CAPTURE_LABELS",
    "CTXSCOPE_COMPACT_THRESHOLD_TOKENS",
    "CTXSCOPE_DATA_DIR",
    "CTXSCOPE_EFFECTIVE_WINDOW_TOKENS",
    "CTXSCOPE_HASH_KEY",
    "CTXSCOPE_HTTP_EXCLUDE_HOSTS",
    "CTXSCOPE_MAX_SESSIONS",
    "CTXSCOPE_METRICS_SESSION_KEY",
    "CTXSCOPE_REPLAY_EXPORT_TIMEOUT_MS",
    "CTXSCOPE_SHUTDOWN_TIMEOUT_MS",
    "CTXSCOPE_STORE",
    "CTXSCOPE_TOKENIZER",
    "CTXSCOPE_WATCH_KILL_AT",
    "CTXSCOPE_WINDOW_TOKENS",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_REPLAY_EXPORT_TIMEOUT_MS",
    "DEFAULT_SHUTDOWN_TIMEOUT_MS",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
    "Settings",
    "TMPDIR",
    "TOKENIZERS",
    "LimitRule",
    "otel",
    "parse_limit_rule",
    "parse_limit_rules",
    "read",
    "set_default",
    "settings",
    "tiktoken_cache_dir",
    "cache_dir",
    "watch_kill_at",
]

_log = logging.getLogger(__name__)

# ---------------------------------------------------------------------------
# The variables, one constant each
# ---------------------------------------------------------------------------

OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""Message content in telemetry (SPEC section 7), off by default: ``true``/``false``, or one of
``opentelemetry-util-genai``'s modes ``NO_CONTENT``, ``SPAN_ONLY``, ``EVENT_ONLY``, ``SPAN_AND_EVENT``."""

CTXSCOPE_TOKENIZER = "CTXSCOPE_TOKENIZER"
"""``auto`` (default), ``tiktoken``, ``chars`` or ``bytes``: the counting basis."""

CTXSCOPE_HASH_KEY = "CTXSCOPE_HASH_KEY"
"""Key of the keyed hash behind item ids and session fingerprints (default: a fixed key)."""

CTXSCOPE_CAPTURE_LABELS = "CTXSCOPE_CAPTURE_LABELS"
"""``true`` lets file paths and commands into change labels (default: tool names only)."""

CTXSCOPE_WINDOW_TOKENS = "CTXSCOPE_WINDOW_TOKENS"
"""Context window override: tokens for every model, or ``pattern=tokens`` pairs (``claude-*=200000,gpt-4o*=128000``)."""

CTXSCOPE_EFFECTIVE_WINDOW_TOKENS = "CTXSCOPE_EFFECTIVE_WINDOW_TOKENS"
"""The harness's effective (compaction) window, when smaller than the model's; same syntax as the window."""

CTXSCOPE_COMPACT_THRESHOLD_TOKENS = "CTXSCOPE_COMPACT_THRESHOLD_TOKENS"
"""The automatic compaction threshold: tokens or a percentage (``80%``) of the effective window, else the window."""

CTXSCOPE_MAX_SESSIONS = "CTXSCOPE_MAX_SESSIONS"
"""Live sessions tracked at once (default 64), by the tracker and the span processor alike; the least
recently used is dropped past it. ``0`` or a negative number is not a bound: the default stands."""

CTXSCOPE_DATA_DIR = "CTXSCOPE_DATA_DIR"
"""Directory of the local store (default ``$XDG_DATA_HOME/ctxscope``, else ``~/.local/share/ctxscope``)."""

CTXSCOPE_STORE = "CTXSCOPE_STORE"
"""``auto`` (default: keep the local store when no OTLP endpoint is configured), ``on`` or ``off``."""

CTXSCOPE_SHUTDOWN_TIMEOUT_MS = "CTXSCOPE_SHUTDOWN_TIMEOUT_MS"
"""At most this long (ms, default 3000) is spent on the final export at exit, on SIGTERM and in
``Telemetry.shutdown()``."""

CTXSCOPE_REPLAY_EXPORT_TIMEOUT_MS = "CTXSCOPE_REPLAY_EXPORT_TIMEOUT_MS"
"""``ctxscope replay``: one export's time (ms, default 3000), its retries included, unless an
``OTEL_EXPORTER_OTLP[_TRACES|_METRICS]_TIMEOUT`` sets the exporters' own; past it the export has failed,
and the replay sends nothing more and exits 1 (a batch rejected at once: that batch lost, exit 1;
docs/replay-watch.md)."""

CTXSCOPE_METRICS_SESSION_KEY = "CTXSCOPE_METRICS_SESSION_KEY"
"""``on`` (default): per-session gauges keyed by ``llm.context.session.id``; ``off`` (fleet mode): no
per-session series, per-request histograms instead (docs/dashboards.md, "A fleet")."""

CTXSCOPE_HTTP_EXCLUDE_HOSTS = "CTXSCOPE_HTTP_EXCLUDE_HOSTS"
"""Comma-separated host names whose requests the HTTP transport layer leaves unread (docs/instrumentation.md)."""

CTXSCOPE_WATCH_KILL_AT = "CTXSCOPE_WATCH_KILL_AT"
"""A fault hook for tests: ``STEP`` or ``STEP:N`` makes ``ctxscope watch`` kill itself with SIGKILL at the
N-th (default first) commit that released calls, at STEP: ``released`` (spans written, not exported),
``exported`` (exported, the state not saved) or ``saved``. Unset in normal use."""

CLAUDE_CONFIG_DIR = "CLAUDE_CONFIG_DIR"
"""Claude Code's configuration directory (default ``~/.claude``), as Claude Code reads it: sessions in ``projects/``."""

TMPDIR = "TMPDIR"
"""The folder of temporary files, read first as :mod:`tempfile` reads it: where ``analyze`` makes its unnamed
scratch file (a long session's per-call rows, ``ctxscope._scratch``); default ``/tmp``."""

CODEX_HOME = "CODEX_HOME"
"""Codex CLI's home (default ``~/.codex``), as Codex reads it: sessions are in ``sessions/``."""

_OURS = (
    OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, CTXSCOPE_TOKENIZER, CTXSCOPE_HASH_KEY,
    CTXSCOPE_CAPTURE_LABELS, CTXSCOPE_WINDOW_TOKENS, CTXSCOPE_EFFECTIVE_WINDOW_TOKENS,
    CTXSCOPE_COMPACT_THRESHOLD_TOKENS, CTXSCOPE_MAX_SESSIONS, CTXSCOPE_DATA_DIR, CTXSCOPE_STORE,
    CTXSCOPE_SHUTDOWN_TIMEOUT_MS, CTXSCOPE_HTTP_EXCLUDE_HOSTS, CTXSCOPE_METRICS_SESSION_KEY,
    CTXSCOPE_REPLAY_EXPORT_TIMEOUT_MS,
    "XDG_DATA_HOME", "HOME",  # the data directory's defaults
)

DEFAULT_MAX_SESSIONS = 64
DEFAULT_SHUTDOWN_TIMEOUT_MS = 3000
DEFAULT_REPLAY_EXPORT_TIMEOUT_MS = 3000
TOKENIZERS = ("auto", "tiktoken", "chars", "bytes")
CAPTURE_CONTENT_VALUES = ("NO_CONTENT", "SPAN_ONLY", "EVENT_ONLY", "SPAN_AND_EVENT")
STORE_VALUES = ("auto", "on", "off")

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")

# ---------------------------------------------------------------------------
# Settings
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # FrozenRecord: see ctxscope._record
class LimitRule(FrozenRecord):
    """One ``pattern=value`` of a limits variable: tokens, or a share of the window (``80%``)."""

    pattern: str
    value: int | None = None
    percent: float | None = None

    def matches(self, model: str) -> bool:
        """Shell-style pattern on the model name, case-insensitive."""
        return fnmatch.fnmatchcase(model.lower(), self.pattern.lower())


@dataclass(frozen=True, repr=False, eq=False)  # FrozenRecord: see ctxscope._record
class Settings(FrozenRecord):
    """ctxscope's configuration, parsed once; every field has its documented default."""

    capture_content: str = "NO_CONTENT"  # one of CAPTURE_CONTENT_VALUES
    tokenizer: str = "auto"  # one of TOKENIZERS
    hash_key: bytes | None = None  # the user's key (at most 64 bytes), None for the built-in keys
    capture_labels: bool = False
    window_tokens: tuple[LimitRule, ...] = ()
    effective_window_tokens: tuple[LimitRule, ...] = ()
    compact_threshold_tokens: tuple[LimitRule, ...] = ()
    max_sessions: int = DEFAULT_MAX_SESSIONS
    data_dir: Path = Path("~/.local/share/ctxscope")
    store: str = "auto"  # one of STORE_VALUES
    shutdown_timeout_ms: int = DEFAULT_SHUTDOWN_TIMEOUT_MS
    replay_export_timeout_ms: int = DEFAULT_REPLAY_EXPORT_TIMEOUT_MS
    http_exclude_hosts: frozenset[str] = frozenset()
    metrics_session_key: bool = True  # False: fleet mode


def read(environ: Mapping[str, str] | None = None) -> Settings:
    """Parse ``environ`` (default ``os.environ``); a bad value is logged once and keeps its default."""
    env = os.environ if environ is None else environ
    return Settings(
        capture_content=_capture_content(env.get(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT)),
        tokenizer=_choice(env, CTXSCOPE_TOKENIZER, TOKENIZERS, "auto"),
        hash_key=_hash_key(env.get(CTXSCOPE_HASH_KEY)),
        capture_labels=_boolean(env, CTXSCOPE_CAPTURE_LABELS, "labels stay tool names"),
        window_tokens=_limit_rules(env, CTXSCOPE_WINDOW_TOKENS, allow_percent=False),
        effective_window_tokens=_limit_rules(env, CTXSCOPE_EFFECTIVE_WINDOW_TOKENS, allow_percent=False),
        compact_threshold_tokens=_limit_rules(env, CTXSCOPE_COMPACT_THRESHOLD_TOKENS, allow_percent=True),
        max_sessions=_positive(env, CTXSCOPE_MAX_SESSIONS, DEFAULT_MAX_SESSIONS),
        data_dir=_data_dir(env),
        store=_store(env),
        shutdown_timeout_ms=_milliseconds(env, CTXSCOPE_SHUTDOWN_TIMEOUT_MS, DEFAULT_SHUTDOWN_TIMEOUT_MS),
        replay_export_timeout_ms=_milliseconds(env, CTXSCOPE_REPLAY_EXPORT_TIMEOUT_MS,
                                               DEFAULT_REPLAY_EXPORT_TIMEOUT_MS),
        http_exclude_hosts=excluded_hosts(env.get(CTXSCOPE_HTTP_EXCLUDE_HOSTS)),
        metrics_session_key=_boolean(env, CTXSCOPE_METRICS_SESSION_KEY, "metrics keep the session key",
                                     default=True),
    )


_cache_lock = threading.Lock()
_cache: tuple[tuple[str | None, ...], Settings] | None = None


def settings() -> Settings:
    """The settings of ``os.environ``: parsed once, parsed again only when a variable of ours changed."""
    global _cache
    key = tuple(os.environ.get(name) for name in _OURS)
    cached = _cache
    if cached is not None and cached[0] == key:
        return cached[1]
    with _cache_lock:
        if _cache is None or _cache[0] != key:
            _cache = (key, read())
        return _cache[1]


# ---------------------------------------------------------------------------
# The OpenTelemetry variables ctxscope.setup() reads (names are the SDK's)
# ---------------------------------------------------------------------------

def otel(environ: Mapping[str, str] | None, *names: str) -> str | None:
    """The first of ``names`` set to a non-blank value in ``environ`` (default ``os.environ``)."""
    env = os.environ if environ is None else environ
    for name in names:
        value = (env.get(name) or "").strip()
        if value:
            return value
    return None


def watch_kill_at(steps: tuple[str, ...], environ: Mapping[str, str] | None = None) -> tuple[str, int] | None:
    """``CTXSCOPE_WATCH_KILL_AT`` as (step, n), or None (unset, or not one of ``steps``: logged)."""
    raw = otel(environ, CTXSCOPE_WATCH_KILL_AT)
    if raw is None:
        return None
    step, _, count = raw.partition(":")
    n = int(count) if count.strip().isdigit() else 1 if not count else 0
    if step.strip() not in steps or n < 1:
        _warn(CTXSCOPE_WATCH_KILL_AT, raw, "no fault hook")
        return None
    return step.strip(), n


def scratch_dir(environ: Mapping[str, str] | None = None) -> str:
    """The folder of ctxscope's unnamed scratch files: ``TMPDIR``, else ``/tmp``."""
    env = os.environ if environ is None else environ
    return env.get(TMPDIR) or "/tmp"


def agent_session_dirs(environ: Mapping[str, str] | None = None) -> list[Path]:
    """Claude Code's projects folder and Codex's sessions folder, found as the agents find them."""
    env = os.environ if environ is None else environ
    claude = Path(env.get(CLAUDE_CONFIG_DIR) or Path.home() / ".claude").expanduser()
    codex = Path(env.get(CODEX_HOME) or Path.home() / ".codex").expanduser()
    return [claude / "projects", codex / "sessions"]


@dataclass(frozen=True, repr=False, eq=False)  # FrozenRecord: see ctxscope._record
class HttpClientEnvironment(FrozenRecord):
    """What in the environment ``requests`` (the SDK's OTLP/HTTP transport) would act on, for a plain
    ``http://`` request: ``ctxscope.telemetry.http_transport`` sends only where none of it is set."""

    # ``http_proxy`` or ``all_proxy`` (any case, a value): the two an http:// URL's proxy is chosen from
    # (requests' select_proxy); ``no_proxy`` alone or ``https_proxy`` changes nothing for it
    proxies: bool
    netrc: bool  # ``NETRC``, or a ``~/.netrc`` or ``~/_netrc``: credentials requests adds
    credential_provider: bool  # OTEL_PYTHON_EXPORTER_OTLP_HTTP_[SIGNAL_]CREDENTIAL_PROVIDER: an SDK session


def http_client_environment(environ: Mapping[str, str] | None = None) -> HttpClientEnvironment:
    """:class:`HttpClientEnvironment` of ``environ`` (default ``os.environ``), read as requests and the SDK read it
    (a value counts when it is not empty, blank or not)."""
    env = os.environ if environ is None else environ
    home = env.get("HOME") or os.path.expanduser("~")
    return HttpClientEnvironment(
        proxies=any(value and name.lower() in ("http_proxy", "all_proxy") for name, value in env.items()),
        netrc=bool(env.get("NETRC")) or any(os.path.exists(os.path.join(home, name))
                                            for name in (".netrc", "_netrc")),
        credential_provider=any(value and name.startswith("OTEL_PYTHON_EXPORTER_OTLP_HTTP_")
                                and name.endswith("CREDENTIAL_PROVIDER") for name, value in env.items()))


def tiktoken_cache_dir() -> str:
    """Where tiktoken keeps downloaded encodings, by tiktoken's own rule (``tiktoken/load.py``); "" is off.

    ``TIKTOKEN_CACHE_DIR``, else ``DATA_GYM_CACHE_DIR``, else ``<tmp>/data-gym-cache``. Read when
    asked (tests and the CLI point it at an offline copy before the first load).
    """
    for name in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if name in os.environ:
            return os.environ[name]
    import tempfile  # only without either variable: tempfile is a costly import for a start-up

    return os.path.join(tempfile.gettempdir(), "data-gym-cache")


def terminal_columns() -> int:
    """The terminal's width as ``shutil.get_terminal_size`` finds it: ``COLUMNS`` when a positive
    number, else the width of the terminal on standard output, else 80 (without importing shutil)."""
    try:
        columns = int(os.environ.get("COLUMNS", 0))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def cache_dir() -> Path:
    """ctxscope's cache (``$XDG_CACHE_HOME/ctxscope``, else ``~/.cache/ctxscope``): what can be rebuilt.

    Kept apart from the data directory on purpose: the local store's directory is created only when
    the store is on, and a cache never turns it on.
    """
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "ctxscope"


def set_default(name: str, value: str) -> None:
    """Give an OpenTelemetry variable a value for the SDK's own configurator, unless the user set it."""
    os.environ.setdefault(name, value)


# ---------------------------------------------------------------------------
# Parsers
# ---------------------------------------------------------------------------

_warned: set[tuple[str, str]] = set()


def _warn(name: str, value: str, keeps: str) -> None:
    """One line per variable and value: a setting read again is not warned about again."""
    if (name, value) in _warned:
        _log.debug("ignoring %s=%r again; %s", name, value, keeps)
        return
    _warned.add((name, value))
    _log.warning("ignoring %s=%r; %s", name, value, keeps)


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...], default: str) -> str:
    raw = env.get(name)
    value = (raw or "").strip().lower()
    if not value:
        return default
    if value in choices:
        return value
    _warn(name, raw or "", f"one of {', '.join(choices)} is needed; using {default}")
    return default


def _boolean(env: Mapping[str, str], name: str, keeps: str, *, default: bool = False) -> bool:
    raw = env.get(name)
    if default and (raw is None or not raw.strip()):
        return True  # unset or blank: the default
    value = (raw or "").strip().lower()
    if value in _TRUE:
        return True
    if value not in _FALSE:
        _warn(name, raw or "", f"true or false is needed; {keeps}")
        return default
    return False


def _positive(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw.strip().replace("_", ""))
    except ValueError:
        value = 0
    if value > 0:
        return value
    _warn(name, raw, f"a positive whole number is needed; using {default}")
    return default


def excluded_hosts(value: str | None) -> frozenset[str]:
    """Host names of a comma-separated list, case-insensitive (``CTXSCOPE_HTTP_EXCLUDE_HOSTS``)."""
    return frozenset(h.strip().lower() for h in (value or "").split(",") if h.strip())


def _milliseconds(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw.strip())
    except ValueError:
        value = -1.0
    if value >= 0 and value == value and value != float("inf"):
        return int(value)
    _warn(name, raw, f"milliseconds (0 or more) are needed; using {default}")
    return default


def _capture_content(raw: str | None) -> str:
    text = (raw or "").strip()
    if not text:
        return "NO_CONTENT"
    booleans = {"true": "SPAN_ONLY", "false": "NO_CONTENT"}  # the older instrumentations' form
    if text.lower() in booleans:
        return booleans[text.lower()]
    if text.upper() in CAPTURE_CONTENT_VALUES:
        return text.upper()
    _warn(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, text,
          f"one of true, false, {', '.join(CAPTURE_CONTENT_VALUES)} is needed; no content is captured")
    return "NO_CONTENT"


def _hash_key(raw: str | None) -> bytes | None:
    if not raw:
        return None
    key = raw.encode("utf-8", "surrogatepass")
    # BLAKE2b keys are at most 64 bytes: a longer key is hashed down first.
    return key if len(key) <= 64 else blake2b(key).digest()


def _data_dir(env: Mapping[str, str]) -> Path:
    explicit = env.get(CTXSCOPE_DATA_DIR)
    if explicit:
        return Path(explicit).expanduser()
    xdg = env.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "ctxscope"


def _store(env: Mapping[str, str]) -> str:
    raw = env.get(CTXSCOPE_STORE)
    value = (raw or "auto").strip().lower()
    if value in _TRUE:
        return "on"
    if value in _FALSE and value:
        return "off"
    if value != "auto":
        _warn(CTXSCOPE_STORE, raw or "", "auto, on or off is needed; using auto")
    return "auto"


def parse_limit_rule(text: str, name: str, allow_percent: bool) -> LimitRule:
    """``[pattern=]tokens`` (or ``[pattern=]NN%`` where allowed); ``ValueError`` naming ``name`` otherwise."""
    text = text.strip()
    pattern = "*"
    if "=" in text:
        pattern, text = (part.strip() for part in text.rsplit("=", 1))
    try:
        if allow_percent and text.endswith("%"):
            percent = float(text[:-1]) / 100
            if not 0 < percent <= 1:
                raise ValueError
            return LimitRule(pattern, percent=percent)
        value = int(text.replace("_", ""))
        if value <= 0:
            raise ValueError
        return LimitRule(pattern, value=value)
    except ValueError:
        raise ValueError(f"{name}: {text!r} is not a positive number of tokens"
                         + (" or a percentage" if allow_percent else "")) from None


def parse_limit_rules(spec: str | None, name: str, allow_percent: bool = False) -> tuple[LimitRule, ...]:
    """Comma-separated :func:`parse_limit_rule` values; ``ValueError`` on the first bad one."""
    if not spec or not spec.strip():
        return ()
    return tuple(parse_limit_rule(part, name, allow_percent) for part in spec.split(",") if part.strip())


def _limit_rules(env: Mapping[str, str], name: str, allow_percent: bool) -> tuple[LimitRule, ...]:
    raw = env.get(name)
    try:
        return parse_limit_rules(raw, name, allow_percent)
    except ValueError:
        _warn(name, raw or "", "a positive number of tokens"
              + (" or a percentage" if allow_percent else "") + " (or pattern=tokens pairs) is needed; no override")
        return ()
