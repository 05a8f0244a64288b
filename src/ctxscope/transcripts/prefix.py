"""The hidden prefix of a transcript: the system prompt and tool schemas, learned from usage.

A transcript never holds the system prompt and the tool definitions, but
the input the provider reports does, and they are nearly constant from call
to call. :class:`PrefixLearner` learns their size per session and model
with the offset mode of the live path's self-calibration
(:class:`ctxscope.core.learned_correction.OffsetLearner`: the fixed hidden part
is what is wanted) from each call's
``(counted content, reported input)`` pair, and hands the next call an item
that stands for them: category ``system``, part
``schema.INFERRED_PREFIX_PART``, labelled ``schema.INFERRED_PREFIX_LABEL``.

Rules (docs/analyze.md, "The hidden prefix"):

- A call is given what the calls before it taught, never its own usage (so
  the estimate stays an estimate); the first call has no prefix.
- The item keeps its size until the learned one moves by more than
  :data:`MOVE_TOKENS` or :data:`MOVE_SHARE`: such a move (an MCP server
  connecting, a file injected by an ``@`` mention) is a :class:`PrefixMove`,
  an event worth showing; small noise is not.
- A model the session has not used yet takes the size learned for the
  session's previous model until its own calls teach it (the system prompt
  and tools belong to the agent more than to the model).
- A compaction starts the learning anew (what the agent injects beside the
  history, e.g. ``@`` files, goes with it). Until the new segment has taught
  something, the size learned at the start of the session stands: learned
  when the content was smallest, it is the least mixed with what the
  tokenizer's ratio adds as the content grows. Unless that size was half or
  more of the context the compaction declares (``preTokens``): then it was
  history the file does not show (a slice, a resumed session), not the
  system prompt, and the compacted call goes without a prefix until its
  own usage teaches one.

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

from ctxscope._record import FrozenRecord
from ctxscope._blake2b import blake2b
from dataclasses import dataclass

from ctxscope.schema import INFERRED_PREFIX_ID, INFERRED_PREFIX_LABEL, INFERRED_PREFIX_PART, Category, Item
from ctxscope.core.learned_correction import MIN_PAIRS, OffsetLearner

__all__ = ["INFERENCE", "MOVE_SHARE", "MOVE_TOKENS", "PrefixLearner", "PrefixMove"]

# What every output says of the inference it used.
INFERENCE = "system+tools learned per session and model from reported input (selfcal offset)"
# A learned size this far from the one shown is a move of the prefix.
MOVE_TOKENS = 2000
MOVE_SHARE = 0.10


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # FrozenRecord: see ctxscope._record
class PrefixMove(FrozenRecord):
    """The inferred prefix changed size at call ``index``."""

    index: int
    before: int
    after: int


class PrefixLearner:
    """One session's hidden prefix: ``item_for(model)`` before a call, ``learn(...)`` after it."""

    def __init__(self) -> None:
        self._calibrator = OffsetLearner()
        self._shown: dict[str | None, int] = {}
        self._base: dict[str | None, int] = {}  # learned from the session's first calls
        self._items: dict[str | None, Item] = {}
        self._last: int | None = None  # the size last learned, whatever the model
        self.moves: list[PrefixMove] = []

    def tokens(self, model: str | None) -> int | None:
        """The size shown for a model's next call, or None before anything was learned."""
        tokens = self._shown.get(model)
        return tokens if tokens is not None else self._last

    def item_for(self, index: int, model: str | None, compaction: bool = False,
                 pre_tokens: int | None = None) -> Item | None:
        """The item standing for the prefix in call ``index`` of ``model`` (the same object while unchanged).

        ``compaction``: the call follows a compaction, which declared ``pre_tokens`` before it.
        """
        if compaction:
            # What rode along with the old history may have gone with it: learn anew.
            self._calibrator = OffsetLearner()
            for known in list(self._shown):
                base = self._base.get(known)
                if base is None or (pre_tokens and base * 2 >= pre_tokens):
                    base = 0
                self._move(index, known, base)
            self._last = None
        tokens = self.tokens(model)
        if not tokens:
            return None
        item = self._items.get(model)
        if item is None or item.fixed_tokens != tokens:
            item = self._items[model] = Item(
                id=INFERRED_PREFIX_ID, category=Category.SYSTEM, part=INFERRED_PREFIX_PART, chars=0,
                fixed_tokens=tokens, label=INFERRED_PREFIX_LABEL, source_kind="inferred",
                digest=blake2b(f"prefix:{tokens}".encode(), digest_size=8).hexdigest())
        return item

    def learn(self, index: int, model: str | None, content_tokens: int, reported: int | None) -> None:
        """Take call ``index``'s counted content and reported input; decide the next call's prefix."""
        if reported is None or reported <= 0 or content_tokens <= 0:
            return
        key = model or ""
        learned_offset = self._calibrator.learn(key, content_tokens, reported)
        if learned_offset is None:
            return
        offset, pairs = learned_offset
        learned = max(0, round(offset))
        if pairs == MIN_PAIRS:
            self._base.setdefault(model, learned)  # the first median the session gives
        self._last = learned
        shown = self._shown.get(model)
        if shown is None or abs(learned - shown) > max(MOVE_TOKENS, MOVE_SHARE * shown):
            self._move(index + 1, model, learned)

    def _move(self, index: int, model: str | None, tokens: int) -> None:
        shown = self._shown.get(model)
        if shown == tokens:
            return
        if shown is not None:
            self.moves.append(PrefixMove(index, shown, tokens))
        self._shown[model] = tokens
