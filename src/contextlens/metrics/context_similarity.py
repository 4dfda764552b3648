"""``ContextSimilarityEvaluator``: embedding similarity of a RAG answer's contexts (novastack).

For one case (query, generated answer, retrieved contexts) it scores each context against
the query (retrieval quality) and against the answer (grounding), averages each side over
the contexts, and combines the two side means by their harmonic mean, which is low when
either side is low. ``passing`` is ``score >= score_threshold``.

The call surface and result dict are novastack's; the behaviour fixes its defects:

* **Every similarity is in [0, 1]**, so thresholds and the harmonic mean mean the same in
  every mode. All vectors are L2-normalised first (the embedder protocol says so, and we
  re-normalise whatever a user model returns), so the modes differ only by their mapping
  of the cosine ``s`` in [-1, 1]:

  - ``"cosine"``: ``(s + 1) / 2``. Opposite 0, orthogonal 0.5, identical 1.
  - ``"dot_product"``: the dot product of unit vectors *is* the cosine, so this is the
    same ``(s + 1) / 2`` and gives exactly the cosine scores (kept for compatibility).
  - ``"euclidean"``: ``1 - d / 2`` with ``d = |u - v|`` in [0, 2] for unit vectors
    (``d = sqrt(2 - 2s)``). Identical 1, orthogonal ``1 - sqrt(2)/2 ~ 0.293``, opposite 0.

  novastack returned raw cosine / dot / negative distance; a raw-cosine threshold ``t``
  corresponds to ``(t + 1) / 2`` here.
* **Each text is embedded once.** Query, answer and contexts go to the embedder in one
  call (novastack embedded every context twice, one call per text); ``evaluate_batch``
  embeds each distinct text of the whole batch once, in ``ceil(n / batch_size)`` calls.
* **Blank contexts** (empty or whitespace only) are skipped, as in novastack, but reported:
  ``contexts_score`` lists the scores of the non-blank contexts in order, and the result
  gets an extra key ``"skipped_contexts"`` (their indices in ``contexts``) only when some
  were skipped. All contexts blank counts as missing ``contexts``.
* **Missing inputs** (``query`` or ``generated_text`` None/blank, ``contexts`` None/empty/all
  blank) raise one ``ValueError`` naming every missing one.
* **A zero vector** from the embedder raises
  :class:`~contextlens.embeddings.adapters.InvalidEmbeddingError` (a ``ValueError``)
  naming the text, instead of a NaN score.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from contextlens.embeddings.adapters import as_embedder, checked_vectors
from contextlens.embeddings.base import Embedder
from contextlens.metrics.base import Services
from contextlens.schemas import MetricResult, ModelTestCase
from contextlens.sync import run_sync

__all__ = ["SIMILARITY_MODES", "ContextSimilarityEvaluator", "SimilarityModeName"]

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


def _validate(query: Any, answer: Any, contexts: Any, where: str = "") -> _Case:
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


def _harmonic(q: float, a: float) -> float:
    """Harmonic mean of two scores in [0, 1]; 0 when both are 0."""
    return 0.0 if q + a == 0 else 2.0 * q * a / (q + a)


class ContextSimilarityEvaluator:
    """Query-context and answer-context embedding similarity, combined by harmonic mean.

    Args:
        embed_model: anything :func:`~contextlens.embeddings.adapters.as_embedder` accepts
            (None: the bundled offline MiniLM; a LangChain, LlamaIndex or novastack
            embedding; a contextlens ``Embedder``).
        similarity_mode: ``"cosine"``, ``"dot_product"`` or ``"euclidean"``; each maps to
            [0, 1] as the module docstring describes.
        score_threshold: ``passing`` is ``score >= score_threshold``; in [0, 1].
        batch_size: at most this many texts per ``embed`` call in ``evaluate_batch``.

    The object is configuration only: ``evaluate``/``aevaluate``/``compute`` may run
    concurrently on one instance. ``compute(case, services)`` uses ``embed_model`` when one
    was given, else the runner's ``services.embedder``.
    """

    name = "context_similarity"
    case_type = ModelTestCase

    def __init__(
        self,
        embed_model: Any = None,
        similarity_mode: SimilarityModeName | str = "cosine",
        score_threshold: float = 0.8,
        *,
        batch_size: int = 2048,
    ) -> None:
        mode = getattr(similarity_mode, "value", similarity_mode)  # accepts str enums too
        if mode not in SIMILARITY_MODES:
            raise ValueError(
                f"similarity_mode must be one of {', '.join(map(repr, SIMILARITY_MODES))}; "
                f"got {similarity_mode!r}"
            )
        if isinstance(score_threshold, bool) or not isinstance(score_threshold, (int, float)):
            raise TypeError(f"score_threshold must be a number, got {score_threshold!r}")
        if not 0.0 <= float(score_threshold) <= 1.0:
            raise ValueError(f"score_threshold must be between 0.0 and 1.0, got {score_threshold}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.embed_model = embed_model
        self.similarity_mode: str = mode
        self.score_threshold = float(score_threshold)
        self.batch_size = batch_size
        self._embedder: Embedder = as_embedder(embed_model)

    def __repr__(self) -> str:
        return (
            f"ContextSimilarityEvaluator(embed_model={self._embedder.name!r}, "
            f"similarity_mode={self.similarity_mode!r}, score_threshold={self.score_threshold})"
        )

    # --- public surface (novastack) ----------------------------------------------------

    def evaluate(
        self,
        query: str | None = None,
        generated_text: str | None = None,
        contexts: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Score one case; returns novastack's result dict. Extra keyword arguments are
        ignored, as in novastack. Works inside a running event loop too."""
        return run_sync(self.aevaluate(query, generated_text, contexts, **kwargs))

    async def aevaluate(
        self,
        query: str | None = None,
        generated_text: str | None = None,
        contexts: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Async :meth:`evaluate`: one ``embed`` call for query, answer and contexts."""
        del kwargs  # accepted and ignored, as in novastack
        case = _validate(query, generated_text, contexts)
        [result] = await self._score([case], self._embedder, labels=_single_labels)
        return result

    def evaluate_batch(self, cases: Iterable[Any]) -> list[dict[str, Any]]:
        """Score many cases (dicts or objects with ``query``, ``generated_text``,
        ``contexts``), embedding each distinct text of the batch once."""
        return run_sync(self.aevaluate_batch(cases))

    async def aevaluate_batch(self, cases: Iterable[Any]) -> list[dict[str, Any]]:
        """Async :meth:`evaluate_batch`. Every case is validated before anything is
        embedded; invalid ones raise one ValueError naming them (up to five)."""
        validated: list[_Case] = []
        errors: list[str] = []
        for i, raw in enumerate(cases):
            try:
                validated.append(
                    _validate(
                        _field(raw, "query"),
                        _field(raw, "generated_text"),
                        _field(raw, "contexts"),
                        where=f"cases[{i}]: ",
                    )
                )
            except ValueError as exc:
                errors.append(str(exc))
        if errors:
            more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
            raise ValueError("; ".join(errors[:5]) + more)
        return await self._score(validated, self._embedder, labels=_batch_labels)

    async def compute(self, case: Any, services: Services) -> MetricResult:
        """The runner's entry point: one case in, a :class:`MetricResult` out.

        ``details`` is the novastack dict. Invalid input or an unusable embedding (both
        ``ValueError``/``TypeError``) gives a failed result with the reason, not a score.
        """
        embedder = self._embedder if self.embed_model is not None else services.embedder
        try:
            valid = _validate(
                _field(case, "query"), _field(case, "generated_text"), _field(case, "contexts")
            )
            [result] = await self._score([valid], embedder, labels=_single_labels)
        except (ValueError, TypeError) as exc:
            return MetricResult(metric=self.name, score=None, error=str(exc))
        q = result["query_context_similarity"]["score"]
        a = result["answer_context_similarity"]["score"]
        return MetricResult(
            metric=self.name,
            score=result["score"],
            success=result["passing"],
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
        # cosine and dot_product coincide on unit vectors
        return np.clip((rows @ ref + 1.0) / 2.0, 0.0, 1.0)

    async def _embed_all(
        self, texts: list[str], labels: list[str], embedder: Embedder
    ) -> dict[str, NDArray[np.float32]]:
        """Vectors of distinct ``texts``, in ``ceil(len / batch_size)`` embed calls."""
        out: dict[str, NDArray[np.float32]] = {}
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start : start + self.batch_size]
            raw = await embedder.embed(chunk)
            vecs = checked_vectors(
                raw, chunk, embedder.name, labels[start : start + self.batch_size]
            )
            out.update(zip(chunk, vecs, strict=True))
        return out

    async def _score(
        self,
        cases: list[_Case],
        embedder: Embedder,
        labels: Callable[[int, str], str],
    ) -> list[dict[str, Any]]:
        """The one code path: embed every distinct text once, then score each case."""
        first_seen: dict[str, str] = {}
        for i, c in enumerate(cases):
            first_seen.setdefault(c.query, labels(i, "query"))
            first_seen.setdefault(c.answer, labels(i, "generated_text"))
            for j in c.kept:
                first_seen.setdefault(c.contexts[j], labels(i, f"contexts[{j}]"))
        texts = list(first_seen)
        vectors = await self._embed_all(texts, [first_seen[t] for t in texts], embedder)
        return [self._result(c, vectors) for c in cases]

    def _result(self, case: _Case, vectors: dict[str, NDArray[np.float32]]) -> dict[str, Any]:
        ctx = np.stack([vectors[case.contexts[j]] for j in case.kept])
        q_scores = [float(s) for s in self.similarity(vectors[case.query], ctx)]
        a_scores = [float(s) for s in self.similarity(vectors[case.answer], ctx)]
        q_mean = math.fsum(q_scores) / len(q_scores)
        a_mean = math.fsum(a_scores) / len(a_scores)
        score = _harmonic(q_mean, a_mean)
        result: dict[str, Any] = {
            "query_context_similarity": {"contexts_score": q_scores, "score": q_mean},
            "answer_context_similarity": {"contexts_score": a_scores, "score": a_mean},
            "score": score,
            "passing": bool(score >= self.score_threshold),
        }
        if case.skipped:
            result["skipped_contexts"] = list(case.skipped)
        return result


def _single_labels(_: int, field: str) -> str:
    return field


def _batch_labels(i: int, field: str) -> str:
    return f"cases[{i}].{field}"
