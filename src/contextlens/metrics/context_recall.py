"""Context recall: how much of the reference answer do the retrieved chunks hold?

``score = claims of expected_output the chunks support / its claims``, judged against
``retrieval_context`` (:mod:`contextlens.metrics.claims`: one judge call per case, or offline
the support model of the ``Context`` metric, per claim). The reason names the claims the
chunks miss, each with the chunk closest to it. Ragas's ``LLMContextRecall`` and DeepEval's
``ContextualRecallMetric`` measure the same share, DeepEval in two calls per case.
"""

from __future__ import annotations

from typing import Any

from contextlens.errors import InputError
from contextlens.metrics.base import (
    DEFAULT_MAX_EMBED_TOKENS,
    DEFAULT_MAX_PROMPT_TOKENS,
    Services,
    size_limit,
)
from contextlens.metrics.chunks import ChunkOptions
from contextlens.metrics.claims import ClaimCheck, ClaimsDetails
from contextlens.metrics.faithfulness import case_chunks
from contextlens.metrics.registry import metric
from contextlens.offline.routes import SupportModel, resolve_support_model
from contextlens.schemas import MetricResult, ModelTestCase

__all__ = ["ContextRecallDetails", "ContextRecallMetric"]


class ContextRecallDetails(ClaimsDetails):
    """A context-recall result's details: each claim of the reference answer with its
    verdict and closest chunk (:class:`~contextlens.metrics.claims.ClaimVerdict`)."""


@metric(
    "context-recall",
    aliases=("ContextualRecallMetric", "ContextRecall", "LLMContextRecall"),
    reads=("input", "expected_output", "retrieval_context"),
    requires=("expected_output", "retrieval_context"),
)
class ContextRecallMetric:
    """Share of the reference answer's claims that the retrieved chunks support.

    Args:
        threshold: the pass mark (default 0.5).
        max_prompt_tokens: the prompt budget of the judge call (characters / 4); a case over
            it fails with its size and is not sent.
        max_embed_tokens: the longest text embedded (characters / 4): offline, the
            reference and each chunk; with a judge, each chunk when near-duplicates are
            looked for.
        duplicate_threshold: report chunks whose cosine is at least this as near-duplicates
            (``details.duplicates``); None (default): not looked for.
        merge_duplicates: score each group of near-duplicates as one chunk
            (:mod:`contextlens.metrics.chunks`).
        support_model: offline, the support model of English texts: ``"features"`` or
            ``"cross-encoder"`` (None: ``$CONTEXTLENS_SUPPORT_MODEL``, else the default of
            :mod:`contextlens.offline.routes`).
        judge: this metric's own judge (None: the run's).
        embedder: this metric's own embedder (None: the run's).
        label: tells this instance apart from others of the same metric in a run.
    """

    case_type = ModelTestCase
    details_type = ContextRecallDetails

    def __init__(
        self,
        threshold: float = 0.5,
        *,
        max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS,
        max_embed_tokens: int = DEFAULT_MAX_EMBED_TOKENS,
        duplicate_threshold: float | None = None,
        merge_duplicates: bool = False,
        support_model: SupportModel | None = None,
        judge: Any = None,
        embedder: Any = None,
        label: str | None = None,
    ) -> None:
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold}")
        self.threshold = float(threshold)
        self.check = ClaimCheck(
            system_prompt="context_recall_system.md",
            user_prompt="context_recall_user.md",
            text_tag="expected_output",
            text_name="the reference answer",
            text_field="expected_output",
            max_prompt_tokens=size_limit("max_prompt_tokens", max_prompt_tokens),
            max_embed_tokens=size_limit("max_embed_tokens", max_embed_tokens),
            chunks=ChunkOptions(duplicate_threshold, merge_duplicates),
            support_model=resolve_support_model(support_model),
            details=ContextRecallDetails,
        )
        self.judge = judge
        self.embedder = embedder
        self.label = label

    def __repr__(self) -> str:
        return f"ContextRecallMetric(threshold={self.threshold}, label={self.label!r})"

    async def score(self, case: ModelTestCase, services: Services) -> MetricResult:
        """Score one test case; changes nothing on ``self``."""
        reference = (case.expected_output or "").strip()
        if not reference:
            raise InputError("context recall needs the reference answer", field="expected_output")
        chunks = case_chunks(case, self.name)
        result = await self.check.score(self.name, case.input, reference, chunks, services)
        success = None if result.score is None else result.score >= self.threshold
        return result.model_copy(update={"success": success})
