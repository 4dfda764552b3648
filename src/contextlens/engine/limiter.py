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
from collections import deque
from types import TracebackType

from contextlens.sync import PerLoop


class Limiter:
    """At most ``limit`` calls in flight at once, lowered on rate limits and raised slowly.

    Waiters queue first come first served and a freed slot is handed straight to the
    longest waiter (no herd of waiters re-checking a condition). One limiter may be used
    from several event loops over its life (each sync call runs its own loop); each loop
    has its own queue. ``peak`` is the most calls it let in flight at once, ``lowest`` the
    lowest limit it fell to, ``rate_limited`` the rate-limited calls it was told of.
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
        self.lowest = limit
        self.in_flight = 0
        self.peak = 0
        self.rate_limited = 0
        self._last_decrease = float("-inf")
        self._waiters: PerLoop[deque[asyncio.Future[None]]] = PerLoop(deque)

    @property
    def limit(self) -> int:
        """The number of calls allowed in flight now."""
        return max(1, int(self.current))

    def configure(self, limit: int) -> None:
        """Make ``limit`` the maximum and the current limit (a new configuration starts at its
        own limit); the same limit as now changes nothing, so the adaptive state is kept."""
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        if limit != self.max_limit:
            self.max_limit = self.lowest = limit
            self.current = float(limit)
            self._wake()

    def slot(self) -> _Slot:
        """``async with limiter.slot():`` holds one slot for the duration of the block."""
        return _Slot(self)

    async def acquire(self) -> None:
        """Wait for a slot, first come first served."""
        queue = self._waiters.get()
        if self.in_flight < self.limit and not queue:
            self._take()
            return
        waiter = asyncio.get_running_loop().create_future()
        queue.append(waiter)
        try:
            await waiter  # the releaser has taken the slot for us
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot while being cancelled: pass it on
            else:
                queue.remove(waiter)
            raise

    def release(self) -> None:
        """Give a slot back; the longest waiters get the slots now free."""
        self.in_flight -= 1
        self._wake()

    def _take(self) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)

    def _wake(self) -> None:
        queue = self._waiters.peek()  # None outside a loop: nobody can be waiting there
        while queue and self.in_flight < self.limit:
            waiter = queue.popleft()
            if not waiter.done():
                self._take()
                waiter.set_result(None)

    def on_success(self) -> None:
        """A call succeeded: raise the limit by ``1/limit``, up to the maximum."""
        if self.adaptive and self.current < self.max_limit:
            self.current = min(float(self.max_limit), self.current + 1.0 / self.current)
            self._wake()

    def on_rate_limited(self) -> None:
        """A call was rate-limited: lower the limit by ``backoff`` (once per cooldown)."""
        self.rate_limited += 1
        now = time.monotonic()
        if self.adaptive and now - self._last_decrease >= self.cooldown:
            self.current = max(1.0, self.current * self.backoff)
            self.lowest = min(self.lowest, self.limit)
            self._last_decrease = now


class _Slot:
    """The async context manager of :meth:`Limiter.slot`."""

    __slots__ = ("_limiter",)

    def __init__(self, limiter: Limiter) -> None:
        self._limiter = limiter

    async def __aenter__(self) -> None:
        await self._limiter.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._limiter.release()


#: Calls in flight per backend when nobody asked for another bound.
DEFAULT_LIMIT = 16

_registry: dict[str, Limiter] = {}
_registry_lock = threading.Lock()


def limiter_for(key: str, limit: int | None = None) -> Limiter:
    """The limiter shared by every judge on the backend ``key``.

    ``limit=None`` takes the limiter as it is (made at :data:`DEFAULT_LIMIT` when new), so
    merely using a backend never changes its bound. An explicit ``limit`` other than the
    limiter's reconfigures it: the maximum and the current limit both become ``limit``.
    The same limit keeps the adaptive state, so a backend that was rate-limited a moment
    ago is not hit at full speed again.
    """
    with _registry_lock:
        limiter = _registry.get(key)
        if limiter is None:
            limiter = _registry[key] = Limiter(DEFAULT_LIMIT if limit is None else limit)
        elif limit is not None:
            limiter.configure(limit)
        return limiter
