"""``ctxscope inspect FILE``: the composition of one request body.

FILE is a JSON file holding a request body (OpenAI chat completions, OpenAI
Responses or Anthropic Messages), or a recording ``{"request": ...,
"response": ...}``, whose response's usage gives the reported input (SPEC
section 4) unless ``--reported`` is given. In a JSONL file of recordings,
``FILE:LINE`` picks line LINE (1-based); a JSONL file of one line needs no
``:LINE``.

The file is read through :mod:`ctxscope.core.bounded_input` (regular files only,
``--max-input-mb``, a nesting limit, finite numbers; usage counts whole and
not negative): bad input is one line naming the file and line.

Counting goes through :class:`ctxscope.core.ledger.SessionLedger`, as for live
requests, so the numbers are the ones a span would carry. The composition
includes the provider's framing (:mod:`ctxscope.core.framing`: per-message
overhead, reply priming, hidden prompts in ``overhead``; tool definitions as
the provider renders them in ``tools``; server tools' hidden parts in
``tools/server/<type>``), as the live tracker adds it; ``--no-framing`` shows
the raw content only (tool definitions still as rendered: that is their text).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass
from typing import Any, Mapping

from ctxscope.core import apis

from ctxscope.core import bounded_input
from ctxscope.core import framing as _framing
from ctxscope.errors import InputError, UserError
from ctxscope.core.items import detect_api, items_from_request
from ctxscope.core.ledger import Snapshot
from ctxscope.core.pipeline import CallFacts, SessionAccount
from ctxscope.schema import CATEGORIES, Category
from ctxscope.core.tokens import counter_for

TOP_DEFAULT = 10
_LINE_RE = re.compile(r"^(.*):(\d+)$")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "inspect", help="show what fills one request body, by category and largest parts",
        description="Show the context composition of one request body: tokens per category and "
                    "the largest parts. FILE holds a request body or a recording "
                    "{\"request\": ..., \"response\": ...}; FILE:LINE picks one line of a JSONL file.")
    parser.add_argument("file", metavar="FILE", help="JSON request body or recording; FILE:LINE for JSONL")
    parser.add_argument("--json", action="store_true", help="print the annotation and the parts as JSON")
    parser.add_argument("--tokenizer", choices=("auto", "chars", "tiktoken"), default="auto",
                        help="counting basis (default: auto, tiktoken with a chars/4 fallback)")
    parser.add_argument("--model", help="model to count for (default: the body's model)")
    parser.add_argument("--reported", type=int, metavar="N",
                        help="provider-reported input tokens (default: from the recording's usage)")
    parser.add_argument("--top", type=int, default=TOP_DEFAULT, metavar="K",
                        help=f"how many of the largest parts to list (default {TOP_DEFAULT})")
    parser.add_argument("--max-input-mb", type=float, metavar="MB",
                        help=f"refuse a larger FILE (default {bounded_input.DEFAULT_MAX_INPUT_MB})")
    parser.add_argument("--no-framing", dest="framing", action="store_false",
                        help="raw content only: leave out the provider's framing (per-message overhead, "
                             "reply priming, hidden prompts, server tools' hidden parts)")
    parser.set_defaults(handler=run)


@dataclass
class Loaded:
    """A request body read from a file, with its recorded response when there is one."""

    path: str
    line: int | None
    body: Mapping[str, Any]
    response: Any = None
    text: str | None = None  # the whole file's text (not a JSONL line): to name the line of a bad value


def _parse(path: str, text: str, line: int | None) -> Any:
    return bounded_input.loads(text, path, line, what="JSON (expected a request body or a recording)")


def load(spec: str, *, max_input_mb: float | None = None) -> Loaded:
    """Read ``FILE`` or ``FILE:LINE`` (see the module docstring)."""
    path, line = spec, None
    if not os.path.exists(spec):
        match = _LINE_RE.match(spec)
        if match and os.path.exists(match.group(1)):
            path, line = match.group(1), int(match.group(2))
    if not os.path.lexists(path):
        raise UserError(f"{spec}: no such file")
    text = bounded_input.read_text(path, bounded_input.max_bytes(max_input_mb))
    if line is not None:
        lines = text.splitlines()
        if line < 1 or line > len(lines):
            raise InputError(path, f"no line {line}: the file has {len(lines)} lines", line)
        if not lines[line - 1].strip():
            raise InputError(path, "empty line: expected a request body or a recording", line)
        data = _parse(path, lines[line - 1], line)
    else:
        try:
            data = _parse(path, text, None)
        except bounded_input.ExtraDataError:
            numbered = [n for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
            if len(numbered) > 1:
                raise UserError(f"{path}: holds {len(numbered)} JSON lines; pick one with {path}:LINE") from None
            raise
    if not isinstance(data, dict):
        raise InputError(path, f"expected a JSON object, got {type(data).__name__}", line)
    if "request" in data:
        body, response = data["request"], data.get("response")
        if not isinstance(body, dict):
            raise InputError(path, "'request' is not a JSON object", line)
        return Loaded(path, line, body, response, text if line is None else None)
    return Loaded(path, line, data, text=text if line is None else None)


# The usage counts a reported input is made of (SPEC section 4), in any API's usage.
_COUNT_KEYS = ("prompt_tokens", "input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def _line_of(text: str | None, key: str, value: Any) -> int | None:
    """The line of ``"key": value`` in a whole file's text (where a bad count is), else None."""
    if text is None:
        return None
    try:
        literal = json.dumps(value)
    except (TypeError, ValueError):
        return None
    match = re.search(rf'"{re.escape(key)}"\s*:\s*{re.escape(literal)}', text)
    return text.count("\n", 0, match.start()) + 1 if match else None


def reported_input(api: str, response: Any, *, path: str = "-", line: int | None = None,
                   text: str | None = None) -> int | None:
    """The provider-reported input of a recorded response (SPEC section 4, :mod:`ctxscope.core.apis`), else None.

    A count that is not a whole, non-negative number is a one-line InputError
    naming ``path`` and ``line`` (found in the file's ``text`` when not given).
    """
    usage = response.get("usage") if isinstance(response, dict) else None
    if not isinstance(usage, dict):
        return None
    iterations = usage.get("iterations")
    for where, counts in (("usage", usage), *((f"usage.iterations[{i}]", it) for i, it in
                                              enumerate(iterations if isinstance(iterations, list) else ())
                                              if isinstance(it, dict))):
        for key in _COUNT_KEYS:
            value = counts.get(key)
            if value is not None:
                bounded_input.count(value, path, line if line is not None else _line_of(text, key, value),
                                    f"{where}.{key}")
    return apis.reported_input(api, response)


def inspect(loaded: Loaded, *, tokenizer: str = "auto", model: str | None = None,
            reported: int | None = None, framing: bool = True) -> tuple[str, Snapshot]:
    """``(api, snapshot)`` of a loaded body, counted by a fresh ledger (framing included unless ``framing=False``)."""
    if model is None:
        model = loaded.body.get("model") if isinstance(loaded.body.get("model"), str) else None
    try:
        api = detect_api(loaded.body)
        # --model picks the media rules too (an image's tokens depend on the model family).
        body = {**loaded.body, "model": model} if model and model != loaded.body.get("model") else loaded.body
        items = items_from_request(body, api)
        if framing:
            # The ledger's counter for this model, so framing is counted on the same basis.
            items += _framing.framing_items(loaded.body, api, counter_for(model, tokenizer).count, model=model)
    except ValueError as exc:
        raise InputError(loaded.path, str(exc), loaded.line) from None
    except (TypeError, AttributeError, KeyError) as exc:
        raise InputError(loaded.path, f"not a usable request body ({type(exc).__name__}: {exc})",
                         loaded.line) from None
    if reported is None:
        reported = reported_input(api, loaded.response, path=loaded.path, line=loaded.line, text=loaded.text)
    # The accounting every path uses (limits included); proxy_encoding: Claude's proxy-encoding
    # item, as the live tracker adds it with framing on. One body: no waste to follow over calls.
    account = SessionAccount("inspect", tokenizer=tokenizer, proxy_encoding=framing, waste=False)
    snapshot = account.observe(CallFacts(items, model=model, provider=apis.get(api).provider, reported=reported))
    return api, snapshot


def _largest(snapshot: Snapshot, top: int) -> list[dict[str, Any]]:
    """The largest parts, each with its largest item's label and the number of items."""
    by_part: dict[str, dict[str, Any]] = {}
    for item in snapshot.items:
        entry = by_part.setdefault(item.part, {"part": item.part, "tokens": 0, "items": 0,
                                               "label": None, "_max": -1})
        entry["tokens"] += item.tokens
        entry["items"] += 1
        if item.tokens > entry["_max"] and item.label:
            entry["_max"], entry["label"] = item.tokens, item.label
    rows = sorted(by_part.values(), key=lambda e: (-e["tokens"], e["part"]))[:max(0, top)]
    for row in rows:
        row.pop("_max")
    return rows


def document(api: str, loaded: Loaded, snapshot: Snapshot, top: int, *, framing: bool = True) -> dict[str, Any]:
    """The ``--json`` document: file, api, framing, annotation, parts, largest parts, calibrated view."""
    doc: dict[str, Any] = {
        "file": loaded.path if loaded.line is None else f"{loaded.path}:{loaded.line}",
        "api": api,
        "framing": framing,
        "annotation": snapshot.annotation.to_json(),
        "parts": dict(sorted(snapshot.parts.items(), key=lambda kv: (-kv[1], kv[0]))),
        "largest": _largest(snapshot, top),
    }
    if snapshot.measured:
        doc["calibrated"] = {c.value: v for c, v in snapshot.calibrated().items()}
    return doc


def table(api: str, loaded: Loaded, snapshot: Snapshot, top: int) -> str:
    """The plain report: categories with tokens and share, then the largest parts."""
    ann = snapshot.annotation
    total = ann.estimated_tokens
    where = loaded.path if loaded.line is None else f"{loaded.path}:{loaded.line}"
    lines = [f"{where}  {api}  model {ann.model or '-'}  basis {ann.basis}  {len(snapshot.items)} items", ""]
    lines.append(f"{'category':<14}{'tokens':>10}{'share':>8}")
    for category in CATEGORIES:
        value = ann.categories.get(category)
        if value is None or category is Category.UNATTRIBUTED:
            continue
        share = value / total if total else 0.0
        lines.append(f"{category.value:<14}{value:>10,}{share:>8.1%}")
    lines.append(f"{'estimated':<14}{total:>10,}")
    if ann.reported_tokens is not None:
        unattributed = snapshot.calibrated().get(Category.UNATTRIBUTED, 0)
        lines.append(f"{'reported':<14}{ann.reported_tokens:>10,}   calibration factor "
                     f"{ann.calibration_factor:.3f}, unattributed {unattributed:,}")
    rows = _largest(snapshot, top)
    if rows:
        width = max(len(r["part"]) for r in rows)
        lines += ["", f"{'largest parts':<{width}}  {'label':<24}{'tokens':>10}{'items':>7}"]
        for row in rows:
            label = (row["label"] or "-")[:24]
            lines.append(f"{row['part']:<{width}}  {label:<24}{row['tokens']:>10,}{row['items']:>7}")
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    if args.reported is not None and args.reported < 0:
        raise UserError(f"--reported must be 0 or more, got {args.reported}")
    loaded = load(args.file, max_input_mb=args.max_input_mb)
    api, snapshot = inspect(loaded, tokenizer=args.tokenizer, model=args.model, reported=args.reported,
                            framing=args.framing)
    if args.json:
        sys.stdout.write(json.dumps(document(api, loaded, snapshot, args.top, framing=args.framing), indent=2) + "\n")
    else:
        sys.stdout.write(table(api, loaded, snapshot, args.top))
    return 0
