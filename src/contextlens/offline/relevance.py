"""Offline relevance: does a retrieved chunk answer the input, and which of its statements do.

What it is: a logistic model (``offline/weights/relevance.json``, loaded with
:func:`contextlens.offline.model.load_model`) of the probability that a chunk *answers* the
input, over five cheap features of the chunk (:data:`FEATURES`):

- ``similarity``, ``best_similarity``: cosine similarity (bundled MiniLM) of the input with
  the whole chunk and with its best-matching sentence;
- ``rarest``: whether the chunk has the input's rarest term (rarity from the embedder's
  vocabulary, :mod:`contextlens.offline.query`), which carries names and technical terms
  the embedder knows little about;
- ``log_words``: the chunk's length, clipped to 20..150 words (short fragments seldom
  answer);
- ``answer_cue``: whether the best-matching sentence has the kind of content the question
  word asks for (a number for "how many", a year for "when", "is a / refers to" for
  "what is" ...).

The statements of a chunk are its sentences (:func:`contextlens.offline.text.sentences`),
each read in its chunk: the chunk's relevance is shared out over its statements, the ones
most similar to the input first (:func:`statement_relevance`), so the share of "yes"
statements of a chunk is its relevance rounded to whole statements, and the metric's score
(share of relevant statements) carries the chunk-level signal.

Measured on TREC DL 2019 passage judgements (NIST assessors; grade >= 2 "answers the
query" against grade 1 "on topic but does not answer"; 4,102 passages, 43 queries), the
only relevance set there is. ``benchmarks/fit_relevance.py`` fits the model with off-topic
pairs (other queries' passages, labelled irrelevant, weight 0.25) and cross-validates it
grouped by query (each fold's model never saw the fold's queries): AUROC 0.608 pooled over
the out-of-fold scores (0.621 mean of the 5 folds, 0.692 within a query), ECE 0.079; the
metric score derived from them 0.592. Off-topic pairs of held-out queries are told from
on-topic passages with an AUROC of 0.987 (mean score 0.16 against 0.54). The shipped model,
fitted on all 43 queries and so in-sample there, gives the metric score an AUROC of 0.605
(ECE 0.118) on all 4,102 passages: ``.venv/bin/python benchmarks/agreement.py --sets
trec_dl19_passage --full`` (0.527 before this model). The scores are probabilities for a
mix of on-topic and off-topic chunks; on on-topic chunks alone they run low (mean 0.54
against 61 % answering). Published simple baselines reach about 0.59 on this task.

What it is not: a reader. It cannot tell a passage that states the answer from one that
looks like it does (the question's rare term, similar wording, a number for "how much");
an answer in words unlike the question's is underrated, and on-topic text that does not
answer is often rated like text that does (within one query, AUROC about 0.69). Use it to
rank and triage chunks, not as a verdict on one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from contextlens.embeddings.base import Embedder, TextVectors, embed_distinct
from contextlens.offline.model import LogisticModel, load_model
from contextlens.offline.query import LEXICAL_FEATURES, answer_cue, lexical_features, term_share
from contextlens.offline.text import sentences

#: Names of the chunk features, in the order of the model's columns.
FEATURES: tuple[str, ...] = ("similarity", "best_similarity", *LEXICAL_FEATURES, "answer_cue")
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


@dataclass(frozen=True)
class ChunkFeatures:
    """The features of every non-blank chunk of a batch of items."""

    keys: list[tuple[int, int]]  # (item, chunk) of each row
    matrix: np.ndarray  # (rows, len(FEATURES))
    sentences: list[list[str]]  # the statements of each row's chunk
    sentence_similarity: list[np.ndarray]  # each statement's similarity to the input


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
    """The :data:`FEATURES` of every non-blank chunk; ``vectors`` embeds :func:`relevance_texts`."""
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
        return ChunkFeatures([], np.zeros((0, len(FEATURES))), [], [])
    m = vectors.matrix
    q = m[queries]
    chunk_sim = np.einsum("ij,ij->i", m[chunk_rows], q)
    sizes = np.array([len(g) for g in groups])
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    sent_sim = np.einsum("ij,ij->i", m[sentence_rows], np.repeat(q, sizes, axis=0))
    best = np.maximum.reduceat(sent_sim, starts)
    per_chunk = np.split(sent_sim.astype(np.float64), starts[1:])
    cues = [
        answer_cue(items[i].input, group[int(np.argmax(sims))])
        for (i, _), group, sims in zip(keys, groups, per_chunk, strict=True)
    ]
    matrix = np.column_stack([chunk_sim, best, np.asarray(lexical, dtype=np.float64), cues])
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
    """The relevance probability of each row of ``features``."""
    model = (model or load_model(MODEL)).taking(FEATURES)
    if not len(features.keys):
        return np.zeros(0)
    return model.predict(features.matrix)


async def score_relevance(
    items: Sequence[RelevanceItem], embedder: Embedder, model: LogisticModel | None = None
) -> list[RelevanceResult]:
    """The relevance of every chunk and statement of every item; one ``embed`` call."""
    statements = split(items)
    vectors = await embed_distinct(embedder, relevance_texts(items, statements))
    feats = chunk_features(items, vectors, statements)
    probs = predict(feats, model)
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
            chunk_sim = float(feats.matrix[row, 0])
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
