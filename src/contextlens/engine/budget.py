"""A cap on what a run spends on judge calls.

Before each call is sent, :func:`spend` reserves the most it could cost: its prompt counted
as UTF-8 bytes (no byte-level tokenizer makes more tokens than that; the model's own
tokenizer where it is known, with a margin) plus every completion token it may take, at the
model's price. The call is sent only when what is spent, what calls in flight have reserved
and this reservation stay within the cap; otherwise :class:`CostCapReached` stops the run.
A call that was answered is charged what its backend reported it cost, else what its usage
says; one that timed out or whose connection dropped may have been billed, so it is charged
its whole reservation; a refused connection or an error reply is charged nothing. What is
spent therefore never passes the cap unless a backend reports more than the model's price
allows (then the reported cost is charged, and no further call is sent).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from contextlens.backend import Usage
from contextlens.engine.accounting import PRICES, PriceTable
from contextlens.errors import ContextLensError

__all__ = ["CostCap", "CostCapReached", "Spend", "current_cap", "spend"]


class CostCapReached(ContextLensError):
    """The next judge call could pass the run's cost cap: the run stops sending calls."""


class Spend:
    """One call's reservation (none without a cap): :meth:`charge` what it cost when it was
    answered, :meth:`release` it when it cannot have been billed."""

    def __init__(self, cap: CostCap | None, model: str | None, reserved: float) -> None:
        self.cap, self.model, self.reserved = cap, model, reserved
        self.charged: float | None = None

    def charge(self, usage: Usage, cost: float | None = None) -> None:
        """The call was answered with ``usage``: the ``cost`` its backend reported when it
        did (what the run's ledger counts too), else ``usage`` at the model's price, at most
        what was reserved (all of it when the reply reports no usage)."""
        if self.cap is None:
            return
        if cost is not None:
            self.charged = cost
            return
        priced = self.cap.prices.cost(self.model, usage) if usage.total_tokens else None
        self.charged = min(self.reserved, priced if priced is not None else self.reserved)

    def release(self) -> None:
        """The call cost nothing (refused, or an error reply): nothing is charged."""
        self.charged = 0.0


class CostCap:
    """At most ``limit`` USD of judge calls in one run (see the module docstring)."""

    def __init__(self, limit: float, prices: PriceTable | None = None) -> None:
        if not (math.isfinite(limit) and limit > 0):
            raise ValueError(f"the cost cap must be a positive number of USD, got {limit!r}")
        self.limit = float(limit)
        self._prices = prices
        self.spent = 0.0
        self.reserved = 0.0
        self.reached = False
        self._lock = threading.Lock()

    @property
    def prices(self) -> PriceTable:
        return self._prices if self._prices is not None else PRICES

    def check_priced(self, price_key: str | None, judge: str) -> None:
        """``ValueError`` when the calls of ``judge`` have no price (its backend names no
        ``price_key``, or the table has none for it): a cap cannot bound an unknown cost."""
        if price_key is None:
            raise ValueError(
                f"--max-cost needs the price of the judge's calls; the backend of {judge} "
                "names no model to price them by (its price_key is None): run without a cap"
            )
        if self.prices.price(price_key) is None:
            raise ValueError(
                f"--max-cost needs the price of the judge's model; {judge} has none (no price "
                f"for {price_key!r}). Register it with contextlens.engine.accounting.PRICES."
                "register(model, prompt_per_million, completion_per_million), or run without a "
                "cap"
            )

    @contextmanager
    def spending(self, model: str | None, worst: Usage) -> Iterator[Spend]:
        """Reserve the cost of ``worst`` on ``model`` for one call, or raise
        :class:`CostCapReached`; on leaving, charge what the call cost (all of the
        reservation unless :meth:`Spend.charge` or :meth:`Spend.release` said otherwise)."""
        cost = self.prices.cost(model, worst)
        reserve = cost if cost is not None else math.inf
        with self._lock:
            if self.reached or self.spent + self.reserved + reserve > self.limit:
                self.reached = True
                raise CostCapReached(
                    f"the cost cap of ${self.limit:g} was reached (${self.spent:.4f} spent, "
                    f"the next call could cost up to ${reserve:.4f})"
                )
            self.reserved += reserve
        spend = Spend(self, model, reserve)
        try:
            yield spend
        finally:
            charged = reserve if spend.charged is None else spend.charged
            with self._lock:
                self.reserved -= reserve
                self.spent += charged


current_cap: ContextVar[CostCap | None] = ContextVar("contextlens_cost_cap", default=None)
"""The cap of the run whose calls are being made (none: no cap); a run sets it for the
tasks it starts."""


@contextmanager
def spend(model: str | None, worst: Callable[[], Usage]) -> Iterator[Spend]:
    """One call within the current cap: :meth:`CostCap.spending` of ``worst()`` (computed
    only under a cap), or a reservation of nothing without one."""
    cap = current_cap.get()
    if cap is None:
        yield Spend(None, model, 0.0)
        return
    with cap.spending(model, worst()) as reservation:
        yield reservation
