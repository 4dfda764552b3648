"""Retries of judge and embedding calls: per-call timeout, Retry-After, jittered back-off.

The only place in contextlens that waits before trying a call again: after a failure, and
when an attempt could not be made yet (:class:`NotYet`: no room under the run's cost cap).
"""

from __future__ import annotations

import asyncio
import math
import random
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from contextlens.backend import (
    BackendConnectionError,
    BackendError,
    BackendTimeout,
    RateLimited,
)

__all__ = ["NotYet", "RetryPolicy", "call_with_retry", "is_retryable", "within"]

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How a call is retried.

    Args:
        max_attempts: attempts in all (1 = no retry). Attempts the server refused to serve
            (a rate limit, or a connection refused or reset: a server restarting or briefly
            down) do not count: they are retried, after the server's Retry-After or with
            back-off, for as long as the budget lasts.
        initial_delay: ceiling of the first back-off wait; doubles per attempt.
        max_delay: cap of any one wait, Retry-After included.
        timeout: seconds per attempt (``None``: no limit); exceeding it raises the
            retryable :class:`~contextlens.judges.base.BackendTimeout`.
        budget: seconds for the whole call, attempts and waits together: no wait that
            would end past it is started (an attempt already started runs to its timeout).
        jitter: full jitter on back-off waits (uniform in ``[0, ceiling]``) and up to 10%
            added to Retry-After waits, so that concurrent callers spread out.
    """

    max_attempts: int = 6
    initial_delay: float = 0.5
    max_delay: float = 30.0
    timeout: float | None = 60.0
    budget: float = 300.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        for name in ("initial_delay", "max_delay", "budget"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        if self.timeout is not None and not self.timeout > 0:
            raise ValueError(f"timeout must be > 0 or None, got {self.timeout}")


class NotYet(Exception):
    """An attempt that was not made: it can be once :meth:`wait` returns, inside
    :meth:`resumed`. Neither a failure nor a retry: no attempt is counted, no back-off."""

    async def wait(self) -> None:
        """Return when the attempt can be made (raise what stops it for good)."""

    def resumed(self) -> AbstractContextManager[None]:
        """The context of the attempt made after :meth:`wait`."""
        return nullcontext()


def is_retryable(exc: BaseException) -> bool:
    """Whether ``exc`` may go away on another try: a rate limit or a transient fault (see
    :mod:`contextlens.backend`), or a timeout."""
    if isinstance(exc, BackendError):
        return exc.retryable
    return isinstance(exc, (asyncio.TimeoutError, TimeoutError))


def _unreachable(exc: BaseException | None) -> bool:
    """Whether the attempt failed to reach the server at all (refused, reset, dropped)."""
    return isinstance(exc, BackendConnectionError)


def _retry_after(exc: BaseException | None) -> float | None:
    value: Any = exc.retry_after if isinstance(exc, BackendError) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value >= 0 and math.isfinite(value) else None


if sys.version_info >= (3, 11):

    async def within(fn: Callable[[], Awaitable[T]], seconds: float) -> T:
        """``await fn()``, or :class:`BackendTimeout` after ``seconds``."""
        scope = asyncio.timeout(seconds)
        try:
            async with scope:
                return await fn()
        except TimeoutError:
            if scope.expired():
                raise BackendTimeout(f"no reply within {seconds:g}s") from None
            raise  # raised by fn itself, not our timeout (still retryable)

else:  # Python 3.10: no asyncio.timeout; wait_for runs fn in a task of its own

    async def within(fn: Callable[[], Awaitable[T]], seconds: float) -> T:
        """``await fn()``, or :class:`BackendTimeout` after ``seconds``."""
        begun = time.monotonic()
        try:
            return await asyncio.wait_for(fn(), seconds)
        except asyncio.TimeoutError:
            if time.monotonic() - begun < seconds:
                raise  # raised by fn itself, not our timeout (still retryable)
            raise BackendTimeout(f"no reply within {seconds:g}s") from None


async def call_with_retry(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    on_retry: Callable[[BaseException, float], None] | None = None,
) -> T:
    """Await ``fn()`` until it succeeds, retrying retryable errors under ``policy``.

    Each wait is the error's ``retry_after`` when it has one (capped at ``max_delay``),
    else exponential back-off (at least half of its ceiling after a connection failure, so
    that the waits add up to outlast a restarting server). Stops after ``max_attempts``
    counted attempts (rate limits and connection failures are not counted), when the next
    wait would end past the budget, or when the server's Retry-After alone exceeds what is
    left of it; the last error is then raised as is. Non-retryable errors are raised at once.
    ``on_retry(error, wait_seconds)`` is called before each wait. An attempt that raises
    :class:`NotYet` is made again once it can be, uncounted.
    """
    started = time.monotonic()
    waits: dict[int, float] = {}  # attempt number -> the wait planned after it
    counted: dict[int, int] = {0: 0}  # attempt number -> counted failed attempts up to it

    def failures(state: RetryCallState) -> int:
        n = state.attempt_number
        if n not in counted:
            exc = state.outcome.exception() if state.outcome is not None else None
            refused = _unreachable(exc) or isinstance(exc, RateLimited)
            counted[n] = counted.get(n - 1, 0) + (0 if refused else 1)
        return counted[n]

    def planned_wait(state: RetryCallState) -> float:
        # Computed once per attempt: stop, wait and before_sleep all see the same value
        # whatever order the tenacity version calls them in.
        n = state.attempt_number
        if n not in waits:
            exc = state.outcome.exception() if state.outcome is not None else None
            retry_after = _retry_after(exc)
            if retry_after is not None:
                extra = random.uniform(0.0, 0.1 * retry_after) if policy.jitter else 0.0
                wait = min(retry_after + extra, policy.max_delay)
            else:
                ceiling = min(policy.max_delay, policy.initial_delay * 2.0 ** min(n - 1, 64))
                floor = ceiling / 2 if _unreachable(exc) else 0.0
                wait = random.uniform(floor, ceiling) if policy.jitter else ceiling
            waits[n] = wait
        return waits[n]

    def stop(state: RetryCallState) -> bool:
        if failures(state) >= policy.max_attempts:
            return True
        remaining = policy.budget - (time.monotonic() - started)
        exc = state.outcome.exception() if state.outcome is not None else None
        retry_after = _retry_after(exc)
        if retry_after is not None and retry_after > remaining:
            return True
        return planned_wait(state) > remaining

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None:
            exc = state.outcome.exception()
            if exc is not None:
                on_retry(exc, planned_wait(state))

    async def attempt() -> T:
        resumed: AbstractContextManager[None] = nullcontext()
        while True:
            try:
                with resumed:
                    if policy.timeout is None:
                        return await fn()
                    return await within(fn, policy.timeout)
            except NotYet as later:  # not made: made once it can be
                await later.wait()
                resumed = later.resumed()

    # The first try runs outside tenacity, whose per-call bookkeeping costs more CPU than
    # the rest of a judge call; a retryable failure is replayed as tenacity's first attempt,
    # so every decision about waiting and stopping is still tenacity's.
    try:
        return await attempt()
    except Exception as exc:
        if not is_retryable(exc) or policy.max_attempts <= 1:
            raise
        first: Exception | None = exc

    async def replay_then_attempt() -> T:
        nonlocal first
        if first is not None:
            failed, first = first, None
            raise failed
        return await attempt()

    retrying = AsyncRetrying(
        stop=stop,
        wait=planned_wait,
        retry=retry_if_exception(is_retryable),
        before_sleep=before_sleep,
        reraise=True,
    )
    return await retrying(replay_then_attempt)
