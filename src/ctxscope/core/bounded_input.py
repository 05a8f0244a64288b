"""Reading a user's input file within bounds: the one way the CLI opens JSON it is handed.

Every input a command reads whole (``inspect``'s request body or recording,
``context``'s local store files) goes through here, so that no file makes a
command hang, run out of memory or print a traceback:

- **Regular files only.** A FIFO, a device (``/dev/zero``, ``/dev/urandom``),
  a socket, or a symlink to one is refused before a byte is read (a FIFO
  would block, a device never ends).
- **A size limit**: :data:`DEFAULT_MAX_INPUT_MB` MB, raised with the
  command's ``--max-input-mb``. A larger file is refused without reading it.
- **A nesting limit**: :data:`MAX_DEPTH` levels of arrays and objects. Real
  request bodies nest a few dozen levels (tool schemas); deeper input would
  reach Python's recursion limit in the parser or in item extraction.
- **Finite numbers**: ``NaN``, ``Infinity`` and numbers too large for a float
  (``1e999``) are refused; the standard library would otherwise accept them
  and turn them into values no count can hold.
- **Counts** (:func:`count`): token counts read from a file must be whole,
  finite and not negative.

Every refusal is a :class:`~ctxscope.errors.UserError` of one line naming the
file (and the line, where there is one).
"""

from __future__ import annotations

import json
import math
import os
import stat
from typing import Any, Iterable

from ctxscope._lazy_pattern import lazy_pattern
from ctxscope.errors import InputError, UserError

__all__ = ["DEFAULT_MAX_INPUT_MB", "MAX_DEPTH", "ExtraData", "ExtraDataError", "check_regular", "count", "loads",
           "max_bytes", "read_bytes", "read_text"]

DEFAULT_MAX_INPUT_MB = 64
MAX_DEPTH = 200
_MB = 1024 * 1024

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))
# A bare non-finite constant outside strings (strings are matched first and skipped): an error's line only.
_CONSTANT_RE = lazy_pattern(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN|-?\d+(?:\.\d+)?[eE][+-]?\d{3,})')


def max_bytes(megabytes: float | None) -> int:
    """The byte limit for a ``--max-input-mb`` value (None: the default)."""
    value = DEFAULT_MAX_INPUT_MB if megabytes is None else megabytes
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"--max-input-mb must be a positive number, got {megabytes}")
    return int(value * _MB)


def _kind(mode: int) -> str | None:
    """What a non-regular file is, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def check_regular(path: str | os.PathLike[str]) -> None:
    """Raise a one-line UserError unless ``path`` is an existing regular file (symlinks followed)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UserError(f"{os.fspath(path)}: no such file") from None
    except OSError as exc:
        raise UserError(f"{os.fspath(path)}: cannot read ({exc.strerror or exc})") from None
    kind = _kind(st.st_mode)
    if kind is not None:
        raise UserError(f"{os.fspath(path)}: is {kind}, not a regular file; not read")


def read_bytes(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (else a one-line UserError)."""
    name = os.fspath(path)
    check_regular(path)
    try:
        # O_NONBLOCK: should the file have been swapped for a FIFO since the check, open does not wait.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise UserError(f"{name}: cannot read ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        kind = _kind(st.st_mode)
        if kind is not None:
            raise UserError(f"{name}: is {kind}, not a regular file; not read")
        if st.st_size > limit:
            raise UserError(f"{name}: {st.st_size / _MB:.1f} MB is over the {limit / _MB:g} MB input limit; "
                            "raise it with --max-input-mb")
        chunks: list[bytes] = []
        total = 0
        while True:  # a file that grows while being read is still held to the limit
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise UserError(f"{name}: over the {limit / _MB:g} MB input limit; raise it with --max-input-mb")
        return b"".join(chunks)
    except OSError as exc:
        raise UserError(f"{name}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], limit: int) -> str:
    """:func:`read_bytes` decoded as UTF-8 (a byte-order mark dropped)."""
    data = read_bytes(path, limit)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise InputError(os.fspath(path), f"not UTF-8 text (byte {exc.start})", line) from None


class _NotFiniteError(ValueError):
    pass


class ExtraDataError(InputError):
    """The text holds more than one JSON value (a JSONL file read as one document)."""


ExtraData = ExtraDataError  # the name before the Error suffix, kept for callers


def _reject_constant(name: str) -> Any:
    raise _NotFiniteError(name)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFiniteError(text)
    return value


def _line_of_constant(text: str, line: int | None) -> int | None:
    """The line of the first non-finite constant: ``line`` for one JSONL line, else found in ``text``."""
    if line is not None:
        return line
    for match in _CONSTANT_RE().finditer(text):
        if match.group(1):
            return 1 + text.count("\n", 0, match.start(1))
    return None


def _too_deep(value: Any, limit: int) -> bool:
    """True when arrays and objects nest deeper than ``limit`` (iterative: no recursion to overflow)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children: Iterable[Any]
        if isinstance(node, dict):
            children = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def loads(text: str | bytes, path: str, line: int | None = None, *, what: str = "JSON",
          max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON within the bounds of the module docstring; a one-line InputError otherwise.

    ``line`` is the line of ``text`` in its file (a JSONL line); without it,
    the error names the line within ``text``.
    """
    try:
        value = json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except _NotFiniteError as exc:
        source = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        raise InputError(path, f"{exc} is not a finite number; {what} numbers must be finite",
                         _line_of_constant(source, line)) from None
    except RecursionError:
        raise InputError(path, f"{what} nested too deeply (more than {max_depth} levels)", line) from None
    except ValueError as exc:
        where = line if line is not None else getattr(exc, "lineno", None)
        msg = getattr(exc, "msg", str(exc))
        error = ExtraDataError if msg == "Extra data" else InputError
        raise error(path, f"not valid {what} ({msg})", where) from None
    if _too_deep(value, max_depth):
        raise InputError(path, f"{what} nested too deeply (more than {max_depth} levels)", line)
    return value


def count(value: Any, path: str, line: int | None, name: str) -> int:
    """A token count read from a file: a whole, finite, non-negative number (else a one-line InputError)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(path, f"{name} is not a number ({type(value).__name__})", line)
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise InputError(path, f"{name} is not a whole number ({value!r})", line)
    if value < 0:
        raise InputError(path, f"{name} is negative ({value!r}); token counts are 0 or more", line)
    return int(value)
