"""The ``ctxscope`` command: thin over the library.

Each subcommand lives in a module of this package that defines
``register(subparsers)``; the command's handler returns the exit code.
Expected errors (:class:`ctxscope.errors.UserError`) print one line, exit 1.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import Sequence

from ctxscope import __version__
from ctxscope.errors import UserError

# Subcommand modules, in the order `ctxscope --help` lists them.
COMMANDS = (
    "inspect",
    "fidelity",
    "analyze",
    "report",
    "diff",
    "context",
    "replay",
    "watch",
)

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_THRESHOLD = 2


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ctxscope",
        description="Profile the context window of LLM agents: what fills it, and what wastes it.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"{__name__}.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="ctxscope: %(message)s")
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors; ours is 1 (2 means threshold)
        code = exc.code if isinstance(exc.code, int) else EXIT_ERROR
        return EXIT_OK if code == 0 else EXIT_ERROR
    if not getattr(args, "handler", None):
        parser.print_help(sys.stderr)
        return EXIT_ERROR
    try:
        return int(args.handler(args) or EXIT_OK)
    except UserError as exc:
        print(f"ctxscope: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return EXIT_OK


def run() -> None:
    sys.exit(main())
