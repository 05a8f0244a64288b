"""``ctxscope report SESSION --html -o FILE``: ``analyze`` by the name ctxlens users type."""

from __future__ import annotations

import argparse

from ctxscope.cli.analyze import add_parser


def register(subparsers: argparse._SubParsersAction) -> None:
    add_parser(subparsers, "report", "the same as analyze (ctxlens's name): e.g. report SESSION --html -o FILE")
