"""Finished spans -> an OTLP ``ExportTraceServiceRequest``, as wire bytes, without building the message tree.

The SDK's encoder (``opentelemetry.exporter.otlp.proto.common``) builds one
protobuf object per span, event, attribute and value, then serialises the
tree: most of the span export's CPU time, and of a replay's (dense50: about a
third of ``ctxscope replay``). This module writes the same bytes directly:
each message is its fields, in field-number order, each length-delimited
field prefixed by its length, so a message is the concatenation of its
encoded fields. The attributes a span shares with others (the keys; the
string, boolean and small integer values) are encoded once and kept in
:class:`SpanEncoder`'s bounded cache.

The bytes are the SDK's, byte for byte (``tests/telemetry/test_otlp_encoding.py``
compares them on every kind of value). An attribute the SDK would refuse
(an integer outside int64, a string that is not UTF-8, another type) makes
:meth:`SpanEncoder.encode` raise :class:`UnencodableError`: the exporter then
uses the SDK's encoder for that batch, which logs and skips it as it always did.

Field numbers: ``opentelemetry/proto/{collector/trace,trace,common,resource}/v1/*.proto``.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

__all__ = ["SpanEncoder", "UnencodableError"]

_log = logging.getLogger(__name__)

# SpanKind (the API's enum value) -> the proto's Span.SpanKind: the SDK's _SPAN_KIND_MAP (INTERNAL=0 -> 1, ...).
_KIND_OFFSET = 1
# Span.flags: the context-has-is-remote bit always, the is-remote bit for a remote parent (SpanFlags).
_FLAGS_HAS_IS_REMOTE = 0x100
_FLAGS_IS_REMOTE = 0x200
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
# Encoded attributes kept for reuse; past this the cache starts again (values vary call to call).
_CACHE_LIMIT = 8192
# Integer values cached (token counts above it are rarely shared by two spans).
_SMALL_INT = 1 << 12
# String values cached up to this length (longer ones are ids: rarely shared by two spans).
_SHORT_STR = 24

_pack_double = struct.Struct("<d").pack
_pack_fixed64 = struct.Struct("<Q").pack
_pack_fixed32 = struct.Struct("<I").pack
_NOTHING = object()


class UnencodableError(ValueError):
    """A value this encoder does not write as the SDK would: the SDK's encoder takes the batch."""


# The one- and two-byte varints (lengths and most values), made once.
_VARINT1 = [bytes((n,)) for n in range(0x80)]


def _varint(n: int) -> bytes:
    if n < 0x80:
        return _VARINT1[n]
    if n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _tag(field: int, wire_type: int) -> bytes:
    return _varint((field << 3) | wire_type)


_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5


def _len_field(tag: bytes, payload: bytes) -> bytes:
    return tag + _varint(len(payload)) + payload


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # lone surrogates: the SDK's encoder refuses them too
        raise UnencodableError(str(exc)) from None


# AnyValue (common.proto): string_value 1, bool_value 2, int_value 3, double_value 4,
# array_value 5 (ArrayValue: values 1), kvlist_value 6 (KeyValueList: values 1), bytes_value 7.
# A oneof member is written even at its default value (it has presence).
_ANY_STRING, _ANY_BOOL, _ANY_INT = _tag(1, _LEN), _tag(2, _VARINT), _tag(3, _VARINT)
_ANY_DOUBLE, _ANY_ARRAY, _ANY_KVLIST, _ANY_BYTES = _tag(4, _FIXED64), _tag(5, _LEN), _tag(6, _LEN), _tag(7, _LEN)
_LIST_VALUES = _tag(1, _LEN)
# KeyValue: key 1, value 2.
_KV_KEY, _KV_VALUE = _tag(1, _LEN), _tag(2, _LEN)


def _any_value(value: Any) -> bytes:
    """An AnyValue message, as the SDK's ``_encode_value`` builds it (the same order of type tests)."""
    if value is None:
        return b""
    if isinstance(value, bool):
        return _ANY_BOOL + (b"\x01" if value else b"\x00")
    if isinstance(value, str):
        return _len_field(_ANY_STRING, _utf8(value))
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise UnencodableError(f"integer out of int64 range: {value}")
        return _ANY_INT + _varint(value if value >= 0 else value + (1 << 64))
    if isinstance(value, float):
        return _ANY_DOUBLE + _pack_double(value)
    if isinstance(value, bytes):
        return _len_field(_ANY_BYTES, value)
    if isinstance(value, Sequence):
        return _len_field(_ANY_ARRAY, b"".join(_len_field(_LIST_VALUES, _any_value(v)) for v in value))
    if isinstance(value, Mapping):
        return _len_field(_ANY_KVLIST, b"".join(_len_field(_LIST_VALUES, _key_value(str(k), v))
                                               for k, v in value.items()))
    raise UnencodableError(f"invalid type {type(value)} of value {value!r}")


def _key_value(key: str, value: Any) -> bytes:
    return (_len_field(_KV_KEY, _utf8(key)) if key else b"") + _len_field(_KV_VALUE, _any_value(value))


# Span (trace.proto): trace_id 1, span_id 2, trace_state 3, parent_span_id 4, name 5, kind 6,
# start_time_unix_nano 7, end_time_unix_nano 8, attributes 9, dropped_attributes_count 10,
# events 11, dropped_events_count 12, links 13, dropped_links_count 14, status 15, flags 16.
_S_TRACE_ID, _S_SPAN_ID, _S_TRACE_STATE, _S_PARENT = _tag(1, _LEN), _tag(2, _LEN), _tag(3, _LEN), _tag(4, _LEN)
_S_NAME, _S_KIND, _S_START, _S_END = _tag(5, _LEN), _tag(6, _VARINT), _tag(7, _FIXED64), _tag(8, _FIXED64)
_S_ATTRIBUTE, _S_DROPPED_ATTRIBUTES, _S_EVENT = _tag(9, _LEN), _tag(10, _VARINT), _tag(11, _LEN)
_S_DROPPED_EVENTS, _S_LINK, _S_DROPPED_LINKS = _tag(12, _VARINT), _tag(13, _LEN), _tag(14, _VARINT)
_S_STATUS, _S_FLAGS = _tag(15, _LEN), _tag(16, _FIXED32)
# Span.Event: time_unix_nano 1, name 2, attributes 3, dropped_attributes_count 4.
_E_TIME, _E_NAME, _E_ATTRIBUTE, _E_DROPPED = _tag(1, _FIXED64), _tag(2, _LEN), _tag(3, _LEN), _tag(4, _VARINT)
# Span.Link: trace_id 1, span_id 2, trace_state 3, attributes 4, dropped_attributes_count 5, flags 6.
_L_TRACE_ID, _L_SPAN_ID, _L_TRACE_STATE, _L_ATTRIBUTE = _tag(1, _LEN), _tag(2, _LEN), _tag(3, _LEN), _tag(4, _LEN)
_L_DROPPED, _L_FLAGS = _tag(5, _VARINT), _tag(6, _FIXED32)
# Status: message 2, code 3.
_ST_MESSAGE, _ST_CODE = _tag(2, _LEN), _tag(3, _VARINT)
# ExportTraceServiceRequest: resource_spans 1. ResourceSpans: resource 1, scope_spans 2, schema_url 3.
# Resource: attributes 1. ScopeSpans: scope 1, spans 2, schema_url 3.
# InstrumentationScope: name 1, version 2, attributes 3.
_REQ_RESOURCE_SPANS = _tag(1, _LEN)
_RS_RESOURCE, _RS_SCOPE_SPANS, _RS_SCHEMA_URL = _tag(1, _LEN), _tag(2, _LEN), _tag(3, _LEN)
_R_ATTRIBUTE = _tag(1, _LEN)
_SS_SCOPE, _SS_SPAN, _SS_SCHEMA_URL = _tag(1, _LEN), _tag(2, _LEN), _tag(3, _LEN)
_IS_NAME, _IS_VERSION, _IS_ATTRIBUTE = _tag(1, _LEN), _tag(2, _LEN), _tag(3, _LEN)


def _items(attributes: Mapping[str, Any]) -> Any:
    """An attribute mapping's items, from a plain dict where one is cheap to get.

    The SDK hands a span's attributes as a read-only view of its
    ``BoundedAttributes``, whose items go through two Python calls each;
    its ``copy()`` is one C dict copy.
    """
    if attributes.__class__ is dict or isinstance(attributes, dict):
        return attributes.items()
    try:
        plain = attributes.copy()  # type: ignore[attr-defined]
    except AttributeError:
        return attributes.items()
    return plain.items() if isinstance(plain, dict) else attributes.items()


def _append_message(pieces: list[bytes], tag: bytes, body: list[bytes]) -> None:
    """A length-delimited field whose payload is ``body``'s pieces, added to ``pieces`` without joining them."""
    pieces.append(tag + _varint(sum(map(len, body))))
    pieces += body


def _string_field(tag: bytes, text: str | None) -> bytes:
    """A proto3 string field: absent when empty (or not given)."""
    return _len_field(tag, _utf8(text)) if text else b""


def _uint_field(tag: bytes, n: int | None) -> bytes:
    return tag + _varint(n) if n else b""


def _fixed64_field(tag: bytes, n: int | None) -> bytes:
    return tag + _pack_fixed64(n) if n else b""


def _trace_state(trace_state: Any) -> str | None:
    if trace_state is None:
        return None
    return ",".join([f"{key}={value}" for key, value in trace_state.items()])


# Fields written whole, the same for every span: the id fields' tags and lengths, each kind,
# an unset status, the flags of a local and of a remote parent.
_TRACE_ID_PREFIX, _SPAN_ID_PREFIX = _S_TRACE_ID + _VARINT1[16], _S_SPAN_ID + _VARINT1[8]
_PARENT_PREFIX = _S_PARENT + _VARINT1[8]
_KIND_FIELDS = {kind: _uint_field(_S_KIND, kind.value + _KIND_OFFSET) for kind in SpanKind}
_UNSET_STATUS = _len_field(_S_STATUS, b"")
_LOCAL_FLAGS = _S_FLAGS + _pack_fixed32(_FLAGS_HAS_IS_REMOTE)
_REMOTE_PARENT_FLAGS = _S_FLAGS + _pack_fixed32(_FLAGS_HAS_IS_REMOTE | _FLAGS_IS_REMOTE)


class AttributeEncoder:
    """Repeated ``KeyValue`` fields, with a bounded cache of the pairs spans and points share.

    Every string and integer pair is looked up first (one tuple, one dict
    get), a boolean and a non-zero float in a table of their own kind (True
    equals 1, 1.0 equals 1, -0.0 equals 0.0): the keys, the short strings,
    booleans, floats and small integers are kept once written. A count or a long string (an item's id) is kept only
    when it repeats its key's last value (a conversation id, a model, a count
    that did not change since the last span), so the ids that never repeat
    neither fill the cache nor empty it of the values that do. A pair not
    found is written from its key's state (:class:`_KeyState`: the field's
    prefix for each size of a count, the key's field and the value's tag, the
    last value), found with one dict get, with one concatenation for a count
    (a third of the pairs of a replay miss the cache: dense50's change events'
    ids and counts, a span's token counts).
    The caches are dicts of immutable bytes and of key states whose fields are
    each set in one step: one get, set or clear needs no lock, and a lost
    entry is encoded again.
    """

    def __init__(self, cache_limit: int = _CACHE_LIMIT) -> None:
        # tag -> (key, value) -> the encoded field, for string and integer values only: neither
        # equals the other, so the pair alone is the key (True == 1 and 1.0 == 1: no bool, no float)
        self._caches: dict[bytes, dict[tuple[str, Any], bytes]] = {}
        # tag -> (key, value) -> the encoded field, for a bool and a non-zero float (one or two a span):
        # each in a dict of its own kind, where True cannot meet 1 nor 1.0 meet 1 (and -0.0,
        # equal to 0.0 with other bytes, is never kept)
        self._bools: dict[bytes, dict[tuple[str, Any], bytes]] = {}
        self._floats: dict[bytes, dict[tuple[str, Any], bytes]] = {}
        self._cache_limit = cache_limit
        # tag -> key -> what a pair of the key the cache lacks is written from
        self._states: dict[bytes, dict[str, _KeyState]] = {}

    def encode(self, tag: bytes, attributes: Mapping[str, Any] | None) -> bytes:
        """A repeated KeyValue field: each attribute, tag and length included."""
        if not attributes:
            return b""
        cache = self._caches.get(tag)
        if cache is None:
            # The tag's other tables first: another thread that finds its cache finds them too.
            self._states[tag], self._bools[tag], self._floats[tag] = {}, {}, {}
            cache = self._caches[tag] = {}
        cache_get = cache.get
        missing = self._missing
        parts: list[bytes] = []
        append = parts.append
        for pair in attributes.items() if attributes.__class__ is dict else _items(attributes):
            kind = pair[1].__class__
            if kind is str or kind is int:
                encoded = cache_get(pair)
                append(encoded if encoded is not None else missing(tag, pair, cache))
            else:
                append(self._other(tag, pair))
        return b"".join(parts)

    def _other(self, tag: bytes, pair: tuple[str, Any]) -> bytes:
        """A pair whose value is neither a string nor an integer: a bool or float kept, the rest written."""
        value = pair[1]
        kind = value.__class__
        kept = self._bools[tag] if kind is bool else self._floats[tag] if kind is float and value else None
        if kept is None:
            return _len_field(tag, _key_value(*pair))
        encoded = kept.get(pair)
        if encoded is None:
            encoded = _len_field(tag, _key_value(*pair))
            if len(kept) >= self._cache_limit:
                kept.clear()
            kept[pair] = encoded
        return encoded

    def _missing(self, tag: bytes, pair: tuple[str, Any], cache: dict[tuple[str, Any], bytes]) -> bytes:
        """A string or integer pair the cache lacks: written, and kept where it may repeat."""
        key, value = pair
        state = self._states[tag].get(key)
        if state is None:
            state = self._new_state(tag, key)
        if value.__class__ is int and 0 <= value <= _INT64_MAX:
            # The varint written out for one to four bytes (token counts up to 268 M).
            if value < 0x80:
                encoded = state.int_prefixes[1] + _VARINT1[value]
            elif value < 0x4000:
                encoded = state.int_prefixes[2] + bytes(((value & 0x7F) | 0x80, value >> 7))
            elif value < 0x200000:
                encoded = state.int_prefixes[3] + bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80,
                                                         value >> 14))
            elif value < 0x10000000:
                encoded = state.int_prefixes[4] + bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80,
                                                         ((value >> 14) & 0x7F) | 0x80, value >> 21))
            else:
                number = _varint(value)
                encoded = state.int_prefixes[len(number)] + number
            kept = value < _SMALL_INT
        elif value.__class__ is str and len(value) > _SHORT_STR:
            try:
                data = value.encode("utf-8")
            except UnicodeEncodeError as exc:  # lone surrogates: the SDK's encoder refuses them too
                raise UnencodableError(str(exc)) from None
            size = len(data)
            number = _VARINT1[size] if size < 0x80 else _varint(size)
            size += len(number) + 1  # the AnyValue: its tag, the length, the bytes
            length = _VARINT1[size] if size < 0x80 else _varint(size)
            size += state.head_size + len(length)
            encoded = b"".join((tag, _VARINT1[size] if size < 0x80 else _varint(size), state.head, length,
                                _ANY_STRING, number, data))
            kept = False
        else:
            encoded = _len_field(tag, _key_value(key, value))  # raises UnencodableError as the SDK refuses
            kept = True
        if not kept:
            # A count or an id: kept once it repeats its key's last value.
            kept = state.last == value
            state.last = value
        if kept:
            if len(cache) >= self._cache_limit:
                cache.clear()
            cache[pair] = encoded
        return encoded

    def _new_state(self, tag: bytes, key: str) -> "_KeyState":
        states = self._states[tag]
        if len(states) >= self._cache_limit:
            states.clear()  # keys are few; past the limit (an application's own keys) it starts again
        state = states[key] = _KeyState(tag, key)
        return state


class _KeyState:
    """What a pair of one key under one field tag is written from when the cache lacks it."""

    __slots__ = ("head", "head_size", "int_prefixes", "last")

    def __init__(self, tag: bytes, key: str) -> None:
        # The KeyValue's key field and the value's tag, and their length.
        head = _len_field(_KV_KEY, _utf8(key)) + _KV_VALUE if key else _KV_VALUE
        self.head, self.head_size = head, len(head)
        # For a varint of n bytes: the whole field but the varint (the AnyValue is its tag and the
        # varint, n + 1 bytes).
        self.int_prefixes = (b"",) + tuple(
            tag + _varint(len(head) + 1 + n + 1) + head + _VARINT1[n + 1] + _ANY_INT for n in range(1, 11))
        # The last count or long string written, which is kept if it repeats.
        self.last: Any = _NOTHING


def encode_scope(scope: Any, attributes: Any) -> bytes:
    """An ``InstrumentationScope`` message's fields (empty for none), its attributes through ``attributes``."""
    if scope is None:
        return b""
    return (_string_field(_IS_NAME, scope.name) + _string_field(_IS_VERSION, scope.version)
            + attributes(_IS_ATTRIBUTE, scope.attributes))


class FallbackEncoder:
    """An encoder of SDK batches whose refusal hands the batch to the SDK's own encoder.

    Subclasses write :meth:`encode` and name what they encode (``batch_kind``)
    and the logger the refusal goes to.
    """

    batch_kind = "batch"
    logger = _log

    def encode(self, batch: Any) -> bytes:
        raise NotImplementedError

    def encode_or_none(self, batch: Any) -> bytes | None:
        """:meth:`encode`, or None when the SDK's encoder must take the batch (it logs what it refuses or skips)."""
        try:
            return self.encode(batch)
        except Exception:  # noqa: BLE001 - UnencodableError, or an error of ours: the SDK's path still exports
            self.logger.debug("ctxscope: %s batch left to the SDK's encoder", self.batch_kind, exc_info=True)
            return None


class SpanEncoder(FallbackEncoder):
    """Writes ``ExportTraceServiceRequest`` bytes for a batch of SDK spans (``ReadableSpan``).

    One per exporter, with its own cache of encoded attributes. Two threads
    may encode at once (a simple span processor exports on the thread that
    ends the span): the caches are dicts of immutable bytes, whose single
    get, set and clear need no lock, and a lost entry is encoded again.
    """

    batch_kind = "span"

    def __init__(self, cache_limit: int = _CACHE_LIMIT) -> None:
        self._attributes = AttributeEncoder(cache_limit).encode

    def encode(self, spans: Sequence[Any]) -> bytes:
        """The request's bytes, equal to ``encode_spans(spans).SerializePartialToString()``.

        Raises :class:`UnencodableError` where the SDK's encoder would log and skip a value.
        """
        # Resource -> scope -> encoded spans, in order of first appearance (the SDK's grouping).
        grouped: dict[Any, dict[Any, list[bytes]]] = {}
        # A Resource hashes its attributes as JSON: each resource object is looked up once.
        by_identity: dict[int, dict[Any, list[bytes]]] = {}
        for span in spans:
            resource = span.resource
            scopes = by_identity.get(id(resource))
            if scopes is None:
                scopes = by_identity[id(resource)] = grouped.setdefault(resource, {})
            scope = span.instrumentation_scope or None
            scopes.setdefault(scope, []).append(self._span(span))
        # The request is joined once from a flat list of pieces, each message's length summed
        # from its pieces: nesting by joins would copy the whole batch once per level (four
        # copies of about a megabyte a batch, each a fresh allocation: dense50's replay took
        # 15,000 more page faults encoding its spans than without span export).
        out: list[bytes] = []
        for resource, scopes in grouped.items():
            body = [_len_field(_RS_RESOURCE, self._attributes(_R_ATTRIBUTE, resource.attributes))]
            for scope, encoded in scopes.items():
                scope_body = [_len_field(_SS_SCOPE, self._scope(scope))]
                for span in encoded:
                    scope_body += (_SS_SPAN + _varint(len(span)), span)
                scope_body.append(_string_field(_SS_SCHEMA_URL, scope.schema_url if scope else None))
                _append_message(body, _RS_SCOPE_SPANS, scope_body)
            body.append(_string_field(_RS_SCHEMA_URL, resource.schema_url))
            _append_message(out, _REQ_RESOURCE_SPANS, body)
        return b"".join(out)

    # -- parts -----------------------------------------------------------------------

    def _scope(self, scope: Any) -> bytes:
        return encode_scope(scope, self._attributes)

    def _span(self, span: Any) -> bytes:
        # A ReadableSpan built with plain containers (replay's finished spans) dropped nothing:
        # the SDK counts drops only on its bounded ones, through a costly abstract-class check.
        # Its fields are read as they are, not through its properties (a Python call each, the
        # attributes and events copied).
        plain = (type(span) is ReadableSpan and type(span._attributes) is dict  # noqa: SLF001
                 and type(span._events) is list and type(span._links) is tuple)  # noqa: SLF001
        if plain:
            context, parent, name, kind = span._context, span._parent, span._name, span._kind  # noqa: SLF001
            start, end, attributes = span._start_time, span._end_time, span._attributes  # noqa: SLF001
            events = span._events  # noqa: SLF001
        else:
            context, parent, name, kind = span.get_span_context(), span.parent, span.name, span.kind
            start, end, attributes, events = span.start_time, span.end_time, span.attributes, span.events
        trace_state = context.trace_state
        kind_field = _KIND_FIELDS.get(kind)
        if kind_field is None:
            kind_field = _uint_field(_S_KIND, kind.value + _KIND_OFFSET)
        parts = [
            _TRACE_ID_PREFIX + context.trace_id.to_bytes(16, "big"),
            _SPAN_ID_PREFIX + context.span_id.to_bytes(8, "big"),
            _string_field(_S_TRACE_STATE, _trace_state(trace_state)) if trace_state else b"",
            _PARENT_PREFIX + parent.span_id.to_bytes(8, "big") if parent else b"",
            _string_field(_S_NAME, name) if name else b"",
            kind_field,
            _S_START + _pack_fixed64(start) if start else b"",
            _S_END + _pack_fixed64(end) if end else b"",
            self._attributes(_S_ATTRIBUTE, attributes),
        ]
        if not plain:
            parts.append(_uint_field(_S_DROPPED_ATTRIBUTES, span.dropped_attributes))
        if events:
            encode = self._attributes
            append = parts.append
            # A span's events mostly share their time and name (a replayed call's changes):
            # their two fields are written once for each run of equal ones.
            last_time: Any = None
            last_name: Any = None
            head = b""
            for event in events:
                # The SDK's Event counts dropped attributes only on BoundedAttributes: a dict drops none.
                # Its fields read as they are (its properties: a Python call each).
                if type(event) is Event and type(event._attributes) is dict:  # noqa: SLF001
                    timestamp, event_name, event_attributes = event._timestamp, event._name, event._attributes  # noqa: SLF001
                    tail = b""
                else:
                    timestamp, event_name, event_attributes = event.timestamp, event.name, event.attributes
                    tail = _uint_field(_E_DROPPED, event.dropped_attributes)
                if timestamp != last_time or event_name != last_name or not head:
                    last_time, last_name = timestamp, event_name
                    head = _fixed64_field(_E_TIME, timestamp) + _string_field(_E_NAME, event_name)
                body = head + encode(_E_ATTRIBUTE, event_attributes) + tail
                size = len(body)
                # Most events are 128 bytes to 16 KB: their two-byte length written out.
                append(_S_EVENT + (_VARINT1[size] if size < 0x80 else bytes(((size & 0x7F) | 0x80, size >> 7))
                                   if size < 0x4000 else _varint(size)) + body)
        if not plain:
            parts.append(_uint_field(_S_DROPPED_EVENTS, span.dropped_events))
        for link in span.links or ():
            link_context = link.context
            parts.append(_len_field(_S_LINK, b"".join((
                _len_field(_L_TRACE_ID, link_context.trace_id.to_bytes(16, "big")),
                _len_field(_L_SPAN_ID, link_context.span_id.to_bytes(8, "big")),
                self._attributes(_L_ATTRIBUTE, link.attributes),
                _uint_field(_L_DROPPED, link.dropped_attributes),
                _L_FLAGS + _pack_fixed32(_FLAGS_HAS_IS_REMOTE | (_FLAGS_IS_REMOTE if link_context.is_remote
                                                                 else 0))))))
        if not plain:
            parts.append(_uint_field(_S_DROPPED_LINKS, span.dropped_links))
        status = span.status
        if status is not None:
            if status.status_code is StatusCode.UNSET and not status.description:
                parts.append(_UNSET_STATUS)
            else:
                parts.append(_len_field(_S_STATUS, _string_field(_ST_MESSAGE, status.description)
                                        + _uint_field(_ST_CODE, status.status_code.value)))
        parts.append(_REMOTE_PARENT_FLAGS if parent and parent.is_remote else _LOCAL_FLAGS)
        return b"".join(parts)
