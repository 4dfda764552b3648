"""The embedder protocol."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray


@runtime_checkable
class Embedder(Protocol):
    """A batch of texts in, one L2-normalised float32 row per text out.

    ``batches_concurrent_calls`` declares whether concurrent calls are gathered into shared
    batched runs of the model, so a caller may issue many at once (a run then scores more
    cases at a time). An object with ``name`` and ``embed`` that does not declare it is
    adapted once, as not batching (:func:`~contextlens.embeddings.adapters.as_embedder`).

    Optional: ``identity``, everything that changes a vector (kind, model, endpoint,
    dimensions, normalisation) as a dict of JSON values; the cache keys its vectors by it
    (by ``name`` when there is none), so two servers serving one model name, or one model at
    two sizes, never share vectors.
    """

    name: str

    @property
    def batches_concurrent_calls(self) -> bool:
        """Whether concurrent calls share batched runs of the model."""
        ...

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]: ...


def identity_of(embedder: object) -> str:
    """What the cache keys an embedder's vectors by: its ``identity`` as canonical JSON, or
    its ``name``."""
    identity = getattr(embedder, "identity", None)
    if isinstance(identity, dict) and identity:
        return json.dumps(identity, sort_keys=True, separators=(",", ":"), default=str)
    return str(getattr(embedder, "name", type(embedder).__name__))


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
