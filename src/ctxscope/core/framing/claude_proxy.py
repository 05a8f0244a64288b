"""Claude's tokens from a proxy encoding: o200k_base counts times a published ratio per kind of content.

Claude's tokenizer is not public, so Claude text is counted with o200k_base as
a documented proxy and converted to Claude tokens by a published ratio per
kind of content: VentureBeat's measurement of Claude 3.5 Sonnet against GPT-4o
(o200k_base), 2025-05-01, "Hidden costs in AI deployment: why Claude models may
be 20-30% more expensive than GPT in enterprise settings": English articles
+16%, math +21%, Python code +30%; prose takes the first, JSON and code the last
(:func:`proxy_encoding_items`). What remains is learned at run time by
:mod:`ctxscope.core.learned_correction`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

from ctxscope.schema import Category, Item
from ctxscope.core.framing.parts import CountFn, framing_item

# Claude's tokenizer against o200k_base (the proxy encoding), per kind of content:
# VentureBeat, 2025-05-01, "Hidden costs in AI deployment: why Claude models may be
# 20-30% more expensive than GPT in enterprise settings" (Claude 3.5 Sonnet against
# GPT-4o on the same inputs): English articles ~16% more tokens, math ~21%, Python
# code ~30%. JSON (tool schemas, call arguments, JSON results) is structured
# technical text: it takes the code figure, as the article's explanation (symbols
# and structure split into smaller units) says of code and math.
PROXY_PROSE = "prose"
PROXY_MATH = "math"
PROXY_CODE = "code"
CLAUDE_PROXY_RATIO: Mapping[str, float] = {PROXY_PROSE: 1.16, PROXY_MATH: 1.21, PROXY_CODE: 1.30}
PROXY_ENCODING_KEY = "proxy-encoding"
_TOOLS = Category.TOOLS  # read once: proxy_kind runs for every item a call adds (EnumType's lookup is slow)

# Anthropic docs, "Pricing" (https://platform.claude.com/docs/en/about-claude/pricing):
# "Claude 4.7 and later models and Claude Mythos Preview use a newer tokenizer ... This
# tokenizer produces approximately 30% more tokens for the same text ... Claude Sonnet 4.6
# and earlier models use the previous tokenizer" (the same in "Context windows": Opus 4.7
# and later, Fable 5, Mythos 5, Mythos Preview, Sonnet 5). The ratios above are the previous
# tokenizer's against o200k_base; a model with the newer one takes them times this.
CLAUDE_NEWER_TOKENIZER_RATIO = 1.30
CLAUDE_NEWER_TOKENIZER_SINCE = (4, 7)


def proxy_tokens(segments: Iterable[tuple[str, str]], count: CountFn) -> int:
    """Claude tokens of text counted with the proxy encoding: each segment's count times its kind's ratio."""
    return round(sum(count(text) * CLAUDE_PROXY_RATIO[kind] for kind, text in segments))


def claude_version(model: str | None) -> tuple[int, ...]:
    """``claude-sonnet-4-5`` -> (4, 5); ``claude-3-5-haiku`` -> (3, 5); ``claude-opus-5`` -> (5,); () if none.

    The one parser of Claude model versions (here, with the proxy encoding, which a transcript
    reads without the rest of Anthropic's framing; ``framing.anthropic_messages`` imports it).
    """
    name = (model or "").lower().rsplit("/", 1)[-1]
    match = re.match(r"claude-(?:[a-z]+-)?(\d+)(?:[-.](\d)(?!\d))?", name)
    if not match:
        return ()
    return tuple(int(g) for g in match.groups() if g is not None)


def uses_newer_tokenizer(model: str | None) -> bool:
    """Claude 4.7 and later, and Mythos Preview (no version in its name): Anthropic's newer tokenizer."""
    name = (model or "").lower()
    return is_claude(name) and (claude_version(name) >= CLAUDE_NEWER_TOKENIZER_SINCE or "mythos-preview" in name)


def proxy_ratio(model: str | None, kind: str) -> float:
    """Claude tokens per proxy (o200k_base) token for a kind of content on a model."""
    ratio = CLAUDE_PROXY_RATIO[kind]
    return ratio * CLAUDE_NEWER_TOKENIZER_RATIO if uses_newer_tokenizer(model) else ratio


def is_claude(model: str | None) -> bool:
    """Whether a model name is a Claude model (any host: ``anthropic/claude-...`` on a router too)."""
    return "claude" in (model or "").lower()


def looks_like_json(text: str) -> bool:
    """Whether a text reads as JSON to the proxy ratio: ``{``/``[`` first and ``}``/``]`` last, once stripped."""
    # A cheap test (no parse: results can be large and this runs on the live path).
    head = text[:1]
    if head in ("{", "["):
        tail = text[-1:]
        if tail in ("}", "]"):
            return True
        if not tail.isspace():
            return False  # strip() would change nothing, and so the answer
    elif not head.isspace() or _OPENS_AFTER_SPACE.match(text) is None:
        # The first character strip() keeps is not "{" or "[": the answer, without looking at the end
        # (most texts are prose, most of those end in a newline, and code is indented: found in C).
        return False
    # It opens as JSON: the last character strip() would keep (its whitespace is str.isspace's),
    # found without copying the text (a result ending in a newline is most of them).
    end = len(text)
    while end and text[end - 1].isspace():
        end -= 1
    return text[end - 1:end] in ("}", "]")


# Whitespace, then "{" or "[": re's \s in a str pattern is str.isspace's whitespace (both Py_UNICODE_ISSPACE).
_OPENS_AFTER_SPACE = re.compile(r"\s*[{\[]")


def proxy_kind(item: Item) -> str:
    """The kind of content of an item for the proxy ratio: code (JSON, schemas, call arguments) or prose.

    Tool definitions (Claude renders them as JSON) and tool-call arguments are
    JSON; any other text is JSON when it starts with ``{``/``[`` and ends with
    ``}``/``]``; the rest is prose.
    """
    if item.category is _TOOLS or item.part.startswith("assistant/calls"):
        return PROXY_CODE
    return PROXY_CODE if looks_like_json(item.text) else PROXY_PROSE


def proxy_encoding_tokens(model: str | None, counted: Iterable[tuple[Item, int]]) -> int:
    """Tokens Claude's tokenizer adds to the proxy count of a request's items.

    ``counted`` pairs each item with its count under the proxy encoding. Items
    with fixed tokens (images, documents by formula, framing) are already in
    the provider's tokens and are skipped. 0 for a model that is not Claude.
    """
    ratios = _extra_ratios(model)
    if ratios is None:
        return 0
    extra = 0.0
    for item, tokens in counted:
        if item.fixed_tokens is not None or not tokens:
            continue
        extra += tokens * ratios[proxy_kind(item)]
    return round(extra)


def proxy_encoding_tokens_of_sums(model: str | None, sums: Mapping[str, int]) -> int:
    """:func:`proxy_encoding_tokens` from proxy-token sums per kind of content (``PROXY_CODE``, ``PROXY_PROSE``).

    The ratio is linear in the tokens, so the sums give the same correction as
    the items (up to the rounding of a float sum): the ledger keeps the sums
    as items come and go and asks here once a call, in O(1).
    """
    ratios = _extra_ratios(model)
    if ratios is None:
        return 0
    extra = 0.0
    for kind, tokens in sums.items():
        if tokens:
            extra += tokens * ratios[kind]
    return round(extra)


@lru_cache(maxsize=64)
def _extra_ratios(model: str | None) -> dict[str, float] | None:
    """What each kind of content adds per proxy token on a model (None: not Claude), asked once a model.

    The ledger asks on every call of a session; the version parse is a regular expression.
    """
    if not is_claude(model):
        return None
    return {kind: proxy_ratio(model, kind) - 1.0 for kind in CLAUDE_PROXY_RATIO}


def proxy_encoding_item(tokens: int) -> Item | None:
    """The correction of ``tokens`` as its framing item (:func:`proxy_encoding_items`), None for 0."""
    if not tokens:
        return None
    return framing_item(PROXY_ENCODING_KEY, tokens)


def proxy_encoding_items(model: str | None, counted: Iterable[tuple[Item, int]]) -> list[Item]:
    """The proxy-encoding correction as a framing item (overhead, id ``framing:proxy-encoding``), or none.

    Item counts stay exact under their basis (SPEC section 3); the difference
    between Claude's tokenizer and the proxy is what the provider's count
    adds on top, so it is framing: append it to the request's items with the
    other framing items (:func:`ctxscope.core.framing.framing_items`).
    """
    item = proxy_encoding_item(proxy_encoding_tokens(model, counted))
    return [item] if item is not None else []
