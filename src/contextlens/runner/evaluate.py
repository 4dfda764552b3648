"""``evaluate``: any mix of metrics over a stream of cases, on one engine.

Cases are consumed lazily, at most a bounded number in flight; each result is written to
``results.jsonl`` as soon as it is known, so memory stays flat and an interrupted run keeps
everything finished so far. Failed items are kept apart with their reasons and counted;
they never enter a mean as 0.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable, Iterator, Sequence, Sized
from dataclasses import replace
from typing import Any, Literal, overload

from typing_extensions import Unpack

from contextlens.engine.budget import CostCap
from contextlens.engine.cache import open_cache
from contextlens.engine.limiter import DEFAULT_LIMIT
from contextlens.results import EvalRun
from contextlens.runner.binding import BoundMetric, bind_metrics, checked_metrics
from contextlens.runner.checks import CaseChecks, given_cases
from contextlens.runner.config import RunConfig, RunOptions
from contextlens.runner.dry_run import CostEstimate, DryRunJudge, estimate_of, measured_completions
from contextlens.runner.executor import Executor, resolve_executor
from contextlens.runner.folder import RunFolder
from contextlens.runner.heap import steady_heap
from contextlens.runner.loop import RunLoop, score_item
from contextlens.schemas import MetricKey
from contextlens.sync import run_sync

__all__ = [
    "OFFLINE_CASES_IN_FLIGHT",
    "aevaluate",
    "cases_in_flight",
    "cost_cap",
    "evaluate",
    "score_item",
]

#: Cases scored at once without a judge when the embedder batches concurrent calls.
OFFLINE_CASES_IN_FLIGHT = 512


@overload
async def aevaluate(
    cases: Iterable[Any] | AsyncIterable[Any],
    metrics: Sequence[Any],
    *,
    config: RunConfig | None = None,
    dry_run: Literal[False] = False,
    **options: Unpack[RunOptions],
) -> EvalRun: ...


@overload
async def aevaluate(
    cases: Iterable[Any] | AsyncIterable[Any],
    metrics: Sequence[Any],
    *,
    config: RunConfig | None = None,
    dry_run: Literal[True],
    **options: Unpack[RunOptions],
) -> CostEstimate: ...


async def aevaluate(
    cases: Iterable[Any] | AsyncIterable[Any],
    metrics: Sequence[Any],
    *,
    config: RunConfig | None = None,
    dry_run: bool = False,
    **options: Unpack[RunOptions],
) -> EvalRun | CostEstimate:
    """Evaluate ``cases`` with ``metrics``; see :func:`evaluate`."""
    run_config = RunConfig.of(config, **options)
    cores = checked_metrics(metrics)
    store = open_cache(run_config.cache)
    bound = bind_metrics(
        cores,
        judge=run_config.judge,
        embedder=run_config.embedder,
        cache=store,
        limits=run_config.limits,
        retry=run_config.retry,
        thresholds=run_config.thresholds,
        preflight=not dry_run,  # a dry run makes no call: a key need not be set
        triage=run_config.triage,
        batch=run_config.batch,
    )
    if run_config.triage and not any(b.services.judge is not None for b in bound):
        raise ValueError(
            "triage sends the items the offline scorer is unsure of to a judge: give judge="
        )
    dry: dict[MetricKey, DryRunJudge | None] = {}
    if dry_run:
        bound, dry = _dry_run_metrics(bound, run_config.folder)
    cap = None if dry_run else cost_cap(bound, run_config.max_cost)
    checks = CaseChecks(bound)
    cases = given_cases(cases, bound)
    if isinstance(cases, Sized) and not isinstance(cases, (Iterator, AsyncIterable)):
        cases = checks.all(cases)  # a bad case stops the run before its first judge call
    total = len(cases) if isinstance(cases, Sized) else None
    loop = RunLoop(
        bound,
        checks,
        run_config,
        cap=cap,
        in_flight=cases_in_flight(bound),
        total=total,
        dry_run=dry_run,
    )
    with steady_heap():
        await loop.run(cases)
    if dry_run:
        triaged = {b.key: loop.tallies[b.key].decided for b in bound if b.services.triage}
        return estimate_of([b.key for b in bound], dry, loop.read, triage=triaged or None)
    return loop.finish()


def _dry_run_metrics(
    bound: Sequence[BoundMetric], folder: RunFolder | None
) -> tuple[list[BoundMetric], dict[MetricKey, DryRunJudge | None]]:
    """The metrics of a dry run: each judge replaced by a :class:`DryRunJudge`, expecting
    the replies measured by the runs in the same ``out`` folder."""
    names: dict[MetricKey, str] = {
        b.key: b.services.judge.name for b in bound if b.services.judge is not None
    }
    measured = measured_completions(folder.out if folder is not None else None, names)
    out: list[BoundMetric] = []
    judges: dict[MetricKey, DryRunJudge | None] = {}
    for b in bound:
        judge = b.services.judge
        dry = DryRunJudge(judge, measured) if judge is not None else None
        judges[b.key] = dry
        out.append(b if dry is None else replace(b, services=replace(b.services, judge=dry)))
    return out, judges


def cost_cap(bound: Sequence[BoundMetric], max_cost: float | None) -> CostCap | None:
    """The cap of a run's judge calls (None without ``max_cost``); a ValueError when a
    judge's cost cannot be known: its calls are not sent by contextlens, or its backend's
    ``price_key`` has no price."""
    from contextlens.judges.llm import LLMJudge

    if max_cost is None:
        return None
    cap = CostCap(max_cost)
    for b in bound:
        judge = b.services.judge
        if judge is None:
            continue
        if not isinstance(judge, LLMJudge):
            raise ValueError(
                f"--max-cost: the judge {judge.name} of {b.key} makes its own calls, so "
                "contextlens cannot bound their cost; give a judge spec or a chat model"
            )
        cap.check_priced(judge.backend.price_key, judge.name)
    return cap


def cases_in_flight(bound: Sequence[BoundMetric]) -> int:
    """Cases scored at once: twice the judge calls allowed; offline with an embedder that
    batches concurrent calls, enough to make its batches large (small ones pad more and
    cost more per run)."""
    limits = [b.services.judge.max_connections() for b in bound if b.services.judge is not None]
    if not limits and all(b.services.embedder.batches_concurrent_calls for b in bound):
        return OFFLINE_CASES_IN_FLIGHT
    return max(8, 2 * max(limits, default=DEFAULT_LIMIT))


@overload
def evaluate(
    cases: Iterable[Any],
    metrics: Sequence[Any],
    *,
    executor: str | Executor | None = None,
    config: RunConfig | None = None,
    dry_run: Literal[False] = False,
    **options: Unpack[RunOptions],
) -> EvalRun: ...


@overload
def evaluate(
    cases: Iterable[Any],
    metrics: Sequence[Any],
    *,
    executor: str | Executor | None = None,
    config: RunConfig | None = None,
    dry_run: Literal[True],
    **options: Unpack[RunOptions],
) -> CostEstimate: ...


def evaluate(
    cases: Iterable[Any],
    metrics: Sequence[Any],
    *,
    executor: str | Executor | None = None,
    config: RunConfig | None = None,
    dry_run: bool = False,
    **options: Unpack[RunOptions],
) -> EvalRun | CostEstimate:
    """Evaluate ``cases`` (sessions for ``context``, test cases for the others) with
    ``metrics`` and return an :class:`EvalRun`.

    ``cases``: cases (:class:`~contextlens.schemas.ModelTestCase`,
    :class:`~contextlens.schemas.Dataset`), dicts, or a pandas DataFrame. A dict is read as
    ``contextlens run`` reads a file's row (any name of a field, Ragas's ``user_input``,
    ``retrieved_contexts``, ``response`` and ``reference`` among them; ``meta`` and
    ``meta.NAME`` keys), a DataFrame as the rows of a file (see
    :func:`~contextlens.loaders.load_frame`).

    Each case must have a unique id (a test case's ``name``, a session's ``session_id``)
    and the fields each of its metrics ``requires``; an :class:`InputError` names the case
    (its index) otherwise. A list, or any sized collection, is checked whole before the
    first judge call; an iterator is checked as it is consumed, and what was under way when
    a bad case came finishes and is written first.

    ``metrics``: metric names (``"context-precision"``), metric objects, or the seed metric
    classes (``ContextPrecision(model=...)``); each goes by its key, the registered name
    (``NAME:LABEL`` for an instance given a ``label``). The run's settings are the keyword
    arguments of :class:`~contextlens.runner.config.RunConfig` (``judge``, ``embedder``,
    ``max_concurrency``, ``retry``, ``repeats``, ``cache``, ``out``, ``max_cost``,
    ``statistical_mode``, ``keep_results``, ``progress``), or a ready ``config=`` they are
    set over. A metric's own ``model=`` / ``judge=`` wins over the run's ``judge``. With
    ``out``, the run writes into its own ``out/<run id>/`` (the run's ``out_dir``)
    ``results.jsonl`` (as results come) and ``summary.json``, then points ``out/latest`` at
    it; a :class:`RunFolder` is written into but not completed.
    ``max_cost``: USD the run's judge calls may cost at most. A call that could pass it while
    others are in flight waits for them to settle (the metrics taking turns); once what is
    spent leaves too little for a call, that call is not sent, no new case is started, and
    the items not scored are ``not_run`` (the run's ``stopped`` says why). The cap counts
    what the run's ``accounting`` counts (see :mod:`contextlens.engine.budget`).
    ``triage``: for a metric with a triage band (faithfulness and context recall with
    their calibrated offline scorer), the offline scorer decides the items whose score is
    outside the band and only the rest go to the judge; each item's ``triage`` says who
    decided, each summary's ``triage`` what that saved (a metric without a band is judged
    as usual). A ValueError without a judge.
    ``dry_run``: make no judge call and return a
    :class:`~contextlens.runner.dry_run.CostEstimate` of the calls, tokens and cost the run
    would take, every case read and checked and every prompt built.
    ``executor``: where the cases are scored: None here, ``"ray"`` (or a
    ``contextlens.scale.ray.RayExecutor``) sharded over the workers of a Ray cluster,
    with the same results (a dry run is always made here).
    """
    run_config = RunConfig.of(config, **options)
    if dry_run:
        return run_sync(aevaluate(cases, metrics, config=run_config, dry_run=True))
    if executor is not None:
        return resolve_executor(executor).run(given_cases(cases), metrics, run_config)
    return run_sync(aevaluate(cases, metrics, config=run_config))
