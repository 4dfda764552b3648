"""``Context``: context awareness of an assistant over its sessions (gaussia's surface).

Each interaction of a session gets a score in [0, 1] for how well the reply follows the
session's system context; the session's score is the weighted mean of its scored
interactions, with a credible interval under :class:`~contextlens.stats.BayesianMode`.

With a judge, each interaction is one judge call returning reason and score together.
Without one (``model=None``), the offline estimate of :mod:`contextlens.offline.support`
scores each reply sentence by its support in the context and the reference reply.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from contextlens.errors import JudgeError
from contextlens.judges.parsing import DEFAULT_BOS, DEFAULT_EOS
from contextlens.logs import enable_verbose
from contextlens.metrics.base import Services, build_messages, data_block, make_services
from contextlens.offline.support import SupportItem, score_support
from contextlens.retriever import Retriever
from contextlens.schemas import Batch, ContextInteraction, ContextMetric, Dataset
from contextlens.stats import FrequentistMode, StatisticalMode, resolve_weights
from contextlens.sync import run_sync

log = logging.getLogger("contextlens.context")


class ContextVerdict(BaseModel):
    """What the judge returns for one interaction."""

    reason: str = Field(description="one or two sentences naming any deviation from the context")
    score: float = Field(ge=0.0, le=1.0, allow_inf_nan=False, description="0.0 to 1.0")


def context_messages(session: Dataset, batch: Batch, services: Services) -> list[Any]:
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
        services,
        context=data_block("context", session.context),
        query=data_block("user_query", batch.query),
        reply=data_block("assistant_reply", batch.assistant),
        extra=extra,
    )


def _load(retriever: type[Retriever] | Retriever, kwargs: dict[str, Any]) -> Iterable[Dataset]:
    if isinstance(retriever, Retriever):
        if kwargs:
            raise TypeError(f"unexpected arguments for a retriever instance: {sorted(kwargs)}")
        return retriever.load_dataset()
    return retriever(**kwargs).load_dataset()


class Context:
    """Context awareness per session. A ``Context`` object is configuration only.

    ``compute(session, services)`` evaluates one session; ``Context.run(...)`` and
    ``await Context.arun(...)`` keep gaussia's call surface.
    """

    name = "context"
    case_type = Dataset

    def __init__(self, statistical_mode: StatisticalMode | None = None) -> None:
        self.statistical_mode = statistical_mode or FrequentistMode()

    async def compute(self, session: Dataset, services: Services) -> ContextMetric:
        """Score every interaction of ``session`` and aggregate them."""
        weights = resolve_weights(
            [b.weight for b in session.conversation], label=session.session_id
        )
        if services.judge is None:
            interactions = await self._offline(session, services)
        else:
            interactions = list(
                await asyncio.gather(
                    *(self._judged(session, b, services) for b in session.conversation)
                )
            )
        interactions = [
            i.model_copy(update={"weight": float(w)})
            for i, w in zip(interactions, weights, strict=True)
        ]
        return self._aggregate(session, interactions, services)

    async def _judged(
        self, session: Dataset, batch: Batch, services: Services
    ) -> ContextInteraction:
        assert services.judge is not None
        try:
            verdict = await services.judge.judge(
                context_messages(session, batch, services), ContextVerdict
            )
        except JudgeError as exc:
            log.warning("session %s, %s: failed: %s", session.session_id, batch.qa_id, exc)
            return ContextInteraction(qa_id=batch.qa_id, context_awareness=None, error=str(exc))
        out = verdict.output
        log.info("session %s, %s: %.2f", session.session_id, batch.qa_id, out.score)
        return ContextInteraction(qa_id=batch.qa_id, context_awareness=out.score, reason=out.reason)

    async def _offline(self, session: Dataset, services: Services) -> list[ContextInteraction]:
        items = [
            SupportItem(
                b.assistant,
                [session.context, b.ground_truth_assistant, b.observation or ""],
                question=b.query,
            )
            for b in session.conversation
        ]
        results = await score_support(items, services.embedder)
        for batch, res in zip(session.conversation, results, strict=True):
            log.info("session %s, %s: %.2f (offline)", session.session_id, batch.qa_id, res.score)
        return [
            ContextInteraction(qa_id=b.qa_id, context_awareness=round(r.score, 6), reason=r.reason)
            for b, r in zip(session.conversation, results, strict=True)
        ]

    def _aggregate(
        self, session: Dataset, interactions: Sequence[ContextInteraction], services: Services
    ) -> ContextMetric:
        scored = [i for i in interactions if not i.failed]
        values = np.array([i.context_awareness for i in scored], dtype=float)
        weights = np.array([i.weight for i in scored], dtype=float)
        if len(scored):
            weights = (
                weights / weights.sum()
                if weights.sum() > 0
                else np.full(len(scored), 1 / len(scored))
            )
        estimate = self.statistical_mode.estimate(values, weights, key=session.session_id)
        return ContextMetric(
            session_id=session.session_id,
            assistant_id=session.assistant_id,
            n_interactions=len(interactions),
            n_failed=len(interactions) - len(scored),
            context_awareness=estimate.value,
            context_awareness_ci_low=estimate.ci_low,
            context_awareness_ci_high=estimate.ci_high,
            interactions=list(interactions),
            judge=services.judge.name if services.judge else "offline",
        )

    @classmethod
    async def arun(
        cls,
        retriever: type[Retriever] | Retriever,
        model: Any = None,
        statistical_mode: StatisticalMode | None = None,
        use_structured_output: bool = False,
        bos_json_clause: str = DEFAULT_BOS,
        eos_json_clause: str = DEFAULT_EOS,
        verbose: bool = False,
        **retriever_kwargs: Any,
    ) -> list[ContextMetric]:
        """Evaluate every session the retriever loads; one :class:`ContextMetric` each.

        ``model`` is a LangChain chat model, a :class:`~contextlens.judges.Judge`, a spec
        string (``"openai:gpt-4o-mini"``, ``"http://localhost:11434/v1#llama3.1"``), or
        None for the offline estimate. Other keyword arguments go to the retriever.
        """
        if verbose:
            enable_verbose()
        services = make_services(
            model,
            use_structured_output=use_structured_output,
            bos_json_clause=bos_json_clause,
            eos_json_clause=eos_json_clause,
        )
        metric = cls(statistical_mode)
        sessions = _load(retriever, retriever_kwargs)
        return list(await asyncio.gather(*(metric.compute(s, services) for s in sessions)))

    @classmethod
    def run(
        cls,
        retriever: type[Retriever] | Retriever,
        model: Any = None,
        statistical_mode: StatisticalMode | None = None,
        use_structured_output: bool = False,
        bos_json_clause: str = DEFAULT_BOS,
        eos_json_clause: str = DEFAULT_EOS,
        verbose: bool = False,
        **retriever_kwargs: Any,
    ) -> list[ContextMetric]:
        """Synchronous :meth:`arun`; works inside a running event loop too."""
        return run_sync(
            cls.arun(
                retriever,
                model=model,
                statistical_mode=statistical_mode,
                use_structured_output=use_structured_output,
                bos_json_clause=bos_json_clause,
                eos_json_clause=eos_json_clause,
                verbose=verbose,
                **retriever_kwargs,
            )
        )
