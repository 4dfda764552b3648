"""An embedder in front of the persistent cache: each text is embedded once, ever."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from contextlens.embeddings.base import Embedder, identity_of
from contextlens.engine.cache import Cache, NullCache


class CachedEmbedder:
    """Looks texts up in the cache by (embedder identity, text); embeds and stores the rest.
    A cached vector that is damaged (not finite, cut short, of another size) is embedded
    again."""

    def __init__(self, inner: Embedder, cache: Cache | NullCache) -> None:
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.key = identity_of(inner)

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.inner!r}, {self.cache!r})"

    @property
    def batches_concurrent_calls(self) -> bool:
        """Whether the inner embedder batches concurrent calls (the misses reach it as is)."""
        return self.inner.batches_concurrent_calls

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        if isinstance(self.cache, NullCache) or not texts:
            return await self.inner.embed(texts)
        hits = self.cache.get_embeddings(self.key, texts)
        missing = list(dict.fromkeys(t for i, t in enumerate(texts) if i not in hits))
        fresh = await self.inner.embed(missing) if missing else None
        if fresh is not None:
            self.cache.put_embeddings(self.key, missing, fresh)
        by_text = dict(zip(missing, fresh, strict=True)) if fresh is not None else {}
        rows = [hits[i] if i in hits else by_text[t] for i, t in enumerate(texts)]
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)
