"""Offline relevance: which statements of a retrieval context bear on the input.

The statements of a chunk are its sentences (:func:`contextlens.offline.text.sentences`).
Each statement gets a relevance probability from a logistic function of three signals:

- ``similarity``: cosine similarity of the statement and the input (bundled MiniLM);
- ``chunk_similarity``: cosine similarity of the whole chunk and the input, so that a
  statement is read in its chunk as a judge would read it ("It was founded in 1865." is
  relevant in a chunk about the Salvation Army);
- ``overlap``: the share of the input's content words that the statement contains
  (catches names and rare terms the embedder knows little about).

``relevance = 1 / (1 + exp(-(-3.0 + 2.0 * similarity + 6.0 * chunk_similarity + 0.5 * overlap)))``
and the verdict is ``"yes"`` when ``relevance >= 0.5`` (:data:`WEIGHTS`, :data:`THRESHOLD`).
A one-sentence chunk is thus relevant from a similarity of about 0.375 (0.34 with full
word overlap). Each chunk also gets a ``chunk_relevance``: the probability that at least
one of its statements is relevant (noisy-OR of its statements' relevance).

The weights are rounded from a maximum-likelihood fit of the chunk labels of TREC DL 2019
passages (NIST assessors; "answers the query" against "on topic but does not answer") plus
as many off-topic passages (other queries' passages, labelled irrelevant), with the overlap
weight set to a small positive prior (the fit put it near zero). On those human labels the
chunk relevance reaches an AUROC of about 0.60, and the metric's statement share about
0.53: the bundled embedder tells on-topic from off-topic text very well (off-topic
statements are almost never "yes") but hardly tells a passage that answers from one that
is merely on topic. It is an approximation, not a reader: it does not reason about what
would answer the input ("a 30-day refund" for "what if these shoes don't fit?").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from contextlens.embeddings.base import Embedder, embed_distinct
from contextlens.offline.text import content_words, sentences

#: Logistic weights: intercept, statement similarity, chunk similarity, word overlap.
WEIGHTS = (-3.0, 2.0, 6.0, 0.5)
#: A statement is relevant ("yes") when its relevance is at least this.
THRESHOLD = 0.5


@dataclass(frozen=True)
class StatementRelevance:
    """One statement of the retrieval context and its relevance to the input."""

    chunk: int  # index of the chunk in the retrieval context
    statement: str
    similarity: float
    chunk_similarity: float
    overlap: float
    relevance: float

    @property
    def verdict(self) -> Literal["yes", "no"]:
        return "yes" if self.relevance >= THRESHOLD else "no"


@dataclass(frozen=True)
class RelevanceItem:
    """An input and the chunks retrieved for it."""

    input: str
    chunks: Sequence[str]


@dataclass(frozen=True)
class RelevanceResult:
    """The statements of every chunk with their relevance, and each chunk's relevance."""

    statements: tuple[StatementRelevance, ...]
    chunk_relevance: tuple[float, ...]  # one per chunk; 0.0 for a blank chunk

    @property
    def relevant(self) -> int:
        return sum(s.verdict == "yes" for s in self.statements)

    @property
    def total(self) -> int:
        return len(self.statements)


def relevance(similarity: float, chunk_similarity: float, overlap: float) -> float:
    """The logistic relevance of one statement (see the module docstring)."""
    b0, b_sim, b_chunk, b_overlap = WEIGHTS
    z = b0 + b_sim * similarity + b_chunk * chunk_similarity + b_overlap * overlap
    return float(1.0 / (1.0 + np.exp(-z)))


def _overlap(statement: str, input_words: set[str]) -> float:
    if not input_words:
        return 0.0
    return len(content_words(statement) & input_words) / len(input_words)


async def score_relevance(
    items: Sequence[RelevanceItem], embedder: Embedder
) -> list[RelevanceResult]:
    """The relevance of every statement of every item; one ``embed`` call for all texts."""
    per_item = [[sentences(chunk) for chunk in item.chunks] for item in items]
    texts = [
        text
        for item, chunk_sentences in zip(items, per_item, strict=True)
        for text in (
            item.input,
            *(c for c, s in zip(item.chunks, chunk_sentences, strict=True) if s),
            *(s for group in chunk_sentences for s in group),
        )
    ]
    vectors = await embed_distinct(embedder, texts)

    results: list[RelevanceResult] = []
    for item, chunk_sentences in zip(items, per_item, strict=True):
        query = vectors[item.input]
        words = content_words(item.input)
        scored: list[StatementRelevance] = []
        chunk_relevance: list[float] = []
        for i, (chunk, group) in enumerate(zip(item.chunks, chunk_sentences, strict=True)):
            if not group:
                chunk_relevance.append(0.0)
                continue
            chunk_sim = float(vectors[chunk] @ query)
            sims = vectors.of(group) @ query
            found: list[StatementRelevance] = []
            for statement, sim in zip(group, sims.tolist(), strict=True):
                overlap = _overlap(statement, words)
                found.append(
                    StatementRelevance(
                        i, statement, sim, chunk_sim, overlap, relevance(sim, chunk_sim, overlap)
                    )
                )
            scored.extend(found)
            miss = np.prod([1.0 - s.relevance for s in found])
            chunk_relevance.append(float(1.0 - miss))
        results.append(RelevanceResult(tuple(scored), tuple(chunk_relevance)))
    return results
