"""The embedder protocol."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray


@runtime_checkable
class Embedder(Protocol):
    """A batch of texts in, one L2-normalised float32 row per text out."""

    name: str

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]: ...


def l2_normalise(matrix: NDArray[np.floating]) -> NDArray[np.float32]:
    """Rows scaled to unit length; all-zero rows stay zero."""
    m = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return np.divide(m, norms, out=np.zeros_like(m), where=norms > 0)


@dataclass(frozen=True)
class TextVectors:
    """Embeddings of distinct texts, looked up by text."""

    index: dict[str, int]
    matrix: NDArray[np.float32]

    def __getitem__(self, text: str) -> NDArray[np.float32]:
        return self.matrix[self.index[text]]

    def of(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """The rows of ``texts``, in order."""
        return self.matrix[[self.index[t] for t in texts]]


async def embed_distinct(embedder: Embedder, texts: Iterable[str]) -> TextVectors:
    """Embed every distinct text of ``texts`` once, in one call."""
    distinct = list(dict.fromkeys(texts))
    matrix = await embedder.embed(distinct) if distinct else np.zeros((0, 1), np.float32)
    return TextVectors({text: i for i, text in enumerate(distinct)}, matrix)
