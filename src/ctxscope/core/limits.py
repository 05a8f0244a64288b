"""Context windows and prices of models, and the user's overrides.

Source: the ``genai-prices`` package (Pydantic's maintained price and model
database, the ``prices`` extra), which carries each model's context window
and its prices per million tokens, cache reads and writes included, with
provider-specific model matching (dated names, aliases). Where it is not
installed or does not know a model, a small documented table of model
families gives the window (:data:`FALLBACK_WINDOWS`) and the price is
unknown: ctxscope never invents a price.

The user overrides the window, the harness's effective window (where it
compacts earlier than the model's capacity) and the compaction threshold,
through :func:`configure` or the environment (read once, at first use):

* ``CTXSCOPE_WINDOW_TOKENS``, ``CTXSCOPE_EFFECTIVE_WINDOW_TOKENS``: a number
  of tokens for every model, or ``pattern=tokens`` pairs separated by commas
  (``gpt-4o*=128000,claude-*=200000``; shell-style patterns on the model name).
* ``CTXSCOPE_COMPACT_THRESHOLD_TOKENS``: the same, where a value may also be a
  percentage (``80%``) of the effective window, else of the window.
"""

from __future__ import annotations

import fnmatch
import logging
import threading
from dataclasses import dataclass, replace
from decimal import Decimal
from functools import lru_cache
from typing import Mapping

from ctxscope._record import FrozenRecord, Record
from ctxscope.config import LimitRule, cache_dir, parse_limit_rule, settings
from ctxscope.core.installed import distribution_version

__all__ = [
    "FALLBACK_WINDOWS",
    "Limits",
    "Prices",
    "configure",
    "cost_usd",
    "limits_for",
    "prices_for",
    "reset",
]

_log = logging.getLogger(__name__)

SOURCE_GENAI_PRICES = "genai-prices"
SOURCE_TABLE = "table"
SOURCE_OVERRIDE = "override"

# Model-family windows (tokens), used only without genai-prices or for models
# it does not know. From the providers' model pages; first match wins.
FALLBACK_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-4.1*", 1_047_576),
    ("gpt-5*", 400_000),
    ("gpt-4o*", 128_000),
    ("chatgpt-4o*", 128_000),
    ("gpt-4-turbo*", 128_000),
    ("gpt-4-32k*", 32_768),
    ("gpt-4*", 8_192),
    ("gpt-3.5-turbo*", 16_385),
    ("o1-mini*", 128_000),
    ("o1*", 200_000),
    ("o3*", 200_000),
    ("o4*", 200_000),
    ("codex*", 400_000),
    ("claude-*", 200_000),
)


@dataclass(frozen=True, repr=False, eq=False)  # FrozenRecord: see ctxscope._record
class Limits(FrozenRecord):
    """A model's context limits (tokens); None where unknown."""

    window_tokens: int | None = None
    effective_window_tokens: int | None = None
    compact_threshold_tokens: int | None = None
    source: str = "unknown"  # where the window came from: genai-prices, table, override, unknown


@dataclass(frozen=True, repr=False, eq=False)  # FrozenRecord: see ctxscope._record
class Prices(FrozenRecord):
    """USD per million tokens; a None price is unknown."""

    input: Decimal | None
    output: Decimal | None
    cache_read: Decimal | None
    cache_write: Decimal | None
    model_id: str
    provider_id: str
    source: str = SOURCE_GENAI_PRICES


# ---------------------------------------------------------------------------
# Overrides
# ---------------------------------------------------------------------------

@dataclass(repr=False, eq=False)  # Record: see ctxscope._record
class _Overrides(Record):
    """The window and threshold rules in force: the environment's, with :func:`configure`'s first."""

    window: list[LimitRule]
    effective_window: list[LimitRule]
    compact_threshold: list[LimitRule]


_lock = threading.Lock()
_overrides: _Overrides | None = None


def _from_environment() -> _Overrides:
    current = settings()
    return _Overrides(list(current.window_tokens), list(current.effective_window_tokens),
                      list(current.compact_threshold_tokens))


def _current() -> _Overrides:
    global _overrides
    with _lock:
        if _overrides is None:
            _overrides = _from_environment()
        return _overrides


def configure(*, window_tokens: int | None = None, effective_window_tokens: int | None = None,
              compact_threshold_tokens: int | str | None = None, model: str = "*") -> None:
    """Override limits for models matching ``model`` (a shell pattern; default every model).

    ``compact_threshold_tokens`` may be a percentage string (``"80%"``). Later
    calls take precedence over earlier ones and over the environment.
    Raises ``ValueError`` for a value that is not a positive number.
    """
    rules = _current()
    new: list[tuple[list[LimitRule], LimitRule]] = []
    if window_tokens is not None:
        new.append((rules.window, parse_limit_rule(f"{model}={window_tokens}", "window_tokens", False)))
    if effective_window_tokens is not None:
        new.append((rules.effective_window,
                    parse_limit_rule(f"{model}={effective_window_tokens}", "effective_window_tokens", False)))
    if compact_threshold_tokens is not None:
        new.append((rules.compact_threshold,
                    parse_limit_rule(f"{model}={compact_threshold_tokens}", "compact_threshold_tokens", True)))
    with _lock:
        for target, rule in new:
            target.insert(0, rule)
    limits_for.cache_clear()


def reset(*, from_environment: bool = True) -> None:
    """Forget overrides made with :func:`configure`; re-read the environment (or not)."""
    global _overrides, _lookups
    with _lock:
        _overrides = None if from_environment else _Overrides([], [], [])
    limits_for.cache_clear()
    _model_info.cache_clear()
    _lookup.cache_clear()
    with _lookups_lock:
        _lookups = None  # read the lookups file again


def _first(rules: list[LimitRule], model: str) -> LimitRule | None:
    for rule in rules:
        if rule.matches(model):
            return rule
    return None


# ---------------------------------------------------------------------------
# Lookups
# ---------------------------------------------------------------------------

@lru_cache(maxsize=512)
def _model_info(model: str, provider: str | None) -> tuple[object, object] | None:
    """``(provider, model)`` from genai-prices, or None (not installed, unknown model)."""
    try:
        from genai_prices import data_snapshot
    except ImportError:
        return None
    try:
        return data_snapshot.get_snapshot().find_provider_model(model, None, provider, None)
    except LookupError:
        if provider is not None:
            try:  # a gateway's provider name: let genai-prices find the model's own provider
                return data_snapshot.get_snapshot().find_provider_model(model, None, None, None)
            except LookupError:
                return None
        return None
    except Exception as exc:  # noqa: BLE001 - a data problem must not break the caller
        _log.warning("ctxscope: genai-prices lookup of %s failed: %r", model, exc)
        return None


# genai-prices holds its whole database as Python objects: importing it costs
# ~0.4 s and ~21 MB, for the one or two models a session uses. What a lookup
# found is kept in the user's cache directory, per genai-prices version and UTC day
# (prices change on dates), so a later run asks the database only about
# models it has not seen. The file is in ctxscope's cache directory
# (config.cache_dir), never the local store's. A cache that cannot be read or written is skipped:
# the lookup then goes to the database, with the same answer.
_LOOKUPS_FILE = "genai-prices-lookups.json"
_lookups_lock = threading.Lock()
_lookups: dict[str, dict[str, object] | None] | None = None
_lookups_stamp: tuple[str, str] | None = None


def _lookup_stamp() -> tuple[str, str] | None:
    """(genai-prices version, UTC day), or None when genai-prices is not installed."""
    from datetime import datetime, timezone

    version = _genai_prices_version()
    return (version, datetime.now(timezone.utc).date().isoformat()) if version is not None else None


@lru_cache(maxsize=1)
def _genai_prices_version() -> str | None:
    """The installed genai-prices version (``core/installed.py``: its ``.dist-info`` folder, not
    ``importlib.metadata``, a third of ``analyze``'s start-up to read a folder name)."""
    try:
        return distribution_version("genai_prices", "genai-prices")
    except Exception:  # noqa: BLE001 - no metadata: treat as not installed for the cache, ask the database
        return None


def _lookups_path() -> str:
    """In the user's cache directory (``$XDG_CACHE_HOME/ctxscope``, else ``~/.cache/ctxscope``).

    Not the data directory: that is the local store's, which stays uncreated unless the store is on.
    """
    import os

    return os.path.join(str(cache_dir()), _LOOKUPS_FILE)


def _load_lookups(stamp: tuple[str, str]) -> dict[str, dict[str, object] | None]:
    import json

    try:
        with open(_lookups_path(), encoding="utf-8") as handle:
            saved = json.load(handle)
        if isinstance(saved, dict) and saved.get("stamp") == list(stamp) and isinstance(saved.get("models"), dict):
            return dict(saved["models"])
    except (OSError, ValueError):
        pass
    return {}


def _save_lookups(stamp: tuple[str, str], models: Mapping[str, object]) -> None:
    import json
    import os
    import tempfile

    path = _lookups_path()
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".lookups-", dir=os.path.dirname(path))
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump({"stamp": list(stamp), "models": models}, handle)
        os.replace(tmp, path)  # whole or not at all: runs in parallel read a complete file
    except OSError as exc:
        _log.debug("ctxscope: cannot save model lookups to %s: %r", path, exc)


def _decimal(value: object) -> str | None:
    price = _price(value)
    return None if price is None else str(price)


@lru_cache(maxsize=512)
def _lookup(model: str, provider: str | None) -> dict[str, object] | None:
    """What genai-prices knows of a model (window, prices now, ids) as plain values, or None.

    From the lookups cache when this version of genai-prices answered it today,
    else from the database (imported only then), and saved.
    """
    global _lookups, _lookups_stamp
    stamp = _lookup_stamp()
    if stamp is None:
        return None
    key = f"{provider or ''}|{model}"
    with _lookups_lock:
        if _lookups is None or _lookups_stamp != stamp:
            _lookups, _lookups_stamp = _load_lookups(stamp), stamp
        if key in _lookups:
            return _lookups[key]
    found = _model_info(model, provider)
    entry: dict[str, object] | None = None
    if found is not None:
        provider_info, info = found
        window = getattr(info, "context_window", None)
        entry = {"window": int(window) if window else None, "model_id": str(getattr(info, "id", model)),
                 "provider_id": str(getattr(provider_info, "id", provider or "")), "prices": None}
        try:
            from datetime import datetime, timezone

            values: Mapping[str, object] = vars(info.get_prices(datetime.now(timezone.utc)))  # type: ignore[attr-defined]
            entry["prices"] = {k: _decimal(values.get(f"{k}_mtok"))
                               for k in ("input", "output", "cache_read", "cache_write")}
        except Exception as exc:  # noqa: BLE001
            _log.warning("ctxscope: genai-prices has no usable price for %s: %r", model, exc)
    with _lookups_lock:
        assert _lookups is not None
        _lookups[key] = entry
        _save_lookups(stamp, _lookups)
    return entry


def _fallback_window(model: str) -> int | None:
    name = model.lower().rsplit("/", 1)[-1]
    for pattern, window in FALLBACK_WINDOWS:
        if fnmatch.fnmatchcase(name, pattern):
            return window
    return None


@lru_cache(maxsize=1024)
def limits_for(model: str | None, provider: str | None = None) -> Limits:
    """The context limits of a model: overrides, then genai-prices, then the fallback table."""
    model = model or ""
    rules = _current()
    limits = Limits()
    found = _lookup(model, provider) if model else None
    if found is not None and found.get("window"):
        limits = Limits(window_tokens=int(found["window"]), source=SOURCE_GENAI_PRICES)  # type: ignore[call-overload]
    elif model and (window := _fallback_window(model)) is not None:
        limits = Limits(window_tokens=window, source=SOURCE_TABLE)
    rule = _first(rules.window, model)
    if rule is not None:
        limits = replace(limits, window_tokens=rule.value, source=SOURCE_OVERRIDE)
    rule = _first(rules.effective_window, model)
    if rule is not None:
        limits = replace(limits, effective_window_tokens=rule.value)
    rule = _first(rules.compact_threshold, model)
    if rule is not None:
        if rule.percent is not None:
            base = limits.effective_window_tokens or limits.window_tokens
            threshold = int(base * rule.percent) if base else None
        else:
            threshold = rule.value
        limits = replace(limits, compact_threshold_tokens=threshold)
    return limits


def _price(value: object) -> Decimal | None:
    if value is None:
        return None
    if isinstance(value, Decimal):
        return value
    base = getattr(value, "base", None)  # TieredPrices: the price below the first tier
    return base if isinstance(base, Decimal) else None


def prices_for(model: str | None, provider: str | None = None) -> Prices | None:
    """Prices of a model per million tokens, or None where genai-prices does not know it."""
    if not model:
        return None
    found = _lookup(model, provider)
    if found is None:
        return None
    prices = found.get("prices")
    if not isinstance(prices, dict):
        return None

    def price(kind: str) -> Decimal | None:
        value = prices.get(kind)
        return Decimal(value) if isinstance(value, str) else None

    return Prices(input=price("input"), output=price("output"), cache_read=price("cache_read"),
                  cache_write=price("cache_write"), model_id=str(found.get("model_id") or model),
                  provider_id=str(found.get("provider_id") or provider or ""))


def cost_usd(model: str | None, provider: str | None = None, *, input_tokens: int = 0,
             cache_read_tokens: int = 0, cache_write_tokens: int = 0, output_tokens: int = 0) -> Decimal | None:
    """Price of one call in USD, or None where the price is unknown.

    ``input_tokens`` is the whole prompt, cached tokens included (the SPEC's
    reported input); genai-prices charges the cached parts at their rates,
    and tiered prices by the prompt's size.
    """
    if not model or _model_info(model, provider) is None:
        return None
    try:
        from genai_prices import Usage, calc_price

        usage = Usage(input_tokens=input_tokens, cache_read_tokens=cache_read_tokens,
                      cache_write_tokens=cache_write_tokens, output_tokens=output_tokens)
        provider_info, _ = _model_info(model, provider)  # type: ignore[misc]
        return calc_price(usage, model, provider_id=getattr(provider_info, "id", None)).total_price
    except Exception as exc:  # noqa: BLE001 - unknown price, not an error of the caller
        _log.debug("ctxscope: no price for %s: %r", model, exc)
        return None
