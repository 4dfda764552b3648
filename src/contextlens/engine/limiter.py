"""A bound on judge calls in flight, shared per judge backend, that adapts to rate limits.

Additive increase, multiplicative decrease: every successful call raises the limit by
``1/limit`` (about one more slot per round of calls), every rate-limited or timed-out call
multiplies it by ``backoff`` (0.7; at most once per ``cooldown`` seconds, so a burst of 429s
from one overload counts once). The limit never exceeds the configured maximum or falls
below one.

A server that does not say how many calls it serves at once has its limit found by a
:class:`Ramp` over the run's first calls: one call at a time, doubled while the calls do not
slow down, the limit kept where they do.

Waiters are served first come first served, except that the waiters of a run that orders
its calls (:data:`current_turns`: a run under a cost cap, whose metrics take turns) go in
that run's order when the longest waiter is one of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from types import TracebackType
from typing import Any, Protocol

from contextlens.sync import PerLoop

#: Calls in flight per backend when nobody asked for another bound, and the most a
#: :class:`Ramp` tries.
DEFAULT_LIMIT = 16
#: How many times slower (in median) the calls of a level may be than those of the fastest
#: level before a :class:`Ramp` ends below it.
RAMP_SLOWDOWN = 1.5
#: Where a limit came from (:attr:`Limiter.origin`): the server said it; a ramp found it.
REPORTED, FOUND_BY_RAMP, RAMPING = "reported by the server", "found by a ramp", "ramping"


class Ramp:
    """How many calls a server serves at once, found from a run's own calls.

    It starts at one call in flight and doubles that level while the calls do not slow down,
    up to ``cap``. At each level the first ``level`` calls sent are not timed (they share the
    server with calls of the level below; at one call, the first call warms the server up: a
    model loaded, a prompt cached); the calls sent after them are, and once ``max(3, level)``
    of those have answered, their median latency is compared with the fastest level's (the
    judge gives it per completion token where the server counts them, so that a long reply
    is not taken for a slow server). More than
    ``slowdown`` times slower and the ramp ends at the level below (the server queued what it
    could not serve at once), else it goes on to the next level. A rate limit or a timeout
    ends it at the level below too, and ``cap`` ends it at the latest: ``found`` is then the
    level it ended at and ``reason`` why.
    """

    def __init__(self, cap: int = DEFAULT_LIMIT, slowdown: float = RAMP_SLOWDOWN) -> None:
        if cap < 1:
            raise ValueError(f"cap must be >= 1, got {cap}")
        if slowdown <= 1.0:
            raise ValueError(f"slowdown must be > 1, got {slowdown}")
        self.cap = cap
        self.slowdown = slowdown
        self.level = 1
        self.found: int | None = None
        self.reason = ""
        self._kept = 1  # the highest level whose calls did not slow down
        self._sent = 0
        self._times: list[float] = []
        self._fastest: float | None = None

    def __repr__(self) -> str:
        state = f"found={self.found}" if self.found is not None else f"level={self.level}"
        return f"Ramp(cap={self.cap}, {state})"

    def sent(self) -> int | None:
        """A call is sent now: the level it is timed at, or None when it is not timed."""
        if self.found is not None:
            return None
        self._sent += 1
        return self.level if self._sent > self.level else None

    def answered(self, level: int, latency: float) -> bool:
        """A call timed at ``level`` answered with ``latency``: whether the level changed (or
        the ramp ended). A call timed at another level than the current one is left out."""
        if self.found is not None or level != self.level:
            return False
        self._times.append(latency)
        if len(self._times) < max(3, self.level):
            return False
        median = statistics.median(self._times)
        fastest = self._fastest
        if fastest is not None and median > self.slowdown * fastest:
            slower = median / fastest if fastest > 0 else float("inf")
            self._end(f"{self.level} at once were {slower:.1f}x slower than {self._kept}")
            return True
        self._fastest = median if fastest is None else min(fastest, median)
        self._kept = self.level
        if self.level >= self.cap:
            self._end(f"no slower up to {self.cap} at once, the most a ramp tries")
            return True
        self.level = min(self.cap, 2 * self.level)
        self._sent, self._times = 0, []
        return True

    def overloaded(self, what: str) -> bool:
        """The server answered ``what`` (a rate limit, a timeout): the ramp ends at the level
        below. Whether it ended now."""
        if self.found is not None:
            return False
        self._end(f"{what} at {self.level} at once")
        return True

    def _end(self, reason: str) -> None:
        self.found = self.level = self._kept
        self.reason = reason


class Turns(Protocol):
    """How a run orders its calls that wait for a slot."""

    def place(self) -> Callable[[], tuple[Any, ...]]:
        """Called as a call starts waiting: a function of its place in line now (the
        smallest goes first)."""
        ...


current_turns: ContextVar[Turns | None] = ContextVar("contextlens_turns", default=None)
"""The order of the current run's waiting calls (None: first come, first served)."""


class Limiter:
    """At most ``limit`` calls in flight at once, lowered on rate limits and raised slowly.

    Waiters queue first come first served and a freed slot is handed straight to the
    longest waiter (no herd of waiters re-checking a condition), or, when that waiter's run
    orders its calls (:data:`current_turns`), to the first of that run's waiters in its
    order. One limiter may be used from several event loops and threads at once (each sync
    call runs its own loop): one queue serves them all, and a slot freed in one loop is
    handed to a waiter in another.
    ``peak`` is the most calls it let in flight at once, ``lowest`` the lowest limit it fell
    to, ``rate_limited`` and ``timeouts`` the rate-limited and timed-out calls it was told of.

    While a :class:`Ramp` finds the limit (:attr:`ramp`), the limit is the ramp's level: each
    call tells :meth:`sent` it is sent and :meth:`answered` its latency, a rate limit or
    timeout ends the ramp, and its end makes what it found the limit, adapted from then on.
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
        self.timeouts = 0
        #: Where the limit came from once it was settled by :meth:`settle` (None: not yet).
        self.origin: str | None = None
        #: The ramp that finds the limit, while it does and once it has (None: no ramp).
        self.ramp: Ramp | None = None
        self._last_decrease = float("-inf")
        self._queue: deque[_Waiter] = deque()
        self._lock = threading.Lock()
        self._settling: PerLoop[asyncio.Lock] = PerLoop(asyncio.Lock)

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

    async def settle(self, find: Callable[[], Awaitable[tuple[int, str] | Ramp | None]]) -> None:
        """Set the limit once, before the first call, from ``find()``: a limit and where it
        came from, a :class:`Ramp` that finds it from the calls (starting at one call), or
        None, which keeps the limit as it is. Callers that arrive meanwhile wait, so a
        one-slot server is never sent a first burst."""
        if self.origin is not None:
            return
        async with self._settling.get():
            if self.origin is not None:
                return
            found = await find()
            if found is None:
                self.origin = "default"
            elif isinstance(found, Ramp):
                self.ramp, self.origin = found, RAMPING
                self.configure(found.level)
            else:
                limit, self.origin = found
                self.configure(limit)

    @property
    def waiting(self) -> int:
        """Calls waiting for a slot now."""
        return len(self._queue)

    @property
    def ramping(self) -> bool:
        """Whether a ramp is finding the limit now."""
        return self.ramp is not None and self.ramp.found is None

    def sent(self) -> int | None:
        """A call is sent, holding a slot: the ramp's level it is timed at (None: it is not
        timed, as when no ramp is finding the limit)."""
        if not self.ramping:
            return None
        with self._lock:
            return self.ramp.sent() if self.ramp is not None else None

    def answered(self, level: int, latency: float) -> None:
        """A call that :meth:`sent` timed at ``level`` answered with ``latency`` (see
        :meth:`Ramp.answered`)."""
        with self._lock:
            changed = self.ramp is not None and self.ramp.answered(level, latency)
        if changed:
            self._follow_ramp()

    def _overloaded(self, what: str) -> bool:
        """Whether a ramp was finding the limit (and has now ended, ``what`` said)."""
        if not self.ramping:
            return False
        with self._lock:
            ended = self.ramp is not None and self.ramp.overloaded(what)
        if ended:
            self._follow_ramp()
        return True

    def _follow_ramp(self) -> None:
        """The limit the ramp is at, or has ended at (then its origin)."""
        ramp = self.ramp
        if ramp is None:
            return
        if ramp.found is not None:
            self.origin = FOUND_BY_RAMP
        self.configure(ramp.level)

    def slot(self) -> _Slot:
        """``async with limiter.slot():`` holds one slot for the duration of the block."""
        return _Slot(self)

    async def acquire(self) -> None:
        """Wait for a slot, first come first served, whichever loop or thread asks."""
        with self._lock:
            if self.in_flight < self.limit and not self._queue:
                self._take()
                return
            turns = current_turns.get()
            entry = _Waiter(asyncio.get_running_loop(), turns)
            self._queue.append(entry)
        try:
            await entry.future  # the releaser has taken the slot for us
        except asyncio.CancelledError:
            with self._lock:
                if not entry.granted:
                    with contextlib.suppress(ValueError):  # already passed over as cancelled
                        self._queue.remove(entry)
                    raise
            if not entry.future.cancelled():  # handed a slot while being cancelled
                self.release()
            # else: the hand-over finds the future cancelled and passes the slot on
            raise

    def try_acquire(self) -> bool:
        """Take a slot if one is free now and no call waits for one; whether it did."""
        with self._lock:
            if self.in_flight < self.limit and not self._queue:
                self._take()
                return True
        return False

    def release(self) -> None:
        """Give a slot back; the longest waiters get the slots now free."""
        with self._lock:
            self.in_flight -= 1
        self._wake()

    def _take(self) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)

    def _wake(self) -> None:
        """Hand free slots to the longest waiters, each on its own loop."""
        granted: list[_Waiter] = []
        with self._lock:
            while self._queue and self.in_flight < self.limit:
                entry = self._next()
                if entry.future.done():  # cancelled before its turn
                    continue
                entry.granted = True
                self._take()
                granted.append(entry)
        for entry in granted:
            try:
                if _running_loop() is entry.loop:
                    self._hand_over(entry)
                else:
                    entry.loop.call_soon_threadsafe(self._hand_over, entry)
            except RuntimeError:  # its loop is closed: nobody waits there any more
                self.release()

    def _next(self) -> _Waiter:
        """The waiter served next (lock held): the longest, or, when it belongs to a run
        that orders its calls, the first in that run's order."""
        head = self._queue[0]
        if head.turns is None or len(self._queue) == 1:
            return self._queue.popleft()
        mine = [w for w in self._queue if w.turns is head.turns and not w.future.done()]
        chosen = min(mine, key=lambda w: w.place()) if mine else head
        self._queue.remove(chosen)
        return chosen

    def _hand_over(self, entry: _Waiter) -> None:
        if entry.future.done():  # cancelled between the grant and now
            self.release()
        else:
            entry.future.set_result(None)

    def on_success(self) -> None:
        """A call succeeded: raise the limit by ``1/limit``, up to the maximum."""
        if self.adaptive and self.current < self.max_limit:
            self.current = min(float(self.max_limit), self.current + 1.0 / self.current)
            self._wake()

    def on_rate_limited(self) -> None:
        """A call was rate-limited: lower the limit by ``backoff`` (once per cooldown); while
        a ramp finds the limit, end it at the level below."""
        self.rate_limited += 1
        if not self._overloaded("a rate limit"):
            self._decrease()

    def on_timeout(self) -> None:
        """A call timed out: the server is slower than the load it is given, so lower the
        limit as for a rate limit."""
        self.timeouts += 1
        if not self._overloaded("a timeout"):
            self._decrease()

    def _decrease(self) -> None:
        now = time.monotonic()
        if self.adaptive and now - self._last_decrease >= self.cooldown:
            self.current = max(1.0, self.current * self.backoff)
            self.lowest = min(self.lowest, self.limit)
            self._last_decrease = now


class _Waiter:
    """A caller waiting for a slot: its loop, the future it awaits, whether it got one, and
    the order of its run (``turns``) with its place in it."""

    __slots__ = ("future", "granted", "loop", "place", "turns")

    def __init__(self, loop: asyncio.AbstractEventLoop, turns: Turns | None = None) -> None:
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()
        self.granted = False
        self.turns = turns
        self.place: Callable[[], tuple[Any, ...]] = turns.place() if turns else tuple


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


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


_registry: dict[tuple[str, int | None], Limiter] = {}
_registry_lock = threading.Lock()


def limiter_for(key: str, limit: int | None = None) -> Limiter:
    """The limiter shared by every judge on the backend ``key`` that asks for ``limit``.

    ``limit=None`` is the backend's own limiter, made at :data:`DEFAULT_LIMIT` (or settled from what
    a local server reports, or by a ramp) and shared by every run that sets no bound, with its
    adaptive state. An explicit ``limit`` has a limiter of its own, shared only by the judges
    that ask for the same bound: asking for one never changes what another run gets.
    """
    with _registry_lock:
        limiter = _registry.get((key, limit))
        if limiter is None:
            limiter = _registry[(key, limit)] = Limiter(DEFAULT_LIMIT if limit is None else limit)
            if limit is not None:
                limiter.origin = f"set to {limit}"
        return limiter


class Limits:
    """Where the judges of one run take their limiters.

    ``bound`` None: each backend's bound is its own (a spec's ``concurrency=``, a local server's
    slots or what a ramp finds, else :data:`DEFAULT_LIMIT`); an int: the run's
    ``max_concurrency``, for every backend of the run. Either way the limiter comes from
    :func:`limiter_for`, so no run changes another's. An executor that runs elsewhere subclasses
    it (the Ray executor's limiters take their slots from the cluster).
    """

    def __init__(self, bound: int | None = None) -> None:
        if bound is not None and bound < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {bound}")
        self.bound = bound

    def limiter(self, key: str, own: int | None = None) -> Limiter:
        """The limiter of the backend ``key`` whose own bound is ``own`` (None: none)."""
        return limiter_for(key, self.bound if self.bound is not None else own)

    def __repr__(self) -> str:
        return f"Limits(bound={self.bound})"
