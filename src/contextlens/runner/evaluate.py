"""``evaluate``: any mix of metrics over a stream of cases, on one engine.

Cases are consumed lazily, at most a bounded number in flight; each result is written to
``results.jsonl`` as soon as it is known, so memory stays flat and an interrupted run keeps
everything finished so far. Failed items are kept apart with their reasons and counted;
they never enter a mean as 0.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterable, Iterable, Iterator, Sequence, Sized
from contextlib import nullcontext
from datetime import datetime, timezone
from typing import Any

from typing_extensions import Unpack

from contextlens.engine.accounting import UNATTRIBUTED, Ledger, attribute
from contextlens.engine.cache import current_repeat, open_cache
from contextlens.engine.limiter import DEFAULT_LIMIT
from contextlens.results import EvalRun, ItemResult
from contextlens.runner.binding import BoundMetric, bind_metrics, checked_metrics
from contextlens.runner.checks import Case, CaseChecks, case_id
from contextlens.runner.config import RunConfig, RunOptions
from contextlens.runner.executor import Executor, resolve_executor
from contextlens.runner.folder import ResultSink, RunFolder
from contextlens.runner.progress import progress_bar
from contextlens.runner.summaries import Tally, failed_item, finish_run, item_of, merge_repeats
from contextlens.schemas import MetricKey
from contextlens.sync import run_sync

__all__ = ["OFFLINE_CASES_IN_FLIGHT", "aevaluate", "cases_in_flight", "evaluate", "score_item"]

#: Cases scored at once without a judge when the embedder batches concurrent calls.
OFFLINE_CASES_IN_FLIGHT = 512


async def _aiter(cases: Iterable[Any] | AsyncIterable[Any]) -> Any:
    if isinstance(cases, AsyncIterable):
        async for case in cases:
            yield case
    else:
        for case in cases:
            yield case


async def aevaluate(
    cases: Iterable[Any] | AsyncIterable[Any],
    metrics: Sequence[Any],
    *,
    config: RunConfig | None = None,
    **options: Unpack[RunOptions],
) -> EvalRun:
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
    )
    checks = CaseChecks(bound)
    if isinstance(cases, Sized) and not isinstance(cases, (Iterator, AsyncIterable)):
        cases = checks.all(cases)  # a bad case stops the run before its first judge call
    judged = [b for b in bound if b.services.judge is not None]
    repeats = run_config.repeats if judged else 1
    folder = run_config.folder
    keep = run_config.keep_results if run_config.keep_results is not None else folder is None
    ledger = Ledger()
    sink = ResultSink(folder.create() if folder is not None else None, keep_cases=keep)
    tallies = {b.key: Tally() for b in bound}
    kept: list[tuple[int, ItemResult]] = []
    total = len(cases) if isinstance(cases, Sized) else None
    progress = run_config.progress
    tick = progress if callable(progress) else None
    bar = None if callable(progress) else progress_bar(progress, total)
    cases_done = 0
    started, t0 = datetime.now(timezone.utc), time.perf_counter()

    async def one_metric(b: BoundMetric, case: Case, ident: str) -> ItemResult:
        start = time.perf_counter()
        try:
            runs = repeats if b.services.judge is not None else 1
            items = [await score_item(b, case, ident, r, ledger) for r in range(runs)]
            return merge_repeats(items)
        finally:
            tallies[b.key].seconds += time.perf_counter() - start

    async def one_case(case: Case, index: int) -> None:
        nonlocal cases_done
        ident = case_id(case, index)
        applicable = [b for b in bound if b.applies_to(case)]
        done = await asyncio.gather(*(one_metric(b, case, ident) for b in applicable))
        for item in done:
            sink.write(item)
            tallies[item.metric].add_item(index, item)
            if keep:
                kept.append((index, item))
        sink.write_case(ident, case)
        cases_done += 1
        if tick is not None:  # the run's ledger is current: the callback may read it
            with attribute(ledger, UNATTRIBUTED):
                tick(cases_done, total, time.perf_counter() - t0)
        if bar is not None:
            bar.advance(1, time.perf_counter() - t0, ledger.call_latency())

    window = asyncio.Semaphore(cases_in_flight(bound))
    tasks: set[asyncio.Task[None]] = set()

    async def guarded(case: Case, index: int) -> None:
        try:
            await one_case(case, index)
        finally:
            window.release()

    try:
        with bar if bar is not None else nullcontext():
            try:
                index = 0
                async for raw in _aiter(cases):
                    case = checks.one(raw, index)
                    await window.acquire()
                    task = asyncio.create_task(guarded(case, index))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                    index += 1
            finally:
                if tasks:  # what is under way finishes and is written before any error
                    await asyncio.gather(*tasks)
    finally:
        sink.close()

    return finish_run(
        bound,
        tallies,
        run_config,
        ledger,
        started=started,
        t0=t0,
        repeats=repeats,
        folder=folder,
        kept=kept,
        complete=not isinstance(run_config.out, RunFolder),  # a caller's own is theirs
        data_fingerprint=sink.fingerprint.hexdigest(),
    ).with_cases(sink.cases)


async def score_item(
    b: BoundMetric, case: Case, ident: str, repeat: int, ledger: Ledger
) -> ItemResult:
    """One metric on one case (one repeat): its result, or a failed item with the reason."""
    token = current_repeat.set(repeat)
    key: MetricKey = b.key
    try:
        with attribute(ledger, key, ident):
            result = await b.metric.score(case, b.services)
        return item_of(ident, key, b.judge_name, result)
    except Exception as exc:  # a failed item is recorded, never lost
        return failed_item(ident, key, b.judge_name, exc)
    finally:
        current_repeat.reset(token)


def cases_in_flight(bound: Sequence[BoundMetric]) -> int:
    """Cases scored at once: twice the judge calls allowed; offline with an embedder that
    batches concurrent calls, enough to make its batches large (small ones pad more and
    cost more per run)."""
    limits = [b.services.judge.max_connections() for b in bound if b.services.judge is not None]
    if not limits and all(
        getattr(b.services.embedder, "batches_concurrent_calls", False) for b in bound
    ):
        return OFFLINE_CASES_IN_FLIGHT
    return max(8, 2 * max(limits, default=DEFAULT_LIMIT))


def evaluate(
    cases: Iterable[Any],
    metrics: Sequence[Any],
    *,
    executor: str | Executor | None = None,
    config: RunConfig | None = None,
    **options: Unpack[RunOptions],
) -> EvalRun:
    """Evaluate ``cases`` (sessions for ``context``, test cases for the others) with
    ``metrics`` and return an :class:`EvalRun`.

    Each case must have a unique id (a test case's ``name``, a session's ``session_id``)
    and the fields each of its metrics ``requires``; an :class:`InputError` names the case
    (its index) otherwise. A list, or any sized collection, is checked whole before the
    first judge call; an iterator is checked as it is consumed, and what was under way when
    a bad case came finishes and is written first.

    ``metrics``: metric names (``"context-precision"``), metric objects, or the seed metric
    classes (``ContextPrecision(model=...)``); each goes by its key, the registered name
    (``NAME:LABEL`` for an instance given a ``label``). The run's settings are the keyword
    arguments of :class:`~contextlens.runner.config.RunConfig` (``judge``, ``embedder``,
    ``max_concurrency``, ``retry``, ``repeats``, ``cache``, ``out``, ``statistical_mode``,
    ``keep_results``, ``progress``), or a ready ``config=`` they are set over. A metric's
    own ``model=`` / ``judge=`` wins over the run's ``judge``. With ``out``, the run writes
    into its own ``out/<run id>/`` (the run's ``out_dir``) ``results.jsonl`` (as results
    come) and ``summary.json``, then points ``out/latest`` at it; a :class:`RunFolder` is
    written into but not completed.
    ``executor``: where the cases are scored: None here, ``"ray"`` (or a
    ``contextlens.scale.ray.RayExecutor``) sharded over the workers of a Ray cluster,
    with the same results.
    """
    run_config = RunConfig.of(config, **options)
    if executor is not None:
        return resolve_executor(executor).run(cases, metrics, run_config)
    return run_sync(aevaluate(cases, metrics, config=run_config))
