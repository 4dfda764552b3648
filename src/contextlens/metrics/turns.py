"""The RAG metrics per turn of a conversation: each assistant turn of a session scored
with its own retrieved chunks by a single-case metric, the session scored as their mean.

A :class:`TurnMetric` wraps one single-case metric (faithfulness, contextual relevancy,
ranked context precision, context recall): each turn of the session becomes one
:class:`~contextlens.schemas.ModelTestCase` (the turn's ``query`` as ``input``, its
``assistant`` reply as ``actual_output``, its ``ground_truth_assistant`` as
``expected_output``, its ``retrieval_context``) scored by that metric's own ``score``, so
its prompt, its reply parsing, its offline scorer and its failure handling are the ones the
single-case metric uses: one judge call per turn within the prompt budget.

With a judge, the earlier turns of the conversation (the last ``history_turns``) are shown
in the input block ahead of the turn's question, so "it" and "that one" resolve. Turn
faithfulness also gives the judge what the assistant said in those earlier turns as one
extra chunk after the turn's own: a claim that repeats an earlier turn is a reference back,
not a hallucination (its verdict names the earlier turn and points at no retrieved chunk).
Offline, the question is the turn's own (earlier turns would only dilute its embedding),
and turn faithfulness reads the earlier replies as that extra evidence too.

A turn without ``retrieval_context`` (None, or no chunk that is not blank: a flat row's empty
cell; or without a field the wrapped metric needs, such as the reference reply of context
recall) is not applicable: counted in
``details.n_not_applicable``, shown with its reason, and left out of the mean, never a 0.
The session's score is the weighted mean of its scored turns (the turns' ``weight``), with
an interval under :class:`~contextlens.stats.BayesianMode`; its reason names the worst turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, Field, field_validator

from contextlens.fields import unmet_requirement
from contextlens.judges.base import Judge
from contextlens.metrics.base import ReaderDetails, Services
from contextlens.metrics.claims import ClaimConfig, ClaimMetric, ClaimsDetails
from contextlens.metrics.config import MetricConfig
from contextlens.metrics.context_precision_ranked import (
    RankedPrecisionConfig,
    RankedPrecisionDetails,
    RankedPrecisionMetric,
)
from contextlens.metrics.context_recall import ContextRecallDetails, ContextRecallMetric
from contextlens.metrics.contextual_relevancy import (
    ContextualRelevancyScorer,
    RelevancyConfig,
    RelevancyDetails,
)
from contextlens.metrics.faithfulness import FaithfulnessDetails, FaithfulnessMetric
from contextlens.metrics.metric import Metric, Score, ScoreFailed
from contextlens.metrics.registry import metric
from contextlens.schemas import Batch, Dataset, MetricDetails, MetricResult, ModelTestCase
from contextlens.stats import BayesianMode, StatisticalMode, checked_mode, resolve_weights
from contextlens.stats.modes import weighted_estimate

__all__ = [
    "NO_CHUNKS",
    "NO_EVIDENCE",
    "TurnContextPrecisionRanked",
    "TurnContextRecall",
    "TurnContextualRelevancy",
    "TurnDetails",
    "TurnFaithfulness",
    "TurnMetric",
    "TurnSettings",
    "TurnVerdict",
    "turn_case",
]

D = TypeVar("D", bound=MetricDetails)

#: Why a turn without retrieved chunks is not scored.
NO_CHUNKS = "not applicable: the turn has no retrieval_context"
#: Why a turn without retrieved chunks or tool outputs is not scored by a claim metric.
NO_EVIDENCE = "not applicable: the turn has no retrieval_context and no tool output"

#: The turn field each field of the single-case metrics is read from.
_TURN_FIELD = {
    "input": "query",
    "actual_output": "assistant",
    "expected_output": "ground_truth_assistant",
    "retrieval_context": "retrieval_context",
    "retrieved_ids": "retrieved_ids",
}

#: The heading of the extra chunk that holds what the assistant said in earlier turns.
EARLIER = "What the assistant said in earlier turns of this conversation:"


class TurnVerdict(BaseModel, Generic[D]):
    """One turn's verdict: its score and reason, an error, or why it is not applicable,
    its weight in the session and the wrapped metric's details (its claims or chunks)."""

    qa_id: str
    score: float | None
    reason: str | None = None
    error: str | None = None
    not_applicable: str | None = None
    weight: float | None = None
    details: D | None = None


class TurnDetails(ReaderDetails, Generic[D]):
    """A session's details: each turn's verdict and the interval of their weighted mean;
    ``n_not_applicable`` counts the turns left out as not applicable."""

    n_turns: int = 0
    n_failed: int = 0
    n_not_applicable: int = 0
    ci_low: float | None = None
    ci_high: float | None = None
    turns: list[TurnVerdict[D]] = Field(default_factory=list)


class TurnSettings(MetricConfig):
    """What a turn metric adds to the wrapped metric's settings.

    ``statistical_mode``: the session's interval (None: ``BayesianMode()``;
    ``FrequentistMode()`` gives none). ``history_turns``: how many earlier turns the judge
    is shown (0: none).
    """

    statistical_mode: StatisticalMode = Field(default_factory=BayesianMode)
    history_turns: int = Field(default=6, ge=0, le=100)

    @field_validator("statistical_mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        return BayesianMode() if value is None else checked_mode(value)


class TurnClaimConfig(ClaimConfig, TurnSettings):
    """Turn faithfulness's and turn context recall's settings: those of
    :class:`~contextlens.metrics.claims.ClaimConfig` and :class:`TurnSettings`."""


class TurnRelevancyConfig(RelevancyConfig, TurnSettings):
    """Turn contextual relevancy's settings: those of
    :class:`~contextlens.metrics.contextual_relevancy.RelevancyConfig` and
    :class:`TurnSettings`."""


class TurnPrecisionConfig(RankedPrecisionConfig, TurnSettings):
    """Turn ranked context precision's settings: those of
    :class:`~contextlens.metrics.context_precision_ranked.RankedPrecisionConfig` and
    :class:`TurnSettings`."""


def turn_case(
    session: Dataset, index: int, history_turns: int, *, earlier_as_chunk: bool = False
) -> ModelTestCase:
    """Turn ``index`` of ``session`` as a single case: with ``history_turns`` earlier turns
    written ahead of its question and, with ``earlier_as_chunk``, what the assistant said in
    them as one chunk after the turn's own."""
    batch = session.conversation[index]
    earlier = session.conversation[max(0, index - history_turns) : index] if history_turns else []
    question = batch.query
    chunks = batch.retrieval_context
    if chunks is None and batch.tools_called:  # the tool outputs are its evidence
        chunks = []
    if earlier:
        lines = ["Earlier turns of this conversation:"]
        for b in earlier:
            if b.query.strip():
                lines.append(f"user ({b.qa_id}): {b.query}")
            lines.append(f"assistant ({b.qa_id}): {b.assistant}")
        question = "\n".join([*lines, "", "The user's message now:", batch.query])
        if earlier_as_chunk and chunks is not None:
            said = "\n".join(f"({b.qa_id}) {b.assistant}" for b in earlier)
            chunks = [*chunks, f"{EARLIER}\n{said}"]
    return ModelTestCase(
        input=question,
        actual_output=batch.assistant,
        expected_output=batch.ground_truth_assistant or None,
        retrieval_context=chunks,
        retrieved_ids=batch.retrieved_ids,
        tools_called=batch.tools_called,
    )


class TurnMetric(Metric[Dataset], Generic[D]):
    """A single-case metric scored on every turn of a session, aggregated per session.

    Subclasses name the metric they wrap (``wraps``) and whether the earlier replies are
    evidence (``earlier_as_chunk``); the prompts, offline models and settings are the
    wrapped metric's, plus :class:`TurnSettings`.
    """

    case_type = Dataset
    #: Scores each turn's own chunks: a run of a sessions file without ``-m`` leaves it out.
    per_turn: ClassVar[bool] = True
    wraps: ClassVar[type[Metric[ModelTestCase]]]
    earlier_as_chunk: ClassVar[bool] = False
    #: Whether the turn's tool outputs are evidence beside its chunks (the claim metrics).
    tools_are_evidence: ClassVar[bool] = False
    config: TurnSettings

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "wraps" in cls.__dict__:
            cls.prompts = cls.wraps.prompts
            cls.offline_models = cls.wraps.offline_models
            cls.tools_are_evidence = issubclass(cls.wraps, ClaimMetric)

    def inner(self) -> Metric[ModelTestCase]:
        """The wrapped single-case metric, set as this one is (its own settings only)."""
        kind = self.wraps.config_type
        values = {name: getattr(self.config, name) for name in kind.model_fields}
        return self.wraps(kind.model_validate(values))

    async def judged(self, case: Dataset, judge: Judge, services: Services) -> Score:
        """Every turn of the session ``case`` judged (one call each), then aggregated."""
        return await self._turns(case, services, judged=True)

    async def offline(self, case: Dataset, services: Services) -> Score:
        """Every turn of the session ``case`` scored offline, then aggregated."""
        return await self._turns(case, services, judged=False)

    async def _turns(self, session: Dataset, services: Services, *, judged: bool) -> Score:
        if not session.conversation:
            raise ScoreFailed("the session has no turns: nothing to score")
        weights = resolve_weights(
            [b.weight for b in session.conversation], label=session.session_id
        )
        inner = self.inner()
        found = await asyncio.gather(
            *(
                self._turn(session, i, inner, services, judged)
                for i in range(len(session.conversation))
            )
        )
        turns = [
            t.model_copy(update={"weight": float(w)}) for t, w in zip(found, weights, strict=True)
        ]
        return self._aggregate(session, turns)

    async def _turn(
        self,
        session: Dataset,
        index: int,
        inner: Metric[ModelTestCase],
        services: Services,
        judged: bool,
    ) -> TurnVerdict[Any]:
        batch = session.conversation[index]
        tools = self.tools_are_evidence and any(
            (call.output or "").strip() for call in batch.tools_called or []
        )
        if not tools and not any(c.strip() for c in batch.retrieval_context or []):
            why = NO_EVIDENCE if self.tools_are_evidence else NO_CHUNKS
            return TurnVerdict(qa_id=batch.qa_id, score=None, not_applicable=why)
        case = turn_case(
            session,
            index,
            self.config.history_turns,
            earlier_as_chunk=self.earlier_as_chunk,
        )
        if not judged:  # offline reads the turn's own question
            case = case.model_copy(update={"input": batch.query})
        unmet = unmet_requirement(case, inner.requires, inner.name)
        if unmet is not None:
            field = _TURN_FIELD.get(unmet[0], unmet[0])
            why = f"not applicable: the turn has no {field}"
            return TurnVerdict(qa_id=batch.qa_id, score=None, not_applicable=why)
        result = await inner.score(case, services)
        return self._verdict(batch, result, len(batch.retrieval_context or []))

    def _verdict(self, batch: Batch, result: MetricResult, n_chunks: int) -> TurnVerdict[Any]:
        details = result.details
        if self.earlier_as_chunk and isinstance(details, ClaimsDetails):
            details = _earlier_claims(details, n_chunks)
        return TurnVerdict(
            qa_id=batch.qa_id,
            score=result.score,
            reason=result.reason,
            error=result.error,
            not_applicable=result.not_applicable,
            details=details,
        )

    def _aggregate(self, session: Dataset, turns: Sequence[TurnVerdict[Any]]) -> Score:
        skipped = [t for t in turns if t.error is None and t.not_applicable is not None]
        scored = [t for t in turns if t.error is None and t.score is not None]
        failed = [t for t in turns if t not in skipped and t not in scored]
        estimate = weighted_estimate(
            self.config.statistical_mode,
            [t.score or 0.0 for t in scored],
            [t.weight or 0.0 for t in scored],
            key=session.session_id,
        )
        details = self.details_type(
            n_turns=len(turns),
            n_failed=len(failed),
            n_not_applicable=len(skipped),
            ci_low=estimate.ci_low,
            ci_high=estimate.ci_high,
            turns=list(turns),
            raw_reply=next((_raw(t) for t in failed if _raw(t)), None),
        )
        counts = ""
        if failed:
            counts += (
                f" ({len(failed)} of {len(turns)} turns failed, first {failed[0].qa_id}: "
                f"{failed[0].error})"
            )
        if skipped:
            counts += (
                f" ({len(skipped)} of {len(turns)} turns not applicable, first "
                f"{skipped[0].qa_id}: {skipped[0].not_applicable})"
            )
        if not scored and not failed:
            whys = list(dict.fromkeys(t.not_applicable for t in skipped))
            why = whys[0] if len(whys) == 1 else "not applicable: no turn can be scored"
            return Score.not_applying(why or NO_CHUNKS, f"no turn scored{counts}", details)
        if not scored:
            raise ScoreFailed(
                f"all {len(failed)} scorable turns failed; first: {failed[0].error}{counts}",
                details,
            )
        worst = min(scored, key=lambda t: t.score or 0.0)
        reason = f"lowest turn {worst.qa_id} ({worst.score:.2f}): {worst.reason}{counts}"
        return Score(estimate.value, reason, details)


def _raw(turn: TurnVerdict[Any]) -> str | None:
    return turn.details.raw_reply if turn.details is not None else None


def _earlier_claims(details: ClaimsDetails, n_chunks: int) -> ClaimsDetails:
    """The claims whose closest chunk is the extra one of earlier replies, pointing at no
    retrieved chunk and saying they refer back."""
    claims = [
        c.model_copy(update={"chunk": None, "reason": f"{c.reason} (said in an earlier turn)"})
        if c.chunk == n_chunks
        else c
        for c in details.claims
    ]
    return details.model_copy(update={"claims": claims})


_READS = ("session_id", "conversation", "query", "assistant", "retrieval_context", "weight")
_CLAIM_READS = (*_READS, "tools_called")


class TurnFaithfulnessDetails(TurnDetails[FaithfulnessDetails]):
    """Turn faithfulness's details: each turn's claims and their verdicts."""


class TurnRelevancyDetails(TurnDetails[RelevancyDetails]):
    """Turn contextual relevancy's details: each turn's statements and chunks."""


class TurnPrecisionDetails(TurnDetails[RankedPrecisionDetails]):
    """Turn ranked context precision's details: each turn's chunk verdicts."""


class TurnRecallDetails(TurnDetails[ContextRecallDetails]):
    """Turn context recall's details: each turn's reference claims and their verdicts."""


@metric(
    "turn-faithfulness",
    aliases=("TurnFaithfulness", "TurnFaithfulnessMetric"),
    reads=_CLAIM_READS,
    requires=("session_id", "conversation"),
)
class TurnFaithfulness(TurnMetric[FaithfulnessDetails]):
    """Faithfulness of every assistant turn to its own chunks (earlier replies count as
    what the conversation said before).

    Settings: :class:`TurnClaimConfig`.
    """

    wraps = FaithfulnessMetric
    earlier_as_chunk = True
    config_type = TurnClaimConfig
    details_type = TurnFaithfulnessDetails


@metric(
    "turn-contextual-relevancy",
    aliases=("TurnContextualRelevancy", "TurnContextualRelevancyMetric"),
    reads=_READS,
    requires=("session_id", "conversation"),
)
class TurnContextualRelevancy(TurnMetric[RelevancyDetails]):
    """Contextual relevancy of every turn's chunks to its question (read with the
    conversation so far).

    Settings: :class:`TurnRelevancyConfig`.
    """

    wraps = ContextualRelevancyScorer
    config_type = TurnRelevancyConfig
    details_type = TurnRelevancyDetails


@metric(
    "turn-context-precision-ranked",
    aliases=("TurnContextPrecisionRanked", "TurnContextualPrecisionMetric"),
    reads=(*_READS, "ground_truth_assistant"),
    requires=("session_id", "conversation"),
)
class TurnContextPrecisionRanked(TurnMetric[RankedPrecisionDetails]):
    """Ranked precision of every turn's chunks for its reference reply (its question when
    it has none).

    Settings: :class:`TurnPrecisionConfig`.
    """

    wraps = RankedPrecisionMetric
    config_type = TurnPrecisionConfig
    details_type = TurnPrecisionDetails


@metric(
    "turn-context-recall",
    aliases=("TurnContextRecall", "TurnContextualRecallMetric"),
    reads=(*_CLAIM_READS, "ground_truth_assistant"),
    requires=("session_id", "conversation"),
)
class TurnContextRecall(TurnMetric[ContextRecallDetails]):
    """Share of every turn's reference reply that its chunks hold.

    Settings: :class:`TurnClaimConfig`.
    """

    wraps = ContextRecallMetric
    config_type = TurnClaimConfig
    details_type = TurnRecallDetails
