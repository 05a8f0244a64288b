"""Claude's proxy encoding on the live path: the overhead item framing:proxy-encoding kept by the ledger.

chars/4 counting, so the correction is worked out by hand: prose tokens x 0.16
plus code/JSON tokens x 0.30 (framing.CLAUDE_PROXY_RATIO), rounded once.
"""

from __future__ import annotations

import json
import random

import pytest

from ctxscope.core import fidelity

from ctxscope.core import framing
from ctxscope.cli import main
from ctxscope.config import OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
from ctxscope.instrumentation.anthropic import AnthropicInstrumentor
from ctxscope.core.items import items_from_request
from ctxscope.core.ledger import SessionLedger
from ctxscope.schema import Attr, Category
from ctxscope.testing import ProviderServer
from ctxscope.core.tokens import CharsCounter
from ctxscope.telemetry.tracker import Tracker

from _instr_support import attr, categories, make_telemetry

pytestmark = pytest.mark.filterwarnings("ignore:The model .* is deprecated:DeprecationWarning")

MODEL = "claude-sonnet-4-5"
API = "anthropic.messages"
PROXY_ID = "framing:proxy-encoding"
JSON_TEXT = '{"path": "src/app.py", "lines": [1, 2, 3]}'  # 43 chars -> 11 tokens, code
# Prose: system "You are terse." 4 + user 100 chars 25 + assistant "ok" 1 = 30 -> 4.8;
# code: 11 -> 3.3; 8.1 -> 8.
MESSAGES = [{"role": "user", "content": "x" * 100}, {"role": "assistant", "content": "ok"},
            {"role": "user", "content": JSON_TEXT}]
# Then + assistant "done" (1) + user 40 chars (10): prose 41 -> 6.56, + 3.3 = 9.86 -> 10.
MORE = MESSAGES + [{"role": "assistant", "content": "done"}, {"role": "user", "content": "y" * 40}]


def request(messages: list) -> dict:
    return dict(model=MODEL, max_tokens=50, system="You are terse.", messages=messages)


def expected_overhead(body: dict) -> int:
    """What ctxscope fidelity's framed estimate adds: framing items + the proxy item over counted_items."""
    counter = CharsCounter()
    framed = sum(i.fixed_tokens or 0 for i in framing.framing_items(body, API, counter.count, model=MODEL))
    proxy = framing.proxy_encoding_items(MODEL, fidelity.counted_items(body, API, counter))
    return framed + sum(i.fixed_tokens or 0 for i in proxy)


def proxy_changes(span) -> list[tuple[str, int, int]]:
    return [(e.attributes["change_type"], e.attributes["estimated_tokens"], e.attributes["delta_tokens"])
            for e in span.events if e.name == "llm.context.change" and e.attributes["id"] == PROXY_ID]


@pytest.fixture
def live(monkeypatch):
    """The real anthropic SDK, instrumented, a chars/4 tracker with framing on (as in production)."""
    monkeypatch.delenv(OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, raising=False)
    with ProviderServer() as server:
        tel = make_telemetry()
        tel.tracker = Tracker(tokenizer="chars")
        instrumentor = AnthropicInstrumentor()
        instrumentor.instrument(tracer_provider=tel.provider, tracker=tel.tracker)
        yield tel, server.anthropic_client()
        instrumentor.uninstrument()


def test_live_span_has_the_proxy_item(live):
    """Call 1: proxy 8 (a baseline); call 2 appends two turns: proxy 10, one replacement +2; call 3 unchanged: no
    event."""
    tel, client = live
    client.messages.create(**request(MESSAGES))
    client.messages.create(**request(MORE))
    client.messages.create(**request(MORE))
    first, second, third = tel.calls()
    assert proxy_changes(first) == [("baseline", 8, 8)]
    assert proxy_changes(second) == [("replacement", 10, 2)]
    assert proxy_changes(third) == []
    # The overhead category equals fidelity's framed estimate (counted_items + proxy_encoding_items).
    assert categories(first)["overhead"] == expected_overhead(request(MESSAGES))
    assert categories(second)["overhead"] == expected_overhead(request(MORE))
    ledger = tel.tracker.ledger(attr(second, Attr.SESSION_ID))
    assert [(i.id, i.tokens) for i in ledger.latest.items if i.id == PROXY_ID] == [(PROXY_ID, 10)]


def test_inspect_matches_the_live_span(live, tmp_path, capsys):
    """ctxscope inspect of the same body shows the live span's categories and estimate (proxy item included)."""
    tel, client = live
    body = request(MESSAGES)
    client.messages.create(**body)
    span = tel.one_call()
    path = tmp_path / "body.json"
    path.write_text(json.dumps(body))
    assert main(["inspect", str(path), "--json", "--tokenizer", "chars"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["annotation"]["estimated_tokens"] == attr(span, Attr.ESTIMATED_TOKENS)
    assert {k: v for k, v in doc["annotation"]["categories"].items()} == categories(span)
    assert doc["parts"]["overhead"] == categories(span)["overhead"]


def test_not_claude_no_item_and_model_switch_drops_it():
    """gpt-4o gets no proxy item; a session moving from Claude to gpt-4o loses it (a new baseline)."""
    ledger = SessionLedger("s", tokenizer="chars", proxy_encoding=True)
    body = request(MESSAGES)
    claude = ledger.observe(items_from_request(body, API), model=MODEL)
    assert [i.fixed_tokens for i in claude.items if i.id == PROXY_ID] == [8]
    gpt = ledger.observe(items_from_request(body, API), model="gpt-4o")
    assert not any(i.id == PROXY_ID for i in gpt.items)
    assert gpt.annotation.baseline and Category.OVERHEAD not in gpt.annotation.categories
    off = SessionLedger("s", tokenizer="chars").observe(items_from_request(body, API), model=MODEL)
    assert not any(i.id == PROXY_ID for i in off.items)


def test_running_sums_match_a_full_recount_under_random_edits():
    """40 calls of appends, removals, in-place replacements: the item always equals proxy_encoding_items of all
    items."""
    rng = random.Random(7)
    ledger = SessionLedger("s", tokenizer="chars", proxy_encoding=True)
    messages: list[dict] = []
    for step in range(40):
        action = rng.random()
        if action < 0.6 or len(messages) < 3:
            text = rng.choice(["prose " * rng.randint(1, 30), json.dumps({"k": list(range(rng.randint(1, 20)))})])
            messages.append({"role": "user" if len(messages) % 2 == 0 else "assistant", "content": text})
        elif action < 0.8:
            del messages[rng.randrange(len(messages))]
        else:
            i = rng.randrange(len(messages))
            messages[i] = {**messages[i], "content": messages[i]["content"] + " edited"}
        snap = ledger.observe(items_from_request(request(list(messages)), API), model=MODEL)
        counted = [(i, i.tokens) for i in snap.items if i.id != PROXY_ID]
        want = framing.proxy_encoding_tokens(MODEL, counted)
        got = [i.fixed_tokens for i in snap.items if i.id == PROXY_ID]
        assert got == ([want] if want else []), step
        # Totals agree with the items (the proxy item included exactly once).
        assert snap.annotation.estimated_tokens == sum(i.tokens for i in snap.items), step
