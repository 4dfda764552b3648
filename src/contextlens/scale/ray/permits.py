"""One rate limit for the cluster: per judge backend, a permit actor holds the engine's
:class:`~contextlens.engine.limiter.Limiter`; each worker's :class:`ClusterLimiter` takes its
slots from it and tells it each call's outcome, so the bound and its adaptation are the
cluster's."""

from __future__ import annotations

import asyncio
import os
from collections import Counter
from typing import Any, NoReturn

import ray

from contextlens.engine.limiter import Limiter, Limits

__all__ = ["ClusterLimiter", "ClusterLimits", "HandedLimits", "Permits", "driver_gone"]


class Permits:
    """A Ray actor holding one backend's :class:`Limiter` for the whole cluster: its slots
    are handed out to the workers' calls, and its adaptive bound moves once per event for
    the cluster. Slots are counted per holder (one life of a worker, ``ACTOR_ID/LIFE``), so
    a worker that died and was restarted gives back what its earlier lives held, and a
    slot granted to an earlier life afterwards is given back at once."""

    EVENTS = frozenset({"on_success", "on_rate_limited", "on_timeout"})

    def __init__(self, limit: int) -> None:
        self.limiter = Limiter(limit)
        self.held: Counter[str] = Counter()
        self.lives: set[str] = set()
        self.dead: set[str] = set()

    async def acquire(self, holder: str) -> None:
        self.lives.add(holder)
        await self.limiter.acquire()
        if holder in self.dead:  # granted to a life that has ended
            self.limiter.release()
        else:
            self.held[holder] += 1

    async def release(self, holder: str) -> None:
        if self.held[holder] > 0:
            self.held[holder] -= 1
            self.limiter.release()

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
        }


def driver_gone() -> NoReturn:
    """The permit actor is gone for good (it is restarted when it merely crashes): the
    driver that owns it and this worker died. End the worker at once, before the call that
    could not get a slot is written down as a failed item."""
    os._exit(1)


class ClusterLimiter(Limiter):
    """A worker's side of a cluster-wide limiter: the slots come from the backend's permit
    actor, and the calls' outcomes go to it, so the bound and its adaptation are the
    cluster's. ``peak`` is the most slots this worker held at once."""

    def __init__(self, actor: Any, limit: int, holder: str, origin: str | None = None) -> None:
        super().__init__(limit)
        self._actor = actor
        self.holder = holder
        self._sent: list[Any] = []  # outcomes told to the permit actor, not yet confirmed
        if origin is not None:  # the limit was settled where the run started
            self.origin = origin

    async def begin(self) -> None:
        """Tell the permit actor this life of the worker has begun (see ``Permits.begin``)."""
        try:
            await self._actor.begin.remote(self.holder)
        except ray.exceptions.RayActorError:
            driver_gone()

    async def acquire(self) -> None:
        """Wait for one of the cluster's slots."""
        granted = asyncio.wrap_future(self._actor.acquire.remote(self.holder).future())
        try:
            await asyncio.shield(granted)
        except asyncio.CancelledError:  # a slot granted after all is given back
            granted.add_done_callback(self._give_back)
            raise
        except ray.exceptions.RayActorError:
            driver_gone()
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)

    def _give_back(self, granted: asyncio.Future[None]) -> None:
        if not granted.cancelled() and granted.exception() is None:
            self._actor.release.remote(self.holder)

    def release(self) -> None:
        self.in_flight -= 1
        self._actor.release.remote(self.holder)

    def on_success(self) -> None:
        self._sent.append(self._actor.event.remote("on_success"))

    def on_rate_limited(self) -> None:
        self.rate_limited += 1
        self._sent.append(self._actor.event.remote("on_rate_limited"))

    def on_timeout(self) -> None:
        self._sent.append(self._actor.event.remote("on_timeout"))

    async def flush(self) -> None:
        """Wait until the permit actor has taken in every outcome told so far."""
        sent, self._sent = self._sent, []
        try:
            await asyncio.gather(*sent)
        except ray.exceptions.RayActorError:
            driver_gone()

    def configure(self, limit: int) -> None:
        super().configure(limit)
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
