"""Event loops and threads: run a coroutine from synchronous code (and stop it as Ctrl-C
would), keep per-loop state for objects that serve several loops over their life, and call
objects the user brought.

User objects (a LangChain model, an SDK client, an embeddings object) are used, never owned.
Their async clients are often bound to the first event loop that used them, and every sync
call of contextlens runs a loop of its own, so an object's async method is always awaited on
one long-lived loop of contextlens (:func:`on_home_loop`), whatever loop the caller is on,
and its blocking method runs in a worker thread, which works from any loop and any thread.

Which of the two :func:`call_user` takes, and how many calls it makes at once, depends on
what the object says of itself:

- ``thread_safe = True`` (an attribute of the object or its class; a caller that knows the
  object's contract, as LangChain's runnables', may say so for it): its blocking method, in
  as many worker threads as calls are made at once;
- else, when it has an async method: that one, on the home loop (how it serves several calls
  at once is its own business);
- else (it has only a blocking method): that, one call at a time, in a thread of the
  object's own. An object that was never said to be thread-safe is never entered by two
  threads at once.

Every worker thread is a daemon thread: a user's call that never returns (a dead socket) is
abandoned once its caller gives up on it (the judge's timeout), said once with the object's
name, and its thread never keeps the process from ending. The threads are bounded: at most
:data:`USER_CALL_THREADS` for the shared ones, one per object called one at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
import warnings
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, TypeVar

T = TypeVar("T")

#: Worker threads for blocking calls into user objects (made as needed, up to this many).
USER_CALL_THREADS = 256


async def gather_all(coros: Iterable[Coroutine[Any, Any, T]]) -> list[T]:
    """The results of ``coros`` awaited at once, in order (``asyncio.gather``); a single one
    is awaited in the caller's task, without a task of its own."""
    pending = list(coros)
    if len(pending) == 1:
        return [await pending[0]]
    return list(await asyncio.gather(*pending))


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


class _Workers:
    """Daemon threads, made as calls need them up to ``limit``, that take calls in order.

    A daemon thread never keeps the process from ending, so a call that never returns is
    left to its thread at exit. A call whose caller gave up before it began is never made.
    """

    def __init__(self, limit: int, name: str) -> None:
        self._limit, self._name = limit, name
        self._lock = threading.Lock()
        self._calls: deque[tuple[Future[Any], Callable[[], Any]]] = deque()
        self._wake = threading.Semaphore(0)
        self._threads = self._idle = 0
        self._closed = False

    def submit(self, fn: Callable[[], T]) -> Future[T]:
        """``fn()`` in one of the threads; its future."""
        future: Future[T] = Future()
        start = None
        with self._lock:
            self._calls.append((future, fn))
            if self._idle:  # one waiting thread wakes (a busy one may take the call first)
                self._idle -= 1
                self._wake.release()
            elif self._threads < self._limit:
                self._threads += 1
                start = f"{self._name}-{self._threads}" if self._limit > 1 else self._name
        if start is not None:
            threading.Thread(target=self._work, name=start, daemon=True).start()
        return future

    def close(self) -> None:
        """Let the threads end once the calls given them are done."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, 0
        for _ in range(idle):
            self._wake.release()

    def _work(self) -> None:
        while True:
            with self._lock:
                if self._calls:
                    future, fn = self._calls.popleft()
                elif self._closed:
                    self._threads -= 1
                    return
                else:
                    self._idle += 1
                    future = None
            if future is None:
                self._wake.acquire()
                continue
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn())
                except BaseException as exc:  # the caller's to see
                    future.set_exception(exc)
            del future, fn  # a finished call holds nothing while the thread waits


_pool_lock = threading.Lock()
_shared: _Workers | None = None
_own: dict[int, _Workers] = {}
"""The thread of each object called one at a time, by ``id`` (dropped with the object)."""
_home: asyncio.AbstractEventLoop | None = None
_abandoned: set[str] = set()


def _shared_workers() -> _Workers:
    global _shared
    with _pool_lock:
        if _shared is None:
            _shared = _Workers(USER_CALL_THREADS, "contextlens-call")
        return _shared


def _own_workers(obj: object) -> _Workers:
    """The one thread ``obj`` is called in (made on first use, ended with the object)."""
    with _pool_lock:
        workers = _own.get(id(obj))
        if workers is None:
            workers = _own[id(obj)] = _Workers(1, f"contextlens-call-{type(obj).__name__}")
            with contextlib.suppress(TypeError):  # no weak reference: its thread stays
                weakref.finalize(obj, _forget, id(obj), workers)
        return workers


def _forget(key: int, workers: _Workers) -> None:
    """The object is gone: its thread ends. Takes no lock of this module: a finalizer may run in
    any thread at any moment, also while that thread holds one."""
    if _own.get(key) is workers:
        _own.pop(key, None)
    workers.close()


def is_thread_safe(obj: object) -> bool:
    """Whether ``obj`` says it may be called from several threads at once:
    ``thread_safe = True`` on it or its class (nothing else counts as yes)."""
    return getattr(obj, "thread_safe", False) is True


async def _threaded(
    workers: _Workers,
    fn: Callable[..., T],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    what: str,
    alone: str | None = None,
) -> T:
    """``fn(*args, **kwargs)`` in ``workers``, with the caller's context variables; a call
    still running when the caller gives up is abandoned, and said so once per ``what``
    (``alone``: the object called one at a time, whose next call waits for it)."""
    ctx = contextvars.copy_context()
    future = workers.submit(functools.partial(ctx.run, _outcome, fn, *args, **kwargs))
    try:
        value, error = await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        if not future.cancel() and future.running():
            _say_abandoned(what, alone)
        raise
    if error is not None:
        raise error
    return value  # type: ignore[return-value]  # no error: fn returned it


def _say_abandoned(what: str, alone: str | None) -> None:
    if what in _abandoned:
        return
    _abandoned.add(what)
    text = (
        f"{what} had not returned when its caller gave up on it (the judge's timeout): the "
        "call is abandoned to its thread, which does not keep the process from ending"
    )
    if alone is not None:
        text += (
            f"; {alone} is called one call at a time (it does not say thread_safe = True), so "
            "its next call waits until this one returns"
        )
    warnings.warn(text, RuntimeWarning, stacklevel=2)


async def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` in a worker thread, with the caller's context variables.

    Unlike :func:`asyncio.to_thread` the threads are not the loop's default executor (a few
    per core): a judge with 64 calls in flight gets 64 threads, daemon threads that a call
    that never returns cannot keep alive. An exception ``fn`` raises reaches the caller as
    that very object (asyncio would remake a ``TimeoutError``).
    """
    what = getattr(fn, "__qualname__", None) or type(fn).__name__
    return await _threaded(_shared_workers(), fn, args, kwargs, what=what)


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
    """Await ``make()`` on :func:`home_loop`; cancelling the caller cancels it there too. An
    exception it raises reaches the caller as that very object (asyncio would remake a
    ``TimeoutError`` crossing loops)."""
    home = home_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:  # pragma: no cover - always called from a coroutine
        running = None
    if running is home:
        return await make()

    async def run() -> tuple[T | None, Exception | None]:  # make() is called on the home loop
        try:
            return await make(), None
        except Exception as exc:
            return None, exc

    # The task on the home loop runs in a copy of the caller's context variables.
    value, error = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(run(), home))
    if error is not None:
        raise error
    return value  # type: ignore[return-value]  # no error: make() returned it


async def call_either(
    obj: object,
    blocking: Callable[[], Any] | None,
    awaited: Callable[[], Awaitable[Any]] | None,
    *,
    names: tuple[str, str],
    thread_safe: bool | None = None,
) -> Any:
    """Call ``obj`` through ``blocking()`` (its blocking method, its arguments bound) or
    ``awaited()`` (its async one), as the module docstring says: the blocking one in shared
    worker threads when ``obj`` is thread-safe (``thread_safe``, else
    :func:`is_thread_safe`), else the async one on the home loop, else the blocking one in
    the object's own thread, one call at a time. A way that raises ``NotImplementedError``
    is left for the other. ``names``: the two methods' names, as messages give them."""
    safe = is_thread_safe(obj) if thread_safe is None else thread_safe
    kind = type(obj).__name__

    async def threaded() -> Any:
        assert blocking is not None
        workers = _shared_workers() if safe else _own_workers(obj)
        alone = None if safe else kind
        return await _threaded(workers, blocking, (), {}, what=f"{kind}.{names[0]}", alone=alone)

    async def home() -> Any:
        assert awaited is not None
        return await on_home_loop(awaited)

    if blocking is not None and (safe or awaited is None):
        ways = [threaded, home] if awaited is not None else [threaded]
    elif awaited is not None:
        ways = [home, threaded] if blocking is not None else [home]
    else:
        raise TypeError(f"{kind} has neither {names[0]} nor {names[1]}")
    for way in ways[:-1]:
        try:
            return await way()
        except NotImplementedError:
            pass
    return await ways[-1]()


async def call_user(
    obj: Any, sync_name: str, async_name: str, *args: Any, thread_safe: bool | None = None
) -> Any:
    """Call a user object's ``sync_name`` or ``async_name`` method with ``args``, the way
    :func:`call_either` chooses. Raises ``TypeError`` when it has neither."""
    method, amethod = getattr(obj, sync_name, None), getattr(obj, async_name, None)
    return await call_either(
        obj,
        functools.partial(method, *args) if callable(method) else None,
        functools.partial(amethod, *args) if callable(amethod) else None,
        names=(sync_name, async_name),
        thread_safe=thread_safe,
    )
