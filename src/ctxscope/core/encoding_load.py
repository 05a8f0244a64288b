"""Building a tiktoken encoding for counting: fast, and leaving no memory behind (used by ``core/tokens.py``).

tiktoken builds an encoding in two steps: its plugin's constructor parses the
rank file (``o200k_base``: 200,000 lines of base64, about 0.3 s of Python, a
dict of 28 MB plus as much again in temporaries), then ``CoreBPE`` copies the
ranks into Rust (about 0.25 s, 46 MB: encoder and decoder tables, the sorted
token bytes, the regexes). Two things here make the first step cheap:

- **A copy of the constructor's output in ctxscope's cache** (``marshal``,
  ``cache_dir()/tiktoken``), keyed by the rank file's own bytes, tiktoken's
  version and the interpreter's: read back in about 0.04 s instead of the
  parse, written atomically once, checked by its own checksum before it is
  read; anything wrong with it (missing, stale, cut short, unwritable folder)
  is the constructor's parse, as without it. The rank file is the one
  tiktoken checked against its pinned hash when it first cached it; a changed
  file is another key.
- **Checksums, not digests** (:func:`_checksum`): the rank file's bytes in the
  key and a cached file's payload are checked by their length and CRC-32,
  which catch a changed, cut-short or damaged file as surely as SHA-256 did
  (no adversary is guarded against: whoever can write the cache can write
  its table) at a third of the CPU: 7.6 MB a load (the 3.6 MB rank file and
  the 4 MB compact table), 4.6 ms -> 1.5 ms, and 221 M -> 30 M instructions
  under valgrind, which runs SHA-256 without the CPU's SHA extensions
  (docs/analyze.md "Session 30").
- **No garbage spread over the heap**: ``marshal.loads`` builds the whole
  table inside one C call, so no other thread's objects land between its
  200,000 keys, and the arenas it filled are empty again, returned to the
  system, once the table is let go. glibc keeps freed memory of its own heaps
  (the parse's temporaries, Rust's build) until ``malloc_trim`` asks for it
  back: :func:`release_freed_memory`, after a load. Not glibc (musl, macOS):
  nothing to call, said once in a debug log.

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import contextlib
import logging
import marshal
import os
import sys
import threading
import zlib
from typing import Any, Callable

from ctxscope.config import cache_dir
from ctxscope.core.installed import distribution_version

_log = logging.getLogger(__name__)

# Format 2: the payload's checksum (:func:`_checksum`, 16 hex digits), a newline, then the payload.
# Format 1 (a SHA-256 in hex) has another magic: never read; its files are under other keys.
_MAGIC = b"ctxscope-tiktoken-2\n"
_CHECKSUM_HEX = 16
# The constructor's keywords (tiktoken_ext.openai_public): what a cached copy must hold, and of which types.
_FIELDS: dict[str, type | tuple[type, ...]] = {
    "name": str, "pat_str": str, "mergeable_ranks": dict, "special_tokens": dict}


def cache_path(name: str, rank_file: str, kind: str) -> str | None:
    """Where ctxscope's ``kind`` copy of ``name`` built from ``rank_file`` lives; None when it cannot be read.

    The key is the rank file's own bytes, tiktoken's version (its plugin's
    pattern and special tokens come with it) and the interpreter's (marshal's
    format, the array layout): any of them changed is another file. ``kind``
    names what is kept: ``marshal`` (here), ``compact`` (``core/bpe.py``).
    """
    import hashlib  # here, not at import: only a tiktoken load needs it (OpenSSL's load)
    try:
        with open(rank_file, "rb") as handle:
            ranks = handle.read()
    except OSError:
        return None
    key = hashlib.sha256()
    for part in (name, _tiktoken_version(), str(marshal.version), sys.version, sys.byteorder):
        key.update(part.encode() + b"\0")
    key.update(_checksum(ranks))  # the rank file's bytes (the module docstring: checksums, not digests)
    folder = str(cache_dir())
    if not os.path.isabs(folder):
        return None  # no home to expand "~" in: no cache rather than one under the working directory
    return os.path.join(folder, "tiktoken", f"{name}-{key.hexdigest()[:32]}.{kind}")


def _checksum(data: bytes | memoryview) -> bytes:
    """``data``'s length and CRC-32 in hex (16 digits): what a cache key and a cached file's check compare."""
    return b"%08x%08x" % (len(data) & 0xFFFFFFFF, zlib.crc32(data))


def _tiktoken_version() -> str:
    """tiktoken's version: its own, once imported, else its ``.dist-info`` folder's (the same string; reading
    it imports nothing of tiktoken, whose Rust library the live path's compact table leaves unloaded, and not
    ``importlib.metadata``, ~45 ms: ``core/installed.py``)."""
    version = getattr(sys.modules.get("tiktoken"), "__version__", None)
    if isinstance(version, str):
        return version
    return distribution_version("tiktoken", "tiktoken") or "?"


def read_cached(path: str) -> memoryview | None:
    """The payload ``write_cached`` wrote at ``path`` (a view of the file's bytes: no copy), or None: missing,
    cut short, altered."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    head = len(_MAGIC) + _CHECKSUM_HEX + 1
    if not data.startswith(_MAGIC) or len(data) < head:
        return None
    payload = memoryview(data)[head:]
    if _checksum(payload) != data[len(_MAGIC):head - 1]:
        return None  # cut short or altered: only what this module wrote is ever read back
    return payload


def _read(path: str) -> dict[str, Any] | None:
    payload = read_cached(path)
    if payload is None:
        return None
    try:
        kwargs = marshal.loads(payload)
    except (ValueError, EOFError, TypeError):
        return None
    if not isinstance(kwargs, dict) or not all(isinstance(kwargs.get(k), t) for k, t in _FIELDS.items()):
        return None
    return kwargs


def _write(path: str, kwargs: dict[str, Any]) -> None:
    try:
        payload = marshal.dumps(kwargs)
    except ValueError as exc:  # a constructor of another tiktoken with a value marshal cannot hold
        _log.debug("ctxscope: the %s encoding cannot be cached: %r", kwargs.get("name"), exc)
        return
    write_cached(path, payload)


def write_cached(path: str, payload: bytes) -> None:
    """Keep ``payload`` at ``path`` behind its checksum, atomically; a folder that cannot be written: a debug line."""
    folder = os.path.dirname(path)
    try:
        import tempfile  # here: only a first load writes the cache (analyze's start-up skips the import)

        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".encoding-", dir=folder)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(_MAGIC + _checksum(payload) + b"\n" + payload)
            os.replace(tmp, path)  # whole or not at all: a process loading in parallel reads a complete file
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        _log.debug("ctxscope: cannot cache %s: %r", path, exc)


def constructor_kwargs(name: str, constructor: Callable[[], dict[str, Any]],
                       rank_file: str | None) -> dict[str, Any]:
    """``constructor()``'s keywords for ``tiktoken.Encoding``, from ctxscope's cached copy when it holds them.

    ``rank_file`` is tiktoken's cached copy of the encoding's rank file (None:
    tiktoken caches nothing, so neither does this). A miss runs the
    constructor (tiktoken's own download, hash check and parse) and caches its
    output for the next process.
    """
    path = cache_path(name, rank_file, "marshal") if rank_file else None
    if path is not None:
        kwargs = _read(path)
        if kwargs is not None and kwargs.get("name") == name:
            return kwargs
    kwargs = constructor()
    if path is None and rank_file:
        path = cache_path(name, rank_file, "marshal")  # the constructor has just downloaded it
    if path is not None:
        _write(path, kwargs)
    return kwargs


_trim: Callable[[int], int] | None = None
_trim_lock = threading.Lock()
_trim_looked = False


def release_freed_memory() -> bool:
    """Hand the heap's free pages back to the system (glibc ``malloc_trim(0)``); False where there is none."""
    global _trim, _trim_looked
    with _trim_lock:
        if not _trim_looked:
            _trim_looked = True
            try:
                # Imported on the first trim: ctypes is a tenth of a short command's start-up,
                # and most commands never trim. The process' own symbols (dlopen(NULL)) hold
                # libc's: no ctypes.util.find_library, which imports subprocess and runs
                # ``ldconfig -p`` in a child (~20 ms of CPU on every tiktoken analyze).
                import ctypes

                _trim = ctypes.CDLL(None).malloc_trim
                _trim.argtypes = [ctypes.c_size_t]
                _trim.restype = ctypes.c_int
            except (OSError, AttributeError) as exc:  # not glibc: its allocator keeps or returns memory itself
                _log.debug("ctxscope: no malloc_trim here (%r); freed memory stays with the allocator", exc)
        trim = _trim
    if trim is None:
        return False
    trim(0)
    return True
