"""Offline relevance: does a retrieved chunk bear on the input, and which of its statements do.

What it is: a logistic map (``offline/weights/relevance.json``, loaded with
:func:`contextlens.offline.model.load_model`) of the cosine similarity (bundled MiniLM) of
the input and the whole chunk to the probability that the chunk bears on the input: that it
is about what the input asks, whether or not it states the answer (DeepEval's contextual
relevancy). Its ranking is the raw cosine's.

``benchmarks/fit_relevance.py`` chose it on held-out sources with negatives of the same
query: TREC DL 2020 graded passages (grade >= 1 against the grade-0 passages retrieved for
the same query) and HaluEval QA (a question's own knowledge against the knowledge of the
question sharing most of its terms). Every set of :data:`CANDIDATES` with the cosine (the best
sentence's similarity, whether the chunk has the input's rarest term, the rarity-weighted
share of the input's terms, the chunk's and the input's lengths) was scored on pooled AUROC,
each source by models fitted without it; none was above the raw cosine on every source (the
lexical features shift the level per query, which costs pooled ranking), so the cosine
ships: pooled AUROC 0.691 on TREC DL 2020 (0.740 within a query) and 0.964 on HaluEval. The
map is fitted on both.

The metric's score is the expected share of relevant statements: each chunk's probability
times its statements, summed, over all statements (:attr:`RelevanceResult.expected_share`).
The statements of a chunk are its sentences (:func:`contextlens.offline.text.sentences`),
each read in its chunk, and each has a yes/no verdict for display: the chunk's probability
shared out over its statements, the ones most similar to the input first
(:func:`statement_relevance`), so the share of "yes" statements of a chunk is its
probability rounded to whole statements. A chunk of one statement is "yes" when its
probability is at least :data:`THRESHOLD`.

What it is not: a reader. It knows what the embedder tells it: a refund bears on "what if
these shoes don't fit?" only to a reader (cosine 0.07, as low as text about something
else), and a product's condition belongs to a return policy only to one who knows returns.
Use it to triage chunks, and an LLM judge where such links matter.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from contextlens.embeddings.base import Embedder, TextVectors, embed_distinct
from contextlens.offline.model import LogisticModel, load_model
from contextlens.offline.query import LEXICAL_FEATURES, lexical_features, term_share
from contextlens.offline.text import sentences

#: Every chunk feature the extractor computes, in the order of :class:`ChunkFeatures`
#: columns; ``benchmarks/fit_relevance.py`` chooses the model's features among them.
CANDIDATES: tuple[str, ...] = ("similarity", "best_similarity", *LEXICAL_FEATURES)
#: The features the shipped model takes (``offline/weights/relevance.json``).
FEATURES: tuple[str, ...] = ("similarity",)
#: A statement is relevant ("yes") when its relevance is at least this.
THRESHOLD = 0.5
#: Name of the bundled model (``offline/weights/relevance.json``).
MODEL = "relevance"


@dataclass(frozen=True)
class StatementRelevance:
    """One statement of the retrieval context and its relevance to the input."""

    chunk: int  # index of the chunk in the retrieval context
    statement: str
    similarity: float  # of the statement and the input
    chunk_similarity: float  # of the whole chunk and the input
    overlap: float  # share of the input's terms (:func:`~contextlens.offline.query.profile`)
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

    @property
    def expected_relevant(self) -> float:
        """The expected number of relevant statements: each chunk's probability times its
        statements, summed."""
        return float(sum(self.chunk_relevance[s.chunk] for s in self.statements))

    @property
    def expected_share(self) -> float:
        """The expected share of relevant statements (0.0 with no statement): what the
        metric's score is offline."""
        return self.expected_relevant / self.total if self.total else 0.0


@dataclass(frozen=True)
class ChunkFeatures:
    """The :data:`CANDIDATES` features of every non-blank chunk of a batch of items."""

    keys: list[tuple[int, int]]  # (item, chunk) of each row
    matrix: np.ndarray  # (rows, len(CANDIDATES))
    sentences: list[list[str]]  # the statements of each row's chunk
    sentence_similarity: list[np.ndarray]  # each statement's similarity to the input

    def columns(self, names: Sequence[str]) -> np.ndarray:
        """The columns of the features ``names`` (ValueError for an unknown name)."""
        unknown = [n for n in names if n not in CANDIDATES]
        if unknown:
            raise ValueError(
                f"unknown relevance feature(s) {unknown}; the extractor computes {CANDIDATES}"
            )
        return self.matrix[:, [CANDIDATES.index(n) for n in names]]


Statements = list[list[list[str]]]  # the sentences of each chunk of each item


def split(items: Sequence[RelevanceItem]) -> Statements:
    """The statements (sentences) of every chunk of every item."""
    return [[sentences(chunk) for chunk in item.chunks] for item in items]


def relevance_texts(
    items: Sequence[RelevanceItem], statements: Statements | None = None
) -> list[str]:
    """Every text to embed for ``items``: inputs, non-blank chunks and their sentences."""
    out: list[str] = []
    for item, groups in zip(items, statements or split(items), strict=True):
        out.append(item.input)
        for chunk, group in zip(item.chunks, groups, strict=True):
            if group:
                out.append(chunk)
                out.extend(group)
    return out


def chunk_features(
    items: Sequence[RelevanceItem], vectors: TextVectors, statements: Statements | None = None
) -> ChunkFeatures:
    """The :data:`CANDIDATES` of every non-blank chunk; ``vectors`` embeds
    :func:`relevance_texts`."""
    keys: list[tuple[int, int]] = []
    groups: list[list[str]] = []
    queries: list[int] = []
    chunk_rows: list[int] = []
    sentence_rows: list[int] = []
    lexical: list[list[float]] = []
    for i, (item, item_groups) in enumerate(zip(items, statements or split(items), strict=True)):
        for j, (chunk, group) in enumerate(zip(item.chunks, item_groups, strict=True)):
            if not group:
                continue
            keys.append((i, j))
            groups.append(group)
            queries.append(vectors.index[item.input])
            chunk_rows.append(vectors.index[chunk])
            sentence_rows.extend(vectors.index[s] for s in group)
            lexical.append(lexical_features(item.input, chunk))
    if not keys:
        return ChunkFeatures([], np.zeros((0, len(CANDIDATES))), [], [])
    m = vectors.matrix
    q = m[queries]
    chunk_sim = np.einsum("ij,ij->i", m[chunk_rows], q)
    sizes = np.array([len(g) for g in groups])
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    sent_sim = np.einsum("ij,ij->i", m[sentence_rows], np.repeat(q, sizes, axis=0))
    best = np.maximum.reduceat(sent_sim, starts)
    per_chunk = np.split(sent_sim.astype(np.float64), starts[1:])
    matrix = np.column_stack([chunk_sim, best, np.asarray(lexical, dtype=np.float64)])
    return ChunkFeatures(keys, matrix.astype(np.float64), groups, per_chunk)


def statement_relevance(chunk_relevance: float, similarity: np.ndarray) -> np.ndarray:
    """Each statement's relevance, given its chunk's relevance and its own similarity.

    The statements are ranked by similarity to the input; the one at rank ``r`` (0 = best)
    of ``n`` gets ``sigmoid(logit(chunk_relevance) + logit(1 - (r + 0.5) / n))``. So a
    statement alone in its chunk has the chunk's relevance, and the number of statements at
    or above 0.5 is ``chunk_relevance * n`` rounded: the share of "yes" statements is the
    chunk's relevance, with the best-matching statements the "yes" ones.
    """
    n = len(similarity)
    p = float(np.clip(chunk_relevance, 1e-6, 1 - 1e-6))
    order = np.argsort(-np.asarray(similarity), kind="stable")
    quantile = 1.0 - (np.arange(n) + 0.5) / n
    offsets = np.empty(n)
    offsets[order] = np.log(quantile / (1.0 - quantile))
    z = math.log(p / (1.0 - p)) + offsets
    return 1.0 / (1.0 + np.exp(-z))


def predict(features: ChunkFeatures, model: LogisticModel | None = None) -> np.ndarray:
    """The relevance probability of each row of ``features``, from the columns ``model``
    takes (the bundled model's :data:`FEATURES` by default)."""
    model = model or load_model(MODEL)
    if not set(model.features) <= set(CANDIDATES):
        raise ValueError(
            f"offline model {model.name!r} takes the features {model.features}; the relevance "
            f"extractor computes {CANDIDATES}"
        )
    if not len(features.keys):
        return np.zeros(0)
    return model.predict(features.columns(model.features))


async def score_relevance(
    items: Sequence[RelevanceItem], embedder: Embedder, model: LogisticModel | None = None
) -> list[RelevanceResult]:
    """The relevance of every chunk and statement of every item; one ``embed`` call."""
    statements = split(items)
    vectors = await embed_distinct(embedder, relevance_texts(items, statements))
    feats = chunk_features(items, vectors, statements)
    probs = predict(feats, model)
    chunk_sims = feats.columns(("similarity",))[:, 0]
    by_key = {key: row for row, key in enumerate(feats.keys)}
    results: list[RelevanceResult] = []
    for i, item in enumerate(items):
        scored: list[StatementRelevance] = []
        chunk_relevance: list[float] = []
        for j in range(len(item.chunks)):
            row = by_key.get((i, j))
            if row is None:
                chunk_relevance.append(0.0)
                continue
            p = float(probs[row])
            chunk_relevance.append(p)
            sims = feats.sentence_similarity[row]
            chunk_sim = float(chunk_sims[row])
            for statement, sim, rel in zip(
                feats.sentences[row],
                sims.tolist(),
                statement_relevance(p, sims).tolist(),
                strict=True,
            ):
                scored.append(
                    StatementRelevance(
                        j, statement, sim, chunk_sim, term_share(item.input, statement), rel
                    )
                )
        results.append(RelevanceResult(tuple(scored), tuple(chunk_relevance)))
    return results
