"""Which transcript format a file holds, by sniffing its first record.

- Claude Code session JSONL: objects with ``type`` user/assistant/summary/...
  and ``uuid``/``parentUuid``/``sessionId``.
- Codex rollout JSONL: ``{timestamp, type, payload}`` with type session_meta,
  turn_context, response_item, event_msg or compacted (and the older rollout
  shape whose records are the response items themselves).
- Messages: an OpenAI chat or Anthropic message array, a request body, an
  exported history, or JSONL of request bodies or ``{request, response}`` pairs.
"""

from __future__ import annotations

from typing import Any

from ctxscope.transcripts.model import FORMAT_CLAUDE_CODE, FORMAT_CODEX, FORMAT_MESSAGES, FORMATS, Reader, loads

_CLAUDE_TYPES = {"user", "assistant", "summary", "system", "progress", "attachment",
                 "file-history-snapshot", "queue-operation", "permission-mode"}
_CODEX_TYPES = {"session_meta", "turn_context", "response_item", "event_msg", "compacted"}
_CODEX_LEGACY_TYPES = {"message", "reasoning", "function_call", "function_call_output",
                       "local_shell_call", "custom_tool_call", "custom_tool_call_output"}


class UnknownFormatError(ValueError):
    """No record of the head matches a known transcript format.

    ``undecided`` is True when every record read was a JSON object of a type
    no format claims: more of the file (still being written) may decide.
    """

    def __init__(self, message: str, *, undecided: bool = False) -> None:
        super().__init__(message)
        self.undecided = undecided


UnknownFormat = UnknownFormatError  # the name before the Error suffix, kept for callers


# Records of unknown types read past before giving up on a JSONL file's format.
MAX_SNIFFED_RECORDS = 200


def detect_format(head: bytes, forced: str | None = None) -> tuple[str, bool]:
    """``(format, is_document)`` for a file starting with ``head``.

    ``is_document`` is True when the file is one JSON document (parsed whole)
    rather than JSONL. ``forced`` skips sniffing the format (not the layout).
    A JSONL file is known by its first record of a known shape: leading
    records of types no format claims (new agent versions add some) are
    read past, up to ``MAX_SNIFFED_RECORDS`` of them within ``head``.
    """
    if forced is not None and forced not in FORMATS:
        raise UnknownFormatError(f"unknown format {forced!r}: choose one of {', '.join(FORMATS)}")
    text = head.lstrip()
    if text.startswith(b"\xef\xbb\xbf"):
        text = text[3:].lstrip()
    lines = text.split(b"\n", MAX_SNIFFED_RECORDS)
    first = lines[0].strip()
    record: Any = None
    try:
        record = loads(first)
    except ValueError:
        record = None
    if isinstance(record, list) or (record is None and text[:1] in (b"[", b"{")
                                    and not _jsonl_after(lines)):
        # A JSON document (array, or an object spread over lines).
        return forced or FORMAT_MESSAGES, True
    if record is not None and not isinstance(record, dict):
        raise UnknownFormatError("not a JSON or JSONL transcript (the first line is not a JSON object)")
    if forced is not None:
        return forced, False
    first_kind: Any = None
    seen = 0
    for line in lines[:MAX_SNIFFED_RECORDS]:
        line = line.strip()
        if not line:
            continue
        try:
            candidate = loads(line)
        except ValueError:
            continue  # a damaged or cut line: the reader reports it; the next may tell
        if not isinstance(candidate, dict):
            continue
        seen += 1
        if first_kind is None:
            first_kind = candidate.get("type")
        fmt = _sniff(candidate)
        if fmt is not None:
            return fmt, False
    if not seen:
        raise UnknownFormatError("not a JSON or JSONL transcript (the first line is not a JSON object)")
    raise UnknownFormatError("unrecognised transcript format (first record has type "
                        f"{str(first_kind)[:40]!r}); pass --format {'/'.join(FORMATS)}", undecided=True)


def _jsonl_after(lines: list[bytes]) -> bool:
    """A first line cut or damaged, but later lines each a JSON object: JSONL, not a document."""
    for line in lines[1:4]:
        line = line.strip()
        if not line:
            continue
        try:
            return isinstance(loads(line), dict)
        except ValueError:
            return False
    return False


def _sniff(record: dict[str, Any]) -> str | None:
    """The format a record shows, or None when it could be of any (an unknown type)."""
    kind = record.get("type")
    kind = kind if isinstance(kind, str) else None
    if kind in _CODEX_TYPES and "payload" in record:
        return FORMAT_CODEX
    # Every Claude Code record has a type: a bare sessionId (a metrics export) is not one.
    if kind is not None and ("parentUuid" in record or "sessionId" in record or "leafUuid" in record):
        return FORMAT_CLAUDE_CODE
    if kind in _CLAUDE_TYPES and ("uuid" in record or "message" in record or kind == "summary"):
        return FORMAT_CLAUDE_CODE
    if "messages" in record or "request" in record or "history" in record or "input" in record:
        return FORMAT_MESSAGES
    # The older Codex rollout: a header {id, timestamp, instructions}, then the items themselves.
    if kind in _CODEX_LEGACY_TYPES or ("instructions" in record and "id" in record):
        return FORMAT_CODEX
    if kind in _CLAUDE_TYPES:
        return FORMAT_CLAUDE_CODE
    return None


def make_reader(fmt: str, name: str, path: str | None = None) -> Reader:
    """A fresh reader for a format; ``name`` (the file name) seeds session ids."""
    if fmt == FORMAT_CLAUDE_CODE:
        from ctxscope.transcripts.claude_code import ClaudeCodeReader

        return ClaudeCodeReader(name)
    if fmt == FORMAT_CODEX:
        from ctxscope.transcripts.codex import CodexReader

        return CodexReader(name)
    if fmt == FORMAT_MESSAGES:
        from ctxscope.transcripts.messages import MessagesReader

        return MessagesReader(name)
    raise UnknownFormatError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
