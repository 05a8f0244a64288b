"""``ctxscope fidelity FILE...``: how close each basis comes to the provider's count."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .. import fidelity

HELP = "error of each counting basis against the provider-reported input, per model"
DESCRIPTION = """\
Reads request/response recordings (JSON lines: {"request": body, "response": answer},
optionally "uri"), estimates each request's input with chars/4 and tiktoken, raw (text
and tool JSON as sent), framed (with the provider's framing and tool rendering), and
self-calibrated (corrected by what was learned from the earlier recordings of the same
model and tool set, replayed in order), and prints the median absolute error against
the reported input per model, with the count. Requests offering server tools, and
those during which the provider ran one, are reported apart."""

# The targets of docs/fidelity.md: (label, model prefix, provider, section, stage, limit %).
TARGETS: tuple[tuple[str, str, str, str, str, float], ...] = (
    ("gpt-4o family, framed", "gpt-4o", "openai", fidelity.SECTION_CLIENT, "framed", 5.0),
    ("gpt-5 family, framed", "gpt-5", "openai", fidelity.SECTION_CLIENT, "framed", 10.0),
    ("Claude, client tools, framed", "claude", "anthropic", fidelity.SECTION_CLIENT, "framed", 15.0),
    ("Claude, server tools, self-calibrated", "claude", "anthropic", fidelity.SECTION_SERVER, "selfcal", 5.0),
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("fidelity", help=HELP, description=DESCRIPTION,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", metavar="FILE", help="JSON-lines recording files")
    parser.add_argument("--basis", action="append", choices=fidelity.BASES,
                        help="basis to report (repeatable; default: all)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--check", action="store_true",
                        help="exit 2 when a target of docs/fidelity.md is missed (tiktoken basis)")
    parser.set_defaults(handler=run)


def _targets(report: fidelity.Report) -> list[dict[str, Any]]:
    out = []
    for label, prefix, provider, section, stage, limit in TARGETS:
        median, count = fidelity.family_median(report, prefix, "tiktoken", stage, section=section, provider=provider)
        out.append({"target": label, "median_abs_error_pct": median, "count": count, "limit_pct": limit,
                    "met": None if median is None else median <= limit})
    return out


def to_json(report: fidelity.Report, bases: list[str]) -> dict[str, Any]:
    rows = []
    for row in report.ordered():
        rows.append({
            "model": row.group, "provider": row.provider, "section": row.section,
            "figures": {f"{b}/{s}": {"median_abs_error_pct": row.cells[(b, s)].median,
                                      "count": row.cells[(b, s)].count}
                        for b in bases for s in fidelity.STAGES if (b, s) in row.cells},
        })
    learned = {b: [c.to_json() for c in report.learned.get(b, [])] for b in bases}
    return {"rows": rows, "targets": _targets(report), "skipped": report.skipped, "learned": learned}


def run(args: argparse.Namespace) -> int:
    bases = list(dict.fromkeys(args.basis or fidelity.BASES))
    report = fidelity.evaluate_files(args.files, bases)
    targets = _targets(report)
    if args.json:
        json.dump(to_json(report, bases), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write("Median absolute error of the estimate against the reported input (count).\n\n")
        sys.stdout.write(fidelity.render_markdown(report, bases))
        learned = [c for c in report.learned.get(bases[-1], []) if c.tools_key == "*"]
        if learned:
            sys.stdout.write(f"\nLearned corrections per model ({bases[-1]}, all tool sets):\n\n")
            for c in learned:
                shape = {"offset": f"{c.offset:+.0f} tokens", "ratio": f"x {c.ratio:.3f}",
                         "affine": f"x {c.ratio:.3f} {c.offset:+.0f} tokens"}[c.mode]
                sys.stdout.write(f"- {c.model}: {c.mode} {shape} from {c.pairs} calls\n")
        sys.stdout.write("\nTargets (tiktoken):\n\n")
        for target in targets:
            median = target["median_abs_error_pct"]
            figure = "-" if median is None else f"{median:.1f}%"
            state = "n/a" if target["met"] is None else ("met" if target["met"] else "MISSED")
            sys.stdout.write(f"- {target['target']}: {figure} over {target['count']} "
                             f"(limit {target['limit_pct']:g}%): {state}\n")
    if args.check and any(t["met"] is False for t in targets):
        return 2
    return 0
