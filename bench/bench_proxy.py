"""Claude's proxy-encoding item on the live path: cost of appending one message.

The tracker (extraction, framing, ledger, waste, self-calibration keying) on
an Anthropic conversation of 2,000 messages growing by one user message per
call, model ``claude-sonnet-4-5``, with the proxy item (the default with
framing on) and without it (``SessionLedger.proxy_encoding`` off), in
alternating rounds of the same run so machine noise hits both alike. The
item is recomputed from running sums per kind of content, so the difference
should not grow with the conversation. See ``docs/instrumentation.md``.
"""

from __future__ import annotations

import gc
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from ctxscope.telemetry.tracker import Tracker  # noqa: E402

MESSAGES = 2000
ROUNDS = 200
MODEL = "claude-sonnet-4-5"
API = "anthropic.messages"
_WORDS = ("the of and to in is that for it with as was on be by this are from or an file src app test "
          "def return import class self None True False {} [] ()").split()


def _text(rng: random.Random, words: int = 80) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _tracker(proxy: bool, messages: list[dict[str, Any]]) -> Tracker:
    tracker = Tracker(tokenizer="chars", max_sessions=4)
    body = {"model": MODEL, "max_tokens": 10, "system": "You are terse.", "messages": list(messages)}
    tracker.observe_request(body, API, provider="anthropic", session_id="s")
    ledger = tracker.ledger("s")
    if not proxy:
        ledger.proxy_encoding = False
        tracker.observe_request(body, API, provider="anthropic", session_id="s")
    return tracker


def main() -> dict[str, Any]:
    rng = random.Random(5)
    messages: list[dict[str, Any]] = []
    while len(messages) < MESSAGES:
        messages.append({"role": "user" if len(messages) % 2 == 0 else "assistant", "content": _text(rng)})
    histories = {True: list(messages), False: list(messages)}
    trackers = {flag: _tracker(flag, histories[flag]) for flag in (True, False)}
    samples: dict[bool, list[float]] = {True: [], False: []}
    gc.collect()
    for round_ in range(ROUNDS):
        text = _text(rng)
        for flag in ((True, False) if round_ % 2 else (False, True)):
            history = histories[flag]
            history.append({"role": "user" if len(history) % 2 == 0 else "assistant", "content": text})
            body = {"model": MODEL, "max_tokens": 10, "system": "You are terse.", "messages": list(history)}
            started = time.perf_counter()
            trackers[flag].observe_request(body, API, provider="anthropic", session_id="s")
            samples[flag].append(time.perf_counter() - started)
    on, off = (statistics.median(samples[f]) * 1e3 for f in (True, False))
    print(f"  Anthropic conversation of {MESSAGES} messages, chars/4, {ROUNDS} alternating rounds")
    print(f"  tracker per call, proxy item on   {on:.3f} ms")
    print(f"  tracker per call, proxy item off  {off:.3f} ms   (difference {on - off:+.3f} ms)")
    return {"proxy_on_median_ms": round(on, 4), "proxy_off_median_ms": round(off, 4),
            "messages": MESSAGES, "rounds": ROUNDS}


if __name__ == "__main__":
    main()
