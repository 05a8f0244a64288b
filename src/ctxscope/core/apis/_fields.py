"""The two readers every format's usage shares: a field of a dict or SDK object, a token count.

Apart from :mod:`~ctxscope.core.apis._base` (which re-exports both) so that a usage
reader (:mod:`~ctxscope.core.apis.anthropic_usage`) needs no :class:`WireFormat`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ctxscope.core.payload import get as payload_get

__all__ = ["count", "field"]


# A field of a dict or of an SDK object (pydantic model) alike: payload.get itself, not a
# wrapper around it (a usage reads a dozen fields, on every transcript call).
field: Callable[[Any, str], Any] = payload_get


def count(value: Any) -> int | None:
    """A token count as the provider reported it: a whole number >= 0, else None (not a count).

    Booleans, negative numbers, NaN and infinities are not counts; a float
    with no fraction (``12.0``, as some relays write) is.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and math.isfinite(value) and value >= 0 and value == int(value):
        return int(value)
    return None
