"""Request bodies read from where they grew: an agent's next body repeats the last one's bytes.

An agent's successive requests send the whole conversation each time, the
same bytes plus the new messages. Parsing 1 MB of JSON per call would cost
milliseconds, and would give the tracker new objects for old messages (a
deep comparison instead of an identity check). So :class:`BodyCache` keeps,
for the last few conversations, the body's bytes, where its conversation
array's elements end, and the parsed messages. A new body that starts with
the old bytes up to the end of the last message (or the one before: clients
that move a cache marker to the newest message rewrite the previous one)
and ends with the old bytes after the array is parsed only in between; the
old messages are the very objects of the last call. Anything else (an
edited history, new tools, another conversation) is parsed whole.

Correctness rests on one fact: equal bytes are equal JSON. Pure: no
OpenTelemetry, no HTTP library.

**Two steps, on two threads.** The caller's thread needs only the fields
around the conversation (the model, ``stream``, the parameters: what the
span opens with and how the response is framed), and :meth:`BodyCache.peek`
gives them without reading the conversation: a body that starts with a
remembered body's bytes up to its array's ``[`` and ends with its bytes
after the last message has that body's other fields (two short byte
comparisons, no parse). The full read (:meth:`BodyCache.parse`: the long
prefix comparison, the new messages parsed) then runs on the measuring
worker, in call order. ``peek`` takes no lock and the worker's ``parse``
never makes it wait: the entries list is replaced, never edited in place,
and an entry's fields are each replaced whole. A body whose ends match but
whose middle is not a run of messages (an edited history: the worker parses
it whole) gets its other fields from the worker's parse; only the span's
opening attributes and the response's framing were taken from the ends,
which a client would have to rewrite the array's middle into other fields
to mislead.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from ctxscope.instrumentation.http._frames import loads

_DECODER = json.JSONDecoder()
_WHITESPACE = " \t\n\r"
ENTRIES = 8  # conversations remembered (LRU); each holds its last body's bytes


class _Scan:
    """The top level of a body: its other fields, the conversation's elements and their end offsets."""

    def __init__(self, text: str, key: str) -> None:
        self.rest: dict[str, Any] = {}
        self.elements: list[Any] | None = None
        self.ends: list[int] = []  # str offsets just past each element
        self.array_start = -1  # str offset just past "["
        self.tail_start = -1  # str offset just past the last element (or "[")
        self._walk(text, key)

    def _walk(self, text: str, key: str) -> None:
        i = _skip(text, 0)
        if text[i] != "{":
            raise ValueError("not an object")
        i += 1
        while True:
            i = _skip(text, i)
            if text[i] == "}":
                return
            name, i = _DECODER.raw_decode(text, i)
            i = _skip(text, i)
            if text[i] != ":":
                raise ValueError("expected ':'")
            i = _skip(text, i + 1)
            if name == key and text[i] == "[":
                i = self._array(text, i + 1)
            else:
                value, i = _DECODER.raw_decode(text, i)
                self.rest[name] = value
            i = _skip(text, i)
            if text[i] == ",":
                i += 1
            elif text[i] != "}":
                raise ValueError("expected ',' or '}'")

    def _array(self, text: str, i: int) -> int:
        self.array_start = i
        self.tail_start = i
        elements: list[Any] = []
        i = _skip(text, i)
        if text[i] == "]":
            self.elements = elements
            return i + 1
        while True:
            value, i = _DECODER.raw_decode(text, i)
            elements.append(value)
            self.ends.append(i)
            self.tail_start = i
            i = _skip(text, i)
            if text[i] == "]":
                self.elements = elements
                return i + 1
            if text[i] != ",":
                raise ValueError("expected ',' or ']'")
            i = _skip(text, i + 1)


def _skip(text: str, i: int) -> int:
    while text[i] in _WHITESPACE:
        i += 1
    return i


def _elements(region: str, after_element: bool) -> tuple[list[Any], list[int]]:
    """The elements of ``region`` and their end offsets in it; ValueError unless it is exactly elements.

    ``region`` lies between the kept elements and the old tail: ``,{..},{..}``
    after an element, ``{..},{..}`` right after ``[``. Strictly so (a stray
    ``]`` means the array ended earlier and the tail only looked the same):
    the parse state at its end is then the one the old tail was parsed in,
    so the whole body parses to these elements plus the old fields.
    """
    elements: list[Any] = []
    ends: list[int] = []
    i = 0
    n = len(region)
    need_comma = after_element
    while True:
        while i < n and region[i] in _WHITESPACE:
            i += 1
        if i == n:
            return elements, ends
        if need_comma:
            if region[i] != ",":
                raise ValueError("not a run of array elements")
            i += 1
            while i < n and region[i] in _WHITESPACE:
                i += 1
        value, i = _DECODER.raw_decode(region, i)
        elements.append(value)
        ends.append(i)
        need_comma = True


class _Entry:
    """One conversation's last body."""

    __slots__ = ("key", "head", "content", "rest", "messages", "ends", "prefix_end", "tail")

    def __init__(self, key: str, head: bytes, content: bytes, rest: dict[str, Any], messages: list[Any],
                 ends: list[int], prefix_end: int, tail: bytes) -> None:
        self.key = key
        self.head = head  # the bytes up to the conversation array's "[" (never changes: peek's test)
        self.content = content  # the last body (the caller's bytes object: no copy)
        self.rest = rest
        self.messages = messages
        self.ends = ends  # byte offsets in content just past each message
        self.prefix_end = prefix_end  # byte offset past the last message (or "[")
        self.tail = tail  # the bytes after the last message: "]" and the fields after it

    @classmethod
    def build(cls, key: str, content: bytes) -> tuple["_Entry | None", Any]:
        text = content.decode("utf-8")
        scan = _Scan(text, key)
        body = dict(scan.rest)
        if scan.elements is None:
            return None, body
        body[key] = scan.elements
        ascii_only = len(text) == len(content)

        def offset(i: int) -> int:
            return i if ascii_only else len(text[:i].encode("utf-8"))

        prefix_end = offset(scan.tail_start)
        entry = cls(key, content[:offset(scan.array_start)], content, scan.rest, scan.elements,
                    [offset(e) for e in scan.ends], prefix_end, content[prefix_end:])
        return entry, body

    def extend(self, content: bytes) -> Any:
        """The body ``content`` is, when it repeats this one's messages (all, or all but the last); else None."""
        tail = self.tail
        if not content.endswith(tail):
            return None
        old = memoryview(self.content)
        stop = len(content) - len(tail)
        if stop >= self.prefix_end and content.startswith(old[:self.prefix_end]):
            kept, start = len(self.messages), self.prefix_end
        elif len(self.ends) >= 2 and stop >= self.ends[-2] and content.startswith(old[:self.ends[-2]]):
            kept, start = len(self.messages) - 1, self.ends[-2]
        else:
            return None
        region = content[start:stop].decode("utf-8")
        try:
            new, ends = _elements(region, after_element=kept > 0)
        except ValueError:  # the tail only looked the same (a short "]}"): parse the body whole
            return None
        if kept == len(self.messages) and not new:
            messages = self.messages
        else:
            messages = self.messages[:kept] + new
        ascii_only = len(region) == stop - start
        new_ends = [start + (e if ascii_only else len(region[:e].encode("utf-8"))) for e in ends]
        self.ends = self.ends[:kept] + new_ends
        self.messages = messages
        self.content = content
        self.prefix_end = self.ends[-1] if self.ends else self.prefix_end
        self.tail = content[self.prefix_end:] if len(content) - self.prefix_end != len(tail) else tail
        body = dict(self.rest)
        body[self.key] = messages
        return body


class BodyCache:
    """Parses request bodies, reusing the last bodies of up to :data:`ENTRIES` conversations."""

    def __init__(self, entries: int = ENTRIES) -> None:
        self._entries: list[_Entry] = []  # most recent first; replaced whole (peek reads it without a lock)
        self._size = entries
        self._extending = threading.Lock()  # one extend at a time (it rewrites an entry's fields)
        self._lock = threading.Lock()  # replacing the list: held for a few pointer copies

    def peek(self, content: bytes, key: str) -> dict[str, Any] | None:
        """The body's fields other than the conversation (which is ``[]`` here), or None: not a known body's.

        For the caller's thread: two comparisons of a few hundred bytes, no
        parse, no lock. :meth:`parse` reads the whole body later.
        """
        for entry in self._entries:
            if entry.key != key:
                continue
            head, tail = entry.head, entry.tail
            if len(content) >= len(head) + len(tail) and content.startswith(head) and content.endswith(tail):
                fields = dict(entry.rest)
                fields[key] = []
                return fields
        return None

    def parse(self, content: bytes, key: str) -> Any:
        """The parsed body; ``key`` names its conversation array (``messages``, ``input``, ``contents``)."""
        with self._extending:
            for cached in self._entries:
                if cached.key != key:
                    continue
                body = cached.extend(content)
                if body is not None:
                    self._remember(cached)
                    return body
        return self.parse_whole(content, key)

    def parse_whole(self, content: bytes, key: str) -> Any:
        """The body parsed whole, and remembered when it has the conversation array."""
        if key.encode() not in content:
            return loads(content)  # no conversation array to reuse: parsed whole, not remembered
        try:
            entry, body = _Entry.build(key, content)
        except (ValueError, IndexError):  # not JSON we can walk (ValueError: JSONDecodeError too)
            return loads(content)
        if entry is not None:
            self._remember(entry)
        return body

    def _remember(self, entry: _Entry) -> None:
        with self._lock:
            entries = self._entries
            if entries and entries[0] is entry:
                return
            self._entries = [entry, *(e for e in entries if e is not entry)][:self._size]

    def clear(self) -> None:
        with self._lock:
            self._entries = []
