"""The metrics that check one text's claims against the retrieved chunks (faithfulness: the
answer; context recall: the reference answer): one class, :class:`ClaimMetric`, that each
names its prompts, its text and its details on.
"""

from __future__ import annotations

from typing import Any, ClassVar

from contextlens.errors import InputError
from contextlens.metrics.base import (
    DEFAULT_MAX_EMBED_TOKENS,
    DEFAULT_MAX_PROMPT_TOKENS,
    Services,
    size_limit,
)
from contextlens.metrics.chunks import ChunkOptions
from contextlens.metrics.claims import ClaimCheck, ClaimsDetails
from contextlens.offline.routes import SupportModel, resolve_support_model
from contextlens.schemas import MetricResult, ModelTestCase

__all__ = ["ClaimMetric", "case_chunks"]


def case_chunks(case: ModelTestCase, metric: str) -> list[tuple[int, str]]:
    """The non-blank retrieved chunks of ``case`` with their index; InputError without any
    ``retrieval_context``."""
    if case.retrieval_context is None:
        raise InputError(f"{metric} needs the retrieved chunks", field="retrieval_context")
    return [(i, t) for i, t in enumerate(case.retrieval_context) if t and t.strip()]


class ClaimMetric:
    """Share of one text's claims that the retrieved chunks support.

    Args:
        threshold: the pass mark (default 0.5).
        max_prompt_tokens: the prompt budget of the judge call (characters / 4); a case over
            it fails with its size and is not sent.
        max_embed_tokens: the longest text embedded (characters / 4): offline, the text and
            each chunk; with a judge, each chunk when near-duplicates are looked for.
        duplicate_threshold: report chunks whose cosine is at least this as near-duplicates
            (``details.duplicates``); None (default): not looked for.
        merge_duplicates: score each group of near-duplicates as one chunk
            (:mod:`contextlens.metrics.chunks`).
        support_model: offline, the support model of English texts: ``"features"`` (the
            default) or ``"reader"`` (None: ``$CONTEXTLENS_SUPPORT_MODEL``, else the default of
            :mod:`contextlens.offline.routes`).
        judge: this metric's own judge (None: the run's).
        embedder: this metric's own embedder (None: the run's).
        label: tells this instance apart from others of the same metric in a run.
    """

    name: ClassVar[str]
    case_type: ClassVar[type[ModelTestCase]] = ModelTestCase
    details_type: ClassVar[type[ClaimsDetails]] = ClaimsDetails
    prompt: ClassVar[str]  # the prompt files are ``{prompt}_system.md`` and ``{prompt}_user.md``
    text_field: ClassVar[str]  # the case field whose claims are checked
    text_tag: ClassVar[str]  # the data block of the text in the prompt
    text_name: ClassVar[str]  # the text in reasons: "the answer"
    missing: ClassVar[str]  # the error of a case without the text

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
            system_prompt=f"{self.prompt}_system.md",
            user_prompt=f"{self.prompt}_user.md",
            text_tag=self.text_tag,
            text_name=self.text_name,
            text_field=self.text_field,
            max_prompt_tokens=size_limit("max_prompt_tokens", max_prompt_tokens),
            max_embed_tokens=size_limit("max_embed_tokens", max_embed_tokens),
            chunks=ChunkOptions(duplicate_threshold, merge_duplicates),
            support_model=resolve_support_model(support_model),
            details=self.details_type,
        )
        self.judge = judge
        self.embedder = embedder
        self.label = label

    def __repr__(self) -> str:
        return f"{type(self).__name__}(threshold={self.threshold}, label={self.label!r})"

    async def score(self, case: ModelTestCase, services: Services) -> MetricResult:
        """Score one test case; changes nothing on ``self``."""
        text = (getattr(case, self.text_field) or "").strip()
        if not text:
            raise InputError(self.missing, field=self.text_field)
        chunks = case_chunks(case, self.name)
        result = await self.check.score(self.name, case.input, text, chunks, services)
        success = None if result.score is None else result.score >= self.threshold
        return result.model_copy(update={"success": success})
