"""Coalescing of concurrent embedding requests into batched runs of a blocking kernel.

A metric scores its items concurrently, and each item asks for the embeddings of a handful
of sentences. Run one by one in worker threads, those small requests would each start the
CPU-bound kernel at once, oversubscribe the cores and pay the per-run overhead each time.
:class:`Coalescer` queues the requests of one event loop and runs the kernel in a worker
thread on everything queued, one run at a time: while a run is in progress the next
requests gather, so batches grow with the load.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

__all__ = ["Coalescer"]

Kernel = Callable[[list[str]], NDArray[np.float32]]

#: Texts per kernel run at most (requests are never split, so one may exceed it).
MAX_BATCH_TEXTS = 1024


class Coalescer:
    """Batches the concurrent requests of one event loop into single kernel runs."""

    def __init__(self, kernel: Kernel, max_texts: int = MAX_BATCH_TEXTS) -> None:
        self._kernel = kernel
        self._max_texts = max_texts
        self._queue: list[tuple[list[str], asyncio.Future[NDArray[np.float32]]]] = []
        self._drainer: asyncio.Task[None] | None = None

    async def embed(self, texts: list[str]) -> NDArray[np.float32]:
        """The kernel's rows for ``texts``, computed together with concurrent requests."""
        future: asyncio.Future[NDArray[np.float32]] = asyncio.get_running_loop().create_future()
        self._queue.append((texts, future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.get_running_loop().create_task(self._drain())
        return await future

    def _take(self) -> list[tuple[list[str], asyncio.Future[NDArray[np.float32]]]]:
        """The longest prefix of the queue within ``max_texts`` (at least one request)."""
        total = 0
        for n, (texts, _) in enumerate(self._queue):
            total += len(texts)
            if n and total > self._max_texts:
                break
        else:
            n = len(self._queue)
        batch, self._queue = self._queue[:n], self._queue[n:]
        return batch

    async def _drain(self) -> None:
        await asyncio.sleep(0)  # let the callers scheduled alongside this one queue up
        while self._queue:
            batch = [(texts, f) for texts, f in self._take() if not f.done()]
            if not batch:
                continue
            distinct = list(dict.fromkeys(t for texts, _ in batch for t in texts))
            try:
                matrix = await asyncio.to_thread(self._kernel, distinct)
            except asyncio.CancelledError:
                for _, future in (*batch, *self._queue):
                    future.cancel()
                self._queue.clear()
                raise
            except Exception as exc:  # each caller of the batch gets the kernel's error
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            row = {text: i for i, text in enumerate(distinct)}
            for texts, future in batch:
                if not future.done():
                    future.set_result(matrix[[row[t] for t in texts]])
