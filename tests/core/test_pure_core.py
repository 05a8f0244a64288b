"""The pure core imports with OpenTelemetry and every provider SDK absent (blocked, not just unused)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The pure layer of docs/ARCHITECTURE.md ("The layers").
PURE = [
    "ctxscope.schema", "ctxscope.config", "ctxscope.errors", "ctxscope.faultlog",
    "ctxscope.apis", "ctxscope.items", "ctxscope.request_formats", "ctxscope.payload", "ctxscope.media",
    "ctxscope.classify", "ctxscope.tokens", "ctxscope.framing", "ctxscope.framing.incremental",
    "ctxscope.itemdiff", "ctxscope.ledger", "ctxscope.calibration", "ctxscope.selfcal", "ctxscope.waste",
    "ctxscope.limits", "ctxscope.conversation", "ctxscope.observation", "ctxscope.pipeline",
    "ctxscope.fidelity", "ctxscope.bounded_input", "ctxscope.transcripts", "ctxscope.transcripts.source",
    "ctxscope.transcripts.claude_code", "ctxscope.transcripts.codex", "ctxscope.transcripts.messages",
    "ctxscope.transcripts.prefix", "ctxscope.follow",
]
BLOCKED = ("opentelemetry", "openai", "anthropic", "google", "ollama", "litellm", "httpx", "httpx2", "wrapt")

SCRIPT = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {BLOCKED!r}:
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
import importlib
for name in {PURE!r}:
    importlib.import_module(name)
print('ok')
"""


def test_every_pure_module_imports_with_the_sdks_blocked():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "ok"
