"""Run a coroutine from synchronous code, inside or outside a running event loop."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

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
