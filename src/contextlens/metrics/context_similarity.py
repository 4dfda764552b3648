"""Context similarity: embedding similarity of a RAG answer's contexts.

For one case (query, generated answer, retrieved contexts) it scores each context against
the query (retrieval quality) and against the answer (grounding), averages each side over
the contexts, and combines the two side means by their harmonic mean, which is low when
either side is low.

**The score is a similarity, not a probability**: its level is the embedder's (the bundled
MiniLM gives a question and the passage that answers it a cosine of about 0.6, so
novastack's 0.8 mark is missed by nearly every case on any data). So the metric has no pass
mark of its own: unless one is set (``score_threshold``, or a run's ``thresholds`` /
``--threshold``), an item is scored with no verdict (``success`` and ``passing`` None,
status "scored") and a run shows no pass rate. With a mark set, ``passing`` is
``score >= score_threshold``.

The result dict is novastack's (its surface is
:class:`contextlens.compat.novastack.ContextSimilarityEvaluator`); the behaviour fixes its
defects:

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
  ``contexts_score`` lists the scores of the non-blank contexts in order, and the result
  gets an extra key ``"skipped_contexts"`` (their indices in ``contexts``) only when some
  were skipped. All contexts blank counts as missing ``contexts``.
* **Missing inputs** (``query`` or ``generated_text`` None/blank, ``contexts`` None/empty/all
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel

from contextlens.embeddings.adapters import checked_vectors
from contextlens.embeddings.base import Embedder
from contextlens.metrics.base import DEFAULT_MAX_EMBED_TOKENS, Services, size_limit, too_long
from contextlens.metrics.registry import metric
from contextlens.schemas import MetricDetails, MetricResult, ModelTestCase

__all__ = [
    "SIMILARITY_MODES",
    "ContextSimilarityScorer",
    "SideSimilarity",
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


#: Where a :class:`ModelTestCase` keeps each of novastack's arguments.
_TEST_CASE_FIELDS = {
    "query": "input",
    "generated_text": "actual_output",
    "contexts": "retrieval_context",
}


def _field(case: Any, name: str) -> Any:
    if isinstance(case, ModelTestCase):
        return getattr(case, _TEST_CASE_FIELDS[name])
    if isinstance(case, Mapping):
        return case.get(name)
    return getattr(case, name, None)


def _blank(text: Any) -> bool:
    return not isinstance(text, str) or not text.strip()


def validate_similarity_case(query: Any, answer: Any, contexts: Any, where: str = "") -> _Case:
    """A :class:`_Case`, or ValueError/TypeError naming every missing or mistyped field."""
    for name, value in (("query", query), ("generated_text", answer)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{where}{name} must be a str, got {type(value).__name__}")
    if isinstance(contexts, str):
        raise TypeError(f"{where}contexts must be a list of str, not a single str")
    ctx: tuple[Any, ...] = tuple(contexts) if contexts is not None else ()
    for i, c in enumerate(ctx):
        if c is not None and not isinstance(c, str):
            raise TypeError(f"{where}contexts[{i}] must be a str, got {type(c).__name__}")
    missing = [
        f"'{name}' ({'None' if value is None else 'blank'})"
        for name, value in (("query", query), ("generated_text", answer))
        if _blank(value)
    ]
    kept = tuple(i for i, c in enumerate(ctx) if not _blank(c))
    if not kept:
        why = "None" if contexts is None else "empty" if not ctx else f"all {len(ctx)} blank"
        missing.append(f"'contexts' ({why})")
    if missing:
        raise ValueError(f"{where}missing required argument(s): {', '.join(missing)}")
    skipped = tuple(i for i, c in enumerate(ctx) if _blank(c))
    return _Case(query, answer, tuple(c or "" for c in ctx), kept, skipped)


class SideSimilarity(BaseModel):
    """One side (the query, or the answer) against each context, and their mean."""

    contexts_score: list[float]
    score: float


class SimilarityDetails(MetricDetails):
    """A context-similarity result's details: both sides and their harmonic mean;
    :meth:`novastack` gives novastack's result dict."""

    query_context_similarity: SideSimilarity | None = None
    answer_context_similarity: SideSimilarity | None = None
    score: float | None = None
    passing: bool | None = None
    """``score >= score_threshold``; None when no pass mark was set."""
    skipped_contexts: list[int] | None = None

    def novastack(self) -> dict[str, Any]:
        """novastack's dict: both sides, ``score``, ``passing``, and ``skipped_contexts`` only
        when some were skipped."""
        out: dict[str, Any] = {
            "query_context_similarity": _side(self.query_context_similarity),
            "answer_context_similarity": _side(self.answer_context_similarity),
            "score": self.score,
            "passing": self.passing,
        }
        if self.skipped_contexts:
            out["skipped_contexts"] = list(self.skipped_contexts)
        return out


def _side(side: SideSimilarity | None) -> dict[str, Any] | None:
    return (
        None if side is None else {"contexts_score": list(side.contexts_score), "score": side.score}
    )


def _harmonic(q: float, a: float) -> float:
    """Harmonic mean of two scores in [0, 1]; 0 when both are 0."""
    return 0.0 if q + a == 0 else 2.0 * q * a / (q + a)


@metric(
    "context-similarity",
    aliases=("ContextSimilarityEvaluator",),
    reads=("input", "actual_output", "retrieval_context"),
    requires=("input", "actual_output", "retrieval_context"),
)
class ContextSimilarityScorer:
    """Query-context and answer-context embedding similarity, combined by harmonic mean.

    Args:
        similarity_mode: ``"cosine"``, ``"dot_product"`` or ``"euclidean"``; each maps to
            [0, 1] as the module docstring describes.
        score_threshold: the pass mark: an item passes when ``score >= score_threshold``; in
            [0, 1]. None (the default): no pass mark, as the score is not a probability;
            items are scored without a verdict.
        embedder: this metric's own embedder (anything
            :func:`~contextlens.embeddings.adapters.as_embedder` takes; None: the run's).
        max_embed_tokens: the longest text embedded (characters / 4); a case with a longer
            query, answer or context fails with its size, and nothing of it is embedded.
        label: tells this instance apart from others of the same metric in a run (its
            results go by ``NAME:LABEL``); None: the metric's name alone.

    A case is a :class:`ModelTestCase` (``input``, ``actual_output``,
    ``retrieval_context``), or a mapping or object with novastack's ``query``,
    ``generated_text`` and ``contexts``. ``details`` are :class:`SimilarityDetails`
    (``details.novastack()`` is novastack's result dict). Invalid
    input or an unusable embedding raises a ``ValueError`` / ``TypeError`` naming it.
    """

    case_type = ModelTestCase
    uses_judge = False
    details_type = SimilarityDetails
    #: The score is a similarity: no pass mark unless one is set.
    score_is_probability = False

    def __init__(
        self,
        similarity_mode: SimilarityModeName | str = "cosine",
        score_threshold: float | None = None,
        *,
        embedder: Any = None,
        max_embed_tokens: int = DEFAULT_MAX_EMBED_TOKENS,
        label: str | None = None,
    ) -> None:
        mode = getattr(similarity_mode, "value", similarity_mode)  # accepts str enums too
        if mode not in SIMILARITY_MODES:
            raise ValueError(
                f"similarity_mode must be one of {', '.join(map(repr, SIMILARITY_MODES))}; "
                f"got {similarity_mode!r}"
            )
        if score_threshold is not None:
            if isinstance(score_threshold, bool) or not isinstance(score_threshold, (int, float)):
                raise TypeError(f"score_threshold must be a number, got {score_threshold!r}")
            if not 0.0 <= float(score_threshold) <= 1.0:
                raise ValueError(
                    f"score_threshold must be between 0.0 and 1.0, got {score_threshold}"
                )
        self.similarity_mode: str = mode
        self.score_threshold = None if score_threshold is None else float(score_threshold)
        self.embedder = embedder
        self.max_embed_tokens = size_limit("max_embed_tokens", max_embed_tokens)
        self.label = label

    @property
    def threshold(self) -> float | None:
        """The pass mark (``score_threshold``); None when none was set."""
        return self.score_threshold

    def __repr__(self) -> str:
        return (
            f"ContextSimilarityScorer(similarity_mode={self.similarity_mode!r}, "
            f"score_threshold={self.score_threshold}, label={self.label!r})"
        )

    async def score(self, case: Any, services: Services) -> MetricResult:
        """One case in, a :class:`MetricResult` with :class:`SimilarityDetails`."""
        valid = validate_similarity_case(
            _field(case, "query"), _field(case, "generated_text"), _field(case, "contexts")
        )
        too_big = too_long(
            [
                ("query", valid.query),
                ("generated_text", valid.answer),
                *((f"contexts[{j}]", valid.contexts[j]) for j in valid.kept),
            ],
            self.max_embed_tokens,
        )
        if too_big is not None:
            return MetricResult(
                metric=self.name,
                score=None,
                error=too_big,
                details=SimilarityDetails(max_embed_tokens=self.max_embed_tokens),
            )
        [result] = await self.score_many([valid], services.embedder)
        assert result.query_context_similarity and result.answer_context_similarity
        q = result.query_context_similarity.score
        a = result.answer_context_similarity.score
        return MetricResult(
            metric=self.name,
            score=result.score,
            success=result.passing,
            reason=(
                f"harmonic mean of query-context {q:.3f} and answer-context {a:.3f} "
                f"({self.similarity_mode}, in [0, 1])"
            ),
            details=result,
        )

    # --- core ----------------------------------------------------------------------------

    def similarity(
        self, reference: NDArray[np.float32], others: NDArray[np.float32]
    ) -> NDArray[np.float64]:
        """Similarity in [0, 1] of one unit vector to each unit row of ``others``."""
        ref = reference.astype(np.float64)
        rows = others.astype(np.float64)
        if self.similarity_mode == "euclidean":
            d = np.linalg.norm(rows - ref, axis=1)
            return np.clip(1.0 - d / 2.0, 0.0, 1.0)
        cosine = rows @ ref  # the dot product of unit vectors
        if self.similarity_mode == "dot_product":
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
        first_seen: dict[str, str] = {}
        for i, c in enumerate(cases):
            first_seen.setdefault(c.query, label(i, "query"))
            first_seen.setdefault(c.answer, label(i, "generated_text"))
            for j in c.kept:
                first_seen.setdefault(c.contexts[j], label(i, f"contexts[{j}]"))
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
            passing=None if self.score_threshold is None else bool(score >= self.score_threshold),
            skipped_contexts=list(case.skipped) or None,
        )


def _single_labels(_: int, field: str) -> str:
    return field
