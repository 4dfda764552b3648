"""gaussia's ``Context``: context awareness of an assistant over its sessions.

    metrics = Context.run(RetrieverClass, model=judge,
                          statistical_mode=BayesianMode(mc_samples=5000, ci_level=0.95))
    for metric in metrics:
        metric.context_awareness, metric.interactions

    context = Context(RetrieverClass, model=judge)      # gaussia's instance API
    context.batch(session_id=..., context=..., assistant_id=..., batch=[...])
    context.on_process_complete()
    context.metrics

A thin shell over :class:`~contextlens.metrics.context.ContextAwareness`, run through
:func:`~contextlens.runner.aevaluate`. The parts of a session (several ``batch`` calls,
several ``Dataset`` objects, or :class:`StreamedBatch` items with one ``session_id``) are one
session. An interaction that could not be scored keeps a float
``context_awareness`` (NaN, so gaussia's ``>= 0.8`` is False and ``:.2f`` prints ``nan``)
with its ``error`` and ``failed``; the session mean and interval are over the scored ones,
and ``n_failed`` counts the others.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, computed_field

from contextlens.compat.shell import judge_label, say
from contextlens.errors import InputError
from contextlens.judges.base import Fence
from contextlens.judges.parsing import DEFAULT_BOS, DEFAULT_EOS
from contextlens.judges.resolve import as_backend
from contextlens.metrics.base import DEFAULT_MAX_EMBED_TOKENS, DEFAULT_MAX_PROMPT_TOKENS
from contextlens.metrics.context import ContextAwareness, ContextDetails
from contextlens.results import ItemResult
from contextlens.retriever import Retriever
from contextlens.runner import aevaluate
from contextlens.schemas import Batch, Dataset, IterationLevel, SessionMetadata, StreamedBatch
from contextlens.stats import BayesianMode, Estimate, FrequentistMode, StatisticalMode
from contextlens.stats.modes import estimates
from contextlens.sync import run_sync

__all__ = [
    "Batch",
    "Context",
    "ContextInteraction",
    "ContextMetric",
    "Dataset",
    "GaussiaMode",
    "IterationLevel",
    "SessionMetadata",
    "StreamedBatch",
]

NAN = float("nan")


class ContextInteraction(BaseModel):
    """The context-awareness verdict on one interaction.

    A failed interaction has ``context_awareness`` NaN, ``failed`` True and ``error`` set:
    it is counted in the session's ``n_failed`` and left out of its mean, never scored 0.
    One not applicable (offline, a reply that abstains or that needs a judge) has it NaN
    and ``not_applicable`` saying why; it is neither failed nor in the mean.
    """

    model_config = ConfigDict(frozen=True)

    qa_id: str
    context_awareness: float
    reason: str | None = None
    error: str | None = None
    not_applicable: str | None = None
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
            not_applicable=i.not_applicable,
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


def _mode(value: Any) -> Any:
    """``value`` when it is a statistical mode (``Context(mode)``): contextlens's, or one
    with gaussia's ``get_result_type``; else None."""
    if isinstance(value, (type, Retriever)):
        return None
    if any(callable(getattr(value, n, None)) for n in ("estimate", "get_result_type")):
        return value
    return None


def _summary_value(result: Any, where: str) -> float:
    """A primitive's result as one number: a point estimate, or a summary's ``mean``."""
    value = result.get("mean") if isinstance(result, Mapping) else result
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
        raise TypeError(
            f"statistical_mode: {where} returned {result!r:.80}, not a number or a summary "
            "with a 'mean'"
        )
    return float(value)


class GaussiaMode:
    """A statistical mode written for gaussia (its five primitives, no ``estimate``), as the
    engine asks for one, the way gaussia's ``Context`` uses it.

    ``get_result_type() == "point_estimate"``: the session's score is
    ``aggregate_metrics({"0": score, ...}, {"0": weight, ...})`` (a number, or a summary's
    ``mean``), without an interval. ``"distribution"``: the weighted mean with the credible
    interval of a Bayesian bootstrap of ``mc_samples`` draws at ``ci_level`` (the mode's own
    attributes, else gaussia's defaults 5000 and 0.95), seeded by its ``rng_seed`` (else 42).
    """

    def __init__(self, mode: Any) -> None:
        cls = type(mode).__name__
        if not callable(getattr(mode, "get_result_type", None)):
            raise TypeError(
                f"statistical_mode: {cls} has neither estimate(values, weights) (contextlens's "
                "modes) nor get_result_type() (gaussia's StatisticalMode): subclass "
                "FrequentistMode or BayesianMode, or give it gaussia's get_result_type() and "
                "aggregate_metrics(metrics, weights)"
            )
        kind = mode.get_result_type()
        self.mode = mode
        self.kind = kind
        self._bayesian: BayesianMode | None = None
        if kind == "distribution":
            self._bayesian = BayesianMode(
                mc_samples=getattr(mode, "mc_samples", 5000),
                ci_level=getattr(mode, "ci_level", 0.95),
                rng_seed=getattr(mode, "rng_seed", 42),
            )
        elif kind == "point_estimate":
            if not callable(getattr(mode, "aggregate_metrics", None)):
                raise TypeError(
                    f"statistical_mode: {cls} is a point-estimate mode without "
                    "aggregate_metrics(metrics, weights), which gives a session its score"
                )
            self._aggregate({"probe": 1.0}, {"probe": 1.0})  # a stub fails here, named
        else:
            raise ValueError(
                f"statistical_mode: {cls}.get_result_type() returned {kind!r}; expected "
                "'point_estimate' or 'distribution'"
            )

    @property
    def name(self) -> str:
        return f"gaussia:{type(self.mode).__name__}"

    def _aggregate(self, metrics: dict[str, float], weights: dict[str, float]) -> float:
        where = f"{type(self.mode).__name__}.aggregate_metrics({{...}}, {{...}})"
        return _summary_value(self.mode.aggregate_metrics(metrics, weights), where)

    def estimate(
        self, values: Sequence[float] | np.ndarray, weights: np.ndarray, *, key: str = ""
    ) -> Estimate:
        """The session's estimate from its scores and weights."""
        if self._bayesian is not None:
            return self._bayesian.estimate(values, weights, key=key)
        scores = [float(v) for v in values]
        if not scores:
            return Estimate(None, None, None, 0)
        ids = [str(i) for i in range(len(scores))]
        value = self._aggregate(
            dict(zip(ids, scores, strict=True)),
            dict(zip(ids, (float(w) for w in weights), strict=True)),
        )
        return Estimate(value, None, None, len(scores))

    def __repr__(self) -> str:
        return repr(self.mode)


def engine_mode(mode: Any) -> StatisticalMode:
    """``mode`` as the engine's statistical mode: contextlens's as it is, one written for
    gaussia through :class:`GaussiaMode`; a ``TypeError`` naming what a mode lacks."""
    if estimates(mode):
        return mode
    return GaussiaMode(mode)


class Context:
    """gaussia's context-awareness metric.

    As gaussia has it: ``Context(retriever, model, ...)`` loads the retriever's data, and
    ``batch(...)`` takes the interactions of a session (several calls for one
    ``session_id`` are one session), ``on_process_complete()`` scores every session given so
    far and appends one :class:`ContextMetric` per session to ``metrics``; ``Context.run(...)``
    / ``await Context.arun(...)`` do all of it for every session a retriever loads and return
    ``metrics``. Sessions are scored together, concurrently, when ``on_process_complete``
    runs.

    Args:
        retriever: a :class:`~contextlens.retriever.Retriever` class (made with
            ``retriever_kwargs``) or instance; None for a metric to give
            :func:`contextlens.evaluate` (``Context()`` or ``Context(statistical_mode)``).
        model: the judge: a LangChain chat model, a DeepEval- or Opik-shaped model class, a
            :class:`~contextlens.judges.Judge`, a spec string (``"openai:gpt-4o-mini"``,
            ``"http://localhost:11434/v1#llama3.1"``), or None for the offline estimate (in
            :func:`contextlens.evaluate`, the run's judge).
        statistical_mode: :class:`~contextlens.stats.FrequentistMode` (default: the weighted
            mean), :class:`~contextlens.stats.BayesianMode` (with a credible interval), or a
            mode written for gaussia: a ``StatisticalMode`` subclass with gaussia's
            primitives, used as gaussia's ``Context`` uses it (:class:`GaussiaMode`).
        use_structured_output: None (default) or True ask for constrained JSON where the
            judge supports it; False sends the prompt alone.
        strict: kept for gaussia's sake: every reply is validated against its schema.
        bos_json_clause, eos_json_clause: where the judge is asked to put its JSON reply.
        verbose: ``on_process_complete`` writes each session's and interaction's verdict
            (failures with their reason) to stderr.
        max_prompt_tokens, max_embed_tokens: the core's size limits (keyword-only).

    ``metric`` is the core it wraps (:class:`~contextlens.metrics.context.ContextAwareness`).
    """

    def __init__(
        self,
        retriever: type[Retriever] | Retriever | StatisticalMode | None = None,
        model: Any = None,
        statistical_mode: StatisticalMode | None = None,
        use_structured_output: bool | None = None,
        strict: bool = True,
        bos_json_clause: str = DEFAULT_BOS,
        eos_json_clause: str = DEFAULT_EOS,
        verbose: bool = False,
        *,
        max_prompt_tokens: int = DEFAULT_MAX_PROMPT_TOKENS,
        max_embed_tokens: int = DEFAULT_MAX_EMBED_TOKENS,
        **retriever_kwargs: Any,
    ) -> None:
        if statistical_mode is None and _mode(retriever) is not None:
            retriever, statistical_mode = None, _mode(retriever)
        self.model = model
        self.statistical_mode = FrequentistMode() if statistical_mode is None else statistical_mode
        self.use_structured_output = use_structured_output
        self.strict = strict
        self.bos_json_clause = bos_json_clause
        self.eos_json_clause = eos_json_clause
        self.verbose = verbose
        self.metrics: list[ContextMetric] = []
        judge = as_backend(model, use_structured_output=use_structured_output)
        self.metric = ContextAwareness(
            statistical_mode=engine_mode(self.statistical_mode),
            judge=judge,
            fence=Fence(bos_json_clause, eos_json_clause),
            max_prompt_tokens=max_prompt_tokens,
            max_embed_tokens=max_embed_tokens,
        )
        self._judge = judge
        self._sessions: dict[str, Dataset] = {}
        self._qa_ids: dict[str, set[str]] = {}
        self.retriever: Retriever | None = None
        self.dataset: Any = None
        self.level = IterationLevel.FULL_DATASET
        if retriever is None:
            if retriever_kwargs:
                raise TypeError(f"unexpected arguments: {sorted(retriever_kwargs)}")
            return
        if isinstance(retriever, type):
            self.retriever = retriever(**retriever_kwargs)
        elif retriever_kwargs:
            raise TypeError(
                f"unexpected arguments for a retriever instance: {sorted(retriever_kwargs)}"
            )
        else:
            self.retriever = retriever  # type: ignore[assignment]
        self.level = IterationLevel(
            getattr(self.retriever, "iteration_level", IterationLevel.FULL_DATASET)
        )
        self.dataset = self.retriever.load_dataset()  # type: ignore[union-attr]

    @property
    def case_type(self) -> type:
        return self.metric.case_type

    def batch(
        self,
        session_id: str,
        context: str,
        assistant_id: str,
        batch: list[Batch],
        language: str | None = "english",
    ) -> None:
        """Take interactions of the session ``session_id``; a session given in several calls
        is one session. Its context and assistant must be the same in every call; a
        ``qa_id`` may appear once per session. Scored by :meth:`on_process_complete`."""
        given = [Batch.model_validate(b) for b in batch]
        known = self._sessions.get(session_id)
        if known is None:
            known = self._sessions[session_id] = Dataset(
                session_id=session_id,
                assistant_id=assistant_id,
                language=language,
                context=context,
                conversation=[],
            )
        for name, value in (("assistant_id", assistant_id), ("context", context)):
            if getattr(known, name) != value:
                raise InputError(
                    f"session {session_id!r}: differs from the session's earlier part",
                    field=name,
                )
        seen = self._qa_ids.setdefault(session_id, set())
        for b in given:
            if b.qa_id in seen:
                raise InputError(
                    f"duplicate qa_id {b.qa_id!r} in session {session_id!r}", field="qa_id"
                )
            seen.add(b.qa_id)
        known.conversation.extend(given)

    def on_process_complete(self) -> None:
        """Score every session given to :meth:`batch` since the last call and append their
        :class:`ContextMetric` to ``metrics``; works inside a running event loop too."""
        run_sync(self.aon_process_complete())

    async def aon_process_complete(self) -> None:
        """Asynchronous :meth:`on_process_complete`."""
        sessions, self._sessions, self._qa_ids = list(self._sessions.values()), {}, {}
        if not sessions:
            return
        run = await aevaluate(sessions, [self.metric], progress=False, keep_results=True)
        found = [to_context_metric(s, i) for s, i in zip(sessions, run.results, strict=True)]
        if self.verbose:
            say(f"contextlens Context: {len(found)} sessions, judge {judge_label(self._judge)}")
            for metric in found:
                _tell(metric)
        self.metrics.extend(found)

    def _take_dataset(self) -> None:
        """Every element of the retriever's data through :meth:`batch`."""
        if self.dataset is None:
            return
        for element in self.dataset:
            if self.level is IterationLevel.STREAM_BATCHES:
                streamed = StreamedBatch.model_validate(element)
                meta = streamed.metadata
                parts = (meta.session_id, meta.context, meta.assistant_id, [streamed.batch])
                self.batch(*parts, meta.language)
            else:
                session = Dataset.model_validate(element)
                self.batch(
                    session.session_id,
                    session.context,
                    session.assistant_id,
                    session.conversation,
                    session.language,
                )
        self.dataset = None

    async def _aprocess(self) -> list[ContextMetric]:
        self._take_dataset()
        await self.aon_process_complete()
        return self.metrics

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
        """Evaluate every session the retriever loads; one :class:`ContextMetric` each, in
        the order their sessions first appear. See the class for the arguments; other
        keyword arguments go to the retriever."""
        metric = cls(
            retriever,
            model=model,
            statistical_mode=statistical_mode,
            use_structured_output=use_structured_output,
            bos_json_clause=bos_json_clause,
            eos_json_clause=eos_json_clause,
            verbose=verbose,
            **retriever_kwargs,
        )
        return await metric._aprocess()

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
