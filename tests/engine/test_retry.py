"""call_with_retry: Retry-After, back-off, stop rules, per-call timeout."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

import pytest

from contextlens.backend import (
    BackendConnectionError,
    BackendError,
    BackendTimeout,
    Completion,
    FatalError,
    Message,
    http_error,
)
from contextlens.engine.retry import RetryPolicy, call_with_retry, is_retryable
from contextlens.judges.openai_compat import OpenAICompatBackend
from contextlens.testing import DEFAULT_REPLY, FakeOpenAIServer

FAST = RetryPolicy(initial_delay=0.001, max_delay=0.01, timeout=1.0, budget=5.0)


class Flaky:
    """Raises the given errors in turn, then returns "ok"; counts calls."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def recorder() -> tuple[list[tuple[BaseException, float]], Callable[[BaseException, float], None]]:
    seen: list[tuple[BaseException, float]] = []
    return seen, lambda exc, wait: seen.append((exc, wait))


async def test_retry_after_is_honoured() -> None:
    fn = Flaky(http_error(429, "slow down", 0.2), http_error(429, "slow down", 0.2))
    seen, on_retry = recorder()
    started = time.monotonic()
    result = await call_with_retry(fn, RetryPolicy(initial_delay=0.001), on_retry=on_retry)
    elapsed = time.monotonic() - started
    assert result == "ok"
    assert fn.calls == 3
    assert 0.4 <= elapsed < 1.0
    assert [isinstance(e, BackendError) and e.status == 429 for e, _ in seen] == [True, True]
    assert all(0.2 <= wait <= 0.22 for _, wait in seen)  # never less than asked, <= 10% jitter


async def test_retry_after_capped_at_max_delay() -> None:
    fn = Flaky(http_error(503, "busy", 100.0))
    seen, on_retry = recorder()
    policy = RetryPolicy(max_delay=0.01, budget=200.0, jitter=False)
    assert await call_with_retry(fn, policy, on_retry=on_retry) == "ok"
    assert [wait for _, wait in seen] == [0.01]


async def test_exponential_backoff_without_retry_after() -> None:
    fn = Flaky(*(http_error(500, "oops") for _ in range(5)))
    seen, on_retry = recorder()
    policy = RetryPolicy(initial_delay=0.001, max_delay=0.006, jitter=False)
    assert await call_with_retry(fn, policy, on_retry=on_retry) == "ok"
    assert fn.calls == 6
    assert [wait for _, wait in seen] == pytest.approx([0.001, 0.002, 0.004, 0.006, 0.006])


async def test_jittered_backoff_stays_under_the_ceiling() -> None:
    fn = Flaky(*(http_error(502, "bad gateway") for _ in range(4)))
    seen, on_retry = recorder()
    policy = RetryPolicy(initial_delay=0.002, max_delay=0.01, jitter=True)
    assert await call_with_retry(fn, policy, on_retry=on_retry) == "ok"
    ceilings = [0.002, 0.004, 0.008, 0.01]
    assert all(0.0 <= wait <= c for (_, wait), c in zip(seen, ceilings, strict=True))


@pytest.mark.parametrize(
    "error",
    [
        http_error(400, "bad request"),
        http_error(401, "unauthorized"),
        FatalError("reply has no content"),
        ValueError("a bug"),
    ],
)
async def test_non_retryable_errors_raise_at_once(error: BaseException) -> None:
    fn = Flaky(error)
    seen, on_retry = recorder()
    with pytest.raises(type(error)) as info:
        await call_with_retry(fn, FAST, on_retry=on_retry)
    assert info.value is error
    assert fn.calls == 1
    assert seen == []


async def test_max_attempts_then_the_last_error() -> None:
    errors = [http_error(500, f"failure {i}") for i in range(10)]
    fn = Flaky(*errors)
    seen, on_retry = recorder()
    policy = RetryPolicy(max_attempts=3, initial_delay=0.001, max_delay=0.001)
    with pytest.raises(BackendError) as info:
        await call_with_retry(fn, policy, on_retry=on_retry)
    assert fn.calls == 3
    assert info.value is errors[2]
    assert len(seen) == 2


async def test_max_attempts_one_means_no_retry() -> None:
    fn = Flaky(http_error(429, "slow down", 0.0))
    with pytest.raises(BackendError):
        await call_with_retry(fn, RetryPolicy(max_attempts=1))
    assert fn.calls == 1


async def test_budget_is_never_waited_past() -> None:
    errors = [http_error(429, "slow down", 0.1) for _ in range(10)]
    fn = Flaky(*errors)
    policy = RetryPolicy(max_attempts=10, max_delay=1.0, budget=0.15, jitter=False)
    seen, on_retry = recorder()
    started = time.monotonic()
    with pytest.raises(BackendError) as info:
        await call_with_retry(fn, policy, on_retry=on_retry)
    elapsed = time.monotonic() - started
    # one wait of 0.1 fits; a second would end at 0.2 > 0.15, so none is begun
    assert fn.calls == 2 and [wait for _, wait in seen] == [pytest.approx(0.1)]
    assert info.value is errors[1]
    assert elapsed >= 0.1


async def test_retry_after_beyond_the_remaining_budget_stops() -> None:
    fn = Flaky(http_error(429, "come back in an hour", 3600.0))
    policy = RetryPolicy(max_delay=0.01, budget=10.0)
    started = time.monotonic()
    with pytest.raises(BackendError):
        await call_with_retry(fn, policy)
    assert fn.calls == 1  # the capped 0.01 s wait would fit, but the server said an hour
    assert time.monotonic() - started < 0.5


async def test_per_call_timeout_becomes_backend_timeout_and_is_retried() -> None:
    calls = 0

    async def slow_then_fast() -> str:
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.sleep(5)
        return "ok"

    seen, on_retry = recorder()
    policy = RetryPolicy(timeout=0.05, initial_delay=0.001, jitter=False)
    started = time.monotonic()
    assert await call_with_retry(slow_then_fast, policy, on_retry=on_retry) == "ok"
    assert time.monotonic() - started < 1.0
    assert calls == 2
    assert len(seen) == 1 and isinstance(seen[0][0], BackendTimeout)
    assert seen[0][0].retryable


async def test_timeouts_exhausted_raise_backend_timeout() -> None:
    async def hang() -> str:
        await asyncio.sleep(5)
        return "never"

    policy = RetryPolicy(max_attempts=2, timeout=0.02, initial_delay=0.001)
    with pytest.raises(BackendTimeout):
        await call_with_retry(hang, policy)


async def test_builtin_timeout_error_is_retried() -> None:
    fn = Flaky(TimeoutError("socket timed out"))
    assert await call_with_retry(fn, FAST) == "ok"
    assert fn.calls == 2
    assert is_retryable(asyncio.TimeoutError()) and not is_retryable(RuntimeError())


async def test_cancellation_is_not_retried() -> None:
    calls = 0

    async def hang() -> str:
        nonlocal calls
        calls += 1
        await asyncio.sleep(5)
        return "never"

    task = asyncio.create_task(call_with_retry(hang, RetryPolicy(timeout=None)))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert calls == 1


def test_policy_validation() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError):
        RetryPolicy(timeout=0)
    with pytest.raises(ValueError):
        RetryPolicy(budget=-1)
    with pytest.raises(ValueError):
        RetryPolicy(max_delay=float("inf"))
    policy = RetryPolicy()
    assert (policy.max_attempts, policy.timeout, policy.budget) == (6, 60.0, 300.0)


async def test_against_the_fake_server_429_500_ok() -> None:
    messages: list[Message] = [{"role": "user", "content": "Rate this."}]
    seen, on_retry = recorder()
    with FakeOpenAIServer(script=["429", "500", "ok"], retry_after="0.05") as server:
        async with OpenAICompatBackend("fake-model", base_url=server.base_url) as backend:
            call: Callable[[], Awaitable[Completion]] = lambda: backend.complete(messages)  # noqa: E731
            policy = RetryPolicy(initial_delay=0.01, max_delay=0.1, timeout=5.0)
            reply = await call_with_retry(call, policy, on_retry=on_retry)
        assert server.calls == 3
        assert server.status_counts == {429: 1, 500: 1, 200: 1}
    assert reply.text == DEFAULT_REPLY
    statuses = [getattr(e, "status", None) for e, _ in seen]
    assert statuses == [429, 500]
    assert 0.05 <= seen[0][1] <= 0.055  # the server's Retry-After


async def test_rate_limits_and_refused_connections_use_up_the_budget_not_the_attempts() -> None:
    refused = BackendConnectionError("refused")
    fn = Flaky(*(http_error(429, "slow down", 0.001) for _ in range(5)), refused, refused)
    policy = RetryPolicy(max_attempts=2, initial_delay=0.001, max_delay=0.002, budget=5.0)
    assert await call_with_retry(fn, policy) == "ok"
    assert fn.calls == 8
    # A fault that may pass but is neither still counts: two attempts in all.
    fn = Flaky(http_error(500, "oops"), http_error(500, "oops again"))
    with pytest.raises(BackendError):
        await call_with_retry(fn, policy)
    assert fn.calls == 2
