"""gaussia's ``Context``: context awareness of an assistant over its sessions.

    metrics = Context.run(RetrieverClass, model=judge,
                          statistical_mode=BayesianMode(mc_samples=5000, ci_level=0.95))
    for metric in metrics:
        metric.context_awareness, metric.interactions

A thin shell over :class:`~contextlens.metrics.context.ContextAwareness`, run through
:func:`~contextlens.runner.aevaluate`. An interaction that could not be scored keeps a float
``context_awareness`` (NaN, so gaussia's ``>= 0.8`` is False and ``:.2f`` prints ``nan``)
with its ``error`` and ``failed``; the session mean and interval are over the scored ones,
and ``n_failed`` counts the others.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, computed_field

from contextlens.compat.shell import judge_label, say
from contextlens.judges.base import Fence
from contextlens.judges.parsing import DEFAULT_BOS, DEFAULT_EOS
from contextlens.judges.resolve import as_backend
from contextlens.metrics.base import DEFAULT_MAX_EMBED_TOKENS, DEFAULT_MAX_PROMPT_TOKENS
from contextlens.metrics.context import ContextAwareness, ContextDetails
from contextlens.results import ItemResult
from contextlens.retriever import Retriever
from contextlens.runner import aevaluate
from contextlens.schemas import Dataset
from contextlens.stats import FrequentistMode, StatisticalMode
from contextlens.sync import run_sync

__all__ = ["Context", "ContextInteraction", "ContextMetric"]

NAN = float("nan")


class ContextInteraction(BaseModel):
    """The context-awareness verdict on one interaction.

    A failed interaction has ``context_awareness`` NaN, ``failed`` True and ``error`` set:
    it is counted in the session's ``n_failed`` and left out of its mean, never scored 0.
    """

    model_config = ConfigDict(frozen=True)

    qa_id: str
    context_awareness: float
    reason: str | None = None
    error: str | None = None
    weight: float | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def failed(self) -> bool:
        return self.error is not None


class ContextMetric(BaseModel):
    """Context awareness of one session: weighted mean of its scored interactions.

    ``n_interactions`` counts every interaction; ``n_failed`` those that could not be
    scored. The mean and its interval are over the scored ones; with none scored the mean
    is NaN and the interval None.
    """

    session_id: str
    assistant_id: str
    n_interactions: int
    n_failed: int = 0
    context_awareness: float
    context_awareness_ci_low: float | None = None
    context_awareness_ci_high: float | None = None
    interactions: list[ContextInteraction]
    judge: str = "offline"


def _load(retriever: type[Retriever] | Retriever, kwargs: dict[str, Any]) -> Iterable[Dataset]:
    if isinstance(retriever, Retriever):
        if kwargs:
            raise TypeError(f"unexpected arguments for a retriever instance: {sorted(kwargs)}")
        return retriever.load_dataset()
    return retriever(**kwargs).load_dataset()


def _details(item: ItemResult) -> ContextDetails | None:
    return item.details if isinstance(item.details, ContextDetails) else None


def _interactions(session: Dataset, item: ItemResult) -> list[ContextInteraction]:
    details = _details(item)
    if details is None or not details.interactions:  # failed as a whole: each says why
        return [
            ContextInteraction(qa_id=b.qa_id, context_awareness=NAN, error=item.error)
            for b in session.conversation
        ]
    return [
        ContextInteraction(
            qa_id=i.qa_id,
            context_awareness=NAN if i.score is None else i.score,
            reason=i.reason,
            error=i.error,
            weight=i.weight,
        )
        for i in details.interactions
    ]


def to_context_metric(session: Dataset, item: ItemResult) -> ContextMetric:
    """gaussia's result for one session from its item result."""
    interactions = _interactions(session, item)
    details = _details(item)
    return ContextMetric(
        session_id=session.session_id,
        assistant_id=session.assistant_id,
        n_interactions=len(interactions),
        n_failed=sum(i.failed for i in interactions),
        context_awareness=NAN if item.score is None else item.score,
        context_awareness_ci_low=details.ci_low if details else None,
        context_awareness_ci_high=details.ci_high if details else None,
        interactions=interactions,
        judge=item.judge or "offline",
    )


def _tell(metric: ContextMetric) -> None:
    interval = (
        f" [{metric.context_awareness_ci_low:.2f}, {metric.context_awareness_ci_high:.2f}]"
        if metric.context_awareness_ci_low is not None
        else ""
    )
    failed = f", {metric.n_failed} failed" if metric.n_failed else ""
    say(
        f"session {metric.session_id} ({metric.judge}): context awareness "
        f"{metric.context_awareness:.2f}{interval} over {metric.n_interactions} "
        f"interactions{failed}"
    )
    for i in metric.interactions:
        if i.failed:
            say(f"  {i.qa_id}: FAILED: {i.error}")
        else:
            say(f"  {i.qa_id}: {i.context_awareness:.2f}  {i.reason}")


class Context:
    """gaussia's context-awareness metric.

    ``Context.run(...)`` / ``await Context.arun(...)`` evaluate every session a retriever
    loads. An instance, ``Context(statistical_mode)``, is a metric for
    :func:`contextlens.evaluate` (its ``metric`` is the core it wraps); its keyword-only
    ``max_prompt_tokens`` and ``max_embed_tokens`` are the core's size limits (``run`` and
    ``arun`` keep the defaults: their other keyword arguments go to the retriever).
    """

    def __init__(
        self,
        statistical_mode: StatisticalMode | None = None,
        *,
        max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS,
        max_embed_tokens: int = DEFAULT_MAX_EMBED_TOKENS,
    ) -> None:
        self.metric = ContextAwareness(
            statistical_mode or FrequentistMode(),
            max_prompt_tokens=max_prompt_tokens,
            max_embed_tokens=max_embed_tokens,
        )

    @property
    def case_type(self) -> type:
        return self.metric.case_type

    @classmethod
    async def arun(
        cls,
        retriever: type[Retriever] | Retriever,
        model: Any = None,
        statistical_mode: StatisticalMode | None = None,
        use_structured_output: bool | None = None,
        bos_json_clause: str = DEFAULT_BOS,
        eos_json_clause: str = DEFAULT_EOS,
        verbose: bool = False,
        **retriever_kwargs: Any,
    ) -> list[ContextMetric]:
        """Evaluate every session the retriever loads; one :class:`ContextMetric` each.

        ``model`` is a LangChain chat model, a :class:`~contextlens.judges.Judge`, a spec
        string (``"openai:gpt-4o-mini"``, ``"http://localhost:11434/v1#llama3.1"``), or
        None for the offline estimate. ``use_structured_output``: None (default) or True ask
        for constrained JSON where the judge supports it, False sends the prompt alone.
        ``verbose`` writes each session's and interaction's verdict (failures with their
        reason) to stderr, for this call only. Other keyword
        arguments go to the retriever.
        """
        judge = as_backend(model, use_structured_output=use_structured_output)
        core = ContextAwareness(
            statistical_mode or FrequentistMode(),
            judge=judge,
            fence=Fence(bos_json_clause, eos_json_clause),
        )
        sessions = list(_load(retriever, retriever_kwargs))
        if not sessions:
            return []
        run = await aevaluate(sessions, [core], progress=False, keep_results=True)
        metrics = [to_context_metric(s, i) for s, i in zip(sessions, run.results, strict=True)]
        if verbose:
            say(f"contextlens Context: {len(metrics)} sessions, judge {judge_label(judge)}")
            for metric in metrics:
                _tell(metric)
        return metrics

    @classmethod
    def run(
        cls,
        retriever: type[Retriever] | Retriever,
        model: Any = None,
        statistical_mode: StatisticalMode | None = None,
        use_structured_output: bool | None = None,
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
