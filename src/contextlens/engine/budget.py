"""A cap on what a run spends on judge calls.

Before each call is sent, :func:`spend` reserves the most it could cost: its prompt counted
as UTF-8 bytes (no byte-level tokenizer makes more tokens than that; the model's own
tokenizer where it is known, with a margin) plus every completion token it may take, at the
model's price. The moment the call completes its reservation is replaced by what it cost: a
call that was answered is charged what its backend reported it cost, else its usage at the
model's price (what the run's ledger counts); one answered without usage, or that timed out
or whose connection dropped, may have been billed, so it is charged its whole reservation
(and the ledger counts that too); a refused connection or an error reply is charged nothing.

A call is sent when what is spent, what the calls in flight have reserved and its own
reservation stay within the cap. When they do not, the call waits (:class:`CostCapBusy`,
which :func:`~contextlens.engine.retry.call_with_retry` waits out) for calls in flight to
settle; it is refused (:class:`CostCapReached`, its item is not run) only when what is
already spent leaves too little for it, which no settling can change. From then on the run
starts no new case (:attr:`CostCap.reached`); the calls of cases under way that still fit
are sent. Waiting calls go in a fair order: first those of an item that already had a call
(its next step, a re-ask, a retry), then those of the metric that has had the fewest items
so far, then the oldest; no call is sent ahead of a waiting call that comes before it in
that order, so the large calls of one metric are not starved by the small calls of another.
A run under a cap orders its calls waiting for a judge's slot the same way
(:meth:`CostCap.place`), so a metric whose calls come a little later than the others' still
has its turn before the cap binds.

What is spent therefore never passes the cap unless a backend reports more than the model's
price allows (then that is charged, and the cap sends no further call it cannot cover).
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from enum import Enum

from contextlens.backend import Usage
from contextlens.engine.accounting import (
    PRICES,
    UNATTRIBUTED,
    PriceTable,
    current_case,
    current_judge,
    current_metric,
)
from contextlens.engine.accounting import record as record_cost
from contextlens.engine.cache import current_repeat
from contextlens.engine.retry import NotYet
from contextlens.errors import ContextLensError

__all__ = ["CostCap", "CostCapBusy", "CostCapReached", "Spend", "current_cap", "spend"]


#: Items under way whose next call goes first: far more than a run has in flight.
RECENT_ITEMS = 65_536


class CostCapReached(ContextLensError):
    """What is spent leaves too little of the run's cost cap for the next judge call: the
    call is not sent (its item is not run) and the run starts no new case.

    ``reason``: the cap that was reached, as the run's items and ``stopped`` say it."""

    def __init__(self, limit: float, spent: float, needed: float) -> None:
        self.limit, self.spent, self.needed = limit, spent, needed
        self.reason = f"the cost cap of ${limit:g} was reached"
        left = max(0.0, limit - spent)
        super().__init__(
            f"{self.reason} (${spent:.4f} spent, ${left:.4f} left; the next call could cost "
            f"up to ${needed:.4f})"
        )


class _State(Enum):
    WAITING = "waiting"
    GRANTED = "granted"  # reserved for the call, which has not been sent yet
    REFUSED = "refused"
    USED = "used"  # the call was sent with the reservation
    WITHDRAWN = "withdrawn"


class _Ticket:
    """A call waiting for room under the cap, or holding the room it was granted."""

    __slots__ = ("amount", "future", "item", "loop", "metric", "model", "seq", "state")

    def __init__(
        self, model: str | None, amount: float, metric: str, item: tuple[str, int], seq: int
    ) -> None:
        self.model, self.amount, self.metric, self.item, self.seq = model, amount, metric, item, seq
        self.state = _State.WAITING
        self.loop: asyncio.AbstractEventLoop | None = None
        self.future: asyncio.Future[None] | None = None


class CostCapBusy(NotYet):
    """The call does not fit under the cap until calls in flight settle: it is not sent now.
    :meth:`wait` returns once its reservation is made (or raises :class:`CostCapReached`);
    the next attempt, inside :meth:`resumed`, is sent with that reservation."""

    def __init__(self, cap: CostCap, ticket: _Ticket) -> None:
        super().__init__("waiting for room under the cost cap")
        self.cap, self.ticket = cap, ticket

    async def wait(self) -> None:
        await self.cap._turn(self.ticket)

    @contextmanager
    def resumed(self) -> Iterator[None]:
        token = _held.set(self.ticket)
        try:
            yield
        finally:
            _held.reset(token)
            self.cap._withdraw(self.ticket)  # never sent: its room goes to the next call


_held: ContextVar[_Ticket | None] = ContextVar("contextlens_cap_ticket", default=None)
"""The room granted to the call the current attempt is about to send."""


class Spend:
    """One call's reservation (none without a cap): :meth:`charge` what it cost when it was
    answered, :meth:`release` it when it cannot have been billed; left unsaid, the call is
    charged its whole reservation."""

    def __init__(self, cap: CostCap | None, model: str | None, reserved: float) -> None:
        self.cap, self.model, self.reserved = cap, model, reserved
        self.charged: float | None = None
        self.estimated = False  # charged its reservation: what it cost is not known

    def charge(self, usage: Usage, cost: float | None = None) -> None:
        """The call was answered with ``usage``: the ``cost`` its backend reported when it
        did, else ``usage`` at the model's price (both as the run's ledger counts them),
        else, when the reply reports no usage, all of the reservation."""
        if self.cap is None:
            return
        priced = self.cap.prices.cost(self.model, usage) if usage.total_tokens else None
        self.charged = cost if cost is not None else priced
        if self.charged is None:
            self.charged, self.estimated = self.reserved, True

    def release(self) -> None:
        """The call cost nothing (refused, or an error reply): nothing is charged."""
        self.charged = 0.0


class CostCap:
    """At most ``limit`` USD of judge calls in one run (see the module docstring).

    ``spent``: what the settled calls cost; ``reserved``: what the calls in flight (and those
    granted room, about to be sent) may cost at most; ``reached``: a call was refused;
    ``needed``: the largest reservation refused; ``items``: per metric, how many items (a
    case, a repeat) had a call sent."""

    def __init__(self, limit: float, prices: PriceTable | None = None) -> None:
        if not (math.isfinite(limit) and limit > 0):
            raise ValueError(f"the cost cap must be a positive number of USD, got {limit!r}")
        self.limit = float(limit)
        self._prices = prices
        self.spent = 0.0
        self.reserved = 0.0
        self.reached = False
        self.needed = 0.0
        self.items: dict[str, int] = {}
        self._recent: OrderedDict[tuple[str, str, int], None] = OrderedDict()
        self._holding = 0  # reservations not yet settled
        self._queue: list[_Ticket] = []
        self._seq = 0
        self._lock = threading.Lock()

    @property
    def prices(self) -> PriceTable:
        return self._prices if self._prices is not None else PRICES

    @property
    def left(self) -> float:
        """What the cap leaves unspent (0 once a backend reported more than it allows)."""
        return max(0.0, self.limit - self.spent)

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
        """Reserve the cost of ``worst`` on ``model`` for one call (raising
        :class:`CostCapBusy` or :class:`CostCapReached` when it cannot be sent now); on
        leaving, charge what the call cost (all of the reservation unless
        :meth:`Spend.charge` or :meth:`Spend.release` said otherwise) and record into the
        current ledger what the cap charged that the ledger cannot know (an estimate)."""
        reservation = self._reserve(model, worst)
        try:
            yield reservation
        finally:
            charged = reservation.reserved if reservation.charged is None else reservation.charged
            self._settle(reservation.reserved, charged)
            if reservation.charged is None or reservation.estimated:
                record_cost(judge=current_judge.get() or model or UNATTRIBUTED, cost=charged)

    def _reserve(self, model: str | None, worst: Usage) -> Spend:
        cost = self.prices.cost(model, worst)
        amount = cost if cost is not None else math.inf
        held, loop = _held.get(), _running_loop()
        with self._lock:
            if (
                held is not None
                and held.state is _State.GRANTED
                and (held.model, held.amount) == (model, amount)
            ):
                held.state = _State.USED  # the room granted while it waited
                return Spend(self, model, amount)
            self._seq += 1
            ticket = _Ticket(
                model,
                amount,
                current_metric.get(),
                (current_case.get(), current_repeat.get()),
                self._seq,
            )
            self._queue.append(ticket)
            decided = self._admit()
            if ticket.state is _State.WAITING and loop is not None:
                ticket.loop, ticket.future = loop, loop.create_future()
            elif ticket.state is _State.WAITING:  # nothing to wait on outside an event loop
                self._queue.remove(ticket)
                ticket.state = _State.WITHDRAWN
        self._wake(decided)
        if ticket.state is _State.WITHDRAWN:
            raise RuntimeError("a call that waits for room under the cost cap needs an event loop")
        if ticket.state is _State.GRANTED:
            ticket.state = _State.USED
            return Spend(self, model, amount)
        if ticket.state is _State.REFUSED:
            raise CostCapReached(self.limit, self.spent, amount)
        raise CostCapBusy(self, ticket)

    def place(self) -> Callable[[], tuple[bool, int, int]]:
        """The place in line of the current call (its metric's and item's) as a function of
        the cap's state: the same order as calls waiting for room, for calls waiting for a
        slot of their judge (see :class:`~contextlens.engine.limiter.Turns`)."""
        with self._lock:
            self._seq += 1
            seq = self._seq
        metric, item = current_metric.get(), (current_case.get(), current_repeat.get())
        return lambda: self._rank(metric, item, seq)

    def _order(self, ticket: _Ticket) -> tuple[bool, int, int]:
        return self._rank(ticket.metric, ticket.item, ticket.seq)

    def _rank(self, metric: str, item: tuple[str, int], seq: int) -> tuple[bool, int, int]:
        """Who goes first: the next call of an item under way, then the metric with the
        fewest items so far, then the oldest."""
        started = (metric, *item) in self._recent
        return (not started, self.items.get(metric, 0), seq)

    def _admit(self) -> list[_Ticket]:
        """Grant or refuse waiting calls in their order while each is decided (lock held):
        a call that what is spent leaves no room for is refused, one that fits is granted,
        and the first that fits only once calls in flight settle stops the round."""
        decided: list[_Ticket] = []
        while self._queue:
            head = min(self._queue, key=self._order)
            if self.spent + head.amount > self.limit:  # spent only grows: it never fits
                self._queue.remove(head)
                head.state = _State.REFUSED
                self.reached = True
                self.needed = max(self.needed, head.amount)
            elif self.spent + self.reserved + head.amount <= self.limit:
                self._queue.remove(head)
                head.state = _State.GRANTED
                self.reserved += head.amount
                self._holding += 1
                self._started(head)
            else:
                break
            decided.append(head)
        return decided

    def _started(self, ticket: _Ticket) -> None:
        """Count the item of a call granted room (the items under way are remembered, as
        many as :data:`RECENT_ITEMS`, to give their next calls their turn first)."""
        key = (ticket.metric, *ticket.item)
        if key in self._recent:
            self._recent.move_to_end(key)
            return
        self.items[ticket.metric] = self.items.get(ticket.metric, 0) + 1
        self._recent[key] = None
        if len(self._recent) > RECENT_ITEMS:
            self._recent.popitem(last=False)

    def _settle(self, reserved: float, charged: float) -> None:
        """A reservation ends: ``charged`` is spent, the room goes to the waiting calls."""
        with self._lock:
            self._holding -= 1
            self.reserved = self.reserved - reserved if self._holding else 0.0
            self.spent += charged
            decided = self._admit()
        self._wake(decided)

    def _wake(self, decided: list[_Ticket]) -> None:
        """Tell the waiting calls just decided, each on its own loop."""
        for ticket in decided:
            if ticket.loop is None:  # decided as it asked: it was never waiting
                continue
            try:
                if _running_loop() is ticket.loop:
                    self._tell(ticket)
                else:
                    ticket.loop.call_soon_threadsafe(self._tell, ticket)
            except RuntimeError:  # its loop is closed: nobody waits there any more
                self._withdraw(ticket)

    def _tell(self, ticket: _Ticket) -> None:
        if ticket.future is None or ticket.future.done():  # it stopped waiting
            self._withdraw(ticket)
        else:
            ticket.future.set_result(None)

    async def _turn(self, ticket: _Ticket) -> None:
        """Wait until ``ticket`` is granted room; :class:`CostCapReached` if refused."""
        try:
            if ticket.future is not None:
                await ticket.future
        except asyncio.CancelledError:
            self._withdraw(ticket)
            raise
        if ticket.state is _State.REFUSED:
            raise CostCapReached(self.limit, self.spent, ticket.amount)

    def _withdraw(self, ticket: _Ticket) -> None:
        """``ticket`` will not be sent: out of the queue, or its granted room given back."""
        with self._lock:
            if ticket.state is _State.WAITING:
                self._queue.remove(ticket)
                ticket.state = _State.WITHDRAWN
                return
            if ticket.state is not _State.GRANTED:
                return
            ticket.state = _State.WITHDRAWN
        self._settle(ticket.amount, 0.0)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


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
