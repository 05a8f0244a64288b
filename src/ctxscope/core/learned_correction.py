"""Self-calibration: learn, per model and tool set, what the framing model misses.

Every call whose usage arrives gives a pair (estimate, reported). What the
framing model does not explain is mostly one of two shapes, or both:

- a **fixed hidden part** (a hidden system prompt, a server tool's definition):
  the residual ``reported - estimate`` is the same whatever the request size;
- a **ratio** (a proxy encoding, e.g. o200k_base counting Claude text): the
  residual grows in proportion to the estimate;
- **both** (a proxy encoding under a hidden prompt): ``reported = a * estimate + b``.

:class:`SelfCalibrator` keeps the pairs of each (model, tools key) and, from
:data:`MIN_PAIRS` pairs on, fits each shape robustly (median of residuals;
median of ratios; Theil-Sen line: median of pairwise slopes, then median
intercept) and keeps the one with the smallest median absolute error on the
pairs seen, the two-parameter line only when it clearly beats the others
(:data:`AFFINE_MARGIN`) and the estimates spread enough to define a slope;
with fewer pairs it uses the latest pair's residual. Medians,
not means, so that one odd call (a retry, a server-tool loop) does not move
the correction. Raw estimates stay raw: the correction is reported as an
attribute of its own (``schema.Attr.LEARNED_CORRECTION_TOKENS``) and applied
only in the calibrated figure.

Thread-safe: instrumentation calls :meth:`learn` from whichever thread
finished a call, while another thread asks for :meth:`corrected`.

Pure: no OpenTelemetry, no provider SDK.
"""

from __future__ import annotations

import threading
from bisect import bisect_left, insort
from collections import deque
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from ctxscope._record import FrozenRecord

# Pairs kept per key: recent calls only, so a provider-side change is learned anew.
WINDOW = 32
# From this many pairs on, choose between offset and ratio; below, offset of the latest.
MIN_PAIRS = 3

MODE_OFFSET = "offset"
MODE_RATIO = "ratio"
MODE_AFFINE = "affine"
# The line has two parameters: keep it only when its error is below this share of the best one-parameter fit's.
AFFINE_MARGIN = 0.8
# Pairs whose estimates differ by less than this share do not define a slope.
MIN_SLOPE_SPREAD = 0.02

ANY_TOOLS = "*"  # the tools key under which a model's corrections for any client tool set are pooled
# framing.tools_key marks tool sets with a server tool so (kept in sync: this module imports no framing).
SERVER_TOOLS_KEY_PREFIX = "s:"
# Plausible slopes of a learned line: tokenizers differ by well under 2x on text.
SLOPE_RANGE = (0.5, 2.0)


@dataclass(frozen=True, slots=True, repr=False, eq=False)  # FrozenRecord: see ctxscope._record
class Correction(FrozenRecord):
    """What was learned for one (model, tools key)."""

    model: str
    tools_key: str
    mode: str  # "offset", "ratio" or "affine"
    offset: float  # tokens added to an estimate (modes offset and affine)
    ratio: float  # factor applied to an estimate (modes ratio and affine)
    pairs: int  # pairs it was learned from
    median_abs_error: float  # median |calibrated - reported| / reported over those pairs

    def apply(self, estimated: int) -> int:
        if self.mode == MODE_RATIO:
            return max(0, round(estimated * self.ratio))
        if self.mode == MODE_AFFINE:
            return max(0, round(estimated * self.ratio + self.offset))
        return max(0, round(estimated + self.offset))

    def tokens(self, estimated: int) -> int:
        """The correction in tokens for an estimate (what the annotation reports)."""
        return self.apply(estimated) - estimated

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "tools_key": self.tools_key, "mode": self.mode,
                "offset": self.offset, "ratio": self.ratio, "pairs": self.pairs,
                "median_abs_error": self.median_abs_error}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Correction":
        return cls(model=str(data["model"]), tools_key=str(data["tools_key"]),
                   mode=str(data["mode"]), offset=float(data["offset"]), ratio=float(data["ratio"]),
                   pairs=int(data["pairs"]), median_abs_error=float(data.get("median_abs_error", 0.0)))


def _median(values: list[float] | list[int]) -> float:
    """``statistics.median`` of a non-empty list, without its generality (the same value).

    Not ``statistics`` itself: importing it (and fractions, random) costs ~15 ms of
    ``analyze``'s start-up, for a sort and a middle element.
    """
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _median_abs_error(pairs: Iterable[tuple[int, int]], fn) -> float:
    errors = [abs(fn(e) - r) / r for e, r in pairs if r > 0]
    return _median(errors) if errors else 0.0


def fit(model: str, tools_key: str, pairs: list[tuple[int, int]]) -> Correction | None:
    """The correction that best explains ``(estimate, reported)`` pairs, or None without pairs."""
    usable = [(e, r) for e, r in pairs if e > 0 and r > 0]
    if not usable:
        return None
    offsets = [r - e for e, r in usable]
    if len(usable) < MIN_PAIRS:
        offset = float(offsets[-1])
        errors = [abs(e + offset - r) / r for e, r in usable]
        return Correction(model, tools_key, MODE_OFFSET, offset, 1.0, len(usable), _median(errors))
    offset = float(_median(offsets))
    ratio = float(_median([r / e for e, r in usable]))
    offset_error = _median_abs_error(usable, lambda e: e + offset)
    ratio_error = _median_abs_error(usable, lambda e: e * ratio)
    # A tie keeps the offset: a fixed hidden prompt is the commoner cause.
    if ratio_error < offset_error:
        best = Correction(model, tools_key, MODE_RATIO, 0.0, ratio, len(usable), ratio_error)
    else:
        best = Correction(model, tools_key, MODE_OFFSET, offset, 1.0, len(usable), offset_error)
    line = _theil_sen(usable)
    if line is not None:
        slope, intercept = line
        line_error = _median_abs_error(usable, lambda e: e * slope + intercept)
        if line_error < best.median_abs_error * AFFINE_MARGIN:
            return Correction(model, tools_key, MODE_AFFINE, intercept, slope, len(usable), line_error)
    return best


def _theil_sen(pairs: list[tuple[int, int]]) -> tuple[float, float] | None:
    """Median pairwise slope and median intercept; None when the estimates barely spread.

    Quadratic in the pairs, so only the latest :data:`WINDOW` are used whatever
    the calibrator's window.
    """
    pairs = pairs[-WINDOW:]
    slopes = []
    for i, (e1, r1) in enumerate(pairs):
        for e2, r2 in pairs[i + 1:]:
            if abs(e2 - e1) >= MIN_SLOPE_SPREAD * max(e1, e2):
                slopes.append((r2 - r1) / (e2 - e1))
    if len(slopes) < MIN_PAIRS:
        return None
    slope = _median(slopes)
    if not SLOPE_RANGE[0] <= slope <= SLOPE_RANGE[1]:
        return None
    return slope, _median([r - slope * e for e, r in pairs])


class OffsetLearner:
    """The offset mode alone, kept incrementally: a transcript's hidden system prompt and tools.

    What :func:`fit` does for the offset shape, per key: the median residual
    ``reported - estimate`` of the last ``window`` pairs from :data:`MIN_PAIRS`
    pairs on, the latest residual before. The size of the fixed hidden part is
    what is wanted there (``ctxscope.transcripts.prefix``), not the best
    predictor, so no other shape is fitted. It is asked once a call of every
    transcript call: the window is kept sorted (a bisect per pair) rather than
    sorted again, and no error figure is worked out, so a call costs the same
    however long the session.
    """

    __slots__ = ("_window", "_recent", "_sorted")

    def __init__(self, window: int = WINDOW) -> None:
        if window < 1:
            raise ValueError("window must be at least 1")
        self._window = window
        self._recent: dict[str, deque[int]] = {}  # key -> residuals, oldest first
        self._sorted: dict[str, list[int]] = {}  # key -> the same residuals, in order

    def learn(self, key: str, estimated: int, reported: int) -> tuple[float, int] | None:
        """Take one pair; the offset learned for ``key`` and the pairs it rests on (None: pair unusable)."""
        if estimated <= 0 or reported <= 0:
            return None
        offset = int(reported) - int(estimated)
        recent = self._recent.get(key)
        if recent is None:
            recent = self._recent[key] = deque()
            self._sorted[key] = []
        ordered = self._sorted[key]
        if len(recent) >= self._window:
            del ordered[bisect_left(ordered, recent.popleft())]
        recent.append(offset)
        insort(ordered, offset)
        count = len(ordered)
        if count < MIN_PAIRS:
            return float(offset), count
        mid = count // 2
        # _median's value on a list already sorted.
        return float(ordered[mid] if count % 2 else (ordered[mid - 1] + ordered[mid]) / 2), count


class SelfCalibrator:
    """Per-model, per-tool-set corrections learned from observed (estimate, reported) pairs."""

    def __init__(self, window: int = WINDOW) -> None:
        if window < 1:
            raise ValueError("window must be at least 1")
        self._window = window
        self._pairs: dict[tuple[str, str], deque[tuple[int, int]]] = {}
        self._fitted: dict[tuple[str, str], Correction] = {}
        self._lock = threading.Lock()

    def learn(self, model: str, tools_key: str, estimated: int, reported: int) -> Correction | None:
        """Record one call's raw (framed) estimate and the provider's reported input."""
        if estimated <= 0 or reported <= 0:
            return None
        keys = [(model, tools_key)]
        if not tools_key.startswith(SERVER_TOOLS_KEY_PREFIX) and tools_key != ANY_TOOLS:
            keys.append((model, ANY_TOOLS))
        with self._lock:
            for key in keys:
                pairs = self._pairs.setdefault(key, deque(maxlen=self._window))
                pairs.append((int(estimated), int(reported)))
                fitted = fit(key[0], key[1], list(pairs))
                if fitted is not None:
                    self._fitted[key] = fitted
            return self._fitted.get((model, tools_key))

    def correction(self, model: str, tools_key: str) -> Correction | None:
        """The correction for a model and tool set; the model's pooled one when the set is new.

        A set with a server tool (``tools_key`` ``s:...``) is never pooled: its hidden
        part belongs to it, so an unseen one has no correction yet.
        """
        with self._lock:
            fitted = self._fitted.get((model, tools_key))
            if fitted is None and not tools_key.startswith(SERVER_TOOLS_KEY_PREFIX):
                fitted = self._fitted.get((model, ANY_TOOLS))
            return fitted

    def corrected(self, model: str, tools_key: str, estimated: int) -> int:
        """The calibrated figure for a request whose usage has not arrived (the estimate if nothing is learned)."""
        correction = self.correction(model, tools_key)
        return correction.apply(estimated) if correction is not None else estimated

    def correction_tokens(self, model: str, tools_key: str, estimated: int) -> int | None:
        """Tokens the learned correction adds to an estimate, or None when nothing is learned."""
        correction = self.correction(model, tools_key)
        return correction.tokens(estimated) if correction is not None else None

    def corrections(self) -> list[Correction]:
        """Everything learned, for reports and for the local store."""
        with self._lock:
            return sorted(self._fitted.values(), key=lambda c: (c.model, c.tools_key))

    # -- persistence (the local store keeps this JSON per model) --------------

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return {"version": 1, "window": self._window,
                    "pairs": [{"model": m, "tools_key": k, "pairs": [list(p) for p in pairs]}
                              for (m, k), pairs in sorted(self._pairs.items())]}

    def models(self) -> list[str]:
        with self._lock:
            return sorted({model for model, _ in self._pairs})

    def model_json(self, model: str) -> dict[str, Any]:
        """One model's pairs, the shape ``store.LocalStore.save_calibration(model, data)`` keeps."""
        with self._lock:
            return {"version": 1, "window": self._window,
                    "pairs": [{"model": m, "tools_key": k, "pairs": [list(p) for p in pairs]}
                              for (m, k), pairs in sorted(self._pairs.items()) if m == model]}

    def restore(self, data: Mapping[str, Any] | None) -> None:
        """Merge pairs saved by :meth:`to_json` or :meth:`model_json` (e.g. from the local store).

        Saved pairs go before the ones of this process, so recent calls weigh in
        the window; malformed entries are skipped.
        """
        if not data:
            return
        with self._lock:
            for entry in data.get("pairs") or ():
                try:
                    key = (str(entry["model"]), str(entry["tools_key"]))
                    saved = [(int(e), int(r)) for e, r in entry["pairs"]]
                except (KeyError, TypeError, ValueError):
                    continue
                current = list(self._pairs.get(key, ()))
                pairs = deque(saved + current, maxlen=self._window)
                self._pairs[key] = pairs
                fitted = fit(key[0], key[1], list(pairs))
                if fitted is not None:
                    self._fitted[key] = fitted

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "SelfCalibrator":
        calibrator = cls(int(data.get("window", WINDOW)))
        calibrator.restore(data)
        return calibrator
