"""replay lets texts go once counted, as analyze does, a local store listening or not.

The real codemie session in tests/data (four calls, a compaction, one call
after it); its replay's spans are the same either way (the corpus replay
snapshot, tools/replay_otlp_snapshot.py, checks the attributes).
"""

from __future__ import annotations

from pathlib import Path

from opentelemetry.sdk.trace import TracerProvider

from ctxscope.core.pipeline import TranscriptAccount
from ctxscope.telemetry import replay as replay_module
from ctxscope.telemetry.replay import CallEmitter
from ctxscope.telemetry.store import LocalStore
from ctxscope.transcripts import TranscriptFile
from ctxscope.transcripts.follow import TimedCall

SESSION = Path(__file__).resolve().parent.parent / "data" / "transcripts" / "claude_624a4a58_compaction.jsonl"


def _emit_all(listener) -> tuple[CallEmitter, list]:
    emitter = CallEmitter(TracerProvider().get_tracer("test"), tokenizer="chars", listener=listener)
    calls = list(TranscriptFile(str(SESSION)).calls())
    snapshots = [emitter.emit(TimedCall(call, None, None, 0)) for call in calls]
    return emitter, [(call, snapshot) for call, snapshot in zip(calls, snapshots)]


def test_without_a_listener_every_counted_text_is_let_go_and_the_counts_stay():
    emitter, emitted = _emit_all(None)
    assert len(emitted) == 5 and all(snapshot is not None for _, snapshot in emitted)
    last_call, last = emitted[-1]
    texts = [item for item in last_call.items if item.chars]
    assert texts and all(item.released and item.text in ("", "{}") for item in texts)
    assert sum(item.tokens for item in last.items if item.released) > 0


def test_with_a_store_the_texts_go_too_and_the_records_are_those_of_kept_texts(tmp_path, monkeypatch):
    """Session 30: the store's chars and bytes per part are the ledger's, so the texts need not stay."""
    released_store = LocalStore(tmp_path / "released")
    emitter, released = _emit_all(released_store.record)
    assert all(item.released for call, _ in released for item in call.items if item.chars)

    def keeping(*args, **kwargs):
        return TranscriptAccount(*args, **{**kwargs, "keep_text": True})

    monkeypatch.setattr(replay_module, "TranscriptAccount", keeping)
    kept_store = LocalStore(tmp_path / "kept")
    _, kept = _emit_all(kept_store.record)
    assert not any(item.released for call, _ in kept for item in call.items)
    assert [s.annotation.to_attributes() for _, s in kept] == [s.annotation.to_attributes() for _, s in released]
    session = released[0][1].session_id
    records = released_store.read(session)
    # "ts" aside: a call without a timestamp is stamped when emitted.
    assert len(records) == 5
    assert [{**r, "ts": 0} for r in records] == [{**r, "ts": 0} for r in kept_store.read(session)]
    assert any(r["bytes"] != r["chars"] for r in records)  # the session's texts are not all ASCII
