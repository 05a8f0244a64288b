"""Measurement fidelity: how close each counting basis comes to what the provider counted.

Reads request/response recordings (JSON lines of ``{"request": body, "response":
answer}``, the shape of ``shared/corpus/api``), estimates every request's input
under each basis (``chars/4``, tiktoken) three ways:

- **raw**: the text of the messages plus the tool definitions' JSON, as they
  are sent;
- **framed**: the same with the provider's framing (:mod:`ctxscope.core.framing`):
  per-message tokens, tools as the provider renders them, hidden prompts,
  and for Claude the proxy-encoding item (Claude's tokenizer against the
  o200k_base proxy, by a published ratio per kind of content);
- **self-calibrated**: the framed estimate corrected by what
  :class:`ctxscope.core.learned_correction.SelfCalibrator` learned from the *earlier*
  recordings of the same model and tool set (replayed in file order), so the
  figure is the one ctxscope would have shown before the usage arrived;

and reports, per model, the median absolute percentage error against the
reported input, with the count. Requests that offer server tools are grouped
apart (their hidden part is unknown until learned).

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence
from urllib.parse import urlparse

from ctxscope.core import apis
from ctxscope.core import framing
from ctxscope.errors import InputError, UserError
from ctxscope.core.framing import API_ANTHROPIC, API_OPENAI_CHAT, API_OPENAI_RESPONSES
from ctxscope.core.items import detect_api as items_detect_api
from ctxscope.core.items import items_from_request
from ctxscope.core.ledger import Snapshot
from ctxscope.core.pipeline import CallFacts, SessionAccount
from ctxscope.schema import Category, Item
from ctxscope.core.learned_correction import SelfCalibrator
from ctxscope.core.tokens import Counter, counter_for

BASES = ("chars", "tiktoken")
SECTION_CLIENT = "client"
SECTION_SERVER = "server"
SECTION_LOOP = "loop"
SECTIONS = (SECTION_CLIENT, SECTION_SERVER, SECTION_LOOP)
_SECTION_TITLE = {
    SECTION_CLIENT: "Requests without server tools (text, client tools, media)",
    SECTION_SERVER: "Requests offering server tools (hidden part tools/server/<type> learned; "
                    "self-cal = later calls with the same model and tool set)",
    SECTION_LOOP: "Requests during which the provider ran a server tool (reported input includes "
                  "the tool's results and several samplings: not learned from)",
}
STAGES = ("raw", "framed", "selfcal")

# Kinds of request for the family table: what the provider had to bill beyond text.
KIND_TEXT = "text"
KIND_TOOLS = "tools"
KIND_MEDIA = "media"
KIND_SERVER = "server tools"
KIND_LOOP = "server-tool loop"
KINDS = (KIND_TEXT, KIND_TOOLS, KIND_MEDIA, KIND_SERVER, KIND_LOOP)
# Families of the targets (docs/fidelity.md): model name prefixes, first match wins.
FAMILY_OTHER = "other"
_OPENAI_FAMILIES = (("gpt-4o", "gpt-4o"), ("chatgpt-4o", "gpt-4o"), ("gpt-4.1", "gpt-4.1"),
                    ("gpt-5", "gpt-5"), ("o1", "o-series"), ("o3", "o-series"), ("o4", "o-series"))
# Sources of fixed tokens that are not media (encrypted reasoning, framing).
_NOT_MEDIA = frozenset(("thinking", "summary", "framing"))

# Hosts whose models are the provider's own: a recording through any other
# host (a router, a compatible endpoint) is grouped as "<model> via <host>".
_NATIVE_HOSTS = {"api.openai.com": "openai", "api.anthropic.com": "anthropic"}


# ---------------------------------------------------------------------------
# Recordings
# ---------------------------------------------------------------------------

@dataclass(slots=True)
class Recording:
    path: str
    line: int
    api: str
    model: str
    host: str
    body: Mapping[str, Any]
    reported: int | None
    server_tools: bool
    tools_key: str
    # The provider ran a server tool inside this call (web search, code execution):
    # its reported input then sums several samplings, with the tool's results.
    server_loop: bool = False

    @property
    def section(self) -> str:
        if self.server_loop:
            return SECTION_LOOP
        return SECTION_SERVER if self.server_tools else SECTION_CLIENT

    def family(self) -> str:
        """The model family of the targets: gpt-4o, gpt-4.1, gpt-5, o-series, claude-4.5+, claude-<4.5, other.

        A recording through a router or a compatible host is ``other``: its count
        follows that host's tokenizer and framing.
        """
        if self.host and self.host not in _NATIVE_HOSTS:
            return FAMILY_OTHER
        name = self.model.lower().rsplit("/", 1)[-1]
        for prefix, family in _OPENAI_FAMILIES:
            if name.startswith(prefix):
                return family
        if framing.is_claude(name):
            return "claude-4.5+" if framing.claude_version(name) >= (4, 5) else "claude-<4.5"
        return FAMILY_OTHER

    @property
    def group(self) -> str:
        """Model label of the report: the model, with the host when it is not the model's own provider."""
        if self.host in _NATIVE_HOSTS or not self.host:
            return self.model
        return f"{self.model} via {self.host}"


def detect_api(body: Mapping[str, Any], uri: str = "") -> str:
    """Which request shape a body has: the recording's URI where it says, else the body's structure.

    ValueError when the body is none of the three shapes (:func:`ctxscope.core.items.detect_api`).
    """
    path = urlparse(uri).path
    if path.endswith("/messages") or "anthropic" in urlparse(uri).netloc:
        return API_ANTHROPIC
    if path.endswith("/responses"):
        return API_OPENAI_RESPONSES
    if path.endswith("/chat/completions") and "messages" in body:
        return API_OPENAI_CHAT
    return items_detect_api(body)


def reported_input(response: Mapping[str, Any] | None, api: str) -> int | None:
    """SPEC section 4 reported input of a response; None when it has no usage.

    The rule is :func:`ctxscope.core.apis.reported_input`.
    """
    return apis.reported_input(api, response) if isinstance(response, Mapping) else None


def ran_server_tool(response: Mapping[str, Any] | None) -> bool:
    """Whether the provider ran a server tool within the call (its reported input then sums a loop).

    An Anthropic usage with ``iterations`` is not a loop here: :func:`reported_input`
    takes the first sampling's input from it.
    """
    if not isinstance(response, Mapping):
        return False
    usage = response.get("usage")
    if isinstance(usage, Mapping) and isinstance(usage.get("iterations"), list) and usage["iterations"]:
        return False
    if isinstance(usage, Mapping) and isinstance(usage.get("server_tool_use"), Mapping):
        if any(isinstance(v, int) and v > 0 for v in usage["server_tool_use"].values()):
            return True
    content = response.get("content")
    return any(isinstance(b, Mapping) and b.get("type") == "server_tool_use" for b in content or ()) \
        if isinstance(content, list) else False


def read_recordings(paths: Sequence[str | Path]) -> Iterator[Recording]:
    """Recordings of JSON-lines files, in order; a bad line raises :class:`InputError` naming file and line."""
    for path in paths:
        path = Path(path)
        try:
            handle = path.open("r", encoding="utf-8")
        except OSError as exc:
            raise UserError(f"{path}: cannot read ({exc.strerror or exc}); give a JSON-lines recording file") from None
        with handle:
            for number, text in enumerate(handle, 1):
                if not text.strip():
                    continue
                try:
                    record = json.loads(text)
                except json.JSONDecodeError as exc:
                    raise InputError(str(path), f"not JSON ({exc.msg}); expected one {{request, response}} a line",
                                     number) from None
                if not isinstance(record, Mapping) or not isinstance(record.get("request"), Mapping):
                    raise InputError(str(path), "no 'request' object; expected one {request, response} a line", number)
                body = record["request"]
                uri = str(record.get("uri") or "")
                try:
                    api = detect_api(body, uri)
                except ValueError as exc:
                    raise InputError(str(path), str(exc), number) from None
                yield Recording(
                    path=str(path), line=number, api=api, model=str(body.get("model") or "unknown"),
                    host=urlparse(uri).netloc, body=body, reported=reported_input(record.get("response"), api),
                    server_tools=framing.has_server_tools(body, api), tools_key=framing.tools_key(body),
                    server_loop=ran_server_tool(record.get("response")))


# ---------------------------------------------------------------------------
# Content of a request: the items ctxscope extracts live (ctxscope.core.items)
# ---------------------------------------------------------------------------

def counted_items(body: Mapping[str, Any], api: str, counter: Counter) -> list[tuple[Item, int]]:
    """A request's items with their counts under ``counter`` (media by their provider formula).

    The same extraction as the live instrumentation (:func:`ctxscope.core.items.items_from_request`),
    so the figures are those ctxscope shows; tool definitions are rendered as the provider
    writes them into the prompt.
    """
    return [(item, item.fixed_tokens if item.fixed_tokens is not None else counter.count(item.text))
            for item in items_from_request(body, api)]


def content_tokens(body: Mapping[str, Any], api: str, counter: Counter) -> int:
    """Tokens of a request's items other than tool definitions (system, messages, media)."""
    return sum(tokens for item, tokens in counted_items(body, api, counter) if item.category is not Category.TOOLS)


def _tools(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [t for t in body.get("tools") or () if isinstance(t, Mapping)]


def raw_tool_tokens(body: Mapping[str, Any], counter: Counter) -> int:
    """Tool definitions counted as the JSON sent (what a naive estimate does)."""
    return sum(counter.count(json.dumps(t, ensure_ascii=False)) for t in _tools(body))


def framing_tokens(body: Mapping[str, Any], api: str, counter: Counter, model: str | None = None) -> int:
    return sum(i.fixed_tokens or 0 for i in framing.framing_items(body, api, counter.count, model=model))


@dataclass(frozen=True, slots=True)
class Estimate:
    raw: int
    framed: int
    media: bool = False  # an image, a document or audio among the items (billed by a media rule)
    # The call's accounting (ctxscope.core.pipeline): window, limits and reported input as every path has them.
    snapshot: Snapshot | None = field(default=None, compare=False, repr=False)


def is_media(item: Item) -> bool:
    """Whether an item is media counted by a provider rule (image, document pages, audio)."""
    return (item.fixed_tokens is not None and item.source_kind not in _NOT_MEDIA
            and item.category is not Category.OVERHEAD)


def estimate(body: Mapping[str, Any], api: str, counter: Counter, model: str | None = None,
             reported: int | None = None) -> Estimate:
    """Raw and framed estimates of one request under one counter.

    Framed: the call's estimate as every other path makes it, through
    :class:`ctxscope.core.pipeline.SessionAccount` (the accounting of ``inspect``,
    ``analyze`` and the transcripts): the items (tools as the provider renders
    them), the framing items, and for Claude the ledger's proxy-encoding item
    (docs/fidelity.md, "For the live path"). Raw: the same items' counts with the
    tool definitions as the JSON sent instead.
    """
    items = items_from_request(body, api)
    framed_items = [*items, *framing.framing_items(body, api, counter.count, model=model)]
    account = SessionAccount("fidelity", counter=counter, proxy_encoding=True, waste=False)
    snapshot = account.observe(CallFacts(framed_items, model=model, provider=apis.get(api).provider,
                                         reported=reported))
    # The ledger counted every item (item.tokens): the raw estimate reads the same counts.
    content = sum(item.tokens for item in items if item.category is not Category.TOOLS)
    return Estimate(raw=content + raw_tool_tokens(body, counter), framed=snapshot.annotation.estimated_tokens,
                    media=any(is_media(item) for item in items), snapshot=snapshot)


# ---------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------

@dataclass(slots=True)
class Cell:
    """Absolute percentage errors of one (group, basis, stage)."""

    errors: list[float] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.errors)

    @property
    def median(self) -> float | None:
        return statistics.median(self.errors) if self.errors else None

    @property
    def p90(self) -> float | None:
        """The 90th percentile (inclusive method: within the values seen; the one value when alone)."""
        if not self.errors:
            return None
        if len(self.errors) == 1:
            return self.errors[0]
        return statistics.quantiles(self.errors, n=10, method="inclusive")[-1]


@dataclass(slots=True)
class Row:
    group: str
    provider: str
    section: str
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)

    def cell(self, basis: str, stage: str) -> Cell:
        return self.cells.setdefault((basis, stage), Cell())


@dataclass(slots=True)
class Report:
    rows: dict[tuple[str, str], Row] = field(default_factory=dict)
    # Per (model family, kind of request): the same cells (Row.section holds the kind).
    kinds: dict[tuple[str, str], Row] = field(default_factory=dict)
    skipped: int = 0  # recordings without a reported input
    learned: dict[str, list[Any]] = field(default_factory=dict)  # basis -> corrections

    def row(self, recording: Recording) -> Row:
        key = (recording.group, recording.section)
        return self.rows.setdefault(key, Row(recording.group, apis.get(recording.api).provider, recording.section))

    def kind_row(self, recording: Recording, kind: str) -> Row:
        family = recording.family()
        return self.kinds.setdefault((family, kind), Row(family, apis.get(recording.api).provider, kind))

    def ordered_kinds(self) -> list[Row]:
        return sorted(self.kinds.values(), key=lambda r: (r.provider, r.group == FAMILY_OTHER, r.group,
                                                          KINDS.index(r.section)))

    def ordered(self) -> list[Row]:
        return sorted(self.rows.values(), key=lambda r: (SECTIONS.index(r.section), r.provider, r.group))


def _counter(basis: str, model: str) -> Counter:
    return counter_for(model, "chars" if basis == "chars" else "tiktoken")


def _error(estimated: int, reported: int) -> float:
    return abs(estimated - reported) / reported * 100.0


def evaluate(recordings: Iterable[Recording], bases: Sequence[str] = BASES) -> Report:
    """Errors of every basis and stage per model, self-calibration replayed in order."""
    report = Report()
    calibrators = {basis: SelfCalibrator() for basis in bases}
    for recording in recordings:
        if not recording.reported:
            report.skipped += 1
            continue
        row = report.row(recording)
        kind_row = None
        for basis in bases:
            counter = _counter(basis, recording.model)
            try:
                est = estimate(recording.body, recording.api, counter, recording.model, recording.reported)
            except (ValueError, TypeError, AttributeError, KeyError) as exc:
                raise InputError(recording.path, f"not a usable {recording.api} request ({exc})",
                                 recording.line) from None
            if kind_row is None:
                kind_row = report.kind_row(recording, _kind(recording, est))
            for target in (row, kind_row):
                target.cell(basis, "raw").errors.append(_error(est.raw, recording.reported))
                target.cell(basis, "framed").errors.append(_error(est.framed, recording.reported))
            if recording.server_loop:
                continue  # its residual is the loop's work, not a stable hidden part
            calibrator = calibrators[basis]
            # Learn per model label (host included) and tool set: what the provider adds
            # differs between a model's own API and a router in front of it.
            correction = calibrator.correction(recording.group, recording.tools_key)
            if correction is not None and correction.tools_key == recording.tools_key:
                error = _error(correction.apply(est.framed), recording.reported)
                row.cell(basis, "selfcal").errors.append(error)
                kind_row.cell(basis, "selfcal").errors.append(error)
            calibrator.learn(recording.group, recording.tools_key, est.framed, recording.reported)
    report.learned = {basis: calibrators[basis].corrections() for basis in bases}
    return report


def _kind(recording: Recording, est: Estimate) -> str:
    """The kind of a request: a server-tool loop, server tools offered, media, client tools, else text."""
    if recording.server_loop:
        return KIND_LOOP
    if recording.server_tools:
        return KIND_SERVER
    if est.media:
        return KIND_MEDIA
    return KIND_TOOLS if framing.tools_key(recording.body) != "-" else KIND_TEXT


def evaluate_files(paths: Sequence[str | Path], bases: Sequence[str] = BASES) -> Report:
    return evaluate(read_recordings(paths), bases)


# ---------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------

_BASIS_LABEL = {"chars": "chars/4", "tiktoken": "tiktoken"}
_STAGE_LABEL = {"raw": "raw", "framed": "framed", "selfcal": "self-cal"}


def _fmt(cell: Cell | None) -> str:
    if cell is None or cell.median is None:
        return "-"
    return f"{cell.median:.1f}% ({cell.count})"


def render_markdown(report: Report, bases: Sequence[str] = BASES) -> str:
    """The report as Markdown tables: median absolute % error (count) per model, basis and stage."""
    header = ["model", "requests"] + [f"{_BASIS_LABEL[b]} {_STAGE_LABEL[s]}" for b in bases for s in STAGES]
    lines: list[str] = []
    for section in SECTIONS:
        rows = [r for r in report.ordered() if r.section == section]
        if not rows:
            continue
        lines.append("")
        lines.append(_SECTION_TITLE[section])
        lines.append("")
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join("---" for _ in header) + "|")
        for row in rows:
            count = row.cell(bases[0], "raw").count
            cells = [_fmt(row.cells.get((b, s))) for b in bases for s in STAGES]
            lines.append("| " + " | ".join([row.group, str(count)] + cells) + " |")
    if report.skipped:
        lines.append("")
        lines.append(f"{report.skipped} recordings without reported usage skipped.")
    return "\n".join(lines).lstrip("\n") + "\n"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}%"


def render_kinds_markdown(report: Report, bases: Sequence[str] = BASES) -> str:
    """Per model family and kind of request: median and p90 absolute % error before and after self-calibration."""
    header = ["family", "kind", "requests"]
    for basis in bases:
        label = _BASIS_LABEL[basis]
        header += [f"{label} framed median", f"{label} framed p90", f"{label} self-cal median (n)",
                   f"{label} self-cal p90"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in report.ordered_kinds():
        cells = [row.group, row.section, str(row.cell(bases[0], "framed").count)]
        for basis in bases:
            framed, selfcal = row.cells.get((basis, "framed"), Cell()), row.cells.get((basis, "selfcal"), Cell())
            cells += [_pct(framed.median), _pct(framed.p90),
                      "-" if selfcal.median is None else f"{selfcal.median:.1f}% ({selfcal.count})",
                      _pct(selfcal.p90)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def kinds_median(report: Report, families: Sequence[str], kinds: Sequence[str], basis: str,
                 stage: str) -> tuple[float | None, int]:
    """Median absolute % error over the given families and kinds of request."""
    errors: list[float] = []
    for (family, kind), row in report.kinds.items():
        if family in families and kind in kinds:
            errors.extend(row.cell(basis, stage).errors)
    return (statistics.median(errors) if errors else None), len(errors)


def family_median(report: Report, prefix: str, basis: str, stage: str, *, section: str = SECTION_CLIENT,
                  provider: str | None = None) -> tuple[float | None, int]:
    """Median absolute % error over every row whose model starts with ``prefix`` (own host only)."""
    errors: list[float] = []
    for row in report.rows.values():
        if row.section != section or " via " in row.group:
            continue
        if provider is not None and row.provider != provider:
            continue
        if row.group.startswith(prefix):
            errors.extend(row.cell(basis, stage).errors)
    return (statistics.median(errors) if errors else None), len(errors)
