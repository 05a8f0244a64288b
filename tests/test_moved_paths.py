"""The module paths of 0.1 import for one release: the same module object, with a DeprecationWarning."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ctxscope._moved import MOVED

# Each old path, imported in a fresh interpreter so that no earlier import hides the warning.
SCRIPT = """
import importlib, sys, warnings
old, new = sys.argv[1], sys.argv[2]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    moved = importlib.import_module(old)
assert moved is importlib.import_module(new), (moved, new)
assert sys.modules[old] is sys.modules[new]
messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
assert any(f"{old} moved to {new}" in m for m in messages), messages
print("ok")
"""


OLD_PATHS = sorted(MOVED.items())


@pytest.mark.parametrize("old, new", OLD_PATHS)
def test_an_old_module_path_is_the_moved_module_with_a_warning(old: str, new: str) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, old, new], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-1500:]
    assert done.stdout.strip() == "ok"


def test_an_attribute_patched_on_the_old_path_is_seen_on_the_new() -> None:
    """Code that monkeypatches ``ctxscope.tracker.X`` still patches what the package uses."""
    code = ("import warnings; warnings.simplefilter('ignore')\n"
            "import ctxscope.tracker as old, ctxscope.telemetry.tracker as new\n"
            "old.SENTINEL_FOR_TEST = 7\nprint(new.SENTINEL_FOR_TEST)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "7", done.stderr[-1500:]
