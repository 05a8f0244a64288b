"""Framing parts and the items they become: the one place a framing rule's tokens turn into ``Item`` s.

A framing rule yields :class:`FramingPart` s (a key, tokens, the part they
land in); :func:`parts_to_items` makes them items, for the whole-request
framing (:func:`ctxscope.core.framing.framing_items`), the per-session cache
(:mod:`ctxscope.core.framing.incremental`) and Claude's proxy-encoding correction
alike, so all three agree. Framing lands in ``overhead`` (part ``overhead``),
a server tool's hidden part in ``tools``.
"""

from __future__ import annotations

from ctxscope._record import FrozenRecord
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache

from ctxscope.schema import Category, Item

OVERHEAD_PART = Category.OVERHEAD.value
_OVERHEAD, _TOOLS = Category.OVERHEAD, Category.TOOLS  # read once (EnumType's attribute lookup is slow)

CountFn = Callable[[str], int]


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # FrozenRecord: see ctxscope._record
class FramingPart(FrozenRecord):
    """One named piece of framing: tokens with the rule that produced them."""

    key: str  # stable within a request: "messages", "priming", "functions", "hidden-prompt", ...
    tokens: int
    part: str = OVERHEAD_PART
    learned: bool = False  # size unknown from any source: self-calibration learns it


def parts_to_items(pieces: Iterable[FramingPart]) -> list[Item]:
    """Framing parts as items (the incremental cache builds its items here too, so both agree)."""
    return [framing_item(piece.key, piece.tokens, piece.part) for piece in pieces]


def framing_item(key: str, tokens: int, part: str = OVERHEAD_PART) -> Item:
    """One framing part's item, without a :class:`FramingPart` (Claude's proxy correction: one a call)."""
    category = _OVERHEAD if part == OVERHEAD_PART else _TOOLS
    label = key if category is _OVERHEAD else part
    # Positional, in Item's field order (no keyword dict built: Claude's proxy item is one a call).
    # The digest is ``<key>:<tokens>`` itself: a digest is only compared, never shown or kept past the
    # process (transcripts.model.content_digest), and these two say all a framing item holds. Equal
    # exactly when they are (a BLAKE2b of them was ~5 k instructions, once a call: ~28 M of dense50),
    # and never equal to another kind's digest (those are hex, without a colon).
    return Item(_framing_id(key), category, part, 0, "", tokens, label, "framing", None, None, f"{key}:{tokens}")


@lru_cache(maxsize=256)
def _framing_id(key: str) -> str:
    """``framing:<key>``, one string per key: Claude's proxy item is made anew on every call."""
    return "framing:" + key
