"""``ctxscope watch [DIR...]``: live telemetry of Claude Code and Codex sessions.

Follows the session files as the agents write them and exports each new
provider call through the standard ``OTEL_*`` settings (``ctxscope.setup()``;
with no endpoint the calls go to the local store). Runs until interrupted
(SIGINT/SIGTERM): the recording then ends and the state is saved, so the
next ``watch`` resumes where this one stopped. What the backend did not take
is said then, once, and the exit status is 1, as for ``replay``.
"""

from __future__ import annotations

import argparse
import os
import sys

from ctxscope.errors import UserError
from ctxscope.cli._common import add_tokenizer, emitter_for, export_setup, print_problem

SERVICE_NAME = "ctxscope-watch"


def register(subparsers: argparse._SubParsersAction) -> None:
    from ctxscope.watch import DEFAULT_IDLE_S, DEFAULT_POLL_S, DEFAULT_RESCAN_S
    from ctxscope.watch.watcher import DEFAULT_MAX_ACTIVE

    parser = subparsers.add_parser(
        "watch", help="follow Claude Code and Codex session files and export their telemetry live",
        description="Follow agent session files (default: $CLAUDE_CONFIG_DIR/projects or "
                    "~/.claude/projects, and $CODEX_HOME/sessions or ~/.codex/sessions) and export a span "
                    "per new provider call and the llm.context.* metrics through the OTEL_* settings. "
                    "Each call is exported once, across restarts (a state file in the ctxscope data dir).")
    parser.add_argument("dirs", nargs="*", metavar="DIR", help="folders to watch (recursively)")
    parser.add_argument("--idle", type=float, default=DEFAULT_IDLE_S, metavar="SECONDS",
                        help=f"a session without new lines for this long ends (default {DEFAULT_IDLE_S:g})")
    parser.add_argument("--poll", type=float, default=DEFAULT_POLL_S, metavar="SECONDS",
                        help=f"polling interval where file notifications are unavailable (default {DEFAULT_POLL_S:g})")
    parser.add_argument("--rescan", type=float, default=DEFAULT_RESCAN_S, metavar="SECONDS",
                        help="full check interval with notifications, for missed events "
                             f"(default {DEFAULT_RESCAN_S:g})")
    parser.add_argument("--notify", choices=("auto", "poll"), default="auto",
                        help="auto: inotify on Linux, else polling; poll: always poll")
    parser.add_argument("--from-start", action="store_true",
                        help="on a first watch, also export what the files already hold (default: only new calls)")
    parser.add_argument("--max-active", type=int, default=DEFAULT_MAX_ACTIVE, metavar="N",
                        help=f"files followed with their live context at once; past it the least recently "
                             f"written is let go as if idle (default {DEFAULT_MAX_ACTIVE})")
    parser.add_argument("--state", metavar="FILE",
                        help="the state file (default: <data dir>/watch-state.json)")
    add_tokenizer(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ctxscope.watch import WatchState, Watcher, default_dirs, default_state_path
    from ctxscope.config import watch_kill_at
    from ctxscope.telemetry.delivery import Delivery
    from ctxscope.watch.watcher import STEPS, install_signal_handlers, kill_at

    for name in ("idle", "poll", "rescan"):
        if getattr(args, name) <= 0:
            raise UserError(f"--{name} must be a positive number of seconds, got {getattr(args, name)}")
    if args.max_active < 1:
        raise UserError(f"--max-active must be at least 1, got {args.max_active}")
    wanted = args.dirs or default_dirs()
    dirs = [d for d in wanted if os.path.isdir(d)]
    for missing in (d for d in wanted if d not in dirs):
        if args.dirs:
            raise UserError(f"{missing}: no such folder")
        print(f"ctxscope: {missing}: not there; not watched", file=sys.stderr)
    if not dirs:
        raise UserError("no folder to watch: pass the folders that hold the session files")
    state_path = args.state or str(default_state_path())
    telemetry = export_setup(SERVICE_NAME)
    # Counted as a replay's exports are, but live until the end: a failed export costs its batch and
    # the watch carries on, the exporter's messages shown as they come (delivery).
    delivery = Delivery.watch(telemetry, give_up=False)
    try:
        # Held until each round's commit, with ids derived from the call: see watch/watcher.py.
        emitter = emitter_for(telemetry, args.tokenizer, stable_ids=True, hold=True)
        fault = watch_kill_at(STEPS)
        watcher = Watcher(dirs, emitter, WatchState.load(state_path),
                          flush=lambda: telemetry.tracer_provider.force_flush(10_000),
                          idle_s=args.idle, poll_s=args.poll, rescan_s=args.rescan, notifier=args.notify,
                          from_start=args.from_start, max_active=args.max_active, on_problem=print_problem,
                          on_step=kill_at(*fault) if fault is not None else None)
        install_signal_handlers(watcher)
        where = (telemetry.traces_endpoint or telemetry.metrics_endpoint) if telemetry.mode == "otlp" \
            else "the local store"
        watcher.run(ready=lambda: print(
            f"ctxscope: watching {', '.join(dirs)} ({watcher.notifier.name}); exporting to {where}; "
            f"state {state_path}", file=sys.stderr, flush=True))
    finally:
        # The zeros and the providers' shutdown, the exports under way waited for (a slow receiver
        # that answers gets everything); what was not delivered is said once, below, exit 1.
        with delivery.quiet():
            delivery.end(telemetry)
    print(f"ctxscope: watch stopped after {watcher.emitted} new call{'s' * (watcher.emitted != 1)}; "
          f"state saved to {state_path}", file=sys.stderr)
    undelivered = delivery.problem()
    if undelivered is not None:
        raise UserError(undelivered)
    return 0
