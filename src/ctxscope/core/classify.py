"""What a piece of context text is: rules, skills, environment, summaries.

Shared by the request extractor (:mod:`ctxscope.core.items`) and the transcript
readers. The API is small:

- :func:`classify_text` splits a text into :class:`Segment` s, each with the
  part path it belongs to (``rules/<file>``, ``skills/<name>``,
  ``environment``, ``summaries``) or ``None`` for "ordinary text of this
  role" (the caller's default part). The segments' texts concatenate to the
  input exactly, so nothing is lost or counted twice.
- :func:`tool_part` gives a tool's part path (``tools/<name>`` or
  ``tools/mcp/<server>/<name>``); :func:`mcp_name` splits an MCP tool name.
- :func:`tool_reference` gives the normalised reference of a tool call for
  waste analysis (SPEC section 8), e.g. ``Read:file_path=src/app.py``.

Patterns come from real agent traffic (Claude Code, Codex): see
docs/items.md for examples. Classification runs on every new item, so the
common case (ordinary text) is decided by a few substring tests before any
regular expression runs.

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

from ctxscope._record import FrozenRecord
from ctxscope._blake2b import blake2b
from ctxscope._lazy_pattern import lazy_pattern
import json
import posixpath
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

ENVIRONMENT = "environment"
SUMMARIES = "summaries"
SKILLS_INDEX = "skills/index"

# Roles whose text is classified. Assistant text is the model's own words, and
# a tool result that reads CLAUDE.md is a result, not injected rules: only
# reminders the harness appends to a result are split off it.
_FULL_ROLES = frozenset(("user", "system", "developer"))


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # FrozenRecord: see ctxscope._record
class Segment(FrozenRecord):
    """A slice of a text: ``part`` is its part path, or None for the role's default."""

    text: str
    part: str | None = None
    label: str | None = None


# ---------------------------------------------------------------------------
# Patterns (compiled at their first use, ctxscope._lazy_pattern: most texts reach none;
# see docs/items.md for the real texts behind them)
# ---------------------------------------------------------------------------

# Region tags whose whole extent (open tag to close tag) is one thing.
_REGION_RE = lazy_pattern(
    r"<(system-reminder|environment_context|env|user_instructions|skills_instructions|"
    r"available_skills|skill|memory|memories)>")
_REMINDER_OPEN = "<system-reminder>"

_SUMMARY_STARTS = (
    # Claude Code's compact summary message.
    "This session is being continued from a previous conversation",
    # Codex's summary prefix (codex-rs templates/compact/summary_prefix.md).
    "Another language model started to solve this problem",
)
# "Contents of /path/CLAUDE.md (project instructions, checked into the codebase):"
# The path must look like one (absolute, home- or dot-relative, or a .md file),
# so that a person's "Contents of the file:" stays their prompt.
_CONTENTS_RE = lazy_pattern(
    r"^Contents of ((?:[~/.]|[A-Za-z]:\\)[^\n]*?|[^\n]*?\.mdc?)(?: \([^\n)]*\))?:[ \t]*$", re.M)
# Claude Code context sections that end a rules file inside its claudeMd reminder.
_SECTION_END_RE = lazy_pattern(
    r"^(?:# (?:currentDate|claudeMd|gitStatus|important-instruction-reminders)\b|[ \t]*IMPORTANT: this context may)",
    re.M)
_AGENTS_MD_RE = lazy_pattern(r"\A\s*# (\S*?(?:AGENTS|CLAUDE|GEMINI)[^\s]*\.md) instructions for ")
_SKILL_NAME_RE = lazy_pattern(r"<name>\s*([^<\n]+?)\s*</name>")
_SKILL_PATH_RE = lazy_pattern(r"<path>\s*([^<\n]+?)\s*</path>")
_SKILL_BASE_RE = lazy_pattern(r"\A\s*Base directory for this skill: (\S+)")
_FRONTMATTER_NAME_RE = lazy_pattern(r"\A---\nname:[ \t]*([^\n]+)\n")
_SKILL_INDEX_STARTS = ("The following skills are available", "<available_skills>",
                       "<skills_instructions>", "## Skills\n")
_GIT_STATUS_RE = lazy_pattern(r"^gitStatus: ", re.M)


def _base(path: str) -> str:
    path = path.strip().strip("`'\"").rstrip("/\\")
    return re.split(r"[/\\]", path)[-1] or path


# ---------------------------------------------------------------------------
# Text classification
# ---------------------------------------------------------------------------

def classify_text(text: str, role: str = "user") -> list[Segment]:
    """Split ``text`` of a ``role`` (user, system, developer, tool, assistant) into segments.

    The segments concatenate to ``text``. Ordinary text gets ``part=None``.
    Whitespace between recognised regions joins the segment before it, so a
    block holding a reminder and the user's words gives two segments, not
    three.
    """
    if not text:
        return [Segment(text)]
    full = role in _FULL_ROLES
    if full:
        whole = _whole(text)
        if whole is not None:
            return [whole]
        # "<" is found at memchr speed; the other two only matter in these roles.
        if "<" not in text and "Contents of " not in text and "gitStatus:" not in text:
            return [Segment(text)]
        opens: Iterator[tuple[int, int, str]] = ((m.start(), m.end(), m.group(1)) for m in _REGION_RE().finditer(text))
    else:
        if _REMINDER_OPEN not in text:
            return [Segment(text)]
        opens = _reminder_opens(text)
    spans: list[tuple[int, int, str, str | None]] = []
    pos = 0
    unclosed: set[str] = set()  # a tag with no closer after one opening has none after later ones
    for start, open_end, tag in opens:
        if start < pos or tag in unclosed:
            continue
        close = text.find(f"</{tag}>", open_end)
        if close < 0:
            unclosed.add(tag)
            continue
        end = close + len(tag) + 3
        if tag == "system-reminder":
            spans.extend(_reminder(text, start, end))
        else:
            part, label = _region_part(tag, text[start:end])
            if part is None:
                continue
            spans.append((start, end, part, label))
        pos = end
    if full:
        spans.extend(_outside(text, spans))
        spans.sort()
    return _fill(text, spans)


def _reminder_opens(text: str) -> Iterator[tuple[int, int, str]]:
    """Each ``<system-reminder>`` opening, left to right: (start, end, tag), as a match of the tag would give.

    Found with ``str.find``, not a pattern: a tool result is searched whole, and sre's search
    costs ~10 instructions a character (dense50: 47 M instructions for 4,378 searches).
    """
    start = text.find(_REMINDER_OPEN)
    while start >= 0:
        end = start + len(_REMINDER_OPEN)
        yield start, end, "system-reminder"
        start = text.find(_REMINDER_OPEN, end)


def _whole(text: str) -> Segment | None:
    """A text that is one thing from its start: a summary, an AGENTS.md, a skill body."""
    head = text[:400].lstrip()[:200]  # never copy a long text to look at its start
    if head.startswith(_SUMMARY_STARTS):
        return Segment(text, SUMMARIES)
    if head.startswith("<summary>") and text.rstrip().endswith("</summary>"):
        return Segment(text, SUMMARIES)
    if head.startswith("# "):
        match = _AGENTS_MD_RE().match(text)
        if match:
            name = _base(match.group(1))
            return Segment(text, f"rules/{name}", name)
    if head.startswith("Base directory for this skill"):
        match = _SKILL_BASE_RE().match(text)
        if match:
            name = _base(match.group(1))
            return Segment(text, f"skills/{name}", name)
    if head.startswith("---\nname:"):
        match = _FRONTMATTER_NAME_RE().match(head)
        if match:
            name = match.group(1).strip().strip("'\"")
            return Segment(text, f"skills/{name}", name)
    if head.startswith(_SKILL_INDEX_STARTS):
        return Segment(text, SKILLS_INDEX, "index")
    return None


def _region_part(tag: str, region: str) -> tuple[str | None, str | None]:
    if tag in ("environment_context", "env"):
        return ENVIRONMENT, None
    if tag == "user_instructions":
        # Codex's wrapper for the AGENTS.md files it found.
        return "rules/AGENTS.md", "AGENTS.md"
    if tag in ("skills_instructions", "available_skills"):
        return SKILLS_INDEX, "index"
    if tag == "skill":
        match = _SKILL_NAME_RE().search(region, 0, 500)
        name = match.group(1) if match else None
        if name is None:
            path = _SKILL_PATH_RE().search(region, 0, 1000)
            if path is None:
                return None, None
            parts = re.split(r"[/\\]", path.group(1))
            name = parts[-2] if len(parts) > 1 and parts[-1].upper() == "SKILL.MD" else parts[-1]
        return f"skills/{name}", name
    if tag in ("memory", "memories"):
        return "rules/memory", "memory"
    return None, None


def _reminder(text: str, start: int, end: int) -> list[tuple[int, int, str, str | None]]:
    """A ``<system-reminder>``: rules files inside it by file, a skill index, else environment."""
    inner_start = start + len("<system-reminder>")
    inner = text[inner_start:end]
    if "Contents of " in inner:
        spans: list[tuple[int, int, str, str | None]] = []
        # Sections stop before the closing tag, which stays with the reminder.
        inner_end = end - len("</system-reminder>")
        for section_start, section_end, name in _contents_sections(text, inner_start, inner_end):
            spans.append((section_start, section_end, f"rules/{name}", name))
        if spans:
            return _fill_spans(start, end, spans, ENVIRONMENT)
    head = inner[:300].lstrip()[:120]
    if head.startswith(_SKILL_INDEX_STARTS):
        return [(start, end, SKILLS_INDEX, "index")]
    return [(start, end, ENVIRONMENT, None)]


def _contents_sections(text: str, start: int, end: int) -> list[tuple[int, int, str]]:
    matches = list(_CONTENTS_RE().finditer(text, start, end))
    sections = []
    for i, match in enumerate(matches):
        stop = matches[i + 1].start() if i + 1 < len(matches) else end
        tail = _SECTION_END_RE().search(text, match.end(), stop)
        if tail is not None:
            stop = tail.start()
        sections.append((match.start(), stop, _base(match.group(1))))
    return sections


def _outside(text: str, spans: list[tuple[int, int, str, str | None]]) -> list[tuple[int, int, str, str | None]]:
    """Rules files and git status in the text outside the recognised regions."""
    found: list[tuple[int, int, str, str | None]] = []
    gaps = _gaps(len(text), spans)
    for gap_start, gap_end in gaps:
        if "Contents of " in text[gap_start:gap_end]:
            for s, e, name in _contents_sections(text, gap_start, gap_end):
                found.append((s, e, f"rules/{name}", name))
        if "gitStatus:" in text[gap_start:gap_end]:
            # Claude Code ends its system prompt with the git status snapshot.
            match = _GIT_STATUS_RE().search(text, gap_start, gap_end)
            if match and not any(s <= match.start() < e for s, e, _, _ in found):
                found.append((match.start(), gap_end, ENVIRONMENT, None))
    return found


def _gaps(length: int, spans: list[tuple[int, int, str, str | None]]) -> list[tuple[int, int]]:
    gaps, pos = [], 0
    for start, end, _, _ in sorted(spans):
        if start > pos:
            gaps.append((pos, start))
        pos = max(pos, end)
    if pos < length:
        gaps.append((pos, length))
    return gaps


def _fill_spans(start: int, end: int, spans: list[tuple[int, int, str, str | None]],
                part: str) -> list[tuple[int, int, str, str | None]]:
    """Cover [start, end) completely: ``spans`` plus ``part`` for the gaps between them."""
    out: list[tuple[int, int, str, str | None]] = []
    pos = start
    for s, e, p, label in sorted(spans):
        if s > pos:
            out.append((pos, s, part, None))
        out.append((s, e, p, label))
        pos = e
    if pos < end:
        out.append((pos, end, part, None))
    return out


# A character str.strip() keeps (re's \S for str patterns is the negation of the same whitespace test).
_NON_BLANK = re.compile(r"\S")


def _fill(text: str, spans: list[tuple[int, int, str, str | None]]) -> list[Segment]:
    """Segments covering ``text``: the spans, default text between them, whitespace merged."""
    if not spans:
        return [Segment(text)]
    pieces: list[list[Any]] = []  # [start, end, part, label]
    pos = 0
    for start, end, part, label in spans:
        if start > pos:
            pieces.append([pos, start, None, None])
        pieces.append([start, end, part, label])
        pos = end
    if pos < len(text):
        pieces.append([pos, len(text), None, None])
    merged: list[list[Any]] = []
    carry = None  # leading blank text, joined to the first real piece
    for piece in pieces:
        # Blank without slicing the piece out (a long file's text would be copied to be stripped).
        blank = piece[2] is None and _NON_BLANK.search(text, piece[0], piece[1]) is None
        if blank:
            if merged:
                merged[-1][1] = piece[1]
            elif carry is None:
                carry = piece[0]
            continue
        if carry is not None:
            piece[0], carry = carry, None
        # Adjacent pieces of one kind join, but two rules files stay two items.
        if merged and piece[2] == merged[-1][2] and piece[2] in (None, ENVIRONMENT):
            merged[-1][1] = piece[1]
        else:
            merged.append(piece)
    if not merged:
        return [Segment(text)]
    return [Segment(text[s:e], part, label) for s, e, part, label in merged]


# ---------------------------------------------------------------------------
# Tools
# ---------------------------------------------------------------------------

def mcp_name(name: str) -> tuple[str, str] | None:
    """``(server, tool)`` of an MCP tool name ``mcp__<server>__<tool>``, else None.

    Servers may hold single underscores (``plugin_x_y``) and so may tools; the
    first double underscore after the prefix separates them.
    """
    if not name.startswith("mcp__"):
        return None
    server, sep, tool = name[5:].partition("__")
    if not sep or not server or not tool:
        return None
    return server, tool


# A name that can stand as one level of a part path: what OpenAI and Anthropic accept
# as a tool name (letters, digits, ``_`` and ``-``), plus ``.`` and ``:`` (server tool types
# such as ``openrouter:web_search``), up to 128 characters.
_PLAIN_NAME_RE = re.compile(r"[A-Za-z0-9_.:-]{1,128}")
OTHER_TOOL = "other"


def plain_name(name: str | None) -> str | None:
    """``name`` when it is a plain name (one part-path level), else None."""
    return name if name and _PLAIN_NAME_RE.fullmatch(name) and name not in (".", "..") else None


def tool_segment(name: str, server: str | None = None) -> str:
    """A tool's name as the last level(s) of its part paths: ``<tool>`` or ``mcp/<server>/<tool>``.

    One rule for a tool's definition (``tools/...``), its calls
    (``assistant/calls/...``) and results (``results/...``): part paths use
    ``/`` as a separator, so a name that is not a plain name (a space, a
    slash, an empty name) is counted in its kind's ``other``, as the part cap
    does, rather than made into invented levels. An MCP tool reads
    ``mcp/<server>/<tool>`` when both halves are plain.
    """
    if server is None:
        mcp = mcp_name(name)
        if mcp is not None:
            server, name = mcp
    if server is not None:
        server_name, tool_name = plain_name(server), plain_name(name)
        return f"mcp/{server_name}/{tool_name}" if server_name and tool_name else OTHER_TOOL
    return plain_name(name) or OTHER_TOOL


def tool_part(name: str, server: str | None = None) -> str:
    """Part path of a tool definition: ``tools/<tool>``, ``tools/mcp/<server>/<tool>`` or ``tools/other``."""
    return f"tools/{tool_segment(name, server)}"


# Arguments that identify what a call reads or runs, in the order they lead a reference.
_PATH_KEYS = ("file_path", "path", "notebook_path", "filePath", "filename", "file")
_COMMAND_KEYS = ("command", "cmd")
_LEAD_KEYS = _PATH_KEYS + _COMMAND_KEYS + ("url", "pattern", "query")
# Arguments that change how a call runs, not what it returns.
_NOISE_KEYS = frozenset((
    "description", "timeout", "timeout_ms", "run_in_background", "yield_time_ms",
    "max_output_tokens", "justification", "sandbox_permissions", "with_escalated_permissions",
    "workdir", "login", "shell", "tty",
))
_SHELLS = frozenset(("bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh", "/usr/bin/bash",
                     "powershell", "pwsh", "cmd"))
_WS_RE = re.compile(r"\s+")
# Long free-form values (patches, file contents) become a short digest, so
# references stay small and never carry a body.
_MAX_VALUE_CHARS = 200


def normalise_path(path: str) -> str:
    """``./a/../b`` -> ``b``; absolute paths stay absolute."""
    path = path.strip()
    if not path:
        return path
    normal = posixpath.normpath(path)
    return "" if normal == "." else normal


def normalise_command(command: Any) -> str:
    """A shell command as one line: ``["bash", "-lc", "cat x"]`` -> ``cat x``; spaces collapsed."""
    if isinstance(command, (list, tuple)):
        words = [str(w) for w in command]
        if len(words) >= 3 and words[0].rsplit("/", 1)[-1] in _SHELLS and words[1] in ("-lc", "-c", "/c", "-Command"):
            command = " ".join(words[2:])
        else:
            command = " ".join(words)
    return _WS_RE.sub(" ", str(command)).strip()


def _value(key: str, value: Any) -> str:
    if key in _PATH_KEYS and isinstance(value, str):
        text = normalise_path(value)
    elif key in _COMMAND_KEYS:
        text = normalise_command(value)
    elif isinstance(value, str):
        text = value
    elif type(value) is int:
        text = str(value)  # json.dumps's text of an int (offsets, limits), without building an encoder
    else:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    if len(text) > _MAX_VALUE_CHARS:
        text = "#" + blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return text


def tool_reference(tool_name: str, arguments: Mapping[str, Any] | str | None) -> str | None:
    """The normalised reference of a tool call, e.g. ``Read:file_path=src/app.py``.

    ``arguments`` is the call's input: a mapping, its JSON text, or free-form
    text (a custom tool's input, hashed when long). Keys that say *what* is
    read or run lead (path, command, url, pattern, query); the rest follow
    sorted; keys that only change *how* (timeouts, descriptions, workdir) are
    left out. None when there is no tool name.
    """
    if not tool_name:
        return None
    args: Any = arguments
    if isinstance(arguments, str):
        stripped = arguments.strip()
        if not stripped:
            args = {}
        else:
            try:
                args = json.loads(stripped)
            except ValueError:
                return f"{tool_name}:input={_value('input', stripped)}"
    if args is None:
        args = {}
    if not isinstance(args, Mapping):
        return f"{tool_name}:input={_value('input', args)}"
    keys = [k for k in _LEAD_KEYS if k in args and args[k] is not None]
    keys += sorted(k for k in args if k not in _LEAD_KEYS and k not in _NOISE_KEYS and args[k] is not None)
    return f"{tool_name}:" + ",".join(f"{k}={_value(k, args[k])}" for k in keys)
