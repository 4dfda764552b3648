"""A bound on judge calls in flight, shared by everything that uses one judge."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Limiter:
    """At most ``limit`` calls in flight at once.

    One limiter may be used from several event loops over its life (each sync call runs
    its own loop); each loop gets its own semaphore, created on first use.
    """

    def __init__(self, limit: int = 16) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self.limit = limit
        self.in_flight = 0
        self.peak = 0
        self._semaphores: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, asyncio.Semaphore
        ] = weakref.WeakKeyDictionary()

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        sem = self._semaphores.get(loop)
        if sem is None:
            sem = self._semaphores[loop] = asyncio.Semaphore(self.limit)
        return sem

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one of the slots for the duration of the block."""
        async with self._semaphore():
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            try:
                yield
            finally:
                self.in_flight -= 1
