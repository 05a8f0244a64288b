"""The pure core imports with OpenTelemetry and every provider SDK absent (blocked, not just unused)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# The pure layer of docs/ARCHITECTURE.md ("The layers"): the whole ctxscope.core package, walked (so a new
# module is checked without being listed), the transcript readers, and the cross-cutting modules below them.
PURE_PACKAGES = ["ctxscope.core", "ctxscope.transcripts"]
PURE = ["ctxscope.schema", "ctxscope.config", "ctxscope.errors", "ctxscope.faultlog", "ctxscope.jsonio"]
BLOCKED = ("opentelemetry", "openai", "anthropic", "google", "ollama", "litellm", "httpx", "httpx2", "wrapt")

SCRIPT = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {BLOCKED!r}:
            raise ImportError('blocked: ' + name)
sys.meta_path.insert(0, Block())
import importlib, pkgutil
for name in {PURE!r}:
    importlib.import_module(name)
count = 0
for package in {PURE_PACKAGES!r}:
    root = importlib.import_module(package)
    for info in pkgutil.walk_packages(root.__path__, package + '.'):
        importlib.import_module(info.name)
        count += 1
print('ok', count)
"""


def test_every_pure_module_imports_with_the_sdks_blocked():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    status, count = done.stdout.split()
    assert status == "ok"
    assert int(count) >= 40  # the walk really found the package's modules
