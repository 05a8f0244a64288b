"""The contract as code: annotation round trips and names."""

from ctxscope.schema import (
    Annotation, Attr, Category, Change, ChangeType, Coverage, Metric, Stage, WasteKind,
    CHANGE_EVENT_NAME,
)


def _annotation() -> Annotation:
    return Annotation(
        stage=Stage.REQUEST_INPUT, basis="tiktoken/o200k_base", coverage=Coverage.COMPLETE,
        baseline=False, categories={Category.SYSTEM: 120, Category.RESULTS: 30},
        estimated_tokens=150, reported_tokens=170, window_tokens=128000, model="gpt-4o",
        calibration_factor=1.0, omitted_changes=2, sample_offset_ns=5,
        changes=[Change("call_1", Category.RESULTS, 30, 30, ChangeType.ADDITION, chars=119,
                        label="read_file", source_kind="tool_result", source_call_id="call_1")],
        waste={WasteKind.DUPLICATE: 12},
    )


def test_attributes_round_trip_exactly():
    """An annotation survives span attributes plus change events unchanged."""
    ann = _annotation()
    attrs = ann.to_attributes()
    assert attrs["llm.context.categories.system"] == 120
    assert attrs["llm.context.stage"] == "request-input"
    assert attrs["llm.context.version"] == 2
    assert "llm.context.categories.tools" not in attrs
    events = ann.change_events()
    assert events[0][0] == CHANGE_EVENT_NAME == "llm.context.change"
    assert events[0][1]["delta_tokens"] == 30
    assert Annotation.from_attributes(attrs, events) == ann


def test_json_round_trip_exactly():
    """The JSON form drops the prefix, keeps categories as an object, and round-trips."""
    ann = _annotation()
    data = ann.to_json()
    assert data["categories"] == {"system": 120, "results": 30}
    assert data["estimated_tokens"] == 150 and data["basis"] == "tiktoken/o200k_base"
    assert "categories.system" not in data
    assert Annotation.from_json(data) == ann


def test_prometheus_names_follow_spec_section_6():
    """Series names are derived, as the Collector and the SDK reader name them."""
    assert Metric.TOKENS.prometheus_name == "llm_context_tokens"
    assert Metric.COMPACTIONS.prometheus_name == "llm_context_compactions_total"
    assert Metric.UTILIZATION.prometheus_name == "llm_context_utilization_ratio"
    assert Metric.UTILIZATION.prometheus_sdk_name == "llm_context_utilization"
    assert Attr.category(Category.TOOLS) == "llm.context.categories.tools"
