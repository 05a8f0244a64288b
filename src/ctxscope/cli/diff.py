"""``ctxscope diff BEFORE AFTER``: compare two sessions (composition, growth, waste).

Exit codes as ``analyze``: 0 fine, 2 the AFTER session's waste ratio exceeds
``--fail-over-ratio``, 1 any error.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ctxscope.errors import UserError
from ctxscope.schema import CATEGORIES
from ctxscope.cli import EXIT_ERROR, EXIT_OK, EXIT_THRESHOLD
from ctxscope.cli._common import check_ratio
from ctxscope.cli.analyze import add_common, analyse


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("diff", help="compare the context of two transcripts",
                                   description="Compare two sessions: composition, calls, waste.")
    parser.add_argument("before", metavar="BEFORE")
    parser.add_argument("after", metavar="AFTER")
    add_common(parser)
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    parser.add_argument("--fail-over-ratio", type=float, metavar="R",
                        help="exit 2 when AFTER's waste ratio exceeds R (0-1)")
    parser.set_defaults(handler=run)


def _main_session(path: str, args: argparse.Namespace) -> Any:
    results = analyse([path], args, subagents=False)
    sessions = [s for r in results for s in r.sessions if s.rows and s.parent_session_id is None]
    sessions = sessions or [s for r in results for s in r.sessions if s.rows]
    if not sessions:
        raise UserError(f"{path}: no usable calls")
    return max(sessions, key=lambda s: len(s.rows))


def summary(session: Any) -> dict[str, Any]:
    last = session.last
    return {
        "session_id": session.session_id, "calls": len(session.rows), "compactions": session.compactions,
        "used_tokens": session.used, "peak_tokens": session.peak,
        "categories": {c.value: last.calibrated.get(c, 0) for c in CATEGORIES if last and last.calibrated.get(c)},
        "waste_tokens": session.waste.wasted if session.waste else 0,
        "waste_ratio": round(session.waste_ratio, 6),
        "counting": session.counting, "inference": session.inference,
        "inferred_prefix_tokens": session.inferred_prefix,
    }


def run(args: argparse.Namespace) -> int:
    check_ratio(args.fail_over_ratio)
    before, after = _main_session(args.before, args), _main_session(args.after, args)
    a, b = summary(before), summary(after)
    keys = ("calls", "compactions", "used_tokens", "peak_tokens", "waste_tokens")
    delta = {k: b[k] - a[k] for k in keys}
    cats = sorted(set(a["categories"]) | set(b["categories"]), key=[c.value for c in CATEGORIES].index)
    cat_delta = {c: b["categories"].get(c, 0) - a["categories"].get(c, 0) for c in cats}
    if args.json:
        doc = {"before": a, "after": b, "delta": {**delta, "waste_ratio": round(b["waste_ratio"] - a["waste_ratio"], 6),
                                                  "categories": cat_delta}}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        out = sys.stdout
        for side, data in (("before", a), ("after", b)):
            out.write(f"{side}: counting {data['counting']}; inference {data['inference']}\n")
        out.write(f"{'':<16}{'before':>14}{'after':>14}{'delta':>14}\n")
        for k in keys:
            out.write(f"{k:<16}{a[k]:>14,}{b[k]:>14,}{delta[k]:>+14,}\n")
        out.write(f"{'waste_ratio':<16}{a['waste_ratio']:>14.1%}{b['waste_ratio']:>14.1%}"
                  f"{(b['waste_ratio'] - a['waste_ratio']) * 100:>+11.1f} pp\n")  # a difference of shares: points
        out.write("composition of the last call (calibrated)\n")
        for c in cats:
            out.write(f"  {c:<14}{a['categories'].get(c, 0):>14,}{b['categories'].get(c, 0):>14,}"
                      f"{cat_delta[c]:>+14,}\n")
    if args.fail_over_ratio is not None and b["waste_ratio"] > args.fail_over_ratio:
        print(f"ctxscope: waste ratio {b['waste_ratio']:.3f} of {args.after} exceeds {args.fail_over_ratio}",
              file=sys.stderr)
        return EXIT_THRESHOLD
    return EXIT_OK


__all__ = ["register", "run", "EXIT_ERROR"]
