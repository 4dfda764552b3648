"""Context similarity: fake embedders, case builders and the missing-argument cases, shared by
tests/metrics/test_context_similarity.py and tests/compat/test_novastack.py."""

from __future__ import annotations

import itertools
import math
import threading
from collections import Counter
from collections.abc import Sequence

import numpy as np
from langchain_core.embeddings import Embeddings
from numpy.typing import NDArray

NOVASTACK_KEYS = {"query_context_similarity", "answer_context_similarity", "score", "passing"}
_ids = itertools.count()


def random_vector(text: str, dim: int) -> list[float]:
    """A deterministic pseudo-random vector per text."""
    rng = np.random.default_rng(sum(map(ord, text)) * 7919 + len(text))
    return list(rng.normal(size=dim))


class FakeEmbedder:
    """A contextlens Embedder (used as is): fixed vectors per text (unnormalised on purpose);
    records every embed call. Each instance has its own name, since the shell caches
    embeddings by (embedder name, text)."""

    def __init__(self, vectors: dict[str, Sequence[float]] | None = None, dim: int = 8) -> None:
        self.name = f"fake-{next(_ids)}"
        self.vectors = dict(vectors or {})
        self.dim = dim
        self.calls: list[list[str]] = []

    def _vector(self, text: str) -> Sequence[float]:
        if text not in self.vectors:
            self.vectors[text] = random_vector(text, self.dim)
        return self.vectors[text]

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        self.calls.append(list(texts))
        return np.array([self._vector(t) for t in texts], dtype=np.float32)

    @property
    def embedded(self) -> Counter[str]:
        """How many times each text was embedded."""
        return Counter(t for call in self.calls for t in call)


class UserEmbeddings(Embeddings):
    """A user's LangChain embeddings (wrapped by the shell, called in worker threads)."""

    def __init__(self, vectors: dict[str, Sequence[float]] | None = None, dim: int = 8) -> None:
        self.model_name = f"user-{next(_ids)}"  # its embedder name, so its own cache entries
        self.vectors = dict(vectors or {})
        self.dim = dim
        self.calls: list[list[str]] = []
        self._lock = threading.Lock()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        with self._lock:
            self.calls.append(list(texts))
            for t in texts:
                self.vectors.setdefault(t, random_vector(t, self.dim))
            return [list(self.vectors[t]) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    @property
    def embedded(self) -> Counter[str]:
        """How many times each text was embedded."""
        return Counter(t for call in self.calls for t in call)


#: A unit vector at cosine 0.5 to ``[1.0, 0.0]``: every mode's score of it is that of the
#: cosine 0.5 (cosine 0.5, dot product 0.75, euclidean 0.5).
HALF = [0.5, math.sqrt(3) / 2]


def fixed(**vectors: Sequence[float]) -> FakeEmbedder:
    """A FakeEmbedder with these vectors; an ``_`` in a keyword stands for a space."""
    return FakeEmbedder({k.replace("_", " "): v for k, v in vectors.items()})


def make_cases(n: int) -> list[dict[str, object]]:
    """``n`` cases as novastack's keyword dicts, sharing queries and passages; each has one
    blank context (index 3)."""
    return [
        {
            "query": f"question {i % 7}",
            "generated_text": f"answer {i}",
            "contexts": [f"passage {(i + k) % 11}" for k in range(3)] + ["", f"own {i}"],
        }
        for i in range(n)
    ]


DISTINCT_IN_40_CASES = 7 + 40 + 11 + 40  # the distinct texts in make_cases(40)

# (case, texts its error must name, texts it must not name): the missing
# arguments, for test_missing_arguments_are_all_named on either layer
MISSING_ARGUMENTS = [
    ({}, ["'query' (None)", "'generated_text' (None)", "'contexts' (None)"], []),
    ({"query": "q", "contexts": []}, ["'generated_text'", "'contexts' (empty)"], ["'query'"]),
    ({"query": "  ", "generated_text": "a", "contexts": ["c"]}, ["'query' (blank)"], []),
    (
        {"query": "q", "generated_text": "", "contexts": [" ", ""]},
        ["'generated_text' (blank)", "'contexts' (all 2 blank)"],
        ["'query'"],
    ),
]
