"""Context similarity: embedding similarity of a RAG answer's contexts.

For one case (query, generated answer, retrieved contexts) it scores each context against
the query (retrieval quality) and against the answer (grounding), averages each side over
the contexts, and combines the two side means by their harmonic mean, which is low when
either side is low.

**The score is a similarity, not a probability**: its level is the embedder's (the bundled
MiniLM gives a question and the passage that answers it a cosine of about 0.6, so
novastack's 0.8 mark is missed by nearly every case on any data). So the metric has no pass
mark of its own: unless one is set (``threshold``, or a run's ``thresholds`` /
``--threshold``), an item is scored with no verdict (``success`` None, status "scored") and
a run shows no pass rate.

novastack's surface over it is :class:`contextlens.compat.novastack.ContextSimilarityEvaluator`;
the behaviour fixes its defects:

* **Every similarity is in [0, 1]**, so thresholds and the harmonic mean mean the same in
  every mode. All vectors are L2-normalised first (the embedder protocol says so, and we
  re-normalise whatever a user model returns), so the modes differ only by their mapping
  of the cosine ``s`` in [-1, 1]:

  - ``"cosine"``: ``max(s, 0)``, novastack's number: the cosine itself, with 0 for the
    vectors that point away from each other (novastack let those go negative, where the
    harmonic mean means nothing). Orthogonal or opposite 0, identical 1; a novastack
    threshold keeps its meaning.
  - ``"dot_product"``: ``(s + 1) / 2``: the dot product of unit vectors is the cosine,
    mapped from [-1, 1] to [0, 1] (novastack's raw dot product depended on the vectors'
    lengths). Opposite 0, orthogonal 0.5, identical 1.
  - ``"euclidean"``: ``1 - d / 2`` with ``d = |u - v|`` in [0, 2] for unit vectors
    (``d = sqrt(2 - 2s)``; novastack returned ``-d``). Identical 1, orthogonal
    ``1 - sqrt(2)/2 ~ 0.293``, opposite 0.

* **Each text is embedded once.** Query, answer and contexts go to the embedder in one
  call (novastack embedded every context twice, one call per text), and the embedders
  gather the concurrent calls of many cases into batches.
* **Blank contexts** (empty or whitespace only) are skipped, as in novastack, but reported:
  ``contexts_score`` lists the scores of the non-blank contexts in order, and
  ``skipped_contexts`` their indices. All contexts blank counts as missing contexts.
* **Missing inputs** (the question or the answer None/blank, the contexts None/empty/all
  blank) raise one ``ValueError`` naming every missing one.
* **A text over ``max_embed_tokens``** (characters / 4; 200,000 characters by default)
  fails the case with its size and the limit, and nothing of the case is embedded: a
  mean-pooled vector of a whole book says little, and embedding it costs minutes.
* **A zero vector** from the embedder raises
  :class:`~contextlens.embeddings.adapters.InvalidEmbeddingError` (a ``ValueError``)
  naming the text, instead of a NaN score.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, field_validator

from contextlens.embeddings.adapters import checked_vectors
from contextlens.embeddings.base import Embedder
from contextlens.metrics.base import OverBudget, Services, too_long
from contextlens.metrics.config import EmbeddingConfig
from contextlens.metrics.metric import Metric, Score
from contextlens.metrics.registry import metric
from contextlens.schemas import MetricDetails, ModelTestCase

__all__ = [
    "SIMILARITY_MODES",
    "ContextSimilarityScorer",
    "SideSimilarity",
    "SimilarityConfig",
    "SimilarityDetails",
    "SimilarityModeName",
    "validate_similarity_case",
]

SimilarityModeName = Literal["cosine", "dot_product", "euclidean"]
SIMILARITY_MODES: tuple[str, ...] = ("cosine", "dot_product", "euclidean")


@dataclass(frozen=True)
class _Case:
    """One validated case: ``kept`` are the indices of the non-blank contexts."""

    query: str
    answer: str
    contexts: tuple[str, ...]
    kept: tuple[int, ...]
    skipped: tuple[int, ...]


#: The names of the three texts in messages: the case fields they come from.
CASE_FIELDS = ("input", "actual_output", "retrieval_context")


def _blank(text: Any) -> bool:
    return not isinstance(text, str) or not text.strip()


def validate_similarity_case(
    query: Any,
    answer: Any,
    contexts: Any,
    where: str = "",
    names: tuple[str, str, str] = CASE_FIELDS,
) -> _Case:
    """A :class:`_Case`, or ValueError/TypeError naming every missing or mistyped field
    (``names``: what the query, the answer and the contexts are called)."""
    q_name, a_name, c_name = names
    for name, value in ((q_name, query), (a_name, answer)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{where}{name} must be a str, got {type(value).__name__}")
    if isinstance(contexts, str):
        raise TypeError(f"{where}{c_name} must be a list of str, not a single str")
    ctx: tuple[Any, ...] = tuple(contexts) if contexts is not None else ()
    for i, c in enumerate(ctx):
        if c is not None and not isinstance(c, str):
            raise TypeError(f"{where}{c_name}[{i}] must be a str, got {type(c).__name__}")
    missing = [
        f"'{name}' ({'None' if value is None else 'blank'})"
        for name, value in ((q_name, query), (a_name, answer))
        if _blank(value)
    ]
    kept = tuple(i for i, c in enumerate(ctx) if not _blank(c))
    if not kept:
        why = "None" if contexts is None else "empty" if not ctx else f"all {len(ctx)} blank"
        missing.append(f"'{c_name}' ({why})")
    if missing:
        raise ValueError(f"{where}missing required argument(s): {', '.join(missing)}")
    skipped = tuple(i for i, c in enumerate(ctx) if _blank(c))
    return _Case(query, answer, tuple(c or "" for c in ctx), kept, skipped)


class SideSimilarity(BaseModel):
    """One side (the query, or the answer) against each context, and their mean."""

    contexts_score: list[float]
    score: float


class SimilarityDetails(MetricDetails):
    """A context-similarity result's details: both sides and their harmonic mean, and the
    blank contexts left out (their indices)."""

    query_context_similarity: SideSimilarity | None = None
    answer_context_similarity: SideSimilarity | None = None
    score: float | None = None
    skipped_contexts: list[int] | None = None


def _harmonic(q: float, a: float) -> float:
    """Harmonic mean of two scores in [0, 1]; 0 when both are 0."""
    return 0.0 if q + a == 0 else 2.0 * q * a / (q + a)


class SimilarityConfig(EmbeddingConfig):
    """Context similarity's settings.

    ``similarity_mode``: ``"cosine"``, ``"dot_product"`` or ``"euclidean"``; each maps to
    [0, 1] as the module docstring describes. ``threshold``: the pass mark, in [0, 1]; None
    (the default): no pass mark, as the score is not a probability, and items are scored
    without a verdict. ``max_embed_tokens``: the longest text embedded (characters / 4); a
    case with a longer query, answer or context fails with its size, and nothing of it is
    embedded.
    """

    similarity_mode: SimilarityModeName = "cosine"
    #: What the query, the answer and the contexts are called in messages (a seed shell
    #: gives its own names).
    names: tuple[str, str, str] = CASE_FIELDS

    @field_validator("similarity_mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        mode = getattr(value, "value", value)  # accepts str enums too
        if mode not in SIMILARITY_MODES:
            raise ValueError(
                f"similarity_mode must be one of {', '.join(map(repr, SIMILARITY_MODES))}; "
                f"got {value!r}"
            )
        return mode


@metric(
    "context-similarity",
    aliases=("ContextSimilarityEvaluator",),
    reads=("input", "actual_output", "retrieval_context"),
    requires=("input", "actual_output", "retrieval_context"),
)
class ContextSimilarityScorer(Metric[ModelTestCase]):
    """Query-context and answer-context embedding similarity, combined by harmonic mean.

    Settings: :class:`SimilarityConfig`. A case is a :class:`ModelTestCase` (``input``,
    ``actual_output``, ``retrieval_context``); ``details`` are :class:`SimilarityDetails`.
    Invalid input or an unusable embedding raises a ``ValueError`` / ``TypeError`` naming it.
    """

    case_type = ModelTestCase
    uses_judge = False
    details_type = SimilarityDetails
    config_type = SimilarityConfig
    #: The score is a similarity: no pass mark unless one is set.
    score_is_probability = False
    config: SimilarityConfig

    async def offline(self, case: ModelTestCase, services: Services) -> Score:
        """One case's similarity, with :class:`SimilarityDetails`."""
        q_name, a_name, c_name = names = self.config.names
        valid = validate_similarity_case(
            case.input, case.actual_output, case.retrieval_context, names=names
        )
        too_big = too_long(
            [
                (q_name, valid.query),
                (a_name, valid.answer),
                *((f"{c_name}[{j}]", valid.contexts[j]) for j in valid.kept),
            ],
            self.config.max_embed_tokens,
        )
        if too_big is not None:
            raise OverBudget(too_big, "max_embed_tokens")
        [result] = await self.score_many([valid], services.embedder)
        assert result.query_context_similarity and result.answer_context_similarity
        q = result.query_context_similarity.score
        a = result.answer_context_similarity.score
        reason = (
            f"harmonic mean of query-context {q:.3f} and answer-context {a:.3f} "
            f"({self.config.similarity_mode}, in [0, 1])"
        )
        return Score(result.score, reason, result)

    # --- core ----------------------------------------------------------------------------

    def similarity(
        self, reference: NDArray[np.float32], others: NDArray[np.float32]
    ) -> NDArray[np.float64]:
        """Similarity in [0, 1] of one unit vector to each unit row of ``others``."""
        ref = reference.astype(np.float64)
        rows = others.astype(np.float64)
        mode = self.config.similarity_mode
        if mode == "euclidean":
            d = np.linalg.norm(rows - ref, axis=1)
            return np.clip(1.0 - d / 2.0, 0.0, 1.0)
        cosine = rows @ ref  # the dot product of unit vectors
        if mode == "dot_product":
            return np.clip((cosine + 1.0) / 2.0, 0.0, 1.0)
        return np.clip(cosine, 0.0, 1.0)

    async def score_many(
        self,
        cases: list[_Case],
        embedder: Embedder,
        labels: Callable[[int, str], str] | None = None,
    ) -> list[SimilarityDetails]:
        """The result of each validated case, embedding every distinct text once in one
        call; ``labels(i, field)`` names a text in errors (default: the field)."""
        label = labels or _single_labels
        q_name, a_name, c_name = self.config.names
        first_seen: dict[str, str] = {}
        for i, c in enumerate(cases):
            first_seen.setdefault(c.query, label(i, q_name))
            first_seen.setdefault(c.answer, label(i, a_name))
            for j in c.kept:
                first_seen.setdefault(c.contexts[j], label(i, f"{c_name}[{j}]"))
        texts = list(first_seen)
        raw = await embedder.embed(texts)
        checked = checked_vectors(raw, texts, embedder.name, list(first_seen.values()))
        vectors = dict(zip(texts, checked, strict=True))
        return [self._result(c, vectors) for c in cases]

    def _result(self, case: _Case, vectors: dict[str, NDArray[np.float32]]) -> SimilarityDetails:
        ctx = np.stack([vectors[case.contexts[j]] for j in case.kept])
        q_scores = [float(s) for s in self.similarity(vectors[case.query], ctx)]
        a_scores = [float(s) for s in self.similarity(vectors[case.answer], ctx)]
        q_mean = math.fsum(q_scores) / len(q_scores)
        a_mean = math.fsum(a_scores) / len(a_scores)
        score = _harmonic(q_mean, a_mean)
        return SimilarityDetails(
            query_context_similarity=SideSimilarity(contexts_score=q_scores, score=q_mean),
            answer_context_similarity=SideSimilarity(contexts_score=a_scores, score=a_mean),
            score=score,
            skipped_contexts=list(case.skipped) or None,
        )


def _single_labels(_: int, field: str) -> str:
    return field
