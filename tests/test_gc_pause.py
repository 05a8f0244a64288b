"""The cyclic collector's pause (ctxscope.gc_pause): back on as it was, and frozen on request."""

import gc
import subprocess
import sys
import weakref

import pytest

from conftest import DATA

from ctxscope import gc_pause
from ctxscope.cli import main
from ctxscope.gc_pause import cyclic_gc_paused

SESSION = DATA / "transcripts" / "claude_4c2ddfdc.jsonl"


@pytest.fixture(autouse=True)
def _collector_restored(monkeypatch):
    enabled = gc.isenabled()
    monkeypatch.setattr(gc_pause, "_process_ends", False)  # as in a process that goes on (pytest's)
    yield
    gc.unfreeze()
    gc.enable() if enabled else gc.disable()


def test_paused_inside_and_back_on_after() -> None:
    gc.enable()
    frozen = gc.get_freeze_count()
    with cyclic_gc_paused():
        assert not gc.isenabled()
        made = [[n] for n in range(10)]
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen  # nothing frozen without freeze=True
    assert any(found is made for found in gc.get_objects())


def test_freeze_moves_what_was_made_to_the_permanent_generation() -> None:
    gc.enable()
    gc.unfreeze()
    gc_pause.process_ends_with_command()
    with cyclic_gc_paused(freeze=True):
        made = [[n] for n in range(1000)]  # 1,001 tracked lists
    assert gc.isenabled()
    assert gc.get_freeze_count() >= 1001
    # Frozen: in none of the generations a collection scans.
    assert not any(found is made for found in gc.get_objects())


def test_no_freeze_unless_the_process_ends_with_the_command() -> None:
    gc.enable()
    gc.unfreeze()
    with cyclic_gc_paused(freeze=True):
        made = [[n] for n in range(1000)]
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert any(found is made for found in gc.get_objects())


def test_a_pause_inside_a_pause_leaves_it_to_the_outer_one() -> None:
    gc.enable()
    gc.unfreeze()
    gc_pause.process_ends_with_command()
    with cyclic_gc_paused(freeze=True):
        with cyclic_gc_paused(freeze=True):
            pass
        assert not gc.isenabled()  # the inner one found it off: it stays off
        assert gc.get_freeze_count() == 0  # and froze nothing
    assert gc.isenabled() and gc.get_freeze_count() > 0


class _Node:
    pass


def test_analyze_in_process_leaves_the_callers_garbage_to_the_collector(capsys) -> None:
    """main() called by a process that goes on: a cycle it dropped before the command is still freed."""
    gc.enable()
    gc.unfreeze()
    node = _Node()
    node.me = node  # type: ignore[attr-defined]
    gone = weakref.ref(node)
    gc.collect()  # the cycle survives into the oldest generation, then is dropped
    del node
    assert main(["analyze", str(SESSION), "--json", "--tokenizer", "chars"]) == 0
    capsys.readouterr()
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone() is None


def test_the_console_script_still_freezes_what_analyze_made() -> None:
    """ctxscope.cli.run (the process ends with the command): frozen, not rescanned at exit."""
    code = ("import atexit, gc, sys; atexit.register(lambda: sys.stderr.write(f'frozen {gc.get_freeze_count()}'));"
            " from ctxscope.cli import run; run()")
    done = subprocess.run([sys.executable, "-c", code, "analyze", str(SESSION), "--json", "--tokenizer", "chars"],
                          capture_output=True, text=True, check=True)
    assert int(done.stderr.rsplit("frozen ", 1)[1]) > 1000
