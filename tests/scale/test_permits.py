"""The cluster's permit actor as a plain object: slots leased in blocks, a fair share owed
back when others wait or the limit falls, and what a worker no longer holds taken back."""

from __future__ import annotations

import asyncio

from contextlens.scale.ray.permits import Permits


async def test_a_lease_takes_as_many_free_slots_as_asked_and_waits_for_the_first():
    permits = Permits(3)
    assert await permits.acquire("a/1", 5) == 3  # all that are free, not more
    waiting = asyncio.ensure_future(permits.acquire("b/1", 2))
    await asyncio.sleep(0.01)
    assert not waiting.done()  # none free: it waits
    await permits.release("a/1", 1)
    assert await waiting == 1
    stats = await permits.stats()
    assert stats["in_flight"] == 3 and stats["leases"] == 4 and stats["peak"] == 3


async def test_a_worker_owes_what_it_holds_over_its_share_while_another_waits():
    permits = Permits(4)
    assert await permits.acquire("a/1", 4) == 4
    assert await permits.sync("a/1", 0, 0, 4) == 0  # nobody waits: it keeps them all
    waiting = asyncio.ensure_future(permits.acquire("b/1", 4))
    await asyncio.sleep(0.01)
    assert await permits.sync("a/1", 0, 0, 4) == 2  # two holders: a share of 2 each
    await permits.release("a/1", 2)
    assert await waiting == 2


async def test_a_lower_limit_is_owed_back_by_the_workers_over_it():
    permits = Permits(8)
    assert await permits.acquire("a/1", 8) == 8
    await permits.event("on_rate_limited")  # the limit falls to 5 for the cluster
    assert await permits.sync("a/1", 0, 0, 8) == 8 - 5


async def test_slots_a_worker_does_not_hold_are_taken_back_when_it_says_what_it_holds():
    permits = Permits(2)
    assert await permits.acquire("a/1", 2) == 2
    # the worker withdrew that lease as it was granted and so holds none: the sync says so
    assert await permits.sync("a/1", 0, 0, 0) == 0
    assert (await permits.stats())["in_flight"] == 0
    assert await permits.acquire("b/1", 2) == 2  # nothing was lost to the cluster
    assert await permits.sync("b/1", 0, 0, None) == 0  # a lease under way: nothing is taken
    assert (await permits.stats())["in_flight"] == 2


async def test_the_slots_of_a_dead_life_go_back_when_the_worker_starts_again():
    permits = Permits(2)
    assert await permits.acquire("a/1", 2) == 2
    assert await permits.begin("a/2") == 2  # the restarted worker: its first life's slots
    assert (await permits.stats())["in_flight"] == 0
    assert await permits.acquire("a/1", 1) == 0  # a grant to the dead life is given back
    assert (await permits.stats())["in_flight"] == 0
