"""Event loops and threads: run a coroutine from synchronous code (and stop it as Ctrl-C
would), keep per-loop state for objects that serve several loops over their life, and call
objects the user brought.

User objects (a LangChain model, an SDK client, an embeddings object) are used, never owned.
Their async clients are often bound to the first event loop that used them, and every sync
call of contextlens runs a loop of its own, so :func:`call_user` calls their blocking method
in a worker thread, which works from any loop and any thread. An object with only an async
method is called on one long-lived loop of contextlens (:func:`on_home_loop`), so it too sees
a single loop whatever loop the caller is on.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

T = TypeVar("T")

#: Worker threads for blocking calls into user objects (made as needed, up to this many).
USER_CALL_THREADS = 256


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion and return its result.

    With no running loop this is ``asyncio.run``. Inside a running loop (Jupyter, an
    async web handler) the coroutine runs on a fresh loop in a worker thread, so the
    caller's loop is never re-entered. :func:`interrupt` stops it as Ctrl-C does: it raises
    ``KeyboardInterrupt`` then.
    """
    if _running_loop() is None:  # outside the except clause: errors carry no false context
        return _run(coro)
    ctx = contextvars.copy_context()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="contextlens-sync") as pool:
        return pool.submit(ctx.run, _run, coro).result()


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class _Run:
    """A coroutine :func:`run_sync` is running: its loop and task, once it has started."""

    __slots__ = ("loop", "stopped", "task")

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.task: asyncio.Task[Any] | None = None
        self.stopped = False


_runs: list[_Run] = []
"""What :func:`run_sync` is running now (list operations only: a signal handler reads it)."""


def _run(coro: Coroutine[Any, Any, T]) -> T:
    run = _Run()
    try:
        return asyncio.run(_boxed(coro, run)).value
    except asyncio.CancelledError:
        if run.stopped:  # interrupt(): as asyncio.run does after Ctrl-C
            raise KeyboardInterrupt from None
        raise


def interrupt() -> bool:
    """Stop what :func:`run_sync` is running as Ctrl-C stops it, whatever SIGINT's handler
    is (a process started in the background ignores SIGINT): its task is cancelled, what that
    leaves running finishes as the coroutine's own ``finally`` clauses say, and
    :func:`run_sync` raises ``KeyboardInterrupt``. Safe from a signal handler and from any
    thread. False when nothing is running."""
    stopped = False
    for run in list(_runs):
        loop, task = run.loop, run.task
        if loop is None or task is None:
            continue
        run.stopped = stopped = True
        with contextlib.suppress(RuntimeError):  # its loop has just closed: it is over
            loop.call_soon_threadsafe(task.cancel)
    return stopped


class _Box:
    """Holds a result out of sight: ``asyncio.run`` formats its main task (and so the
    task's result) when it restores the SIGINT handler, which for an evaluation of many
    cases would print every result into a string only to throw it away."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "<result>"


async def _boxed(coro: Coroutine[Any, Any, T], run: _Run) -> _Box:
    run.loop, run.task = asyncio.get_running_loop(), asyncio.current_task()
    _runs.append(run)
    try:
        return _Box(await coro)
    finally:
        _runs.remove(run)


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


_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_home: asyncio.AbstractEventLoop | None = None


def _user_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(USER_CALL_THREADS, thread_name_prefix="contextlens-call")
        return _pool


async def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a worker thread, with the caller's context variables.

    Unlike :func:`asyncio.to_thread` the threads are not the loop's default executor (a few
    per core): a judge with 64 calls in flight gets 64 threads. An exception ``fn`` raises
    reaches the caller as that very object (asyncio would remake a ``TimeoutError``).
    """
    ctx = contextvars.copy_context()
    call = functools.partial(ctx.run, _outcome, fn, *args, **kwargs)
    value, error = await asyncio.get_running_loop().run_in_executor(_user_pool(), call)
    if error is not None:
        raise error
    return value  # type: ignore[return-value]  # no error: fn returned it


def _outcome(fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[T | None, Exception | None]:
    try:
        return fn(*args, **kwargs), None
    except Exception as exc:
        return None, exc


def home_loop() -> asyncio.AbstractEventLoop:
    """contextlens's own event loop, running for the life of the process in a daemon thread."""
    global _home
    with _pool_lock:
        if _home is None or _home.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="contextlens-home", daemon=True).start()
            _home = loop
        return _home


async def on_home_loop(make: Callable[[], Awaitable[T]]) -> T:
    """Await ``make()`` on :func:`home_loop`; cancelling the caller cancels it there too."""
    home = home_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:  # pragma: no cover - always called from a coroutine
        running = None
    if running is home:
        return await make()

    async def run() -> T:  # make() is called on the home loop
        return await make()

    # The task on the home loop runs in a copy of the caller's context variables.
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run(), home))


async def call_user(obj: Any, sync_name: str, async_name: str, *args: Any) -> Any:
    """Call a user object's ``sync_name`` method in a worker thread when it has one, else
    await its ``async_name`` method on the home loop. Raises ``TypeError`` when it has
    neither."""
    method = getattr(obj, sync_name, None)
    if callable(method):
        return await in_thread(method, *args)
    amethod = getattr(obj, async_name, None)
    if callable(amethod):
        return await on_home_loop(lambda: amethod(*args))
    raise TypeError(f"{type(obj).__name__} has neither {sync_name} nor {async_name}")
