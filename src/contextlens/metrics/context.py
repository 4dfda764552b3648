"""Context awareness of a session: does each assistant reply follow the session's context?

Each interaction of a session gets a score in [0, 1]; the session's score is the weighted
mean of its scored interactions, with a credible interval under
:class:`~contextlens.stats.BayesianMode`. A failed interaction is kept with its reason,
counted, and left out of the mean; a session with none scored has no score and an error.

With a judge, each interaction is one judge call returning reason and score together.
Without one, the offline estimate of :mod:`contextlens.offline.support` scores each reply
sentence by its support in the context, the reference reply and the observation.

Size limits: an interaction whose prompt is over ``max_prompt_tokens``, or (offline) with a
text over ``max_embed_tokens``, fails with its size and the limit and is never sent; the
session's other interactions are scored.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from contextlens.backend import Message
from contextlens.errors import JudgeError
from contextlens.judges.base import DEFAULT_FENCE, Fence, Reply
from contextlens.judges.schema import Score, text_field
from contextlens.metrics.base import (
    DEFAULT_MAX_EMBED_TOKENS,
    DEFAULT_MAX_PROMPT_TOKENS,
    MAX_RAW_REPLY,
    Services,
    build_messages,
    data_block,
    prompt_over_budget,
    size_limit,
    too_long,
)
from contextlens.metrics.registry import metric
from contextlens.offline.language import is_english
from contextlens.offline.routes import (
    Route,
    resolve_support_model,
    support_route,
    support_scorer,
)
from contextlens.offline.support import SupportItem
from contextlens.schemas import Batch, Dataset, MetricResult
from contextlens.stats import BayesianMode, StatisticalMode, resolve_weights

log = logging.getLogger("contextlens.context")

__all__ = ["ContextAwareness", "ContextVerdict", "Interaction", "context_messages"]


class ContextVerdict(Reply):
    """What the judge returns for one interaction."""

    reason: str = text_field("one or two sentences naming any deviation from the context", 400)
    score: Score


@dataclass(frozen=True)
class Interaction:
    """The verdict on one interaction: a score and its reason, or an error."""

    qa_id: str
    score: float | None
    reason: str | None = None
    error: str | None = None
    weight: float | None = None
    raw_reply: str | None = None  # the judge's last reply when it could not be used


def context_messages(session: Dataset, batch: Batch, fence: Fence = DEFAULT_FENCE) -> list[Message]:
    """The judge prompt for one interaction; every evaluated text sits in its own block."""
    extra = ""
    if batch.ground_truth_assistant.strip():
        extra += "\n" + data_block("reference_reply", batch.ground_truth_assistant)
    if batch.observation:
        extra += "\n" + data_block("observation", batch.observation)
    return build_messages(
        "context_system.md",
        "context_user.md",
        ContextVerdict,
        fence,
        context=data_block("context", session.context),
        query=data_block("user_query", batch.query),
        reply=data_block("assistant_reply", batch.assistant),
        extra=extra,
    )


@metric(
    "context",
    reads=("session_id", "context", "conversation"),
    requires=("session_id", "assistant_id", "context", "conversation"),
)
class ContextAwareness:
    """Context awareness per session: weighted mean of how well each reply follows the context.

    Args:
        statistical_mode: the session's interval (default ``BayesianMode()``;
            ``FrequentistMode()`` gives none).
        judge: this metric's own judge (None: the run's).
        fence: where the judge is asked to put its JSON reply.
        max_prompt_tokens: the prompt budget of one interaction's judge call (characters /
            4); an interaction over it fails with its size and is not sent.
        max_embed_tokens: offline, the longest text embedded (characters / 4); an
            interaction with a longer reply, context, reference reply, observation or query
            fails with its size.
        support_model: offline, the faithfulness model of English replies: ``"features"``
            or ``"cross-encoder"`` (None: ``$CONTEXTLENS_SUPPORT_MODEL``, else the default
            of :mod:`contextlens.offline.routes`). A session whose ``language`` is not
            English, or whose replies do not read as English, is read with the
            multilingual embedder when the ``multilingual`` extra is installed, and is
            otherwise said to be read by an English-only scorer.
        name: the key of its results.
    """

    case_type = Dataset

    def __init__(
        self,
        statistical_mode: StatisticalMode | None = None,
        *,
        judge: Any = None,
        fence: Fence = DEFAULT_FENCE,
        max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS,
        max_embed_tokens: int = DEFAULT_MAX_EMBED_TOKENS,
        support_model: str | None = None,
        name: str = "context",
    ) -> None:
        if support_model is not None:
            resolve_support_model(support_model)  # an unknown name is refused here
        self.support_model = support_model
        self.statistical_mode = statistical_mode or BayesianMode()
        self.judge = judge
        self.fence = fence
        self.max_prompt_tokens = size_limit("max_prompt_tokens", max_prompt_tokens)
        self.max_embed_tokens = size_limit("max_embed_tokens", max_embed_tokens)
        self.name = name

    def __repr__(self) -> str:
        return f"ContextAwareness(name={self.name!r}, statistical_mode={self.statistical_mode!r})"

    async def score(self, case: Dataset, services: Services) -> MetricResult:
        """Score every interaction of the session ``case`` and aggregate them."""
        weights = resolve_weights([b.weight for b in case.conversation], label=case.session_id)
        extra: dict[str, Any] = {}
        if services.judge is None:
            found, extra = await self._offline(case, services)
        else:
            found = list(
                await asyncio.gather(*(self._judged(case, b, services) for b in case.conversation))
            )
        interactions = [
            Interaction(i.qa_id, i.score, i.reason, i.error, float(w))
            for i, w in zip(found, weights, strict=True)
        ]
        return self._aggregate(case, interactions, services, extra)

    async def _judged(self, session: Dataset, batch: Batch, services: Services) -> Interaction:
        assert services.judge is not None
        messages = context_messages(session, batch, self.fence)
        too_big = prompt_over_budget(messages, self.max_prompt_tokens)
        if too_big is not None:
            return Interaction(batch.qa_id, None, error=too_big)
        try:
            verdict = await services.judge.judge(messages, ContextVerdict, fence=self.fence)
        except JudgeError as exc:
            log.debug("session %s, %s: failed: %s", session.session_id, batch.qa_id, exc)
            return Interaction(batch.qa_id, None, error=str(exc), raw_reply=exc.raw)
        out = verdict.output
        return Interaction(batch.qa_id, out.score, out.reason)

    async def _offline(
        self, session: Dataset, services: Services
    ) -> tuple[list[Interaction], dict[str, Any]]:
        """Each interaction scored offline, and what the session's details say of the reader."""
        shared = too_long([("the context", session.context)], self.max_embed_tokens)
        refused = [
            shared
            or too_long(
                [
                    ("the reply", b.assistant),
                    ("the reference reply", b.ground_truth_assistant),
                    ("the observation", b.observation or ""),
                    ("the query", b.query),
                ],
                self.max_embed_tokens,
            )
            for b in session.conversation
        ]
        model = resolve_support_model(self.support_model)
        routes: list[Route | None] = [
            None
            if why is not None
            else support_route(
                is_english([b.assistant, session.context], session.language), model, self.name
            )
            for b, why in zip(session.conversation, refused, strict=True)
        ]
        scored: dict[int, tuple[float, str]] = {}
        for route in dict.fromkeys(r for r in routes if r is not None):
            idx = [i for i, r in enumerate(routes) if r == route]
            items = [
                SupportItem(
                    b.assistant,
                    [session.context, b.ground_truth_assistant, b.observation or ""],
                    question=b.query,
                )
                for b in (session.conversation[i] for i in idx)
            ]
            results = await support_scorer(route, services.embedder)(items)
            for i, r in zip(idx, results, strict=True):
                reason = r.reason if route.note is None else f"{r.reason} ({route.note})"
                scored[i] = (round(r.score, 6), reason)
        found: list[Interaction] = []
        for i, (b, why) in enumerate(zip(session.conversation, refused, strict=True)):
            if why is not None:
                found.append(Interaction(b.qa_id, None, error=why))
                continue
            score, reason = scored[i]
            found.append(Interaction(b.qa_id, score, reason))
        used = [r for r in dict.fromkeys(routes) if r is not None]
        extra: dict[str, Any] = {}
        if used:
            extra = {k: v for r in used for k, v in r.details.items()}
            if len({r.reader for r in used}) > 1:
                extra["offline_model"] = ", ".join(r.reader for r in used)
        return found, extra

    def _aggregate(
        self,
        session: Dataset,
        interactions: Sequence[Interaction],
        services: Services,
        extra: dict[str, Any],
    ) -> MetricResult:
        scored = [i for i in interactions if i.error is None and i.score is not None]
        failed = [i for i in interactions if i.error is not None or i.score is None]
        values = np.array([i.score for i in scored], dtype=float)
        weights = np.array([i.weight for i in scored], dtype=float)
        if len(scored):
            total = weights.sum()
            weights = weights / total if total > 0 else np.full(len(scored), 1 / len(scored))
        estimate = self.statistical_mode.estimate(values, weights, key=session.session_id)
        details: dict[str, Any] = {
            "judge": services.judge.name if services.judge else "offline",
            "n_interactions": len(interactions),
            "n_failed": len(failed),
            "ci_low": estimate.ci_low,
            "ci_high": estimate.ci_high,
            "interactions": [_interaction_details(i) for i in interactions],
            **extra,
        }
        if not scored:
            first = failed[0].error if failed else "the session has no interactions"
            return MetricResult(
                metric=self.name,
                score=None,
                error=f"all {len(interactions)} interactions failed; first: {first}",
                details=details,
            )
        worst = min(scored, key=lambda i: i.score or 0.0)
        reason = f"lowest interaction {worst.qa_id} ({worst.score:.2f}): {worst.reason}"
        if failed:
            reason += (
                f" ({len(failed)} of {len(interactions)} interactions failed, "
                f"first {failed[0].qa_id}: {failed[0].error})"
            )
        return MetricResult(metric=self.name, score=estimate.value, reason=reason, details=details)


def _interaction_details(interaction: Interaction) -> dict[str, Any]:
    """An interaction as ``details`` list it; ``raw_reply`` only when there is one."""
    out = asdict(interaction)
    raw = out.pop("raw_reply")
    if raw:
        out["raw_reply"] = raw[:MAX_RAW_REPLY]
    return out
