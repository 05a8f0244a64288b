"""The cyclic garbage collector paused while a transcript is read (``analyze``, ``replay``), and while
the command line's modules import (``cli``).

Reading makes millions of short-lived, acyclic objects (records, items,
spans): reference counting frees them, and the cyclic collector would only
rescan the growing heap again and again for nothing (a third of the run time
of ``analyze`` on a 50 MB session; 2.6% of replay's instructions on a 12 MB
one). Importing modules makes no garbage either, only objects that live as
long as the process. It is back on at the end, as it was.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
