"""The cyclic garbage collector paused while a transcript is read (``analyze``, ``replay``), and while
the command line's modules import (``cli``).

Reading makes millions of short-lived, acyclic objects (records, items,
spans): reference counting frees them, and the cyclic collector would only
rescan the growing heap again and again for nothing (a third of the run time
of ``analyze`` on a 50 MB session; 2.6% of replay's instructions on a 12 MB
one). Importing modules makes no garbage either, only objects that live as
long as the process. It is back on at the end, as it was.

A command whose objects live until its process ends (``replay``, ``analyze``)
pauses it with ``freeze=True``: at the end, what is tracked is moved to the
collector's permanent generation (``gc.freeze``) before the collector is back
on. Objects made while the collector is paused all stay in its youngest
generation, so the first collection after the pause would scan every one of
them, then again as they are promoted, to find nothing (dense50's replay:
136 M instructions, memory-bound: the end of the run, from the last call read to
the process's exit, 0.15 s -> 0.05 s of CPU). Reference counting still frees
frozen objects; only a cycle unreachable by then is never collected.

So it freezes only where the process ends with the command: the console
script (``ctxscope.cli.run``) says so with :func:`process_ends_with_command`.
``ctxscope.cli.main`` called in a process that goes on (the tests, a
program that runs a command in-process) freezes nothing: the freeze would
keep for the rest of that process every cycle unreachable at that moment,
the caller's own among them (the collector's next pass would have freed
them), and each command's own again.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator

_process_ends = False  # set once by process_ends_with_command; never cleared


def process_ends_with_command() -> None:
    """The process exits when the command returns: a pause asked to freeze may (the module's docstring)."""
    global _process_ends
    _process_ends = True


@contextlib.contextmanager
def cyclic_gc_paused(*, freeze: bool = False) -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if freeze and _process_ends:
                gc.freeze()
            gc.enable()
