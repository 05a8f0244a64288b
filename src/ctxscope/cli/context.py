"""``ctxscope context [--session ID] [--json] [--list]``: report a recorded session.

Reads the local store (``CTXSCOPE_DATA_DIR`` or ``--data-dir``) that the
embedded mode of ``ctxscope.setup()`` / ``opentelemetry-instrument`` fills.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import UserError
from ..report.context import build_report, render_sessions, render_text, sessions_json
from ..store import LocalStore, SessionInfo


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "context", help="report a recorded session's context, part by part",
        description="Report a session recorded in the local store: its latest call part by part "
                    "(tokens, chars, apportioned tokens, share of the window) and each part summed "
                    "over the session's calls with its cost. Default: the most recent session.")
    parser.add_argument("--session", metavar="ID", help="session id (or a unique prefix of one)")
    parser.add_argument("--list", action="store_true", help="list the recorded sessions, most recent first")
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    parser.add_argument("--data-dir", metavar="DIR",
                        help="the local store (default: $CTXSCOPE_DATA_DIR, else $XDG_DATA_HOME/ctxscope)")
    parser.set_defaults(handler=run)


def _pick(store: LocalStore, wanted: str | None, sessions: list[SessionInfo]) -> str:
    if not sessions:
        raise UserError(f"{store.root}: no recorded sessions; run the agent under ctxscope.setup() "
                        "or opentelemetry-instrument first")
    if wanted is None:
        return sessions[0].session_id
    ids = [s.session_id for s in sessions]
    if wanted in ids:
        return wanted
    matches = [i for i in ids if i.startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise UserError(f"session {wanted!r} is ambiguous ({len(matches)} match); give more of the id")
    raise UserError(f"{store.root}: no session {wanted!r}; see `ctxscope context --list`")


def run(args: argparse.Namespace) -> int:
    store = LocalStore(args.data_dir)
    sessions = store.sessions()
    if args.list:
        if args.json:
            sys.stdout.write(json.dumps(sessions_json(sessions), indent=2) + "\n")
        else:
            render_sessions(sessions, sys.stdout)
        return 0
    session_id = _pick(store, args.session, sessions)
    records = store.read(session_id)
    if not records:
        raise UserError(f"{store.path_for(session_id)}: no records")
    doc = build_report(records)
    if args.json:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        render_text(doc, sys.stdout)
    return 0
