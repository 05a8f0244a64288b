"""``ctxscope watch``: follow coding agents' session files and emit their telemetry live.

- :mod:`.watcher`: the loop (:class:`Watcher`), the once-only rule, idle ends.
- :mod:`.state`: the state file that lets a restarted watch resume.
- :mod:`.notify`: inotify (Linux) or polling.

Spans are written by :class:`ctxscope.telemetry.replay.CallEmitter`, as for a replay.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

from ctxscope.config import agent_session_dirs
from ctxscope.watch.state import STATE_FILE, WatchState
from ctxscope.watch.watcher import DEFAULT_IDLE_S, DEFAULT_POLL_S, DEFAULT_RESCAN_S, Watcher

__all__ = ["DEFAULT_IDLE_S", "DEFAULT_POLL_S", "DEFAULT_RESCAN_S", "STATE_FILE", "WatchState", "Watcher",
           "default_dirs", "default_state_path"]



def default_dirs(environ: Mapping[str, str] | None = None) -> list[str]:
    """Claude Code's projects folder and Codex's sessions folder of the current user.

    ``$CLAUDE_CONFIG_DIR/projects`` (else ``~/.claude/projects``) and
    ``$CODEX_HOME/sessions`` (else ``~/.codex/sessions``), as the agents do.
    """
    return [str(path) for path in agent_session_dirs(environ)]


def default_state_path(environ: Mapping[str, str] | None = None) -> Path:
    """``<ctxscope data dir>/watch-state.json`` (see :func:`ctxscope.telemetry.store.data_dir`)."""
    from ctxscope.telemetry.store import data_dir

    return data_dir(environ) / STATE_FILE
