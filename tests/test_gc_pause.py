"""The cyclic collector's pause (ctxscope.gc_pause): back on as it was, and frozen on request."""

import gc

import pytest

from ctxscope.gc_pause import cyclic_gc_paused


@pytest.fixture(autouse=True)
def _collector_restored():
    enabled = gc.isenabled()
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
    with cyclic_gc_paused(freeze=True):
        made = [[n] for n in range(1000)]  # 1,001 tracked lists
    assert gc.isenabled()
    assert gc.get_freeze_count() >= 1001
    # Frozen: in none of the generations a collection scans.
    assert not any(found is made for found in gc.get_objects())


def test_a_pause_inside_a_pause_leaves_it_to_the_outer_one() -> None:
    gc.enable()
    gc.unfreeze()
    with cyclic_gc_paused(freeze=True):
        with cyclic_gc_paused(freeze=True):
            pass
        assert not gc.isenabled()  # the inner one found it off: it stays off
        assert gc.get_freeze_count() == 0  # and froze nothing
    assert gc.isenabled() and gc.get_freeze_count() > 0
