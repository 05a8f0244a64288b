"""Calibrated and apportioned views (SPEC section 5), values worked out by hand."""

from __future__ import annotations

import pytest

from ctxscope.core.views import apportion, calibrate, free_tokens, used_tokens
from ctxscope.schema import Category

S, R, K, P = Category.SYSTEM, Category.RULES, Category.SKILLS, Category.PROMPTS
U = Category.UNATTRIBUTED


def test_estimates_above_reported_are_scaled_down_exactly() -> None:
    """10 + 30 estimated against 20 reported: factor 0.5, categories 5 and 15."""
    calibrated, factor = calibrate({S: 10, P: 30}, 20)
    assert calibrated == {S: 5, P: 15, U: 0}
    assert factor == 0.5


def test_largest_remainder_ties_go_to_the_larger_weight() -> None:
    """7 + 3 scaled to 5: 3.5 and 1.5 tie on remainder; the larger weight takes the unit."""
    calibrated, factor = calibrate({S: 7, P: 3}, 5)
    assert calibrated == {S: 4, P: 1, U: 0}
    assert factor == 0.5


def test_equal_ties_go_by_report_order() -> None:
    """1 + 1 + 1 scaled to 2: each 2/3, the first two categories in report order get a unit."""
    calibrated, _ = calibrate({K: 1, S: 1, R: 1}, 2)
    assert calibrated == {S: 1, R: 1, K: 0, U: 0}


def test_estimates_below_reported_leave_unattributed() -> None:
    """10 + 5 estimated against 25 reported: unattributed 10, factor 1, estimates kept."""
    calibrated, factor = calibrate({S: 10, P: 5}, 25)
    assert calibrated == {S: 10, P: 5, U: 10}
    assert factor == 1.0


def test_exact_estimate_has_zero_unattributed() -> None:
    """Estimates equal to the measurement: unattributed 0, factor 1."""
    assert calibrate({S: 12}, 12) == ({S: 12, U: 0}, 1.0)


def test_no_measurement_keeps_estimates_and_no_factor() -> None:
    """Without reported tokens the view is the estimates and the factor is None."""
    assert calibrate({S: 3, P: 4}, None) == ({S: 3, P: 4}, None)


def test_reported_zero_scales_everything_to_zero() -> None:
    """A reported 0 against 9 estimated: every category 0, factor 0."""
    assert calibrate({S: 4, P: 5}, 0) == ({S: 0, P: 0, U: 0}, 0.0)


def test_nothing_estimated_is_all_unattributed() -> None:
    """No estimates and 100 reported: unattributed 100, factor 1."""
    assert calibrate({}, 100) == ({U: 100}, 1.0)


def test_unattributed_input_is_ignored() -> None:
    """An unattributed value in the input is derived again, not trusted."""
    assert calibrate({S: 10, U: 999}, 15) == ({S: 10, U: 5}, 1.0)


def test_negative_reported_is_rejected() -> None:
    """A negative measurement is a caller bug: ValueError."""
    with pytest.raises(ValueError):
        calibrate({S: 1}, -1)


def test_apportion_sums_exactly() -> None:
    """10 split by 1:1:1 is 4, 3, 3 (the first key takes the extra unit)."""
    assert apportion({"a": 1, "b": 1, "c": 1}, 10) == {"a": 4, "b": 3, "c": 3}


def test_apportion_by_weight() -> None:
    """100 split by 1:2:7 is 10, 20, 70 with no remainder."""
    assert apportion({"x": 1, "y": 2, "z": 7}, 100) == {"x": 10, "y": 20, "z": 70}


def test_apportion_remainders() -> None:
    """7 split by 2:3: 2.8 and 4.2, so 3 and 4."""
    assert apportion({"a": 2, "b": 3}, 7) == {"a": 3, "b": 4}


def test_apportion_zero_weights_split_evenly() -> None:
    """All-zero weights share the total evenly: 3 over two keys is 2 and 1."""
    assert apportion({"a": 0, "b": 0}, 3) == {"a": 2, "b": 1}


def test_apportion_edges() -> None:
    """An empty mapping gives {}, a zero total gives zeros, a negative total is refused."""
    assert apportion({}, 5) == {}
    assert apportion({"a": 3, "b": 0}, 0) == {"a": 0, "b": 0}
    with pytest.raises(ValueError):
        apportion({"a": 1}, -2)


def test_free_and_used() -> None:
    """free = max(0, window - used); used is reported when known, else the estimates."""
    assert free_tokens(1000, 400) == 600
    assert free_tokens(1000, 1200) == 0
    assert free_tokens(None, 5) is None
    assert used_tokens({S: 3, P: 4, U: 50}, None) == 7
    assert used_tokens({S: 3, P: 4}, 20) == 20
