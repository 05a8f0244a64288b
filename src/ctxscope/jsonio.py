"""JSON in and out where it is read in bulk (core: pure, no OpenTelemetry): orjson, else the standard library.

Transcripts are JSON a line, tens of MB of it: orjson (a core dependency,
made for this) parses them about four times faster than :mod:`json`. Every
reader asks here, so the fallback stays one switch: where orjson cannot be
imported (no wheel for a platform), :mod:`json` gives the same values.
"""

from __future__ import annotations

import json
from typing import Any, Callable

__all__ = ["FAST", "dumps", "dumps_indented", "loads"]

try:
    import orjson as _orjson

    FAST = True  # whether orjson does the work
except ImportError:  # pragma: no cover - exercised where orjson is absent
    FAST = False


def _std_dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _fast_dumps(value: Any) -> str:
    try:
        return _orjson.dumps(value).decode("utf-8")
    except TypeError:  # e.g. integers over 64 bits: orjson refuses, json does not
        return _std_dumps(value)


# A JSON value from bytes or text; ValueError when invalid (orjson's JSONDecodeError is one).
# Bound as it is: no wrapper call per line.
loads: Callable[[bytes | str], Any] = _orjson.loads if FAST else json.loads
# Compact JSON text, non-ASCII kept as it is (``json.dumps(..., ensure_ascii=False)``'s text).
dumps: Callable[[Any], str] = _fast_dumps if FAST else _std_dumps


def dumps_indented(value: Any) -> str:
    """A document as JSON indented by 2 (a report): orjson's, else json's.

    json's indented output runs in Python, not C: a long session's growth
    table took a fifth of the run time to print that way.
    """
    if FAST:
        try:
            return _orjson.dumps(value, option=_orjson.OPT_INDENT_2).decode("utf-8")
        except TypeError:
            pass
    return json.dumps(value, indent=2)
