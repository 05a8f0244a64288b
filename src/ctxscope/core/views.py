"""Calibrated and apportioned views of a snapshot (SPEC section 5).

The annotation keeps raw estimates; these functions derive the two labelled
views from them and the provider-reported input:

- :func:`calibrate`: per category. ``used = reported``; estimates above it are
  scaled down by ``factor = reported / estimated`` with largest-remainder
  rounding so they sum exactly to ``reported``; estimates below it keep their
  values and ``unattributed`` takes the difference (factor 1).
- :func:`apportion`: an integer total split among weighted parts so the parts
  add up to it exactly (largest remainder, deterministic tie-break).

Pure: integers in, integers out; no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

from typing import Hashable, Mapping, TypeVar

from ctxscope.schema import CATEGORIES, Category

# Read once: every call of an analysis asks here, and an enum class attribute is looked up through
# EnumType's __getattr__ hook (several times a plain attribute's cost).
_UNATTRIBUTED = Category.UNATTRIBUTED

K = TypeVar("K", bound=Hashable)

__all__ = ["apportion", "calibrate", "calibration_target", "free_tokens", "used_tokens"]


def apportion(weights: Mapping[K, int], total: int) -> dict[K, int]:
    """Split ``total`` among the keys of ``weights`` in proportion, summing exactly to it.

    Each key gets ``floor(total * w / W)``; the units left over go one each to
    the largest remainders, ties broken by the larger weight, then by the key's
    position in ``weights`` (callers pass keys in a stable order: report order
    for categories, sorted paths for parts). Zero and negative weights get 0.
    When every weight is 0 the total cannot be split by weight: it goes, again
    by largest remainder, evenly among the keys (an empty mapping gives ``{}``).
    """
    if total < 0:
        raise ValueError(f"cannot apportion a negative total ({total})")
    keys = list(weights)
    if not keys:
        return {}
    clean = [max(0, int(weights[k])) for k in keys]
    whole = sum(clean)
    if whole == 0:
        clean = [1] * len(keys)
        whole = len(keys)
    shares: list[int] = []
    remainders: list[tuple[int, int, int]] = []
    for index, weight in enumerate(clean):
        share, remainder = divmod(total * weight, whole)
        shares.append(share)
        if remainder:
            # Sort key: largest remainder first, then the larger weight, then position.
            remainders.append((-remainder, -weight, index))
    left = total - sum(shares)
    if left:
        remainders.sort()
        for _, _, index in remainders[:left]:
            shares[index] += 1
    return dict(zip(keys, shares, strict=True))


def calibrate(categories: Mapping[Category, int],
              reported: int | None) -> tuple[dict[Category, int], float | None]:
    """The calibrated view of raw category estimates, and the calibration factor.

    Without a measurement (``reported`` is None) the estimates come back
    unchanged and the factor is None: there is nothing to calibrate against.
    With one, the result always holds ``unattributed`` (0 when the estimates
    reach the measurement), sums exactly to ``reported``, and no value is
    negative. An ``unattributed`` entry in the input is ignored: it is derived
    here, never estimated.
    """
    estimates, estimated = _estimates(categories)
    if reported is None:
        return estimates, None
    if reported < 0:
        raise ValueError(f"reported tokens cannot be negative ({reported})")
    if estimated > reported:
        ordered_estimates: dict[Category, int] = {c: estimates[c] for c in CATEGORIES if c in estimates}
        scaled = apportion(ordered_estimates, reported)
        scaled[_UNATTRIBUTED] = 0
        return scaled, reported / estimated
    calibrated = estimates  # a new dict already, nobody else's
    calibrated[_UNATTRIBUTED] = reported - estimated
    return calibrated, 1.0


def _estimates(categories: Mapping[Category, int]) -> tuple[dict[Category, int], int]:
    """The estimates without ``unattributed``, none below 0, as whole numbers; and their sum.

    A ledger's categories already are (a sum of ints is an int: one float makes
    it a float): copied in C, as every call of an analysis asks.
    """
    if _UNATTRIBUTED not in categories:
        try:
            total = sum(categories.values())
        except TypeError:
            total = None
        if type(total) is int and min(categories.values(), default=0) >= 0:
            return dict(categories), total
    estimates: dict[Category, int] = {
        c: max(0, int(v)) for c, v in categories.items() if c is not _UNATTRIBUTED}
    return estimates, sum(estimates.values())


def calibration_target(reported: int | None, estimated: int, learned_correction: int | None) -> int | None:
    """The total the calibrated view sums to, or None when there is nothing to calibrate against.

    The provider-reported input where it exists; else, when self-calibration
    has learned a correction for the request (``llm.context.learned_correction_tokens``,
    docs/fidelity.md), the estimate plus that correction, never below 0; else
    None. One rule for the span processor's gauges and the ledger's views
    (``ctxscope context``, the local store), so the two always agree.
    """
    if reported is not None:
        return reported
    if learned_correction is not None:
        return max(0, int(estimated) + int(learned_correction))
    return None


def used_tokens(categories: Mapping[Category, int], reported: int | None) -> int:
    """Tokens in use: the measurement where there is one, else the estimates' sum."""
    if reported is not None:
        return reported
    return sum(v for c, v in categories.items() if c is not _UNATTRIBUTED)


def free_tokens(window: int | None, used: int) -> int | None:
    """``max(0, window - used)``, or None when the window is unknown."""
    if window is None:
        return None
    return max(0, window - used)
