"""novastack's ``ContextSimilarityEvaluator`` and ``HuggingFaceEmbedding``.

    embedding = HuggingFaceEmbedding()
    evaluator = ContextSimilarityEvaluator(embed_model=embedding)
    result = evaluator.evaluate(query=..., generated_text=..., contexts=[...])
    result["score"], result["passing"]

A thin shell over :class:`~contextlens.metrics.context_similarity.ContextSimilarityScorer`,
run through :func:`~contextlens.runner.aevaluate` (so embeddings are cached like every
other run's). See that module for what each similarity mode means: ``"cosine"`` is
novastack's number (0 where novastack's went negative), the other two are mapped to [0, 1].
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from contextlens.compat.shell import score_one
from contextlens.embeddings.adapters import as_embedder
from contextlens.embeddings.base import Embedder
from contextlens.embeddings.local import BUNDLED_NAMES, find_local_model, hub_cache_folders
from contextlens.embeddings.minilm import default_embedder
from contextlens.metrics.base import DEFAULT_MAX_EMBED_TOKENS
from contextlens.metrics.context_similarity import (
    ContextSimilarityScorer,
    SideSimilarity,
    SimilarityDetails,
    SimilarityModeName,
    validate_similarity_case,
)
from contextlens.results import ItemResult
from contextlens.runner import aevaluate
from contextlens.schemas import ModelTestCase
from contextlens.sync import run_sync

__all__ = ["ContextSimilarityEvaluator", "HuggingFaceEmbedding"]

_FIELDS = {"query": "input", "generated_text": "actual_output", "contexts": "retrieval_context"}
#: novastack's default ``score_threshold``: what the attribute reads when none is given.
NOVASTACK_THRESHOLD = 0.8


class HuggingFaceEmbedding:
    """novastack's local embedding model, without downloads.

    ``model_name`` is a Hugging Face name or a folder. A model already on this machine (its
    folder, or the hub cache; see :mod:`contextlens.embeddings.local`) is run with
    onnxruntime; otherwise the bundled all-MiniLM-L6-v2 is used, with a warning naming the
    model that was not found. ``source`` says which model is in use, ``name`` is its
    embedder name.
    """

    batches_concurrent_calls = True

    def __init__(
        self,
        model_name: str = "sentence-transformers/all-MiniLM-L6-v2",
        cache_folder: str | None = None,
        **ignored: Any,
    ) -> None:
        self.model_name = model_name
        local = find_local_model(model_name, cache_folder)
        self._embedder: Embedder
        if local is not None:
            self._embedder = local.embedder()
            self.source = f"{model_name} from {local.onnx}"
        else:
            self._embedder = default_embedder()
            self.source = "the bundled all-MiniLM-L6-v2 (int8 ONNX)"
            if model_name not in BUNDLED_NAMES:
                looked = ", ".join(str(p) for p in hub_cache_folders(cache_folder))
                warnings.warn(
                    f"HuggingFaceEmbedding: {model_name!r} is not on this machine (looked "
                    f"for it as a folder and in {looked}); using {self.source} instead",
                    UserWarning,
                    stacklevel=2,
                )
        self.name = self._embedder.name

    def __repr__(self) -> str:
        return f"HuggingFaceEmbedding({self.model_name!r}, source={self.source!r})"

    async def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One L2-normalised float32 row per text (the contextlens embedder protocol)."""
        return await self._embedder.embed(texts)

    def embed_text(self, texts: list[str]) -> list[list[float]]:
        """novastack's call: one vector per text."""
        return run_sync(self.embed(texts)).tolist()

    def get_text_embedding(self, text: str) -> list[float]:
        """One text's vector."""
        return self.embed_text([text])[0]


#: novastack's names of the three texts.
_NAMES = ("query", "generated_text", "contexts")


def _case(query: Any, answer: Any, contexts: Any, where: str = "") -> ModelTestCase:
    valid = validate_similarity_case(query, answer, contexts, where, _NAMES)
    return ModelTestCase(
        input=valid.query, actual_output=valid.answer, retrieval_context=list(valid.contexts)
    )


def _field(raw: Any, name: str) -> Any:
    if isinstance(raw, ModelTestCase):
        return getattr(raw, _FIELDS[name])
    if isinstance(raw, dict):
        return raw.get(name)
    return getattr(raw, name, None)


def _novastack(item: ItemResult) -> dict[str, Any]:
    """novastack's result dict of a scored item (``passing``: the run's verdict)."""
    details = item.details
    assert isinstance(details, SimilarityDetails)
    return result_dict(details, item.success)


def result_dict(details: SimilarityDetails, passing: bool | None) -> dict[str, Any]:
    """novastack's result dict: both sides, ``score``, ``passing`` (None without a pass
    mark), and ``skipped_contexts`` only when some were skipped."""
    out: dict[str, Any] = {
        "query_context_similarity": _side(details.query_context_similarity),
        "answer_context_similarity": _side(details.answer_context_similarity),
        "score": details.score,
        "passing": passing,
    }
    if details.skipped_contexts:
        out["skipped_contexts"] = list(details.skipped_contexts)
    return out


def _checked_threshold(value: Any) -> float | None:
    """``score_threshold`` as a number in [0, 1] (None: none); TypeError / ValueError
    naming it else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"score_threshold must be a number, got {value!r}")
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"score_threshold must be between 0.0 and 1.0, got {value}")
    return float(value)


def _side(side: SideSimilarity | None) -> dict[str, Any] | None:
    if side is None:
        return None
    return {"contexts_score": list(side.contexts_score), "score": side.score}


def _raise_failure(item: ItemResult, where: str = "") -> None:
    exc = item.exception
    if isinstance(exc, (ValueError, TypeError)):
        raise type(exc)(f"{where}{exc}") from exc
    raise RuntimeError(f"{where}{item.error}")


class ContextSimilarityEvaluator:
    """Query-context and answer-context embedding similarity, combined by harmonic mean.

    Args:
        embed_model: None (the bundled offline MiniLM, or the run's embedder in
            :func:`contextlens.evaluate`); a LangChain, LlamaIndex or novastack embedding;
            :class:`HuggingFaceEmbedding`; a contextlens ``Embedder``.
        similarity_mode: ``"cosine"`` (novastack's cosine, 0 where it is negative),
            ``"dot_product"`` or ``"euclidean"`` (mapped to [0, 1]; see
            :mod:`contextlens.metrics.context_similarity`).
        score_threshold: ``passing`` is ``score >= score_threshold``, novastack's rule; in
            [0, 1]. Not given: ``passing`` is None and the run shows no pass rate, as the
            score is a similarity whose level is the embedder's (a cosine of 0.8, novastack's
            default mark, is missed by nearly every case with the bundled MiniLM);
            ``score_threshold`` still reads novastack's default, 0.8.
        batch_size: at most this many texts per call of a user's embedding model.
        max_embed_tokens: the longest text embedded (characters / 4); a case with a longer
            query, answer or context fails with its size.

    ``score_threshold``, ``similarity_mode`` and ``embed_model`` may be set after
    construction, as in novastack; a value it refuses changes nothing. The object is
    configuration only: ``evaluate``/``aevaluate`` may run concurrently on one instance.
    """

    case_type = ModelTestCase

    def __init__(
        self,
        embed_model: Any = None,
        similarity_mode: SimilarityModeName | str = "cosine",
        score_threshold: float | None = None,
        *,
        batch_size: int = 2048,
        max_embed_tokens: int = DEFAULT_MAX_EMBED_TOKENS,
    ) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self.max_embed_tokens = max_embed_tokens
        self._embed_model = embed_model
        self.metric = self._core(similarity_mode, score_threshold, self._embedder(embed_model))

    def _embedder(self, embed_model: Any) -> Embedder | None:
        return None if embed_model is None else as_embedder(embed_model, max_texts=self.batch_size)

    def _core(
        self,
        similarity_mode: SimilarityModeName | str,
        score_threshold: float | None,
        embedder: Embedder | None,
    ) -> ContextSimilarityScorer:
        """The metric this shell runs; checks every setting (so a bad one changes nothing)."""
        return ContextSimilarityScorer(
            similarity_mode=similarity_mode,
            threshold=_checked_threshold(score_threshold),
            names=_NAMES,
            embedder=embedder,
            max_embed_tokens=self.max_embed_tokens,
        )

    name = property(lambda self: self.metric.name)

    @property
    def similarity_mode(self) -> str:
        """``"cosine"``, ``"dot_product"`` or ``"euclidean"``; may be set, as in novastack."""
        return self.metric.config.similarity_mode

    @similarity_mode.setter
    def similarity_mode(self, value: SimilarityModeName | str) -> None:
        core = self.metric
        self.metric = self._core(value, core.threshold, core.embedder)

    @property
    def score_threshold(self) -> float:
        """The pass mark given, else novastack's default (0.8), which is then not applied.
        Set it at any time, as in novastack (a number in [0, 1]; None: no pass mark):
        ``passing`` of the next ``evaluate`` is ``score >= score_threshold``."""
        given = self.metric.threshold
        return NOVASTACK_THRESHOLD if given is None else given

    @score_threshold.setter
    def score_threshold(self, value: float | None) -> None:
        core = self.metric
        self.metric = self._core(core.config.similarity_mode, value, core.embedder)

    @property
    def embed_model(self) -> Any:
        """The embedding model given (None: the bundled one); may be set, as in novastack."""
        return self._embed_model

    @embed_model.setter
    def embed_model(self, value: Any) -> None:
        core = self.metric
        embedder = self._embedder(value)
        self.metric = self._core(core.config.similarity_mode, core.threshold, embedder)
        self._embed_model = value

    def __repr__(self) -> str:
        embedder = self.metric.embedder.name if self.metric.embedder else "bundled MiniLM"
        return (
            f"ContextSimilarityEvaluator(embed_model={embedder!r}, "
            f"similarity_mode={self.similarity_mode!r}, "
            f"score_threshold={self.metric.threshold})"
        )

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
        """Async :meth:`evaluate`. Missing arguments raise one ``ValueError`` naming them."""
        del kwargs  # accepted and ignored, as in novastack
        item = (await score_one(self.metric, _case(query, generated_text, contexts))).item
        if item.failed:
            _raise_failure(item)
        return _novastack(item)

    def evaluate_batch(self, cases: Iterable[Any]) -> list[dict[str, Any]]:
        """Score many cases (dicts, objects with ``query``, ``generated_text``, ``contexts``,
        or ``ModelTestCase``); the embedder gathers their texts into few calls."""
        return run_sync(self.aevaluate_batch(cases))

    async def aevaluate_batch(self, cases: Iterable[Any]) -> list[dict[str, Any]]:
        """Async :meth:`evaluate_batch`. Every case is validated before anything is
        embedded; invalid ones raise one ValueError naming them (up to five)."""
        checked: list[ModelTestCase] = []
        errors: list[str] = []
        for i, raw in enumerate(cases):
            try:
                checked.append(
                    _case(
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
        if not checked:
            return []
        run = await aevaluate(checked, [self.metric], progress=False, keep_results=True)
        for i, item in enumerate(run.results):
            if item.failed:
                _raise_failure(item, f"cases[{i}]: ")
        return [_novastack(item) for item in run.results]
