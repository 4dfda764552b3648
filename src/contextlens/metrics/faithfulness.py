"""Faithfulness: is each claim of the answer supported by the retrieved chunks?

``score = supported claims / claims of actual_output``, judged against ``retrieval_context``
(:mod:`contextlens.metrics.claims`: one judge call per case, or offline the support model of
the ``Context`` metric, per claim). The reason names the unsupported claims, each with the
chunk closest to it. Ragas's ``Faithfulness`` and DeepEval's ``FaithfulnessMetric`` measure
the same share; here the claims and their verdicts come from one call, not two or three.
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
from contextlens.metrics.registry import metric
from contextlens.offline.routes import SupportModel, resolve_support_model
from contextlens.schemas import MetricResult, ModelTestCase

__all__ = ["FaithfulnessDetails", "FaithfulnessMetric", "case_chunks"]


class FaithfulnessDetails(ClaimsDetails):
    """A faithfulness result's details: each claim of the answer with its verdict and
    closest chunk (:class:`~contextlens.metrics.claims.ClaimVerdict`)."""


def case_chunks(case: ModelTestCase, metric: str) -> list[tuple[int, str]]:
    """The non-blank retrieved chunks of ``case`` with their index; InputError without any
    ``retrieval_context``."""
    if case.retrieval_context is None:
        raise InputError(f"{metric} needs the retrieved chunks", field="retrieval_context")
    return [(i, t) for i, t in enumerate(case.retrieval_context) if t and t.strip()]


@metric(
    "faithfulness",
    aliases=("FaithfulnessMetric", "Faithfulness", "groundedness"),
    reads=("input", "actual_output", "retrieval_context"),
    requires=("actual_output", "retrieval_context"),
)
class FaithfulnessMetric:
    """Share of the answer's claims that the retrieved chunks support.

    Args:
        threshold: the pass mark (default 0.5).
        max_prompt_tokens: the prompt budget of the judge call (characters / 4); a case over
            it fails with its size and is not sent.
        max_embed_tokens: the longest text embedded (characters / 4): offline, the answer
            and each chunk; with a judge, each chunk when near-duplicates are looked for.
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
    details_type = FaithfulnessDetails

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
            system_prompt="faithfulness_system.md",
            user_prompt="faithfulness_user.md",
            text_tag="output",
            text_name="the answer",
            text_field="actual_output",
            max_prompt_tokens=size_limit("max_prompt_tokens", max_prompt_tokens),
            max_embed_tokens=size_limit("max_embed_tokens", max_embed_tokens),
            chunks=ChunkOptions(duplicate_threshold, merge_duplicates),
            support_model=resolve_support_model(support_model),
            details=FaithfulnessDetails,
        )
        self.judge = judge
        self.embedder = embedder
        self.label = label

    def __repr__(self) -> str:
        return f"FaithfulnessMetric(threshold={self.threshold}, label={self.label!r})"

    async def score(self, case: ModelTestCase, services: Services) -> MetricResult:
        """Score one test case; changes nothing on ``self``."""
        answer = (case.actual_output or "").strip()
        if not answer:
            raise InputError("faithfulness scores the answer under test", field="actual_output")
        chunks = case_chunks(case, self.name)
        result = await self.check.score(self.name, case.input, answer, chunks, services)
        success = None if result.score is None else result.score >= self.threshold
        return result.model_copy(update={"success": success})
