"""What every scripted agent shares: the server, and one JSON line of results for the test to compare.

An agent script runs unmodified (no ctxscope import of its own) under
``opentelemetry-instrument`` or bare; the test compares the two runs'
results, and the spans against what the server counted (``served``).
"""

from __future__ import annotations

import json
from typing import Any

from ctxscope.testing import ProviderServer, Reply, reported_input_tokens

SYSTEM = "You are terse."  # 14 chars -> 4 tokens (chars/4)
HELLO = "hello there"  # 11 chars -> 3 tokens


def report(server: ProviderServer, results: list[Any]) -> None:
    served = [[r.api, reported_input_tokens(r.body, r.api)] for r in server.requests]
    print("AGENT-RESULT " + json.dumps({"results": results, "served": served}, sort_keys=True, default=str))


__all__ = ["HELLO", "ProviderServer", "Reply", "SYSTEM", "report"]
