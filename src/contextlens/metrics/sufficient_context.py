"""Sufficient context: could a careful reader answer the question from the retrieved context
alone? (Joren et al., "Sufficient Context", ICLR 2025.) No reference answer is needed.

Each case's details say whether the context is sufficient and whether the answer
(``actual_output``, when the case has one) abstained
(:func:`contextlens.offline.abstention.abstention`), so a run falls into the 2x2 of
sufficient / insufficient context by answered / abstained (``details.cell``).
:func:`crosstab` counts the cells of a run's results; the answers given on insufficient
context are the ones to look at (the paper finds models answer, and hallucinate, there
rather than abstain).

With a judge, ONE call per case: the question and the numbered chunks in data blocks, and a
``"yes"``/``"no"`` verdict with a reason; the score is 1 for sufficient, 0 for not.

Offline, an approximation that says when it cannot tell. Its signal is the weaker of two:
the probability that the best chunk bears on the question (the bundled relevance model,
:mod:`contextlens.offline.relevance`) and the share of the question's content terms that the
chunks hold, each weighted by its rarity (the ``coverage`` of
:func:`contextlens.offline.query.lexical_features`). That tells chunks off the question from
chunks on it, not whether chunks on it hold the answer: on lists of TREC Deep Learning
passages (``benchmarks/sufficiency_bands.py``) the lists it would call sufficient held an
answer about as often as those it would not, at every cut. So offline, below
:data:`INSUFFICIENT` the context counts as insufficient, and from there the item is ``"not
applicable: needs a judge"`` (its signal kept in ``details.probability``): it is never
called sufficient without a judge.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, Field

from contextlens.backend import Message
from contextlens.errors import InputError
from contextlens.judges.base import Judge, Reply
from contextlens.judges.schema import Verdict, text_field
from contextlens.metrics.base import (
    DataBlocks,
    OverBudget,
    ReaderDetails,
    Services,
    build_messages,
    prompt_over_budget,
    too_long,
)
from contextlens.metrics.calls import chunk_blocks, token_usage
from contextlens.metrics.config import RELEVANCE_FILES, JudgedConfig
from contextlens.metrics.metric import Metric, Score
from contextlens.metrics.registry import metric
from contextlens.offline.abstention import abstention
from contextlens.offline.language import unread_texts
from contextlens.offline.query import lexical_features, profile, term_set
from contextlens.offline.relevance import RelevanceItem
from contextlens.offline.routes import relevance_route, score_relevance_routed
from contextlens.schemas import ItemBreakdown, MetricResult, ModelTestCase

__all__ = [
    "CELLS",
    "INSUFFICIENT",
    "SufficiencyDetails",
    "SufficiencyTable",
    "SufficientContextMetric",
    "SufficientVerdict",
    "crosstab",
]

Cell = Literal[
    "sufficient, answered",
    "sufficient, abstained",
    "insufficient, answered",
    "insufficient, abstained",
]
#: The four cells of the cross of context by answer.
CELLS: tuple[Cell, ...] = (
    "sufficient, answered",
    "sufficient, abstained",
    "insufficient, answered",
    "insufficient, abstained",
)
#: Offline, the score below which the context counts as insufficient (from it, offline
#: cannot tell: "needs a judge").
INSUFFICIENT = 0.4


class SufficiencyDetails(ReaderDetails):
    """Whether the context is sufficient (None: not told), the score it was read from
    (offline: the weaker of ``relevance`` and ``coverage``), the question's terms no chunk
    holds, whether the answer was given or abstained (None: the case has no answer), and
    the cell of the 2x2."""

    method: Literal["judge", "offline"] | None = None
    sufficient: bool | None = None
    probability: float | None = None
    relevance: float | None = None
    coverage: float | None = None
    missing_terms: list[str] = Field(default_factory=list)
    answered: bool | None = None
    abstention: str | None = None
    cell: Cell | None = None
    latency: float | None = None

    def breakdown(self) -> ItemBreakdown | None:
        """Its cell of the 2x2, and whether an answer was given on insufficient context
        (counted over the answered items)."""
        on_insufficient = None if not self.answered else float(self.sufficient is False)
        return ItemBreakdown(
            cell=self.cell, shares={"answers given on insufficient context": on_insufficient}
        )


class SufficientVerdict(Reply):
    """The judge's reply: why, then whether the chunks alone answer the question."""

    reason: str = text_field("what the chunks give or lack for the answer, in a sentence", 300)
    sufficient: Verdict


class SufficiencyTable(BaseModel):
    """The cross of a run's items: each cell's count, the items whose context was not told
    (``undetermined``: offline between the bands, or failed) and those without an answer."""

    cells: dict[str, int] = Field(default_factory=lambda: {str(c): 0 for c in CELLS})
    undetermined: int = 0
    no_answer: int = 0

    @property
    def answered_on_insufficient(self) -> int:
        """Answers given although the context was insufficient."""
        return self.cells["insufficient, answered"]

    @property
    def answered_on_insufficient_share(self) -> float | None:
        """The share of the insufficient-context items that were answered (None: none was
        insufficient)."""
        insufficient = self.answered_on_insufficient + self.cells["insufficient, abstained"]
        return self.answered_on_insufficient / insufficient if insufficient else None


def crosstab(results: Iterable[Any]) -> SufficiencyTable:
    """The 2x2 of sufficient-context results (:class:`~contextlens.schemas.MetricResult` or
    the run's items, whose ``details`` are :class:`SufficiencyDetails`)."""
    table = SufficiencyTable()
    for result in results:
        details = getattr(result, "details", None)
        if not isinstance(details, SufficiencyDetails):
            continue
        if details.answered is None:
            table.no_answer += 1
        elif details.cell is None or (
            isinstance(result, MetricResult) and result.not_applicable is not None
        ):
            table.undetermined += 1
        else:
            table.cells[details.cell] += 1
    return table


def _cell(sufficient: bool | None, answered: bool | None) -> Cell | None:
    if sufficient is None or answered is None:
        return None
    context = "sufficient" if sufficient else "insufficient"
    answer = "answered" if answered else "abstained"
    return f"{context}, {answer}"  # type: ignore[return-value]


@metric(
    "sufficient-context",
    aliases=("SufficientContext", "context-sufficiency"),
    reads=("input", "actual_output", "retrieval_context"),
    requires=("input", "retrieval_context"),
)
class SufficientContextMetric(Metric[ModelTestCase]):
    """Whether the retrieved chunks alone let a careful reader answer the question, crossed
    with whether the answer abstained.

    Settings: :class:`~contextlens.metrics.config.JudgedConfig` (threshold, size limits,
    its own judge and embedder).
    """

    case_type = ModelTestCase
    config_type = JudgedConfig
    details_type = SufficiencyDetails
    prompts = ("sufficient_context_system.md", "sufficient_context_user.md")
    offline_models = RELEVANCE_FILES
    config: JudgedConfig

    def messages(self, question: str, chunks: Sequence[str]) -> list[Message]:
        """The judge prompt: instructions, then the question and the numbered chunks."""
        block = DataBlocks(question, *chunks)
        return build_messages(
            "sufficient_context_system.md",
            "sufficient_context_user.md",
            SufficientVerdict,
            input=block("input", question),
            chunks=chunk_blocks(list(chunks), block),
        )

    async def judged(self, case: ModelTestCase, judge: Judge, services: Services) -> Score:
        question, chunks, answered, kind = self._read(case)
        messages = self.messages(question, chunks)
        too_big = prompt_over_budget(messages, self.config.max_prompt_tokens)
        if too_big is not None:
            raise OverBudget(too_big)
        judgement = await judge.judge(messages, SufficientVerdict)
        sufficient = judgement.output.sufficient == "yes"
        details = SufficiencyDetails(
            method="judge",
            sufficient=sufficient,
            probability=1.0 if sufficient else 0.0,
            answered=answered,
            abstention=kind,
            cell=_cell(sufficient, answered),
            usage=token_usage(judgement.usage),
            attempts=judgement.attempts,
            latency=judgement.latency,
        )
        reason = f"{_said(sufficient, answered)} {judgement.output.reason.strip()}"
        return Score(1.0 if sufficient else 0.0, reason, details)

    async def offline(self, case: ModelTestCase, services: Services) -> Score:
        question, chunks, answered, kind = self._read(case)
        named = [(f"retrieval_context[{i}]", t) for i, t in enumerate(chunks)]
        too_big = too_long([("the input", question), *named], self.config.max_embed_tokens)
        if too_big is not None:
            raise OverBudget(too_big, "max_embed_tokens")
        unread = unread_texts([("the input", question), *named])
        route = relevance_route(not unread, self.name)
        base = SufficiencyDetails(method="offline", answered=answered, abstention=kind)
        base = base.model_copy(update=route.details)
        if unread and route.reader != "relevance-multilingual":
            return Score.not_applying(
                unread.needs_judge(), f"Not scored offline: {route.note}.", base
            )
        terms = profile(question).terms
        if not terms:
            return Score.not_applying(
                "not applicable: needs a judge",
                "The question has no content word to look for in the chunks.",
                base,
            )
        [found] = await score_relevance_routed(
            [RelevanceItem(question, chunks)], services.embedder, route
        )
        relevance = max(found.chunk_relevance, default=0.0)
        coverage = lexical_features(question, "\n".join(chunks))[1]
        held = term_set("\n".join(chunks))[0]
        missing = [t for t in terms if t not in held]
        value = round(min(relevance, coverage), 6)
        sufficient = False if value < INSUFFICIENT else None
        details = base.model_copy(
            update={
                "sufficient": sufficient,
                "probability": value,
                "relevance": round(relevance, 6),
                "coverage": round(coverage, 6),
                "missing_terms": missing,
                "cell": _cell(sufficient, answered),
            }
        )
        signals = (
            f"best chunk's relevance {relevance:.2f}, {coverage:.0%} of the question's terms "
            "(weighted by rarity) in the chunks"
            + (f" (missing: {', '.join(missing[:8])})" if missing else "")
        )
        if sufficient is None:
            return Score.not_applying(
                "not applicable: needs a judge",
                f"Offline cannot tell whether chunks on the question hold its answer: {signals}; "
                f"the signal {value:.2f} is at or above {INSUFFICIENT}, where offline calls "
                "were no better than chance on TREC DL lists (benchmarks/sufficiency_bands.py).",
                details,
            )
        return Score(
            value,
            route.noted(f"{_said(sufficient, answered)} Offline estimate: {signals}."),
            details,
        )

    def _read(self, case: ModelTestCase) -> tuple[str, list[str], bool | None, str | None]:
        """The question, the chunks and whether the answer was given (None: no answer) and,
        when it abstained, how."""
        question = (case.input or "").strip()
        if not question:
            raise InputError("sufficient-context needs the question", field="input")
        if case.retrieval_context is None:
            raise InputError(
                "sufficient-context needs the retrieved chunks", field="retrieval_context"
            )
        answer = (case.actual_output or "").strip()
        kind = abstention(answer) if answer else None
        answered = None if not answer else kind is None
        return question, [c or "" for c in case.retrieval_context], answered, kind


def _said(sufficient: bool, answered: bool | None) -> str:
    context = "The context is sufficient" if sufficient else "The context is insufficient"
    if answered is None:
        return f"{context}."
    if not sufficient and answered:
        return f"{context}, and the answer was given anyway (answered on insufficient context)."
    return f"{context}; the answer {'was given' if answered else 'abstained'}."
