"""The adaptive limiter: the bound, first come first served, cancellation, AIMD, registry."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from contextlens.engine.limiter import Limiter, current_turns, limiter_for


async def test_never_more_than_the_limit_in_flight() -> None:
    limiter = Limiter(4, adaptive=False)
    active = peak = 0

    async def call() -> None:
        nonlocal active, peak
        async with limiter.slot():
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0.001)
            active -= 1

    await asyncio.gather(*(call() for _ in range(50)))
    assert peak == limiter.peak == 4
    assert limiter.in_flight == 0


async def test_waiters_are_served_in_arrival_order() -> None:
    limiter = Limiter(1, adaptive=False)
    order: list[int] = []
    await limiter.acquire()

    async def call(i: int) -> None:
        async with limiter.slot():
            order.append(i)

    tasks = [asyncio.create_task(call(i)) for i in range(6)]
    await asyncio.sleep(0)  # all six are queued now
    limiter.release()
    await asyncio.gather(*tasks)
    assert order == list(range(6))


class Ranked:
    """A run's order of its waiting calls: by the rank each call was given as it waited."""

    def __init__(self) -> None:
        self.rank: dict[int, int] = {}
        self.next = 0

    def place(self):
        me = self.next
        self.next += 1
        return lambda: (self.rank.get(me, 0), me)


async def test_the_waiters_of_a_run_that_orders_its_calls_go_in_its_order() -> None:
    limiter = Limiter(1, adaptive=False)
    turns = Ranked()
    order: list[str] = []
    await limiter.acquire()

    async def call(name: str, ordered: bool) -> None:
        token = current_turns.set(turns if ordered else None)
        try:
            async with limiter.slot():
                order.append(name)
        finally:
            current_turns.reset(token)

    tasks = []
    for name, ordered in (("first", False), ("r0", True), ("r1", True), ("plain", False),
                          ("r2", True)):  # fmt: skip
        tasks.append(asyncio.create_task(call(name, ordered)))
        await asyncio.sleep(0)
    turns.rank = {0: 2, 1: 0, 2: 1}  # read at each hand-over, not as they queued
    limiter.release()
    await asyncio.gather(*tasks)
    # first come first served, except that while the longest waiter is one of the run's,
    # the run's calls go in its order (a call of no such run waits behind them)
    assert order == ["first", "r1", "r2", "r0", "plain"]


async def test_a_cancelled_waiter_does_not_leak_a_slot() -> None:
    limiter = Limiter(1, adaptive=False)
    await limiter.acquire()
    waiter = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    limiter.release()
    assert limiter.in_flight == 0
    await asyncio.wait_for(limiter.acquire(), 1)  # the slot is free again
    assert limiter.in_flight == 1


async def test_a_slot_handed_to_a_cancelled_waiter_passes_on() -> None:
    limiter = Limiter(1, adaptive=False)
    await limiter.acquire()
    first = asyncio.create_task(limiter.acquire())
    second = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0)
    limiter.release()  # hands the slot to `first`...
    first.cancel()  # ...which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(second, 1)
    assert limiter.in_flight == 1


def test_rate_limits_lower_the_limit_once_per_cooldown_and_successes_raise_it() -> None:
    limiter = Limiter(10, cooldown=60.0, backoff=0.5)
    limiter.on_rate_limited()
    limiter.on_rate_limited()  # same overload, inside the cooldown: counted, not applied
    assert limiter.limit == 5 and limiter.rate_limited == 2
    for _ in range(5):
        limiter.on_success()
    assert limiter.limit == 5  # additive: about one slot per round of calls
    for _ in range(200):
        limiter.on_success()
    assert limiter.limit == 10  # never above the maximum


def test_never_below_one() -> None:
    limiter = Limiter(2, cooldown=0.0, backoff=0.1)
    for _ in range(5):
        limiter.on_rate_limited()
    assert limiter.limit == 1


async def test_a_raised_limit_wakes_waiters() -> None:
    limiter = Limiter(2)
    limiter.current = 1.0
    await limiter.acquire()
    waiter = asyncio.create_task(limiter.acquire())
    await asyncio.sleep(0)
    assert not waiter.done()
    limiter.on_success()  # 1 -> 2 slots: the waiter gets the new one at once
    await asyncio.wait_for(waiter, 1)
    assert limiter.in_flight == 2


def test_registry_shares_per_backend_and_applies_a_new_limit_at_once() -> None:
    a = limiter_for("test-registry:a", 16)
    assert limiter_for("test-registry:a", 16) is a
    assert limiter_for("test-registry:b", 16) is not a
    a.on_rate_limited()
    assert limiter_for("test-registry:a", 16).limit < 16  # same config keeps the state
    assert limiter_for("test-registry:a", 64).limit == 64  # a new config starts at its own


def test_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="limit must be >= 1"):
        Limiter(0)


def test_one_slot_is_shared_by_callers_on_many_threads_and_loops() -> None:
    """Each sync call runs its own event loop; a slot freed in one is handed to another."""
    limiter = Limiter(1)
    running = 0
    seen = 0
    lock = threading.Lock()

    async def call() -> None:
        nonlocal running, seen
        async with limiter.slot():
            with lock:
                running += 1
                seen = max(seen, running)
            await asyncio.sleep(0.01)
            with lock:
                running -= 1

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: asyncio.run(call()), range(24)))
    assert (seen, limiter.peak, limiter.in_flight) == (1, 1, 0)


async def test_timeouts_lower_the_limit_like_rate_limits() -> None:
    limiter = Limiter(8, cooldown=0.0)
    limiter.on_timeout()
    assert (limiter.limit, limiter.timeouts, limiter.rate_limited) == (5, 1, 0)


async def test_the_limit_is_settled_once_before_the_first_call() -> None:
    limiter = Limiter(16)
    probes = 0

    async def find() -> tuple[int, str]:
        nonlocal probes
        probes += 1
        await asyncio.sleep(0.01)
        return 2, "2 slot(s) reported by the server"

    await asyncio.gather(*(limiter.settle(find) for _ in range(5)))
    assert (probes, limiter.max_limit, limiter.origin) == (1, 2, "2 slot(s) reported by the server")
