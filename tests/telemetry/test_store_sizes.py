"""The local store's characters and UTF-8 bytes per part: the ledger's running sums, worked out by hand.

One session through four calls: non-ASCII texts and a media item (bytes by its
characters), the first call's texts released before the second (their sizes
stay), an item sent again as a new equal object, a rewind that drops the last
item, a compaction that replaces the history.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from ctxscope.core.ledger import SessionLedger, release_texts
from ctxscope.core.observation import Observation, Usage
from ctxscope.core.tokens import CharsCounter
from ctxscope.schema import Category, CompactionTrigger, Item
from ctxscope.telemetry.store import LocalStore, record_from_observation


def _item(item_id: str, category: Category, part: str, text: str) -> Item:
    return Item(id=item_id, category=category, part=part, chars=len(text), text=text, digest=f"{item_id}:{text}")


def _observation(snapshot: object) -> Observation:
    return Observation(session_id="s", provider="anthropic", request_model="m", response_model="m",
                       snapshot=snapshot, usage=Usage(), timestamp_ns=1)  # type: ignore[arg-type]


def _session() -> list[Observation]:
    ledger = SessionLedger("s", counter=CharsCounter())
    system = _item("sys", Category.SYSTEM, "system", "héllo")  # 5 chars, 6 bytes (é: 2)
    rules = _item("rules", Category.SYSTEM, "system", "ok")  # 2 chars, 2 bytes
    prompt = _item("u1", Category.PROMPTS, "prompts/text", "naïve café")  # 10 chars, 12 bytes
    result = _item("r1", Category.RESULTS, "results/Read", "日本語")  # 3 chars, 9 bytes
    image = Item(id="img", category=Category.RESULTS, part="results/Read", chars=100, fixed_tokens=50,
                 digest="img")  # no text: its bytes are its characters
    first = [system, rules, prompt, result, image]
    observations = [_observation(ledger.observe(first))]
    release_texts(first)  # analyze and replay let texts go once counted
    # The next request brings its system prompt as a new object equal to the first (a live request's).
    system_again = _item("sys", Category.SYSTEM, "system", "héllo")
    answer = _item("a1", Category.ASSISTANT, "assistant/text", "ok → done")  # 9 chars, 11 bytes (→: 3)
    kept = [system_again, *first[1:]]
    observations.append(_observation(ledger.observe([*kept, answer])))
    again = _item("u2", Category.PROMPTS, "prompts/text", "ß")  # 1 char, 2 bytes; the answer rewound
    observations.append(_observation(ledger.observe([*kept, again])))
    summary = _item("sum", Category.SUMMARIES, "summaries", "résumé")  # 6 chars, 8 bytes
    observations.append(_observation(ledger.observe([rules, summary], compaction=CompactionTrigger.MANUAL)))
    return observations


def test_chars_and_bytes_per_part_follow_the_context(tmp_path):
    """Sizes per part by hand at each call; a released text keeps its bytes, removed items take theirs away."""
    store = LocalStore(tmp_path)
    for observation in _session():
        store.record(observation)
    records = store.read("s")
    assert [r["chars"] for r in records] == [
        {"system": 7, "prompts/text": 10, "results/Read": 103},
        {"system": 7, "prompts/text": 10, "results/Read": 103, "assistant/text": 9},
        {"system": 7, "prompts/text": 11, "results/Read": 103},
        {"system": 2, "summaries": 6},
    ]
    assert [r["bytes"] for r in records] == [
        {"system": 8, "prompts/text": 12, "results/Read": 109},
        # Released: "日本語" still 9 bytes (counted as its 3 characters before session 30).
        {"system": 8, "prompts/text": 12, "results/Read": 109, "assistant/text": 11},
        {"system": 8, "prompts/text": 14, "results/Read": 109},
        # The compaction took the system prompt's second object away with its 6 bytes.
        {"system": 2, "summaries": 8},
    ]
    assert records[3]["compaction"]["trigger"] == "manual"
    assert all(list(r["chars"]) == list(r["bytes"]) == list(r["parts"]) for r in records)


class _Untouchable(list[Item]):
    def __iter__(self) -> Iterator[Item]:
        raise AssertionError("the record read the snapshot's items")


def test_a_record_does_not_walk_the_context(tmp_path):
    """The record's work does not grow with the context: it never iterates the snapshot's items."""
    observation = _session()[1]
    expected = record_from_observation(observation)
    observation.snapshot.items = _Untouchable(observation.snapshot.items)
    assert record_from_observation(observation) == expected


def test_a_ledger_without_part_sizes_measures_no_bytes():
    """analyze keeps no store: SessionLedger(part_sizes=False) leaves sizes out and the items unmeasured."""
    ledger = SessionLedger("s", counter=CharsCounter(), part_sizes=False)
    item = _item("u1", Category.PROMPTS, "prompts/text", "naïve café")
    snapshot = ledger.observe([item])
    assert snapshot.parts == {"prompts/text": 3}  # chars/4 of 10, rounded up
    assert (snapshot.part_chars, snapshot.part_bytes, item.utf8_bytes) == (None, None, 0)


def test_a_snapshot_without_sizes_is_not_stored_with_empty_ones(tmp_path, caplog):
    """Session 30 (helper X): a ledger keeping no sizes (TranscriptAccount's default) gives no record, one warning.

    Before, such a snapshot had ``{}`` sizes and the store wrote ``"chars": {}, "bytes": {}``
    for a context of 10 characters, silently.
    """
    ledger = SessionLedger("s", counter=CharsCounter(), part_sizes=False)
    observation = _observation(ledger.observe([_item("u1", Category.PROMPTS, "prompts/text", "naïve café")]))
    with pytest.raises(ValueError, match="part_sizes=True"):
        record_from_observation(observation)
    store = LocalStore(tmp_path)
    with caplog.at_level(logging.DEBUG, logger="ctxscope"):
        store.record(observation)
        store.record(observation)
    assert store.read("s") == []
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "part_sizes=True" in warnings[0].getMessage()


def test_an_empty_context_with_sizes_is_stored_with_empty_sizes(tmp_path):
    """An empty context measured: sizes ``{}`` (nothing there), which a record keeps as they are."""
    ledger = SessionLedger("s", counter=CharsCounter())
    store = LocalStore(tmp_path)
    store.record(_observation(ledger.observe([])))
    [record] = store.read("s")
    assert (record["parts"], record["chars"], record["bytes"]) == ({}, {}, {})
