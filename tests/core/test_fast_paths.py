"""The shortcuts analyze's per-call path takes give what the general rules give (values worked out by hand)."""

from __future__ import annotations

from ctxscope.core.apis.anthropic_messages import usage
from ctxscope.core.framing import PROXY_CODE, PROXY_PROSE, proxy_kind
from ctxscope.core.framing.claude_proxy import looks_like_json
from ctxscope.core.ledger import SessionLedger
from ctxscope.core.views import calibrate
from ctxscope.schema import Category, Item


def _text(text: str) -> Item:
    return Item(id="t", category=Category.RESULTS, part="results/Read", chars=len(text), text=text)


def test_a_plain_usage_object_reads_as_the_general_rule_does():
    """10 uncached + 5 written + 100 read = 115 reported; no iterations: no server compaction."""
    read = usage({"input_tokens": 10, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 100,
                  "output_tokens": 7})
    assert read is not None
    assert (read.reported_input, read.input_tokens, read.output_tokens) == (115, 10, 7)
    assert (read.cache_creation_input_tokens, read.cache_read_input_tokens) == (5, 100)
    assert read.provider_compaction is False
    assert usage({"input_tokens": 10, "iterations": None, "cache_read_input_tokens": 100}).reported_input == 110


def test_a_plain_usage_object_with_bad_counts():
    """A missing input count is no usage; a count that is not one (text, negative) adds nothing."""
    assert usage({"output_tokens": 3}) is None
    read = usage({"input_tokens": 4, "cache_read_input_tokens": "many", "cache_creation_input_tokens": -2})
    assert read is not None
    assert (read.reported_input, read.cache_read_input_tokens, read.cache_creation_input_tokens) == (4, None, None)


def test_proxy_kind_looks_past_whitespace_at_either_end():
    """JSON is told by its first and last non-space characters, whatever whitespace surrounds them."""
    assert proxy_kind(_text('  {"a": 1}\n')) == PROXY_CODE
    assert proxy_kind(_text("[1, 2]")) == PROXY_CODE
    assert proxy_kind(_text("\t[1, 2]\u2003")) == PROXY_CODE
    assert proxy_kind(_text("line one\n")) == PROXY_PROSE
    assert proxy_kind(_text('{"a": 1} and more\n')) == PROXY_PROSE
    assert proxy_kind(_text(" \n ")) == PROXY_PROSE
    assert proxy_kind(_text("")) == PROXY_PROSE


def test_looks_like_json_answers_from_the_first_kept_character_alone_when_it_is_not_an_opener():
    """Indented prose, a file separator (whitespace to str.isspace) before "{", an opener alone, a text of spaces."""
    assert looks_like_json("    def f():\n        return {}\n") is False  # "d" kept first: prose
    assert looks_like_json("\x1c\u2003{\"a\": [1]}\x85") is True  # str.isspace's whitespace, both ends
    assert looks_like_json("\n\n[1, 2]  x") is False  # opens as JSON, last kept character "x"
    assert looks_like_json("  {  ") is False  # "{" is first and last once stripped
    assert looks_like_json("<system-reminder>{}</system-reminder>\n") is False
    assert looks_like_json("   \n\t") is False


def test_calibrate_takes_the_general_rule_for_what_is_not_a_ledger_s_counts():
    """A float is truncated and a negative estimate is 0 (10 + 5 = 15 of 20: 5 unattributed)."""
    calibrated, factor = calibrate({Category.PROMPTS: 10.7, Category.ASSISTANT: 5}, 20)  # type: ignore[dict-item]
    assert calibrated == {Category.PROMPTS: 10, Category.ASSISTANT: 5, Category.UNATTRIBUTED: 5}
    assert factor == 1.0
    calibrated, _ = calibrate({Category.PROMPTS: -3, Category.RESULTS: 8}, None)
    assert calibrated == {Category.PROMPTS: 0, Category.RESULTS: 8}


def test_calibrate_of_whole_counts_returns_a_dict_of_its_own():
    """The calibrated view of ledger counts is a new dict: the caller's categories stay as they were."""
    categories = {Category.PROMPTS: 30, Category.RESULTS: 10}
    calibrated, factor = calibrate(categories, 50)
    assert calibrated == {Category.PROMPTS: 30, Category.RESULTS: 10, Category.UNATTRIBUTED: 10}
    assert categories == {Category.PROMPTS: 30, Category.RESULTS: 10}
    assert factor == 1.0


def test_the_calibration_factor_of_a_call_whose_estimate_exceeds_its_usage():
    """Items of 400 + 400 characters are 100 + 100 tokens on chars; reported 150: factor 0.75."""
    ledger = SessionLedger("s", tokenizer="chars")
    items = [Item(id=f"m{i}", category=Category.PROMPTS, part="prompts/text", chars=400, text="x" * 400,
                  digest=str(i)) for i in range(2)]
    snapshot = ledger.report(ledger.observe(items), 150)
    assert snapshot.annotation.estimated_tokens == 200
    assert snapshot.annotation.calibration_factor == 0.75
    assert ledger.report(ledger.observe(items), 300).annotation.calibration_factor == 1.0


def test_an_item_moved_to_another_part_leaves_its_old_part():
    """X (same id and digest) moves from prompts/a to prompts/b: a replacement, not unchanged (session 30,
    helper X). Taken as unchanged, prompts/a kept its 10 tokens after X left, and prompts/b went to -1
    item, -10 tokens (helper V's guard then dropped it when Y came). Now: prompts/b holds X, then Y alone."""
    def prompt(name: str, part: str, tokens: int, digest: str) -> Item:
        return Item(id=name, category=Category.PROMPTS, part=part, chars=1, fixed_tokens=tokens, digest=digest)

    system = Item(id="s", category=Category.SYSTEM, part="system", chars=1, fixed_tokens=100, digest="s")
    ledger = SessionLedger("s", tokenizer="chars")
    ledger.observe([system, prompt("x", "prompts/a", 10, "d")])
    moved = ledger.observe([system, prompt("x", "prompts/b", 10, "d")])
    assert moved.parts == {"system": 100, "prompts/b": 10}
    assert [(c.id, c.change_type.value, c.delta_tokens) for c in moved.annotation.changes] == [
        ("x", "replacement", 0)]
    assert ledger.observe([system]).parts == {"system": 100}
    snapshot = ledger.observe([system, prompt("y", "prompts/b", 4, "e")])
    assert snapshot.parts == {"system": 100, "prompts/b": 4}
    # Sizes as the tokens (each item 1 character, no text: 1 byte).
    assert snapshot.part_chars == {"system": 1, "prompts/b": 1}
    assert snapshot.part_bytes == {"system": 1, "prompts/b": 1}
