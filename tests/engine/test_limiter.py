"""The adaptive limiter: the bound, first come first served, cancellation, AIMD, registry."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from contextlens.engine.limiter import (
    FOUND_BY_RAMP,
    RAMPING,
    Limiter,
    Ramp,
    current_turns,
    limiter_for,
)


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


# --- the ramp -------------------------------------------------------------------------------


def run_level(ramp: Ramp, seconds: float) -> bool:
    """Send and answer one level's calls, each taking ``seconds``: whether it changed."""
    level, timed = ramp.level, []
    for _ in range(level + max(3, level)):
        at = ramp.sent()
        if at is not None:
            timed.append(at)
    assert len(timed) == max(3, level) and set(timed) == {level}
    return any([ramp.answered(at, seconds) for at in timed])


def test_a_ramp_doubles_while_the_calls_keep_their_speed_and_ends_below_a_slowdown() -> None:
    ramp = Ramp(16)
    for level, seconds in ((1, 0.10), (2, 0.11), (4, 0.10), (8, 0.12)):
        assert ramp.level == level and ramp.found is None
        assert run_level(ramp, seconds)
    assert ramp.level == 16
    assert run_level(ramp, 0.20)  # 16 at once: twice as slow as the fastest level
    assert (ramp.found, ramp.level) == (8, 8)
    assert "16 at once were 2.0x slower than 8" in ramp.reason
    assert ramp.sent() is None and not ramp.answered(8, 0.1)  # it is over


def test_a_ramp_leaves_out_the_first_calls_of_a_level_and_calls_of_another() -> None:
    ramp = Ramp(4)
    assert ramp.sent() is None  # the first call warms the server up: not timed
    assert [ramp.sent(), ramp.sent(), ramp.sent()] == [1, 1, 1]
    assert not ramp.answered(1, 9.0) and not ramp.answered(1, 0.1)
    assert ramp.answered(1, 0.1) and ramp.level == 2  # the median: one slow call is no slowdown
    assert [ramp.sent(), ramp.sent(), ramp.sent()] == [None, None, 2]  # 2 fill the server
    assert not ramp.answered(1, 0.1)  # a call timed at the level below
    assert not ramp.answered(2, 0.1) and not ramp.answered(2, 0.5) and ramp.answered(2, 0.1)
    assert ramp.level == 4 and run_level(ramp, 0.1)
    assert ramp.found == 4 and "up to 4 at once" in ramp.reason  # its cap


@pytest.mark.parametrize(("at", "found"), [(1, 1), (2, 1), (8, 4)])
def test_an_overload_ends_a_ramp_at_the_level_below(at: int, found: int) -> None:
    ramp = Ramp(16)
    while ramp.level < at:
        run_level(ramp, 0.1)
    assert ramp.overloaded("a rate limit")
    assert (ramp.found, ramp.reason) == (found, f"a rate limit at {at} at once")
    assert not ramp.overloaded("a timeout")


def test_a_ramp_is_the_limit_of_its_limiter_until_it_ends() -> None:
    limiter = Limiter(16)

    async def find() -> Ramp:
        return Ramp(16)

    asyncio.run(limiter.settle(find))
    assert (limiter.origin, limiter.max_limit, limiter.ramping) == (RAMPING, 1, True)
    for level in (1, 2, 4):
        timed = [t for t in (limiter.sent() for _ in range(level + max(3, level))) if t is not None]
        for t in timed:
            limiter.answered(t, 0.1)
        assert limiter.max_limit == 2 * level
    limiter.on_rate_limited()  # at 8 at once: the ramp ends at 4, no further back-off
    assert (limiter.origin, limiter.max_limit, limiter.limit, limiter.ramping) == (
        FOUND_BY_RAMP,
        4,
        4,
        False,
    )
    assert limiter.rate_limited == 1 and limiter.sent() is None
    limiter.on_rate_limited()  # from now on the limit adapts as any other
    assert limiter.limit == 2


def test_a_ramp_refuses_a_cap_below_one_or_a_slowdown_that_is_no_slowdown() -> None:
    with pytest.raises(ValueError, match="cap"):
        Ramp(0)
    with pytest.raises(ValueError, match="slowdown"):
        Ramp(8, slowdown=1.0)
