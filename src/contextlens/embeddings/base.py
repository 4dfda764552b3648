"""The embedder protocol."""

from __future__ import annotations

from collections.abc import Sequence
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
