"""``ctxscope context [--session ID] [--json] [--list]``: a census of a recorded chat.

A chat is a conversation's session and its side calls' (``<id>/compaction``);
the JSON document lists the chats kept (latest first) and reports one, by
default the latest: its latest call part by part and each part over the chat.

Reads the local store (``CTXSCOPE_DATA_DIR`` or ``--data-dir``) that the
embedded mode of ``ctxscope.setup()`` / ``opentelemetry-instrument`` fills.
Store files are read through :mod:`ctxscope.core.bounded_input` (regular files
only, ``--max-input-mb``, nesting and number limits); a record that is not as
the store writes it is one line naming its file and line.
"""

from __future__ import annotations

import argparse
import io
import json
import sys

from ctxscope.core import bounded_input
from ctxscope.errors import InputError, UserError
from ctxscope.report.context import build_report, chats_json, render_sessions, render_text, sessions_json
from ctxscope.telemetry.store import ChatInfo, LocalStore, chats_of


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "context", help="report a recorded chat's context, part by part",
        description="Report a chat recorded in the local store (its conversation and side calls such as "
                    "a compaction's summariser): its latest call part by part (tokens, chars, bytes, "
                    "apportioned tokens, share of the window, cost) and each part summed over the chat's "
                    "calls with its cost. Default: the most recent chat.")
    parser.add_argument("--session", metavar="ID", help="session id (or a unique prefix of one)")
    parser.add_argument("--list", action="store_true", help="list the recorded sessions, most recent first")
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    parser.add_argument("--data-dir", metavar="DIR",
                        help="the local store (default: $CTXSCOPE_DATA_DIR, else $XDG_DATA_HOME/ctxscope)")
    parser.add_argument("--max-input-mb", type=float, metavar="MB",
                        help=f"refuse a larger store file (default {bounded_input.DEFAULT_MAX_INPUT_MB})")
    parser.set_defaults(handler=run)


def _pick(store: LocalStore, wanted: str | None, chats: list[ChatInfo]) -> ChatInfo:
    if not chats:
        raise UserError(f"{store.root}: no recorded sessions; run the agent under ctxscope.setup() "
                        "or opentelemetry-instrument first")
    if wanted is None:
        return chats[0]
    by_id = {s.session_id: chat for chat in chats for s in chat.sessions}
    by_id.update({chat.chat_id: chat for chat in chats})
    if wanted in by_id:
        return by_id[wanted]
    matches = {id(chat): chat for key, chat in by_id.items() if key.startswith(wanted)}
    if len(matches) == 1:
        return next(iter(matches.values()))
    if matches:
        raise UserError(f"session {wanted!r} is ambiguous ({len(matches)} match); give more of the id")
    raise UserError(f"{store.root}: no session {wanted!r}; see `ctxscope context --list`")


def _read(store: LocalStore, chat: ChatInfo, limit: int) -> tuple[str, list[tuple[int, dict]],
                                                                  list[tuple[str, str, list[tuple[int, dict]]]]]:
    """(path, numbered records of the conversation, [(kind, path, numbered records)] of the side calls)."""
    main: tuple[str, list[tuple[int, dict]]] | None = None
    side = []
    for info in chat.sessions:
        kind = chat.side_kind(info)
        numbered = store.read_numbered(info.session_id, max_bytes=limit)
        path = str(store.path_for(info.session_id))
        if kind is None:
            main = (path, numbered)
        else:
            side.append((kind, path, numbered))
    if main is None:  # only a side call's session was kept: report it as the chat
        kind, path, numbered = side.pop(0)
        main = (path, numbered)
    return main[0], main[1], side


def _report(path: str, numbered: list[tuple[int, dict]], side: list[tuple[str, str, list[tuple[int, dict]]]],
            chats: list[dict]) -> dict:
    """The census of a chat's records; a record of the wrong shape is a one-line InputError."""
    records = [record for _, record in numbered]
    side_records = [(kind, [record for _, record in rows]) for kind, _, rows in side]
    try:
        return build_report(records, side=side_records, chats=chats)
    except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError):
        pass
    # Find the record at fault (the failure path only: one report per record).
    for file, rows in [(path, numbered), *((p, r) for _, p, r in side)]:
        for number, record in rows:
            try:
                build_report([record])
            except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError) as exc:
                raise InputError(file, f"not a record as the local store writes it ({type(exc).__name__}); "
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
    chats = chats_of(sessions)
    chat = _pick(store, args.session, chats)
    path, numbered, side = _read(store, chat, limit)
    if not numbered:
        raise UserError(f"{path}: no records")
    doc = _report(path, numbered, side, chats_json(chats))
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
