"""analyze lets each item's text go once counted: the results must be those of keeping every text.

A released item is still counted text (``release_texts`` keeps ``fixed_tokens``
None): before that rule, analyze pinned the count as ``fixed_tokens``, which
Claude's proxy encoding skips as a fixed count (an image's), so after a
compaction's rebuild the proxy item lost every released item and the inferred
prefix moved (with ``--tokenizer chars``, the whole spotter session in
../shared: 21,916 tokens against 39,074; its 301 lines here: 28,615 against
29,749, and a prefix move at call 26 that keeping the texts does not make;
the codemie file: 32,393 against 32,665 after its compaction, the 272 tokens
of proxy encoding the released items lost). The files are real sessions
(tests/data/README.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ctxscope.core.framing import PROXY_CODE, PROXY_PROSE, proxy_kind
from ctxscope.core.ledger import release_texts
from ctxscope.report.analysis import analyze_file
from ctxscope.schema import Category, Item

DATA = Path(__file__).resolve().parent.parent / "data" / "transcripts"


def _summary(path: Path, keep_text: bool) -> list[tuple[object, ...]]:
    result = analyze_file(str(path), tokenizer="chars", keep_text=keep_text)
    return [(s.session_id, list(s.rows), s.inferred_prefix, s.prefix_moves, s.parts,
             s.every_turn_token_calls, s.conversation_token_calls, s.largest_additions)
            for s in result.sessions]


@pytest.mark.parametrize("name", ["claude_258c7280_spotter_compaction.jsonl", "claude_624a4a58_compaction.jsonl"])
def test_released_texts_give_what_kept_texts_give_across_a_compaction(name):
    assert _summary(DATA / name, keep_text=False) == _summary(DATA / name, keep_text=True)


def test_the_spotter_prefix_counts_every_released_item_after_the_compaction():
    (session,) = analyze_file(str(DATA / "claude_258c7280_spotter_compaction.jsonl"), tokenizer="chars").sessions
    assert session.inferred_prefix == 29_749
    assert [(m.index, m.before, m.after) for m in session.prefix_moves[-2:]] == [(16, 157_204, 0), (17, 0, 29_749)]


def test_the_codemie_prefix_after_its_compaction_keeps_the_proxy_encoding_of_released_items():
    (session,) = analyze_file(str(DATA / "claude_624a4a58_compaction.jsonl"), tokenizer="chars").sessions
    assert [(m.index, m.before, m.after) for m in session.prefix_moves[-2:]] == [(4, 154_249, 0), (5, 0, 32_665)]


def _item(text: str) -> Item:
    return Item("r1", Category.RESULTS, "results/Read", len(text), text, tokens=7)


@pytest.mark.parametrize("text, kind, stand_in", [(' {"a": [1, 2]}\n', PROXY_CODE, "{}"), ("[1]", PROXY_CODE, "{}"),
                                                   ("plain words\n", PROXY_PROSE, ""),
                                                   ("\n  words, not JSON\n", PROXY_PROSE, ""),
                                                   ("{half open", PROXY_PROSE, "")])
def test_release_keeps_the_count_and_the_proxy_kind_and_drops_the_text(text, kind, stand_in):
    item = _item(text)
    assert proxy_kind(item) == kind
    release_texts([item])
    assert (item.text, item.tokens, item.fixed_tokens, item.released) == (stand_in, 7, None, True)
    assert proxy_kind(item) == kind
