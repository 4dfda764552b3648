"""One rate limit for the cluster: per judge backend, a permit actor holds the engine's
:class:`~contextlens.engine.limiter.Limiter`; each worker's :class:`ClusterLimiter` leases
slots from it and tells it the calls' outcomes, so the bound and its adaptation are the
cluster's, without a round trip to the actor per call."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from typing import Any, NoReturn

import ray

from contextlens.engine.limiter import Limiter, Limits

__all__ = [
    "SYNC_SECONDS",
    "ClusterLimiter",
    "ClusterLimits",
    "HandedLimits",
    "Permits",
    "driver_gone",
]

#: How often a worker tells the permit actor its successes and gives back idle slots.
SYNC_SECONDS = 0.25


class Permits:
    """A Ray actor holding one backend's :class:`Limiter` for the whole cluster: its slots
    are leased to the workers (see :class:`ClusterLimiter`), and its adaptive bound moves
    once per event for the cluster. Slots are counted per holder (one life of a worker,
    ``ACTOR_ID/LIFE``), so a worker that died and was restarted gives back what its earlier
    lives held, and a slot granted to an earlier life afterwards is given back at once."""

    EVENTS = frozenset({"on_success", "on_rate_limited", "on_timeout"})

    def __init__(self, limit: int) -> None:
        self.limiter = Limiter(limit)
        self.held: Counter[str] = Counter()
        self.lives: set[str] = set()
        self.dead: set[str] = set()
        self.leases = 0  # slots handed out

    async def acquire(self, holder: str, want: int = 1) -> int:
        """Lease slots to ``holder``: wait for one, then take up to ``want`` in all of those
        free now. How many it got (none for a life that has ended)."""
        self.lives.add(holder)
        await self.limiter.acquire()
        got = 1
        while got < want and self.limiter.try_acquire():
            got += 1
        if holder in self.dead:  # granted to a life that has ended
            for _ in range(got):
                self.limiter.release()
            return 0
        self.held[holder] += got
        self.leases += got
        return got

    async def release(self, holder: str, count: int = 1) -> None:
        for _ in range(min(count, self.held[holder])):
            self.held[holder] -= 1
            self.limiter.release()

    async def sync(
        self, holder: str, successes: int, returned: int, leased: int | None = None
    ) -> int:
        """A worker's news since its last sync: ``successes`` calls succeeded, ``returned``
        slots come back, and, when it waits for no lease, the ``leased`` slots it holds (what
        the actor counts beyond them, a lease the worker withdrew as it was granted, is
        taken back). How many more of its slots it owes: none while the cluster is within
        its limit and nobody waits, else what it holds over a fair share."""
        for _ in range(successes):
            self.limiter.on_success()
        await self.release(holder, returned)
        if leased is not None and self.held[holder] > leased:
            await self.release(holder, self.held[holder] - leased)
        lim = self.limiter
        if lim.in_flight <= lim.limit and not lim.waiting:
            return 0
        holders = sum(1 for n in self.held.values() if n > 0) + lim.waiting
        return max(0, self.held[holder] - max(1, lim.limit // max(1, holders)))

    async def begin(self, holder: str) -> int:
        """A worker's new life ``holder``: its earlier lives have ended; give back the slots
        they held (how many)."""
        actor = holder.split("/", 1)[0]
        ended = {h for h in self.lives if h.split("/", 1)[0] == actor and h != holder}
        self.dead |= ended
        self.lives = (self.lives - ended) | {holder}
        count = 0
        for life in ended:
            count += self.held.pop(life, 0)
        for _ in range(count):
            self.limiter.release()
        return count

    async def event(self, name: str) -> None:
        """A call's outcome, as the judge tells its limiter (``on_rate_limited``...)."""
        handler = getattr(self.limiter, name, None) if name in self.EVENTS else None
        if handler is not None:
            handler()

    async def configure(self, limit: int) -> None:
        self.limiter.configure(limit)

    async def stats(self) -> dict[str, int]:
        lim = self.limiter
        return {
            "limit": lim.max_limit,
            "peak": lim.peak,
            "lowest": lim.lowest,
            "rate_limited": lim.rate_limited,
            "in_flight": lim.in_flight,
            "leases": self.leases,
        }


def driver_gone() -> NoReturn:
    """The permit actor is gone for good (it is restarted when it merely crashes): the
    driver that owns it and this worker died. End the worker at once, before the call that
    could not get a slot is written down as a failed item."""
    os._exit(1)


class ClusterLimiter(Limiter):
    """A worker's side of a cluster-wide limiter: its calls run on slots leased from the
    backend's permit actor, and their outcomes go to it, so the bound and its adaptation
    are the cluster's.

    A slot leased is kept while this worker's calls keep it busy: a finished call hands it
    to the next waiting call here, with no round trip to the actor. Calls that find no
    leased slot free make one request to the actor, for as many slots as they need (one
    request at a time). Every :data:`SYNC_SECONDS` the worker tells the actor its
    successes and the slots it holds, gives back those that stayed idle since the last
    time, and learns how many it owes (when the cluster's limit fell below the slots
    leased, or other workers wait): those go back as its calls finish. Rate limits and
    timeouts are told at once. ``peak`` is the most calls this worker had in flight."""

    def __init__(self, actor: Any, limit: int, holder: str, origin: str | None = None) -> None:
        super().__init__(limit, adaptive=False)
        self._actor = actor
        self.holder = holder
        self.leased = 0  # slots this worker holds from the actor
        self.owed = 0  # slots to give back as calls finish
        self._successes = 0  # successes not yet told
        self._idle = 0  # slots idle at the last sync
        self._sent: list[Any] = []  # outcomes told to the permit actor, not yet confirmed
        self._syncing: asyncio.Task[None] | None = None
        self._leasing: asyncio.Task[None] | None = None  # the request for slots under way
        self._ask: Any = None  # its call to the actor, while it waits
        if origin is not None:  # the limit was settled where the run started
            self.origin = origin

    @property
    def limit(self) -> int:
        """The calls this worker may have in flight now: the slots it leased."""
        return self.leased

    def _wanted(self) -> int:
        """Slots the calls here need beyond those leased."""
        return self.in_flight + len(self._queue) - self.leased

    async def begin(self) -> None:
        """Tell the permit actor this life of the worker has begun (see ``Permits.begin``),
        and start syncing with it."""
        try:
            await self._actor.begin.remote(self.holder)
        except ray.exceptions.RayActorError:
            driver_gone()
        if self._syncing is None:
            self._syncing = asyncio.get_running_loop().create_task(self._sync_forever())

    async def acquire(self) -> None:
        """Wait for a slot: a leased one that is free, else one more from the cluster."""
        if self._leasing is None and self._wanted() >= 0:
            self._leasing = asyncio.get_running_loop().create_task(self._lease())
        await super().acquire()

    async def _lease(self) -> None:
        """Lease slots from the actor while the calls here want more than are leased."""
        try:
            while (want := self._wanted()) > 0:
                self._ask = self._actor.acquire.remote(self.holder, want)
                try:
                    got = await self._ask
                except ray.exceptions.TaskCancelledError:  # no call here wants it any more
                    return
                except ray.exceptions.RayActorError:
                    driver_gone()
                finally:
                    self._ask = None
                if not got:
                    return
                self.leased += got
                self._wake()
        finally:
            self._leasing = None

    def release(self) -> None:
        """A call finished: its slot goes to the next call here, or back when one is owed."""
        with self._lock:
            self.in_flight -= 1
            give = min(self.owed, self.leased - self.in_flight)
            self.owed -= give
            self.leased -= give
        if give:
            self._actor.release.remote(self.holder, give)
        self._wake()

    def on_success(self) -> None:
        self._successes += 1

    def on_rate_limited(self) -> None:
        self.rate_limited += 1
        self._sent.append(self._actor.event.remote("on_rate_limited"))

    def on_timeout(self) -> None:
        self._sent.append(self._actor.event.remote("on_timeout"))

    async def _sync_forever(self) -> None:
        while True:
            await asyncio.sleep(SYNC_SECONDS)
            free = self.leased - self.in_flight
            await self.sync(min(free, self._idle))
            self._idle = self.leased - self.in_flight

    async def sync(self, give: int) -> None:
        """Tell the actor the successes since the last sync and the slots held, give back
        ``give`` free slots, and take what it says this worker owes."""
        give = max(0, min(give, self.leased - self.in_flight))
        self.leased -= give
        successes, self._successes = self._successes, 0
        held = None if self._ask is not None else self.leased  # known while no lease waits
        try:
            owed = await self._actor.sync.remote(self.holder, successes, give, held)
        except ray.exceptions.RayActorError:
            driver_gone()
        free = min(owed, self.leased - self.in_flight)
        if free:
            self.leased -= free
            self._actor.release.remote(self.holder, free)
        self.owed = owed - free

    async def flush(self) -> None:
        """Wait until the permit actor has taken in every outcome told so far; a request
        for slots that no call here wants any more is withdrawn (the free slots stay leased
        for the next batch, or go back at the next sync)."""
        if self._ask is not None and self._wanted() <= 0:
            ray.cancel(self._ask)
        await self.sync(0)
        sent, self._sent = self._sent, []
        try:
            await asyncio.gather(*sent)
        except ray.exceptions.RayActorError:
            driver_gone()

    def configure(self, limit: int) -> None:
        self.max_limit = limit
        self._actor.configure.remote(limit)


class ClusterLimits(Limits):
    """A worker's limits: the backends the driver made a permit actor for take their slots
    from it; any other backend's from this process, as in a local run."""

    def __init__(self, limiters: dict[str, ClusterLimiter]) -> None:
        super().__init__()
        self.limiters = limiters

    def limiter(self, key: str, own: int | None = None) -> Limiter:
        found = self.limiters.get(key)
        return found if found is not None else super().limiter(key, own)


class HandedLimits(Limits):
    """The driver's limits: the run's own, noting each backend's limiter as it is handed
    out, so the cluster's permit actors start from the same bounds."""

    def __init__(self, bound: int | None) -> None:
        super().__init__(bound)
        self.handed: dict[str, Limiter] = {}

    def limiter(self, key: str, own: int | None = None) -> Limiter:
        found = super().limiter(key, own)
        self.handed.setdefault(key, found)
        return found
