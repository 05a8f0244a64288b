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

from ctxscope.errors import UserError
from ctxscope.gc_pause import cyclic_gc_paused, process_ends_with_command

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


class _Prefixed(logging.Formatter):
    """Each message ``ctxscope: ``-prefixed once: most of ctxscope's own carry it already (a library
    user's log names where they come from), the SDK's and a few of ours do not."""

    PREFIX = "ctxscope: "

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return text if text.startswith(self.PREFIX) else self.PREFIX + text


class _VersionAction(argparse.Action):
    """``--version``: the installed version, looked up only when asked (package metadata is slow to import)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        from ctxscope import __version__

        sys.stdout.write(f"{parser.prog} {__version__}\n")
        parser.exit()


class _Parser(argparse.ArgumentParser):
    """argparse's parser, its help formatters given the terminal's width.

    argparse makes a formatter for every ``add_argument`` (to check the help text),
    and a formatter without a width imports :mod:`shutil` (with ``bz2`` and ``lzma``)
    for ``shutil.get_terminal_size``: the same width, read here with :mod:`os`.
    Subcommand parsers are of this class too (``add_subparsers`` makes its own kind).
    """

    def _get_formatter(self) -> argparse.HelpFormatter:
        return self.formatter_class(prog=self.prog, width=_help_width())  # type: ignore[call-arg]


def _help_width() -> int:
    """``shutil.get_terminal_size().columns - 2``, as argparse takes it."""
    from ctxscope.config import terminal_columns

    return terminal_columns() - 2


def build_parser(commands: Sequence[str] = COMMANDS) -> argparse.ArgumentParser:
    """The parser with ``commands`` registered (all of them unless a command line names one)."""
    parser = _Parser(
        prog="ctxscope",
        description="Profile the context window of LLM agents: what fills it, and what wastes it.",
    )
    parser.add_argument("--version", action=_VersionAction)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in commands:
        importlib.import_module(f"{__name__}.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    said = logging.StreamHandler()
    said.setFormatter(_Prefixed("%(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[said])
    words = list(sys.argv[1:] if argv is None else argv)
    # A command line that starts with a command needs only that command's module:
    # importing all eight (the store, the watcher, fidelity...) is most of the start-up
    # time of a short `analyze`. Anything else (--help, --version, a typo) gets them all.
    # The command's modules are imported here: their ~10^5 objects are no garbage, and the
    # cyclic collector would scan them several times over while they load (a twentieth of
    # a short `analyze`'s instructions). Back on, as it was, once they are.
    with cyclic_gc_paused():
        parser = build_parser([words[0]] if words and words[0] in COMMANDS else COMMANDS)
    try:
        args = parser.parse_args(words)
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
    # The console script: nothing outlives the command, so what it made may be frozen (gc_pause).
    process_ends_with_command()
    sys.exit(main())
