"""Offline relevance: the calibrated probability that a retrieved chunk bears on the input.

What it is: a logistic model over a few features of each chunk in its retrieved list, read
from the bundled embedder (all-MiniLM-L6-v2) and the words: the cosine of the input and the
chunk, how far that is below the list's best chunk, the chunk's cosine to that best chunk,
and the input's words it has (:data:`CANDIDATES`). When the case has an answer
(``actual_output``), a second model also reads the chunk's cosine to the answer, how far
that is below the list's best, and the answer's own words (not the input's) that the chunk
has: a chunk the answer draws on bears on the input. The models ship as numbers
(``offline/weights/relevance.json`` and ``relevance_answer.json``, loaded with
:func:`contextlens.offline.model.load_model`); ``benchmarks/fit_relevance.py`` chose their
features and fitted them on TREC Deep Learning 2019 and 2020 passage judgements (a passage
of grade >= 1 bears on its query), leave-one-source-out, and records the held-out table in
each file's ``meta``.

The probability is calibrated: of the chunks given about 0.7, about 7 in 10 were judged
relevant on the held-out source. A chunk is relevant exactly when its probability is at
least :data:`THRESHOLD`; each of its statements (its sentences) has the chunk's probability
and verdict, so no verdict disagrees with its probability. The metric's score is the
expected share of relevant statements: each chunk's probability times its statements,
summed, over all statements (:attr:`RelevanceResult.expected_share`).

What it is not: a reader. Its figures hold for a retrieval over a knowledge base of many
topics, where what is off-topic is text about another topic. A passage that shares the
input's words but is judged to have nothing to do with it (TREC DL 2020's grade-0 passages,
which web-scale retrieval returns) is given too high a probability; the fit script prints
how often. It knows what the embedder tells it: that a product's condition belongs to a
return policy only a reader knows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from contextlens.embeddings.base import Embedder, TextVectors, embed_distinct
from contextlens.offline.model import LogisticModel, load_model
from contextlens.offline.query import LEXICAL_FEATURES, lexical_features, profile, term_set
from contextlens.offline.text import WORD, sentences

#: Features of a chunk that do not read the answer, in :class:`ChunkFeatures` column order.
INPUT_FEATURES: tuple[str, ...] = (
    "similarity",  # cosine of the input and the chunk
    "gap",  # similarity minus the best similarity in the chunk's list (<= 0)
    "to_best",  # cosine of the chunk and the list's most input-similar chunk
    *LEXICAL_FEATURES,
)
#: Features that read the answer (0 when the case has none).
ANSWER_FEATURES: tuple[str, ...] = (
    "answer_similarity",  # cosine of the answer and the chunk
    "answer_gap",  # answer_similarity minus the list's best (<= 0)
    "answer_coverage",  # rarity-weighted share of the answer's own terms the chunk has
)
#: Every chunk feature the extractor computes; ``benchmarks/fit_relevance.py`` chooses each
#: model's features among them.
CANDIDATES: tuple[str, ...] = (*INPUT_FEATURES, *ANSWER_FEATURES)
#: A chunk bears on the input ("yes") when its probability is at least this.
THRESHOLD = 0.5
#: The bundled models: without an answer, and with one.
MODEL = "relevance"
ANSWER_MODEL = "relevance_answer"


def has_words(text: str | None) -> bool:
    """Whether ``text`` has a word or a number (``"-"``, a placeholder, has none)."""
    return bool(text and WORD.search(text))


def statements_of(chunk: str) -> list[str]:
    """A chunk's statements: its sentences (the whole chunk when it has none; none when it
    is blank)."""
    return sentences(chunk) or ([chunk.strip()] if chunk.strip() else [])


@dataclass(frozen=True)
class RelevanceItem:
    """An input, the chunks retrieved for it in their order, and the answer given from them
    (``""``: none)."""

    input: str
    chunks: Sequence[str]
    answer: str = ""

    @property
    def answered(self) -> bool:
        return has_words(self.answer)


@dataclass(frozen=True)
class ChunkScore:
    """One non-blank chunk: its index in the item's chunks, its probability of bearing on
    the input, its statements and its cosines to the input and (when given) the answer."""

    chunk: int
    probability: float
    statements: tuple[str, ...]
    similarity: float
    answer_similarity: float | None = None

    @property
    def relevant(self) -> bool:
        return self.probability >= THRESHOLD


@dataclass(frozen=True)
class RelevanceResult:
    """Every non-blank chunk's score, and which model gave them."""

    chunks: tuple[ChunkScore, ...]
    n_chunks: int  # chunks of the item, blank ones included
    model: str

    @property
    def chunk_relevance(self) -> tuple[float, ...]:
        """One probability per chunk of the item; 0.0 for a blank chunk."""
        by_index = {c.chunk: c.probability for c in self.chunks}
        return tuple(by_index.get(i, 0.0) for i in range(self.n_chunks))

    @property
    def total(self) -> int:
        """The statements of every chunk."""
        return sum(len(c.statements) for c in self.chunks)

    @property
    def relevant(self) -> int:
        """The statements of the relevant chunks."""
        return sum(len(c.statements) for c in self.chunks if c.relevant)

    @property
    def expected_relevant(self) -> float:
        """The expected number of relevant statements: each chunk's probability times its
        statements, summed."""
        return float(sum(c.probability * len(c.statements) for c in self.chunks))

    @property
    def expected_share(self) -> float:
        """The expected share of relevant statements (0.0 with no statement): the metric's
        score offline."""
        return self.expected_relevant / self.total if self.total else 0.0


@dataclass(frozen=True)
class ChunkFeatures:
    """The :data:`CANDIDATES` of every non-blank chunk of a batch of items."""

    keys: list[tuple[int, int]]  # (item, chunk) of each row
    matrix: np.ndarray  # (rows, len(CANDIDATES))

    def columns(self, names: Sequence[str]) -> np.ndarray:
        """The columns of the features ``names`` (ValueError for an unknown name)."""
        unknown = [n for n in names if n not in CANDIDATES]
        if unknown:
            raise ValueError(
                f"unknown relevance feature(s) {unknown}; the extractor computes {CANDIDATES}"
            )
        return self.matrix[:, [CANDIDATES.index(n) for n in names]]


def relevance_texts(items: Sequence[RelevanceItem]) -> list[str]:
    """Every text to embed for ``items``: inputs, answers and non-blank chunks."""
    out: list[str] = []
    for item in items:
        out.append(item.input)
        if item.answered:
            out.append(item.answer)
        out.extend(c for c in item.chunks if c.strip())
    return out


def answer_coverage(question: str, answer: str, chunk: str) -> float:
    """The rarity-weighted share of the answer's terms that are not the input's and that
    ``chunk`` has (0.0 when the answer adds no term)."""
    asked = set(profile(question).terms)
    said = profile(answer)
    own = [(t, w) for t, w in zip(said.terms, said.weights.tolist(), strict=True) if t not in asked]
    total = sum(w for _, w in own)
    if total <= 0:
        return 0.0
    seen, _ = term_set(chunk)
    return sum(w for t, w in own if t in seen) / total


def _item_rows(item: RelevanceItem, vectors: TextVectors, kept: list[int]) -> np.ndarray:
    """The :data:`CANDIDATES` of the chunks ``kept`` of one item."""
    texts = [item.chunks[j] for j in kept]
    chunks = vectors.of(texts).astype(np.float64)
    sim = chunks @ vectors[item.input].astype(np.float64)
    best = int(np.argmax(sim))
    to_best = chunks @ chunks[best]
    lexical = np.array([lexical_features(item.input, t) for t in texts], dtype=np.float64)
    if item.answered:
        ans = chunks @ vectors[item.answer].astype(np.float64)
        answer = np.column_stack(
            [ans, ans - ans.max(), [answer_coverage(item.input, item.answer, t) for t in texts]]
        )
    else:
        answer = np.zeros((len(texts), len(ANSWER_FEATURES)))
    return np.column_stack([sim, sim - sim.max(), to_best, lexical, answer])


def chunk_features(items: Sequence[RelevanceItem], vectors: TextVectors) -> ChunkFeatures:
    """The :data:`CANDIDATES` of every non-blank chunk; ``vectors`` embeds
    :func:`relevance_texts`."""
    keys: list[tuple[int, int]] = []
    blocks: list[np.ndarray] = []
    for i, item in enumerate(items):
        kept = [j for j, c in enumerate(item.chunks) if c.strip()]
        if not kept:
            continue
        keys.extend((i, j) for j in kept)
        blocks.append(_item_rows(item, vectors, kept))
    if not keys:
        return ChunkFeatures([], np.zeros((0, len(CANDIDATES))))
    return ChunkFeatures(keys, np.vstack(blocks))


def predict(features: ChunkFeatures, model: LogisticModel) -> np.ndarray:
    """The probability of each row of ``features`` from the columns ``model`` takes."""
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
    """Every chunk's probability of bearing on its input; one ``embed`` call. ``model``
    scores every item; by default an item with an answer is scored by the bundled
    :data:`ANSWER_MODEL`, one without by :data:`MODEL`."""
    vectors = await embed_distinct(embedder, relevance_texts(items))
    feats = chunk_features(items, vectors)
    sims = feats.columns(("similarity", "answer_similarity"))
    chosen = [model or load_model(ANSWER_MODEL if item.answered else MODEL) for item in items]
    probs = np.zeros(len(feats.keys))
    rows_of: dict[int, list[int]] = {}
    for row, (i, _) in enumerate(feats.keys):
        rows_of.setdefault(i, []).append(row)
    for name in {m.name for m in chosen}:
        rows = [r for i, m in enumerate(chosen) if m.name == name for r in rows_of.get(i, [])]
        if rows:
            used = next(m for m in chosen if m.name == name)
            part = ChunkFeatures([feats.keys[r] for r in rows], feats.matrix[rows])
            probs[rows] = predict(part, used)
    results: list[RelevanceResult] = []
    for i, item in enumerate(items):
        scored = tuple(
            ChunkScore(
                chunk=feats.keys[r][1],
                probability=float(probs[r]),
                statements=tuple(statements_of(item.chunks[feats.keys[r][1]])),
                similarity=float(sims[r, 0]),
                answer_similarity=float(sims[r, 1]) if item.answered else None,
            )
            for r in rows_of.get(i, [])
        )
        results.append(RelevanceResult(scored, len(item.chunks), chosen[i].name))
    return results
