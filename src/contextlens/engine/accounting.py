"""Calls, tokens and estimated cost of judge calls, attributed to metrics.

A :class:`Ledger` is made current with :func:`attribute` (a context variable, so it
follows asyncio tasks created inside the block); the judge then calls :func:`record`
without having to know which evaluation or metric it works for.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from pydantic import BaseModel, Field

from contextlens.backend import Usage

__all__ = [
    "PRICES",
    "Counts",
    "Ledger",
    "LedgerEntry",
    "LedgerReport",
    "PriceTable",
    "attribute",
    "current_case",
    "current_judge",
    "current_ledger",
    "current_metric",
    "record",
]

UNATTRIBUTED = "unattributed"


class Counts(BaseModel):
    """What a set of judge calls took.

    ``calls``: calls the backend answered (with any status) or that timed out waiting;
    ``dropped``: calls whose connection dropped before a reply (they may or may not have
    reached the server; each is retried); ``cache_hits``: replies served from the cache;
    ``retries``: calls tried again; ``failures``: items whose judge call failed for good;
    tokens as reported by the backend; ``cost``: estimated USD of the priced calls (under a
    cost cap, a call that may have been billed without saying what it used counts as the cap
    charged it, at its most, so the cap and the ledger agree);
    ``unpriced_calls``: calls whose model has no price (their cost is unknown, not 0);
    ``seconds``: the latency of the answered calls, added up (from when each was sent).
    """

    calls: int = 0
    dropped: int = 0
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    unpriced_calls: int = 0
    seconds: float = 0.0

    def __add__(self, other: Counts) -> Counts:
        if not isinstance(other, Counts):
            return NotImplemented
        return Counts(**{name: getattr(self, name) + getattr(other, name) for name in COUNTED})

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


COUNTED: tuple[str, ...] = tuple(Counts.model_fields)
"""The names of the counts."""


class LedgerEntry(Counts):
    """The counts of one (metric, judge) pair."""

    metric: str
    judge: str


class LedgerReport(BaseModel):
    """What a ledger recorded: the counts in all, per metric, and per (metric, judge)."""

    total: Counts = Field(default_factory=Counts)
    by_metric: dict[str, Counts] = Field(default_factory=dict)
    entries: list[LedgerEntry] = Field(default_factory=list)


_DATE_SUFFIX = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{4})$")

#: The suffix of a price key whose calls go through a provider's batch API
#: (``gpt-4o-mini@batch``), and the share of the model's price they cost there: OpenAI's
#: Batch API and Anthropic's Message Batches both charge half.
BATCH_SUFFIX, BATCH_RATE = "@batch", 0.5


def batch_price_key(price_key: str | None) -> str | None:
    """The price key of ``price_key``'s calls made in a batch (None stays None)."""
    return None if price_key is None else price_key + BATCH_SUFFIX


#: The model names a price table remembers its answer for (then it forgets them all).
_MAX_FOUND = 1024


class PriceTable:
    """USD per million prompt and completion tokens, by model name.

    The defaults are OpenAI list prices for a few models as published when this was
    written: estimates, to be checked against the provider's price page (and overridden
    with :meth:`register`, e.g. for a dated snapshot priced differently). Lookup is
    case-insensitive, ignores a provider prefix (``openai/gpt-4o-mini``) and, failing an
    exact entry, a date suffix (``gpt-4o-mini-2024-07-18``). A name ending in
    :data:`BATCH_SUFFIX` is the model's calls made in a batch: its own entry when it has
    one, else :data:`BATCH_RATE` of the model's price. Unknown models (local ones included)
    have no price: ``None``, never 0.
    """

    DEFAULTS: Mapping[str, tuple[float, float]] = {
        "gpt-4o": (2.50, 10.00),
        "gpt-4o-mini": (0.15, 0.60),
        "gpt-4.1": (2.00, 8.00),
        "gpt-4.1-mini": (0.40, 1.60),
        "gpt-4.1-nano": (0.10, 0.40),
        "o4-mini": (1.10, 4.40),
    }

    def __init__(
        self, prices: Mapping[str, tuple[float, float]] | None = None, *, defaults: bool = True
    ) -> None:
        self._prices: dict[str, tuple[float, float]] = {}
        self._found: dict[str, tuple[float, float] | None] = {}  # names looked up so far
        self._version = 0  # registrations so far: an answer found before one is not kept
        self._lock = threading.Lock()
        for model, (prompt, completion) in {
            **(self.DEFAULTS if defaults else {}),
            **(prices or {}),
        }.items():
            self.register(model, prompt, completion)

    def register(
        self, model: str, prompt_per_million: float, completion_per_million: float
    ) -> None:
        """Set the price of ``model`` (USD per million tokens)."""
        if prompt_per_million < 0 or completion_per_million < 0:
            raise ValueError("prices must be >= 0")
        with self._lock:
            self._prices[model.strip().lower()] = (
                float(prompt_per_million),
                float(completion_per_million),
            )
            self._found.clear()
            self._version += 1

    def price(self, model: str | None) -> tuple[float, float] | None:
        """``(prompt, completion)`` USD per million tokens of ``model``, or ``None``."""
        if not model:
            return None
        try:
            return self._found[model]  # every call of a run asks for the same model
        except KeyError:
            pass
        version = self._version
        found = self._look_up(model)
        with self._lock:
            if version == self._version:
                if len(self._found) >= _MAX_FOUND:
                    self._found.clear()
                self._found[model] = found
        return found

    def _look_up(self, model: str) -> tuple[float, float] | None:
        name = model.strip().lower()
        if name.endswith(BATCH_SUFFIX):
            with self._lock:
                own = self._prices.get(name)
            if own is not None:
                return own
            live = self._look_up(name.removesuffix(BATCH_SUFFIX))
            return None if live is None else (live[0] * BATCH_RATE, live[1] * BATCH_RATE)
        candidates = [name]
        while "/" in name:  # "openrouter/openai/gpt-4o" -> "openai/gpt-4o" -> "gpt-4o"
            name = name.split("/", 1)[1]
            candidates.append(name)
        candidates += [_DATE_SUFFIX.sub("", c) for c in candidates if _DATE_SUFFIX.search(c)]
        with self._lock:
            for candidate in candidates:
                if candidate in self._prices:
                    return self._prices[candidate]
        return None

    def cost(self, model: str | None, usage: Usage) -> float | None:
        """Estimated USD of ``usage`` on ``model``, or ``None`` when it has no price."""
        price = self.price(model)
        if price is None:
            return None
        return (usage.prompt_tokens * price[0] + usage.completion_tokens * price[1]) / 1e6

    def __contains__(self, model: object) -> bool:
        return isinstance(model, str) and self.price(model) is not None

    def __repr__(self) -> str:
        return f"PriceTable({len(self._prices)} models)"


PRICES = PriceTable()
"""The price table ledgers use by default; extend it with :meth:`PriceTable.register`."""


@dataclass(slots=True)
class _Running:
    """:class:`Counts` as a ledger adds to them, call by call (no validation on each add)."""

    calls: int = 0
    dropped: int = 0
    cache_hits: int = 0
    retries: int = 0
    failures: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    unpriced_calls: int = 0
    seconds: float = 0.0

    def counts(self) -> Counts:
        return Counts.model_construct(**{name: getattr(self, name) for name in COUNTED})


class Ledger:
    """:class:`Counts` per (metric, judge), safe to record into from threads and tasks.

    Args:
        prices: the price table; default the module's :data:`PRICES` (read at each
            record, so later registrations count).
    """

    def __init__(self, prices: PriceTable | None = None) -> None:
        self._prices = prices
        self._counts: dict[tuple[str, str], _Running] = {}
        self._lock = threading.Lock()

    @property
    def prices(self) -> PriceTable:
        return self._prices if self._prices is not None else PRICES

    def record(
        self,
        *,
        metric: str,
        judge: str,
        model: str | None = None,
        usage: Usage | None = None,
        calls: int = 0,
        dropped: int = 0,
        cache_hits: int = 0,
        retries: int = 0,
        failures: int = 0,
        seconds: float = 0.0,
        cost: float | None = None,
    ) -> None:
        """Add to the counts of (``metric``, ``judge``).

        ``cost`` is what the backend reported the calls cost; without it ``usage`` is priced
        with ``model``, and when the model has no price, ``calls`` are counted as
        ``unpriced_calls`` and the cost is left out.
        """
        usage = usage or Usage()
        if cost is None:
            cost = self.prices.cost(model, usage)
        with self._lock:
            counts = self._counts.get((metric, judge))
            if counts is None:
                counts = self._counts[(metric, judge)] = _Running()
            counts.calls += calls
            counts.dropped += dropped
            counts.cache_hits += cache_hits
            counts.retries += retries
            counts.failures += failures
            counts.prompt_tokens += usage.prompt_tokens
            counts.completion_tokens += usage.completion_tokens
            counts.cost += cost or 0.0
            counts.seconds += seconds
            counts.unpriced_calls += calls if cost is None else 0

    def merge(self, entries: Iterable[LedgerEntry]) -> None:
        """Add counts recorded by another ledger (another process's): its
        :meth:`report`'s ``entries``."""
        with self._lock:
            for entry in entries:
                key = (entry.metric, entry.judge)
                running = self._counts.get(key)
                if running is None:
                    running = self._counts[key] = _Running()
                for name in COUNTED:
                    setattr(running, name, getattr(running, name) + getattr(entry, name))

    def call_latency(self) -> tuple[int, float] | None:
        """Calls answered so far and their mean latency in seconds (None before any)."""
        with self._lock:
            calls = sum(c.calls for c in self._counts.values())
            seconds = sum(c.seconds for c in self._counts.values())
        return (calls, seconds / calls) if calls and seconds else None

    def entries(self) -> dict[tuple[str, str], Counts]:
        """A copy of the counts by (metric, judge)."""
        with self._lock:
            return {key: c.counts() for key, c in self._counts.items()}

    def by_metric(self) -> dict[str, Counts]:
        """Counts per metric, all judges together."""
        out: dict[str, Counts] = {}
        for (metric, _), counts in self.entries().items():
            out[metric] = out.get(metric, Counts()) + counts
        return out

    def by_judge(self) -> dict[str, Counts]:
        """Counts per judge, all metrics together."""
        out: dict[str, Counts] = {}
        for (_, judge), counts in self.entries().items():
            out[judge] = out.get(judge, Counts()) + counts
        return out

    def total(self) -> Counts:
        """Counts of everything recorded."""
        return sum(self.entries().values(), Counts())

    def report(self) -> LedgerReport:
        """The counts in all, per metric and per (metric, judge)."""
        return LedgerReport(
            total=self.total(),
            by_metric=self.by_metric(),
            entries=[
                LedgerEntry(metric=m, judge=j, **c.model_dump())
                for (m, j), c in self.entries().items()
            ],
        )

    def __repr__(self) -> str:
        total = self.total()
        return (
            f"Ledger(calls={total.calls}, cost={total.cost:.4f}, metrics={len(self.by_metric())})"
        )


current_ledger: ContextVar[Ledger | None] = ContextVar("contextlens_ledger", default=None)
"""The ledger judge calls are recorded into (none: not recorded)."""

current_metric: ContextVar[str] = ContextVar("contextlens_metric", default=UNATTRIBUTED)
"""The metric judge calls are attributed to."""

current_case: ContextVar[str] = ContextVar("contextlens_case", default="")
"""The id of the case judge calls are made for (named in log messages)."""

current_judge: ContextVar[str | None] = ContextVar("contextlens_judge", default=None)
"""The name of the judge the current metric asks (None: not said)."""


@contextmanager
def attribute(
    ledger: Ledger | None, metric: str, case: str = "", judge: str | None = None
) -> Iterator[Ledger | None]:
    """Record judge calls made inside the block (tasks created in it included) into
    ``ledger`` under ``metric``, for the case ``case``, asked of ``judge``."""
    ledger_token = current_ledger.set(ledger)
    metric_token = current_metric.set(metric)
    case_token = current_case.set(case)
    judge_token = current_judge.set(judge)
    try:
        yield ledger
    finally:
        current_judge.reset(judge_token)
        current_case.reset(case_token)
        current_metric.reset(metric_token)
        current_ledger.reset(ledger_token)


def record(
    *,
    judge: str,
    model: str | None = None,
    usage: Usage | None = None,
    calls: int = 0,
    dropped: int = 0,
    cache_hits: int = 0,
    retries: int = 0,
    failures: int = 0,
    seconds: float = 0.0,
    metric: str | None = None,
    cost: float | None = None,
) -> None:
    """Record into the current ledger under the current metric (or ``metric``); does
    nothing when no ledger is current. ``cost``: what the backend reported (see
    :meth:`Ledger.record`)."""
    ledger = current_ledger.get()
    if ledger is None:
        return
    ledger.record(
        metric=metric if metric is not None else current_metric.get(),
        judge=judge,
        model=model,
        usage=usage,
        calls=calls,
        dropped=dropped,
        cache_hits=cache_hits,
        retries=retries,
        failures=failures,
        seconds=seconds,
        cost=cost,
    )
