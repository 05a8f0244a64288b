"""The ctxscope contract (``docs/spec.md``, version 1) as code.

Every name that leaves the process is defined here once: categories, stages,
bases, coverage, change types, attribute keys, metric names and units. Code,
dashboards and tests import these values instead of retyping them.

This module is pure: it imports neither OpenTelemetry nor a provider SDK.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from operator import attrgetter
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ctxscope._record import FrozenRecord, Record

SPEC_VERSION = 2  # docs/spec.md, changelog at its end
PREFIX = "llm.context."


class _StrEnum(str, Enum):
    """A string enum whose ``str()`` is its value (as ``enum.StrEnum`` in 3.11)."""

    def __str__(self) -> str:
        return self.value


class Category(_StrEnum):
    """Mutually exclusive context categories (SPEC section 2), in report order."""

    SYSTEM = "system"
    RULES = "rules"
    SKILLS = "skills"
    TOOLS = "tools"
    ENVIRONMENT = "environment"
    PROMPTS = "prompts"
    ASSISTANT = "assistant"
    RESULTS = "results"
    SUMMARIES = "summaries"
    OVERHEAD = "overhead"
    MESSAGES = "messages"
    UNATTRIBUTED = "unattributed"


CATEGORIES: tuple[Category, ...] = tuple(Category)


class Stage(_StrEnum):
    REQUEST_INPUT = "request-input"
    CAPTURE_START = "capture-start"
    POST_COMPACTION = "post-compaction"
    TRANSCRIPT_OBSERVED = "transcript-observed"


class Coverage(_StrEnum):
    COMPLETE = "complete"
    PARTIAL = "partial"
    # SPEC 2.2: no composition could be measured (a foreign span without content, a transcript
    # without text): the reported total stands alone, the breakdown was not recorded.
    UNRECORDED = "unrecorded"


class ChangeType(_StrEnum):
    BASELINE = "baseline"
    ADDITION = "addition"
    REPLACEMENT = "replacement"
    REMOVAL = "removal"


class WasteKind(_StrEnum):
    DUPLICATE = "duplicate"
    STALE = "stale"
    BLOAT = "bloat"
    TOOL_DEFINITION_OVERAGE = "tool_definition_overage"


class CompactionTrigger(_StrEnum):
    AUTO = "auto"
    MANUAL = "manual"
    # SPEC version 2: inferred when the oldest turns went and the newest stayed (a sliding window).
    TRIM = "trim"


class LimitKind(_StrEnum):
    """Values of the ``llm.context.limit`` metric attribute."""

    WINDOW = "window"
    EFFECTIVE_WINDOW = "effective_window"
    COMPACT_THRESHOLD = "compact_threshold"


# Counting bases (SPEC section 3). ``tiktoken/<encoding>`` is open-ended.
BASIS_CHARS = "chars/4"
BASIS_BYTES = "native-bytes/4"
BASIS_NATIVE = "native-summary"
TIKTOKEN_BASIS_PREFIX = "tiktoken/"


def tiktoken_basis(encoding: str) -> str:
    return TIKTOKEN_BASIS_PREFIX + encoding


def is_valid_basis(basis: str) -> bool:
    if basis in (BASIS_CHARS, BASIS_BYTES, BASIS_NATIVE):
        return True
    return basis.startswith(TIKTOKEN_BASIS_PREFIX) and len(basis) > len(TIKTOKEN_BASIS_PREFIX)


# Part paths (SPEC section 2). A part path starts with its category's value.
MAX_PARTS_PER_SESSION = 256
MAX_CHANGES_PER_SPAN = 64
OTHER_PART_SUFFIX = "/other"


# A transcript never holds the system prompt and tool schemas, yet the
# reported input does: the part learned from usage that stands for them
# (docs/analyze.md, "The hidden prefix"), and its label in every output.
INFERRED_PREFIX_PART = "system/inferred-prefix"
INFERRED_PREFIX_LABEL = "system+tools (inferred from usage)"
INFERRED_PREFIX_ID = "inferred:system+tools"


def part_category(part: str) -> Category:
    """The category a part path belongs to (its first path segment)."""
    return Category(part.split("/", 1)[0])


def other_part(category: Category) -> str:
    """Where parts past the session cap are counted."""
    return category.value + OTHER_PART_SUFFIX


# ---------------------------------------------------------------------------
# Attribute keys
# ---------------------------------------------------------------------------

class Attr:
    """Span attribute keys of the annotation (SPEC section 4)."""

    VERSION = PREFIX + "version"
    STAGE = PREFIX + "stage"
    ITEM_STAGE = PREFIX + "item_stage"
    BASIS = PREFIX + "basis"
    COVERAGE = PREFIX + "coverage"
    BASELINE = PREFIX + "baseline"
    SAMPLE_OFFSET_NS = PREFIX + "sample_offset_ns"
    CATEGORIES_PREFIX = PREFIX + "categories."
    ESTIMATED_TOKENS = PREFIX + "estimated_tokens"
    REPORTED_TOKENS = PREFIX + "reported_tokens"
    WINDOW_TOKENS = PREFIX + "window_tokens"
    EFFECTIVE_WINDOW_TOKENS = PREFIX + "effective_window_tokens"
    COMPACT_THRESHOLD_TOKENS = PREFIX + "compact_threshold_tokens"
    MODEL = PREFIX + "model"
    CALIBRATION_FACTOR = PREFIX + "calibration_factor"
    OMITTED_CHANGES = PREFIX + "omitted_changes"
    # Extensions beyond SPEC section 4 (documented in docs/telemetry.md):
    # waste per kind, so that the span processor can record the waste gauge
    # from the span alone, and the compaction trigger on post-compaction spans.
    WASTE_PREFIX = PREFIX + "waste."
    COMPACTION_TRIGGER = PREFIX + "compaction.trigger"
    SESSION_ENDED = PREFIX + "session_ended"
    # SPEC version 2: the session key, always (a fingerprint session's too). gen_ai.conversation.id
    # is set only when the application (or the provider) gave the conversation an id.
    SESSION_ID = PREFIX + "session.id"
    # Self-calibration (docs/fidelity.md): tokens the correction learned for this
    # model and tool set adds to estimated_tokens (signed). Raw estimates stay raw;
    # only the calibrated view of a request without reported usage applies it.
    LEARNED_CORRECTION_TOKENS = PREFIX + "learned_correction_tokens"
    # Why the basis is chars/4 although tiktoken was asked for (SPEC section 3):
    # "loading" (the encoding was still loading in the background) or "unavailable".
    BASIS_FALLBACK = PREFIX + "basis_fallback"
    # A transcript call whose usage the transcript never recorded (a Codex call whose
    # token_count never came, exported when its file went idle or the watch stopped).
    USAGE_MISSING = PREFIX + "usage_missing"

    @staticmethod
    def category(category: Category | str) -> str:
        return Attr.CATEGORIES_PREFIX + str(category)

    @staticmethod
    def waste(kind: WasteKind | str) -> str:
        return Attr.WASTE_PREFIX + str(kind)


CHANGE_EVENT_NAME = PREFIX + "change"


class SpanName:
    """Names of the spans ctxscope writes (SPEC section 4), all of them by ``telemetry.spans``."""

    # gen_ai.operation.name of a model call; its span is named "chat <request model>".
    OPERATION_CHAT = "chat"
    CAPTURE_START = Stage.CAPTURE_START.value
    POST_COMPACTION = Stage.POST_COMPACTION.value
    SESSION_END = "session-end"
    # The span ctxscope writes beside another instrumentation's model call: "ctxscope.context <model>".
    COMPANION_PREFIX = "ctxscope.context"


class ChangeAttr:
    """Attribute keys of an ``llm.context.change`` event (unprefixed, as SPEC says)."""

    ID = "id"
    CATEGORY = "category"
    ESTIMATED_TOKENS = "estimated_tokens"
    DELTA_TOKENS = "delta_tokens"
    CHANGE_TYPE = "change_type"
    CHARS = "chars"
    LABEL = "label"
    SOURCE_KIND = "source_kind"
    SOURCE_CALL_ID = "source_call_id"


class GenAI:
    """OpenTelemetry GenAI semantic convention keys that ctxscope reads or writes."""

    OPERATION_NAME = "gen_ai.operation.name"
    PROVIDER_NAME = "gen_ai.provider.name"
    SYSTEM = "gen_ai.system"  # older conventions, still written by many instrumentations
    REQUEST_MODEL = "gen_ai.request.model"
    RESPONSE_MODEL = "gen_ai.response.model"
    RESPONSE_ID = "gen_ai.response.id"
    RESPONSE_FINISH_REASONS = "gen_ai.response.finish_reasons"
    CONVERSATION_ID = "gen_ai.conversation.id"
    # On the first call span after a compaction, true only (never false).
    CONVERSATION_COMPACTED = "gen_ai.conversation.compacted"
    USAGE_INPUT_TOKENS = "gen_ai.usage.input_tokens"
    USAGE_OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
    USAGE_CACHE_READ_INPUT_TOKENS = "gen_ai.usage.cache_read.input_tokens"
    USAGE_CACHE_CREATION_INPUT_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
    REQUEST_MAX_TOKENS = "gen_ai.request.max_tokens"
    REQUEST_TEMPERATURE = "gen_ai.request.temperature"
    REQUEST_TOP_P = "gen_ai.request.top_p"
    REQUEST_TOP_K = "gen_ai.request.top_k"
    REQUEST_FREQUENCY_PENALTY = "gen_ai.request.frequency_penalty"
    REQUEST_PRESENCE_PENALTY = "gen_ai.request.presence_penalty"
    REQUEST_STOP_SEQUENCES = "gen_ai.request.stop_sequences"
    REQUEST_SEED = "gen_ai.request.seed"
    REQUEST_CHOICE_COUNT = "gen_ai.request.choice.count"
    TOKEN_TYPE = "gen_ai.token.type"  # metric attribute of gen_ai.client.token.usage: input, output
    # General conventions the GenAI spans and metrics use.
    SERVER_ADDRESS = "server.address"
    SERVER_PORT = "server.port"
    ERROR_TYPE = "error.type"
    SYSTEM_INSTRUCTIONS = "gen_ai.system_instructions"
    INPUT_MESSAGES = "gen_ai.input.messages"
    OUTPUT_MESSAGES = "gen_ai.output.messages"
    TOOL_DEFINITIONS = "gen_ai.tool.definitions"


class GenAIMetric:
    """The GenAI conventions' client metrics, recorded for ctxscope's own model calls (docs/telemetry.md).

    Names, units and bucket boundaries as the conventions (and util-genai) give them.
    """

    OPERATION_DURATION = "gen_ai.client.operation.duration"
    OPERATION_DURATION_UNIT = "s"
    TOKEN_USAGE = "gen_ai.client.token.usage"
    TOKEN_USAGE_UNIT = "{token}"
    DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
    TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216,
                     67108864)


# ---------------------------------------------------------------------------
# Metrics (SPEC section 6)
# ---------------------------------------------------------------------------

INSTRUMENTATION_SCOPE = "ctxscope"


class MetricAttr:
    CATEGORY = PREFIX + "category"
    LIMIT = PREFIX + "limit"
    WASTE_KIND = PREFIX + "waste.kind"
    COMPACTION_TRIGGER = PREFIX + "compaction.trigger"
    SESSION_ID = Attr.SESSION_ID
    CONVERSATION_ID = GenAI.CONVERSATION_ID  # only where the application gave one
    REQUEST_MODEL = GenAI.REQUEST_MODEL
    PROVIDER_NAME = GenAI.PROVIDER_NAME


@dataclass(frozen=True, repr=False, eq=False)  # FrozenRecord: see ctxscope._record
class InstrumentSpec(FrozenRecord):
    """A metric instrument as the contract names it: name, kind, unit, description."""

    name: str
    kind: str  # "gauge", "counter" or "histogram"
    unit: str
    description: str
    prometheus_name: str  # as the Collector's prometheus exporter names it
    prometheus_sdk_name: str  # as the SDK's own PrometheusMetricReader names it

    @property
    def prometheus_series(self) -> tuple[str, ...]:
        """Every Prometheus series name of the instrument (a histogram has three)."""
        if self.kind == "histogram":
            return tuple(self.prometheus_name + s for s in ("_bucket", "_sum", "_count"))
        return (self.prometheus_name, self.prometheus_sdk_name)


def _instrument(name: str, kind: str, unit: str, description: str, *, collector: str | None = None) -> InstrumentSpec:
    base = name.replace(".", "_")
    sdk = base + ("_total" if kind == "counter" else "")
    return InstrumentSpec(name, kind, unit, description, collector or sdk, sdk)


class Metric:
    TOKENS = _instrument(
        "llm.context.tokens", "gauge", "{token}",
        "Latest tokens of a context category in a session")
    LIMIT_TOKENS = _instrument(
        "llm.context.limit.tokens", "gauge", "{token}",
        "Context limits of a session: window, effective window, compaction threshold")
    REPORTED_TOKENS = _instrument(
        "llm.context.reported.tokens", "gauge", "{token}",
        "Latest provider-reported input tokens of a session")
    UTILIZATION = _instrument(
        "llm.context.utilization", "gauge", "1",
        "Used context over the lowest known limit",
        collector="llm_context_utilization_ratio")
    WASTE_TOKENS = _instrument(
        "llm.context.waste.tokens", "gauge", "{token}",
        "Wasted context tokens of a session by kind")
    COMPACTIONS = _instrument(
        "llm.context.compactions", "counter", "{compaction}",
        "Context compactions of a session")

    # Histograms, recorded per call in the call span's context (exemplars lead to the call);
    # no session key: a synchronous series is never forgotten by the SDK.
    ADDED_TOKENS = _instrument(
        "llm.context.added.tokens", "histogram", "{token}",
        "Tokens a call added to a context category over the session's previous call")
    REQUEST_TOKENS = _instrument(
        "llm.context.request.tokens", "histogram", "{token}",
        "Context tokens of a category in one request (fleet mode, without the session key)")

    ALL: tuple[InstrumentSpec, ...] = ()  # reported per live session: the gauges and the compaction counter
    HISTOGRAMS: tuple[InstrumentSpec, ...] = ()


Metric.ALL = (Metric.TOKENS, Metric.LIMIT_TOKENS, Metric.REPORTED_TOKENS,
              Metric.UTILIZATION, Metric.WASTE_TOKENS, Metric.COMPACTIONS)
Metric.HISTOGRAMS = (Metric.ADDED_TOKENS, Metric.REQUEST_TOKENS)


# ---------------------------------------------------------------------------
# Items
# ---------------------------------------------------------------------------

@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class Item(Record):
    """One unit of context (SPEC section 1).

    ``text`` is what is counted; it stays in the process and is never exported
    (SPEC section 7). ``fixed_tokens`` is set where the count does not come
    from text (an image by its size, provider framing). ``released``: the text
    was let go once counted (``analyze``, :func:`ctxscope.core.ledger.release_texts`),
    ``tokens`` is its count.
    """

    id: str
    category: Category
    part: str
    chars: int
    text: str = field(default="", repr=False)
    fixed_tokens: int | None = None
    label: str | None = None
    source_kind: str | None = None
    source_call_id: str | None = None
    # Normalised reference for waste analysis, e.g. ``Read:file_path=src/app.py``.
    reference: str | None = field(default=None, repr=False)
    # Digest of the content, so that a persistent id with new content is a replacement.
    digest: str = ""
    tokens: int = 0
    released: bool = False
    # UTF-8 bytes of ``text`` (its characters without one), set with ``tokens`` when the ledger
    # counts the item, so that a released text still gives its size (SessionLedger part sizes).
    utf8_bytes: int = field(default=0, repr=False, compare=False)


# ---------------------------------------------------------------------------
# The annotation
# ---------------------------------------------------------------------------

@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class Change(Record):
    """One ``llm.context.change`` event."""

    id: str
    category: Category
    estimated_tokens: int
    delta_tokens: int
    change_type: ChangeType
    chars: int | None = None
    label: str | None = None
    source_kind: str | None = None
    source_call_id: str | None = None

    def to_attributes(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            ChangeAttr.ID: self.id,
            ChangeAttr.CATEGORY: self.category._value_,
            ChangeAttr.ESTIMATED_TOKENS: self.estimated_tokens,
            ChangeAttr.DELTA_TOKENS: self.delta_tokens,
            ChangeAttr.CHANGE_TYPE: self.change_type._value_,
        }
        # Written out rather than looped: every change event of every span is built here
        # (an enum member's _value_ is its value without the .value descriptor's two calls).
        if self.chars is not None:
            attrs[ChangeAttr.CHARS] = self.chars
        if self.label is not None:
            attrs[ChangeAttr.LABEL] = self.label
        if self.source_kind is not None:
            attrs[ChangeAttr.SOURCE_KIND] = self.source_kind
        if self.source_call_id is not None:
            attrs[ChangeAttr.SOURCE_CALL_ID] = self.source_call_id
        return attrs

    @classmethod
    def from_attributes(cls, attrs: Mapping[str, Any]) -> Change:
        chars = attrs.get(ChangeAttr.CHARS)
        return cls(
            id=str(attrs[ChangeAttr.ID]),
            category=Category(attrs[ChangeAttr.CATEGORY]),
            estimated_tokens=int(attrs[ChangeAttr.ESTIMATED_TOKENS]),
            delta_tokens=int(attrs[ChangeAttr.DELTA_TOKENS]),
            change_type=ChangeType(attrs[ChangeAttr.CHANGE_TYPE]),
            chars=int(chars) if chars is not None else None,
            label=attrs.get(ChangeAttr.LABEL),
            source_kind=attrs.get(ChangeAttr.SOURCE_KIND),
            source_call_id=attrs.get(ChangeAttr.SOURCE_CALL_ID),
        )

    def to_json(self) -> dict[str, Any]:
        return self.to_attributes()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Change:
        return cls.from_attributes(data)


# Optional scalar fields of the annotation, in SPEC order: (field, attribute key, type).
_OPTIONAL_FIELDS: tuple[tuple[str, str, type], ...] = (
    ("item_stage", Attr.ITEM_STAGE, Stage),
    ("sample_offset_ns", Attr.SAMPLE_OFFSET_NS, int),
    ("reported_tokens", Attr.REPORTED_TOKENS, int),
    ("window_tokens", Attr.WINDOW_TOKENS, int),
    ("effective_window_tokens", Attr.EFFECTIVE_WINDOW_TOKENS, int),
    ("compact_threshold_tokens", Attr.COMPACT_THRESHOLD_TOKENS, int),
    ("model", Attr.MODEL, str),
    ("calibration_factor", Attr.CALIBRATION_FACTOR, float),
    ("learned_correction_tokens", Attr.LEARNED_CORRECTION_TOKENS, int),
    ("basis_fallback", Attr.BASIS_FALLBACK, str),
)
# The same fields read in one C call, and their (attribute key, type) in the same order: every span
# ctxscope writes reads them (a getattr a field was a fifth of to_attributes).
_OPTIONAL_VALUES = attrgetter(*(name for name, _, _ in _OPTIONAL_FIELDS))
_OPTIONAL_KEYS: tuple[tuple[str, type], ...] = tuple((key, convert) for _, key, convert in _OPTIONAL_FIELDS)

# The category and waste attribute keys in SPEC order, built once: every span ctxscope writes asks for them.
_CATEGORY_ATTRS: tuple[tuple[Category, str], ...] = tuple((c, Attr.category(c)) for c in CATEGORIES)
_WASTE_ATTRS: tuple[tuple[WasteKind, str], ...] = tuple((k, Attr.waste(k)) for k in WasteKind)


@dataclass(slots=True, repr=False, eq=False)  # Record: see ctxscope._record
class Annotation(Record):
    """The context annotation of one span (SPEC section 4).

    ``categories`` holds the categories present (zero-valued ones may be
    omitted); ``estimated_tokens`` is their sum, ``unattributed`` excluded
    (unattributed is derived from the reported input, not estimated).
    """

    stage: Stage
    basis: str
    coverage: Coverage
    baseline: bool
    categories: dict[Category, int]
    estimated_tokens: int
    item_stage: Stage | None = None
    sample_offset_ns: int | None = None
    reported_tokens: int | None = None
    window_tokens: int | None = None
    effective_window_tokens: int | None = None
    compact_threshold_tokens: int | None = None
    model: str | None = None
    calibration_factor: float | None = None
    # Self-calibration (docs/fidelity.md): signed tokens the learned correction adds to
    # estimated_tokens; only the calibrated view of a request without reported usage applies it.
    learned_correction_tokens: int | None = None
    # SPEC section 3: "loading" or "unavailable" when chars/4 stands in for tiktoken.
    basis_fallback: str | None = None
    omitted_changes: int = 0
    changes: list[Change] = field(default_factory=list)
    waste: dict[WasteKind, int] = field(default_factory=dict)
    compaction_trigger: CompactionTrigger | None = None
    version: int = SPEC_VERSION

    def __post_init__(self) -> None:
        if not is_valid_basis(self.basis):
            raise ValueError(f"unknown basis {self.basis!r}")
        if len(self.changes) > MAX_CHANGES_PER_SPAN:
            raise ValueError(f"at most {MAX_CHANGES_PER_SPAN} changes a span, got {len(self.changes)}")

    # -- span attributes ---------------------------------------------------

    def to_attributes(self) -> dict[str, Any]:
        """Span attributes (changes go to events: see :meth:`change_events`)."""
        attrs: dict[str, Any] = {
            Attr.VERSION: self.version,
            Attr.STAGE: self.stage._value_,
            Attr.BASIS: self.basis,
            Attr.COVERAGE: self.coverage._value_,
            Attr.BASELINE: self.baseline,
        }
        categories = self.categories
        for category, key in _CATEGORY_ATTRS:
            if category in categories:
                attrs[key] = int(categories[category])
        attrs[Attr.ESTIMATED_TOKENS] = self.estimated_tokens
        for (key, convert), value in zip(_OPTIONAL_KEYS, _OPTIONAL_VALUES(self)):
            if value is not None:
                attrs[key] = value.value if isinstance(value, Enum) else convert(value)
        attrs[Attr.OMITTED_CHANGES] = self.omitted_changes
        waste = self.waste
        if waste:
            for waste_kind, key in _WASTE_ATTRS:
                if waste_kind in waste:
                    attrs[key] = int(waste[waste_kind])
        if self.compaction_trigger is not None:
            attrs[Attr.COMPACTION_TRIGGER] = self.compaction_trigger.value
        return attrs

    def change_events(self) -> list[tuple[str, dict[str, Any]]]:
        """``(name, attributes)`` of each change event, largest first."""
        return [(CHANGE_EVENT_NAME, change.to_attributes()) for change in self.changes]

    @classmethod
    def from_attributes(
        cls,
        attrs: Mapping[str, Any],
        events: Iterable[tuple[str, Mapping[str, Any]]] = (),
    ) -> Annotation:
        """Rebuild an annotation from span attributes and ``(name, attributes)`` events."""
        categories: dict[Category, int] = {}
        for category in CATEGORIES:
            value = attrs.get(Attr.category(category))
            if value is not None:
                categories[category] = int(value)
        waste: dict[WasteKind, int] = {}
        for waste_kind in WasteKind:
            value = attrs.get(Attr.waste(waste_kind))
            if value is not None:
                waste[waste_kind] = int(value)
        optional: dict[str, Any] = {}
        for name, key, convert in _OPTIONAL_FIELDS:
            value = attrs.get(key)
            if value is not None:
                optional[name] = convert(value)
        trigger = attrs.get(Attr.COMPACTION_TRIGGER)
        return cls(
            version=int(attrs.get(Attr.VERSION, SPEC_VERSION)),
            stage=Stage(attrs[Attr.STAGE]),
            basis=str(attrs[Attr.BASIS]),
            coverage=Coverage(attrs[Attr.COVERAGE]),
            baseline=bool(attrs[Attr.BASELINE]),
            categories=categories,
            estimated_tokens=int(attrs[Attr.ESTIMATED_TOKENS]),
            omitted_changes=int(attrs.get(Attr.OMITTED_CHANGES, 0)),
            changes=[Change.from_attributes(a) for name, a in events if name == CHANGE_EVENT_NAME],
            waste=waste,
            compaction_trigger=CompactionTrigger(trigger) if trigger is not None else None,
            **optional,
        )

    @staticmethod
    def present_in(attrs: Mapping[str, Any]) -> bool:
        """Whether a span's attributes carry an annotation."""
        return Attr.STAGE in attrs and Attr.ESTIMATED_TOKENS in attrs

    # -- JSON ----------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """SPEC section 4 fields without the prefix, categories as an object."""
        out: dict[str, Any] = {}
        for key, value in self.to_attributes().items():
            name = key[len(PREFIX):]
            if name.startswith("categories.") or name.startswith("waste."):
                continue
            out[name] = value
        out["categories"] = {c.value: int(v) for c, v in self.categories.items()}
        if self.waste:
            out["waste"] = {k.value: int(v) for k, v in self.waste.items()}
        out["changes"] = [c.to_json() for c in self.changes]
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Annotation:
        attrs: dict[str, Any] = {}
        for name, value in data.items():
            if name in ("categories", "changes", "waste"):
                continue
            attrs[PREFIX + name] = value
        for name, value in (data.get("categories") or {}).items():
            attrs[Attr.category(name)] = value
        for name, value in (data.get("waste") or {}).items():
            attrs[Attr.waste(name)] = value
        events = [(CHANGE_EVENT_NAME, c) for c in data.get("changes") or ()]
        return cls.from_attributes(attrs, events)

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=False)


def sum_categories(categories: Mapping[Category, int], *, include_unattributed: bool = False) -> int:
    return sum(v for c, v in categories.items() if include_unattributed or c is not Category.UNATTRIBUTED)


def ordered(categories: Mapping[Category, int]) -> Sequence[tuple[Category, int]]:
    """Categories in report order."""
    return [(c, categories[c]) for c in CATEGORIES if c in categories]
