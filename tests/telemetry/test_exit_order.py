"""The end of the process (telemetry/shutdown.end_process): what the last calls' drain starts is finished too."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# A drain (the measuring worker's last calls) whose work makes the first local write of the process: the
# local store registers its flush then, after the exit began. The flush must still run before the exit.
SCRIPT = textwrap.dedent("""
    from ctxscope.telemetry import shutdown

    def drain(timeout_s):
        shutdown.at_exit(lambda: print("flushed what the drain wrote", flush=True))
        return 1

    shutdown.on_drain(drain)
    shutdown.at_exit(lambda: print("flushed before", flush=True))
""")


def test_a_local_write_the_final_drain_registers_still_runs():
    """On main the local steps were read before the drain: the store's flush, registered by the drained
    calls' first record, never ran, and that record was lost at exit (1 run in 5 of an instrumented agent)."""
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["flushed before", "flushed what the drain wrote"]
