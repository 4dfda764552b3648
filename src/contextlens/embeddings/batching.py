"""Coalescing of concurrent embedding requests into batched runs of an embedding model.

A metric scores its items concurrently, and each item asks for the embeddings of a handful
of sentences. Run one by one, those small requests would each start the CPU-bound kernel at
once (oversubscribing the cores and paying the per-run overhead each time), or each make a
request of an embedding API. :class:`Coalescer` queues the requests of one event loop and runs
the model on everything queued, one run at a time: while a run is in progress the next
requests gather, so batches grow with the load.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable

import numpy as np
from numpy.typing import NDArray

__all__ = ["LRU", "Coalescer"]

#: One run of the model: texts in, one row per text out.
Run = Callable[[list[str]], Awaitable[NDArray[np.float32]]]


class LRU:
    """A small thread-safe LRU map of text -> read-only vector."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._data: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> NDArray[np.float32] | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: str, value: NDArray[np.float32]) -> None:
        if self.capacity <= 0:
            return
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.capacity:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


#: Texts per run at most (requests are never split, so one may exceed it).
MAX_BATCH_TEXTS = 1024


class Coalescer:
    """Batches the concurrent requests of one event loop into single runs of the model.

    A run takes queued requests while their distinct texts stay within ``max_texts`` (a
    request is never split across runs), and calls the model on at most ``max_texts`` texts
    at a time. With ``memo > 0`` the vectors of that many recent texts are kept, so a text
    shared by requests of different runs is embedded once.
    """

    def __init__(self, run: Run, max_texts: int = MAX_BATCH_TEXTS, *, memo: int = 0) -> None:
        self._run = run
        self._max_texts = max_texts
        self._memo = LRU(memo)
        self._queue: list[tuple[list[str], asyncio.Future[NDArray[np.float32]]]] = []
        self._drainer: asyncio.Task[None] | None = None

    async def embed(self, texts: list[str]) -> NDArray[np.float32]:
        """The model's rows for ``texts``, computed together with concurrent requests."""
        future: asyncio.Future[NDArray[np.float32]] = asyncio.get_running_loop().create_future()
        self._queue.append((texts, future))
        if self._drainer is None or self._drainer.done():
            self._drainer = asyncio.get_running_loop().create_task(self._drain())
        return await future

    def _take(self) -> list[tuple[list[str], asyncio.Future[NDArray[np.float32]]]]:
        """The longest prefix of the queue within ``max_texts`` distinct texts (at least
        one request)."""
        seen: set[str] = set()
        for n, (texts, _) in enumerate(self._queue):
            seen.update(texts)
            if n and len(seen) > self._max_texts:
                break
        else:
            n = len(self._queue)
        batch, self._queue = self._queue[:n], self._queue[n:]
        return batch

    async def _rows(self, distinct: list[str]) -> dict[str, NDArray[np.float32]]:
        """A row for each text: from the memo, else from the model, ``max_texts`` at a time."""
        rows: dict[str, NDArray[np.float32]] = {}
        todo: list[str] = []
        for text in distinct:
            hit = self._memo.get(text)
            if hit is None:
                todo.append(text)
            else:
                rows[text] = hit
        for start in range(0, len(todo), self._max_texts):
            part = todo[start : start + self._max_texts]
            matrix = await self._run(part)
            for text, row in zip(part, matrix, strict=True):
                rows[text] = row
                if self._memo.capacity > 0:
                    kept = row.copy()  # its own buffer: an evicted row frees its memory
                    kept.setflags(write=False)
                    self._memo.put(text, kept)
        return rows

    async def _drain(self) -> None:
        await asyncio.sleep(0)  # let the callers scheduled alongside this one queue up
        while self._queue:
            batch = [(texts, f) for texts, f in self._take() if not f.done()]
            if not batch:
                continue
            distinct = list(dict.fromkeys(t for texts, _ in batch for t in texts))
            try:
                rows = await self._rows(distinct)
            except asyncio.CancelledError:
                for _, future in (*batch, *self._queue):
                    future.cancel()
                self._queue.clear()
                raise
            except Exception as exc:  # each caller of the batch gets the model's error
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for texts, future in batch:
                if not future.done():
                    future.set_result(np.stack([rows[t] for t in texts]))
