"""``ctxscope context [--session ID] [--json] [--list]``: report a recorded session.

Reads the local store (``CTXSCOPE_DATA_DIR`` or ``--data-dir``) that the
embedded mode of ``ctxscope.setup()`` / ``opentelemetry-instrument`` fills.
Store files are read through :mod:`ctxscope.bounded_input` (regular files
only, ``--max-input-mb``, nesting and number limits); a record that is not as
the store writes it is one line naming its file and line.
"""

from __future__ import annotations

import argparse
import io
import json
import sys

from .. import bounded_input
from ..errors import InputError, UserError
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
    parser.add_argument("--max-input-mb", type=float, metavar="MB",
                        help=f"refuse a larger store file (default {bounded_input.DEFAULT_MAX_INPUT_MB})")
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


def _report(path: str, numbered: list[tuple[int, dict]]) -> dict:
    """The report of a session's records; a record of the wrong shape is a one-line InputError."""
    records = [record for _, record in numbered]
    try:
        return build_report(records)
    except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError):
        pass
    # Find the record at fault (the failure path only: one report per record).
    for number, record in numbered:
        try:
            build_report([record])
        except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError) as exc:
            raise InputError(path, f"not a record as the local store writes it ({type(exc).__name__}); "
                             "a damaged local store file: delete it", number) from None
    raise InputError(path, "records that do not add up to a report; a damaged local store file: delete it")


def run(args: argparse.Namespace) -> int:
    limit = bounded_input.max_bytes(args.max_input_mb)
    store = LocalStore(args.data_dir)
    sessions = store.sessions()
    if args.list:
        if args.json:
            sys.stdout.write(json.dumps(sessions_json(sessions), indent=2) + "\n")
        else:
            render_sessions(sessions, sys.stdout)
        return 0
    session_id = _pick(store, args.session, sessions)
    numbered = store.read_numbered(session_id, max_bytes=limit)
    path = str(store.path_for(session_id))
    if not numbered:
        raise UserError(f"{path}: no records")
    doc = _report(path, numbered)
    try:
        text = json.dumps(doc, indent=2) + "\n" if args.json else _text(doc)
    except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError) as exc:
        raise InputError(path, f"records that cannot be shown ({type(exc).__name__}); a damaged local "
                         "store file: delete it") from None
    sys.stdout.write(text)
    return 0


def _text(doc: dict) -> str:
    out = io.StringIO()
    render_text(doc, out)
    return out.getvalue()
