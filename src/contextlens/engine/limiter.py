"""A bound on judge calls in flight, shared per judge backend, that adapts to rate limits.

Additive increase, multiplicative decrease: every successful call raises the limit by
``1/limit`` (about one more slot per round of calls), every rate-limited call multiplies it
by ``backoff`` (0.7; at most once per ``cooldown`` seconds, so a burst of 429s from one
overload counts once). The
limit never exceeds the configured maximum or falls below one.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Limiter:
    """At most ``limit`` calls in flight at once, lowered on rate limits and raised slowly.

    One limiter may be used from several event loops over its life (each sync call runs
    its own loop); each loop gets its own condition, created on first use.
    """

    def __init__(
        self, limit: int = 16, *, adaptive: bool = True, cooldown: float = 1.0, backoff: float = 0.7
    ) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self.max_limit = limit
        self.adaptive = adaptive
        self.cooldown = cooldown
        self.backoff = backoff
        self.current = float(limit)
        self.in_flight = 0
        self.peak = 0
        self.rate_limited = 0
        self._last_decrease = float("-inf")
        self._conditions: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, asyncio.Condition
        ] = weakref.WeakKeyDictionary()

    @property
    def limit(self) -> int:
        """The number of calls allowed in flight now."""
        return max(1, int(self.current))

    def _condition(self) -> asyncio.Condition:
        loop = asyncio.get_running_loop()
        cond = self._conditions.get(loop)
        if cond is None:
            cond = self._conditions[loop] = asyncio.Condition()
        return cond

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold one slot for the duration of the block."""
        cond = self._condition()
        async with cond:
            await cond.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
        try:
            yield
        finally:
            async with cond:
                self.in_flight -= 1
                cond.notify(max(1, self.limit - self.in_flight))

    def on_success(self) -> None:
        """A call succeeded: raise the limit by ``1/limit``, up to the maximum."""
        if self.adaptive and self.current < self.max_limit:
            self.current = min(float(self.max_limit), self.current + 1.0 / self.current)

    def on_rate_limited(self) -> None:
        """A call was rate-limited: lower the limit by ``backoff`` (once per cooldown)."""
        self.rate_limited += 1
        now = time.monotonic()
        if self.adaptive and now - self._last_decrease >= self.cooldown:
            self.current = max(1.0, self.current * self.backoff)
            self._last_decrease = now


_registry: dict[str, Limiter] = {}
_registry_lock = threading.Lock()


def limiter_for(key: str, limit: int) -> Limiter:
    """The limiter shared by every judge on the backend ``key``.

    Asking for another ``limit`` than the limiter has reconfigures it: the maximum and the
    current limit both become ``limit``. The same limit keeps the adaptive state, so a
    backend that was rate-limited a moment ago is not hit at full speed again.
    """
    with _registry_lock:
        limiter = _registry.get(key)
        if limiter is None:
            limiter = _registry[key] = Limiter(limit)
        elif limiter.max_limit != limit:  # a new configuration starts at its own limit
            limiter.max_limit = limit
            limiter.current = float(limit)
        return limiter
