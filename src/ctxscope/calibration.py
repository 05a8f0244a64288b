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

from .schema import CATEGORIES, Category

K = TypeVar("K", bound=Hashable)

__all__ = ["apportion", "calibrate", "free_tokens", "used_tokens"]


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
    estimates: dict[Category, int] = {
        c: max(0, int(v)) for c, v in categories.items() if c is not Category.UNATTRIBUTED}
    if reported is None:
        return estimates, None
    if reported < 0:
        raise ValueError(f"reported tokens cannot be negative ({reported})")
    estimated = sum(estimates.values())
    if estimated > reported:
        ordered_estimates: dict[Category, int] = {c: estimates[c] for c in CATEGORIES if c in estimates}
        scaled = apportion(ordered_estimates, reported)
        scaled[Category.UNATTRIBUTED] = 0
        return scaled, reported / estimated
    calibrated: dict[Category, int] = dict(estimates)
    calibrated[Category.UNATTRIBUTED] = reported - estimated
    return calibrated, 1.0


def used_tokens(categories: Mapping[Category, int], reported: int | None) -> int:
    """Tokens in use: the measurement where there is one, else the estimates' sum."""
    if reported is not None:
        return reported
    return sum(v for c, v in categories.items() if c is not Category.UNATTRIBUTED)


def free_tokens(window: int | None, used: int) -> int | None:
    """``max(0, window - used)``, or None when the window is unknown."""
    if window is None:
        return None
    return max(0, window - used)
