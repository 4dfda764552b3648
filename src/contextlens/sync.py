"""Run a coroutine from synchronous code, inside or outside a running event loop; keep
per-loop state for objects that serve several loops over their life."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import weakref
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion and return its result.

    With no running loop this is ``asyncio.run``. Inside a running loop (Jupyter, an
    async web handler) the coroutine runs on a fresh loop in a worker thread, so the
    caller's loop is never re-entered.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_boxed(coro)).value
    ctx = contextvars.copy_context()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="contextlens-sync") as pool:
        return pool.submit(ctx.run, asyncio.run, _boxed(coro)).result().value


class _Box:
    """Holds a result out of sight: ``asyncio.run`` formats its main task (and so the
    task's result) when it restores the SIGINT handler, which for an evaluation of many
    cases would print every result into a string only to throw it away."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<result>"


async def _boxed(coro: Coroutine[Any, Any, T]) -> _Box:
    return _Box(await coro)


class PerLoop(Generic[T]):
    """One ``T`` per event loop, made by ``factory`` on first use in that loop.

    For an object shared by several loops over its life (each sync call runs its own loop):
    loop-bound state (futures, sessions, queues) must never cross loops. A loop's value is
    dropped with the loop.
    """

    def __init__(self, factory: Callable[[], T]) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, T] = (
            weakref.WeakKeyDictionary()
        )

    def get(self) -> T:
        """The running loop's value, made if it has none."""
        loop = asyncio.get_running_loop()
        with self._lock:
            value = self._by_loop.get(loop)
            if value is None:
                value = self._by_loop[loop] = self._factory()
            return value

    def peek(self) -> T | None:
        """The running loop's value if it has one (``None`` outside a running loop)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return None
        with self._lock:
            return self._by_loop.get(loop)

    def pop(self) -> T | None:
        """Remove and return the running loop's value; forget those of closed loops."""
        loop = asyncio.get_running_loop()
        with self._lock:
            for closed in [lp for lp in self._by_loop if lp.is_closed()]:
                del self._by_loop[closed]
            return self._by_loop.pop(loop, None)
