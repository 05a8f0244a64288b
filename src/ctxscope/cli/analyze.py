"""``ctxscope analyze FILE...``: what filled an agent's context, and what wasted it.

Exit codes: 0 fine, 2 the waste ratio of a session exceeds ``--fail-over-ratio``,
1 any error (usage, unreadable input, nothing usable). Problems in a file are
printed one a line (``path:line: message``) on stderr; the rest is analysed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING, Callable

from ctxscope.errors import UserError
from ctxscope.gc_pause import cyclic_gc_paused
from ctxscope.core.waste import DEFAULT_AGING_CALLS, DEFAULT_RESULT_CAP, DEFAULT_TOOL_BUDGET, WasteOptions
from ctxscope.cli import EXIT_ERROR, EXIT_OK, EXIT_THRESHOLD
from ctxscope.cli._common import (MAX_PROBLEMS_SHOWN, add_transcript_options, check_ratio, print_problem,
                                  transcript_paths)

if TYPE_CHECKING:  # pragma: no cover
    from ctxscope.report.analysis import FileResult

PROGRESS_MIN_BYTES = 8 * 1024 * 1024


def register(subparsers: argparse._SubParsersAction) -> None:
    add_parser(subparsers, "analyze", "profile the context of agent transcripts (Claude Code, Codex, message arrays)")


def add_parser(subparsers: argparse._SubParsersAction, name: str, summary: str) -> argparse.ArgumentParser:
    """The analyze command's parser under ``name`` (``report`` is the same command, by ctxlens's name)."""
    parser = subparsers.add_parser(
        name, help=summary,
        description="Profile the context window of agent transcripts: composition, growth, waste.")
    parser.add_argument("files", nargs="+", metavar="FILE", help="transcript files (JSONL or JSON)")
    add_common(parser)
    parser.add_argument("--json", action="store_true", help="print a JSON document (schema in docs/analyze.md)")
    parser.add_argument("--html", action="store_true", help="write a self-contained HTML report (needs -o)")
    parser.add_argument("-o", "--output", metavar="PATH", help="where to write the --html or --json report")
    parser.add_argument("--top", type=int, default=10, help="findings and parts to list (default 10)")
    parser.add_argument("--fail-over-ratio", type=float, metavar="R",
                        help="exit 2 when a session's waste ratio exceeds R (0-1); it gates the last-call "
                             "view: waste in the last call's context / that call's used tokens")
    parser.add_argument("--no-subagents", action="store_true",
                        help="do not add the subagent files found beside a Claude Code session")
    parser.add_argument("--redact", action="store_true",
                        help="show references as the tool and a hash of its arguments (no file paths or "
                             "commands in the report: SPEC section 7); the default for files written with -o")
    parser.add_argument("--show-references", action="store_true",
                        help="keep file paths and commands in references, and rules/skill names in parts, "
                             "of files written with -o (they are redacted there by default)")
    parser.set_defaults(handler=run)
    return parser


def add_common(parser: argparse.ArgumentParser) -> None:
    add_transcript_options(parser)
    # ctxlens's names are accepted beside ours: what its users type.
    parser.add_argument("--result-cap", "--tool-result-cap", dest="result_cap", type=int, default=DEFAULT_RESULT_CAP,
                        help=f"tool result tokens above which the excess is bloat (default {DEFAULT_RESULT_CAP})")
    parser.add_argument("--tool-budget", "--tool-def-budget", dest="tool_budget", type=int,
                        default=DEFAULT_TOOL_BUDGET,
                        help=f"tool definition tokens per request before overage (default {DEFAULT_TOOL_BUDGET})")
    parser.add_argument("--aging-calls", type=int, default=DEFAULT_AGING_CALLS,
                        help=f"calls without use after which a result is aging (default {DEFAULT_AGING_CALLS})")


def options_from(args: argparse.Namespace) -> WasteOptions:
    try:
        return WasteOptions(result_cap=args.result_cap, tool_budget=args.tool_budget, aging_calls=args.aging_calls)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def subagent_files(path: str) -> list[str]:
    """Claude Code subagent files of a session.

    2.1.x keeps them in ``<session>/subagents/agent-*.jsonl``; 2.0.x beside the
    session as ``agent-<id>.jsonl`` whose lines carry the parent's ``sessionId``.
    """
    stem = path[:-6] if path.endswith(".jsonl") else None
    if not stem or os.path.basename(stem).startswith("agent-"):
        return []
    found: list[str] = []
    folder = os.path.join(stem, "subagents")
    try:
        found = [os.path.join(folder, n) for n in sorted(os.listdir(folder))
                 if n.startswith("agent-") and n.endswith(".jsonl")]
    except OSError:
        pass
    session_id = os.path.basename(stem)
    here = os.path.dirname(path) or "."
    try:
        siblings = sorted(n for n in os.listdir(here) if n.startswith("agent-") and n.endswith(".jsonl"))
    except OSError:
        siblings = []
    needle = f'"sessionId":"{session_id}"'.encode()
    for name in siblings:
        sibling = os.path.join(here, name)
        try:
            with open(sibling, "rb") as handle:
                head = handle.readline(1 << 20).replace(b'": "', b'":"')
        except OSError:
            continue
        if needle in head:
            found.append(sibling)
    return found


def analyse(paths: list[str], args: argparse.Namespace, *, subagents: bool = True) -> list["FileResult"]:
    # The cyclic collector paused over the analysis' imports too (analyze_file pauses it
    # for the reading): loading modules makes no garbage for it to find. Frozen at the end
    # (gc_pause): what was made while paused and is still alive (the modules, the results)
    # lives until the command ends, and the collections after the pause, the interpreter's
    # at exit among them, would scan all of it again for nothing (dense50's first 2,000
    # lines: 850.7 M -> 827.7 M instructions).
    with cyclic_gc_paused(freeze=True):
        return _analyse(paths, args, subagents)


def _analyse(paths: list[str], args: argparse.Namespace, subagents: bool) -> list["FileResult"]:
    from ctxscope.report.analysis import analyze_file

    options = options_from(args)
    results = []
    for path in transcript_paths(paths, subagents=subagents):
        progress = _progress_bar(path)
        result = analyze_file(path, format=args.format, tokenizer=args.tokenizer, options=options,
                              progress=progress)
        if progress is not None:
            sys.stderr.write("\r\x1b[K")
        report_problems(result)
        results.append(result)
    return results


def report_problems(result: "FileResult") -> None:
    for problem in result.problems[:MAX_PROBLEMS_SHOWN]:
        print_problem(result.path, problem)
    if len(result.problems) > MAX_PROBLEMS_SHOWN:
        print(f"ctxscope: {result.path}: {len(result.problems) - MAX_PROBLEMS_SHOWN} more problems not shown",
              file=sys.stderr)


def _progress_bar(path: str) -> Callable[[int, int], None] | None:
    """A one-line bar on stderr for long inputs, only when stderr is a terminal."""
    try:
        if not sys.stderr.isatty() or os.path.getsize(path) < PROGRESS_MIN_BYTES:
            return None
    except OSError:
        return None
    start = time.monotonic()
    name = os.path.basename(path)[:30]
    last_percent = [-1]

    def show(done: int, total: int) -> None:
        share = done / total if total else 1.0
        # Redraw only when the percentage moves: the reader reports far more
        # often than a terminal needs (hundreds of writes for one file).
        percent = int(share * 100)
        if percent == last_percent[0]:
            return
        last_percent[0] = percent
        filled = int(share * 30)
        sys.stderr.write(f"\r{name} [{'#' * filled}{'.' * (30 - filled)}] {share:4.0%} "
                         f"{time.monotonic() - start:5.1f}s")
        sys.stderr.flush()

    return show


def run(args: argparse.Namespace) -> int:
    if args.html and not args.output:
        raise UserError("--html writes a file: add -o report.html")
    check_ratio(args.fail_over_ratio)
    if args.top < 1:
        raise UserError("--top must be at least 1")
    results = analyse(args.files, args, subagents=not args.no_subagents)
    sessions = [s for r in results for s in r.sessions if s.rows]
    # SPEC section 7: a local report file holds no text of the session unless asked.
    if args.redact or (args.output and not args.show_references):
        for session in sessions:
            if session.waste is not None:
                for finding in session.waste.findings:
                    finding.reference = redact(finding.reference)
            if session.session_waste is not None:
                for item in session.session_waste.findings:
                    item.reference = redact(item.reference)
            # Part paths name rules files and skills by the name the session gave them.
            session.parts = {redact_part(p): v for p, v in session.parts.items()}
            for _, _, _, addition in session.additions:  # an item id may name a file
                addition.item = redact(addition.item)
    if args.html:
        from ctxscope.report import html as html_report

        _write(args.output, html_report.render(results))
    if args.json:
        from ctxscope.report.json_report import write_json

        # Written in pieces: a long session's growth rows are never one string (write_json).
        if args.output and not args.html:
            _write_with(args.output, lambda write: write_json(results, write))
        else:
            write_json(results, sys.stdout.write)
    elif not args.html:
        from ctxscope.report import terminal

        terminal.render(results, sys.stdout, top=args.top)
    if not sessions:
        print("ctxscope: no usable calls in " + ", ".join(args.files), file=sys.stderr)
        return EXIT_ERROR
    if args.fail_over_ratio is not None:
        worst = max(sessions, key=lambda s: s.waste_ratio)
        if worst.waste_ratio > args.fail_over_ratio:
            print(f"ctxscope: waste ratio {worst.waste_ratio:.3f} of session {worst.session_id} exceeds "
                  f"{args.fail_over_ratio}", file=sys.stderr)
            return EXIT_THRESHOLD
    return EXIT_OK


# Part names ctxscope itself gives (not taken from the session), kept as they are when redacting.
_OWN_PART_NAMES = frozenset(("CLAUDE.md", "AGENTS.md", "memory", "index", "other", "text", "inferred-prefix"))


def _hash(text: str) -> str:
    import hashlib

    return "#" + hashlib.blake2b(text.encode(), digest_size=6).hexdigest()


def redact(reference: str) -> str:
    """``Read:file_path=src/app.py`` -> ``Read:#<hash>``: the tool stays, its arguments do not.

    A repeated-text finding (``identical rules/<file> text``) has its part redacted.
    """
    tool, sep, rest = reference.partition(":")
    if not sep:
        if reference.startswith("identical ") and reference.endswith(" text"):
            return f"identical {redact_part(reference[len('identical '):-len(' text')])} text"
        return reference
    return f"{tool}:{_hash(rest)}"


def redact_part(part: str) -> str:
    """``rules/notes-for-acme.md`` -> ``rules/#<hash>``: rules files and skills are named by the session."""
    category, sep, rest = part.partition("/")
    if not sep or category not in ("rules", "skills") or rest in _OWN_PART_NAMES:
        return part
    return f"{category}/{_hash(rest)}"


def _write(path: str, text: str) -> None:
    _write_with(path, lambda write: write(text))


def _write_with(path: str, produce: Callable[[Callable[[str], object]], object]) -> None:
    """Call ``produce`` with the write method of ``path``, opened for the owner only."""
    try:
        # Owner-only: reports are local files about someone's sessions (SPEC section 7).
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            produce(handle.write)
    except OSError as exc:
        raise UserError(f"{path}: cannot write: {exc.strerror or exc}") from None
