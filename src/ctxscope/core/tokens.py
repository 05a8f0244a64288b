"""Counting bases (SPEC section 3): chars/4, native-bytes/4, tiktoken/<encoding>.

A :class:`Counter` turns text into tokens under one basis. ``counter_for``
picks the basis for a model. Loading a tiktoken encoding (``load_encoding``):

- **A local copy** (tiktoken's cache, ``TIKTOKEN_CACHE_DIR``): loaded however
  long a busy machine takes (up to :data:`CACHED_LOAD_TIMEOUT_S`, a bound
  only a broken cache reaches): a loaded machine never changes the basis.
- **No local copy**: tiktoken downloads it, bounded by
  :data:`ENCODING_LOAD_TIMEOUT_S` (a machine without network may hang).
- ``tokenizer="tiktoken"`` is tiktoken or :class:`EncodingUnavailableError` (a
  one-line error); ``"auto"`` falls back to ``chars/4`` only when the
  encoding cannot be had, logs one warning, and its counter says so
  (``fallback = "unavailable"``, the span's ``llm.context.basis_fallback``).
  The decision is kept for the process, so one run counts on one basis.
- **Live path** (``counter_for(..., wait=False)``, the tracker's): the
  encoding a model needs starts loading, in a background thread and never on
  the caller's thread, when the first call of such a model is counted; no
  encoding is loaded before (instrumenting loads nothing), none that no model
  needs, and each at most once a process. Counted off the call path
  (:func:`off_the_call_path`: the measuring worker, a flush), a count waits
  for the load up to :data:`MEASURING_LOAD_WAIT_S`. A call counted before it
  is ready uses ``chars/4`` with ``fallback = "loading"`` (on its span), and
  the next calls use the encoding. :func:`preload` starts a load ahead of the first
  call, for a process that knows its models and prefers the memory spent early.

Every counter counts on ctxscope's compact table (:mod:`ctxscope.core.bpe`),
the live path (an instrumented application, ``wait=False``) and the batch
commands (``analyze``, ``replay``, ``watch``, ``inspect``: ``wait=True``)
alike: about 4 MB for o200k_base, read back from ctxscope's cache in a few
milliseconds, where tiktoken's encoder holds 41 MB and its build costs 0.3-0.45
s of CPU a process. Its counts are tiktoken's (``tests/core/test_bpe.py``);
it is pure Python, and on the bench's sessions it counts at about the CPU a
character of tiktoken's Rust ``encode_ordinary`` (both are their regex split:
docs/analyze.md "Performance"), so a batch run is the build's CPU and 60 MB
of RSS the cheaper. An encoding already in tiktoken's registry (the
application or a library loaded it) is used as it is instead: one copy a
process, shared, counted by :class:`TiktokenCounter`. An encoding the table
cannot hold is counted by tiktoken's own encoder (:func:`_counting_encoding`),
which ``load_encoding`` also gives with its default engine.

What tiktoken's encoder costs (``bench/bench_peers.py``, docs/instrumentation.md
"What it costs"): ``tiktoken.get_encoding("o200k_base")`` adds about 76 MB
of RSS (``cl100k_base`` 39 MB): the Rust encoder's tables (about 40 MB: its
encoder and decoder maps and sorted token bytes, each a copy of the 199,998
tokens; 2 MB of regexes; 2.4 MB of its library) and the Python rank table it
was built from (``Encoding._mergeable_ranks``, about 28 MB of bytes and int
objects, plus the loading temporaries). tiktoken reads that table again only
to pickle an encoding that is not in its registry (``Encoding.__getstate__``,
tiktoken/core.py): counting never does. So :func:`_counting_encoding` uses an
encoding already in tiktoken's registry as it is, and otherwise builds its
own, unregistered ``tiktoken.Encoding`` from the plugin's constructor and
lets go of its Python rank table: about 48 MB for o200k instead of 76, 27
instead of 39 for cl100k. It is never pickled and never handed out of the
process' counting. The constructor's output comes from ctxscope's cache
after the first process (:mod:`ctxscope.core.encoding_load`: 0.04 s instead
of the 0.3 s parse, and no parse garbage left in the heap), and the heap is
trimmed after the build.

A process that must stay smaller counts with ``CTXSCOPE_TOKENIZER=chars`` or
``bytes``, which load nothing.

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import threading
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Protocol, Sequence

from ctxscope.config import tiktoken_cache_dir
from ctxscope.errors import UserError
from ctxscope.schema import BASIS_BYTES, BASIS_CHARS, tiktoken_basis

if TYPE_CHECKING:  # pragma: no cover
    # The compact table and its loader are imported where an encoding is loaded: chars and bytes
    # never load one (bpe and encoding_load: ~4 M instructions of a short `analyze --tokenizer chars`).
    from ctxscope.core import bpe

_log = logging.getLogger(__name__)

# A download (no local copy of the encoding): past this, the encoding is unavailable.
ENCODING_LOAD_TIMEOUT_S = 2.0
# A local copy: reading and building the BPE takes 0.3 s idle and several seconds on a
# loaded machine; only a broken cache (tiktoken then downloads again) waits this long.
CACHED_LOAD_TIMEOUT_S = 120.0
# Why a counter counts chars/4 although tiktoken was asked for (``Counter.fallback``).
FALLBACK_LOADING = "loading"  # the background load is not done yet (live path only)
FALLBACK_UNAVAILABLE = "unavailable"  # the encoding cannot be had (no network, no cache)

# Images whose size is unknown: SPEC section 3 ("about 1,600 tokens").
DEFAULT_IMAGE_TOKENS = 1600


class Counter(Protocol):
    basis: str

    def count(self, text: str) -> int: ...


class EncodingUnavailableError(UserError):
    """``--tokenizer tiktoken`` and the encoding cannot be loaded (one line: which, why, what to do)."""


EncodingUnavailable = EncodingUnavailableError  # the name before the Error suffix, kept for callers


class CharsCounter:
    """``ceil(chars / 4)`` per item."""

    basis = BASIS_CHARS

    def count(self, text: str) -> int:
        return -(-len(text) // 4)


class FallbackCounter(CharsCounter):
    """``chars/4`` standing in for tiktoken; ``fallback`` says why (see the module docstring)."""

    def __init__(self, fallback: str) -> None:
        self.fallback = fallback


class BytesCounter:
    """``ceil(utf8_bytes / 4)`` per item."""

    basis = BASIS_BYTES

    def count(self, text: str) -> int:
        if text.isascii():
            return -(-len(text) // 4)
        return -(-len(text.encode("utf-8", "surrogatepass")) // 4)


class TiktokenCounter:
    """Exact BPE count with a tiktoken encoding."""

    def __init__(self, encoding: "object", name: str) -> None:
        self._encode: Callable[[str], list[int]] = encoding.encode_ordinary  # type: ignore[attr-defined]
        # tiktoken's Encoding.encode_ordinary is a Python wrapper around the
        # Rust CoreBPE method; calling the latter directly saves a frame per
        # item on the cold path. The wrapper's only extra is a retry for
        # strings with lone surrogates, kept below.
        core = getattr(encoding, "_core_bpe", None)
        self._core: Callable[[str], list[int]] = getattr(core, "encode_ordinary", None) or self._encode
        # Counting needs the number of tokens, not a list of int objects (about one per
        # 4 characters): the Rust core's encode into a buffer of u32 ranks, with no special
        # token allowed, is encode_ordinary's encoding (the specials are matched only to be
        # skipped: the text between them is encoded as ordinary text) without building the
        # list: ~10-20% less CPU a character (docs/analyze.md). tiktoken >= 0.7 has it.
        self._buffer: Callable[[str, frozenset[str]], object] | None = getattr(
            core, "encode_to_tiktoken_buffer", None)
        self.encoding = encoding
        self.basis = tiktoken_basis(name)

    def count(self, text: str) -> int:
        if not text:
            return 0
        try:
            if self._buffer is not None:
                view = memoryview(self._buffer(text, _NO_SPECIAL))  # type: ignore[arg-type]
                return view.nbytes // 4  # u32 ranks (its shape counts bytes, not ranks)
            return len(self._core(text))
        except UnicodeEncodeError:
            return len(self._encode(text))


_NO_SPECIAL: frozenset[str] = frozenset()  # no special token allowed: every text is ordinary text


class CompactCounter:
    """Exact BPE count on ctxscope's compact table (:mod:`ctxscope.core.bpe`): TiktokenCounter's counts."""

    def __init__(self, encoding: bpe.CompactEncoding, name: str) -> None:
        self.encoding = encoding
        self._count = encoding.count
        self.basis = tiktoken_basis(name)

    def count(self, text: str) -> int:
        return self._count(text)


# ---------------------------------------------------------------------------
# Encoding choice
# ---------------------------------------------------------------------------

# Models whose tokenizer is cl100k_base: the GPT-3.5 / GPT-4 (non-"o") line and
# the ada-002/text-embedding-3 embeddings (tiktoken's own model table agrees).
_CL100K_PREFIXES = ("gpt-4-", "gpt-4", "gpt-3.5", "gpt-35", "text-embedding-ada-002",
                    "text-embedding-3")
# Current OpenAI models (gpt-4o, gpt-4.1, gpt-4.5, gpt-5, o1/o3/o4, codex) use o200k_base.
_O200K_PREFIXES = ("gpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "o1", "o3", "o4", "chatgpt-4o",
                   "codex", "gpt-oss", "computer-use")


def encoding_for_model(model: str | None) -> str:
    """The tiktoken encoding used for a model name.

    o200k_base for current OpenAI models and, as a documented proxy, for
    everything not known to be older (Claude, Gemini, open models: their own
    tokenizers are not public, and o200k_base is the closest modern BPE);
    cl100k_base for the GPT-3.5/GPT-4 line.
    """
    name = (model or "").lower().rsplit("/", 1)[-1]
    if name.startswith(_O200K_PREFIXES):
        return "o200k_base"
    if name.startswith(_CL100K_PREFIXES):
        return "cl100k_base"
    return "o200k_base"


# The tiktoken URL of each public encoding: tiktoken caches a download under sha1(url).
_BLOB = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
_BLOB_NAMES = {"o200k_base": "o200k_base", "o200k_harmony": "o200k_base", "cl100k_base": "cl100k_base",
               "p50k_base": "p50k_base", "p50k_edit": "p50k_base", "r50k_base": "r50k_base"}


def _rank_file(name: str) -> str | None:
    """Where tiktoken keeps (or would keep) its copy of ``name``'s rank file; None: unknown, or caching off."""
    blob = _BLOB_NAMES.get(name)
    folder = tiktoken_cache_dir()
    if blob is None or not folder:
        return None  # caching off: every load downloads
    import hashlib  # here: only a tiktoken load needs it (hashlib loads OpenSSL: a start-up cost)

    return os.path.join(folder, hashlib.sha1(_BLOB.format(blob).encode()).hexdigest())


def encoding_cached(name: str) -> bool:
    """Whether tiktoken holds a local copy of encoding ``name`` (its own cache rule, tiktoken/load.py)."""
    path = _rank_file(name)
    return path is not None and os.path.exists(path)  # as tiktoken checks it


# Which encoder a load builds (module docstring): the compact table, what every counter counts on;
# tiktoken's own, load_encoding's default (and the counters' where the table cannot hold an encoding).
ENGINE_TIKTOKEN = "tiktoken"
ENGINE_COMPACT = "compact"


class _Load:
    """One encoding's load for one engine, in a daemon thread: done, with the encoding or the error."""

    def __init__(self, name: str, engine: str) -> None:
        self.name, self.engine = name, engine
        self.done = threading.Event()
        self.encoding: object | None = None
        self.error: BaseException | None = None
        self.given_up = False  # a blocking wait timed out: the process counts without it
        self.waited_s: float | None = None
        self.thread = threading.Thread(target=self._run, name=f"ctxscope-tiktoken-{name}", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.encoding = (_live_encoding if self.engine == ENGINE_COMPACT else _counting_encoding)(self.name)
        except BaseException as exc:  # noqa: BLE001 - any failure means the encoding is unavailable
            self.error = exc
        finally:
            self.done.set()

    def reason(self) -> str:
        """One short line: the exception's first line (a proxy error is otherwise hundreds of characters)."""
        if self.error is not None:
            text = str(self.error).splitlines()[0][:120] if str(self.error) else ""
            return f"{type(self.error).__name__}: {text}" if text else type(self.error).__name__
        return f"timed out after {self.waited_s:g}s" if self.waited_s is not None else "not loaded yet"

    def available(self) -> object | None:
        return None if self.given_up or not self.done.is_set() else self.encoding


def _registered(name: str) -> object | None:
    """tiktoken's own encoding ``name`` when the application (or a library) has loaded it; it imports nothing."""
    registry = sys.modules.get("tiktoken.registry")
    encodings = getattr(registry, "ENCODINGS", None)
    return encodings.get(name) if isinstance(encodings, dict) else None


def _live_encoding(name: str) -> object:
    """The counters' encoding ``name``: tiktoken's registered one if loaded, else ctxscope's compact table.

    The compact table (:mod:`ctxscope.core.bpe`, about 4 MB for o200k) comes
    from ctxscope's cache without importing tiktoken, or is built once from
    the same constructor :func:`_counting_encoding` uses. An encoding it
    cannot hold is counted by tiktoken's own encoder, and an info line says so.
    """
    from ctxscope.core import bpe
    from ctxscope.core.encoding_load import constructor_kwargs, release_freed_memory

    shared = _registered(name)
    if shared is not None:
        return shared
    rank_file = _rank_file(name)
    built: list[bool] = []  # the constructor ran: a build, not the table read back from the cache

    def kwargs() -> dict[str, object]:
        built.append(True)
        try:
            from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS
        except ImportError as exc:
            raise bpe.NotCompactableError(f"tiktoken has no public plugin here ({exc})") from exc
        constructor = ENCODING_CONSTRUCTORS.get(name)
        if constructor is None:
            raise bpe.NotCompactableError(f"{name} is not one of tiktoken's public encodings")
        return constructor_kwargs(name, constructor, rank_file)

    try:
        encoding = bpe.load(name, rank_file, kwargs)
    except bpe.NotCompactableError as exc:
        _log.info("ctxscope: counting %s with tiktoken's own encoder (about 41 MB for o200k_base): %s", name, exc)
        return _counting_encoding(name)
    if built:
        # A build's rank table and temporaries. Read back from the cache there are none (the file's
        # bytes are one block of their own, unmapped when freed): no ctypes import, no trim.
        release_freed_memory()
    return encoding


def _counting_encoding(name: str) -> object:
    """The encoding ``name`` for counting: tiktoken's registered one if loaded, else a lean one of ours.

    Ours is a ``tiktoken.Encoding`` built from the constructor of tiktoken's
    public plugin (``tiktoken_ext.openai_public``, the same download, cache
    and hash check as ``get_encoding``) without its Python rank table, which
    only pickling reads (module docstring). An encoding of another plugin is
    tiktoken's own, whole.
    """
    import tiktoken
    import tiktoken.registry  # noqa: F401 - what _registered reads

    from ctxscope.core.encoding_load import constructor_kwargs, release_freed_memory

    shared = _registered(name)
    if shared is not None:
        return shared
    try:
        from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS
    except ImportError:  # a tiktoken without its public plugin: its registry finds the encoding
        return tiktoken.get_encoding(name)
    constructor = ENCODING_CONSTRUCTORS.get(name)
    if constructor is None:
        return tiktoken.get_encoding(name)
    rank_file = _rank_file(name)
    encoding = tiktoken.Encoding(**constructor_kwargs(name, constructor, rank_file))
    # The Rust core holds its own copy of the ranks; the Python one (about 28 MB for
    # o200k) is read only by __getstate__, and this encoding is never pickled.
    encoding._mergeable_ranks = {}  # noqa: SLF001
    release_freed_memory()  # the table and the build's temporaries: back to the system (encoding_load)
    return encoding


_loads: dict[tuple[str, str], _Load] = {}
_encodings_lock = threading.Lock()
_warned: set[str] = set()


def _load(name: str, engine: str = ENGINE_TIKTOKEN) -> _Load:
    with _encodings_lock:
        load = _loads.get((name, engine))
        if load is None:
            load = _loads[name, engine] = _Load(name, engine)
        return load


def _warn_unavailable(load: _Load, reason: str) -> None:
    with _encodings_lock:
        if _warned:
            return  # once a process: the spans and the basis say it for every call
        _warned.add(load.name)
    _log.warning("tiktoken encoding %s unavailable (%s); counting with chars/4, and the basis says so",
                 load.name, reason)


def preload(names: Sequence[str] = ()) -> None:
    """Start loading the encodings ``names`` in the background now; none by default.

    Instrumenting calls this with no names: an encoding loads when the first
    call of a model that needs it is counted (the module docstring). A process
    that knows its models may name their encodings (``encoding_for_model``) so
    that its first call is counted on tiktoken, not on the ``loading`` fallback.
    """
    for name in names:
        _load(name, ENGINE_COMPACT)


def load_encoding(name: str, timeout_s: float | None = None, *, warn: bool = True,
                  engine: str = ENGINE_TIKTOKEN) -> object | None:
    """The encoding ``name``, waiting for it (see the module docstring); None when unavailable.

    ``engine`` :data:`ENGINE_TIKTOKEN` (the default) is a ``tiktoken.Encoding``;
    :data:`ENGINE_COMPACT` is what the counters count on (the compact table, or
    tiktoken's own where it cannot be compact or is already registered).
    ``timeout_s`` defaults to :data:`CACHED_LOAD_TIMEOUT_S` with a local copy,
    else :data:`ENCODING_LOAD_TIMEOUT_S`. A timeout is remembered for the
    process (one run counts on one basis); a failure is logged once (unless
    ``warn`` is false: the caller reports it itself).
    """
    load = _load(name, engine)
    if load.given_up:
        return None  # decided once for the process
    if timeout_s is None:
        timeout_s = CACHED_LOAD_TIMEOUT_S if encoding_cached(name) else ENCODING_LOAD_TIMEOUT_S
    if not load.done.wait(timeout_s):
        load.given_up, load.waited_s = True, timeout_s
    encoding = load.available()
    if encoding is None and warn:
        _warn_unavailable(load, load.reason())
    return encoding


def reset_encoding_cache() -> None:
    """Forget loaded encodings and the warnings (for tests)."""
    with _encodings_lock:
        _loads.clear()
        _warned.clear()
        _tiktoken_counters.clear()


TOKENIZERS = ("auto", "chars", "bytes", "tiktoken")

_CHARS = CharsCounter()
_BYTES = BytesCounter()
_LOADING = FallbackCounter(FALLBACK_LOADING)
_UNAVAILABLE = FallbackCounter(FALLBACK_UNAVAILABLE)
_tiktoken_counters: dict[tuple[str, str], Counter] = {}


# Off the call path (the measuring worker, a drain), a live count waits this long for an encoding that is
# loading rather than counting chars/4: the first calls of a process then count on the model's basis, on a
# machine however busy, as long as the load takes less; a caller's thread never waits (wait=False alone).
MEASURING_LOAD_WAIT_S = 5.0

_off_call_path = threading.local()


@contextlib.contextmanager
def off_the_call_path() -> Iterator[None]:
    """Counts in this block (``wait=False``) may wait :data:`MEASURING_LOAD_WAIT_S` for a loading encoding."""
    before = getattr(_off_call_path, "on", False)
    _off_call_path.on = True
    try:
        yield
    finally:
        _off_call_path.on = before


def _may_wait() -> bool:
    return getattr(_off_call_path, "on", False)


def counter_for(model: str | None = None, tokenizer: str = "auto", *, wait: bool = True) -> Counter:
    """The counter for a model under a tokenizer choice.

    ``chars`` and ``bytes`` force the heuristics. ``auto`` and ``tiktoken`` use
    tiktoken with the model's encoding; where it cannot be had ``auto`` counts
    chars/4 (a :class:`FallbackCounter`, logged once) and ``tiktoken`` raises
    :class:`EncodingUnavailableError`. With ``wait=False`` (the live path) this
    never waits: a load not done yet gives the ``loading`` fallback, and
    ``tiktoken`` does not raise (the user's call must not break).
    """
    if tokenizer == "chars":
        return _CHARS
    if tokenizer == "bytes":
        return _BYTES
    if tokenizer not in ("auto", "tiktoken"):
        raise ValueError(f"unknown tokenizer {tokenizer!r}: choose one of {', '.join(TOKENIZERS)}")
    name = encoding_for_model(model)
    engine = ENGINE_COMPACT  # every counter counts on the compact table (module docstring)
    counter = _tiktoken_counters.get((name, engine))
    if counter is not None:
        return counter
    if not wait:
        load = _load(name, engine)
        if not load.done.is_set() and not (_may_wait() and load.done.wait(MEASURING_LOAD_WAIT_S)):
            return _LOADING
        encoding = load.available()
        if encoding is None:
            _warn_unavailable(load, load.reason())
            return _UNAVAILABLE
    else:
        encoding = load_encoding(name, warn=tokenizer != "tiktoken", engine=engine)
        if encoding is None:
            if tokenizer == "tiktoken":
                load = _load(name, engine)
                raise EncodingUnavailableError(
                    f"--tokenizer tiktoken: the {name} encoding cannot be loaded ({load.reason()}); point "
                    "TIKTOKEN_CACHE_DIR at a folder holding it, or use --tokenizer auto to count chars/4")
            return _UNAVAILABLE
    from ctxscope.core import bpe  # loaded with the encoding above

    counter = (CompactCounter(encoding, name) if isinstance(encoding, bpe.CompactEncoding)
               else TiktokenCounter(encoding, name))
    _tiktoken_counters[name, engine] = counter
    return counter


def count_all(counter: Counter, texts: Iterable[str]) -> list[int]:
    count = counter.count
    return [count(t) for t in texts]


# ---------------------------------------------------------------------------
# Images by provider formula
# ---------------------------------------------------------------------------

def openai_image_tokens(width: int, height: int, detail: str = "auto", *, base: int = 85, tile: int = 170) -> int:
    """OpenAI vision cost for tile-priced models (gpt-4o's 85 + 170 a tile by default).

    Source: OpenAI's vision guide ("Calculating costs"): ``low`` detail is a
    flat ``base``; otherwise the image is scaled to fit in 2048x2048, then so
    that its shortest side is 768 px, and costs base + ``tile`` per 512 px tile
    (the figures of each model family: :mod:`ctxscope.core.media`).
    """
    if detail == "low":
        return base
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        scale = 2048 / max(w, h)
        w, h = w * scale, h * scale
    if min(w, h) > 768:
        scale = 768 / min(w, h)
        w, h = w * scale, h * scale
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return base + tile * tiles


def anthropic_image_tokens(width: int, height: int) -> int:
    """Anthropic vision cost: ``(width * height) / 750`` after resizing.

    Source: Anthropic's vision docs ("Calculate image costs"): images whose
    long edge exceeds 1568 px (or over ~1.15 megapixels) are scaled down
    first, keeping the aspect ratio.
    """
    w, h = float(width), float(height)
    scale = min(1.0, 1568 / max(w, h), math.sqrt(1_150_000 / (w * h)) if w * h else 1.0)
    w, h = w * scale, h * scale
    return max(1, math.ceil((w * h) / 750))


def image_tokens(provider: str | None, width: int | None, height: int | None, detail: str = "auto") -> int:
    """Image tokens by the provider's formula where the size is known, else the default."""
    if not width or not height:
        return DEFAULT_IMAGE_TOKENS
    if provider == "anthropic":
        return anthropic_image_tokens(width, height)
    return openai_image_tokens(width, height, detail)


def image_size(data: bytes) -> tuple[int, int] | None:
    """Width and height of a PNG, GIF, JPEG or WebP image from its header, else None."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        return int.from_bytes(data[6:8], "little"), int.from_bytes(data[8:10], "little")
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP" and len(data) >= 30:
        chunk = data[12:16]
        if chunk == b"VP8X":
            return 1 + int.from_bytes(data[24:27], "little"), 1 + int.from_bytes(data[27:30], "little")
        if chunk == b"VP8 " and len(data) >= 30:
            return int.from_bytes(data[26:28], "little") & 0x3FFF, int.from_bytes(data[28:30], "little") & 0x3FFF
        if chunk == b"VP8L" and len(data) >= 25:
            bits = int.from_bytes(data[21:25], "little")
            return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
        return None
    if data[:2] == b"\xff\xd8":
        i = 2
        n = len(data)
        while i + 9 < n:
            if data[i] != 0xFF:
                i += 1
                continue
            marker = data[i + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            length = int.from_bytes(data[i + 2:i + 4], "big")
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                return int.from_bytes(data[i + 7:i + 9], "big"), int.from_bytes(data[i + 5:i + 7], "big")
            i += 2 + length
    return None
