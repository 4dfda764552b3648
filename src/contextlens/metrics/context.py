"""Context awareness of a session: does each assistant reply follow the session's context?

Each interaction of a session gets a score in [0, 1]; the session's score is the weighted
mean of its scored interactions, with a credible interval under
:class:`~contextlens.stats.BayesianMode`. A failed interaction is kept with its reason,
counted, and left out of the mean; a session with none scored has no score and an error.

With a judge, each interaction is one judge call returning reason and score together.
Without one, the offline estimate of :mod:`contextlens.offline.support` scores each reply
sentence by its support in the context, the reference reply and the observation. Offline, an
interaction whose reply makes no checkable claim (a refusal, "I don't know", a greeting:
:mod:`contextlens.offline.abstention`) is not applicable, and so is one whose reply or
context is in a language the offline reader does not read ("needs a judge"); either is
counted in ``details.n_not_applicable`` and left out of the mean, and a session with only
such interactions is not applicable. A text of an interaction in another language is named
in its reason and ``details.language``.

Size limits: an interaction whose prompt is over ``max_prompt_tokens``, or (offline) with a
text over ``max_embed_tokens``, fails with its size and the limit and is never sent; the
session's other interactions are scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, Field, field_validator

from contextlens.backend import Message
from contextlens.errors import JudgeError
from contextlens.judges.base import DEFAULT_FENCE, Fence, Judge, Reply
from contextlens.judges.schema import AnchoredScore, text_field
from contextlens.metrics.base import (
    DataBlocks,
    ReaderDetails,
    Services,
    build_messages,
    prompt_over_budget,
    raw_reply,
    too_long,
)
from contextlens.metrics.config import SUPPORT_FILES, SupportConfig
from contextlens.metrics.metric import Metric, Score, ScoreFailed
from contextlens.metrics.registry import metric
from contextlens.offline.abstention import KINDS, abstention
from contextlens.offline.language import Unread, unread_texts
from contextlens.offline.routes import Route, reader_details, support_route, support_scorer
from contextlens.offline.support import SupportItem, SupportResult
from contextlens.redact import logger
from contextlens.schemas import Batch, Dataset
from contextlens.stats import BayesianMode, StatisticalMode, checked_mode, resolve_weights
from contextlens.stats.modes import weighted_estimate
from contextlens.sync import gather_all

log = logger("contextlens.context")

#: Why an interaction whose reply makes no checkable claim is not scored offline.
ABSTAINS = "not applicable: the answer abstains"

__all__ = [
    "ContextAwareness",
    "ContextConfig",
    "ContextDetails",
    "ContextVerdict",
    "Interaction",
    "context_messages",
]


class ContextVerdict(Reply):
    """What the judge returns for one interaction."""

    reason: str = text_field("one or two sentences naming any deviation from the context", 400)
    score: AnchoredScore


class Interaction(BaseModel):
    """The verdict on one interaction: a score and its reason, an error (with the judge's
    last reply when it could not be used), or why it is not applicable (offline: its reply
    abstains, of the kind ``abstention``, or needs a judge). Offline, ``claim`` is the
    reply's least supported claim, ``claim_support`` its support and ``evidence`` the
    sentence closest to it in the evidence (the context, the reference reply or the
    observation)."""

    qa_id: str
    score: float | None
    reason: str | None = None
    error: str | None = None
    not_applicable: str | None = None
    abstention: str | None = None
    weight: float | None = None
    raw_reply: str | None = None
    claim: str | None = None
    claim_support: float | None = None
    evidence: str | None = None


class ContextDetails(ReaderDetails):
    """A session's details: its interactions' verdicts and the interval of their mean
    (offline, the reader that scored them); ``n_not_applicable`` counts the interactions
    left out as not applicable."""

    n_interactions: int = 0
    n_failed: int = 0
    n_not_applicable: int = 0
    ci_low: float | None = None
    ci_high: float | None = None
    interactions: list[Interaction] = Field(default_factory=list)


def context_messages(session: Dataset, batch: Batch, fence: Fence = DEFAULT_FENCE) -> list[Message]:
    """The judge prompt for one interaction; every evaluated text sits in its own block."""
    block = DataBlocks(
        session.context,
        batch.query,
        batch.assistant,
        batch.ground_truth_assistant,
        batch.observation,
    )
    extra = ""
    if batch.ground_truth_assistant.strip():
        extra += "\n" + block("reference_reply", batch.ground_truth_assistant)
    if batch.observation:
        extra += "\n" + block("observation", batch.observation)
    return build_messages(
        "context_system.md",
        "context_user.md",
        ContextVerdict,
        fence,
        context=block("context", session.context),
        query=block("user_query", batch.query),
        reply=block("assistant_reply", batch.assistant),
        extra=extra,
    )


class ContextConfig(SupportConfig):
    """The context metric's settings.

    ``statistical_mode``: the session's interval (None: ``BayesianMode()``;
    ``FrequentistMode()`` gives none). ``fence``: where the judge is asked to put its JSON
    reply. ``max_prompt_tokens``: the prompt budget of one interaction's judge call
    (characters / 4); an interaction over it fails with its size and is not sent.
    ``max_embed_tokens``: offline, the longest text embedded (characters / 4); an
    interaction with a longer reply, context, reference reply, observation or query fails
    with its size. ``support_model``: offline, the faithfulness model of English replies.
    An interaction whose reply or context is not in English (the session's ``language``,
    or the text as read) is "not applicable: needs a judge" offline, naming the texts (its
    reason and ``details.language``); it is read with the multilingual embedder only when
    that extra and the models fitted for it are both installed
    (:mod:`~contextlens.offline.routes`).
    """

    statistical_mode: StatisticalMode = Field(default_factory=BayesianMode)
    fence: Fence = DEFAULT_FENCE

    @field_validator("statistical_mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> Any:
        return BayesianMode() if value is None else checked_mode(value)


@metric(
    "context",
    aliases=("Context", "ContextAwareness", "context_awareness"),
    reads=(
        "session_id",
        "context",
        "conversation",
        "query",
        "assistant",
        "ground_truth_assistant",
        "observation",
        "weight",
    ),
    requires=("session_id", "assistant_id", "context", "conversation"),
)
class ContextAwareness(Metric[Dataset]):
    """Context awareness per session: weighted mean of how well each reply follows the context.

    Settings: :class:`ContextConfig`.
    """

    case_type = Dataset
    details_type = ContextDetails
    config_type = ContextConfig
    prompts = ("context_system.md", "context_user.md")
    offline_models = SUPPORT_FILES
    config: ContextConfig

    async def judged(self, case: Dataset, judge: Judge, services: Services) -> Score:
        """Every interaction of the session ``case`` judged, then aggregated."""
        weights = self._weights(case)
        found = await gather_all(self._interaction(case, b, judge) for b in case.conversation)
        return self._aggregate(case, found, weights, {})

    async def offline(self, case: Dataset, services: Services) -> Score:
        """Every interaction of the session ``case`` scored offline, then aggregated."""
        weights = self._weights(case)
        found, readers = await self._offline(case, services)
        return self._aggregate(case, found, weights, readers)

    def _weights(self, case: Dataset) -> Sequence[float]:
        if not case.conversation:
            raise ScoreFailed("the session has no interactions: nothing to score")
        return list(resolve_weights([b.weight for b in case.conversation], label=case.session_id))

    async def _interaction(self, session: Dataset, batch: Batch, judge: Judge) -> Interaction:
        messages = context_messages(session, batch, self.config.fence)
        too_big = prompt_over_budget(messages, self.config.max_prompt_tokens)
        if too_big is not None:
            return Interaction(qa_id=batch.qa_id, score=None, error=too_big)
        try:
            verdict = await judge.judge(messages, ContextVerdict, fence=self.config.fence)
        except JudgeError as exc:
            log.debug("session %s, %s: failed: %s", session.session_id, batch.qa_id, exc)
            return Interaction(
                qa_id=batch.qa_id, score=None, error=str(exc), raw_reply=raw_reply(exc)
            )
        out = verdict.output
        return Interaction(qa_id=batch.qa_id, score=out.score, reason=out.reason)

    async def _offline(
        self, session: Dataset, services: Services
    ) -> tuple[list[Interaction], dict[str, str]]:
        """Each interaction scored offline, and the reader fields of the session's details."""
        shared = too_long([("the context", session.context)], self.config.max_embed_tokens)
        refused = [
            shared
            or too_long(
                [
                    ("the reply", b.assistant),
                    ("the reference reply", b.ground_truth_assistant),
                    ("the observation", b.observation or ""),
                    ("the query", b.query),
                ],
                self.config.max_embed_tokens,
            )
            for b in session.conversation
        ]
        routes: dict[int, Route] = {}
        skipped: dict[int, Interaction] = {}
        for i, (b, why) in enumerate(zip(session.conversation, refused, strict=True)):
            if why is not None:
                continue
            route, unreadable = self._route(session, b)
            routes[i] = route
            kind = abstention(b.assistant)
            if kind is not None:
                skipped[i] = Interaction(
                    qa_id=b.qa_id,
                    score=None,
                    not_applicable=ABSTAINS,
                    abstention=kind,
                    reason=route.noted(f"The reply makes no checkable claim ({KINDS[kind]})."),
                )
            elif unreadable is not None:
                skipped[i] = Interaction(
                    qa_id=b.qa_id,
                    score=None,
                    not_applicable=unreadable.needs_judge(),
                    reason=f"Not scored offline: {route.note}.",
                )
        scored: dict[int, SupportResult] = {}
        todo = [i for i in routes if i not in skipped]
        for reader in dict.fromkeys(routes[i].reader for i in todo):  # one scorer per reader
            idx = [i for i in todo if routes[i].reader == reader]
            items = [
                SupportItem(
                    b.assistant,
                    [session.context, b.ground_truth_assistant, b.observation or ""],
                    question=b.query,
                )
                for b in (session.conversation[i] for i in idx)
            ]
            results = await support_scorer(routes[idx[0]], services.embedder)(items)
            scored.update(zip(idx, results, strict=True))
        found: list[Interaction] = []
        for i, (b, why) in enumerate(zip(session.conversation, refused, strict=True)):
            if why is not None:
                found.append(Interaction(qa_id=b.qa_id, score=None, error=why))
                continue
            if i in skipped:
                found.append(skipped[i])
                continue
            r, route = scored[i], routes[i]
            weakest = min(r.claims, key=lambda c: c.support, default=None)
            found.append(
                Interaction(
                    qa_id=b.qa_id,
                    score=round(r.score, 6),
                    reason=route.noted(r.reason),
                    claim=weakest.sentence if weakest else None,
                    claim_support=round(weakest.support, 6) if weakest else None,
                    evidence=(weakest.closest or None) if weakest else None,
                )
            )
        return found, reader_details(routes.values())

    def _route(self, session: Dataset, batch: Batch) -> tuple[Route, Unread | None]:
        """The reader of one interaction, with its language note, and the texts it cannot
        read when it cannot read the interaction (its reply or the context in another
        language, and no multilingual reader); None when it can."""
        unread = unread_texts(
            [
                ("the reply", batch.assistant),
                ("the query", batch.query),
                ("the context", session.context),
            ],
            session.language,
        )
        cannot = unread.has("the reply") or unread.has("the context")
        route = support_route(not cannot, self.config.support_model, self.name)
        if not unread:
            return route, None
        multilingual = route.reader == "multilingual"
        route = replace(route, note=unread.note(self.name, multilingual))
        return route, unread if cannot and not multilingual else None

    def _aggregate(
        self,
        session: Dataset,
        found: Sequence[Interaction],
        weights: Sequence[float],
        readers: dict[str, str],
    ) -> Score:
        interactions = [
            i.model_copy(update={"weight": float(w)}) for i, w in zip(found, weights, strict=True)
        ]
        skipped = [i for i in interactions if i.error is None and i.not_applicable is not None]
        scored = [i for i in interactions if i.error is None and i.score is not None]
        failed = [
            i
            for i in interactions
            if i.error is not None or (i.score is None and i.not_applicable is None)
        ]
        estimate = weighted_estimate(
            self.config.statistical_mode,
            [i.score or 0.0 for i in scored],
            [i.weight or 0.0 for i in scored],
            key=session.session_id,
        )
        details = ContextDetails(
            n_interactions=len(interactions),
            n_failed=len(failed),
            n_not_applicable=len(skipped),
            ci_low=estimate.ci_low,
            ci_high=estimate.ci_high,
            interactions=list(interactions),
            raw_reply=next((i.raw_reply for i in failed if i.raw_reply), None),
            **readers,
        )
        if not scored and not failed and skipped:
            whys = list(dict.fromkeys(i.not_applicable for i in skipped if i.not_applicable))
            why = (
                whys[0]
                if len(whys) == 1
                else "not applicable: no interaction can be scored offline"
            )
            return Score.not_applying(why, f"{skipped[0].qa_id}: {skipped[0].reason}", details)
        if not scored:
            first = failed[0].error if failed else "the session has no interactions"
            if skipped:
                raise ScoreFailed(
                    f"{len(failed)} of {len(interactions)} interactions failed and "
                    f"{len(skipped)} are not applicable; first failure: {first}",
                    details,
                )
            raise ScoreFailed(
                f"all {len(interactions)} interactions failed; first: {first}", details
            )
        worst = min(scored, key=lambda i: i.score or 0.0)
        reason = f"lowest interaction {worst.qa_id} ({worst.score:.2f}): {worst.reason}"
        if failed:
            reason += (
                f" ({len(failed)} of {len(interactions)} interactions failed, "
                f"first {failed[0].qa_id}: {failed[0].error})"
            )
        if skipped:
            reason += (
                f" ({len(skipped)} of {len(interactions)} interactions not applicable, "
                f"first {skipped[0].qa_id}: {skipped[0].not_applicable})"
            )
        return Score(estimate.value, reason, details)
